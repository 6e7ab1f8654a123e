/* The embedding of ops_cuda.h on the GPU: C per-position tables of 256 x E, looked up by byte
 * (forward) and their gradient (backward). The backward sums in the CPU's order (batch order
 * per table row) without atomics, so it equals ops_embed_backward bit for bit. */
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
    size_t n = (size_t)C * 256 * E;
    check_index32(n, "embedding");
    k_embed_backward<<<blocks_for(n), THREADS, 0, ops_stream()>>>(dwte, dout, tok, B, C, E);
    cudaCheckLaunch();
}
