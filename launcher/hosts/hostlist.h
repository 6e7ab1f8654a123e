/* Hostlist expansion helpers shared by the hostfile parser (hostlist_expand itself is
 * declared in hostfile.h, its public home). */
#ifndef DDPTOP_HOSTLIST_H
#define DDPTOP_HOSTLIST_H

#include <stdbool.h>
#include <stddef.h>

/* A typo such as gpu[1-1000000] must not allocate a million hosts; no cluster we know of is
 * near this, and it bounds the parser's memory and time under fuzzing. */
#define HOSTS_MAX      100000

/* Writes the message to err (when there is room) and returns -1: the parser's error path. */
int hostfile_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool is_digits(const char *s, size_t n);
unsigned long digits_value(const char *s, size_t n);
/* 0 when expr is a well-formed hostlist expression, else -1 with a message in err. */
int hostlist_validate(const char *expr, char *err, size_t errlen);
void hostlist_names_free(char **names, int n);

#endif
