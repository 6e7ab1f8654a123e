/* The GPU side of the trainer, behind a small interface so train.c keeps one step loop: the
 * host struct model still owns the layout (tensors, offsets) and the host copy of the
 * parameters (init, snapshots, checksum); this module mirrors it on the device with parameters,
 * gradients, AdamW moments and activations in one device allocation each (so all-reduce
 * buckets are slices of the gradients, as on the CPU), and runs forward, backward and AdamW
 * through ops_cuda.h. Built in every configuration: without CUDA (DDPTOP_HAVE_CUDA unset) only
 * the option helpers work, and train_cuda_choose never picks the GPU. */
#ifndef DDPTOP_TRAIN_CUDA_H
#define DDPTOP_TRAIN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "dist.h"
#include "model.h"
#include "optim.h"
#include "store.h"

/* --device: TRAIN_DEVICE_AUTO (the default) is cuda when this rank can have a GPU of its own. */
#define TRAIN_DEVICE_AUTO (-1)
#define TRAIN_DEVICE_CPU 0
#define TRAIN_DEVICE_CUDA 1

/* --precision of the matrix products: "fp32" 0, "tf32" 1 (default), "bf16" 2 (values of
 * enum ops_precision). -1 when unknown. */
int train_cuda_precision_parse(const char *s);
const char *train_cuda_precision_name(int precision);

/* Resolves --device for this rank: 1 cuda, 0 cpu, -1 a configuration error (exit 2). msg gets
 * the error, or for 0 a note worth printing (empty when there is nothing to say). */
int train_cuda_choose(int want, const struct dist_env *env, char *msg, size_t msglen);

struct train_cuda;

/* Selects the GPU (LOCAL_RANK modulo the visible count) and allocates the device copies of m
 * (which must outlive it). Fatal on any CUDA error. */
struct train_cuda *train_cuda_new(struct model *m, int local_rank, int precision);
void train_cuda_free(struct train_cuda *g);
/* "GPU 0 (NVIDIA H100 80GB HBM3), tf32 matrix products" */
void train_cuda_describe(const struct train_cuda *g, char *buf, size_t len);
/* The device gradient allocation (layout of m->grads): all-reduce buckets are slices of it. */
float *train_cuda_grads(struct train_cuda *g);
/* A communicator whose buffers are device pointers: NCCL. */
struct comm *train_cuda_comm_new(struct train_cuda *g, const struct dist_env *env,
                                 struct store *st, double timeout_s, char *err, size_t errlen);

/* Host -> device: m->params, o->m, o->v (after init or resume). */
void train_cuda_upload(struct train_cuda *g, const struct optim *o);
/* Device -> host: m->params, and o->m, o->v unless o is NULL. Waits for the device. */
void train_cuda_download(struct train_cuda *g, struct optim *o);

/* One step, as model_forward / model_backward / optim_step, queued on the GPU. forward copies
 * tokens and targets, so the caller may reuse them once train_cuda_loss returned. forward
 * computes the gradient of the logits with the loss (one pass over them), so backward needs
 * the forward just before it, as in the trainer's step. */
void train_cuda_forward(struct train_cuda *g, const uint8_t *tokens, const uint8_t *targets,
                        int B);
void train_cuda_backward(struct train_cuda *g, model_grad_ready_fn ready, void *ctx);
void train_cuda_optim_step(struct train_cuda *g, struct optim *o);
/* The mean loss of the last forward: the one copy to the host per step; waits for the step. */
float train_cuda_loss(struct train_cuda *g);

#endif
