/* What the kernel files of the CUDA backend (ops_cuda.cu, ops_cuda_embed.cu, ops_cuda_xent.cu)
 * share, and nothing else includes: launch shapes, the grid-stride loop, the 32-bit index
 * check, the compute stream, and the bf16 view of ops_bf16. No kernel launches live here: the
 * fakecuda build rewrites `<<<...>>>` in the .cu files only (Makefile, FAKE_SED). C++ only. */
#ifndef DDPTOP_OPS_CUDA_IMPL_H
#define DDPTOP_OPS_CUDA_IMPL_H

#include <cuda_bf16.h>
#include <stdint.h>

#include "cuda_check.h"
#include "ops_cuda.h"

#define THREADS 256
#define MAX_BLOCKS 65536   /* grid-stride loops cover the rest */

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

static inline unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b < 1) b = 1;
    return (unsigned)(b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

/* Index arithmetic inside kernels is 32-bit: a 64-bit division by a value known only at run
 * time is a long software sequence on the GPU, enough to make a copy kernel compute-bound.
 * Every launcher that divides checks its element count with this first. */
static inline void check_index32(size_t n, const char *what)
{
    RT_CHECK(n <= 0xffffffffu, "%s: %zu elements, but the kernels index in 32 bits (at most "
             "4294967295): lower --batch-size or --hidden", what, n);
}

static inline cudaStream_t ops_stream(void)
{
    return (cudaStream_t)ops_cuda_stream();
}

/* Per-row losses of the softmax cross-entropy (device, at least n doubles): scratch owned by
 * ops_cuda.cu, freed by ops_cuda_done. */
double *ops_cuda_row_loss_scratch(size_t n);

/* ops_bf16 holds bf16 bits; kernels and cuBLAS see them as __nv_bfloat16 (same 2 bytes). */
static inline __nv_bfloat16 *bf16_ptr(ops_bf16 *p)
{
    return (__nv_bfloat16 *)(void *)p;
}

static inline const __nv_bfloat16 *bf16_cptr(const ops_bf16 *p)
{
    return (const __nv_bfloat16 *)(const void *)p;
}

/* Whether every pointer given is 16-byte aligned: the condition for float4 accesses (a
 * misaligned vector access faults on a GPU). */
static inline bool aligned16(const void *a, const void *b = 0, const void *c = 0,
                             const void *d = 0)
{
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15u) == 0;
}

#endif
