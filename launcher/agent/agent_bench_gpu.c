/* GPU figures for bench_host: see agent_bench_gpu.h. The libraries are found as the facts find
 * NCCL and the runtime (agent_gpu.c) and left loaded once loaded (unloading CUDA libraries is
 * known to crash at exit); each GPU's context is destroyed when its figures are taken, so the
 * agent holds no GPU memory while the ranks train. */
#include "agent_bench_gpu.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* The CUDA runtime's and cuBLAS's ABI as their headers declare it, only what is used here, so
 * the agent builds without the toolkit: CUDA Runtime API reference (docs.nvidia.com/cuda/
 * cuda-runtime-api: cudaError_t, cudaMemcpyKind, cudaDeviceAttr, cudaDeviceProp) and cuBLAS
 * reference (docs.nvidia.com/cuda/cublas: cublasGemmEx, cudaDataType_t, cublasComputeType_t,
 * cublasGemmAlgo_t), the same numbers since CUDA 11. */
typedef int cuda_err;                   /* cudaError_t; 0 is cudaSuccess */
typedef int cublas_status;              /* cublasStatus_t; 0 is CUBLAS_STATUS_SUCCESS */
typedef void *cuda_event;               /* cudaEvent_t */
typedef void *cublas_handle;            /* cublasHandle_t */
#define CUDA_MEMCPY_H2D 1               /* cudaMemcpyHostToDevice */
#define CUDA_MEMCPY_D2D 3               /* cudaMemcpyDeviceToDevice */
#define CUDA_ATTR_CC_MAJOR 75           /* cudaDevAttrComputeCapabilityMajor */
#define CUDA_ATTR_CC_MINOR 76           /* cudaDevAttrComputeCapabilityMinor */
#define CUDA_R_32F 0
#define CUDA_R_16BF 14
#define CUBLAS_OP_N 0
#define CUBLAS_COMPUTE_32F 68
#define CUBLAS_COMPUTE_32F_FAST_TF32 77
#define CUBLAS_GEMM_DEFAULT (-1)
/* cudaDeviceProp is about 1 KiB and grows with versions; its first member is char name[256] in
 * every one. Only the name is read from it. */
#define CUDA_PROP_BYTES 8192

#define GEMM_N 8192
#define FP32_MAT ((size_t)GEMM_N * GEMM_N * 4)      /* 256 MiB */
#define BF16_MAT ((size_t)GEMM_N * GEMM_N * 2)
#define H2D_BYTES FP32_MAT
#define D2D_BYTES ((size_t)1 << 30)
#define REPS_MAX 20

struct cuda_api {
    void *rt, *blas;
    int major;                          /* the runtime's: which cuBLAS matches it */
    cuda_err (*count)(int *);
    cuda_err (*set_device)(int);
    cuda_err (*props)(void *, int);
    cuda_err (*attr)(int *, int, int);
    cuda_err (*mem_info)(size_t *, size_t *);
    cuda_err (*dmalloc)(void **, size_t);
    cuda_err (*dfree)(void *);
    cuda_err (*hmalloc)(void **, size_t);
    cuda_err (*hfree)(void *);
    cuda_err (*copy)(void *, const void *, size_t, int, void *);
    cuda_err (*ev_create)(cuda_event *);
    cuda_err (*ev_destroy)(cuda_event);
    cuda_err (*ev_record)(cuda_event, void *);
    cuda_err (*ev_sync)(cuda_event);
    cuda_err (*ev_elapsed)(float *, cuda_event, cuda_event);
    cuda_err (*reset)(void);
    cuda_err (*version)(int *);
    const char *(*error_string)(cuda_err);
    cublas_status (*blas_create)(cublas_handle *);
    cublas_status (*blas_destroy)(cublas_handle);
    cublas_status (*gemm)(cublas_handle, int, int, int, int, int, const void *, const void *, int,
                          int, const void *, int, int, const void *, void *, int, int, int, int);
    const char *(*blas_string)(cublas_status);
};

static struct cuda_api api;             /* loaded once; one measuring thread at a time */

static void *sym(void *lib, const char *a, const char *b)
{
    void *p = dlsym(lib, a);
    return p || !b ? p : dlsym(lib, b);
}

static void *open_first(const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        void *h = names[i] ? dlopen(names[i], RTLD_LAZY | RTLD_LOCAL) : NULL;
        if (h) return h;
    }
    return NULL;
}

/* cuBLAS of the runtime's major version, from the runtime's directory first. */
static void blas_load(struct cuda_api *a)
{
    char *beside = NULL, *plain = xasprintf("libcublas.so.%d", a->major);
    Dl_info info;
    if (dladdr(*(void **)&a->count, &info) && info.dli_fname && strrchr(info.dli_fname, '/'))
        beside = xasprintf("%.*s/libcublas.so.%d", (int)(strrchr(info.dli_fname, '/') - info.dli_fname),
                           info.dli_fname, a->major);
    const char *names[] = { beside, plain, "libcublas.so" };
    a->blas = open_first(names, 3);
    free(beside);
    free(plain);
    if (!a->blas) return;
    *(void **)&a->blas_create = sym(a->blas, "cublasCreate_v2", NULL);
    *(void **)&a->blas_destroy = sym(a->blas, "cublasDestroy_v2", NULL);
    *(void **)&a->gemm = sym(a->blas, "cublasGemmEx", NULL);
    *(void **)&a->blas_string = sym(a->blas, "cublasGetStatusString", NULL);   /* 11.4.2 on */
    if (!a->blas_create || !a->blas_destroy || !a->gemm) a->blas = NULL;   /* left loaded */
}

static int api_load(struct cuda_api *a, char *err, size_t errlen)
{
    if (a->rt) return 0;
    const char *home = getenv("CUDA_HOME");
    char *in_home = home ? xasprintf("%s/lib64/libcudart.so", home) : NULL;
    const char *names[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                            "libcudart.so.11", "libcudart.so", in_home,
                            "/usr/local/cuda/lib64/libcudart.so" };
    void *rt = open_first(names, 7);
    free(in_home);
    if (!rt) {
        snprintf(err, errlen, "no CUDA runtime (libcudart.so.13, .12 or .11 not found)");
        return -1;
    }
    *(void **)&a->count = sym(rt, "cudaGetDeviceCount", NULL);
    *(void **)&a->set_device = sym(rt, "cudaSetDevice", NULL);
    *(void **)&a->props = sym(rt, "cudaGetDeviceProperties_v2", "cudaGetDeviceProperties");
    *(void **)&a->attr = sym(rt, "cudaDeviceGetAttribute", NULL);
    *(void **)&a->mem_info = sym(rt, "cudaMemGetInfo", NULL);
    *(void **)&a->dmalloc = sym(rt, "cudaMalloc", NULL);
    *(void **)&a->dfree = sym(rt, "cudaFree", NULL);
    *(void **)&a->hmalloc = sym(rt, "cudaMallocHost", NULL);
    *(void **)&a->hfree = sym(rt, "cudaFreeHost", NULL);
    *(void **)&a->copy = sym(rt, "cudaMemcpyAsync", NULL);
    *(void **)&a->ev_create = sym(rt, "cudaEventCreate", NULL);
    *(void **)&a->ev_destroy = sym(rt, "cudaEventDestroy", NULL);
    *(void **)&a->ev_record = sym(rt, "cudaEventRecord", NULL);
    *(void **)&a->ev_sync = sym(rt, "cudaEventSynchronize", NULL);
    *(void **)&a->ev_elapsed = sym(rt, "cudaEventElapsedTime", NULL);
    *(void **)&a->reset = sym(rt, "cudaDeviceReset", NULL);
    *(void **)&a->version = sym(rt, "cudaRuntimeGetVersion", NULL);
    *(void **)&a->error_string = sym(rt, "cudaGetErrorString", NULL);
    void *const need[] = { *(void **)&a->count, *(void **)&a->set_device, *(void **)&a->attr,
        *(void **)&a->mem_info, *(void **)&a->dmalloc, *(void **)&a->dfree, *(void **)&a->hmalloc,
        *(void **)&a->hfree, *(void **)&a->copy, *(void **)&a->ev_create, *(void **)&a->ev_destroy,
        *(void **)&a->ev_record, *(void **)&a->ev_sync, *(void **)&a->ev_elapsed,
        *(void **)&a->reset, *(void **)&a->version, *(void **)&a->error_string };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!need[i]) {
            snprintf(err, errlen, "the CUDA runtime lacks a call the measurement needs");
            return -1;   /* left loaded, as always */
        }
    int v = 0;
    a->major = a->version(&v) == 0 && v > 0 ? v / 1000 : 12;
    a->rt = rt;
    blas_load(a);
    return 0;
}

/* One GPU's measurement: its buffers, events and handle, released at the end whatever happens. */
struct gpu_run {
    struct cuda_api *a;
    struct bench_gpu *g;
    void *host, *A, *B, *C, *A16, *B16, *src, *dst;
    cuda_event ev[2];
    cublas_handle h;
};

enum gpu_part { PART_H2D, PART_TF32, PART_BF16, PART_D2D };

static int cuda_ok(struct gpu_run *r, cuda_err e, const char *what)
{
    if (e == 0) return 1;
    const char *s = r->a->error_string(e);
    snprintf(r->g->error, sizeof r->g->error, "%s: %s", what, s ? s : "error");
    return 0;
}

static int part_once(struct gpu_run *r, enum gpu_part p)
{
    struct cuda_api *a = r->a;
    const float one = 1.0f, zero = 0.0f;
    cublas_status st = 0;
    switch (p) {
    case PART_H2D: return cuda_ok(r, a->copy(r->A, r->host, H2D_BYTES, CUDA_MEMCPY_H2D, NULL), "cudaMemcpyAsync (host to device)");
    case PART_D2D: return cuda_ok(r, a->copy(r->dst, r->src, D2D_BYTES, CUDA_MEMCPY_D2D, NULL), "cudaMemcpyAsync (device to device)");
    case PART_TF32:
        st = a->gemm(r->h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, r->A, CUDA_R_32F,
                     GEMM_N, r->B, CUDA_R_32F, GEMM_N, &zero, r->C, CUDA_R_32F, GEMM_N,
                     CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
        break;
    case PART_BF16:
        st = a->gemm(r->h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, r->A16, CUDA_R_16BF,
                     GEMM_N, r->B16, CUDA_R_16BF, GEMM_N, &zero, r->C, CUDA_R_32F, GEMM_N,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        break;
    }
    if (st == 0) return 1;
    const char *s = a->blas_string ? a->blas_string(st) : NULL;
    if (s) snprintf(r->g->error, sizeof r->g->error, "cublasGemmEx: %s", s);
    else snprintf(r->g->error, sizeof r->g->error, "cublasGemmEx: cuBLAS status %d", st);
    return 0;
}

/* ms between the two events around reps runs of the part. */
static int part_timed(struct gpu_run *r, enum gpu_part p, int reps, float *ms)
{
    struct cuda_api *a = r->a;
    if (!cuda_ok(r, a->ev_record(r->ev[0], NULL), "cudaEventRecord")) return 0;
    for (int i = 0; i < reps; i++)
        if (!part_once(r, p)) return 0;
    return cuda_ok(r, a->ev_record(r->ev[1], NULL), "cudaEventRecord") &&
           cuda_ok(r, a->ev_sync(r->ev[1]), "cudaEventSynchronize") &&
           cuda_ok(r, a->ev_elapsed(ms, r->ev[0], r->ev[1]), "cudaEventElapsedTime");
}

/* Seconds per run: a timed warm-up says how many runs fit in budget_ns (1 to REPS_MAX), then
 * those runs are timed together. < 0 after an error. */
static double part_seconds(struct gpu_run *r, enum gpu_part p, int64_t budget_ns)
{
    float ms = 0;
    if (!part_timed(r, p, 1, &ms)) return -1;
    int reps = ms > 0 ? (int)((double)budget_ns / 1e6 / ms) : REPS_MAX;
    reps = reps < 1 ? 1 : reps > REPS_MAX ? REPS_MAX : reps;
    if (!part_timed(r, p, reps, &ms)) return -1;
    return ms > 0 ? ms / 1e3 / reps : -1;
}

static void *dev_alloc(struct gpu_run *r, size_t n, const char *what)
{
    void *p = NULL;
    if (!cuda_ok(r, r->a->dmalloc(&p, n), what)) return NULL;
    return p;
}

static void run_free(struct gpu_run *r)
{
    struct cuda_api *a = r->a;
    void *dev[] = { r->A, r->B, r->C, r->A16, r->B16, r->src, r->dst };
    if (r->h) a->blas_destroy(r->h);
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) a->dfree(dev[i]);
    if (r->host) a->hfree(r->host);
    for (int i = 0; i < 2; i++)
        if (r->ev[i]) a->ev_destroy(r->ev[i]);
    *r = (struct gpu_run){ .a = a, .g = r->g };
}

/* Is there time for the next part? Else the GPU's error says which parts were left out. */
static int time_left(struct gpu_run *r, int64_t until_ns, const char *part)
{
    if (mono_ns() < until_ns) return 1;
    snprintf(r->g->error, sizeof r->g->error, "out of time (gpu_seconds) before the %s", part);
    return 0;
}

static void name_of(struct cuda_api *a, int dev, char *out, size_t cap)
{
    char *prop = a->props ? xcalloc(1, CUDA_PROP_BYTES) : NULL;
    size_t n = 0;
    if (prop && a->props(prop, dev) == 0)
        for (const char *p = prop; *p && p < prop + 255 && n + 1 < cap; p++)
            out[n++] = *p >= 0x20 && *p < 0x7f ? *p : '?';
    out[n] = '\0';
    free(prop);
}

static void gpu_measure(struct cuda_api *a, int dev, int64_t until_ns, const void *fill, size_t len,
                        struct bench_gpu *g)
{
    struct gpu_run r = { .a = a, .g = g };
    const double flop = 2.0 * GEMM_N * GEMM_N * GEMM_N;
    int major = -1, minor = -1;
    size_t mfree = 0, mtotal = 0;
    cublas_status st;
    double s;
    if (!cuda_ok(&r, a->set_device(dev), "cudaSetDevice")) return;
    name_of(a, dev, g->name, sizeof g->name);
    if (a->attr(&major, CUDA_ATTR_CC_MAJOR, dev) == 0 && a->attr(&minor, CUDA_ATTR_CC_MINOR, dev) == 0)
        snprintf(g->cc, sizeof g->cc, "%d.%d", major, minor);
    if (!cuda_ok(&r, a->mem_info(&mfree, &mtotal), "cudaMemGetInfo")) goto out;
    g->memory_mib = (double)(mtotal >> 20);
    if (!cuda_ok(&r, a->ev_create(&r.ev[0]), "cudaEventCreate") ||
        !cuda_ok(&r, a->ev_create(&r.ev[1]), "cudaEventCreate") ||
        !cuda_ok(&r, a->hmalloc(&r.host, H2D_BYTES), "cudaMallocHost (256 MiB)"))
        goto out;
    if (fill && len >= H2D_BYTES) memcpy(r.host, fill, H2D_BYTES);
    else memset(r.host, 0x3c, H2D_BYTES);   /* 0.0115 in fp32 and bf16 alike */
    if (!(r.A = dev_alloc(&r, FP32_MAT, "cudaMalloc (256 MiB)")) ||
        !(r.B = dev_alloc(&r, FP32_MAT, "cudaMalloc (256 MiB)")) ||
        !(r.C = dev_alloc(&r, FP32_MAT, "cudaMalloc (256 MiB)")))
        goto out;
    s = part_seconds(&r, PART_H2D, (until_ns - mono_ns()) / 8);
    if (s < 0) goto out;
    g->h2d_gbs = (double)H2D_BYTES / s / 1e9;
    /* the other operands from the same random host data */
    if (!cuda_ok(&r, a->copy(r.B, r.host, FP32_MAT, CUDA_MEMCPY_H2D, NULL), "cudaMemcpyAsync"))
        goto out;
    if (major >= 8 && (!(r.A16 = dev_alloc(&r, BF16_MAT, "cudaMalloc (128 MiB)")) ||
                       !(r.B16 = dev_alloc(&r, BF16_MAT, "cudaMalloc (128 MiB)")) ||
                       !cuda_ok(&r, a->copy(r.A16, r.host, BF16_MAT, CUDA_MEMCPY_H2D, NULL), "cudaMemcpyAsync") ||
                       !cuda_ok(&r, a->copy(r.B16, (char *)r.host + BF16_MAT, BF16_MAT, CUDA_MEMCPY_H2D, NULL), "cudaMemcpyAsync")))
        goto out;
    if (!a->blas) goto d2d;   /* said once for all GPUs */
    if (!time_left(&r, until_ns, "matrix products")) goto out;
    st = a->blas_create(&r.h);
    if (st != 0) {
        snprintf(g->error, sizeof g->error, "cublasCreate: %s",
                 a->blas_string ? a->blas_string(st) : "failed");
        goto out;
    }
    if ((s = part_seconds(&r, PART_TF32, (until_ns - mono_ns()) / 6)) < 0) goto out;
    g->tf32_tflops = flop / s / 1e12;
    if (major >= 8) {
        if (!time_left(&r, until_ns, "bf16 matrix product")) goto out;
        if ((s = part_seconds(&r, PART_BF16, (until_ns - mono_ns()) / 4)) < 0) goto out;
        g->bf16_tflops = flop / s / 1e12;
    }
d2d:
    run_free(&r);   /* the matrices' memory, before the copy's 2 GiB */
    if (!time_left(&r, until_ns, "device-to-device copy")) goto out;
    if (!cuda_ok(&r, a->ev_create(&r.ev[0]), "cudaEventCreate") ||
        !cuda_ok(&r, a->ev_create(&r.ev[1]), "cudaEventCreate") ||
        !(r.src = dev_alloc(&r, D2D_BYTES, "cudaMalloc (1 GiB)")) ||
        !(r.dst = dev_alloc(&r, D2D_BYTES, "cudaMalloc (1 GiB)")))
        goto out;
    if ((s = part_seconds(&r, PART_D2D, (until_ns - mono_ns()) / 2)) < 0) goto out;
    /* read and written, as CUDA's bandwidthTest counts it: comparable with the memory's peak */
    g->d2d_gbs = 2.0 * (double)D2D_BYTES / s / 1e9;
out:
    run_free(&r);
    a->reset();   /* the context and all it held: nothing of ours stays on the GPU */
}

int agent_bench_gpu_run(double seconds, const void *fill, size_t len,
                        void (*each)(const struct bench_gpu *g, void *ctx), void *ctx,
                        char *err, size_t errlen)
{
    int64_t until = mono_ns() + (int64_t)(seconds * 1e9);
    int n = 0;
    err[0] = '\0';
    if (api_load(&api, err, errlen) < 0) return 0;
    cuda_err e = api.count(&n);
    if (e != 0) {
        snprintf(err, errlen, "cudaGetDeviceCount: %s", api.error_string(e));
        return 0;
    }
    if (!api.blas)
        snprintf(err, errlen, "no cuBLAS (libcublas.so.%d not found): matrix products not measured",
                 api.major);
    for (int i = 0; i < n; i++) {
        struct bench_gpu g = { .index = i, .memory_mib = -1, .tf32_tflops = -1, .bf16_tflops = -1,
                               .d2d_gbs = -1, .h2d_gbs = -1 };
        int64_t now = mono_ns();
        if (now >= until)
            snprintf(g.error, sizeof g.error, "not measured: gpu_seconds (%g s) ran out", seconds);
        else
            gpu_measure(&api, i, now + (until - now) / (n - i), fill, len, &g);
        each(&g, ctx);
    }
    return n;
}
