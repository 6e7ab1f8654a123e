/* Internals shared by the readers of host lists: the hostfile parser (hostfile.c), the
 * scheduler node lists (hostfile_sched.c) and the host table they all fill
 * (hostfile_build.c: duplicates, name checks, sealing). Not for other modules: they use
 * hostfile.h. */
#ifndef DDPTOP_HOSTFILE_INT_H
#define DDPTOP_HOSTFILE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "hostfile.h"

#define SLOTS_MAX      65535

/* What one hostfile line (or one scheduler entry) says about its hosts. */
struct line_spec {
    char *user, *expr, *identity;
    bool ipv6;
    int port, slots;
    struct host_env *env;
    size_t n_env;
};

struct host_index { size_t *slot; size_t cap; };     /* open addressing; slot = index + 1 */

/* A host list being built: the hosts so far and the index that finds duplicates. */
struct hostfile_parser {
    const char *source;
    struct hostlist hl;
    size_t cap;
    struct host_index ix;
};

/* Writes the message to err (when there is room) and returns -1: every reader's error path. */
int hostfile_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* [A-Za-z0-9._-] */
bool hostfile_is_name_char(char c);
/* A host or user name (what: "host name", "user") as ssh may be given it, or -1 and why. */
int hostfile_name_check(const char *what, const char *s, char *err, size_t errlen);
/* A whole file as a NUL-terminated buffer (malloc'd), or NULL with "PATH: ...WHAT" in err. */
char *hostfile_slurp(const char *path, const char *what, char *err, size_t errlen);

/* The index of the host called name on port (0: 22) so far, or SIZE_MAX. */
size_t hostfile_parser_find(const struct hostfile_parser *ps, const char *name, int port);
/* Adds one host; on a duplicate, adds nothing and returns the index of the first one
 * (SIZE_MAX when it was added). */
size_t hostfile_parser_add(struct hostfile_parser *ps, const char *name, const struct line_spec *ls, int line);
/* Adds the hosts of a spec (its names expanded); errors come without the FILE:LINE prefix. */
int hostfile_parser_add_spec(struct hostfile_parser *ps, const struct line_spec *ls, int line,
                             char *err, size_t errlen);
/* Hands the hosts to *out (their source set), or frees them when out is NULL. */
void hostfile_parser_done(struct hostfile_parser *ps, struct hostlist *out);

#endif
