/* The measured preflight's NCCL part (docs/check.md, "Measured preflight"): NCCL's all-reduce
 * across the nodes that have GPUs and NCCL, one rank per GPU, bus bandwidth as nccl-tests'
 * all_reduce_perf reports it (busbw = bytes / time x 2(n-1)/n): first the whole world, then the
 * node pairs of the transfers' sampled mesh, so that a slow world is bisected to the node (or
 * link) that is the common factor of its slow pairs (check_bench_nccl_eval.c). Runs after each
 * node's GPUs were measured (their count and NCCL's presence come from bench_host); the agents'
 * side is bench_nccl and bench_nccl_stop (docs/protocol.md). */
#ifndef DDPTOP_CHECK_BENCH_NCCL_H
#define DDPTOP_CHECK_BENCH_NCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check_bench.h"

/* The communicators and their state, for check_bench_nccl.c and check_bench_nccl_eval.c; the
 * rest of the bench reaches them through check_bench.h's check_bench_nccl_* calls. */

/* Tags: a communicator's requests carry CHECK_BENCH_NCCL_TAG + its index (0: the world). */

/* One communicator: the world (round -1) or a pair, its members in rank order. */
struct nccl_comm {
    size_t *node, nn;
    int *rank0, ranks;
    int round;
    bool started, done;
    char *uid;                 /* the first member's unique id, hex */
    bool *answered, *own;      /* own: the member's error is its own, not a peer's doing */
    double *busbw, *algbw;     /* each member's, GB/s; < 0: none */
    char **error;
    double busbw_gbs, algbw_gbs; /* the communicator's: its slowest member's; < 0: failed */
};

enum nccl_phase { NC_IDLE, NC_WORLD, NC_PAIRS, NC_DONE };

struct check_bench_nccl {
    size_t n;
    struct check_bench_io io;
    const char *const *addr;
    const struct node_opts *o;
    double bytes;
    int64_t stage_ms;
    const struct check_bench_xfer *x;  /* the transfers' plan: the pairs and their rounds */
    size_t nx;
    double tcp_gbps;           /* the transfers' median: how long an all-reduce may take */
    bool *in;                  /* node i takes part */
    bool *gone;                /* stopped answering, or failed for itself in the world */
    int *gpus;
    char **note;               /* why node i was left out (a finding), NULL */
    char *skipped;             /* why nothing was measured, where GPUs exist; NULL */
    struct nccl_comm *c;       /* c[0]: the world; then the pairs */
    size_t nc;
    int rounds, round;
    enum nccl_phase phase;
    int64_t deadline;
    char phase_text[64];
};

#endif
