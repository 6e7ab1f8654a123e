/* AdamW over the model's single parameter allocation: first and second moments in one
 * allocation each, same layout as params. Weight decay (decoupled, as in Loshchilov & Hutter)
 * applies to tensors marked decay (matrices and embeddings), not to biases. */
#ifndef DDPTOP_OPTIM_H
#define DDPTOP_OPTIM_H

#include <stddef.h>

#include "model.h"

struct optim {
    float lr, beta1, beta2, eps, weight_decay;
    long t;             /* optimizer steps taken; the bias correction uses t + 1 next */
    size_t n;
    float *m, *v;
};

/* torch.optim.AdamW's defaults except lr: betas (0.9, 0.999), eps 1e-8, weight decay 0.01. */
void optim_init(struct optim *o, size_t n, float lr);
void optim_free(struct optim *o);
/* One step: params -= update(grads). */
void optim_step(struct optim *o, struct model *m);

#endif
