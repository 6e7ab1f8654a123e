/* python3's and torch's versions for the facts, read from what is installed instead of
 * starting python3 on every node (issue 22): the interpreter `python3` on PATH would run (a
 * pyenv shim followed to the version it selects), its version from the executable's own
 * version string, torch's from torch/version.py in the directories its sys.path would search.
 * Where the files do not tell, the caller runs the python3 probe as before (agent_facts.c).
 * docs/protocol.md ("facts") says which files and in what order. */
#ifndef DDPTOP_AGENT_PYVER_H
#define DDPTOP_AGENT_PYVER_H

#include <stdbool.h>

struct agent_pyver {
    char *python3;      /* "3.11.2", or NULL: no python3 on PATH (or probe) */
    char *torch;        /* torch.__version__, or NULL (none found, or probe) */
    bool probe;         /* the files could not tell: run the python3 probe */
    const char *why;    /* why the probe is needed (static text) */
    char *exe;          /* the interpreter found (not resolved through links); NULL: none */
    /* What the answer depends on: every file and variable read, with each file's stat
     * signature (device, inode, size, mtime, ctime). NULL: not to be cached (python3 is a
     * wrapper we cannot follow, PYTHONHOME is set). Built afresh on every call: that is what
     * lets a cached answer notice a changed install. */
    char *key;
    /* where the versions are read (agent_pyver_read) */
    char *real, *prefix, *torch_file;
    char xy[16];        /* "3.11" */
};

/* Finds the interpreter, its installation and the torch it would import, and builds the key;
 * cheap (stats and small files): reads no version yet, so that a cached answer for the same
 * key can be used instead. No process is started. agent_pyver_done frees. */
void agent_pyver_locate(struct agent_pyver *pv);
/* Reads the versions where locate found them (the executable's 5-30 MB scanned for its
 * version string); sets probe when they cannot be read. */
void agent_pyver_read(struct agent_pyver *pv);
void agent_pyver_done(struct agent_pyver *pv);

/* The version string inside a python executable or libpython (NUL, "X.Y.Z[suffix]", NUL;
 * minor: the X.Y the file's name says, or NULL for any 3.Y): its numeric part ("3.13.0" of
 * "3.13.0rc1") when exactly one distinct version is found in its first 256 MiB, else NULL.
 * Exposed for tests. */
char *agent_pyver_scan_file(const char *path, const char *minor);

/* __version__ of a torch/version.py ("__version__ = '2.1.2'", first 16 KiB), or NULL. */
char *agent_pyver_torch_file(const char *path);

#endif
