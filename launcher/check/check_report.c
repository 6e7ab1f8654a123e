/* Results of `ddptop check`: the model and --json. See check_report.h. */
#include "check_report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[CHECK_KINDS] = {"ssh", "clock", "gpu", "env", "tcp", "nccl", "bench"};

const char *check_kind_name(enum check_kind k)
{
    return (unsigned)k < CHECK_KINDS ? kind_names[k] : "?";
}

int check_report_kinds(const struct check_report *r)
{
    return r->bench ? CHECK_KINDS : CHECK_BENCH;
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
        cJSON_Delete(r->rows[i].node);
    }
    cJSON_Delete(r->bench_doc);
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

const struct check_result *check_row_refusal(const struct check_row *row, enum check_kind *kind)
{
    static const enum check_kind refusing[] = {CHECK_SSH, CHECK_ENV, CHECK_TCP, CHECK_BENCH};
    for (size_t k = 0; k < sizeof refusing / sizeof *refusing; k++)
        if (row->checks[refusing[k]].status == CHECK_FAIL) {
            *kind = refusing[k];
            return &row->checks[refusing[k]];
        }
    return NULL;
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
        if (row->node) cJSON_AddItemToObject(h, "node", cJSON_Duplicate(row->node, 1));
        else cJSON_AddNullToObject(h, "node");
        checks = cJSON_AddObjectToObject(h, "checks");
        for (int k = 0; k < check_report_kinds(r); k++) {
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
    if (r->bench_doc) cJSON_AddItemToObject(doc, "bench", cJSON_Duplicate(r->bench_doc, 1));
    check_report_summary(r, &p, &w, &f);
    sum = cJSON_AddObjectToObject(doc, "summary");
    cJSON_AddNumberToObject(sum, "pass", (double)p);
    cJSON_AddNumberToObject(sum, "warn", (double)w);
    cJSON_AddNumberToObject(sum, "fail", (double)f);
    return doc;
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
