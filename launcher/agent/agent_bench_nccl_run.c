/* The NCCL all-reduce's own process (`ddptop-agent --bench-nccl ...`, started by bench_nccl,
 * agent_bench_nccl.c): one rank per GPU of this node, as nccl-tests' all_reduce_perf runs them
 * in one process (ncclCommInitRank per device inside ncclGroupStart/End), an in-place float sum
 * of BYTES on each, WARMUP untimed then ITERS timed iterations. A process of its own, not a
 * thread of the agent: NCCL can block in a call forever (a peer that never joins, a stalled
 * link), and a process is what the agent can kill; the driver frees its GPU memory when it
 * dies. The agent itself loaded the CUDA runtime for bench_host, which a forked child could not
 * use again: hence an exec of our own binary.
 *
 * It prints lines, nothing else: "id <256 hex>" (the communicator's ncclUniqueId, made here
 * when asked: NCCL's bootstrap root runs in the process that made it), then "ok <us>" (the
 * slowest of its ranks' microseconds per iteration) or "error <text>". */
#include "agent_bench.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "util/util.h"

/* NCCL's ABI (nccl.h, the same since NCCL 2.0): ncclUniqueId is 128 bytes passed by value,
 * ncclResult_t 0 is ncclSuccess, ncclFloat32 is 7, ncclSum 0. The CUDA runtime's as in
 * agent_bench_gpu.c. Written out so that the agent builds and runs without either. */
struct nccl_uid { char internal[BENCH_NCCL_ID_BYTES]; };
typedef int nccl_res;
#define NCCL_FLOAT32 7
#define NCCL_SUM 0
#define GPUS_MAX 64

struct nccl_api {
    nccl_res (*get_id)(struct nccl_uid *);
    nccl_res (*init_rank)(void **, int, struct nccl_uid, int);
    nccl_res (*all_reduce)(const void *, void *, size_t, int, int, void *, void *);
    nccl_res (*group_start)(void);
    nccl_res (*group_end)(void);
    const char *(*error_string)(nccl_res);
    const char *(*last_error)(void *);      /* 2.13 on; NULL before */
    int (*count)(int *);
    int (*set_device)(int);
    int (*dmalloc)(void **, size_t);
    int (*stream_create)(void **);
    int (*stream_sync)(void *);
    const char *(*cuda_string)(int);
};

static void *open_first(const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        void *h = names[i] ? dlopen(names[i], RTLD_NOW | RTLD_LOCAL) : NULL;
        if (h) return h;
    }
    return NULL;
}

static const char *api_load(struct nccl_api *a)
{
    const char *home = getenv("CUDA_HOME");
    char *h1 = home ? xasprintf("%s/lib64/libnccl.so.2", home) : NULL;
    char *h2 = home ? xasprintf("%s/lib64/libcudart.so", home) : NULL;
    const char *nccl_names[] = { "libnccl.so.2", h1, "/usr/local/cuda/lib64/libnccl.so.2" };
    const char *rt_names[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so", h2,
                               "/usr/local/cuda/lib64/libcudart.so" };
    void *rt = open_first(rt_names, 6), *nccl = rt ? open_first(nccl_names, 3) : NULL;
    free(h1);
    free(h2);
    if (!rt) return "no CUDA runtime (libcudart.so.13, .12 or .11 not found)";
    if (!nccl) return "no NCCL (libnccl.so.2 not found)";
    *(void **)&a->get_id = dlsym(nccl, "ncclGetUniqueId");
    *(void **)&a->init_rank = dlsym(nccl, "ncclCommInitRank");
    *(void **)&a->all_reduce = dlsym(nccl, "ncclAllReduce");
    *(void **)&a->group_start = dlsym(nccl, "ncclGroupStart");
    *(void **)&a->group_end = dlsym(nccl, "ncclGroupEnd");
    *(void **)&a->error_string = dlsym(nccl, "ncclGetErrorString");
    *(void **)&a->last_error = dlsym(nccl, "ncclGetLastError");
    *(void **)&a->count = dlsym(rt, "cudaGetDeviceCount");
    *(void **)&a->set_device = dlsym(rt, "cudaSetDevice");
    *(void **)&a->dmalloc = dlsym(rt, "cudaMalloc");
    *(void **)&a->stream_create = dlsym(rt, "cudaStreamCreate");
    *(void **)&a->stream_sync = dlsym(rt, "cudaStreamSynchronize");
    *(void **)&a->cuda_string = dlsym(rt, "cudaGetErrorString");
    if (!a->get_id || !a->init_rank || !a->all_reduce || !a->group_start || !a->group_end ||
        !a->error_string)
        return "libnccl.so.2 lacks a call the measurement needs";
    if (!a->count || !a->set_device || !a->dmalloc || !a->stream_create || !a->stream_sync || !a->cuda_string)
        return "the CUDA runtime lacks a call the measurement needs";
    return NULL;
}

/* Our lines go here; stdout itself is /dev/null, since NCCL prints its NCCL_DEBUG lines there. */
static FILE *res;

/* "error CAUSE TEXT": CAUSE is "own" (this node's NCCL, CUDA or set-up failed) or "peer"
 * (NCCL's ncclRemoteError: another rank went away or the network between them failed), so
 * the controller tells whom to blame from a code, not from NCCL's wording. */
static int vfail(const char *cause, const char *fmt, va_list ap)
{
    char text[400];
    vsnprintf(text, sizeof text, fmt, ap);
    for (char *q = text; *q; q++)
        if (*q < 0x20 || *q > 0x7e) *q = '?';
    fprintf(res, "error %s %s\n", cause, text);
    fflush(res);
    return 1;
}

static int fail_as(const char *cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_as(const char *cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(cause, fmt, ap);
    va_end(ap);
    return 1;
}

#define fail(...) fail_as("own", __VA_ARGS__)

#define NCCL_REMOTE_ERROR 6   /* ncclRemoteError, nccl.h's value since 2.8 */

static int nccl_fail(struct nccl_api *a, const char *call, nccl_res r, void *comm)
{
    const char *detail = a->last_error ? a->last_error(comm) : NULL;
    char text[400];
    snprintf(text, sizeof text, "%s: %s%s%.200s", call, a->error_string(r), detail && *detail ? ": " : "",
             detail ? detail : "");
    return fail_as(r == NCCL_REMOTE_ERROR ? "peer" : "own", "%s", text);
}

static int hex_to_id(const char *hex, struct nccl_uid *id)
{
    if (strlen(hex) != 2 * sizeof id->internal) return -1;
    for (size_t i = 0; i < sizeof id->internal; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
        id->internal[i] = (char)v;
    }
    return 0;
}

static long arg_num(const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= lo && v <= hi ? v : lo - 1;
}

int agent_bench_nccl_main(int argc, char **argv)
{
    struct nccl_api a = { 0 };
    struct nccl_uid id;
    void *comm[GPUS_MAX] = { 0 }, *stream[GPUS_MAX] = { 0 }, *buf[GPUS_MAX] = { 0 };
    const char *why;
    int n = 0, e;
    nccl_res r;
    prctl(PR_SET_NAME, "ddptop-nccl");   /* not "exe" (the /proc/self/exe it was started as) in ps */
    int keep = dup(1), devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    res = keep >= 0 ? fdopen(keep, "w") : NULL;
    if (!res) return 1;
    if (devnull >= 0) dup2(devnull, 1);
    if (argc != 9) return fail("usage: ddptop-agent --bench-nccl RANKS RANK0 GPUS BYTES WARMUP ITERS ID|-");
    long ranks = arg_num(argv[2], 1, 1 << 20), rank0 = arg_num(argv[3], 0, ranks - 1);
    long ngpu = arg_num(argv[4], 1, GPUS_MAX), bytes = arg_num(argv[5], 4, 1L << 36);
    long warmup = arg_num(argv[6], 0, 100), iters = arg_num(argv[7], 1, 10000);
    if (ranks < 1 || rank0 < 0 || ngpu < 1 || bytes < 4 || warmup < 0 || iters < 1 || rank0 + ngpu > ranks)
        return fail("bad arguments");
    if ((why = api_load(&a))) return fail("%s", why);
    if ((e = a.count(&n)) != 0) return fail("cudaGetDeviceCount: %s", a.cuda_string(e));
    if (n < ngpu) return fail("%ld GPUs expected, the CUDA runtime sees %d", ngpu, n);
    if (strcmp(argv[8], "-") == 0) {
        if ((r = a.get_id(&id)) != 0) return nccl_fail(&a, "ncclGetUniqueId", r, NULL);
        char hex[2 * BENCH_NCCL_ID_BYTES + 1];
        util_hex(id.internal, sizeof id.internal, hex);
        fprintf(res, "id %s\n", hex);
        fflush(res);
    } else if (hex_to_id(argv[8], &id) < 0) {
        return fail("the unique id is not %d hex bytes", BENCH_NCCL_ID_BYTES);
    }
    if ((r = a.group_start()) != 0) return nccl_fail(&a, "ncclGroupStart", r, NULL);
    for (int d = 0; d < ngpu; d++) {
        if ((e = a.set_device(d)) != 0) return fail("cudaSetDevice(%d): %s", d, a.cuda_string(e));
        if ((r = a.init_rank(&comm[d], (int)ranks, id, (int)(rank0 + d))) != 0)
            return nccl_fail(&a, "ncclCommInitRank", r, comm[d]);
    }
    if ((r = a.group_end()) != 0) return nccl_fail(&a, "ncclCommInitRank", r, comm[0]);
    for (int d = 0; d < ngpu; d++) {
        if ((e = a.set_device(d)) != 0) return fail("cudaSetDevice(%d): %s", d, a.cuda_string(e));
        if ((e = a.dmalloc(&buf[d], (size_t)bytes)) != 0) return fail("cudaMalloc (%ld bytes): %s", bytes, a.cuda_string(e));
        if ((e = a.stream_create(&stream[d])) != 0) return fail("cudaStreamCreate: %s", a.cuda_string(e));
    }
    int64_t t0 = 0;
    for (long it = 0; it < warmup + iters; it++) {
        if (it == warmup) t0 = mono_ns();
        if ((r = a.group_start()) != 0) return nccl_fail(&a, "ncclGroupStart", r, NULL);
        for (int d = 0; d < ngpu; d++)
            if ((r = a.all_reduce(buf[d], buf[d], (size_t)bytes / 4, NCCL_FLOAT32, NCCL_SUM, comm[d], stream[d])) != 0)
                return nccl_fail(&a, "ncclAllReduce", r, comm[d]);
        if ((r = a.group_end()) != 0) return nccl_fail(&a, "ncclAllReduce", r, comm[0]);
        for (int d = 0; d < ngpu; d++)
            if ((e = a.stream_sync(stream[d])) != 0) return fail("cudaStreamSynchronize: %s", a.cuda_string(e));
    }
    double us = (double)(mono_ns() - t0) / 1e3 / (double)iters;
    fprintf(res, "ok %.3f\n", us);
    fflush(res);
    /* the communicators go with the process: ncclCommDestroy can wait on peers (2.18 on) */
    return 0;
}
