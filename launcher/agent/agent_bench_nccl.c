/* bench_nccl and bench_nccl_stop: NCCL's all-reduce across nodes (docs/protocol.md,
 * "Measuring"). The measurement runs in a process of its own (agent_bench_nccl_run.c) that
 * this op starts and watches from the loop (agent_bench_proc.c): its unique id is passed on as a
 * partial answer ("more": true) for the controller to hand to the other nodes, its figure
 * becomes the answer, and at the deadline, or on bench_nccl_stop (a peer failed: nobody will
 * join), it is killed. One unanswered at a time on a node: two would share its GPUs and links. */
#include "agent_bench.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_bench_proc.h"
#include "agent_exec.h"
#include "util/util.h"
#include "wire/json_num.h"
#include "wire/nccl_env.h"
#include "wire/protocol.h"

#define NCCL_SECONDS_MAX 600
/* What the process may print: an id line and a figure or an error. */
#define NCCL_OUT_CAP 4096

extern char **environ;

struct nccl_job {
    cJSON *id;
    struct bench_proc *proc;
    long ranks, gpus, iters;
    double bytes;
    double seconds;
    int64_t t0_ns;
    char *stop_reason;        /* bench_nccl_stop's, when it ended it */
    int answered;
};

static struct nccl_job *running;

static cJSON *round3(double v)
{
    return v < 0 || !isfinite(v) ? cJSON_CreateNull() : cJSON_CreateNumber(round(v * 1000) / 1000);
}

/* cause, with an error: "own" (this node's NCCL, CUDA or process failed), "peer" (NCCL said
 * another rank or the network failed), "timeout", "stopped" (bench_nccl_stop). */
static void answer(struct agent *ag, struct nccl_job *j, double us, const char *error, const char *cause)
{
    if (j->answered) return;
    j->answered = 1;
    /* the next request may come as soon as this answer is read: the process may still be
     * exiting, which its watch sees to; only an unanswered one counts as running */
    if (running == j) running = NULL;
    cJSON *m = agent_reply_new(WIRE_EV_BENCH_NCCL, j->id);
    cJSON_AddNumberToObject(m, "ranks", (double)j->ranks);
    cJSON_AddNumberToObject(m, "gpus", (double)j->gpus);
    cJSON_AddNumberToObject(m, "bytes", j->bytes);
    cJSON_AddNumberToObject(m, "iters", (double)j->iters);
    /* as nccl-tests' all_reduce_perf: algbw = bytes / time, busbw = algbw x 2(n-1)/n */
    double alg = us > 0 ? j->bytes / (us / 1e6) / 1e9 : -1;
    double bus = alg >= 0 ? alg * 2.0 * (double)(j->ranks - 1) / (double)j->ranks : -1;
    cJSON_AddItemToObject(m, "time_us", round3(us > 0 ? us : -1));
    cJSON_AddItemToObject(m, "algbw_gbs", round3(error ? -1 : alg));
    cJSON_AddItemToObject(m, "busbw_gbs", round3(error ? -1 : bus));
    cJSON_AddNumberToObject(m, "seconds", round((double)(mono_ns() - j->t0_ns) / 1e6) / 1e3);
    if (error) {
        cJSON_AddStringToObject(m, "error", error);
        cJSON_AddStringToObject(m, "cause", cause);
    } else {
        cJSON_AddNullToObject(m, "error");
    }
    agent_send(ag, m);
}

static void on_line(struct agent *ag, void *ctx, const char *line)
{
    struct nccl_job *j = ctx;
    char text[300];
    if (strncmp(line, "id ", 3) == 0 && strlen(line + 3) == 2 * BENCH_NCCL_ID_BYTES &&
        strspn(line + 3, "0123456789abcdef") == 2 * BENCH_NCCL_ID_BYTES) {
        cJSON *m = agent_reply_new(WIRE_EV_BENCH_NCCL_ID, j->id);
        cJSON_AddBoolToObject(m, "more", 1);   /* the request goes on: its answer comes later */
        cJSON_AddStringToObject(m, "uid", line + 3);
        agent_send(ag, m);
    } else if (strncmp(line, "ok ", 3) == 0) {
        double us = strtod(line + 3, NULL);
        answer(ag, j, us > 0 && isfinite(us) ? us : -1, us > 0 && isfinite(us) ? NULL : "no time measured", "own");
    } else if (strncmp(line, "error ", 6) == 0) {
        const char *cause = strncmp(line + 6, "peer ", 5) == 0 ? "peer" : "own";
        const char *t = line + 6;
        if (strncmp(t, "peer ", 5) == 0 || strncmp(t, "own ", 4) == 0) t += strcspn(t, " ") + 1;
        snprintf(text, sizeof text, "%s", t);
        answer(ag, j, -1, agent_exec_clean(text), cause);
    }
}

static void on_end(struct agent *ag, void *ctx, int status, const char *out, int over)
{
    struct nccl_job *j = ctx;
    char why[200];
    (void)out;
    (void)over;
    const char *cause = "own";
    if (status == BENCH_PROC_TIMED_OUT) {
        snprintf(why, sizeof why, "timed out after %g s: NCCL's init or all-reduce did not finish (a peer "
                                  "that never joined, a stalled node or link)", j->seconds);
        cause = "timeout";
    } else if (status == BENCH_PROC_KILLED) {
        snprintf(why, sizeof why, "stopped: %s", j->stop_reason ? j->stop_reason : "bench_nccl_stop");
        cause = "stopped";
    } else {
        snprintf(why, sizeof why, "the NCCL process ended without a figure (exit status %d)", status);
    }
    answer(ag, j, -1, why, cause);
    if (running == j) running = NULL;
    cJSON_Delete(j->id);
    free(j->stop_reason);
    free(j);
}

/* The agent's environment with the request's NCCL_* variables over it; NULL after sending an
 * error (a key that is not NCCL_[A-Z0-9_]+, a value with control bytes or too long). */
static char **env_build(struct agent *ag, const cJSON *req, const cJSON *id, int *ok)
{
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(req, "env"), *e;
    size_t n = 0, k = 0;
    *ok = 1;
    if (!env) return NULL;
    /* the request's "env": NCCL's own variables only, as the training would have them (--env;
     * the controller checked them with the same rule when it read its options) */
    if (!cJSON_IsObject(env) || cJSON_GetArraySize(env) > WIRE_NCCL_ENV_MAX) goto bad;
    cJSON_ArrayForEach(e, env) {
        const char *v = cJSON_GetStringValue(e);
        if (!e->string || !v || wire_nccl_env_bad(e->string, v)) goto bad;
    }
    while (environ[n]) n++;
    char **out = xcalloc(n + (size_t)cJSON_GetArraySize(env) + 1, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        size_t kl = strcspn(environ[i], "=");
        bool over = false;
        cJSON_ArrayForEach(e, env) over = over || (strlen(e->string) == kl && strncmp(environ[i], e->string, kl) == 0);
        if (!over) out[k++] = xstrdup(environ[i]);
    }
    cJSON_ArrayForEach(e, env) out[k++] = xasprintf("%s=%s", e->string, e->valuestring);
    return out;
bad:
    *ok = 0;
    agent_send_error(ag, id, "bench_nccl: \"env\" must be an object of at most %d NCCL_* variables with "
                             "printable values of at most %d bytes", WIRE_NCCL_ENV_MAX, WIRE_NCCL_ENV_VALUE_MAX);
    return NULL;
}

static void env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++) free(env[i]);
    free(env);
}

void agent_bench_nccl_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long ranks, rank0, gpus, warmup, iters, seconds;
    double bytes;
    const char *uid = agent_req_str(req, "uid");
    char err[200];
    if (agent_req_int(ag, req, id, "ranks", 1, 1 << 20, -1, &ranks) < 0 ||
        agent_req_int(ag, req, id, "rank0", 0, 1 << 20, -1, &rank0) < 0 ||
        agent_req_int(ag, req, id, "gpus", 1, 64, -1, &gpus) < 0 ||
        agent_req_int(ag, req, id, "warmup", 0, 100, 2, &warmup) < 0 ||
        agent_req_int(ag, req, id, "iters", 1, 10000, 10, &iters) < 0 ||
        agent_req_int(ag, req, id, "seconds", 1, NCCL_SECONDS_MAX, 30, &seconds) < 0)
        return;
    if (ranks < 0 || rank0 < 0 || gpus < 0 || rank0 + gpus > ranks) {
        agent_send_error(ag, id, "bench_nccl: needs \"ranks\", \"rank0\" and \"gpus\" with rank0 + gpus <= ranks");
        return;
    }
    if (!json_real_in(cJSON_GetObjectItemCaseSensitive(req, "bytes"), 4, (double)(1ull << 36), &bytes)) {
        agent_send_error(ag, id, "bench_nccl: \"bytes\" must be a number from 4 to 2^36");
        return;
    }
    if (uid && (strlen(uid) != 2 * BENCH_NCCL_ID_BYTES || strspn(uid, "0123456789abcdef") != strlen(uid))) {
        agent_send_error(ag, id, "bench_nccl: \"uid\" must be %d lower-case hex digits", 2 * BENCH_NCCL_ID_BYTES);
        return;
    }
    if (running) {
        agent_send_error(ag, id, "bench_nccl: an NCCL measurement is running on this node already");
        return;
    }
    int env_ok;
    char **envp = env_build(ag, req, id, &env_ok);
    if (!env_ok) return;
    char a_ranks[24], a_rank0[24], a_gpus[24], a_bytes[32], a_warm[24], a_iters[24];
    snprintf(a_ranks, sizeof a_ranks, "%ld", ranks);
    snprintf(a_rank0, sizeof a_rank0, "%ld", rank0);
    snprintf(a_gpus, sizeof a_gpus, "%ld", gpus);
    snprintf(a_bytes, sizeof a_bytes, "%.0f", floor(bytes / 4) * 4);
    snprintf(a_warm, sizeof a_warm, "%ld", warmup);
    snprintf(a_iters, sizeof a_iters, "%ld", iters);
    char *argv[] = { "/proc/self/exe", "--bench-nccl", a_ranks, a_rank0, a_gpus, a_bytes, a_warm, a_iters,
                     (char *)(uid ? uid : "-"), NULL };
    struct nccl_job *j = xcalloc(1, sizeof *j);
    j->id = id ? cJSON_Duplicate(id, 1) : NULL;
    j->ranks = ranks;
    j->gpus = gpus;
    j->iters = iters;
    j->bytes = floor(bytes / 4) * 4;
    j->seconds = (double)seconds;
    j->t0_ns = mono_ns();
    running = j;
    j->proc = agent_bench_proc_start(ag, argv, envp, -1, mono_ms() + seconds * 1000, NCCL_OUT_CAP, on_line, on_end, j,
                                     err, sizeof err);
    env_free(envp);
    if (!j->proc) {
        answer(ag, j, -1, err, "own");
        running = NULL;
        cJSON_Delete(j->id);
        free(j);
    }
}

/* {"op":"bench_nccl_stop","reason":"..."}: the running measurement ends now, its answer saying
 * the reason (the controller's: which peer failed). */
void agent_bench_nccl_stop_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const char *reason = agent_req_str(req, "reason");
    char text[200];
    cJSON *m = agent_reply_new(WIRE_EV_BENCH_NCCL_STOP, id);
    cJSON_AddBoolToObject(m, "stopped", running != NULL);
    if (running) {
        snprintf(text, sizeof text, "%s", reason ? reason : "bench_nccl_stop");
        running->stop_reason = xstrdup(agent_exec_clean(text));
        agent_bench_proc_kill(ag, running->proc);
    }
    agent_send(ag, m);
}
