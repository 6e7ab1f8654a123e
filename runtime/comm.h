/* Collective communication behind one interface: the CPU ring all-reduce over TCP (comm_ring.c)
 * and, when built with CUDA, NCCL. Buffers are float32; on the CUDA backend they are device
 * pointers. Gradients are averaged in buckets: the trainer starts each bucket as soon as its
 * gradients are ready and waits for all of them before the optimizer step. */
#ifndef DDPTOP_COMM_H
#define DDPTOP_COMM_H

#include <stddef.h>

#include "dist.h"
#include "store.h"

struct comm;

struct comm_ops {
    const char *name;
    /* Starts averaging data[0..n) across ranks in place; returns at once. Calls on every rank
     * must come in the same order with the same n. */
    int (*allreduce_avg_start)(struct comm *c, float *data, size_t n);
    /* Waits for every started all-reduce. -1 when a peer was lost, with a message naming it. */
    int (*wait_all)(struct comm *c);
    void (*free)(struct comm *c);
};

struct comm {
    const struct comm_ops *ops;
    int rank, world_size;
    double comm_ms;     /* time spent inside collectives, accumulated; the trainer resets it */
    char err[512];
};

/* The CPU ring: peers' addresses exchanged through the store. timeout_s bounds how long a
 * collective waits for a silent peer before failing with a message naming it. */
struct comm *comm_ring_new(const struct dist_env *env, struct store *st, double timeout_s,
                           char *err, size_t errlen);

static inline int comm_allreduce_avg_start(struct comm *c, float *d, size_t n)
{
    return c->ops->allreduce_avg_start(c, d, n);
}
static inline int comm_wait_all(struct comm *c) { return c->ops->wait_all(c); }
static inline void comm_free(struct comm *c) { if (c) c->ops->free(c); }

#endif
