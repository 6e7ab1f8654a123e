/* Results of `ddptop check`: model, table, details and --json. See check_report.h. */
#include "check_report.h"
#include "check_fold.h"
#include "hosts/hostlist.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[CHECK_KINDS] = {"ssh", "clock", "gpu", "env", "tcp", "nccl"};

const char *check_kind_name(enum check_kind k)
{
    return (unsigned)k < CHECK_KINDS ? kind_names[k] : "?";
}

const char *check_status_name(enum check_status s)
{
    switch (s) {
    case CHECK_PASS: return "pass";
    case CHECK_WARN: return "warn";
    case CHECK_FAIL: return "fail";
    default: return "skip";
    }
}

void check_report_init(struct check_report *r, size_t n)
{
    memset(r, 0, sizeof *r);
    r->rows = xcalloc(n ? n : 1, sizeof *r->rows);
    r->n = n;
}

static void result_done(struct check_result *res)
{
    free(res->detail);
    free(res->hint);
    cJSON_Delete(res->fields);
    memset(res, 0, sizeof *res);
}

void check_report_done(struct check_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->rows[i].host);
        free(r->rows[i].address);
        for (int k = 0; k < CHECK_KINDS; k++) result_done(&r->rows[i].checks[k]);
    }
    free(r->rows);
    memset(r, 0, sizeof *r);
}

void check_row_set_host(struct check_row *row, const char *host, const char *address, int port)
{
    char *h = xstrdup(host), *a = xstrdup(address ? address : host);
    free(row->host);
    free(row->address);
    row->host = h;
    row->address = a;
    row->port = port;
}

void check_result_set(struct check_result *res, enum check_status st, const char *detail,
                      const char *hint)
{
    char *d = xstrdup(detail ? detail : ""), *h = hint ? xstrdup(hint) : NULL;
    free(res->detail);
    free(res->hint);
    res->status = st;
    res->detail = d;
    res->hint = h;
}

void check_result_setf(struct check_result *res, enum check_status st, const char *hint,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    check_result_set(res, st, text, hint);
    free(text);
}

cJSON *check_result_fields(struct check_result *res)
{
    if (!res->fields) res->fields = cJSON_CreateObject();
    if (!res->fields) util_fatal("out of memory (cJSON)");
    return res->fields;
}

void check_fields_add_ms(cJSON *obj, const char *key, double v)
{
    cJSON_AddNumberToObject(obj, key, round(v * 1000.0) / 1000.0);
}

enum check_status check_row_status(const struct check_row *row)
{
    enum check_status worst = CHECK_SKIP;
    for (int k = 0; k < CHECK_KINDS; k++) {
        enum check_status s = row->checks[k].status;
        if (s >= CHECK_PASS && s > worst) worst = s;
    }
    return worst;
}

void check_report_summary(const struct check_report *r, size_t *pass, size_t *warn, size_t *fail)
{
    *pass = *warn = *fail = 0;
    for (size_t i = 0; i < r->n; i++) {
        switch (check_row_status(&r->rows[i])) {
        case CHECK_PASS: (*pass)++; break;
        case CHECK_WARN: (*warn)++; break;
        case CHECK_FAIL: (*fail)++; break;
        default: break;
        }
    }
}

int check_report_exit_code(const struct check_report *r)
{
    size_t p, w, f;
    check_report_summary(r, &p, &w, &f);
    return f ? 1 : 0;
}

cJSON *check_report_json(const struct check_report *r)
{
    cJSON *doc = cJSON_CreateObject(), *hosts, *sum;
    size_t p, w, f;
    if (!doc) util_fatal("out of memory (cJSON)");
    cJSON_AddNumberToObject(doc, "ddptop_check", 1);
    hosts = cJSON_AddArrayToObject(doc, "hosts");
    for (size_t i = 0; i < r->n; i++) {
        const struct check_row *row = &r->rows[i];
        cJSON *h = cJSON_CreateObject(), *checks;
        cJSON_AddStringToObject(h, "host", row->host ? row->host : "");
        cJSON_AddStringToObject(h, "address", row->address ? row->address : "");
        cJSON_AddNumberToObject(h, "port", row->port);
        cJSON_AddStringToObject(h, "status", check_status_name(check_row_status(row)));
        checks = cJSON_AddObjectToObject(h, "checks");
        for (int k = 0; k < CHECK_KINDS; k++) {
            const struct check_result *res = &row->checks[k];
            cJSON *c = cJSON_AddObjectToObject(checks, kind_names[k]);
            cJSON_AddStringToObject(c, "status", check_status_name(res->status));
            cJSON_AddStringToObject(c, "detail", res->detail ? res->detail
                                                 : res->status == CHECK_PENDING ? "not run" : "");
            for (cJSON *it = res->fields ? res->fields->child : NULL; it; it = it->next)
                cJSON_AddItemToObject(c, it->string, cJSON_Duplicate(it, 1));
            if (res->status != CHECK_PASS)
                cJSON_AddStringToObject(c, "hint", res->hint ? res->hint : "");
        }
        cJSON_AddItemToArray(hosts, h);
    }
    check_report_summary(r, &p, &w, &f);
    sum = cJSON_AddObjectToObject(doc, "summary");
    cJSON_AddNumberToObject(sum, "pass", (double)p);
    cJSON_AddNumberToObject(sum, "warn", (double)w);
    cJSON_AddNumberToObject(sum, "fail", (double)f);
    return doc;
}

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

void check_report_table(const struct check_report *r, struct strbuf *out, unsigned flags)
{
    struct check_folds f;
    bool colour = flags & CHECK_TEXT_COLOUR;
    size_t wh = 4, wa = 7;
    check_fold_rows(r, check_fold_wanted(r, flags), &f);
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
    strbuf_adds(out, !r->link ? "  SSH  " : strcmp(r->link, "srun") == 0 ? "  SRUN " : "  TM   ");
    strbuf_adds(out, "  CLOCK  GPU    ENV    TCP    NCCL\n");
    for (size_t i = 0; i < f.n; i++) {
        const struct check_row *row = &r->rows[f.v[i].rows[0]];
        add_padded(out, hosts[i], wh);
        strbuf_adds(out, "  ");
        add_padded(out, addrs[i], wa);
        for (int k = 0; k < CHECK_KINDS; k++) {
            strbuf_adds(out, "  ");
            add_status(out, row->checks[k].status, colour, k == CHECK_KINDS - 1 ? 0 : 5);
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
    bool colour = flags & CHECK_TEXT_COLOUR, fold = check_fold_wanted(r, flags);
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
        add_padded(out, g->kind == CHECK_SSH && r->link ? r->link : kind_names[g->kind], 5);
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
    if (fold) {
        struct check_folds rows;
        check_fold_rows(r, true, &rows);
        if (any_folded(&f) || any_folded(&rows))
            strbuf_adds(out, "(hosts with the same results share a line; ddptop check --all lists each)\n");
        check_folds_done(&rows);
    }
    check_folds_done(&f);
}
