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

/* Tags: a communicator's requests carry CHECK_BENCH_NCCL_TAG + its index (0: the world). */
#define CHECK_BENCH_NCCL_TAG (CHECK_BENCH_TAG + (1 << 22))
#define CHECK_BENCH_NCCL_STOP_TAG (CHECK_BENCH_TAG + 3)

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
    double bytes;
    int64_t stage_ms;
    const struct check_bench_xfer *x;  /* the transfers' plan: the pairs and their rounds */
    size_t nx;
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

struct check_bench_nccl *check_bench_nccl_new(size_t n, const struct check_bench_io *io, const char *const *addr,
                                              int mib, int64_t stage_ms);
void check_bench_nccl_free(struct check_bench_nccl *nc);
/* Starts with the nodes alive whose bench_host found GPUs and NCCL (x, nx: the transfers' plan,
 * living as long as nc). false: nothing to measure (nc->skipped may say why). */
bool check_bench_nccl_begin(struct check_bench_nccl *nc, const bool *alive, const struct check_bench_host *host,
                            const struct check_bench_xfer *x, size_t nx, int64_t now);
void check_bench_nccl_message(struct check_bench_nccl *nc, size_t i, const struct wire_msg *m, int64_t now);
void check_bench_nccl_node_lost(struct check_bench_nccl *nc, size_t i, const char *why, int64_t now);
void check_bench_nccl_step(struct check_bench_nccl *nc, int64_t now);

/* The verdicts' NCCL part for node i (check_bench_nccl_eval.c): its findings said into v, its
 * figures in f ("nccl"), and the report's "nccl" document (once, i == SIZE_MAX). */
struct check_bench_verdict;
struct check_bench_nccl_eval;
struct check_bench_nccl_eval *check_bench_nccl_eval_new(const struct check_bench_nccl *nc, const bool *took,
                                                        double ratio);
void check_bench_nccl_eval_node(const struct check_bench_nccl_eval *ev, size_t i, const char *const *names,
                                struct check_bench_verdict *v, cJSON *f);
/* The words a passing node adds ("NCCL all-reduce 4 nodes x 2 GPUs: busbw 9.41 GB/s, ..."). */
void check_bench_nccl_eval_pass(const struct check_bench_nccl_eval *ev, size_t i, struct strbuf *sb);
cJSON *check_bench_nccl_eval_doc(const struct check_bench_nccl_eval *ev, const char *const *names);
void check_bench_nccl_eval_free(struct check_bench_nccl_eval *ev);

#endif
