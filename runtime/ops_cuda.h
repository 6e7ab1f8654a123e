/* The CUDA backend of the model's math: the same kernels as ops.h, one function each, on device
 * pointers, all queued on one compute stream (ops_cuda_stream) in call order. Plain C types only,
 * so C files use it without CUDA's headers; the implementation is ops_cuda.cu (built only when
 * CUDA is found, DDPTOP_HAVE_CUDA). Any CUDA or cuBLAS failure prints
 * "ddptop-train rank R: file:line: ..." and exits 1 (rt_fatal): a rank that cannot compute
 * says why and stops, and the launcher reports it.
 *
 * Results match ops_cpu.c within the tolerances of docs/gpu.md, not bit for bit (other
 * summation orders, fused multiply-add, TF32/bf16 matrix products). Every kernel is
 * deterministic (no floating-point atomics), so a GPU run repeats itself bit for bit on the same
 * GPU model and library versions, which exact resume relies on. */
#ifndef DDPTOP_OPS_CUDA_H
#define DDPTOP_OPS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How matrix products are computed; everything else is fp32 in every mode.
 *   FP32: fp32 inputs and products (closest to the CPU, slowest).
 *   TF32: fp32 storage, tensor cores round the inputs to TF32 (10-bit mantissa); the default.
 *   BF16: bf16 operands (the round-to-nearest-even rounding of the fp32 values), fp32
 *         accumulation and fp32 results; parameters, gradients and AdamW state stay fp32 (the
 *         master weights). */
enum ops_precision { OPS_PREC_FP32, OPS_PREC_TF32, OPS_PREC_BF16 };

/* bf16 copies: an array of bf16 bit patterns, element for element the round-to-nearest-even
 * rounding of an fp32 tensor. In BF16 mode the kernels that produce a product's operand can
 * write its copy alongside their fp32 result (an `ops_bf16 *` output; NULL: none), and the
 * products read the copies they are given (`const ops_bf16 *`; NULL: the operand is converted
 * for that product, one more pass over it). The results are the same bits either way; the
 * copies only save the conversions. FP32 and TF32 modes never read them. */
typedef uint16_t ops_bf16;

/* Visible devices (CUDA_VISIBLE_DEVICES applies). 0 when none, with why filled in, e.g.
 * "cudaGetDeviceCount: no CUDA-capable device is detected". Never exits. */
int ops_cuda_device_count(char *why, size_t whylen);

/* Selects device local_rank modulo the visible count, creates the compute stream and the
 * cuBLAS handle. Call once per process before anything below. */
void ops_cuda_init(int local_rank, enum ops_precision prec);
void ops_cuda_done(void);
int ops_cuda_device(void);
/* "NVIDIA H100 80GB HBM3" etc. */
const char *ops_cuda_device_name(void);
enum ops_precision ops_cuda_precision(void);
void ops_cuda_set_precision(enum ops_precision prec);
/* The compute stream, a cudaStream_t; the NCCL backend orders its work after it. */
void *ops_cuda_stream(void);

/* Device memory, zero-filled. */
void *ops_cuda_alloc(size_t bytes);
void ops_cuda_free(void *p);
/* Host memory that copies can use asynchronously (page-locked). */
void *ops_cuda_alloc_host(size_t bytes);
void ops_cuda_free_host(void *p);
/* Copies ordered on the compute stream. upload/download return when the copy is done;
 * upload_async returns at once (src must stay untouched until the stream passes it). */
void ops_cuda_upload(void *dst_dev, const void *src_host, size_t bytes);
void ops_cuda_upload_async(void *dst_dev, const void *src_host, size_t bytes);
void ops_cuda_download(void *dst_host, const void *src_dev, size_t bytes);
void ops_cuda_download_async(void *dst_host, const void *src_dev, size_t bytes);
/* Waits for everything queued on the compute stream. */
void ops_cuda_sync(void);

/* ---- the kernels: ops.h's contract, on device pointers, queued on the compute stream ---- */

void ops_cuda_zero(float *x, size_t n);
void ops_cuda_embed_forward(float *out, ops_bf16 *out16, const uint8_t *tok, const float *wte,
                            int B, int C, int E);
/* Accumulates like ops_embed_backward, in the same order per element (deterministic). */
void ops_cuda_embed_backward(float *dwte, const float *dout, const uint8_t *tok, int B, int C,
                             int E);
/* Each float operand of a product comes with its bf16 copy or NULL (see ops_bf16). */
void ops_cuda_linear_forward(float *out, const float *inp, const ops_bf16 *inp16,
                             const float *w, const ops_bf16 *w16, const float *bias, int B,
                             int IC, int OC);
void ops_cuda_linear_backward(float *dinp, float *dw, float *dbias, const float *dout,
                              const ops_bf16 *dout16, const float *inp, const ops_bf16 *inp16,
                              const float *w, const ops_bf16 *w16, int B, int IC, int OC);
void ops_cuda_gelu_forward(float *out, ops_bf16 *out16, const float *inp, size_t n);
void ops_cuda_gelu_backward(float *dinp, ops_bf16 *dinp16, const float *inp, const float *dout,
                            size_t n);
/* As ops_softmax_xent_forward, but the mean loss is written to the device float *loss (no
 * copy to the host, no wait): the trainer copies it once per step. */
void ops_cuda_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                   const uint8_t *targets, int B, int V);
void ops_cuda_softmax_xent_backward(float *dlogits, ops_bf16 *dlogits16, const float *probs,
                                    const uint8_t *targets, int B, int V);
/* Forward and backward in one pass over the logits, for a forward always followed by its
 * backward (the trainer): the mean loss as ops_cuda_softmax_xent_forward, and dlogits (with
 * its bf16 copy, NULL: none) as ops_cuda_softmax_xent_backward computes them from those
 * probabilities, bit for bit; the probabilities are not stored. V at most 16384. */
void ops_cuda_softmax_xent_fused(float *dlogits, ops_bf16 *dlogits16, float *loss,
                                 const float *logits, const uint8_t *targets, int B, int V);
/* bc1 = 1 - beta1^t and bc2 = 1 - beta2^t are computed on the host exactly as ops_adamw does.
 * p16 (NULL: none) is the bf16 shadow of the weights, rewritten from each new value. */
void ops_cuda_adamw(float *p, ops_bf16 *p16, const float *g, float *m, float *v, size_t n,
                    float lr, float beta1, float beta2, float eps, float wd, long t);
/* The same update over n parameters made of nseg tensors in one launch: tensor s ends before
 * element seg_end[s] (ascending, the last is n) and has weight decay seg_wd[s]. seg_end and
 * seg_wd are device memory. */
void ops_cuda_adamw_segments(float *p, ops_bf16 *p16, const float *g, float *m, float *v,
                             size_t n, const unsigned *seg_end, const float *seg_wd, int nseg,
                             float lr, float beta1, float beta2, float eps, long t);
/* dst = the bf16 rounding of src: a shadow's first value (after an upload), or a test's. */
void ops_cuda_to_bf16(ops_bf16 *dst, const float *src, size_t n);

/* ---- timing, for tests and benchmarks ---- */

/* Milliseconds the compute stream takes for fn(ctx) queued reps times (after one warm-up). */
double ops_cuda_time_ms(void (*fn)(void *ctx), void *ctx, int reps);

#ifdef __cplusplus
}
#endif

#endif
