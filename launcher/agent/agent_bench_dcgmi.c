/* bench_dcgmi: NVIDIA DCGM's quick diagnostic (`dcgmi diag -r 1 -j`) where DCGM is installed,
 * its verdict per node (docs/check.md, "Measured preflight"). Never required: no dcgmi is an
 * answer ("not installed"), not a failure. Run beside the loop (agent_bench_proc.c), bounded in
 * time (the request's seconds) and output (1 MiB); the JSON is read here, so only the verdict
 * and the failing tests' names cross the link. Nothing is run from a place another user can
 * write: the program and its directory must belong to root or to us and be writable by nobody
 * else. */
#include "agent_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_bench_proc.h"
#include "agent_exec.h"
#include "util/util.h"
#include "wire/protocol.h"

#define DCGMI_OUT_CAP (1u << 20)
#define DCGMI_FAILED_MAX 16
/* Where DCGM's packages put it, before the node's PATH. */
static const char *const dcgmi_dirs = "/usr/bin:/usr/sbin:/usr/local/bin:/bin";

struct dcgmi_job {
    cJSON *id;
    char *path;
    int64_t t0_ns;
};

static int safe_owner(const struct stat *st)
{
    return (st->st_uid == 0 || st->st_uid == getuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* The first dcgmi in dirs; *unsafe set (and NULL returned) when the first one found is in a place
 * others can write. */
static char *dcgmi_find(const char *dirs, int *unsafe)
{
    struct stat st, dst;
    for (const char *d = dirs; d && *d;) {
        const char *end = strchr(d, ':');
        size_t dl = end ? (size_t)(end - d) : strlen(d);
        if (dl && d[0] == '/') {
            char *dir = xasprintf("%.*s", (int)dl, d), *p = xasprintf("%s/dcgmi", dir);
            if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0) {
                int ok = safe_owner(&st) && stat(dir, &dst) == 0 && safe_owner(&dst);
                free(dir);
                if (ok) return p;
                *unsafe = 1;
                free(p);
                return NULL;
            }
            free(dir);
            free(p);
        }
        if (!end) break;
        d = end + 1;
    }
    return NULL;
}

static const char *text_of(const cJSON *o, const char *name)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
    return s ? s : "";
}

/* A failing result's words: the test, the GPU, the first warning (DCGM 2.x has a string, 3.x a
 * list of {"warning": ...}). */
static char *failed_words(const char *test, const cJSON *res)
{
    const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(res, "gpu_id");
    const cJSON *warn = cJSON_GetObjectItemCaseSensitive(res, "warnings");
    const char *w = cJSON_IsString(warn) ? warn->valuestring
                    : cJSON_IsArray(warn) ? text_of(cJSON_GetArrayItem(warn, 0), "warning") : "";
    char g[16] = "";
    if (cJSON_IsString(gpu)) snprintf(g, sizeof g, "%.8s", gpu->valuestring);
    else if (cJSON_IsNumber(gpu)) snprintf(g, sizeof g, "%d", gpu->valueint);
    char *s = xasprintf("%.60s%s%s%s%.120s", test, g[0] ? " on GPU " : "", g, *w ? ": " : "", w);
    agent_exec_clean(s);   /* remote text: printable ASCII only */
    return s;
}

/* The verdict from dcgmi's JSON: "pass", "fail" (names in failed) or NULL when it is not DCGM's. */
static const char *verdict(const char *out, cJSON *failed)
{
    const char *open = strchr(out, '{'), *close = strrchr(out, '}');
    if (!open || !close || close < open) return NULL;
    cJSON *doc = cJSON_ParseWithLength(open, (size_t)(close - open + 1));
    const cJSON *diag = cJSON_GetObjectItemCaseSensitive(doc, "DCGM GPU Diagnostic");
    if (!diag) diag = cJSON_GetObjectItemCaseSensitive(doc, "DCGM Diagnostic");
    const cJSON *cats = cJSON_GetObjectItemCaseSensitive(diag, "test_categories"), *cat, *test, *res;
    if (!cJSON_IsArray(cats)) {
        cJSON_Delete(doc);
        return NULL;
    }
    cJSON_ArrayForEach(cat, cats) {
        cJSON_ArrayForEach(test, cJSON_GetObjectItemCaseSensitive(cat, "tests")) {
            const cJSON *results = cJSON_GetObjectItemCaseSensitive(test, "results");
            cJSON_ArrayForEach(res, results) {
                if (strcmp(text_of(res, "status"), "Fail") != 0) continue;
                if (cJSON_GetArraySize(failed) < DCGMI_FAILED_MAX) {
                    char *w = failed_words(text_of(test, "name"), res);
                    cJSON_AddItemToArray(failed, cJSON_CreateString(w));
                    free(w);
                }
            }
        }
    }
    cJSON_Delete(doc);
    return cJSON_GetArraySize(failed) ? "fail" : "pass";
}

static void dcgmi_end(struct agent *ag, void *ctx, int status, const char *out, int over)
{
    struct dcgmi_job *j = ctx;
    cJSON *m = agent_reply_new(WIRE_EV_BENCH_DCGMI, j->id), *failed = cJSON_CreateArray();
    const char *v = status >= 0 && !over ? verdict(out, failed) : NULL;
    char why[240];
    cJSON_AddStringToObject(m, "path", j->path);
    cJSON_AddNumberToObject(m, "seconds", (double)((mono_ns() - j->t0_ns) / 1000000) / 1e3);
    cJSON_AddNumberToObject(m, "exit", status);
    if (v) {
        cJSON_AddStringToObject(m, "status", v);
        cJSON_AddItemToObject(m, "failed", failed);
        cJSON_AddNullToObject(m, "error");
    } else {
        cJSON_Delete(failed);
        if (status == BENCH_PROC_TIMED_OUT) snprintf(why, sizeof why, "dcgmi diag -r 1 did not finish in time");
        else if (over) snprintf(why, sizeof why, "dcgmi diag -r 1 printed more than 1 MiB");
        else {
            char first[120];
            snprintf(first, sizeof first, "%.*s", (int)strcspn(out, "\n"), out);
            snprintf(why, sizeof why, "dcgmi diag -r 1 -j gave no DCGM result (exit %d): %s", status,
                     agent_exec_clean(first));
        }
        cJSON_AddStringToObject(m, "status", "error");
        cJSON_AddItemToObject(m, "failed", cJSON_CreateArray());
        cJSON_AddStringToObject(m, "error", why);
    }
    agent_send(ag, m);
    cJSON_Delete(j->id);
    free(j->path);
    free(j);
}

void agent_bench_dcgmi_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long seconds;
    int unsafe = 0;
    char err[200];
    if (agent_req_int(ag, req, id, "seconds", 5, 600, 90, &seconds) < 0) return;
    char *path = dcgmi_find(dcgmi_dirs, &unsafe);
    if (!path && !unsafe) path = dcgmi_find(getenv("PATH"), &unsafe);
    if (!path) {
        cJSON *m = agent_reply_new(WIRE_EV_BENCH_DCGMI, id);
        cJSON_AddStringToObject(m, "status", unsafe ? "error" : "not installed");
        cJSON_AddItemToObject(m, "failed", cJSON_CreateArray());
        if (unsafe) cJSON_AddStringToObject(m, "error", "dcgmi found where other users can write: not run");
        else cJSON_AddNullToObject(m, "error");
        agent_send(ag, m);
        return;
    }
    struct dcgmi_job *j = xcalloc(1, sizeof *j);
    j->id = id ? cJSON_Duplicate(id, 1) : NULL;
    j->path = path;
    j->t0_ns = mono_ns();
    char *argv[] = { path, "diag", "-r", "1", "-j", NULL };
    if (!agent_bench_proc_start(ag, argv, NULL, mono_ms() + seconds * 1000, DCGMI_OUT_CAP, NULL, dcgmi_end, j, err,
                                sizeof err)) {
        cJSON *m = agent_reply_new(WIRE_EV_BENCH_DCGMI, id);
        cJSON_AddStringToObject(m, "status", "error");
        cJSON_AddItemToObject(m, "failed", cJSON_CreateArray());
        cJSON_AddStringToObject(m, "error", err);
        agent_send(ag, m);
        cJSON_Delete(j->id);
        free(j->path);
        free(j);
    }
}
