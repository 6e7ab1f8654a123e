/* CUDA kernels behind ops_cuda.h: set-up, memory and copies, the matrix products (cuBLAS
 * cublasGemmEx: fp32, TF32 or bf16 operands with fp32 accumulation) with their bias and bias
 * gradient, GELU, AdamW and the bf16 conversion. The embedding is in ops_cuda_embed.cu, the
 * softmax cross-entropy in ops_cuda_xent.cu. No kernel uses floating-point atomics: every sum
 * has a fixed order, so a run repeats itself bit for bit.
 *
 * BF16 mode: a product's operands are bf16. The kernels that produce them write bf16 copies
 * next to their fp32 results (AdamW the weights' shadow, GELU and the embedding the
 * activations, the backward kernels the output gradients), so a product converts nothing; an
 * operand given without its copy is converted for that product into scratch (tests, bench). */
#include "ops_cuda_impl.h"
#include "ops_cuda_lt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static struct {
    int ready, device;
    cudaStream_t stream;
    cublasHandle_t blas;
    enum ops_precision prec;
    char name[256];
    __nv_bfloat16 *bf_a, *bf_b;   /* bf16 copies of a product's operands (BF16 mode) */
    size_t bf_a_cap, bf_b_cap;    /* elements */
    double *row_loss;             /* per-row losses of softmax_xent_forward */
    size_t row_loss_cap;
    float *colsum;                /* the column sums' partial sums (bias gradients) */
    size_t colsum_cap;
} g;

/* Grows a scratch buffer (only in the first steps: then every size has been seen). The old
 * one may still be read by queued kernels: wait for them first. */
static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    if (p) {
        cudaCheck(cudaStreamSynchronize(g.stream));
        cudaCheck(cudaFree(p));
    }
    cudaCheck(cudaMalloc(&p, need * elem));
    *cap = need;
    return p;
}

double *ops_cuda_row_loss_scratch(size_t n)
{
    g.row_loss = (double *)grow(g.row_loss, &g.row_loss_cap, n, sizeof(double));
    return g.row_loss;
}

/* ---- set-up ------------------------------------------------------------------------------ */

int ops_cuda_device_count(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, whylen, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError();   /* not sticky: clear it */
        return 0;
    }
    if (n <= 0) {
        snprintf(why, whylen, "cudaGetDeviceCount: 0 devices");
        return 0;
    }
    if (whylen) why[0] = '\0';
    return n;
}

void ops_cuda_init(int local_rank, enum ops_precision prec)
{
    if (g.ready) {   /* once per process; a second call only changes the precision */
        g.prec = prec;
        return;
    }
    char why[256];
    int n = ops_cuda_device_count(why, sizeof why);
    RT_CHECK(n > 0, "no CUDA device visible (%s)", why);
    g.device = (local_rank < 0 ? 0 : local_rank) % n;
    cudaCheck(cudaSetDevice(g.device));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, g.device));
    snprintf(g.name, sizeof g.name, "%s", prop.name);
    RT_CHECK(prop.major >= 9, "GPU %d (%s) has compute capability %d.%d, but this build has "
             "code for sm_90 (H100/H200) only: rebuild with NVCCFLAGS='-O2 -gencode "
             "arch=compute_%d%d,code=sm_%d%d'", g.device, prop.name, prop.major, prop.minor,
             prop.major, prop.minor, prop.major, prop.minor);
    cudaCheck(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    cublasCheck(cublasCreate(&g.blas));
    cublasCheck(cublasSetStream(g.blas, g.stream));
    g.prec = prec;
    g.ready = 1;
}

void ops_cuda_done(void)
{
    if (!g.ready) return;
    ops_cuda_lt_done();
    cudaCheck(cudaStreamSynchronize(g.stream));
    cublasDestroy(g.blas);
    cudaStreamDestroy(g.stream);
    cudaFree(g.bf_a);
    cudaFree(g.bf_b);
    cudaFree(g.row_loss);
    cudaFree(g.colsum);
    memset(&g, 0, sizeof g);
}

int ops_cuda_device(void) { return g.device; }
const char *ops_cuda_device_name(void) { return g.name; }
enum ops_precision ops_cuda_precision(void) { return g.prec; }
void ops_cuda_set_precision(enum ops_precision prec) { g.prec = prec; }
void *ops_cuda_stream(void) { return (void *)g.stream; }

void *ops_cuda_alloc(size_t bytes)
{
    void *p = NULL;
    cudaCheck(cudaMalloc(&p, bytes ? bytes : 1));
    cudaCheck(cudaMemsetAsync(p, 0, bytes ? bytes : 1, g.stream));
    cudaCheck(cudaStreamSynchronize(g.stream));
    return p;
}

void ops_cuda_free(void *p)
{
    if (p) cudaCheck(cudaFree(p));
}

void *ops_cuda_alloc_host(size_t bytes)
{
    void *p = NULL;
    cudaCheck(cudaMallocHost(&p, bytes ? bytes : 1));
    memset(p, 0, bytes ? bytes : 1);
    return p;
}

void ops_cuda_free_host(void *p)
{
    if (p) cudaCheck(cudaFreeHost(p));
}

void ops_cuda_upload_async(void *dst, const void *src, size_t bytes)
{
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g.stream));
}

void ops_cuda_upload(void *dst, const void *src, size_t bytes)
{
    ops_cuda_upload_async(dst, src, bytes);
    cudaCheck(cudaStreamSynchronize(g.stream));
}

void ops_cuda_download_async(void *dst, const void *src, size_t bytes)
{
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g.stream));
}

void ops_cuda_download(void *dst, const void *src, size_t bytes)
{
    ops_cuda_download_async(dst, src, bytes);
    cudaCheck(cudaStreamSynchronize(g.stream));
}

void ops_cuda_sync(void)
{
    cudaCheck(cudaStreamSynchronize(g.stream));
}

double ops_cuda_time_ms(void (*fn)(void *ctx), void *ctx, int reps)
{
    cudaEvent_t t0, t1;
    cudaCheck(cudaEventCreate(&t0));
    cudaCheck(cudaEventCreate(&t1));
    fn(ctx);   /* warm-up: lazy allocations, cuBLAS heuristics */
    cudaCheck(cudaEventRecord(t0, g.stream));
    for (int i = 0; i < reps; i++)
        fn(ctx);
    cudaCheck(cudaEventRecord(t1, g.stream));
    cudaCheck(cudaEventSynchronize(t1));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, t0, t1));
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return reps > 0 ? ms / reps : 0.0;
}


/* ---- elementwise and small kernels ------------------------------------------------------- */

__global__ static void k_zero(float *x, size_t n)
{
    GRID_STRIDE(i, n) x[i] = 0.0f;
}

__global__ static void k_bias_broadcast(float *out, const float *bias, int B, int OC)
{
    size_t n = (size_t)B * OC;
    GRID_STRIDE(i, n) out[i] = bias[(unsigned)i % (unsigned)OC];
}

/* dbias[o] = sum over rows of dout[b][o], in two fixed-order stages so that a large batch
 * spreads over many blocks (one block per 32 columns left 128 blocks of an H200's 132 SMs
 * summing 4096 rows each: latency-bound at about 1 TB/s). Stage one: block (32, 8) per 32
 * columns and COLSUM_ROWS rows; each thread sums every 8th row of its part, the 8 partial sums
 * are added in a fixed order into part[blockIdx.y][o] (straight into dbias when the batch is
 * one part). Stage two: each column adds its parts in order. Same bits on every run. */
#define COLSUM_ROWS 256

__global__ static void k_colsum_parts(float *part, const float *dout, int B, int OC)
{
    __shared__ float acc[8][33];
    int o = blockIdx.x * 32 + threadIdx.x;
    int b_end = (int)(blockIdx.y + 1) * COLSUM_ROWS;
    if (b_end > B) b_end = B;
    float s = 0.0f;
    if (o < OC)
        for (int b = blockIdx.y * COLSUM_ROWS + threadIdx.y; b < b_end; b += 8)
            s += dout[(size_t)b * OC + o];
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && o < OC) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++)
            t += acc[k][threadIdx.x];
        part[(size_t)blockIdx.y * OC + o] = t;
    }
}

__global__ static void k_colsum_finish(float *dbias, const float *part, int parts, int OC)
{
    GRID_STRIDE(o, (size_t)OC) {
        float t = 0.0f;
        for (int k = 0; k < parts; k++)
            t += part[(size_t)k * OC + o];
        dbias[o] = t;
    }
}

#define GELU_SCALE 0.7978845608028654f   /* sqrt(2/pi) */

__device__ static inline float gelu(float x)
{
    float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

__device__ static inline float gelu_grad(float x, float dout)
{
    float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    float local = 0.5f * (1.0f + th)
                + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
    return local * dout;
}

/* Four results and, when wanted, their bf16 copies (8 bytes, aligned: the launcher checks). */
__device__ static inline void store4(float *y, __nv_bfloat16 *y16, size_t i, float4 v)
{
    ((float4 *)y)[i] = v;
    if (y16) {
        __nv_bfloat162 *o = (__nv_bfloat162 *)y16 + 2 * i;
        o[0] = __floats2bfloat162_rn(v.x, v.y);
        o[1] = __floats2bfloat162_rn(v.z, v.w);
    }
}

/* GELU forward and backward, elementwise: with vec (every pointer 16-byte aligned, the bf16
 * copy 8-byte) the first n/4*4 elements as float4s and the rest one by one; otherwise all one
 * by one. Each element is computed alike either way. out16 (NULL: none) gets the bf16
 * rounding of out: the next product's operand, converted while the value is in a register
 * instead of by a pass of its own. */
__global__ static void k_gelu_forward(float *out, __nv_bfloat16 *out16, const float *inp,
                                      size_t n, int vec)
{
    size_t n4 = vec ? n / 4 : 0;
    GRID_STRIDE(i, n4) {
        float4 x = ((const float4 *)inp)[i];
        store4(out, out16, i, make_float4(gelu(x.x), gelu(x.y), gelu(x.z), gelu(x.w)));
    }
    GRID_STRIDE(k, n - 4 * n4) {
        size_t i = 4 * n4 + k;
        float y = gelu(inp[i]);
        out[i] = y;
        if (out16) out16[i] = __float2bfloat16_rn(y);
    }
}

__global__ static void k_gelu_backward(float *dinp, __nv_bfloat16 *dinp16, const float *inp,
                                       const float *dout, size_t n, int vec)
{
    size_t n4 = vec ? n / 4 : 0;
    GRID_STRIDE(i, n4) {
        float4 x = ((const float4 *)inp)[i], d = ((const float4 *)dout)[i];
        store4(dinp, dinp16, i, make_float4(gelu_grad(x.x, d.x), gelu_grad(x.y, d.y),
                                            gelu_grad(x.z, d.z), gelu_grad(x.w, d.w)));
    }
    GRID_STRIDE(k, n - 4 * n4) {
        size_t i = 4 * n4 + k;
        float d = gelu_grad(inp[i], dout[i]);
        dinp[i] = d;
        if (dinp16) dinp16[i] = __float2bfloat16_rn(d);
    }
}

/* One parameter's AdamW update, shared by both kernels below so they round alike. p16 (NULL:
 * none) is the bf16 shadow of the weights that BF16 products read: written from the new
 * value, so it never lags the fp32 master weight. */
__device__ static inline void adamw_one(float *p, __nv_bfloat16 *p16, const float *g_, float *m,
                                        float *v, size_t i, float lr, float beta1, float beta2,
                                        float eps, float wd, float bc1, float bc2)
{
    float gi = g_[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1;
    float vhat = vi / bc2;
    float pi = p[i];
    pi -= lr * wd * pi;
    pi -= lr * mhat / (sqrtf(vhat) + eps);
    p[i] = pi;
    if (p16) p16[i] = __float2bfloat16_rn(pi);
}

__global__ static void k_adamw(float *p, __nv_bfloat16 *p16, const float *g_, float *m,
                               float *v, size_t n, float lr, float beta1, float beta2, float eps,
                               float wd, float bc1, float bc2)
{
    GRID_STRIDE(i, n) adamw_one(p, p16, g_, m, v, i, lr, beta1, beta2, eps, wd, bc1, bc2);
}

/* All tensors in one launch: tensor s covers [seg_end[s-1], seg_end[s]) with weight decay
 * seg_wd[s]. The few segments are read through the cache, and a warp's elements nearly always
 * share one, so the search costs next to nothing against the 30 bytes each update moves. */
__global__ static void k_adamw_segments(float *p, __nv_bfloat16 *p16, const float *g_, float *m,
                                        float *v, size_t n, const unsigned *seg_end,
                                        const float *seg_wd, int nseg, float lr, float beta1,
                                        float beta2, float eps, float bc1, float bc2)
{
    GRID_STRIDE(i, n) {
        int s = 0;
        while (s < nseg - 1 && (unsigned)i >= seg_end[s]) s++;
        adamw_one(p, p16, g_, m, v, i, lr, beta1, beta2, eps, seg_wd[s], bc1, bc2);
    }
}

__global__ static void k_to_bf16(__nv_bfloat16 *out, const float *in, size_t n)
{
    GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

/* ---- the ops.h functions ----------------------------------------------------------------- */

void ops_cuda_zero(float *x, size_t n)
{
    if (!n) return;
    k_zero<<<blocks_for(n), THREADS, 0, g.stream>>>(x, n);
    cudaCheckLaunch();
}

void ops_cuda_to_bf16(ops_bf16 *dst, const float *src, size_t n)
{
    if (!n) return;
    k_to_bf16<<<blocks_for(n), THREADS, 0, g.stream>>>(bf16_ptr(dst), src, n);
    cudaCheckLaunch();
}

/* The bf16 operand of a product: its copy when the caller has one, else a conversion into
 * the scratch buffer *buf (the slow path: one more pass over the operand per product). */
static const __nv_bfloat16 *bf16_operand(const float *x, const ops_bf16 *x16, size_t n,
                                         __nv_bfloat16 **buf, size_t *cap)
{
    if (x16) return bf16_cptr(x16);
    *buf = (__nv_bfloat16 *)grow(*buf, cap, n, sizeof(__nv_bfloat16));
    k_to_bf16<<<blocks_for(n), THREADS, 0, g.stream>>>(*buf, x, n);
    cudaCheckLaunch();
    return *buf;
}

/* C = op(A) * op(B) + beta * C in cuBLAS's column-major terms; a_n and b_n are the element
 * counts of A and B, A16 and B16 their bf16 copies (NULL: converted here in BF16 mode; not
 * read in the other modes). */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                 const float *A, const ops_bf16 *A16, int lda, size_t a_n, const float *B,
                 const ops_bf16 *B16, int ldb, size_t b_n, float beta, float *C, int ldc)
{
    const float alpha = 1.0f;
    if (g.prec == OPS_PREC_BF16) {
        const __nv_bfloat16 *a = bf16_operand(A, A16, a_n, &g.bf_a, &g.bf_a_cap);
        const __nv_bfloat16 *b = bf16_operand(B, B16, b_n, &g.bf_b, &g.bf_b_cap);
        cublasCheck(cublasGemmEx(g.blas, ta, tb, m, n, k, &alpha, a, CUDA_R_16BF, lda, b,
                                 CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    cublasComputeType_t ct = g.prec == OPS_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                     : CUBLAS_COMPUTE_32F;
    cublasCheck(cublasGemmEx(g.blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F,
                             ldb, &beta, C, CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT));
}

/* Row-major X[R][C] is column-major X^T (leading dimension C), so with ops.h's names:
 *   out = inp W^T   ->  out^T [OC x B]  = W inp^T     : gemm(T, N, OC, B, IC, w, inp)
 *   dW = dout^T inp ->  dW^T  [IC x OC] = inp^T dout  : gemm(N, T, IC, OC, B, inp, dout)
 *   dinp = dout W   ->  dinp^T[IC x B]  = W^T dout^T  : gemm(N, N, IC, B, OC, w, dout) */
void ops_cuda_linear_forward(float *out, const float *inp, const ops_bf16 *inp16,
                             const float *w, const ops_bf16 *w16, const float *bias, int B,
                             int IC, int OC)
{
    size_t n = (size_t)B * OC;
    check_index32(n, "linear layer");
    if (ops_cuda_lt_forward(out, NULL, inp, inp16, w, w16, bias, B, IC, OC))
        return;   /* the bias in cuBLASLt's epilogue */
    k_bias_broadcast<<<blocks_for(n), THREADS, 0, g.stream>>>(out, bias, B, OC);
    cudaCheckLaunch();
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, B, IC, w, w16, IC, (size_t)OC * IC, inp, inp16, IC,
         (size_t)B * IC, 1.0f, out, OC);
}

void ops_cuda_linear_backward(float *dinp, float *dw, float *dbias, const float *dout,
                              const ops_bf16 *dout16, const float *inp, const ops_bf16 *inp16,
                              const float *w, const ops_bf16 *w16, int B, int IC, int OC)
{
    /* cuBLASLt where it has an algorithm, with the bias gradient in the dW product's epilogue
     * where that pays (ops_cuda_lt_fuse); else the column sums below */
    int bgradb = dbias && ops_cuda_lt_fuse(IC, OC, B);
    if (!ops_cuda_lt_backward_weight(dw, bgradb ? dbias : NULL, dout, dout16, inp, inp16, B, IC,
                                     OC)) {
        bgradb = 0;
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, B, inp, inp16, IC, (size_t)B * IC, dout, dout16,
             OC, (size_t)B * OC, 0.0f, dw, IC);
    }
    if (dbias && !bgradb) {
        int parts = (B + COLSUM_ROWS - 1) / COLSUM_ROWS;
        float *part = dbias;
        if (parts > 1) {
            g.colsum = (float *)grow(g.colsum, &g.colsum_cap, (size_t)parts * OC, sizeof(float));
            part = g.colsum;
        }
        dim3 block(32, 8), grid((OC + 31) / 32, parts);
        k_colsum_parts<<<grid, block, 0, g.stream>>>(part, dout, B, OC);
        cudaCheckLaunch();
        if (parts > 1) {
            k_colsum_finish<<<blocks_for((size_t)OC), THREADS, 0, g.stream>>>(dbias, part,
                                                                              parts, OC);
            cudaCheckLaunch();
        }
    }
    if (dinp && !ops_cuda_lt_backward_input(dinp, NULL, dout, dout16, w, w16, B, IC, OC))
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, IC, B, OC, w, w16, IC, (size_t)OC * IC, dout, dout16, OC,
             (size_t)B * OC, 0.0f, dinp, IC);
}

void ops_cuda_gelu_forward(float *out, ops_bf16 *out16, const float *inp, size_t n)
{
    if (!n) return;
    int vec = aligned16(out, inp) && ((uintptr_t)out16 & 7u) == 0;
    k_gelu_forward<<<blocks_for(vec ? n / 4 + 1 : n), THREADS, 0, g.stream>>>(
        out, bf16_ptr(out16), inp, n, vec);
    cudaCheckLaunch();
}

void ops_cuda_gelu_backward(float *dinp, ops_bf16 *dinp16, const float *inp, const float *dout,
                            size_t n)
{
    if (!n) return;
    int vec = aligned16(dinp, inp, dout) && ((uintptr_t)dinp16 & 7u) == 0;
    k_gelu_backward<<<blocks_for(vec ? n / 4 + 1 : n), THREADS, 0, g.stream>>>(
        dinp, bf16_ptr(dinp16), inp, dout, n, vec);
    cudaCheckLaunch();
}

void ops_cuda_adamw(float *p, ops_bf16 *p16, const float *grad, float *m, float *v, size_t n,
                    float lr, float beta1, float beta2, float eps, float wd, long t)
{
    if (!n) return;
    /* on the host with the host's powf, exactly as ops_adamw */
    float bc1 = 1.0f - powf(beta1, (float)t);
    float bc2 = 1.0f - powf(beta2, (float)t);
    k_adamw<<<blocks_for(n), THREADS, 0, g.stream>>>(p, bf16_ptr(p16), grad, m, v, n, lr, beta1,
                                                      beta2, eps, wd, bc1, bc2);
    cudaCheckLaunch();
}

void ops_cuda_adamw_segments(float *p, ops_bf16 *p16, const float *grad, float *m, float *v,
                             size_t n, const unsigned *seg_end, const float *seg_wd, int nseg,
                             float lr, float beta1, float beta2, float eps, long t)
{
    if (!n) return;
    check_index32(n, "AdamW");
    float bc1 = 1.0f - powf(beta1, (float)t);
    float bc2 = 1.0f - powf(beta2, (float)t);
    k_adamw_segments<<<blocks_for(n), THREADS, 0, g.stream>>>(p, bf16_ptr(p16), grad, m, v, n,
                                                               seg_end, seg_wd, nseg, lr, beta1,
                                                               beta2, eps, bc1, bc2);
    cudaCheckLaunch();
}
