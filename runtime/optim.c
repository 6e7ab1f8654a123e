/* AdamW (see optim.h); the arithmetic is ops_adamw, per tensor for the decay flag. */
#include "optim.h"

#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "ops.h"

void optim_init(struct optim *o, size_t n, float lr)
{
    memset(o, 0, sizeof *o);
    o->lr = lr;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
    o->weight_decay = 0.01f;
    o->n = n;
    o->m = calloc(n ? n : 1, sizeof(float));
    o->v = calloc(n ? n : 1, sizeof(float));
    RT_CHECK(o->m && o->v, "out of memory for the optimizer state (%zu floats)", 2 * n);
}

void optim_free(struct optim *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

void optim_step(struct optim *o, struct model *m)
{
    o->t++;
    for (int i = 0; i < m->n_tensors; i++) {
        const struct model_tensor *t = &m->tensors[i];
        ops_adamw(m->params + t->off, m->grads + t->off, o->m + t->off, o->v + t->off, t->n,
                  o->lr, o->beta1, o->beta2, o->eps, t->decay ? o->weight_decay : 0.0f, o->t);
    }
}
