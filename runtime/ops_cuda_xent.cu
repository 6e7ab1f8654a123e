/* The softmax cross-entropy of ops_cuda.h on the GPU: probabilities and the mean loss
 * (forward), the gradient of the logits (backward), and both in one pass for the trainer
 * (fused). The loss is summed in double, per row and then over rows in a fixed order, so it
 * repeats itself bit for bit.
 *
 * One block of XENT_THREADS per row: each thread loads its part of the row once (float4
 * accesses where the rows are 16-byte aligned), keeps it in registers through the maximum,
 * the exponentials and their sum, and writes each output once: one read of the logits and one
 * write per output, where the one-warp-per-row kernel before read the row twice and wrote and
 * reread the probabilities. */
#include "ops_cuda_impl.h"

#include <math.h>
#include <stdlib.h>

#define XENT_THREADS 64   /* V = 256: one float4 per thread */
#define XENT_VEC 4        /* float4 groups per thread: rows of up to 16 * XENT_THREADS logits */
#define XENT_MAX_V (4 * XENT_VEC * 1024)

/* Block-wide reductions for blockDim.x a multiple of 32 (at most 1024): warp shuffles, then
 * the warps' results in warp order by thread 0. Fixed order, so deterministic; every thread
 * gets thread 0's result, so the whole row uses the same bits. */
__device__ static double block_sum(double x)
{
    __shared__ double w[32];
    __shared__ double res;
    for (int off = 16; off > 0; off >>= 1)
        x += __shfl_down_sync(0xffffffffu, x, off);
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (unsigned k = 0; k < blockDim.x / 32; k++) s += w[k];
        res = s;
    }
    __syncthreads();
    return res;
}

__device__ static float block_max(float x)
{
    __shared__ float w[32];
    __shared__ float res;
    for (int off = 16; off > 0; off >>= 1)
        x = fmaxf(x, __shfl_down_sync(0xffffffffu, x, off));
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = w[0];
        for (unsigned k = 1; k < blockDim.x / 32; k++) m = fmaxf(m, w[k]);
        res = m;
    }
    __syncthreads();
    return res;
}

/* Row b = blockIdx.x. Thread t holds logits 4*(t + k*blockDim.x) + c, k < XENT_VEC, c < 4.
 * Writes what it is given (NULL: not): probs as ops_softmax_xent_forward; dlogits (and its
 * bf16 copy) as ops_softmax_xent_backward computes them from those probabilities, with the
 * same two roundings; the row's loss -log p[target] from the logits, as the CPU. vec: V is a
 * multiple of 4 and every row pointer is 16-byte aligned (the launcher checks), so whole
 * float4s. */
__global__ static void k_xent_rows(float *probs, float *dlogits, __nv_bfloat16 *dlogits16,
                                   double *row_loss, const float *logits,
                                   const uint8_t *targets, int V, float inv_b, int vec)
{
    size_t row = (size_t)blockIdx.x * V;
    const float *z = logits + row;
    unsigned t = targets[blockIdx.x];
    float x[XENT_VEC][4];
    float mx = -INFINITY;
    for (int k = 0; k < XENT_VEC; k++) {
        unsigned j = 4 * (threadIdx.x + k * blockDim.x);
        if (vec && j < (unsigned)V) {
            float4 q = *(const float4 *)(z + j);
            x[k][0] = q.x, x[k][1] = q.y, x[k][2] = q.z, x[k][3] = q.w;
        } else {
            for (int c = 0; c < 4; c++)
                x[k][c] = j + c < (unsigned)V ? z[j + c] : -INFINITY;
        }
        for (int c = 0; c < 4; c++) mx = fmaxf(mx, x[k][c]);
    }
    mx = block_max(mx);
    double sum = 0.0;   /* in double as on the CPU */
    for (int k = 0; k < XENT_VEC; k++) {
        unsigned j = 4 * (threadIdx.x + k * blockDim.x);
        for (int c = 0; c < 4; c++) {
            float e = j + c < (unsigned)V ? expf(x[k][c] - mx) : 0.0f;
            x[k][c] = e;
            sum += e;
        }
    }
    sum = block_sum(sum);
    float inv = (float)(1.0 / sum);
    for (int k = 0; k < XENT_VEC; k++) {
        unsigned j = 4 * (threadIdx.x + k * blockDim.x);
        if (j >= (unsigned)V) break;
        float p[4], d[4];
        for (int c = 0; c < 4; c++) {
            p[c] = x[k][c] * inv;
            d[c] = __fmul_rn(p[c], inv_b);   /* no fused multiply-add: the CPU's rounding */
            if (j + c == t) d[c] = __fsub_rn(d[c], inv_b);
        }
        if (vec) {
            if (probs) *(float4 *)(probs + row + j) = make_float4(p[0], p[1], p[2], p[3]);
            if (dlogits) *(float4 *)(dlogits + row + j) = make_float4(d[0], d[1], d[2], d[3]);
            if (dlogits16) {
                __nv_bfloat162 *o = (__nv_bfloat162 *)(dlogits16 + row + j);
                o[0] = __floats2bfloat162_rn(d[0], d[1]);
                o[1] = __floats2bfloat162_rn(d[2], d[3]);
            }
            continue;
        }
        for (int c = 0; c < 4 && j + c < (unsigned)V; c++) {
            if (probs) probs[row + j + c] = p[c];
            if (dlogits) dlogits[row + j + c] = d[c];
            if (dlogits16) dlogits16[row + j + c] = __float2bfloat16_rn(d[c]);
        }
    }
    if (threadIdx.x == 0)
        row_loss[blockIdx.x] = log(sum) - (double)(z[t] - mx);   /* exact where p underflows */
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

__global__ static void k_softmax_xent_backward(float *dlogits, __nv_bfloat16 *dlogits16,
                                               const float *probs, const uint8_t *targets, int B,
                                               int V)
{
    float inv_b = 1.0f / (float)B;
    size_t n = (size_t)B * V;
    GRID_STRIDE(i, n) {
        unsigned b = (unsigned)i / (unsigned)V, j = (unsigned)i - b * (unsigned)V;
        float d = __fmul_rn(probs[i], inv_b);   /* no fused multiply-add: the CPU's rounding */
        if (j == targets[b]) d = __fsub_rn(d, inv_b);
        dlogits[i] = d;
        if (dlogits16) dlogits16[i] = __float2bfloat16_rn(d);   /* the products' operand */
    }
}

/* The row kernel, then the mean loss. Rows of up to 4 * XENT_VEC * XENT_THREADS logits take
 * XENT_THREADS threads; longer ones more (a multiple of 32, at most 1024). */
static void xent_rows(float *probs, float *dlogits, ops_bf16 *dlogits16, float *loss,
                      const float *logits, const uint8_t *targets, int B, int V)
{
    RT_CHECK(B >= 1 && V >= 1 && V <= XENT_MAX_V, "softmax: %d rows of %d logits: rows of 1 to "
             "%d logits only", B, V, XENT_MAX_V);
    check_index32((size_t)B * V, "softmax");
    /* a byte target is below 256: only a shorter row can meet one past its end (z[t] would
     * read the next row's logits). Only tests use such rows: there the targets are looked at. */
    if (V < 256) {
        uint8_t *h = (uint8_t *)malloc((size_t)B);
        RT_CHECK(h != NULL, "softmax: out of memory");
        ops_cuda_download(h, targets, (size_t)B);
        for (int b = 0; b < B; b++)
            RT_CHECK(h[b] < V, "softmax: row %d's target %d is past its %d logits", b, h[b], V);
        free(h);
    }
    double *row_loss = ops_cuda_row_loss_scratch((size_t)B);
    unsigned threads = XENT_THREADS, per = 4 * XENT_VEC;
    if ((unsigned)V > per * threads) threads = ((V + per - 1) / per + 31) / 32 * 32;
    /* rows start at multiples of V floats: all aligned when V is a multiple of 4 */
    int vec = V % 4 == 0 && aligned16(logits, probs, dlogits) &&
              ((uintptr_t)dlogits16 & 7u) == 0;
    k_xent_rows<<<(unsigned)B, threads, 0, ops_stream()>>>(probs, dlogits, bf16_ptr(dlogits16),
                                                           row_loss, logits, targets, V,
                                                           1.0f / (float)B, vec);
    cudaCheckLaunch();
    k_mean_loss<<<1, THREADS, 0, ops_stream()>>>(loss, row_loss, B);
    cudaCheckLaunch();
}

void ops_cuda_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                   const uint8_t *targets, int B, int V)
{
    xent_rows(probs, NULL, NULL, loss, logits, targets, B, V);
}

void ops_cuda_softmax_xent_fused(float *dlogits, ops_bf16 *dlogits16, float *loss,
                                 const float *logits, const uint8_t *targets, int B, int V)
{
    xent_rows(NULL, dlogits, dlogits16, loss, logits, targets, B, V);
}

void ops_cuda_softmax_xent_backward(float *dlogits, ops_bf16 *dlogits16, const float *probs,
                                    const uint8_t *targets, int B, int V)
{
    size_t n = (size_t)B * V;
    check_index32(n, "softmax");
    k_softmax_xent_backward<<<blocks_for(n), THREADS, 0, ops_stream()>>>(
        dlogits, bf16_ptr(dlogits16), probs, targets, B, V);
    cudaCheckLaunch();
}
