/* Hostlist expressions as Slurm writes them: gpu[01-04,07], a[1-2]b[3-4]. Zero padding is
 * kept, ranges go low-high, and the expansion is capped so a typo cannot allocate millions of
 * names. Used by the hostfile parser and by --slurm. */
#include "hostlist.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define RANGE_DIGITS   9               /* fits an unsigned long everywhere */

/* Writes the message to err (when there is room) and returns -1. */
static int expr_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int expr_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

struct range { unsigned long lo, hi; int width; };
struct part {                       /* literal text, then an optional bracket group */
    const char *lit; size_t lit_len;
    struct range *r; size_t n_r;
};

bool is_digits(const char *s, size_t n)
{
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

unsigned long digits_value(const char *s, size_t n)
{
    unsigned long v = 0;
    for (size_t i = 0; i < n; i++) v = v * 10 + (unsigned long)(s[i] - '0');
    return v;
}

/* One comma item of a bracket group: "7", "07", "1-4" or "01-04". */
static int range_parse(const char *item, size_t n, const char *expr, struct range *r,
                       char *err, size_t errlen)
{
    const char *dash = memchr(item, '-', n);
    size_t lo_n = dash ? (size_t)(dash - item) : n;
    const char *hi = dash ? dash + 1 : item;
    size_t hi_n = dash ? n - lo_n - 1 : n;
    if (!is_digits(item, lo_n) || !is_digits(hi, hi_n))
        return expr_fail(err, errlen, "bad range [%.*s] in %s (ranges are decimal numbers, "
                    "e.g. [1-4] or [01-04,07])", (int)n, item, expr);
    if (lo_n > RANGE_DIGITS || hi_n > RANGE_DIGITS)
        return expr_fail(err, errlen, "bad range [%.*s] in %s (numbers have at most %d digits)",
                    (int)n, item, expr, RANGE_DIGITS);
    bool lo_pad = lo_n > 1 && item[0] == '0', hi_pad = hi_n > 1 && hi[0] == '0';
    if ((lo_pad || hi_pad) && lo_n != hi_n)
        return expr_fail(err, errlen, "bad range [%.*s] in %s (zero-padded bounds need the same "
                    "width, e.g. [001-100])", (int)n, item, expr);
    r->lo = digits_value(item, lo_n);
    r->hi = digits_value(hi, hi_n);
    r->width = lo_pad ? (int)lo_n : 0;
    if (r->lo > r->hi)
        return expr_fail(err, errlen, "bad range [%.*s] in %s (ranges go low-high)", (int)n, item,
                    expr);
    return 0;
}

static void parts_free(struct part *p, size_t n)
{
    for (size_t i = 0; i < n; i++) free(p[i].r);
    free(p);
}

/* Splits expr into parts; returns the number of names it expands to (capped) or -1. */
static long hostlist_split(const char *expr, struct part **out, size_t *n_out, char *err,
                           size_t errlen)
{
    struct part *parts = NULL;
    size_t n = 0;
    unsigned long long total = 1;
    const char *p = expr;
    *out = NULL;
    *n_out = 0;
    while (*p) {
        parts = xrealloc(parts, (n + 1) * sizeof *parts);
        struct part *pt = &parts[n++];
        memset(pt, 0, sizeof *pt);
        pt->lit = p;
        pt->lit_len = strcspn(p, "[]");
        p += pt->lit_len;
        if (*p == ']') {
            expr_fail(err, errlen, "unmatched ']' in %s (hostlists look like gpu[01-04,07])", expr);
            goto bad;
        }
        if (*p != '[') break;
        p++;
        const char *close = p + strcspn(p, "[]");
        if (*close != ']') {
            expr_fail(err, errlen, *close == '[' ? "nested '[' in %s (one level of brackets only)"
                 : "unterminated bracket in %s (close it with ']'; no spaces inside [...])",
                 expr);
            goto bad;
        }
        if (close == p) {
            expr_fail(err, errlen, "bad range [] in %s (an empty bracket; e.g. [1-4])", expr);
            goto bad;
        }
        unsigned long long count = 0;
        for (;;) {                  /* every item, empty ones too: "[1,]" is an error */
            size_t len = strcspn(p, ",]");
            struct range r;
            if (range_parse(p, len, expr, &r, err, errlen) < 0) goto bad;
            pt->r = xrealloc(pt->r, (pt->n_r + 1) * sizeof *pt->r);
            pt->r[pt->n_r++] = r;
            count += r.hi - r.lo + 1;
            p += len;
            if (count > HOSTS_MAX || *p != ',') break;
            p++;
        }
        total = (count > HOSTS_MAX || total * count > HOSTS_MAX) ? HOSTS_MAX + 1 : total * count;
        if (total > HOSTS_MAX) {
            expr_fail(err, errlen, "%s expands to more than %d hosts (is a range mistyped?)", expr,
                 HOSTS_MAX);
            goto bad;
        }
        p = close + 1;
    }
    *out = parts;
    *n_out = n;
    return (long)total;
bad:
    parts_free(parts, n);
    return -1;
}

int hostlist_expand(const char *expr, char ***names, char *err, size_t errlen)
{
    struct part *parts;
    size_t n_parts;
    *names = NULL;
    if (!expr || !*expr) return expr_fail(err, errlen, "empty host name");
    long total = hostlist_split(expr, &parts, &n_parts, err, errlen);
    if (total < 0) return -1;

    /* An odometer over the groups: the last group turns fastest, as Slurm orders them. */
    size_t *ri = xcalloc(n_parts, sizeof *ri);
    unsigned long *val = xcalloc(n_parts, sizeof *val);
    for (size_t i = 0; i < n_parts; i++)
        if (parts[i].n_r) val[i] = parts[i].r[0].lo;
    char **out = xcalloc((size_t)total + 1, sizeof *out);
    struct strbuf sb;
    strbuf_init(&sb);
    for (long k = 0; k < total; k++) {
        strbuf_reset(&sb);
        for (size_t i = 0; i < n_parts; i++) {
            strbuf_add(&sb, parts[i].lit, parts[i].lit_len);
            if (parts[i].n_r) strbuf_addf(&sb, "%0*lu", parts[i].r[ri[i]].width, val[i]);
        }
        out[k] = xstrdup(sb.buf ? sb.buf : "");
        for (size_t i = n_parts; i-- > 0;) {
            if (!parts[i].n_r) continue;
            if (val[i] < parts[i].r[ri[i]].hi) { val[i]++; break; }
            if (++ri[i] < parts[i].n_r) { val[i] = parts[i].r[ri[i]].lo; break; }
            ri[i] = 0;
            val[i] = parts[i].r[0].lo;
        }
    }
    strbuf_done(&sb);
    free(ri);
    free(val);
    parts_free(parts, n_parts);
    *names = out;
    return (int)total;
}

void hostlist_names_free(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

int hostlist_validate(const char *expr, char *err, size_t errlen)
{
    struct part *parts;
    size_t n_parts;
    if (hostlist_split(expr, &parts, &n_parts, err, errlen) < 0) return -1;
    parts_free(parts, n_parts);
    return 0;
}
