/* GPU micro-benchmarks for tests/bench/gpu.sh (make bench-gpu).
 *
 *   bench_gpu kernels [tf32|bf16|fp32]
 *     The model's matrix products through ops_cuda (bias and bias gradient included; in bf16
 *     with the operands' bf16 copies, as the trainer has them) against cublasGemmEx alone on
 *     the same shapes and precision, in TFLOP/s; the same products through cuBLASLt
 *     (ops_cuda_lt.h) without an epilogue, with the bias, with bias + GELU (forward) and with
 *     the bias gradient + dGELU (backward), and ops_cuda with cuBLASLt off (DDPTOP_CUBLASLT=0's
 *     path), each with its ratio to cuBLAS alone; and the memory-bound kernels (AdamW with and
 *     without the bf16 shadow, GELU forward/backward with and without bf16 copies, embedding
 *     forward and backward, softmax-xent forward and the trainer's fused forward+backward) in
 *     TB/s of the bytes they must move, as a fraction of the HBM peak (H100 SXM 3.35 TB/s,
 *     H200 4.8 TB/s; DDPTOP_HBM_PEAK_TBS overrides).
 *   bench_gpu probe
 *     Says how many GPUs are visible (or "no GPU: skipped").
 *   bench_gpu allreduce MIB BUCKET_MIB
 *     Run as W ranks (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT): MIB of float32
 *     averaged by the NCCL backend in BUCKET_MIB buckets (as the trainer does) against one plain
 *     ncclAllReduce of the same bytes on the same communicator. Rank 0 prints.
 *
 * Prints "no GPU: skipped (...)" and exits 0 when no GPU is visible. BENCH_GPU_QUICK=1 runs
 * small sizes and few repetitions: tests/it_gpu_fake.sh runs the whole bench that way on
 * fakecuda, so the bench itself is known to work before GPU time is spent on it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_bf16.h>

#include "comm_nccl.h"
#include "cuda_check.h"
#include "ops_cuda.h"
#include "ops_cuda_lt.h"

extern "C" {
#include "dist.h"
#include "store.h"
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int quick(void)
{
    const char *q = getenv("BENCH_GPU_QUICK");
    return q && *q && strcmp(q, "0");
}

static double hbm_peak_tbs(const char *name)
{
    const char *env = getenv("DDPTOP_HBM_PEAK_TBS");
    if (env && *env) return atof(env);
    if (strstr(name, "H200")) return 4.8;
    if (strstr(name, "H100") && strstr(name, "PCIe")) return 2.0;
    if (strstr(name, "H100") && strstr(name, "NVL")) return 3.9;
    if (strstr(name, "H100")) return 3.35;
    return 0;   /* unknown: no fraction printed */
}

/* ---- matrix products ---------------------------------------------------------------------- */

struct gemm_case {
    int B, IC, OC;
    float *inp, *w, *bias, *out, *dout, *dw, *db, *dinp;
    float *pre, *pre_in;   /* GELU's aux: this layer's pre-activation, the layer before's */
    ops_bf16 *inp16, *w16, *dout16;
    cublasHandle_t h;
    enum ops_precision prec;
};

static void ours_fwd(void *p)
{
    gemm_case *c = (gemm_case *)p;
    bool b16 = c->prec == OPS_PREC_BF16;
    ops_cuda_linear_forward(c->out, c->inp, b16 ? c->inp16 : NULL, c->w, b16 ? c->w16 : NULL,
                            c->bias, c->B, c->IC, c->OC);
}

static void ours_bwd(void *p)
{
    gemm_case *c = (gemm_case *)p;
    bool b16 = c->prec == OPS_PREC_BF16;
    ops_cuda_linear_backward(c->dinp, c->dw, c->db, c->dout, b16 ? c->dout16 : NULL, c->inp,
                             b16 ? c->inp16 : NULL, c->w, b16 ? c->w16 : NULL, c->B, c->IC,
                             c->OC);
}

/* cuBLASLt: no epilogue (bias and dbias NULL), the bias, bias + GELU; backward with the
 * bias gradient (BGRADB) and dGELU; in bf16 with the copies, as ops_cuda's. A refused case
 * would leave a product out: say so. */
static void lt_done(int queued)
{
    if (!queued) rt_fatal(__FILE__, __LINE__, "cuBLASLt refused a benchmark product");
}
static void lt_fwd(gemm_case *c, const float *bias, float *pre)
{
    bool b16 = c->prec == OPS_PREC_BF16;
    lt_done(ops_cuda_lt_forward(c->out, pre, c->inp, b16 ? c->inp16 : NULL, c->w,
                                b16 ? c->w16 : NULL, bias, c->B, c->IC, c->OC));
}
static void lt_fwd_plain(void *p) { lt_fwd((gemm_case *)p, NULL, NULL); }
static void lt_fwd_bias(void *p) { lt_fwd((gemm_case *)p, ((gemm_case *)p)->bias, NULL); }
static void lt_fwd_gelu(void *p)
{
    lt_fwd((gemm_case *)p, ((gemm_case *)p)->bias, ((gemm_case *)p)->pre);
}
static void lt_bwd(gemm_case *c, float *db, const float *pre_in)
{
    bool b16 = c->prec == OPS_PREC_BF16;
    lt_done(ops_cuda_lt_backward_weight(c->dw, db, c->dout, b16 ? c->dout16 : NULL, c->inp,
                                        b16 ? c->inp16 : NULL, c->B, c->IC, c->OC));
    lt_done(ops_cuda_lt_backward_input(c->dinp, pre_in, c->dout, b16 ? c->dout16 : NULL, c->w,
                                       b16 ? c->w16 : NULL, c->B, c->IC, c->OC));
}
static void lt_bwd_plain(void *p) { lt_bwd((gemm_case *)p, NULL, NULL); }
static void lt_bwd_epi(void *p)
{
    lt_bwd((gemm_case *)p, ((gemm_case *)p)->db, ((gemm_case *)p)->pre_in);
}

/* cuBLAS alone: the same products, operands already in the compute format. */
static void raw_gemm(gemm_case *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                     int k, const float *A, const ops_bf16 *A16, int lda, const float *B,
                     const ops_bf16 *B16, int ldb, float *C, int ldc)
{
    const float one = 1.0f, zero = 0.0f;
    if (c->prec == OPS_PREC_BF16)
        cublasCheck(cublasGemmEx(c->h, ta, tb, m, n, k, &one, A16, CUDA_R_16BF, lda, B16,
                                 CUDA_R_16BF, ldb, &zero, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    else
        cublasCheck(cublasGemmEx(c->h, ta, tb, m, n, k, &one, A, CUDA_R_32F, lda, B, CUDA_R_32F,
                                 ldb, &zero, C, CUDA_R_32F, ldc,
                                 c->prec == OPS_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                          : CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

static void raw_fwd(void *p)
{
    gemm_case *c = (gemm_case *)p;
    raw_gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, c->OC, c->B, c->IC, c->w, c->w16, c->IC, c->inp,
             c->inp16, c->IC, c->out, c->OC);
}

static void raw_bwd(void *p)
{
    gemm_case *c = (gemm_case *)p;
    raw_gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, c->IC, c->OC, c->B, c->inp, c->inp16, c->IC, c->dout,
             c->dout16, c->OC, c->dw, c->IC);
    raw_gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, c->IC, c->B, c->OC, c->w, c->w16, c->IC, c->dout,
             c->dout16, c->OC, c->dinp, c->IC);
}

static float *dev_floats(size_t n, float scale)
{
    float *h = (float *)malloc(n * sizeof(float));
    uint64_t s = n * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        h[i] = scale * ((float)(s >> 40) / 16777216.0f - 0.5f);
    }
    float *d = (float *)ops_cuda_alloc(n * sizeof(float));
    ops_cuda_upload(d, h, n * sizeof(float));
    free(h);
    return d;
}

static void bench_gemm(int B, int IC, int OC, enum ops_precision prec, cublasHandle_t h)
{
    gemm_case c;
    memset(&c, 0, sizeof c);
    c.B = B, c.IC = IC, c.OC = OC, c.h = h, c.prec = prec;
    c.inp = dev_floats((size_t)B * IC, 2), c.w = dev_floats((size_t)OC * IC, 0.1f);
    c.bias = dev_floats(OC, 1), c.dout = dev_floats((size_t)B * OC, 0.01f);
    c.out = (float *)ops_cuda_alloc((size_t)B * OC * 4);
    c.dw = (float *)ops_cuda_alloc((size_t)OC * IC * 4);
    c.db = (float *)ops_cuda_alloc((size_t)OC * 4);
    c.dinp = (float *)ops_cuda_alloc((size_t)B * IC * 4);
    c.pre = (float *)ops_cuda_alloc((size_t)B * OC * 4);
    c.pre_in = dev_floats((size_t)B * IC, 2);
    c.inp16 = (ops_bf16 *)ops_cuda_alloc((size_t)B * IC * 2);
    c.w16 = (ops_bf16 *)ops_cuda_alloc((size_t)OC * IC * 2);
    c.dout16 = (ops_bf16 *)ops_cuda_alloc((size_t)B * OC * 2);
    ops_cuda_to_bf16(c.inp16, c.inp, (size_t)B * IC);
    ops_cuda_to_bf16(c.w16, c.w, (size_t)OC * IC);
    ops_cuda_to_bf16(c.dout16, c.dout, (size_t)B * OC);
    int reps = quick() ? 2 : 20;
    double flop = 2.0 * B * IC * OC;
    double of = ops_cuda_time_ms(ours_fwd, &c, reps), rf = ops_cuda_time_ms(raw_fwd, &c, reps);
    double ob = ops_cuda_time_ms(ours_bwd, &c, reps), rb = ops_cuda_time_ms(raw_bwd, &c, reps);
    printf("gemm %-5s B=%-6d IC=%-5d OC=%-5d forward  ours %7.1f TFLOP/s  cuBLAS alone %7.1f "
           "TFLOP/s  ratio %.2f\n", prec == OPS_PREC_BF16 ? "bf16" : prec == OPS_PREC_TF32 ?
           "tf32" : "fp32", B, IC, OC, flop / of / 1e9, flop / rf / 1e9, rf / of);
    printf("gemm %-5s B=%-6d IC=%-5d OC=%-5d backward ours %7.1f TFLOP/s  cuBLAS alone %7.1f "
           "TFLOP/s  ratio %.2f\n", prec == OPS_PREC_BF16 ? "bf16" : prec == OPS_PREC_TF32 ?
           "tf32" : "fp32", B, IC, OC, 2 * flop / ob / 1e9, 2 * flop / rb / 1e9, rb / ob);
    double lf[3] = { ops_cuda_time_ms(lt_fwd_plain, &c, reps), ops_cuda_time_ms(lt_fwd_bias, &c,
                     reps), ops_cuda_time_ms(lt_fwd_gelu, &c, reps) };
    double lb[2] = { ops_cuda_time_ms(lt_bwd_plain, &c, reps),
                     ops_cuda_time_ms(lt_bwd_epi, &c, reps) };
    ops_cuda_lt_enable(0);
    double nf = ops_cuda_time_ms(ours_fwd, &c, reps), nb = ops_cuda_time_ms(ours_bwd, &c, reps);
    ops_cuda_lt_enable(1);
    const char *pn = prec == OPS_PREC_BF16 ? "bf16" : prec == OPS_PREC_TF32 ? "tf32" : "fp32";
    /* TFLOP/s, then the ratio to cuBLAS alone */
    printf("lt   %-5s B=%-6d IC=%-5d OC=%-5d forward  plain %7.1f (%.2f)  +bias %7.1f (%.2f)  "
           "+bias+gelu %7.1f (%.2f)  without Lt %7.1f (%.2f)\n", pn, B, IC, OC,
           flop / lf[0] / 1e9, rf / lf[0], flop / lf[1] / 1e9, rf / lf[1], flop / lf[2] / 1e9,
           rf / lf[2], flop / nf / 1e9, rf / nf);
    printf("lt   %-5s B=%-6d IC=%-5d OC=%-5d backward plain %7.1f (%.2f)  +bgradb+dgelu %7.1f "
           "(%.2f)  without Lt %7.1f (%.2f)\n", pn, B, IC, OC, 2 * flop / lb[0] / 1e9,
           rb / lb[0], 2 * flop / lb[1] / 1e9, rb / lb[1], 2 * flop / nb / 1e9, rb / nb);
    float *all[] = { c.inp, c.w, c.bias, c.dout, c.out, c.dw, c.db, c.dinp, c.pre, c.pre_in };
    for (float *p : all) ops_cuda_free(p);
    ops_cuda_free(c.inp16), ops_cuda_free(c.w16), ops_cuda_free(c.dout16);
}

/* ---- memory-bound kernels ---------------------------------------------------------------- */

struct mem_case {
    size_t n;
    float *a, *b, *c, *d;
    ops_bf16 *h;   /* bf16 copies / shadow */
    uint8_t *tok;
    int B, C, E;
};

static void run_adamw(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_adamw(m->a, NULL, m->b, m->c, m->d, m->n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 10);
}
static void run_adamw_shadow(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_adamw(m->a, m->h, m->b, m->c, m->d, m->n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 10);
}
static void run_gelu_fwd_bf16(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_gelu_forward(m->b, m->h, m->a, m->n);
}
static void run_gelu_bwd_bf16(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_gelu_backward(m->c, m->h, m->a, m->b, m->n);
}
static void run_embed_bwd(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_embed_backward(m->c, m->b, m->tok, m->B, m->C, m->E);
}
static void run_xent_fused(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_softmax_xent_fused(m->b, m->h, m->d, m->a, m->tok, (int)(m->n / 256), 256);
}
static void run_gelu_fwd(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_gelu_forward(m->b, NULL, m->a, m->n);
}
static void run_gelu_bwd(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_gelu_backward(m->c, NULL, m->a, m->b, m->n);
}
static void run_embed_fwd(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_embed_forward(m->b, NULL, m->tok, m->a, m->B, m->C, m->E);
}
static void run_softmax(void *p)
{
    mem_case *m = (mem_case *)p;
    ops_cuda_softmax_xent_forward(m->b, m->d, m->a, m->tok, (int)(m->n / 256), 256);
}

static void report_bw(const char *what, double bytes, double ms, double peak)
{
    double tbs = bytes / (ms * 1e-3) / 1e12;
    if (peak > 0)
        printf("bandwidth %-22s %8.3f ms  %6.2f TB/s  %5.1f%% of HBM peak %.2f TB/s\n", what, ms,
               tbs, 100 * tbs / peak, peak);
    else
        printf("bandwidth %-22s %8.3f ms  %6.2f TB/s  (HBM peak unknown: set "
               "DDPTOP_HBM_PEAK_TBS)\n", what, ms, tbs);
}

static void bench_memory(double peak)
{
    mem_case m;
    memset(&m, 0, sizeof m);
    m.n = quick() ? (size_t)1 << 20 : (size_t)64 << 20;   /* 256 MiB per array: beyond L2 */
    m.a = dev_floats(m.n, 1), m.b = dev_floats(m.n, 1), m.c = dev_floats(m.n, 1);
    m.d = dev_floats(m.n, 1);
    m.h = (ops_bf16 *)ops_cuda_alloc(m.n * sizeof(ops_bf16));
    int reps = quick() ? 2 : 20;
    /* AdamW reads p, g, m, v and writes p, m, v: 28 bytes per parameter */
    report_bw("adamw", 28.0 * m.n, ops_cuda_time_ms(run_adamw, &m, reps), peak);
    /* and the bf16 shadow of the weights: 2 bytes more */
    report_bw("adamw_bf16_shadow", 30.0 * m.n, ops_cuda_time_ms(run_adamw_shadow, &m, reps),
              peak);
    report_bw("gelu_forward", 8.0 * m.n, ops_cuda_time_ms(run_gelu_fwd, &m, reps), peak);
    report_bw("gelu_forward_bf16", 10.0 * m.n, ops_cuda_time_ms(run_gelu_fwd_bf16, &m, reps),
              peak);
    report_bw("gelu_backward", 12.0 * m.n, ops_cuda_time_ms(run_gelu_bwd, &m, reps), peak);
    report_bw("gelu_backward_bf16", 14.0 * m.n, ops_cuda_time_ms(run_gelu_bwd_bf16, &m, reps),
              peak);
    /* the embedding: C=16 tables of 256 x E=32; B rows; reads the table rows (cached) and
     * writes B*C*E floats: counted as the write only */
    m.C = 16, m.E = 32, m.B = (int)(m.n / (16 * 32));
    uint8_t *tok = (uint8_t *)malloc((size_t)m.B * m.C);
    for (size_t i = 0; i < (size_t)m.B * m.C; i++) tok[i] = (uint8_t)(i * 131 + i / 7);
    m.tok = (uint8_t *)ops_cuda_alloc((size_t)m.B * m.C);
    ops_cuda_upload(m.tok, tok, (size_t)m.B * m.C);
    free(tok);
    report_bw("embed_forward", 4.0 * m.n, ops_cuda_time_ms(run_embed_fwd, &m, reps), peak);
    /* the embedding gradient: reads dout (B*C*E floats) once; the table (C*256*E, 512 KiB)
     * read and written once more. Bytes as evenly spread as the data makes them. */
    report_bw("embed_backward", 4.0 * m.n + 8.0 * m.C * 256 * m.E,
              ops_cuda_time_ms(run_embed_bwd, &m, reps), peak);
    /* softmax-xent: reads logits, writes probs, one pass each */
    report_bw("softmax_xent_forward", 8.0 * m.n, ops_cuda_time_ms(run_softmax, &m, reps), peak);
    /* the trainer's: reads the logits, writes dlogits and their bf16 copy */
    report_bw("softmax_xent_fused", 10.0 * m.n, ops_cuda_time_ms(run_xent_fused, &m, reps),
              peak);
    ops_cuda_free(m.a), ops_cuda_free(m.b), ops_cuda_free(m.c), ops_cuda_free(m.d);
    ops_cuda_free(m.tok), ops_cuda_free(m.h);
}

static int kernels(const char *prec_name)
{
    enum ops_precision prec = OPS_PREC_TF32;
    if (prec_name && !strcmp(prec_name, "bf16")) prec = OPS_PREC_BF16;
    else if (prec_name && !strcmp(prec_name, "fp32")) prec = OPS_PREC_FP32;
    ops_cuda_init(0, prec);
    const char *name = ops_cuda_device_name();
    double peak = hbm_peak_tbs(name);
    printf("device %s\n", name);
    cublasHandle_t h;
    cublasCheck(cublasCreate(&h));
    cublasCheck(cublasSetStream(h, (cudaStream_t)ops_cuda_stream()));
    /* the default model (context 16 x embed 32 = 512 inputs, hidden 512) at batch 64 (as the
     * trainer runs it) and at 8192, and a wider model where the GPU has room to work */
    static const int shapes[][3] = {
        { 64, 512, 512 }, { 64, 512, 256 }, { 8192, 512, 512 }, { 8192, 512, 256 },
        { 8192, 4096, 4096 }, { 8192, 4096, 256 },
    };
    for (const auto &s : shapes)
        if (!quick() || s[0] == 64) bench_gemm(s[0], s[1], s[2], prec, h);
    struct ops_cuda_lt_stats st;
    ops_cuda_lt_get_stats(&st);   /* refusals: cases that took the cublasGemmEx path */
    printf("lt   %-5s plans %ld (heuristic queries %ld), products %ld, refused %ld\n",
           prec == OPS_PREC_BF16 ? "bf16" : prec == OPS_PREC_TF32 ? "tf32" : "fp32", st.plans,
           st.queries, st.matmuls, st.refused);
    cublasDestroy(h);
    bench_memory(peak);
    ops_cuda_done();
    return 0;
}

/* ---- all-reduce: buckets against one call ------------------------------------------------ */

static int allreduce(double mib, double bucket_mib)
{
    struct dist_env env;
    char err[1024];
    if (dist_env_read(&env, err, sizeof err)) {
        fprintf(stderr, "bench_gpu: %s\n", err);
        return 2;
    }
    metrics_init(env.rank, env.world_size);
    ops_cuda_init(env.local_rank, OPS_PREC_TF32);
    struct store_server *srv = NULL;
    if (env.rank == 0) {
        srv = store_server_start(env.master_addr, env.master_port, env.token, err, sizeof err);
        if (!srv) {
            fprintf(stderr, "bench_gpu: %s\n", err);
            return 1;
        }
    }
    struct store *st = store_connect(env.master_addr, env.master_port, env.token, 60, err,
                                     sizeof err);
    if (!st) {
        fprintf(stderr, "bench_gpu: %s\n", err);
        return 1;
    }
    struct comm *c = comm_nccl_new(&env, st, 120, ops_cuda_stream(), err, sizeof err);
    if (!c) {
        fprintf(stderr, "bench_gpu: %s\n", err);
        return 1;
    }
    size_t n = (size_t)(mib * 1024 * 1024 / 4), bucket = (size_t)(bucket_mib * 1024 * 1024 / 4);
    if (bucket < 1) bucket = 1;
    float *d = dev_floats(n, 1);
    ncclComm_t nc = (ncclComm_t)comm_nccl_handle(c);
    cudaStream_t cs = (cudaStream_t)comm_nccl_stream(c);
    int reps = quick() ? 2 : 20;
    double best_b = 1e30, best_p = 1e30;
    for (int round = 0; round < 3; round++) {   /* alternate; keep each one's best round */
        double t0 = now_s();
        for (int r = 0; r < reps; r++) {
            for (size_t off = 0; off < n; off += bucket)
                if (comm_allreduce_avg_start(c, d + off, off + bucket <= n ? bucket : n - off)) {
                    fprintf(stderr, "bench_gpu: %s\n", c->err);
                    return 1;
                }
            if (comm_wait_all(c)) {
                fprintf(stderr, "bench_gpu: %s\n", c->err);
                return 1;
            }
        }
        double tb = (now_s() - t0) / reps;
        t0 = now_s();
        for (int r = 0; r < reps; r++) {
            ncclCheck(ncclAllReduce(d, d, n, ncclFloat, ncclAvg, nc, cs));
            cudaCheck(cudaStreamSynchronize(cs));
        }
        double tp = (now_s() - t0) / reps;
        if (tb < best_b) best_b = tb;
        if (tp < best_p) best_p = tp;
    }
    if (env.rank == 0) {
        double bytes = (double)n * 4, f = 2.0 * (env.world_size - 1) / env.world_size;
        size_t nb = (n + bucket - 1) / bucket;
        printf("allreduce W=%d %.0f MiB: %zu bucket(s) of %.1f MiB %.3f ms (busbw %.1f GB/s), "
               "one ncclAllReduce %.3f ms (busbw %.1f GB/s), bucketed/plain throughput %.3fx\n",
               env.world_size, mib, nb, bucket_mib, best_b * 1e3, bytes * f / best_b / 1e9,
               best_p * 1e3, bytes * f / best_p / 1e9, best_p / best_b);
    }
    store_barrier(st, "bench_gpu/end", env.world_size, 60);
    comm_free(c);
    ops_cuda_free(d);
    store_close(st);
    if (srv) store_server_stop(srv);
    ops_cuda_done();
    return 0;
}

int main(int argc, char **argv)
{
    char why[256];
    if (ops_cuda_device_count(why, sizeof why) == 0) {
        printf("no GPU: skipped (%s)\n", why);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "probe")) {
        printf("gpu: %d visible\n", ops_cuda_device_count(why, sizeof why));
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "kernels")) return kernels(argc >= 3 ? argv[2] : NULL);
    if (argc >= 4 && !strcmp(argv[1], "allreduce"))
        return allreduce(atof(argv[2]), atof(argv[3]));
    fprintf(stderr, "usage: bench_gpu kernels [tf32|bf16|fp32]\n"
                    "       bench_gpu allreduce MIB BUCKET_MIB   (as W ranks)\n");
    return 2;
}
