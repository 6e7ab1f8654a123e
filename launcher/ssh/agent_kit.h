/* The agents ddptop can start on nodes, one per architecture (docs/check.md, "Which nodes"):
 * `ddptop-agent-ARCH` beside this machine's `ddptop-agent` (build/, or libexec/ddptop/ when
 * installed), ARCH in `uname -m`'s words; this machine's own `ddptop-agent` stands for its
 * architecture when there is no file of that name. Each is hashed (its remote name carries
 * the hash: a rebuilt agent is uploaded again) and read for the architecture it is built for
 * and the newest glibc it asks for (util/elf_needs.h), so a node is given the agent its
 * `uname -m` names and refused, with the reason, when its glibc is older. */
#ifndef DDPTOP_SSH_AGENT_KIT_H
#define DDPTOP_SSH_AGENT_KIT_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf;

struct agent_kit_entry {
    char arch[16];          /* `uname -m` of the nodes it is for */
    char *path;             /* the local file */
    char sha256[65];        /* "" when it cannot be read */
    char *remote_name;      /* ddptop-agent-VERSION-pPROTOCOL-ARCH-SHA16 */
    int glibc_major, glibc_minor; /* the newest GLIBC_ version it needs (0.0: none) */
    char glibc[16];         /* the same as text, "2.27" ("" for none) */
};

struct agent_kit {
    struct agent_kit_entry *e;
    size_t n;
    char *native;           /* this machine's ddptop-agent, as given */
    char *skipped;          /* files named like an agent but not usable, and why; NULL: none */
};

/* The kit around local (this machine's ddptop-agent; NULL: none). Read once per process and
 * kept (a thousand nodes do not hash the same files a thousand times); read again when local
 * differs. Call it on the loop's thread before an upload thread starts: those only read it. */
const struct agent_kit *agent_kit_get(const char *local);
/* The agent for arch, or NULL. */
const struct agent_kit_entry *agent_kit_find(const struct agent_kit *k, const char *arch);
/* "x86_64 and aarch64", "x86_64", or "none" (for messages). */
void agent_kit_arches(const struct agent_kit *k, struct strbuf *out);
/* This machine's architecture (uname -m). */
const char *agent_kit_host_arch(void);

/* Exposed for tests: the kit in a directory; local is a file there (or absent). */
struct agent_kit *agent_kit_load(const char *local);
void agent_kit_free(struct agent_kit *k);

#endif
