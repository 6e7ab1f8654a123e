/* The text of `ddptop check`'s results: the table and the details, folded (check_fold.h).
 * See check_report_text.h. */
#include "check_report_text.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "check_fold.h"
#include "hosts/hostlist.h"

/* Remote text (node stderr, facts) never reaches the terminal raw: control bytes become '?'. */
static void add_clean(struct strbuf *out, const char *s)
{
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char c = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
        strbuf_add(out, &c, 1);
    }
}

static void add_padded(struct strbuf *out, const char *s, size_t width)
{
    size_t n = strlen(s);
    add_clean(out, s);
    for (; n < width; n++) strbuf_add(out, " ", 1);
}

static const char *status_colour(enum check_status s)
{
    switch (s) {
    case CHECK_PASS: return "\033[32m";
    case CHECK_WARN: return "\033[33m";
    case CHECK_FAIL: return "\033[1;31m";
    default: return "\033[2m";
    }
}

static void add_status(struct strbuf *out, enum check_status s, bool colour, size_t width)
{
    const char *name = s == CHECK_PENDING ? "..." : check_status_name(s);
    if (colour) strbuf_adds(out, status_colour(s));
    strbuf_adds(out, name);
    if (colour) strbuf_adds(out, "\033[0m");
    for (size_t n = strlen(name); n < width; n++) strbuf_add(out, " ", 1);
}

static char *row_address(const struct check_row *row)
{
    const char *a = row->address ? row->address : "";
    if (row->port == 0) return xstrdup(a); /* srun and pbs_tmrsh have no port of ours */
    return strchr(a, ':') ? xasprintf("[%s]:%d", a, row->port) : xasprintf("%s:%d", a, row->port);
}

#define HOST_WIDTH_MAX 40
#define ADDRESS_WIDTH_MAX 48

/* A group's address cell: a host's own, or one address for all with their count, or the
 * addresses as a hostlist with the one port, or just how many when that is too long (the
 * --json document has each). */
static char *group_address(const struct check_report *r, const struct check_fold *g)
{
    const struct check_row *first = &r->rows[g->rows[0]];
    char *a0 = row_address(first), *s;
    bool same = true, v6 = false, one_port = true;
    for (size_t i = 1; i < g->n; i++) {
        const struct check_row *row = &r->rows[g->rows[i]];
        char *a = row_address(row);
        same = same && strcmp(a, a0) == 0;
        v6 = v6 || (row->address && strchr(row->address, ':'));
        one_port = one_port && row->port == first->port;
        free(a);
    }
    if (g->n == 1) return a0;
    if (same) {
        s = xasprintf("%s (x%zu)", a0, g->n);
        free(a0);
        return s;
    }
    free(a0);
    if (!v6 && one_port && !(first->address && strchr(first->address, ':'))) {
        const char **names = xcalloc(g->n, sizeof *names);
        for (size_t i = 0; i < g->n; i++) names[i] = r->rows[g->rows[i]].address ? r->rows[g->rows[i]].address : "";
        char *list = hostlist_compress(names, g->n);
        free(names);
        s = first->port ? xasprintf("%s:%d", list, first->port) : xstrdup(list);
        free(list);
        if (strlen(s) <= ADDRESS_WIDTH_MAX) return s;
        free(s);
    }
    return xasprintf("%zu addresses", g->n);
}

/* The first column of a group: the host, or the hosts as a hostlist. */
static char *group_hosts(const struct check_report *r, const struct check_fold *g)
{
    const char *h = r->rows[g->rows[0]].host;
    return g->n == 1 ? xstrdup(h ? h : "") : check_fold_hosts(r, g);
}

static size_t capped(size_t have, size_t len, size_t max)
{
    size_t c = len > max ? max : len;      /* a longer name overflows its column */
    return c > have ? c : have;
}

/* The note under a folded report: how to see every host. */
static bool any_folded(const struct check_folds *f)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].n > 1) return true;
    return false;
}

/* The first column's head: the transport's name upper-cased, "SSH  " (5 wide, as a status). */
static void add_transport_head(struct strbuf *out, const char *transport)
{
    size_t n = 0;
    for (; transport[n] && n < 5; n++) strbuf_addf(out, "%c", toupper((unsigned char)transport[n]));
    for (; n < 5; n++) strbuf_adds(out, " ");
}

void check_report_table(const struct check_report *r, struct strbuf *out, unsigned flags)
{
    struct check_folds f;
    bool colour = flags & CHECK_TEXT_COLOUR;
    size_t wh = 4, wa = 7;
    check_fold_rows(r, check_fold_wanted(r, flags & CHECK_TEXT_ALL), &f);
    char **hosts = xcalloc(f.n ? f.n : 1, sizeof *hosts), **addrs = xcalloc(f.n ? f.n : 1, sizeof *addrs);
    for (size_t i = 0; i < f.n; i++) {
        hosts[i] = group_hosts(r, &f.v[i]);
        addrs[i] = group_address(r, &f.v[i]);
        wh = capped(wh, strlen(hosts[i]), HOST_WIDTH_MAX);
        wa = capped(wa, strlen(addrs[i]), ADDRESS_WIDTH_MAX);
    }
    add_padded(out, "HOST", wh);
    strbuf_adds(out, "  ");
    add_padded(out, "ADDRESS", wa);
    strbuf_adds(out, "  ");
    add_transport_head(out, r->transport ? r->transport : "ssh");
    strbuf_adds(out, r->bench ? "  CLOCK  GPU    ENV    TCP    NCCL   BENCH\n" : "  CLOCK  GPU    ENV    TCP    NCCL\n");
    for (size_t i = 0; i < f.n; i++) {
        const struct check_row *row = &r->rows[f.v[i].rows[0]];
        add_padded(out, hosts[i], wh);
        strbuf_adds(out, "  ");
        add_padded(out, addrs[i], wa);
        for (int k = 0; k < check_report_kinds(r); k++) {
            strbuf_adds(out, "  ");
            add_status(out, row->checks[k].status, colour, k == check_report_kinds(r) - 1 ? 0 : 5);
        }
        strbuf_adds(out, "\n");
        free(hosts[i]);
        free(addrs[i]);
    }
    free(hosts);
    free(addrs);
    check_folds_done(&f);
}

void check_report_details(const struct check_report *r, struct strbuf *out, unsigned flags)
{
    struct check_folds f;
    bool colour = flags & CHECK_TEXT_COLOUR, fold = check_fold_wanted(r, flags & CHECK_TEXT_ALL);
    size_t wh = 4, p, w, f_n;
    check_fold_findings(r, fold, &f);
    char **hosts = xcalloc(f.n ? f.n : 1, sizeof *hosts);
    for (size_t i = 0; i < f.n; i++) {
        hosts[i] = group_hosts(r, &f.v[i]);
        wh = capped(wh, strlen(hosts[i]), HOST_WIDTH_MAX);
    }
    for (size_t i = 0; i < f.n; i++) {
        const struct check_fold *g = &f.v[i];
        const struct check_result *res = &r->rows[g->rows[0]].checks[g->kind];
        /* one host: its own words; several: the words they share */
        char *shared = g->n > 1 ? check_fold_detail(g) : NULL;
        const char *detail = shared ? shared : res->detail ? res->detail : "not run";
        const char *hint = g->n > 1 ? g->hint : res->hint;
        if (i == 0) strbuf_adds(out, "\n");
        add_padded(out, hosts[i], wh);
        strbuf_adds(out, "  ");
        add_padded(out, g->kind == CHECK_SSH && r->transport ? r->transport : check_kind_name(g->kind), 5);
        strbuf_adds(out, "  ");
        add_status(out, g->status, colour, 4);
        strbuf_adds(out, "  ");
        add_clean(out, detail);
        strbuf_adds(out, "\n");
        if (hint && *hint) {
            for (size_t n = 0; n < wh + 15; n++) strbuf_add(out, " ", 1);
            strbuf_adds(out, "fix: ");
            add_clean(out, hint);
            strbuf_adds(out, "\n");
        }
        free(hosts[i]);
        free(shared);
    }
    free(hosts);
    check_report_summary(r, &p, &w, &f_n);
    strbuf_addf(out, "\n%zu host%s: %zu pass, %zu warn, %zu fail\n", r->n, r->n == 1 ? "" : "s", p, w, f_n);
    check_report_mesh_line(r, out);
    if (fold) {
        struct check_folds rows;
        check_fold_rows(r, true, &rows);
        if (any_folded(&f) || any_folded(&rows))
            strbuf_adds(out, "(hosts with the same results share a line; ddptop check --all lists each)\n");
        check_folds_done(&rows);
    }
    check_folds_done(&f);
}
