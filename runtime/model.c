/* The byte-level MLP language model (see model.h): parameter layout, init, forward, backward.
 * All arithmetic goes through ops.h so another backend can replace it. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "ops.h"
#include "rng.h"

size_t model_count_params(const struct model_config *cfg)
{
    size_t in = (size_t)cfg->context * cfg->embed, h = (size_t)cfg->hidden;
    size_t n = (size_t)MODEL_VOCAB * h + MODEL_VOCAB;            /* output layer */
    n += h * in + h;                                             /* first hidden layer */
    n += (size_t)(cfg->layers - 1) * (h * h + h);                /* the others */
    n += (size_t)cfg->context * MODEL_VOCAB * cfg->embed;        /* embedding tables */
    return n;
}

const char *model_config_check(const struct model_config *cfg)
{
    if (cfg->context < 1 || cfg->context > 1024) return "--context must be 1..1024";
    if (cfg->embed < 1 || cfg->embed > 4096) return "embedding width must be 1..4096";
    if (cfg->hidden < 1 || cfg->hidden > 65536) return "--hidden must be 1..65536";
    if (cfg->layers < 1 || cfg->layers > MODEL_MAX_LAYERS) return "--layers must be 1..64";
    if (model_count_params(cfg) > ((size_t)1 << 31))
        return "model too large (over 2^31 parameters)";
    return NULL;
}

static void add_tensor(struct model *m, size_t *off, const char *name, size_t n, int decay)
{
    struct model_tensor *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->off = *off;
    t->n = n;
    t->decay = decay;
    *off += n;
}

static float *xcalloc_floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    RT_CHECK(p != NULL, "out of memory allocating %zu floats", n);
    return p;
}

struct model *model_new(const struct model_config *cfg, int max_batch)
{
    struct model *m = calloc(1, sizeof *m);
    RT_CHECK(m != NULL, "out of memory");
    m->cfg = *cfg;
    m->max_batch = max_batch;
    int L = cfg->layers, H = cfg->hidden, IN = cfg->context * cfg->embed;
    m->n_params = model_count_params(cfg);
    m->params = xcalloc_floats(m->n_params);
    m->grads = xcalloc_floats(m->n_params);

    /* Backward order: output layer, last hidden layer, ..., first hidden layer, embeddings. */
    size_t off = 0;
    char name[24];
    for (int l = L; l >= 0; l--) {
        struct model_linear *lin = &m->lin[l];
        lin->ic = l == 0 ? IN : H;
        lin->oc = l == L ? MODEL_VOCAB : H;
        if (l == L) snprintf(name, sizeof name, "out.w");
        else snprintf(name, sizeof name, "h%d.w", l);
        lin->w = m->params + off;
        lin->dw = m->grads + off;
        add_tensor(m, &off, name, (size_t)lin->ic * lin->oc, 1);
        name[strlen(name) - 1] = 'b';
        lin->b = m->params + off;
        lin->db = m->grads + off;
        add_tensor(m, &off, name, (size_t)lin->oc, 0);
    }
    m->wte = m->params + off;
    m->dwte = m->grads + off;
    add_tensor(m, &off, "wte", (size_t)cfg->context * MODEL_VOCAB * cfg->embed, 1);
    RT_CHECK(off == m->n_params, "parameter layout mismatch (%zu vs %zu)", off, m->n_params);

    /* Activations and backward scratch: one allocation, carved up below. */
    size_t B = (size_t)max_batch, wide = (size_t)(IN > H ? IN : H);
    size_t n_acts = B * IN + 2 * (size_t)L * B * H + 3 * B * MODEL_VOCAB + 2 * B * wide;
    m->acts = xcalloc_floats(n_acts);
    float *p = m->acts;
    m->x0 = p; p += B * IN;
    for (int l = 0; l < L; l++) {
        m->pre[l] = p; p += B * H;
        m->act[l] = p; p += B * H;
    }
    m->logits = p; p += B * MODEL_VOCAB;
    m->probs = p; p += B * MODEL_VOCAB;
    m->dlogits = p; p += B * MODEL_VOCAB;
    m->dbuf_a = p; p += B * wide;
    m->dbuf_b = p; p += B * wide;
    return m;
}

void model_free(struct model *m)
{
    if (!m) return;
    free(m->params);
    free(m->grads);
    free(m->acts);
    free(m);
}

void model_init_params(struct model *m, uint64_t seed)
{
    uint64_t s = seed ^ 0x6d6f64656c696e69ULL;   /* "modelini": apart from the data streams */
    int L = m->cfg.layers;
    /* torch's nn.Linear default, U(-k, k) with k = 1/sqrt(fan_in); the output layer 10x
     * smaller so the first loss is close to ln(256), the loss of knowing nothing. */
    for (int l = 0; l <= L; l++) {
        struct model_linear *lin = &m->lin[l];
        float k = 1.0f / sqrtf((float)lin->ic) * (l == L ? 0.1f : 1.0f);
        for (size_t i = 0; i < (size_t)lin->ic * lin->oc; i++)
            lin->w[i] = (2.0f * rng_uniform(&s) - 1.0f) * k;
        for (int i = 0; i < lin->oc; i++)
            lin->b[i] = l == L ? 0.0f : (2.0f * rng_uniform(&s) - 1.0f) * k;
    }
    size_t n_wte = (size_t)m->cfg.context * MODEL_VOCAB * m->cfg.embed;
    for (size_t i = 0; i < n_wte; i++)   /* nn.Embedding's default N(0, 1) */
        m->wte[i] = rng_normal(&s);
}

float model_forward(struct model *m, const uint8_t *tokens, const uint8_t *targets, int B)
{
    RT_CHECK(B >= 1 && B <= m->max_batch, "batch %d outside 1..%d", B, m->max_batch);
    const struct model_config *c = &m->cfg;
    int L = c->layers, H = c->hidden;
    m->tokens = tokens;
    m->targets = targets;
    m->batch = B;
    ops_embed_forward(m->x0, tokens, m->wte, B, c->context, c->embed);
    const float *in = m->x0;
    for (int l = 0; l < L; l++) {
        ops_linear_forward(m->pre[l], in, m->lin[l].w, m->lin[l].b, B, m->lin[l].ic, H);
        ops_gelu_forward(m->act[l], m->pre[l], (size_t)B * H);
        in = m->act[l];
    }
    ops_linear_forward(m->logits, in, m->lin[L].w, m->lin[L].b, B, H, MODEL_VOCAB);
    return ops_softmax_xent_forward(m->probs, m->logits, targets, B, MODEL_VOCAB);
}

void model_backward(struct model *m, model_grad_ready_fn ready, void *ctx)
{
    const struct model_config *c = &m->cfg;
    int L = c->layers, H = c->hidden, B = m->batch;
    float *dact = m->dbuf_a, *dpre = m->dbuf_b;
    ops_softmax_xent_backward(m->dlogits, m->probs, m->targets, B, MODEL_VOCAB);
    ops_linear_backward(dact, m->lin[L].dw, m->lin[L].db, m->dlogits, m->act[L - 1],
                        m->lin[L].w, B, H, MODEL_VOCAB);
    if (ready) ready(ctx, (size_t)(m->lin[L].db + m->lin[L].oc - m->grads));
    for (int l = L - 1; l >= 0; l--) {
        struct model_linear *lin = &m->lin[l];
        ops_gelu_backward(dpre, m->pre[l], dact, (size_t)B * H);
        /* dact is free again: it becomes the next layer's input gradient */
        ops_linear_backward(dact, lin->dw, lin->db, dpre, l ? m->act[l - 1] : m->x0, lin->w, B,
                            lin->ic, H);
        if (ready) ready(ctx, (size_t)(lin->db + lin->oc - m->grads));
    }
    size_t n_wte = (size_t)c->context * MODEL_VOCAB * c->embed;
    ops_zero(m->dwte, n_wte);
    ops_embed_backward(m->dwte, dact, m->tokens, B, c->context, c->embed);
    if (ready) ready(ctx, m->n_params);
}
