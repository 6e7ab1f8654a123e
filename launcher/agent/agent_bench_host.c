/* bench_host: this node's CPU memory bandwidth and each GPU's speed (agent_bench_gpu.c). The
 * work blocks (a memcpy of 256 MiB, CUDA calls that wait for the GPU), so it runs on a thread of
 * its own, as the NVML sampler does (agent_nvml.c); each result crosses a pipe to the loop as
 * one fixed-size record (one atomic write), and the loop answers when the thread says it is
 * done, or at the deadline with what came so far: a GPU that hangs in a call delays nothing
 * but its own entry. One measurement at a time, since two would measure each other. */
#include "agent_bench.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_bench_gpu.h"
#include "agent_exec.h"
#include "agent_gpu.h"
#include "util/util.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

#define HOST_CPU_BYTES ((size_t)256 << 20)
#define HOST_CPU_REPS 5
#define HOST_CPU_NS 1000000000LL      /* copying stops after this much, reps or not */
#define HOST_GPU_SECONDS 20.0
#define HOST_GPU_SECONDS_MAX 600.0
/* The loop's deadline beyond gpu_seconds: the CPU part (filling and copying 256 MiB), and a
 * GPU call that overruns its share. */
#define HOST_SLACK_MS 8000

enum host_kind { HOST_CPU, HOST_GPU, HOST_GPU_ERROR, HOST_NCCL, HOST_DONE };

struct host_msg {
    int kind;
    double value;             /* HOST_CPU: GB/s, < 0 unknown */
    struct bench_gpu gpu;     /* HOST_GPU */
    char text[240];           /* HOST_GPU_ERROR; HOST_NCCL: NCCL's version */
};
_Static_assert(sizeof(struct host_msg) <= PIPE_BUF, "a record is one atomic pipe write");

struct host_job {
    int fd;                   /* the pipe's write end */
    double gpu_seconds;
};

struct host_wait {            /* the loop's side */
    cJSON *msg, *gpus;        /* the answer being filled, its "gpus" */
    int64_t t0_ns;
    unsigned char buf[sizeof(struct host_msg)];
    size_t got;
};

static atomic_int host_busy;  /* a thread is measuring (set by the op, cleared by the thread) */

/* Values whose every 16-bit half is a normal bf16 in [2^-9, 2^-1) with a random sign and
 * mantissa, so that each 32-bit word is a normal fp32 too: matrices of noise, as in training. */
static void fill_random(uint16_t *p, size_t n)
{
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)mono_ns();
    for (size_t i = 0; i < n; i++) {
        if ((i & 3) == 0) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        uint16_t r = (uint16_t)(x >> (16 * (i & 3)));
        p[i] = (uint16_t)((r & 0x807f) | ((118u + ((r >> 8) & 7u)) << 7));
    }
}

/* One thread's memcpy of 256 MiB, the best of a few, as read plus written bytes (STREAM's
 * "Copy" counts both). *fill keeps the source (random data) for the GPUs. */
static double cpu_mem_gbs(void **fill)
{
    unsigned char *src = malloc(HOST_CPU_BYTES), *dst = malloc(HOST_CPU_BYTES);
    double best = -1;
    *fill = NULL;
    if (!src || !dst) {
        free(src);
        free(dst);
        return -1;
    }
    fill_random((uint16_t *)src, HOST_CPU_BYTES / 2);
    memset(dst, 0, HOST_CPU_BYTES);   /* its pages faulted in before the clock starts */
    int64_t spent = 0;
    for (int i = 0; i < HOST_CPU_REPS && spent < HOST_CPU_NS; i++) {
        int64_t t0 = mono_ns();
        memcpy(dst, src, HOST_CPU_BYTES);
        int64_t dt = mono_ns() - t0;
        spent += dt;
        if (dt > 0 && (best < 0 || dt < best)) best = (double)dt;
    }
    /* read back through volatile: the copies cannot be optimised away */
    if (((volatile unsigned char *)dst)[HOST_CPU_BYTES - 1] != src[HOST_CPU_BYTES - 1]) best = -1;
    free(dst);
    *fill = src;
    return best > 0 ? 2.0 * (double)HOST_CPU_BYTES / (best / 1e9) / 1e9 : -1;
}

static void post(int fd, struct host_msg *m)
{
    (void)util_write_all(fd, m, sizeof *m);   /* fails only when the loop gave up waiting */
}

static void post_gpu(const struct bench_gpu *g, void *ctx)
{
    struct host_msg m = { .kind = HOST_GPU, .gpu = *g };
    post(*(int *)ctx, &m);
}

static void *host_main(void *arg)
{
    struct host_job *j = arg;
    struct host_msg m = { .kind = HOST_CPU };
    void *fill;
    m.value = cpu_mem_gbs(&fill);
    post(j->fd, &m);
    m = (struct host_msg){ .kind = HOST_GPU_ERROR };
    agent_bench_gpu_run(j->gpu_seconds, fill, fill ? HOST_CPU_BYTES : 0, post_gpu, &j->fd, m.text,
                        sizeof m.text);
    if (m.text[0]) post(j->fd, &m);
    /* which NCCL the node has, as the facts find it: the controller asks bench_nccl of the nodes
     * with GPUs and NCCL only */
    char *nccl = agent_gpu_nccl_version(getenv("CUDA_HOME"), NULL);
    if (nccl) {
        m = (struct host_msg){ .kind = HOST_NCCL };
        snprintf(m.text, sizeof m.text, "%s", nccl);
        post(j->fd, &m);
        free(nccl);
    }
    m = (struct host_msg){ .kind = HOST_DONE };
    post(j->fd, &m);
    free(fill);
    close(j->fd);
    free(j);
    atomic_store(&host_busy, 0);
    return NULL;
}

/* A figure to two decimals, null when it was not measured. */
static cJSON *figure(double v)
{
    return v < 0 || !isfinite(v) ? cJSON_CreateNull() : cJSON_CreateNumber(round(v * 100) / 100);
}

static void add_figure(cJSON *o, const char *name, double v)
{
    cJSON_AddItemToObject(o, name, figure(v));
}

static void add_text(cJSON *o, const char *name, const char *s)
{
    if (s[0]) cJSON_AddStringToObject(o, name, s);
    else cJSON_AddNullToObject(o, name);
}

static void take(struct host_wait *hw, const struct host_msg *m)
{
    if (m->kind == HOST_CPU) {
        cJSON_ReplaceItemInObjectCaseSensitive(hw->msg, "cpu_mem_gbs", figure(m->value));
    } else if (m->kind == HOST_GPU) {
        const struct bench_gpu *g = &m->gpu;
        cJSON *o = cJSON_CreateObject();
        char name[sizeof g->name], cc[sizeof g->cc], error[sizeof g->error];
        /* from our own thread, but still C strings only up to their arrays */
        snprintf(name, sizeof name, "%s", g->name);
        snprintf(cc, sizeof cc, "%s", g->cc);
        snprintf(error, sizeof error, "%s", g->error);
        cJSON_AddNumberToObject(o, "index", g->index);
        add_text(o, "name", name);
        add_figure(o, "tf32_tflops", g->tf32_tflops);
        add_figure(o, "bf16_tflops", g->bf16_tflops);
        add_figure(o, "d2d_gbs", g->d2d_gbs);
        add_figure(o, "h2d_gbs", g->h2d_gbs);
        if (g->memory_mib < 0) cJSON_AddNullToObject(o, "memory_mib");
        else cJSON_AddNumberToObject(o, "memory_mib", g->memory_mib);
        add_text(o, "cc", cc);
        add_text(o, "error", error);
        cJSON_AddItemToArray(hw->gpus, o);
    } else if (m->kind == HOST_NCCL) {
        char text[sizeof m->text];
        snprintf(text, sizeof text, "%s", m->text);
        cJSON_ReplaceItemInObjectCaseSensitive(hw->msg, "nccl", cJSON_CreateString(agent_exec_clean(text)));
    } else if (m->kind == HOST_GPU_ERROR) {
        char text[sizeof m->text];
        snprintf(text, sizeof text, "%s", m->text);
        cJSON_ReplaceItemInObjectCaseSensitive(hw->msg, "gpu_error", cJSON_CreateString(text));
    }
}

static void host_answer(struct agent *ag, struct agent_watch *w, const char *gpu_error)
{
    struct host_wait *hw = w->ctx;
    const cJSON *had = cJSON_GetObjectItemCaseSensitive(hw->msg, "gpu_error");
    if (gpu_error && cJSON_IsNull(had))
        cJSON_ReplaceItemInObjectCaseSensitive(hw->msg, "gpu_error", cJSON_CreateString(gpu_error));
    cJSON_AddNumberToObject(hw->msg, "seconds", round((double)(mono_ns() - hw->t0_ns) / 1e6) / 1e3);
    agent_send(ag, hw->msg);
    hw->msg = NULL;
    agent_watch_del(ag, w);   /* a thread still measuring finds the pipe closed and ends */
}

static void host_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct host_wait *hw = w->ctx;
    if (!revents) {
        host_answer(ag, w, "timed out: gpu_seconds and the slack ran out; GPUs not listed were not measured");
        return;
    }
    for (;;) {
        ssize_t n = read(w->fd, hw->buf + hw->got, sizeof hw->buf - hw->got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            host_answer(ag, w, "the measuring thread ended early");
            return;
        }
        hw->got += (size_t)n;
        if (hw->got < sizeof hw->buf) continue;
        struct host_msg m;
        memcpy(&m, hw->buf, sizeof m);
        hw->got = 0;
        if (m.kind == HOST_DONE) {
            host_answer(ag, w, NULL);
            return;
        }
        take(hw, &m);
    }
}

static void host_wait_free(void *ctx)
{
    struct host_wait *hw = ctx;
    cJSON_Delete(hw->msg);
    free(hw);
}

void agent_bench_host_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(req, "gpu_seconds");
    double seconds = HOST_GPU_SECONDS;
    int fds[2];
    pthread_t th;
    if (sv && !json_real_in(sv, 0.1, HOST_GPU_SECONDS_MAX, &seconds)) {
        agent_send_error(ag, id, "bench_host: \"gpu_seconds\" must be a number from 0.1 to %g",
                         HOST_GPU_SECONDS_MAX);
        return;
    }
    if (atomic_exchange(&host_busy, 1)) {
        agent_send_error(ag, id, "bench_host: a measurement is running on this node already");
        return;
    }
    if (pipe2(fds, O_CLOEXEC) < 0) {
        atomic_store(&host_busy, 0);
        agent_send_error(ag, id, "bench_host: pipe: %s", strerror(errno));
        return;
    }
    struct host_job *j = xcalloc(1, sizeof *j);
    j->fd = fds[1];
    j->gpu_seconds = seconds;
    if (pthread_create(&th, NULL, host_main, j) != 0) {
        close(fds[0]);
        close(fds[1]);
        free(j);
        atomic_store(&host_busy, 0);
        agent_send_error(ag, id, "bench_host: cannot start the measuring thread");
        return;
    }
    pthread_detach(th);
    fd_set_nonblock(fds[0]);
    struct host_wait *hw = xcalloc(1, sizeof *hw);
    hw->t0_ns = mono_ns();
    hw->msg = agent_reply_new(WIRE_EV_BENCH_HOST, id);
    cJSON_AddNullToObject(hw->msg, "cpu_mem_gbs");
    hw->gpus = cJSON_AddArrayToObject(hw->msg, "gpus");
    cJSON_AddNullToObject(hw->msg, "gpu_error");
    cJSON_AddNullToObject(hw->msg, "nccl");
    struct agent_watch *w = agent_watch_add(ag, fds[0], POLLIN, host_ready, hw, host_wait_free);
    w->deadline_ms = mono_ms() + (int64_t)(seconds * 1000) + HOST_SLACK_MS;
}
