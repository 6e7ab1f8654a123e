/* The byte-level language model: the previous `context` bytes, each embedded by its own
 * 256 x embed table, concatenated, then `layers` hidden layers (linear + GELU) of width `hidden`
 * and a linear layer to 256 logits with softmax cross-entropy against the next byte.
 *
 * Like llm.c, one struct owns the model; every parameter lives in ONE allocation (params) with
 * tensors pointing into it, and every gradient in one allocation of the same layout (grads), so
 * the trainer's all-reduce buckets are plain slices. The layout follows backward order (output
 * layer first, embeddings last) so a bucket's gradients are final as early as possible. */
#ifndef DDPTOP_MODEL_H
#define DDPTOP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_VOCAB 256
#define MODEL_MAX_LAYERS 64

struct model_config {
    int context;    /* bytes of history per prediction */
    int embed;      /* embedding width per byte */
    int hidden;     /* width of every hidden layer */
    int layers;     /* number of hidden layers */
};

/* One parameter tensor: a slice [off, off+n) of params (and of grads). */
struct model_tensor {
    char name[24];
    size_t off, n;
    int decay;      /* 1: weight decay applies (matrices, embeddings); 0: biases */
};

struct model_linear {
    int ic, oc;
    float *w, *b, *dw, *db;
};

struct model {
    struct model_config cfg;
    int max_batch;
    size_t n_params;
    float *params, *grads;
    int n_tensors;
    struct model_tensor tensors[2 * MODEL_MAX_LAYERS + 3];
    struct model_linear lin[MODEL_MAX_LAYERS + 1];  /* lin[0..layers-1] hidden, lin[layers] out */
    float *wte, *dwte;
    /* activations for max_batch rows, one allocation */
    float *acts;
    float *x0;                      /* [B][context*embed] */
    float *pre[MODEL_MAX_LAYERS];   /* [B][hidden] before GELU */
    float *act[MODEL_MAX_LAYERS];   /* [B][hidden] after GELU */
    float *logits, *probs;          /* [B][256] */
    float *dlogits, *dbuf_a, *dbuf_b;
    const uint8_t *tokens, *targets;
    int batch;
};

/* Called during backward each time grads[0..n_ready) are final. */
typedef void (*model_grad_ready_fn)(void *ctx, size_t n_ready);

/* Number of parameters of a configuration (without building it). */
size_t model_count_params(const struct model_config *cfg);
/* Checks ranges; returns NULL or a static message naming the bad field. */
const char *model_config_check(const struct model_config *cfg);

struct model *model_new(const struct model_config *cfg, int max_batch);
void model_free(struct model *m);
/* Same seed, same parameters, on every machine. */
void model_init_params(struct model *m, uint64_t seed);
/* tokens: [B][context] input bytes, targets: [B] next bytes; returns the mean loss. */
float model_forward(struct model *m, const uint8_t *tokens, const uint8_t *targets, int B);
/* Gradients of the mean loss of the last forward into grads (overwritten), calling ready (may
 * be NULL) as each layer's gradients become final. */
void model_backward(struct model *m, model_grad_ready_fn ready, void *ctx);

#endif
