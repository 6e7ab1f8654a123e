/* Hostlist expressions as Slurm writes them ("gpu[01-04,07]", "a[1-2]b[3-4]", "node1"):
 * checking and expanding them into host names. Used by the hostfile parser and by --slurm;
 * knows nothing of hosts or hostfiles. */
#ifndef DDPTOP_HOSTLIST_H
#define DDPTOP_HOSTLIST_H

#include <stdbool.h>
#include <stddef.h>

/* A typo such as gpu[1-1000000] must not allocate a million hosts; no cluster we know of is
 * near this, and it bounds the parser's memory and time under fuzzing. */
#define HOSTS_MAX      100000

/* Expands one hostlist expression into names. Zero padding is kept. Returns the count (names
 * malloc'd, free with hostlist_names_free), or -1 with a message in err. */
int hostlist_expand(const char *expr, char ***names, char *err, size_t errlen);
/* Decimal digits only, at least one; their value (no overflow check: callers bound n). */
bool is_digits(const char *s, size_t n);
unsigned long digits_value(const char *s, size_t n);
/* 0 when expr is a well-formed hostlist expression, else -1 with a message in err. */
int hostlist_validate(const char *expr, char *err, size_t errlen);
void hostlist_names_free(char **names, int n);

/* The other direction: names -> one Slurm-style list, short enough to read in a report line
 * ("n[001-255,257],gpu[1-4]"). Each name's last run of digits is the number; names with the
 * same text around it share one bracket group (zero padding kept, consecutive numbers as
 * ranges); groups appear in the order of their first name, joined with commas. Duplicates
 * count once. Names with '[', ']' or ',' are not hostnames and are copied as they are.
 * Always returns a malloc'd string ("" for none). hostlist_expand_list reads it back. */
char *hostlist_compress(const char *const *names, size_t n);
/* Comma-joined hostlist expressions, as SLURM_JOB_NODELIST and hostlist_compress write them
 * ("n[1-2],gpu[01-04]"): all their names in order (count returned, free with
 * hostlist_names_free), or -1 with a message in err. */
int hostlist_expand_list(const char *list, char ***names, char *err, size_t errlen);

#endif
