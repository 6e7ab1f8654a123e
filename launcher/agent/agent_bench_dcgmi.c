/* bench_dcgmi: NVIDIA DCGM's quick diagnostic (`dcgmi diag -r 1 -j`) where DCGM is installed,
 * its verdict per node (docs/check.md, "Measured preflight"). Never required: no dcgmi is an
 * answer ("not installed"), not a failure. Run beside the loop (agent_bench_proc.c), bounded in
 * time (the request's seconds) and output (1 MiB); the JSON is read here, so only the verdict
 * and the failing tests' names cross the link. Nothing is run from a place another user can
 * write: the program (its real path, links followed), its directory and every one above it must
 * belong to root or to us and be writable by nobody else (an ancestor may be a sticky /tmp); it
 * is opened and checked again through that fd, and the fd is what is run (fexecve), so a path
 * swapped after the check runs nothing. */
#include "agent_bench.h"

#include <fcntl.h>
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

/* Owned by root or by us, and writable by nobody else; an ancestor directory may be writable
 * by others when it is sticky (/tmp): nobody else can then move what it holds. */
static int safe_stat(const struct stat *st, int sticky_ok)
{
    if (st->st_uid != 0 && st->st_uid != getuid()) return 0;
    if (!(st->st_mode & (S_IWGRP | S_IWOTH))) return 1;
    return sticky_ok && S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX);
}

/* dir (resolved) and every directory above it up to / are safe. */
static int safe_dirs(const char *dir)
{
    struct stat st;
    char *d = xstrdup(dir);
    int ok = 1;
    for (int first = 1; ok; first = 0) {
        ok = stat(d[0] ? d : "/", &st) == 0 && S_ISDIR(st.st_mode) && safe_stat(&st, !first);
        char *slash = strrchr(d, '/');
        if (!slash || !d[0]) break;
        *slash = '\0';
    }
    free(d);
    return ok;
}

/* The dcgmi at cand (a path on the search list), if it is safe to run: its real path, and the
 * file open (O_NOFOLLOW on that path, checked again through the fd, so what is run is what was
 * checked) in *fd. NULL with *why set when it is not. */
static char *dcgmi_open(const char *dir, const char *cand, int *fd, const char **why)
{
    struct stat st;
    char *real = realpath(cand, NULL), *rdir = realpath(dir, NULL);
    char *real_dir = real ? xstrdup(real) : NULL;
    *fd = -1;
    *why = "dcgmi in a directory others can write: not run";
    if (!real || !rdir) goto fail;
    *strrchr(real_dir, '/') = '\0';
    if (!safe_dirs(rdir) || !safe_dirs(real_dir)) goto fail;
    *fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    *why = "dcgmi cannot be opened: not run";
    if (*fd < 0 || fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111)) goto fail;
    *why = "dcgmi is writable by others or not ours or root's: not run";
    if (!safe_stat(&st, 0)) goto fail;
    free(rdir);
    free(real_dir);
    return real;
fail:
    if (*fd >= 0) close(*fd);
    *fd = -1;
    free(real);
    free(rdir);
    free(real_dir);
    return NULL;
}

/* The first dcgmi in dirs, opened (*fd); NULL when there is none, or (*why set) when the first
 * one found is not safe to run. */
static char *dcgmi_find(const char *dirs, int *fd, const char **why)
{
    for (const char *d = dirs; d && *d;) {
        const char *end = strchr(d, ':');
        size_t dl = end ? (size_t)(end - d) : strlen(d);
        if (dl && d[0] == '/') {
            char *dir = xasprintf("%.*s", (int)dl, d), *p = xasprintf("%s/dcgmi", dir);
            if (access(p, X_OK) == 0) {
                char *real = dcgmi_open(dir, p, fd, why);
                free(dir);
                free(p);
                return real;
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

/* The answer's verdict fields, the same in every answer: failed is taken (NULL: none). */
static void verdict_add(cJSON *m, const char *status, cJSON *failed, const char *error)
{
    cJSON_AddStringToObject(m, "status", status);
    cJSON_AddItemToObject(m, "failed", failed ? failed : cJSON_CreateArray());
    if (error) cJSON_AddStringToObject(m, "error", error);
    else cJSON_AddNullToObject(m, "error");
}

static void job_free(struct dcgmi_job *j)
{
    cJSON_Delete(j->id);
    free(j->path);
    free(j);
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
        verdict_add(m, v, failed, NULL);
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
        verdict_add(m, "error", NULL, why);
    }
    agent_send(ag, m);
    job_free(j);
}

void agent_bench_dcgmi_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long seconds;
    int fd = -1;
    const char *unsafe = NULL;
    char err[200];
    if (agent_req_int(ag, req, id, "seconds", 5, 600, 90, &seconds) < 0) return;
    char *path = dcgmi_find(dcgmi_dirs, &fd, &unsafe);
    if (!path && !unsafe) path = dcgmi_find(getenv("PATH"), &fd, &unsafe);
    if (!path) {
        cJSON *m = agent_reply_new(WIRE_EV_BENCH_DCGMI, id);
        verdict_add(m, unsafe ? "error" : "not installed", NULL, unsafe);
        agent_send(ag, m);
        return;
    }
    struct dcgmi_job *j = xcalloc(1, sizeof *j);
    j->id = id ? cJSON_Duplicate(id, 1) : NULL;
    j->path = path;
    j->t0_ns = mono_ns();
    char *argv[] = { path, "diag", "-r", "1", "-j", NULL };
    /* run through the fd that was checked: a path could be swapped between the check and the exec */
    struct bench_proc *p = agent_bench_proc_start(ag, argv, NULL, fd, mono_ms() + seconds * 1000, DCGMI_OUT_CAP,
                                                  NULL, dcgmi_end, j, err, sizeof err);
    close(fd);
    if (!p) {
        cJSON *m = agent_reply_new(WIRE_EV_BENCH_DCGMI, id);
        verdict_add(m, "error", NULL, err);
        agent_send(ag, m);
        job_free(j);
    }
}
