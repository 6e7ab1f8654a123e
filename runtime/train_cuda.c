/* The GPU side of the trainer (see train_cuda.h): device mirror of struct model, the forward
 * and backward passes of model.c on device pointers, AdamW per tensor as optim.c does it, and
 * the choice of device. forward/backward follow model.c line for line, so the two stay easy
 * to compare; a change to the model is made in both. In BF16 mode every operand of a product
 * has a bf16 copy kept by the kernel that writes it (the weights' by AdamW, after an upload by
 * one conversion), so no product converts anything. */
#include "train_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static const char *const precision_names[] = { "fp32", "tf32", "bf16" };

int train_cuda_precision_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, precision_names[i])) return i;
    return -1;
}

const char *train_cuda_precision_name(int precision)
{
    return precision >= 0 && precision < 3 ? precision_names[precision] : "?";
}

#ifndef DDPTOP_HAVE_CUDA

/* Built without CUDA: the CPU is the only device; nothing below train_cuda_choose is reached. */
int train_cuda_choose(int want, const struct dist_env *env, char *msg, size_t msglen)
{
    (void)env;
    if (msglen) msg[0] = '\0';
    if (want != TRAIN_DEVICE_CUDA) return 0;
    snprintf(msg, msglen, "--device cuda: this ddptop-train was built without CUDA (no nvcc "
             "under CUDA_HOME at build time, or NO_CUDA=1); use --device cpu or rebuild with "
             "CUDA");
    return -1;
}

#define NO_CUDA_BUILD() rt_fatal(__FILE__, __LINE__, "built without CUDA")
struct train_cuda *train_cuda_new(struct model *m, int local_rank, int precision)
{
    (void)m, (void)local_rank, (void)precision;
    NO_CUDA_BUILD();
}
void train_cuda_free(struct train_cuda *g) { (void)g; }
void train_cuda_describe(const struct train_cuda *g, char *buf, size_t len)
{
    (void)g;
    snprintf(buf, len, "no GPU");
}
float *train_cuda_grads(struct train_cuda *g) { (void)g; NO_CUDA_BUILD(); }
struct comm *train_cuda_comm_new(struct train_cuda *g, const struct dist_env *env,
                                 struct store *st, double timeout_s, char *err, size_t errlen)
{
    (void)g, (void)env, (void)st, (void)timeout_s, (void)err, (void)errlen;
    NO_CUDA_BUILD();
}
void train_cuda_upload(struct train_cuda *g, const struct optim *o)
{
    (void)g, (void)o;
    NO_CUDA_BUILD();
}
void train_cuda_download(struct train_cuda *g, struct optim *o)
{
    (void)g, (void)o;
    NO_CUDA_BUILD();
}
void train_cuda_forward(struct train_cuda *g, const uint8_t *tokens, const uint8_t *targets,
                        int B)
{
    (void)g, (void)tokens, (void)targets, (void)B;
    NO_CUDA_BUILD();
}
void train_cuda_backward(struct train_cuda *g, model_grad_ready_fn ready, void *ctx)
{
    (void)g, (void)ready, (void)ctx;
    NO_CUDA_BUILD();
}
void train_cuda_optim_step(struct train_cuda *g, struct optim *o)
{
    (void)g, (void)o;
    NO_CUDA_BUILD();
}
float train_cuda_loss(struct train_cuda *g) { (void)g; NO_CUDA_BUILD(); }

#else /* DDPTOP_HAVE_CUDA */

#include "comm_nccl.h"
#include "ops_cuda.h"
#include "ops_cuda_lt.h"

int train_cuda_choose(int want, const struct dist_env *env, char *msg, size_t msglen)
{
    if (msglen) msg[0] = '\0';
    if (want == TRAIN_DEVICE_CPU) return 0;
    char why[256];
    int n = ops_cuda_device_count(why, sizeof why);
    if (n == 0) {
        if (want == TRAIN_DEVICE_AUTO) return 0;
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(msg, msglen, "--device cuda: no CUDA device visible (%s; CUDA_VISIBLE_DEVICES"
                 "=%s): use --device cpu, or check the GPU and its driver with nvidia-smi", why,
                 cvd ? cvd : "unset");
        return -1;
    }
    /* NCCL does not support two ranks of one communicator on the same GPU (it may hang). */
    if (env->world_size > 1 && env->local_world_size > n) {
        if (want == TRAIN_DEVICE_CUDA) {
            snprintf(msg, msglen, "--device cuda: LOCAL_WORLD_SIZE=%d ranks on this node but "
                     "%d GPU(s) visible: NCCL needs a GPU for every rank; start at most %d "
                     "rank(s) per node (slots= in the hostfile) or use --device cpu",
                     env->local_world_size, n, n);
            return -1;
        }
        if (env->local_rank == 0)
            snprintf(msg, msglen, "%d rank(s) on this node but %d GPU(s) visible: training on "
                     "the CPU (NCCL needs a GPU for every rank; --device cpu says so without "
                     "this note)", env->local_world_size, n);
        return 0;
    }
    return 1;
}

struct train_cuda {
    struct model *m;
    float *params, *grads;      /* n_params each, one allocation each, m's layout */
    float *adam_m, *adam_v;     /* AdamW moments, same layout */
    float *acts;                /* activations and backward scratch, m->acts's layout */
    size_t n_acts;
    /* BF16 mode only (else NULL): bf16 copies of the parameters (the shadow that AdamW
     * rewrites) and of the activations, at the same offsets as params and acts, so the
     * products read bf16 operands without converting them (ops_cuda.h, ops_bf16) */
    ops_bf16 *params16, *acts16;
    uint8_t *tok, *tgt;         /* device copies of the batch */
    uint8_t *tok_host, *tgt_host;   /* page-locked staging, so the copies are asynchronous */
    float *loss_dev, *loss_host;
    int batch;
    /* AdamW in one launch: where each tensor ends and its weight decay (NULL: the tensors do
     * not tile the parameters in order, so one launch per tensor) */
    unsigned *seg_end;
    float *seg_wd, seg_wd_for;
};

/* The device address of a host tensor of m: same allocation, same offset. */
static float *dev(const struct train_cuda *g, const float *host)
{
    const struct model *m = g->m;
    uintptr_t h = (uintptr_t)host;
    uintptr_t p = (uintptr_t)m->params, gr = (uintptr_t)m->grads, a = (uintptr_t)m->acts;
    if (h >= p && h < p + m->n_params * sizeof(float)) return g->params + (host - m->params);
    if (h >= gr && h < gr + m->n_params * sizeof(float)) return g->grads + (host - m->grads);
    if (h >= a && h < a + g->n_acts * sizeof(float)) return g->acts + (host - m->acts);
    rt_fatal(__FILE__, __LINE__, "internal error: a model pointer outside its allocations");
}

/* The bf16 copy of a host tensor of m's parameters or activations: NULL outside BF16 mode. */
static ops_bf16 *dev16(const struct train_cuda *g, const float *host)
{
    if (!g->params16) return NULL;
    const struct model *m = g->m;
    uintptr_t h = (uintptr_t)host, p = (uintptr_t)m->params, a = (uintptr_t)m->acts;
    if (h >= p && h < p + m->n_params * sizeof(float)) return g->params16 + (host - m->params);
    if (h >= a && h < a + g->n_acts * sizeof(float)) return g->acts16 + (host - m->acts);
    rt_fatal(__FILE__, __LINE__, "internal error: no bf16 copy of this model pointer");
}

struct train_cuda *train_cuda_new(struct model *m, int local_rank, int precision)
{
    ops_cuda_init(local_rank, (enum ops_precision)precision);
    struct train_cuda *g = calloc(1, sizeof *g);
    RT_CHECK(g != NULL, "out of memory");
    g->m = m;
    const struct model_config *c = &m->cfg;
    size_t B = (size_t)m->max_batch, IN = (size_t)c->context * c->embed, H = (size_t)c->hidden;
    size_t L = (size_t)c->layers, wide = IN > H ? IN : H;
    /* model_new's carving of m->acts; checked against its last pointer */
    g->n_acts = B * IN + 2 * L * B * H + 3 * B * MODEL_VOCAB + 2 * B * wide;
    RT_CHECK((size_t)(m->dbuf_b + B * wide - m->acts) == g->n_acts,
             "internal error: activation layout of model.c changed; update train_cuda.c");
    size_t nb = m->n_params * sizeof(float);
    g->params = ops_cuda_alloc(nb);
    g->grads = ops_cuda_alloc(nb);
    g->adam_m = ops_cuda_alloc(nb);
    g->adam_v = ops_cuda_alloc(nb);
    g->acts = ops_cuda_alloc(g->n_acts * sizeof(float));
    if (precision == OPS_PREC_BF16) {
        g->params16 = ops_cuda_alloc(m->n_params * sizeof(ops_bf16));
        g->acts16 = ops_cuda_alloc(g->n_acts * sizeof(ops_bf16));
    }
    g->tok = ops_cuda_alloc(B * c->context);
    g->tgt = ops_cuda_alloc(B);
    g->tok_host = ops_cuda_alloc_host(B * c->context);
    g->tgt_host = ops_cuda_alloc_host(B);
    g->loss_dev = ops_cuda_alloc(sizeof(float));
    g->loss_host = ops_cuda_alloc_host(sizeof(float));
    unsigned ends[2 * MODEL_MAX_LAYERS + 3];
    int tiled = m->n_params <= 0xffffffffu;
    for (int i = 0; i < m->n_tensors && tiled; i++) {
        tiled = m->tensors[i].off == (i ? ends[i - 1] : 0);
        ends[i] = (unsigned)(m->tensors[i].off + m->tensors[i].n);
    }
    if (tiled && m->n_tensors > 0 && ends[m->n_tensors - 1] == m->n_params) {
        g->seg_end = ops_cuda_alloc(sizeof ends);
        ops_cuda_upload(g->seg_end, ends, (size_t)m->n_tensors * sizeof ends[0]);
        g->seg_wd = ops_cuda_alloc((size_t)m->n_tensors * sizeof(float));
        g->seg_wd_for = -1.0f;   /* uploaded at the first step */
    }
    return g;
}

void train_cuda_free(struct train_cuda *g)
{
    if (!g) return;
    ops_cuda_sync();
    ops_cuda_free(g->params);
    ops_cuda_free(g->grads);
    ops_cuda_free(g->adam_m);
    ops_cuda_free(g->adam_v);
    ops_cuda_free(g->acts);
    ops_cuda_free(g->params16);
    ops_cuda_free(g->acts16);
    ops_cuda_free(g->tok);
    ops_cuda_free(g->tgt);
    ops_cuda_free_host(g->tok_host);
    ops_cuda_free_host(g->tgt_host);
    ops_cuda_free(g->loss_dev);
    ops_cuda_free_host(g->loss_host);
    ops_cuda_free(g->seg_end);
    ops_cuda_free(g->seg_wd);
    free(g);
    ops_cuda_done();
}

void train_cuda_describe(const struct train_cuda *g, char *buf, size_t len)
{
    (void)g;
    snprintf(buf, len, "GPU %d (%s), %s matrix products", ops_cuda_device(),
             ops_cuda_device_name(), train_cuda_precision_name((int)ops_cuda_precision()));
}

float *train_cuda_grads(struct train_cuda *g)
{
    return g->grads;
}

struct comm *train_cuda_comm_new(struct train_cuda *g, const struct dist_env *env,
                                 struct store *st, double timeout_s, char *err, size_t errlen)
{
    (void)g;
    return comm_nccl_new(env, st, timeout_s, ops_cuda_stream(), err, errlen);
}

void train_cuda_upload(struct train_cuda *g, const struct optim *o)
{
    size_t nb = g->m->n_params * sizeof(float);
    ops_cuda_upload(g->params, g->m->params, nb);
    ops_cuda_upload(g->adam_m, o->m, nb);
    ops_cuda_upload(g->adam_v, o->v, nb);
    /* the shadow starts from the uploaded weights (init or a snapshot); AdamW keeps it */
    if (g->params16) ops_cuda_to_bf16(g->params16, g->params, g->m->n_params);
}

void train_cuda_download(struct train_cuda *g, struct optim *o)
{
    size_t nb = g->m->n_params * sizeof(float);
    ops_cuda_download(g->m->params, g->params, nb);
    if (!o) return;
    ops_cuda_download(o->m, g->adam_m, nb);
    ops_cuda_download(o->v, g->adam_v, nb);
}

void train_cuda_forward(struct train_cuda *g, const uint8_t *tokens, const uint8_t *targets,
                        int B)
{
    struct model *m = g->m;
    const struct model_config *c = &m->cfg;
    int L = c->layers, H = c->hidden;
    RT_CHECK(B >= 1 && B <= m->max_batch, "batch %d outside 1..%d", B, m->max_batch);
    /* The staging buffers must be free: the last step's copies done. In the trainer
     * train_cuda_loss already waited, so this costs nothing there. */
    ops_cuda_sync();
    memcpy(g->tok_host, tokens, (size_t)B * c->context);
    memcpy(g->tgt_host, targets, (size_t)B);
    ops_cuda_upload_async(g->tok, g->tok_host, (size_t)B * c->context);
    ops_cuda_upload_async(g->tgt, g->tgt_host, (size_t)B);
    g->batch = B;
    ops_cuda_embed_forward(dev(g, m->x0), dev16(g, m->x0), g->tok, dev(g, m->wte), B,
                           c->context, c->embed);
    const float *in = m->x0;   /* host addresses: dev() and dev16() map them */
    for (int l = 0; l < L; l++) {
        const struct model_linear *lin = &m->lin[l];
        /* the GELU in the product's epilogue where it applies (ops_cuda_lt.h) */
        ops_cuda_linear_gelu_forward(dev(g, m->act[l]), dev16(g, m->act[l]), dev(g, m->pre[l]),
                                     dev(g, in), dev16(g, in), dev(g, lin->w), dev16(g, lin->w),
                                     dev(g, lin->b), B, lin->ic, H);
        in = m->act[l];
    }
    ops_cuda_linear_forward(dev(g, m->logits), dev(g, in), dev16(g, in), dev(g, m->lin[L].w),
                            dev16(g, m->lin[L].w), dev(g, m->lin[L].b), B, H, MODEL_VOCAB);
    /* the loss and, in the same pass over the logits, their gradient: every forward of the
     * trainer is followed by its backward (m->probs stays unused on the device) */
    ops_cuda_softmax_xent_fused(dev(g, m->dlogits), dev16(g, m->dlogits), g->loss_dev,
                                dev(g, m->logits), g->tgt, B, MODEL_VOCAB);
}

void train_cuda_backward(struct train_cuda *g, model_grad_ready_fn ready, void *ctx)
{
    struct model *m = g->m;
    const struct model_config *c = &m->cfg;
    int L = c->layers, H = c->hidden, B = g->batch;
    /* model.c's dact and dpre passes in one: each layer's dinp product applies GELU' of the
     * layer before (ops_cuda_linear_backward_gelu: an epilogue where cuBLASLt has one), so
     * it yields that layer's dpre (with its bf16 copy); dout and dinp take turns in the two
     * buffers (host addresses: dev() and dev16() map them). */
    float *dout = m->dbuf_b, *dinp = m->dbuf_a;
    /* dlogits: written by the forward (ops_cuda_softmax_xent_fused) */
    ops_cuda_linear_backward_gelu(dev(g, dout), dev16(g, dout), dev(g, m->pre[L - 1]),
                                  dev(g, m->lin[L].dw), dev(g, m->lin[L].db),
                                  dev(g, m->dlogits), dev16(g, m->dlogits),
                                  dev(g, m->act[L - 1]), dev16(g, m->act[L - 1]),
                                  dev(g, m->lin[L].w), dev16(g, m->lin[L].w), B, H, MODEL_VOCAB);
    /* queued, not done: the NCCL backend orders its all-reduce after this point */
    if (ready) ready(ctx, (size_t)(m->lin[L].db + m->lin[L].oc - m->grads));
    for (int l = L - 1; l >= 0; l--) {
        struct model_linear *lin = &m->lin[l];
        const float *in = l ? m->act[l - 1] : m->x0;
        /* layer 0's dinp is the embedding's gradient: no GELU below, no product reads it */
        ops_cuda_linear_backward_gelu(dev(g, dinp), l ? dev16(g, dinp) : NULL,
                                      l ? dev(g, m->pre[l - 1]) : NULL, dev(g, lin->dw),
                                      dev(g, lin->db), dev(g, dout), dev16(g, dout), dev(g, in),
                                      dev16(g, in), dev(g, lin->w), dev16(g, lin->w), B,
                                      lin->ic, H);
        if (ready) ready(ctx, (size_t)(lin->db + lin->oc - m->grads));
        float *t = dout;
        dout = dinp, dinp = t;
    }
    size_t n_wte = (size_t)c->context * MODEL_VOCAB * c->embed;
    ops_cuda_zero(dev(g, m->dwte), n_wte);
    ops_cuda_embed_backward(dev(g, m->dwte), dev(g, dout), g->tok, B, c->context, c->embed);
    if (ready) ready(ctx, m->n_params);
}

void train_cuda_optim_step(struct train_cuda *g, struct optim *o)
{
    struct model *m = g->m;
    o->t++;
    if (g->seg_end) {
        if (g->seg_wd_for != o->weight_decay) {
            float wd[2 * MODEL_MAX_LAYERS + 3];
            for (int i = 0; i < m->n_tensors; i++)
                wd[i] = m->tensors[i].decay ? o->weight_decay : 0.0f;
            ops_cuda_upload(g->seg_wd, wd, (size_t)m->n_tensors * sizeof wd[0]);
            g->seg_wd_for = o->weight_decay;
        }
        ops_cuda_adamw_segments(g->params, g->params16, g->grads, g->adam_m, g->adam_v, m->n_params,
                                g->seg_end, g->seg_wd, m->n_tensors, o->lr, o->beta1, o->beta2,
                                o->eps, o->t);
        return;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const struct model_tensor *t = &m->tensors[i];
        ops_cuda_adamw(g->params + t->off, g->params16 ? g->params16 + t->off : NULL,
                       g->grads + t->off, g->adam_m + t->off,
                       g->adam_v + t->off, t->n, o->lr, o->beta1, o->beta2, o->eps,
                       t->decay ? o->weight_decay : 0.0f, o->t);
    }
}

float train_cuda_loss(struct train_cuda *g)
{
    ops_cuda_download(g->loss_host, g->loss_dev, sizeof(float));
    return *g->loss_host;
}

#endif /* DDPTOP_HAVE_CUDA */
