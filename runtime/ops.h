/* The model's math, one function per kernel, on raw float arrays. This is the seam for a second
 * backend: the CPU version (ops_cpu.c) uses BLAS for every matrix product; a CUDA version can
 * provide the same functions on device pointers. Shapes are row-major: B rows (samples) of
 * IC/OC columns; a weight W is [OC][IC] like torch's nn.Linear. */
#ifndef DDPTOP_OPS_H
#define DDPTOP_OPS_H

#include <stddef.h>
#include <stdint.h>

/* Sets BLAS to one thread per rank unless OPENBLAS_NUM_THREADS says otherwise. */
void ops_init(void);

void ops_zero(float *x, size_t n);

/* out[b][c*E + e] = wte[c][tok[b*C + c]][e]: one 256 x E table per context position. */
void ops_embed_forward(float *out, const uint8_t *tok, const float *wte, int B, int C, int E);
/* dwte[c][tok][e] += dout[b][c*E + e] (accumulates: the caller zeroes dwte first). */
void ops_embed_backward(float *dwte, const float *dout, const uint8_t *tok, int B, int C, int E);

/* out[B][OC] = inp[B][IC] * W^T + bias */
void ops_linear_forward(float *out, const float *inp, const float *w, const float *bias,
                        int B, int IC, int OC);
/* dW = dout^T * inp and dbias = column sums of dout (both overwritten);
 * dinp = dout * W (overwritten), skipped when dinp is NULL. */
void ops_linear_backward(float *dinp, float *dw, float *dbias, const float *dout,
                         const float *inp, const float *w, int B, int IC, int OC);

/* GELU, tanh approximation (as GPT-2 and llm.c). */
void ops_gelu_forward(float *out, const float *inp, size_t n);
void ops_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

/* probs = softmax(logits) row-wise; returns the mean over rows of -log probs[b][target[b]]. */
float ops_softmax_xent_forward(float *probs, const float *logits, const uint8_t *targets,
                               int B, int V);
/* dlogits = (probs - onehot(target)) / B: the gradient of the mean loss. */
void ops_softmax_xent_backward(float *dlogits, const float *probs, const uint8_t *targets,
                               int B, int V);

/* One AdamW step over n parameters (bias-corrected, decoupled weight decay, torch's order:
 * p -= lr*wd*p, then p -= lr * mhat / (sqrt(vhat) + eps)); t is the 1-based step number. */
void ops_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
               float beta2, float eps, float wd, long t);

#endif
