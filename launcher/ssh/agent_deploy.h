/* Deploying ddptop-agent on a node through anything that can run a command there and carry
 * its stdin and stdout: an SSH exec channel (ssh_deploy.c), or a child process such as
 * `kubectl exec -i POD -- sh -c CMD` (transport_exec.c, for any kind that can exec). Two
 * commands, both for a POSIX sh on the node, both taking every value single-quoted:
 *
 *  - the probe (agent_probe.c) picks the agent of the node's `uname -m` among this machine's
 *    (agent_kit.h), refuses a node whose glibc is too old or whose --agent-dir others could
 *    write, and execs the agent when a copy of our hash is there; else it says where it is
 *    absent, and the caller uploads it;
 *  - the upload (agent_upload.c) reads the agent's bytes on its stdin into a private temporary
 *    name, checks them with the node's sha256sum and only then renames them into place.
 *
 * What each one says back is read here into a verdict with the messages users see, so every
 * kind that deploys says the same things. No I/O but reading the local agent file. */
#ifndef DDPTOP_AGENT_DEPLOY_H
#define DDPTOP_AGENT_DEPLOY_H

#include <stdbool.h>
#include <stddef.h>

struct agent_kit_entry;
struct strbuf;

/* ---- the probe (agent_probe.c) ---------------------------------------------------------- */

/* The probe's command: it picks the agent whose arch is the node's `uname -m` (none:
 * "ddptop-probe ARCH noagent"); refuses a node whose glibc (getconf GNU_LIBC_VERSION) is older
 * than that agent's glibc ("ddptop-probe ARCH oldlibc NODE_GLIBC AGENT_GLIBC"); refuses an
 * --agent-dir that is a symbolic link, not the user's (or root's), or writable by group or
 * others, and a parent of it that others could rename it out of, printing "ddptop-probe ARCH
 * unsafe WHICH KIND VALUE PATH" (WHICH dir|parent, KIND link|owner|mode|unknown) before
 * anything runs; it execs dir/name when that file belongs to the user (or root) and, where the
 * node has sha256sum, hashes to its sha256 (empty or NULL: not checked); else it creates dir
 * (umask 077) and prints "ddptop-probe ARCH absent DIR" (DIR expanded). A login shell or `sh
 * -c` runs it ("exec sh -c '...'": the login shell may be csh or fish). malloc'd. */
struct agent_probe_agent {
    const char *arch, *name;
    const char *sha256;                    /* lower-case hex, or NULL */
    const char *glibc;                     /* "2.27": the newest it needs; NULL or "": not checked */
};
struct agent_probe {
    const char *dir;
    const struct agent_probe_agent *agents;
    size_t n_agents;
    const char *arg;                       /* one argument of the agent (e.g. "--attach"), or NULL */
};
char *agent_probe_script(const struct agent_probe *p);
/* The probe for this machine's agents (agent_kit_get(agent_local)) in agent_dir (NULL:
 * AGENT_REMOTE_DIR); arg as above. Call it on the loop's thread (the kit is read once). */
char *agent_probe_for_kit(const char *agent_local, const char *agent_dir, const char *arg);
/* The same for one agent without hash, glibc or argument. Exposed for tests; malloc'd. */
char *agent_probe_command(const char *agent_dir, const char *agent_name, const char *arch);

enum agent_probe_said {
    PROBE_AGENT,    /* not the probe's words: the agent runs, and this is its first line */
    PROBE_ABSENT,   /* no copy of ours there: upload `agent` to `dir`, then probe again */
    PROBE_REFUSED,  /* nothing was run: `error` and `hint` say why and what to do */
};
struct agent_probe_reply {
    enum agent_probe_said said;
    const struct agent_kit_entry *agent;   /* ABSENT: the one for the node's architecture */
    char *dir;                             /* ABSENT: the agent directory, expanded on the node */
    char *error, *hint;                    /* REFUSED */
};
/* The first line the probe's command wrote, on node `node` (for messages). uploaded: this
 * node was given the agent already, so its absence now means it cannot run from there. */
void agent_probe_read(const char *line, const char *node, const char *agent_local, bool uploaded,
                      struct agent_probe_reply *r);
void agent_probe_reply_done(struct agent_probe_reply *r);

/* ---- the upload (agent_upload.c) --------------------------------------------------------- */

/* The command that installs one file sent on its stdin: it reads it into a private temporary
 * name in dir (umask 077, mkdir -p dir), checks its SHA-256 with the node's sha256sum against
 * sha256_hex, sets mode, and renames it to dir/name; on any failure the temporary file is
 * removed and stdin is read to its end. Its last output line is "ddptop-upload ok",
 * "ddptop-upload no-sha256sum", "ddptop-upload mismatch HEX" or "ddptop-upload failed" (the
 * shell's own error lines before it). malloc'd. */
char *agent_upload_command(const char *dir, const char *name, const char *sha256_hex, unsigned mode);
/* The whole local file into data (bounded: an agent is a few MiB) and its SHA-256 in hex, so
 * the bytes hashed are the bytes sent. 0, or -1 with errno. */
int agent_upload_load(const char *path, struct strbuf *data, char hex[65]);
/* NULL when got_hex is want_hex (the hash the agent's name and the probe carry; NULL or "":
 * not checked), else the error for node (the local file changed since ddptop started). */
char *agent_upload_changed(const char *local, const char *got_hex, const char *want_hex, const char *node);
/* What the upload command wrote (out: its stdout, err: anything else it said) and its exit
 * status: NULL when it installed the file, else the error, with *hint set to what to do
 * (malloc'd; NULL: the caller's generic hint). */
char *agent_upload_verdict(const struct strbuf *out, const struct strbuf *err, int status, const char *node,
                           const char *dir, const char *name, const char *hex, char **hint);
/* Appends what a command wrote to a tail kept for messages (its last 4 KiB). */
void agent_upload_tail(struct strbuf *sb, const char *buf, size_t n);

#endif
