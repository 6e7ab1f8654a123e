/* Names -> one Slurm-style hostlist ("n[001-255,257],gpu[1-4]"), for reports that fold many
 * nodes into one line (issue 19), and the comma-joined lists it writes read back. The rule
 * that keeps the round trip exact is zero padding: hostlist_expand prints a bracket item with
 * the width of its zero-padded bound, or with none. So a number is put in a padded class of
 * width L when it is written with a leading zero (or has L digits while padded ones of L
 * digits exist: "098-102" is 098..102), else in the unpadded class, where 9-10-11 may run
 * across widths. Only numbers of one class form a range. See hostlist.h. */
#include "hostlist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define NUM_DIGITS_MAX 9            /* as hostlist.c's ranges: fits an unsigned long */

struct entry {
    const char *name;
    size_t idx;                     /* position in the input: groups keep the first one's order */
    size_t pre_len;                 /* text before the number (the whole name when none) */
    const char *suf;                /* text after the number; NULL: no number, a literal */
    size_t dig_len;
    unsigned long v;
    int cls;                        /* 0 unpadded, else the padded width */
};

static int cmp_text(const struct entry *a, const struct entry *b)
{
    size_t n = a->pre_len < b->pre_len ? a->pre_len : b->pre_len;
    int c = memcmp(a->name, b->name, n);
    if (c) return c;
    if (a->pre_len != b->pre_len) return a->pre_len < b->pre_len ? -1 : 1;
    if (!a->suf || !b->suf) return (a->suf != NULL) - (b->suf != NULL);
    return strcmp(a->suf, b->suf);
}

/* Groups together, then by class and value: the runs of a class are then adjacent. */
static int cmp_entry(const void *pa, const void *pb)
{
    const struct entry *a = pa, *b = pb;
    int c = cmp_text(a, b);
    if (c) return c;
    if (a->cls != b->cls) return a->cls < b->cls ? -1 : 1;
    if (a->v != b->v) return a->v < b->v ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static void entry_split(struct entry *e, const char *name, size_t idx)
{
    size_t len = strlen(name), end = len, start;
    memset(e, 0, sizeof *e);
    e->name = name;
    e->idx = idx;
    e->pre_len = len;
    if (strpbrk(name, "[],")) return;           /* not a hostname: copied as it is */
    while (end > 0 && !(name[end - 1] >= '0' && name[end - 1] <= '9')) end--;
    for (start = end; start > 0 && name[start - 1] >= '0' && name[start - 1] <= '9'; start--) {}
    if (end == start || end - start > NUM_DIGITS_MAX) return;
    e->pre_len = start;
    e->suf = name + end;
    e->dig_len = end - start;
    e->v = digits_value(name + start, e->dig_len);
    e->cls = e->dig_len > 1 && name[start] == '0' ? (int)e->dig_len : 0;
}

struct item { unsigned long lo, hi; int cls; };

static int cmp_item(const void *pa, const void *pb)
{
    const struct item *a = pa, *b = pb;
    if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
    return (a->cls > b->cls) - (a->cls < b->cls);
}

/* One group (same text around the number): e[0..n) sorted by cmp_entry. */
static void group_write(struct strbuf *sb, struct entry *e, size_t n)
{
    unsigned padded = 0;                        /* bit L: a zero-padded number of L digits */
    for (size_t i = 0; i < n; i++)
        if (e[i].cls) padded |= 1u << e[i].cls;
    for (size_t i = 0; i < n; i++)
        if (!e[i].cls && (padded & (1u << e[i].dig_len))) e[i].cls = (int)e[i].dig_len;
    qsort(e, n, sizeof *e, cmp_entry);
    struct item *it = xcalloc(n, sizeof *it);
    size_t n_it = 0;
    for (size_t i = 0; i < n; i++) {
        struct item *last = n_it ? &it[n_it - 1] : NULL;
        if (last && last->cls == e[i].cls && e[i].v <= last->hi + 1) {
            if (e[i].v > last->hi) last->hi = e[i].v;   /* equal: a duplicate name */
            continue;
        }
        it[n_it++] = (struct item){e[i].v, e[i].v, e[i].cls};
    }
    strbuf_add(sb, e[0].name, e[0].pre_len);
    if (n_it == 1 && it[0].lo == it[0].hi) {    /* one name: itself, no brackets */
        strbuf_addf(sb, "%0*lu%s", it[0].cls, it[0].lo, e[0].suf);
        free(it);
        return;
    }
    qsort(it, n_it, sizeof *it, cmp_item);
    strbuf_adds(sb, "[");
    for (size_t i = 0; i < n_it; i++) {
        strbuf_addf(sb, "%s%0*lu", i ? "," : "", it[i].cls, it[i].lo);
        if (it[i].hi != it[i].lo) strbuf_addf(sb, "-%0*lu", it[i].cls, it[i].hi);
    }
    strbuf_addf(sb, "]%s", e[0].suf);
    free(it);
}

struct span { size_t start, n, first; };

static int cmp_span(const void *pa, const void *pb)
{
    const struct span *a = pa, *b = pb;
    return (a->first > b->first) - (a->first < b->first);
}

char *hostlist_compress(const char *const *names, size_t n)
{
    struct entry *e = xcalloc(n ? n : 1, sizeof *e);
    struct span *sp = xcalloc(n ? n : 1, sizeof *sp);
    size_t n_sp = 0;
    struct strbuf sb;
    for (size_t i = 0; i < n; i++) entry_split(&e[i], names[i] ? names[i] : "", i);
    qsort(e, n, sizeof *e, cmp_entry);
    for (size_t i = 0; i < n; i++) {
        if (n_sp && cmp_text(&e[sp[n_sp - 1].start], &e[i]) == 0) {
            struct span *s = &sp[n_sp - 1];
            s->n++;
            if (e[i].idx < s->first) s->first = e[i].idx;
            continue;
        }
        sp[n_sp++] = (struct span){i, 1, e[i].idx};
    }
    qsort(sp, n_sp, sizeof *sp, cmp_span);
    strbuf_init(&sb);
    for (size_t k = 0; k < n_sp; k++) {
        if (!e[sp[k].start].name[0]) continue;    /* an empty name is no host */
        if (sb.len) strbuf_adds(&sb, ",");
        if (!e[sp[k].start].suf) strbuf_adds(&sb, e[sp[k].start].name); /* same literal: once */
        else group_write(&sb, &e[sp[k].start], sp[k].n);
    }
    free(e);
    free(sp);
    return sb.buf ? sb.buf : xstrdup("");
}

int hostlist_expand_list(const char *list, char ***names, char *err, size_t errlen)
{
    char **all = NULL;
    int n_all = 0;
    *names = NULL;
    for (const char *p = list ? list : ""; *p;) {
        size_t len = 0;
        int depth = 0;
        while (p[len] && (p[len] != ',' || depth > 0)) {
            depth += p[len] == '[' ? 1 : p[len] == ']' ? -1 : 0;
            len++;
        }
        char *expr = xstrndup(p, len), **one;
        int k = hostlist_expand(expr, &one, err, errlen);
        free(expr);
        if (k < 0 || (long)n_all + k > HOSTS_MAX) {
            if (k >= 0) {
                snprintf(err, errlen, "%s expands to more than %d hosts", list, HOSTS_MAX);
                hostlist_names_free(one, k);
            }
            hostlist_names_free(all, n_all);
            return -1;
        }
        all = xrealloc(all, ((size_t)n_all + (size_t)k + 1) * sizeof *all);
        memcpy(all + n_all, one, (size_t)k * sizeof *one);
        n_all += k;
        free(one);
        p += len;
        if (*p == ',') p++;
    }
    *names = all ? all : xcalloc(1, sizeof *all);
    return n_all;
}
