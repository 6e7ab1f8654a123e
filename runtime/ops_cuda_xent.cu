/* The softmax cross-entropy of ops_cuda.h on the GPU: probabilities and the mean loss
 * (forward), the gradient of the logits (backward). The loss is summed in double, per row and
 * then over rows in a fixed order, so it repeats itself bit for bit. */
#include "ops_cuda_impl.h"

#include <math.h>

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

void ops_cuda_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                   const uint8_t *targets, int B, int V)
{
    double *row_loss = ops_cuda_row_loss_scratch((size_t)B);
    check_index32((size_t)B * V, "softmax");
    unsigned blocks = (unsigned)((B + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    k_softmax_xent_forward<<<blocks, THREADS, 0, ops_stream()>>>(probs, row_loss, logits,
                                                                  targets, B, V);
    cudaCheckLaunch();
    k_mean_loss<<<1, THREADS, 0, ops_stream()>>>(loss, row_loss, B);
    cudaCheckLaunch();
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
