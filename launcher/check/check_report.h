/* Results of `ddptop check` and their text: the per-host, per-check model that the checks
 * fill in and the --json document (schema "ddptop_check": 1, documented in docs/check.md). The
 * table and the details: check_report_text.h. */
#ifndef DDPTOP_CHECK_REPORT_H
#define DDPTOP_CHECK_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "util/util.h"

enum check_status {
    CHECK_PENDING = 0,   /* not decided yet (live table only; never in the final output) */
    CHECK_SKIP,          /* could not run on this host */
    CHECK_PASS,
    CHECK_WARN,
    CHECK_FAIL,
};

/* CHECK_BENCH is the measured preflight (--bench, docs/check.md "Measured preflight"): shown,
 * in the table and --json, only when it ran (check_report_kinds). */
enum check_kind { CHECK_SSH, CHECK_CLOCK, CHECK_GPU, CHECK_ENV, CHECK_TCP, CHECK_NCCL, CHECK_BENCH, CHECK_KINDS };

struct check_result {
    enum check_status status;
    char *detail;        /* one line, shown and in JSON "detail" */
    char *hint;          /* what to do; NULL when passing */
    cJSON *fields;       /* extra JSON members (e.g. offset_ms), owned; NULL: none */
};

struct check_row {
    char *host;          /* as written in the hostfile */
    char *address;       /* HostName after the ssh config */
    int port;
    struct check_result checks[CHECK_KINDS];
    cJSON *node;         /* the node's basics from its facts (arch, glibc, kernel, os), owned;
                          * NULL until known. --json "node" */
};

/* The tcp check's mesh (check_mesh.h) as the preflight planned it: its coverage in --json
 * ("mesh") and, when sampled, one line under the details. */
struct check_report_mesh {
    const char *mode;        /* "full" or "sample"; NULL: the tcp phase did not run */
    const char *requested;   /* --mesh: "auto", "full", "sample" */
    long seed;               /* the sample's seed (--mesh-seed probes the same pairs) */
    size_t nodes;            /* in the mesh (nodes that got to the tcp phase) */
    size_t pairs, pairs_all; /* probed, and n(n-1) */
    size_t rendezvous;       /* probes to the first node's --master-port */
    size_t min_probed_by;    /* the fewest peers probing any node */
};

struct check_report {
    struct check_row *rows;
    size_t n;
    struct check_report_mesh mesh;
    const char *transport; /* what the first column checks: the kind of transport's name
                            * ("ssh", "srun", "tm"; NULL "ssh"), upper-cased as its head (the
                            * JSON key stays "ssh": scripts read it whatever the transport) */
    bool bench;            /* the measured preflight ran: its column and "bench" are shown */
    cJSON *bench_doc;      /* --json's "bench" (the plan, medians, slow links), owned; NULL: none */
};

const char *check_kind_name(enum check_kind k);       /* "ssh", "clock", ... */
/* How many kinds the report shows: CHECK_KINDS with the measured preflight, else up to NCCL. */
int check_report_kinds(const struct check_report *r);
const char *check_status_name(enum check_status s);   /* "pass", "warn", "fail", "skip" */

void check_report_init(struct check_report *r, size_t n);
void check_report_done(struct check_report *r);
void check_row_set_host(struct check_row *row, const char *host, const char *address, int port);

/* Sets status, detail and hint (copied; NULL allowed); keeps fields. */
void check_result_set(struct check_result *res, enum check_status st, const char *detail,
                      const char *hint);
void check_result_setf(struct check_result *res, enum check_status st, const char *hint,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The result's extra JSON object, created on first use. */
cJSON *check_result_fields(struct check_result *res);
/* Adds a number rounded to 3 decimals (JSON stays readable: 0.412, not 0.41199999). */
void check_fields_add_ms(cJSON *obj, const char *key, double v);

/* The worst of a row's checks: fail > warn > pass; skip and pending count as nothing,
 * and a row with nothing decided is "skip". */
enum check_status check_row_status(const struct check_row *row);
/* The check that keeps a node out of a run, or NULL: ssh, env or tcp failed (it cannot run
 * ranks), or the measured preflight named it slow (--bench: it would hold the whole job back).
 * *kind says which. The others only warn. */
const struct check_result *check_row_refusal(const struct check_row *row, enum check_kind *kind);
/* Hosts per overall status. */
void check_report_summary(const struct check_report *r, size_t *pass, size_t *warn, size_t *fail);
/* 0 when no check failed, else 1 (the process exit code). */
int check_report_exit_code(const struct check_report *r);

/* The whole --json document (caller frees with cJSON_Delete). Pending checks appear as skip. */
cJSON *check_report_json(const struct check_report *r);

/* "sampled mesh: 4,096 of 1,047,552 pairs (every node probed by >= 3 peers, seed S); --mesh full
 * to probe all" and '\n' when the mesh was sampled; nothing otherwise (the details end with it). */
void check_report_mesh_line(const struct check_report *r, struct strbuf *out);

#endif
