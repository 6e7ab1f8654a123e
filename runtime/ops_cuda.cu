/* CUDA kernels behind ops_cuda.h: the model's math on the GPU, one function per ops.h kernel.
 * Matrix products go through cuBLAS (cublasGemmEx: fp32, TF32 or bf16 operands with fp32
 * accumulation); the rest are plain kernels written for clarity first. No kernel uses
 * floating-point atomics: every sum has a fixed order, so a run repeats itself bit for bit.
 * Speed-ups that keep that property (16-byte vector accesses, a sort-free parallel embedding
 * backward, a bf16 shadow of the weights) are listed in docs/gpu.md. */
#include "ops_cuda.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_check.h"
#include "ops_cuda_lt.h"

#define THREADS 256
#define MAX_BLOCKS 65536   /* grid-stride loops cover the rest */

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
} g;

static unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b < 1) b = 1;
    return (unsigned)(b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

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

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

/* Index arithmetic inside kernels is 32-bit: a 64-bit division by a value known only at run
 * time is a long software sequence on the GPU, enough to make a copy kernel compute-bound.
 * Every launcher that divides checks its element count with this first. */
static void check_index32(size_t n, const char *what)
{
    RT_CHECK(n <= 0xffffffffu, "%s: %zu elements, but the kernels index in 32 bits (at most "
             "4294967295): lower --batch-size or --hidden", what, n);
}

__global__ static void k_zero(float *x, size_t n)
{
    GRID_STRIDE(i, n) x[i] = 0.0f;
}

__global__ static void k_embed_forward(float *out, const uint8_t *tok, const float *wte, int B,
                                       int C, int E)
{
    size_t n = (size_t)B * C * E;
    GRID_STRIDE(i, n) {
        unsigned bc = (unsigned)i / (unsigned)E, e = (unsigned)i - bc * (unsigned)E;
        unsigned c = bc % (unsigned)C;   /* i = (b*C + c)*E + e */
        out[i] = wte[((size_t)c * 256 + tok[bc]) * E + e];
    }
}

/* One thread per table element (position c, byte v, feature e): it scans the batch's bytes at
 * position c and adds the rows that hold v, in order b = 0, 1, ... without atomics: the CPU's
 * order, hence the CPU's sums exactly. C*256*E threads (131,072 for the default model) rather
 * than one per (c, e) looping over the batch (512, far too few for a GPU at a large batch); the
 * 32 threads of a warp share (c, v), so the byte they compare is one broadcast load. */
__global__ static void k_embed_backward(float *dwte, const float *dout, const uint8_t *tok,
                                        int B, int C, int E)
{
    size_t n = (size_t)C * 256 * E;
    GRID_STRIDE(j, n) {
        unsigned cv = (unsigned)j / (unsigned)E, e = (unsigned)j - cv * (unsigned)E;
        unsigned c = cv / 256, v = cv % 256;
        float acc = dwte[j];
        for (int b = 0; b < B; b++)
            if (tok[(size_t)b * C + c] == v) acc += dout[((size_t)b * C + c) * E + e];
        dwte[j] = acc;
    }
}

__global__ static void k_bias_broadcast(float *out, const float *bias, int B, int OC)
{
    size_t n = (size_t)B * OC;
    GRID_STRIDE(i, n) out[i] = bias[(unsigned)i % (unsigned)OC];
}

/* dbias[o] = sum over rows of dout[b][o]: block (32, 8) per 32 columns; each thread sums every
 * 8th row, then the 8 partial sums are added in a fixed order. */
__global__ static void k_colsum(float *dbias, const float *dout, int B, int OC)
{
    __shared__ float part[8][33];
    int o = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (o < OC)
        for (int b = threadIdx.y; b < B; b += 8)
            s += dout[(size_t)b * OC + o];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && o < OC) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++)
            t += part[k][threadIdx.x];
        dbias[o] = t;
    }
}

#define GELU_SCALE 0.7978845608028654f   /* sqrt(2/pi) */

__global__ static void k_gelu_forward(float *out, const float *inp, size_t n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

__global__ static void k_gelu_backward(float *dinp, const float *inp, const float *dout,
                                       size_t n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th)
                    + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];
    }
}

/* A block-wide sum for blockDim.x == THREADS (a multiple of 32): warp shuffles, then the
 * warps' results in warp order. Fixed order, so deterministic. Every thread gets the result. */
__device__ static double block_sum(double x)
{
    __shared__ double w[THREADS / 32];
    __shared__ double res;
    for (int off = 16; off > 0; off >>= 1)
        x += __shfl_down_sync(0xffffffffu, x, off);
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (int k = 0; k < THREADS / 32; k++) s += w[k];
        res = s;
    }
    __syncthreads();
    return res;
}

/* Warp-wide maximum and sum; lane 0's result is handed to every lane, so the whole row uses
 * the same bits (a butterfly would give lanes differently rounded sums). */
__device__ static float warp_max(float x)
{
    for (int off = 16; off > 0; off >>= 1)
        x = fmaxf(x, __shfl_down_sync(0xffffffffu, x, off));
    return __shfl_sync(0xffffffffu, x, 0);
}

__device__ static double warp_sum(double x)
{
    for (int off = 16; off > 0; off >>= 1)
        x += __shfl_down_sync(0xffffffffu, x, off);
    return __shfl_sync(0xffffffffu, x, 0);
}

#define ROWS_PER_BLOCK (THREADS / 32)

/* One warp per row (a row is V = 256 logits: 8 per lane, coalesced), so no __syncthreads and
 * eight rows per block; the sum of exponentials in double as on the CPU. A warp whose row is
 * past the end leaves as a whole, before any shuffle. */
__global__ static void k_softmax_xent_forward(float *probs, double *row_loss,
                                              const float *logits, const uint8_t *targets, int B,
                                              int V)
{
    int b = blockIdx.x * ROWS_PER_BLOCK + (int)(threadIdx.x / 32), lane = threadIdx.x % 32;
    if (b >= B) return;
    const float *z = logits + (size_t)b * V;
    float *p = probs + (size_t)b * V;
    float mx = -INFINITY;
    for (int j = lane; j < V; j += 32)
        mx = fmaxf(mx, z[j]);
    mx = warp_max(mx);
    double sum = 0.0;
    for (int j = lane; j < V; j += 32) {
        float e = expf(z[j] - mx);
        p[j] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    float inv = (float)(1.0 / sum);
    for (int j = lane; j < V; j += 32)
        p[j] *= inv;
    if (lane == 0)
        row_loss[b] = log(sum) - (double)(z[targets[b]] - mx);
}

/* The mean over rows, one block, fixed order: the loss the trainer copies once per step. */
__global__ static void k_mean_loss(float *loss, const double *row_loss, int B)
{
    double s = 0.0;
    for (int i = threadIdx.x; i < B; i += blockDim.x)
        s += row_loss[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *loss = (float)(s / B);
}

__global__ static void k_softmax_xent_backward(float *dlogits, const float *probs,
                                               const uint8_t *targets, int B, int V)
{
    float inv_b = 1.0f / (float)B;
    size_t n = (size_t)B * V;
    GRID_STRIDE(i, n) {
        unsigned b = (unsigned)i / (unsigned)V, j = (unsigned)i - b * (unsigned)V;
        float d = __fmul_rn(probs[i], inv_b);   /* no fused multiply-add: the CPU's rounding */
        if (j == targets[b]) d = __fsub_rn(d, inv_b);
        dlogits[i] = d;
    }
}

/* One parameter's AdamW update, shared by both kernels below so they round alike. */
__device__ static inline void adamw_one(float *p, const float *g_, float *m, float *v, size_t i,
                                        float lr, float beta1, float beta2, float eps, float wd,
                                        float bc1, float bc2)
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
}

__global__ static void k_adamw(float *p, const float *g_, float *m, float *v, size_t n, float lr,
                               float beta1, float beta2, float eps, float wd, float bc1,
                               float bc2)
{
    GRID_STRIDE(i, n) adamw_one(p, g_, m, v, i, lr, beta1, beta2, eps, wd, bc1, bc2);
}

/* All tensors in one launch: tensor s covers [seg_end[s-1], seg_end[s]) with weight decay
 * seg_wd[s]. The few segments are read through the cache, and a warp's elements nearly always
 * share one, so the search costs next to nothing against the 28 bytes each update moves. */
__global__ static void k_adamw_segments(float *p, const float *g_, float *m, float *v, size_t n,
                                        const unsigned *seg_end, const float *seg_wd, int nseg,
                                        float lr, float beta1, float beta2, float eps, float bc1,
                                        float bc2)
{
    GRID_STRIDE(i, n) {
        int s = 0;
        while (s < nseg - 1 && (unsigned)i >= seg_end[s]) s++;
        adamw_one(p, g_, m, v, i, lr, beta1, beta2, eps, seg_wd[s], bc1, bc2);
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

void ops_cuda_embed_forward(float *out, const uint8_t *tok, const float *wte, int B, int C,
                            int E)
{
    size_t n = (size_t)B * C * E;
    check_index32(n, "embedding");
    k_embed_forward<<<blocks_for(n), THREADS, 0, g.stream>>>(out, tok, wte, B, C, E);
    cudaCheckLaunch();
}

void ops_cuda_embed_backward(float *dwte, const float *dout, const uint8_t *tok, int B, int C,
                             int E)
{
    size_t n = (size_t)C * 256 * E;
    check_index32(n, "embedding");
    k_embed_backward<<<blocks_for(n), THREADS, 0, g.stream>>>(dwte, dout, tok, B, C, E);
    cudaCheckLaunch();
}

/* C = op(A) * op(B) + beta * C in cuBLAS's column-major terms; a_n and b_n are the element
 * counts of A and B (for the bf16 copies). */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                 const float *A, int lda, size_t a_n, const float *B, int ldb, size_t b_n,
                 float beta, float *C, int ldc)
{
    const float alpha = 1.0f;
    if (g.prec == OPS_PREC_BF16) {
        g.bf_a = (__nv_bfloat16 *)grow(g.bf_a, &g.bf_a_cap, a_n, sizeof(__nv_bfloat16));
        g.bf_b = (__nv_bfloat16 *)grow(g.bf_b, &g.bf_b_cap, b_n, sizeof(__nv_bfloat16));
        k_to_bf16<<<blocks_for(a_n), THREADS, 0, g.stream>>>(g.bf_a, A, a_n);
        cudaCheckLaunch();
        k_to_bf16<<<blocks_for(b_n), THREADS, 0, g.stream>>>(g.bf_b, B, b_n);
        cudaCheckLaunch();
        cublasCheck(cublasGemmEx(g.blas, ta, tb, m, n, k, &alpha, g.bf_a, CUDA_R_16BF, lda,
                                 g.bf_b, CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc,
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
void ops_cuda_linear_forward(float *out, const float *inp, const float *w, const float *bias,
                             int B, int IC, int OC)
{
    size_t n = (size_t)B * OC;
    check_index32(n, "linear layer");
    if (ops_cuda_lt_forward(out, NULL, inp, w, bias, B, IC, OC)) return;   /* bias epilogue */
    k_bias_broadcast<<<blocks_for(n), THREADS, 0, g.stream>>>(out, bias, B, OC);
    cudaCheckLaunch();
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, B, IC, w, IC, (size_t)OC * IC, inp, IC, (size_t)B * IC,
         1.0f, out, OC);
}

void ops_cuda_linear_backward(float *dinp, float *dw, float *dbias, const float *dout,
                              const float *inp, const float *w, int B, int IC, int OC)
{
    /* cuBLASLt where it has an algorithm (the bias gradient in the dW product's epilogue) */
    if (!ops_cuda_lt_backward_weight(dw, dbias, dout, inp, B, IC, OC)) {
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, B, inp, IC, (size_t)B * IC, dout, OC,
             (size_t)B * OC, 0.0f, dw, IC);
        dim3 block(32, 8);
        k_colsum<<<(OC + 31) / 32, block, 0, g.stream>>>(dbias, dout, B, OC);
        cudaCheckLaunch();
    }
    if (dinp && !ops_cuda_lt_backward_input(dinp, NULL, dout, w, B, IC, OC))
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, IC, B, OC, w, IC, (size_t)OC * IC, dout, OC,
             (size_t)B * OC, 0.0f, dinp, IC);
}

void ops_cuda_gelu_forward(float *out, const float *inp, size_t n)
{
    if (!n) return;
    k_gelu_forward<<<blocks_for(n), THREADS, 0, g.stream>>>(out, inp, n);
    cudaCheckLaunch();
}

void ops_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    if (!n) return;
    k_gelu_backward<<<blocks_for(n), THREADS, 0, g.stream>>>(dinp, inp, dout, n);
    cudaCheckLaunch();
}

void ops_cuda_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                   const uint8_t *targets, int B, int V)
{
    g.row_loss = (double *)grow(g.row_loss, &g.row_loss_cap, (size_t)B, sizeof(double));
    check_index32((size_t)B * V, "softmax");
    unsigned blocks = (unsigned)((B + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    k_softmax_xent_forward<<<blocks, THREADS, 0, g.stream>>>(probs, g.row_loss, logits, targets,
                                                              B, V);
    cudaCheckLaunch();
    k_mean_loss<<<1, THREADS, 0, g.stream>>>(loss, g.row_loss, B);
    cudaCheckLaunch();
}

void ops_cuda_softmax_xent_backward(float *dlogits, const float *probs, const uint8_t *targets,
                                    int B, int V)
{
    size_t n = (size_t)B * V;
    check_index32(n, "softmax");
    k_softmax_xent_backward<<<blocks_for(n), THREADS, 0, g.stream>>>(dlogits, probs, targets,
                                                                      B, V);
    cudaCheckLaunch();
}

void ops_cuda_adamw(float *p, const float *grad, float *m, float *v, size_t n, float lr,
                    float beta1, float beta2, float eps, float wd, long t)
{
    if (!n) return;
    /* on the host with the host's powf, exactly as ops_adamw */
    float bc1 = 1.0f - powf(beta1, (float)t);
    float bc2 = 1.0f - powf(beta2, (float)t);
    k_adamw<<<blocks_for(n), THREADS, 0, g.stream>>>(p, grad, m, v, n, lr, beta1, beta2, eps,
                                                      wd, bc1, bc2);
    cudaCheckLaunch();
}

void ops_cuda_adamw_segments(float *p, const float *grad, float *m, float *v, size_t n,
                             const unsigned *seg_end, const float *seg_wd, int nseg, float lr,
                             float beta1, float beta2, float eps, long t)
{
    if (!n) return;
    check_index32(n, "AdamW");
    float bc1 = 1.0f - powf(beta1, (float)t);
    float bc2 = 1.0f - powf(beta2, (float)t);
    k_adamw_segments<<<blocks_for(n), THREADS, 0, g.stream>>>(p, grad, m, v, n, seg_end, seg_wd,
                                                               nseg, lr, beta1, beta2, eps, bc1,
                                                               bc2);
    cudaCheckLaunch();
}
