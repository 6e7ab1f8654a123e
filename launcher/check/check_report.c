/* Results of `ddptop check`: model, table, details and --json. See check_report.h. */
#include "check_report.h"

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
    if (r->mesh.mode) {
        cJSON *m = cJSON_AddObjectToObject(doc, "mesh");
        cJSON_AddStringToObject(m, "mode", r->mesh.mode);
        cJSON_AddStringToObject(m, "requested", r->mesh.requested ? r->mesh.requested : "auto");
        cJSON_AddNumberToObject(m, "seed", (double)r->mesh.seed);
        cJSON_AddNumberToObject(m, "nodes", (double)r->mesh.nodes);
        cJSON_AddNumberToObject(m, "pairs", (double)r->mesh.pairs);
        cJSON_AddNumberToObject(m, "pairs_all", (double)r->mesh.pairs_all);
        cJSON_AddNumberToObject(m, "rendezvous", (double)r->mesh.rendezvous);
        cJSON_AddNumberToObject(m, "min_probed_by", (double)r->mesh.min_probed_by);
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

static void column_widths(const struct check_report *r, size_t *wh, size_t *wa)
{
    *wh = 4;
    *wa = 7;
    for (size_t i = 0; i < r->n; i++) {
        char *a = row_address(&r->rows[i]);
        size_t lh = r->rows[i].host ? strlen(r->rows[i].host) : 0, la = strlen(a);
        if (lh > *wh) *wh = lh;
        if (la > *wa) *wa = la;
        free(a);
    }
    if (*wh > 40) *wh = 40;
    if (*wa > 48) *wa = 48;
}

static void table_row(const struct check_report *r, size_t i, struct strbuf *out, bool colour,
                      size_t wh, size_t wa)
{
    const struct check_row *row = &r->rows[i];
    char *a = row_address(row);
    add_padded(out, row->host ? row->host : "", wh);
    strbuf_adds(out, "  ");
    add_padded(out, a, wa);
    for (int k = 0; k < CHECK_KINDS; k++) {
        strbuf_adds(out, "  ");
        add_status(out, row->checks[k].status, colour, k == CHECK_KINDS - 1 ? 0 : 5);
    }
    strbuf_adds(out, "\n");
    free(a);
}

void check_report_table(const struct check_report *r, struct strbuf *out, bool colour)
{
    size_t wh, wa;
    column_widths(r, &wh, &wa);
    add_padded(out, "HOST", wh);
    strbuf_adds(out, "  ");
    add_padded(out, "ADDRESS", wa);
    strbuf_adds(out, !r->link ? "  SSH  " : strcmp(r->link, "srun") == 0 ? "  SRUN " : "  TM   ");
    strbuf_adds(out, "  CLOCK  GPU    ENV    TCP    NCCL\n");
    for (size_t i = 0; i < r->n; i++) table_row(r, i, out, colour, wh, wa);
}

void check_report_details(const struct check_report *r, struct strbuf *out, bool colour)
{
    size_t wh = 4, p, w, f;
    bool any = false;
    for (size_t i = 0; i < r->n; i++) {
        size_t l = r->rows[i].host ? strlen(r->rows[i].host) : 0;
        if (l > wh) wh = l;
    }
    if (wh > 40) wh = 40;
    for (size_t i = 0; i < r->n; i++) {
        const struct check_row *row = &r->rows[i];
        bool row_failed = check_row_status(row) == CHECK_FAIL;
        for (int k = 0; k < CHECK_KINDS; k++) {
            const struct check_result *res = &row->checks[k];
            if (res->status == CHECK_PASS) continue;
            /* a skip on a failed host only repeats the failure that caused it */
            if ((res->status == CHECK_SKIP || res->status == CHECK_PENDING) && row_failed) continue;
            if (!any) strbuf_adds(out, "\n");
            any = true;
            add_padded(out, row->host ? row->host : "", wh);
            strbuf_adds(out, "  ");
            add_padded(out, k == CHECK_SSH && r->link ? r->link : kind_names[k], 5);
            strbuf_adds(out, "  ");
            add_status(out, res->status, colour, 4);
            strbuf_adds(out, "  ");
            add_clean(out, res->detail ? res->detail : "not run");
            strbuf_adds(out, "\n");
            if (res->hint && *res->hint) {
                for (size_t n = 0; n < wh + 15; n++) strbuf_add(out, " ", 1);
                strbuf_adds(out, "fix: ");
                add_clean(out, res->hint);
                strbuf_adds(out, "\n");
            }
        }
    }
    check_report_summary(r, &p, &w, &f);
    strbuf_addf(out, "\n%zu host%s: %zu pass, %zu warn, %zu fail\n", r->n, r->n == 1 ? "" : "s", p, w, f);
    check_report_mesh_line(r, out);
}

/* 1047552 -> "1,047,552" */
static void add_count(struct strbuf *out, size_t v)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%zu", v);
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) strbuf_adds(out, ",");
        strbuf_add(out, digits + i, 1);
    }
}

void check_report_mesh_line(const struct check_report *r, struct strbuf *out)
{
    if (!r->mesh.mode || strcmp(r->mesh.mode, "sample") != 0) return;
    strbuf_adds(out, "sampled mesh: ");
    add_count(out, r->mesh.pairs);
    strbuf_adds(out, " of ");
    add_count(out, r->mesh.pairs_all);
    strbuf_addf(out, " pairs (every node probed by >= %zu peers, seed %ld); --mesh full to probe all\n",
                r->mesh.min_probed_by, r->mesh.seed);
}
