/* The agent's files on its node (docs/protocol.md, "Files on the node"). Other users have
 * shells there and /tmp is theirs too: a predictable name in a shared directory can be taken
 * first (a FIFO that hangs the reader, a link that makes the agent copy a private file into a
 * log others read). So everything the agent makes lives in directories of its user alone:
 * DIR/ddptop-UID (0700, ours, not a link) for the first usable DIR of $TMPDIR, /tmp, /dev/shm,
 * with the bridges' sockets in .../agents (agent_sock.h) and one private directory per agent
 * (mkdtemp) in .../runs for the ranks' error files, removed when the agent ends. Every file
 * read back from there is opened without following a link and without blocking, and must be a
 * regular file of ours: a rank may still have put anything at its own path. */
#ifndef DDPTOP_AGENT_NODEDIR_H
#define DDPTOP_AGENT_NODEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* The candidates DIR/ddptop-UID/leaf, in order of preference (NULL-terminated, malloc'd
 * strings in a malloc'd array; free with agent_nodedir_free). */
char **agent_nodedir_bases(const char *leaf);
void agent_nodedir_free(char **v);
/* dir and its parent are ours alone: made 0700 when missing, a lax mode of ours tightened;
 * false with why filled when either is not a directory, is a link or belongs to someone else. */
bool agent_nodedir_private(const char *dir, char *why, size_t whylen);
/* The one check of a directory of ours on the node (its private directories here, a rank's
 * flight recorder directory in agent_files.c): a real directory (not a link), owned by us, with
 * none of the mode bits lax (077: no access for others; 022: no writing, but a group-writable
 * directory of the user's private group passes, as in the --agent-dir probe). tighten: a mode of
 * ours with lax bits is fixed (fchmod) rather than refused. false with why filled, in words
 * that follow the directory's name ("belongs to uid 65534, not to us (uid 1000)"). */
bool agent_nodedir_ours(const char *dir, unsigned lax, bool tighten, char *why, size_t whylen);

/* This agent's own directory (made on the first call, 0700, a fresh name each agent), or NULL
 * with err filled saying why no candidate was usable (the same answer on later calls). */
const char *agent_nodedir_own(char *err, size_t errlen);
/* Removes the agent's directory and what its ranks left in it (one level; the agent ends). */
void agent_nodedir_remove(void);

/* Reads at most cap bytes of path into out, when it is a regular file of ours (opened with
 * O_NOFOLLOW | O_NONBLOCK, so neither a link nor a FIFO gets through or blocks) last changed at
 * or after not_before_ns (wall clock; 0: any). 1: read; 0: absent or older; -1: refused or
 * unreadable, with why filled ("is not a regular file of ours (a FIFO)", ...). */
int agent_nodedir_read(const char *path, struct strbuf *out, size_t cap, int64_t not_before_ns,
                       char *why, size_t whylen);

#endif
