/* A linear layer's three products through cuBLASLt, with the bias, the bias gradient and the
 * GELU done in the products' epilogues instead of separate passes over memory (issue 31: on an
 * H200 the bias broadcast, the column sums and GELU forward/backward were 17% of a bf16 step).
 * Same plain-C interface and the same stream, precision and device pointers as ops_cuda.h;
 * the implementation is ops_cuda_lt.cu.
 *
 * The epilogues, in cuBLASLt's column-major terms (ops_cuda.cu explains the row-major mapping):
 *   forward   out^T = W inp^T + bias            CUBLASLT_EPILOGUE_BIAS
 *             pre^T = W inp^T + bias,           CUBLASLT_EPILOGUE_GELU_AUX_BIAS (pre is the
 *             act^T = GELU(pre^T)               aux output the backward reads)
 *   dW        dW^T = inp^T dout, dbias = sum_b dout[b]   CUBLASLT_EPILOGUE_BGRADB
 *   dinp      dinp^T = (W^T dout^T) * GELU'(pre_in^T)    CUBLASLT_EPILOGUE_DGELU (pre_in: the
 *             pre-activation of the layer before, so dinp is already that layer's dpre)
 * cuBLASLt's GELU is the tanh form the model uses (ops_gelu_forward); whether its tanh rounds
 * like tanhf is for a GPU to measure, so FP32 mode keeps the separate GELU passes (the mode
 * closest to the CPU) and TF32/BF16 fuse them.
 *
 * Determinism: one algorithm per case, chosen by the heuristic once and cached with its
 * descriptors (keyed by shape, precision, epilogue and pointer alignment), so every step runs
 * the same kernels in the same order; cuBLASLt repeats a fixed algorithm bit for bit on one
 * GPU model and library version, which exact resume relies on. */
#ifndef DDPTOP_OPS_CUDA_LT_H
#define DDPTOP_OPS_CUDA_LT_H

#include <stddef.h>

#include "ops_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One product each, queued on ops_cuda_stream(). Each returns 1 when it queued the product
 * and 0 when it did nothing: the path is off (ops_cuda_lt_enable, DDPTOP_CUBLASLT=0) or
 * cuBLASLt has no algorithm for this case (an aux leading dimension that is not a multiple of
 * 8, say); the caller then computes it the plain way. A refusal is cached like a plan.
 * Each float operand comes with its bf16 copy or NULL, as in ops_cuda.h (ops_bf16): BF16
 * mode reads the copy, or converts the operand for this product when there is none.
 *   forward: out = inp W^T + bias; with pre != NULL, pre = that and out = GELU(pre); with
 *     neither bias nor pre, the product alone (no epilogue: the benchmark's reference).
 *   backward_weight: dw = dout^T inp and dbias[o] = sum over rows of dout[b][o] (dbias NULL:
 *     dw alone).
 *   backward_input: dinp = dout W; with pre_in != NULL, times GELU'(pre_in) elementwise. */
int ops_cuda_lt_forward(float *out, float *pre, const float *inp, const ops_bf16 *inp16,
                        const float *w, const ops_bf16 *w16, const float *bias, int B, int IC,
                        int OC);
int ops_cuda_lt_backward_weight(float *dw, float *dbias, const float *dout,
                                const ops_bf16 *dout16, const float *inp,
                                const ops_bf16 *inp16, int B, int IC, int OC);
int ops_cuda_lt_backward_input(float *dinp, const float *pre_in, const float *dout,
                               const ops_bf16 *dout16, const float *w, const ops_bf16 *w16,
                               int B, int IC, int OC);

/* Whether the heavy epilogues (GELU_AUX_BIAS, DGELU, BGRADB) pay for a product of m x n x k.
 * Measured on an H200 (2026-11-28, docs/performance.md "H200, issue 31's work measured"): they
 * win where launches dominate (64 x 512 x 512: up to 1.7x the separate passes; the default
 * model at batch 1024, 2^28, about 7% faster fused) and lose from about 8192 x 512 x 256 up
 * (BGRADB down to 0.23x of the plain product, the GELU aux 0.55-0.81x, where our GELU pass runs
 * at 86-90% of HBM's bandwidth): the 4096-wide bf16 model is 22% faster without them, and
 * batch 2048 at width 512 (2^29) is a tie. So they run up to LT_FUSE_MAX_MNK = 2^28, and above
 * it the plain product (with the bias epilogue still) and the separate passes.
 * DDPTOP_CUBLASLT=fuse fuses at every size (the benchmark's A/B). The choice depends on the
 * shape alone: every run and rank takes the same. */
#define LT_FUSE_MAX_MNK (1LL << 28)
int ops_cuda_lt_fuse(int m, int n, int k);

/* The model's linear -> GELU pair: pre = inp W^T + bias, act = GELU(pre) and act16 its bf16
 * copy (NULL: none). One product with the GELU epilogue where it applies (TF32/BF16,
 * cuBLASLt has an algorithm; the copy is then one conversion pass), else
 * ops_cuda_linear_forward and ops_cuda_gelu_forward. */
void ops_cuda_linear_gelu_forward(float *act, ops_bf16 *act16, float *pre, const float *inp,
                                  const ops_bf16 *inp16, const float *w, const ops_bf16 *w16,
                                  const float *bias, int B, int IC, int OC);
/* ops_cuda_linear_backward, but with pre_in != NULL dinp is multiplied by GELU'(pre_in): the
 * gradient of the pre-activation of the layer before (what ops_cuda_gelu_backward would make
 * of dinp), with its bf16 copy in dinp16 (NULL: none). */
void ops_cuda_linear_backward_gelu(float *dinp, ops_bf16 *dinp16, const float *pre_in,
                                   float *dw, float *dbias, const float *dout,
                                   const ops_bf16 *dout16, const float *inp,
                                   const ops_bf16 *inp16, const float *w, const ops_bf16 *w16,
                                   int B, int IC, int OC);

/* On by default unless DDPTOP_CUBLASLT=0 (read at the first product); tests and the
 * benchmark switch it to compare the two paths. */
void ops_cuda_lt_enable(int on);
int ops_cuda_lt_enabled(void);

/* Counters since ops_cuda_init, for tests and the benchmark: heuristic queries (one per new
 * case, never per step), plans cached (refusals included), products queued, products
 * refused (the caller fell back). */
struct ops_cuda_lt_stats {
    long queries, plans, matmuls, refused;
    long fused;   /* of matmuls, those with a heavy epilogue (GELU_AUX_BIAS, DGELU, BGRADB) */
};
void ops_cuda_lt_get_stats(struct ops_cuda_lt_stats *s);

/* Frees the handle, the cached plans and the workspace; ops_cuda_done calls it. */
void ops_cuda_lt_done(void);

#ifdef __cplusplus
}
#endif

#endif
