/* Folding the check report's text: which hosts share a line. See check_fold.h. Grouping is a
 * hash then an exact compare against the groups made so far: with 1,024 hosts of 1,024
 * different findings that is a million hash compares, well under the preflight's own time. */
#include "check_fold.h"

#include <stdlib.h>
#include <string.h>

#include "hosts/hostlist.h"
#include "util/util.h"

bool check_fold_wanted(const struct check_report *r, bool all)
{
    return !all && r->n > CHECK_FOLD_MAX_SPELLED;
}

static unsigned long hash_add(unsigned long h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ul;
    return h;
}

static unsigned long hash_str(unsigned long h, const char *s)
{
    return s ? hash_add(h, s, strlen(s) + 1) : hash_add(h, "\1", 1);
}

static void fold_add_row(struct check_fold *g, size_t row)
{
    if (g->n == g->cap) g->rows = xrealloc(g->rows, (g->cap = g->cap ? g->cap * 2 : 4) * sizeof *g->rows);
    g->rows[g->n++] = row;
}

static struct check_fold *folds_new(struct check_folds *f, size_t *cap)
{
    if (f->n == *cap) f->v = xrealloc(f->v, (*cap = *cap ? *cap * 2 : 8) * sizeof *f->v);
    struct check_fold *g = &f->v[f->n++];
    memset(g, 0, sizeof *g);
    return g;
}

static bool same_verdicts(const struct check_row *a, const struct check_row *b)
{
    for (int k = 0; k < CHECK_KINDS; k++)
        if (a->checks[k].status != b->checks[k].status) return false;
    return true;
}

void check_fold_rows(const struct check_report *r, bool fold, struct check_folds *out)
{
    size_t cap = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < r->n; i++) {
        const struct check_row *row = &r->rows[i];
        unsigned long h = 14695981039346656037ul;
        for (int k = 0; k < CHECK_KINDS; k++) h = hash_add(h, &row->checks[k].status, sizeof row->checks[k].status);
        struct check_fold *g = NULL;
        for (size_t j = 0; fold && j < out->n && !g; j++)
            if (out->v[j].hash == h && same_verdicts(&r->rows[out->v[j].rows[0]], row)) g = &out->v[j];
        if (!g) {
            g = folds_new(out, &cap);
            g->kind = -1;
            g->hash = h;
        }
        fold_add_row(g, i);
    }
}

static bool word_char(char c);

static bool nullable_eq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Where a number starts at s[i] ("-756.986", "80", not the 1 of "n1", "10.0.0.1" or "2.4.0"):
 * its length, else 0. */
static size_t number_at(const char *s, size_t i)
{
    size_t j = i;
    if (i > 0 && (word_char(s[i - 1]) || s[i - 1] == '.')) return 0;
    if (s[j] == '-' || s[j] == '+') j++;
    if (!(s[j] >= '0' && s[j] <= '9')) return 0;
    while (s[j] >= '0' && s[j] <= '9') j++;
    if (s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9')
        for (j++; s[j] >= '0' && s[j] <= '9'; j++) {}
    if (word_char(s[j]) || (s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9')) return 0;
    return j - i;
}

/* text with every number as '\1' (text is remote and cleaned of control bytes only when
 * printed: a '\1' of its own becomes '?' here, so it cannot pass for a number). The numbers'
 * strings go to *nums. */
static char *mask_numbers(const char *text, char ***nums, size_t *n_nums)
{
    struct strbuf sb;
    size_t cap = 0;
    *nums = NULL;
    *n_nums = 0;
    strbuf_init(&sb);
    for (size_t i = 0; text[i];) {
        size_t len = number_at(text, i);
        if (len) {
            if (*n_nums == cap) *nums = xrealloc(*nums, (cap = cap ? cap * 2 : 4) * sizeof **nums);
            (*nums)[(*n_nums)++] = xstrndup(text + i, len);
            strbuf_adds(&sb, "\1");
            i += len;
            continue;
        }
        strbuf_add(&sb, text[i] == '\1' ? "?" : text + i, 1);
        /* the rest of a word is no number: skip it whole */
        for (i++; word_char(text[i - 1]) && word_char(text[i]); i++) strbuf_add(&sb, text + i, 1);
    }
    return sb.buf ? sb.buf : xstrdup("");
}

static void nums_take(struct check_fold *g, char **nums, size_t n, bool first)
{
    if (first) {
        g->nums = xcalloc(n ? n : 1, sizeof *g->nums);
        g->n_nums = n;
    }
    for (size_t i = 0; i < n && i < g->n_nums; i++) {
        struct check_fold_num *x = &g->nums[i];
        double v = strtod(nums[i], NULL);
        if (first || v < x->lo) {
            free(x->lo_s);
            x->lo_s = xstrdup(nums[i]);
            x->lo = v;
        }
        if (first || v > x->hi) {
            free(x->hi_s);
            x->hi_s = xstrdup(nums[i]);
            x->hi = v;
        }
    }
    for (size_t i = 0; i < n; i++) free(nums[i]);
    free(nums);
}

char *check_fold_detail(const struct check_fold *g)
{
    struct strbuf sb;
    size_t k = 0;
    strbuf_init(&sb);
    for (const char *p = g->detail ? g->detail : ""; *p; p++) {
        if (*p != '\1') {
            strbuf_add(&sb, p, 1);
            continue;
        }
        const struct check_fold_num *x = k < g->n_nums ? &g->nums[k++] : NULL;
        if (!x) continue;
        if (strcmp(x->lo_s, x->hi_s) == 0) strbuf_adds(&sb, x->lo_s);
        else strbuf_addf(&sb, "%s..%s", x->lo_s, x->hi_s);
    }
    return sb.buf ? sb.buf : xstrdup("");
}

void check_fold_findings(const struct check_report *r, bool fold, struct check_folds *out)
{
    size_t cap = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < r->n; i++) {
        const struct check_row *row = &r->rows[i];
        bool row_failed = check_row_status(row) == CHECK_FAIL;
        for (int k = 0; k < check_report_kinds(r); k++) {
            const struct check_result *res = &row->checks[k];
            if (res->status == CHECK_PASS) continue;
            /* a skip on a failed host only repeats the failure that caused it */
            if ((res->status == CHECK_SKIP || res->status == CHECK_PENDING) && row_failed) continue;
            const char *detail = res->detail ? res->detail : "not run";
            const char *hint = res->hint && *res->hint ? res->hint : NULL;
            char *plain = check_fold_normalise(detail, row->host, row->address), **nums;
            size_t n_nums;
            char *d = mask_numbers(plain, &nums, &n_nums);
            char *t = hint ? check_fold_normalise(hint, row->host, row->address) : NULL;
            unsigned long h = 14695981039346656037ul;
            free(plain);
            h = hash_add(h, &k, sizeof k);
            h = hash_add(h, &res->status, sizeof res->status);
            h = hash_str(hash_str(h, d), t);
            struct check_fold *g = NULL;
            for (size_t j = 0; fold && j < out->n && !g; j++) {
                struct check_fold *c = &out->v[j];
                if (c->hash == h && c->kind == k && c->status == res->status && strcmp(c->detail, d) == 0 &&
                    nullable_eq(c->hint, t))
                    g = c;
            }
            if (g) {
                free(d);
                free(t);
                nums_take(g, nums, n_nums, false);
            } else {
                g = folds_new(out, &cap);
                g->kind = k;
                g->status = res->status;
                g->detail = d;
                g->hint = t;
                g->hash = h;
                nums_take(g, nums, n_nums, true);
            }
            fold_add_row(g, i);
        }
    }
}

void check_folds_done(struct check_folds *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->v[i].rows);
        free(f->v[i].detail);
        free(f->v[i].hint);
        for (size_t k = 0; k < f->v[i].n_nums; k++) {
            free(f->v[i].nums[k].lo_s);
            free(f->v[i].nums[k].hi_s);
        }
        free(f->v[i].nums);
    }
    free(f->v);
    memset(f, 0, sizeof *f);
}

char *check_fold_hosts(const struct check_report *r, const struct check_fold *g)
{
    const char **names = xcalloc(g->n ? g->n : 1, sizeof *names);
    for (size_t i = 0; i < g->n; i++) names[i] = r->rows[g->rows[i]].host ? r->rows[g->rows[i]].host : "";
    char *s = hostlist_compress(names, g->n);
    free(names);
    return s;
}

static bool word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* s[at..at+len) is a whole name: "n1" in "n1: refused" or "n1.", not in "n10" or "n1.ib0". */
static bool whole_word(const char *s, size_t at, size_t len)
{
    char after = s[at + len];
    if (at > 0 && (word_char(s[at - 1]) || s[at - 1] == '.')) return false;
    if (word_char(after)) return false;
    return !(after == '.' && word_char(s[at + len + 1]));
}

static char *replace_word(const char *text, const char *word, const char *with)
{
    size_t wl = word ? strlen(word) : 0;
    struct strbuf sb;
    if (!wl || !strstr(text, word)) return xstrdup(text);
    strbuf_init(&sb);
    for (const char *p = text; *p;) {
        const char *m = strstr(p, word);
        if (!m) {
            strbuf_adds(&sb, p);
            break;
        }
        strbuf_add(&sb, p, (size_t)(m - p));
        if (whole_word(text, (size_t)(m - text), wl)) strbuf_adds(&sb, with);
        else strbuf_add(&sb, m, wl);
        p = m + wl;
    }
    return sb.buf ? sb.buf : xstrdup("");
}

char *check_fold_normalise(const char *text, const char *host, const char *address)
{
    char *a = replace_word(text ? text : "", host, "<host>");
    if (!address || (host && strcmp(address, host) == 0)) return a;
    char *b = replace_word(a, address, "<address>");
    free(a);
    return b;
}
