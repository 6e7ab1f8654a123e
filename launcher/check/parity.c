/* Parity of one fact across nodes (see parity.h): group the hosts by value and describe the
 * odd ones out against the majority in one line a person can act on.
 *
 * parity_describe's format, minority groups first, the majority last by count:
 *   one odd host        "gpu3: 2.18.1; 15 others: 2.19.4"
 *   two in one group    "gpu3, gpu7: 2.18.1; 14 others: 2.19.4"
 *   a big minority      "gpu3, gpu7, gpu9 +2 more: 2.18.1; 11 others: 2.19.4"
 *   three or more values: every minority group in the order of parity_group (largest first,
 *   ties by first host), at most 4 of them, then a count of the rest:
 *                       "gpu3: 2.18.1; gpu5: unknown; 2 more hosts with 2 other values;
 *                        12 others: 2.19.4"
 * The "majority" is the largest group; on a tie, the one holding the first host (the host
 * that rank 0 runs on), which is the natural reference. Unknown values read "unknown", an
 * empty one "(empty)"; remote bytes are made printable and long values shortened. */
#include "parity.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define NAMES_SHOWN   3
#define GROUPS_SHOWN  4
#define VALUE_SHOWN   80

struct entry { const char *value; size_t host; };

/* NULL (unknown) sorts after every value; equal values keep host order. */
static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->value != y->value) {
        if (!x->value) return 1;
        if (!y->value) return -1;
        int c = strcmp(x->value, y->value);
        if (c) return c;
    }
    return x->host < y->host ? -1 : x->host > y->host;
}

static int group_cmp(const void *a, const void *b)
{
    const struct parity_group *x = a, *y = b;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;
    return x->hosts[0] < y->hosts[0] ? -1 : x->hosts[0] > y->hosts[0];
}

static bool same_value(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

size_t parity_group(const char *const *values, size_t n, struct parity_group **out)
{
    *out = NULL;
    if (n == 0) return 0;
    /* Sorting keeps this O(n log n) for thousands of hosts that all differ. */
    struct entry *e = xmalloc(n * sizeof *e);
    for (size_t i = 0; i < n; i++) {
        e[i].value = values[i];
        e[i].host = i;
    }
    qsort(e, n, sizeof *e, entry_cmp);
    struct parity_group *g = NULL;
    size_t n_groups = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && same_value(e[j].value, e[i].value)) j++;
        g = xrealloc(g, (n_groups + 1) * sizeof *g);
        g[n_groups].value = e[i].value;
        g[n_groups].n = j - i;
        g[n_groups].hosts = xmalloc((j - i) * sizeof *g[n_groups].hosts);
        for (size_t k = i; k < j; k++) g[n_groups].hosts[k - i] = e[k].host;
        n_groups++;
        i = j;
    }
    free(e);
    qsort(g, n_groups, sizeof *g, group_cmp);
    *out = g;
    return n_groups;
}

void parity_groups_free(struct parity_group *g, size_t n_groups)
{
    for (size_t i = 0; g && i < n_groups; i++) free(g[i].hosts);
    free(g);
}

/* Remote text, made safe for a terminal: control bytes become '?', long text is cut. */
static void add_printable(struct strbuf *sb, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n && i < VALUE_SHOWN; i++) {
        unsigned char c = (unsigned char)s[i];
        char out = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
        strbuf_add(sb, &out, 1);
    }
    if (n > VALUE_SHOWN) strbuf_adds(sb, "...");
}

static void add_value(struct strbuf *sb, const char *v)
{
    if (!v) strbuf_adds(sb, "unknown");
    else if (!*v) strbuf_adds(sb, "(empty)");
    else add_printable(sb, v);
}

static void add_group(struct strbuf *sb, const char *const *names, const struct parity_group *g)
{
    for (size_t k = 0; k < g->n && k < NAMES_SHOWN; k++) {
        if (k) strbuf_adds(sb, ", ");
        const char *name = names ? names[g->hosts[k]] : NULL;
        if (name) add_printable(sb, name);
        else strbuf_addf(sb, "host %zu", g->hosts[k]);
    }
    if (g->n > NAMES_SHOWN) strbuf_addf(sb, " +%zu more", g->n - NAMES_SHOWN);
    strbuf_adds(sb, ": ");
    add_value(sb, g->value);
}

char *parity_describe(const char *const *names, const char *const *values, size_t n)
{
    struct parity_group *g;
    size_t n_groups = parity_group(values, n, &g);
    if (n_groups <= 1) {
        parity_groups_free(g, n_groups);
        return NULL;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    size_t shown = n_groups - 1 > GROUPS_SHOWN ? GROUPS_SHOWN : n_groups - 1;
    for (size_t i = 1; i <= shown; i++) {
        add_group(&sb, names, &g[i]);
        strbuf_adds(&sb, "; ");
    }
    if (n_groups - 1 > shown) {
        size_t hosts = 0;
        for (size_t i = shown + 1; i < n_groups; i++) hosts += g[i].n;
        strbuf_addf(&sb, "%zu more host%s with %zu other value%s; ", hosts,
                    hosts == 1 ? "" : "s", n_groups - 1 - shown,
                    n_groups - 1 - shown == 1 ? "" : "s");
    }
    strbuf_addf(&sb, "%zu other%s: ", g[0].n, g[0].n == 1 ? "" : "s");
    add_value(&sb, g[0].value);
    parity_groups_free(g, n_groups);
    return sb.buf;
}
