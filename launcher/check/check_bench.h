/* The measured preflight (`ddptop check --bench`, `ddptop run --bench`; docs/check.md,
 * "Measured preflight"): after the usual checks, TCP bandwidth and round trips between nodes
 * over an O(N) sample of pairs, then each node's CPU memory bandwidth and GPUs, compared with
 * the others: the odd ones out are named with their figure and the median.
 *
 * The pairs: the ring both ways (i -> i+1, i -> i-1) and one random cycle (the mesh's seed), so
 * every node sends to and receives from at least two peers, and a slow link between two good
 * nodes is told from a slow node. Transfers run in rounds of pairs that share no node (a node
 * is in one transfer at a time: its figure is its own), about one round trip of the ring's
 * length, whatever the number of nodes: 3 to 7 rounds of --bench-seconds each. The agents'
 * side is the protocol's bench_listen, bench_send and bench_host (docs/protocol.md). */
#ifndef DDPTOP_CHECK_BENCH_H
#define DDPTOP_CHECK_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "node_opts.h"
#include "check_report.h"
#include "wire/client.h"

/* The preflight's tags at and above this are the bench's (a transfer's adds its index). */
#define CHECK_BENCH_TAG (WIRE_TAG_CHECK + (1 << 24))

struct check_bench_xfer {
    size_t src, dst;      /* indexes into the preflight's nodes */
    int round;
    bool sent, done;
    double gbps, seconds, rtt_us; /* < 0: not measured */
    double bytes;
    char *error;          /* NULL: it went through */
};

struct check_bench_host {
    bool asked, done;
    long same_as;         /* measured on that node, the same machine (its address); -1: itself */
    double cpu_mem_gbs;   /* < 0: not measured */
    cJSON *gpus;          /* the agent's array, owned (NULL: none) */
    char *gpu_error;
    char *nccl;           /* the node's NCCL version (bench_host's "nccl"); NULL: none */
    char *error;          /* the request failed */
};

/* ---- the NCCL part (check_bench_nccl.c; docs/check.md): NCCL's all-reduce across the nodes
 * that have GPUs and NCCL, one rank per GPU, bus bandwidth as nccl-tests' all_reduce_perf
 * reports it (busbw = bytes / time x 2(n-1)/n): first the whole world, then the node pairs of
 * the transfers' plan, so that a slow world is bisected to the node or link that is the common
 * factor of its slow pairs (check_bench_nccl_eval.c). After each node's GPUs were measured
 * (their count and NCCL's presence come from bench_host); the agents' side is bench_nccl and
 * bench_nccl_stop (docs/protocol.md). A communicator's requests carry CHECK_BENCH_NCCL_TAG +
 * its index (0: the world). */
#define CHECK_BENCH_NCCL_TAG (CHECK_BENCH_TAG + (1 << 22))
#define CHECK_BENCH_NCCL_STOP_TAG (CHECK_BENCH_TAG + 3)
struct check_bench_io;
struct check_bench_nccl;
/* o: --bench-nccl-mib, and --env's NCCL_* variables (the training's NCCL settings) for the
 * agents' NCCL processes. */
struct check_bench_nccl *check_bench_nccl_new(size_t n, const struct check_bench_io *io, const char *const *addr,
                                              const struct node_opts *o, int64_t stage_ms);
void check_bench_nccl_free(struct check_bench_nccl *nc);
/* Starts with the nodes alive whose bench_host found GPUs and NCCL (x, nx: the transfers' plan,
 * living as long as nc; tcp_gbps their median, <= 0: none). false: nothing to measure (its
 * skipped text may say why). */
bool check_bench_nccl_begin(struct check_bench_nccl *nc, const bool *alive, const struct check_bench_host *host,
                            const struct check_bench_xfer *x, size_t nx, double tcp_gbps, int64_t now);
void check_bench_nccl_message(struct check_bench_nccl *nc, size_t i, const struct wire_msg *m, int64_t now);
void check_bench_nccl_node_lost(struct check_bench_nccl *nc, size_t i, const char *why, int64_t now);
void check_bench_nccl_step(struct check_bench_nccl *nc, int64_t now);

/* NC_DONE reached; the deadline of what runs (0: none); a line of what it does. */
bool check_bench_nccl_done(const struct check_bench_nccl *nc);
int64_t check_bench_nccl_deadline(const struct check_bench_nccl *nc);
const char *check_bench_nccl_phase(const struct check_bench_nccl *nc);

/* The transfers for na nodes (0..na-1) and their rounds: no node twice in a round, and
 * the same (na, seed) gives the same plan. *out malloc'd; returns the count, *rounds set. */
size_t check_bench_plan(size_t na, uint64_t seed, struct check_bench_xfer **out, int *rounds);

struct check_bench;

/* How it asks node i's agent (the preflight's own way, preflight_io). */
struct check_bench_io {
    void *ctx;
    cJSON *(*request)(void *ctx, size_t node, const char *op, int tag);
    void (*send)(void *ctx, size_t node, cJSON *msg);
};

/* n nodes; alive[i]: node i takes part (its agent answers and has an address). addresses live
 * as long as the bench. */
struct check_bench *check_bench_new(const struct node_opts *o, size_t n, const bool *alive,
                                    const char *const *addresses, uint64_t seed, const struct check_bench_io *io);
void check_bench_free(struct check_bench *b);
/* Which machine each node is (its agent's boot id; NULL: not known, taken as its own): nodes
 * of one machine have its memory and GPUs measured once, not all at once against each other.
 * Copied; before check_bench_start. */
void check_bench_set_machines(struct check_bench *b, const char *const *machines);

void check_bench_start(struct check_bench *b, int64_t now_ms);
/* An answer whose tag is >= CHECK_BENCH_TAG, for node i. */
void check_bench_message(struct check_bench *b, size_t i, const struct wire_msg *m);
/* Node i's agent is gone: what it had in flight ends with that error. */
void check_bench_node_lost(struct check_bench *b, size_t i, const char *why);
void check_bench_step(struct check_bench *b, int64_t now_ms);
int64_t check_bench_deadline_ms(const struct check_bench *b);
bool check_bench_done(const struct check_bench *b);
/* A line of what it is doing, for -v and the live table's note ("bench: round 2 of 5"). */
const char *check_bench_phase(const struct check_bench *b);

/* The verdicts (check_bench_eval.c): the bench column of every row (names: the nodes' names)
 * and the report's "bench" document. Nodes that did not take part are skipped. */
void check_bench_evaluate(const struct check_bench *b, struct check_report *r, const char *const *names);

/* For check_bench_eval.c: what was measured. */
const struct check_bench_xfer *check_bench_xfers(const struct check_bench *b, size_t *n, int *rounds);
const struct check_bench_host *check_bench_hosts(const struct check_bench *b);
const bool *check_bench_took_part(const struct check_bench *b);
const struct node_opts *check_bench_opts(const struct check_bench *b);
size_t check_bench_nodes(const struct check_bench *b);
const struct check_bench_nccl *check_bench_nccl_part(const struct check_bench *b);
/* Node i's bench_dcgmi answer (--bench-dcgmi), or NULL: not asked. */
const cJSON *check_bench_dcgmi(const struct check_bench *b, size_t i);

#endif
