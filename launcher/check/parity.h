/* Parity across nodes: group one fact's per-host values and name the odd hosts out against
 * the majority, e.g. "gpu3: 2.18.1; 15 others: 2.19.4". */
#ifndef DDPTOP_PARITY_H
#define DDPTOP_PARITY_H

#include <stddef.h>

struct parity_group {
    const char *value;       /* NULL groups the hosts where the fact is unknown */
    size_t *hosts;           /* indexes into the caller's arrays, ascending */
    size_t n;
};

/* Groups values[0..n); the largest group first (ties: the group whose first host comes first).
 * Returns the number of groups; *out is malloc'd, free with parity_groups_free. */
size_t parity_group(const char *const *values, size_t n, struct parity_group **out);
void parity_groups_free(struct parity_group *g, size_t n_groups);

/* NULL when all hosts agree; else a malloc'd one-line description naming the minority hosts
 * (at most 3 names, then "+N more") and the majority by count. names[i] is host i's name. */
char *parity_describe(const char *const *names, const char *const *values, size_t n);

#endif
