/* The embedding of ops_cuda.h on the GPU: C per-position tables of 256 x E, looked up by byte
 * (forward) and their gradient (backward). The backward sums in the CPU's order (batch order
 * per table row) without atomics, so it equals ops_embed_backward bit for bit: determinism
 * and exact resume rely on that. */
#include "ops_cuda_impl.h"

__global__ static void k_embed_forward(float *out, __nv_bfloat16 *out16, const uint8_t *tok,
                                       const float *wte, int B, int C, int E)
{
    size_t n = (size_t)B * C * E;
    GRID_STRIDE(i, n) {
        unsigned bc = (unsigned)i / (unsigned)E, e = (unsigned)i - bc * (unsigned)E;
        unsigned c = bc % (unsigned)C;   /* i = (b*C + c)*E + e */
        float x = wte[((size_t)c * 256 + tok[bc]) * E + e];
        out[i] = x;
        if (out16) out16[i] = __float2bfloat16_rn(x);   /* the first product's operand */
    }
}

/* One warp per (position c, byte v, chunk of 32 features): lane e keeps the running sum of
 * table element (c, v, e) in a register while the warp walks the batch 32 rows at a time;
 * a ballot tells which of those rows hold byte v at position c, and their rows of dout are
 * added in ascending row order, the CPU's order: the result is ops_embed_backward's exactly,
 * with no atomics and no sort. Each row of dout is read once over all warps, 128 coalesced
 * bytes per warp; the bytes of tok are shared by the 256 warps of a position, from cache. The
 * old kernel had every thread compare all B bytes of its position (C*256*E*B comparisons;
 * 15% of an H200 bf16 step).
 *
 * Loads are batched (EMBED_UNROLL tokens per lane, then up to 4 matching rows at a time)
 * so that a warp waits once per batch, not once per load: a byte frequent in the data (a
 * space in text) makes one warp's chain of additions long, and it must stay in order. */
#define EMBED_UNROLL 4

__global__ static void k_embed_backward(float *dwte, const float *dout, const uint8_t *tok,
                                        int B, int C, int E)
{
    unsigned lane = threadIdx.x & 31, chunks = ((unsigned)E + 31) / 32;
    unsigned item = blockIdx.x * (THREADS / 32) + threadIdx.x / 32;
    if (item >= (unsigned)C * 256 * chunks) return;   /* the whole warp: no ballot left */
    unsigned cv = item / chunks, e = (item - cv * chunks) * 32 + lane;
    unsigned c = cv / 256, v = cv % 256;
    bool mine = e < (unsigned)E;   /* lanes past E still vote */
    size_t j = (size_t)cv * E + e;
    const float *col = dout + (size_t)c * E + e;   /* row b's element: col[b * C * E] */
    size_t row_stride = (size_t)C * E;
    float acc = mine ? dwte[j] : 0.0f;
    for (int b0 = 0; b0 < B; b0 += 32 * EMBED_UNROLL) {
        int t[EMBED_UNROLL];
        for (int u = 0; u < EMBED_UNROLL; u++) {
            int b = b0 + 32 * u + (int)lane;
            t[u] = b < B ? tok[(size_t)b * C + c] : -1;
        }
        for (int u = 0; u < EMBED_UNROLL; u++) {
            unsigned hit = __ballot_sync(0xffffffffu, t[u] == (int)v);
            size_t base = (size_t)(b0 + 32 * u);
            while (hit) {
                float x[4];
                int got = 0;
                for (; got < 4 && hit; got++) {
                    unsigned k = (unsigned)__ffs((int)hit) - 1;
                    hit &= hit - 1;
                    x[got] = mine ? col[(base + k) * row_stride] : 0.0f;
                }
                for (int q = 0; q < got; q++) acc += x[q];
            }
        }
    }
    if (mine) dwte[j] = acc;
}

void ops_cuda_embed_forward(float *out, ops_bf16 *out16, const uint8_t *tok, const float *wte,
                            int B, int C, int E)
{
    size_t n = (size_t)B * C * E;
    check_index32(n, "embedding");
    k_embed_forward<<<blocks_for(n), THREADS, 0, ops_stream()>>>(out, bf16_ptr(out16), tok, wte,
                                                                  B, C, E);
    cudaCheckLaunch();
}

void ops_cuda_embed_backward(float *dwte, const float *dout, const uint8_t *tok, int B, int C,
                             int E)
{
    size_t items = (size_t)C * 256 * ((E + 31) / 32), warps = THREADS / 32;
    check_index32((size_t)C * 256 * E, "embedding");
    check_index32((size_t)B * C * E, "embedding");
    if (!items || B <= 0) return;
    k_embed_backward<<<(unsigned)((items + warps - 1) / warps), THREADS, 0, ops_stream()>>>(
        dwte, dout, tok, B, C, E);
    cudaCheckLaunch();
}
