/* Which ranks (and nodes) the ranks pane shows, in which order (issue 19): "attention first"
 * (failed, lost, stalled, unknown, stragglers, throttling GPUs, then the rest, each class by
 * rank) or by rank, filtered by state and by host. A pure function of the model and the UI's
 * choices, no curses: the dashboard keeps one of these as a cache and refreshes it once per
 * frame at most, only when the model's generation or a choice moved. The order is a counting
 * sort over a handful of classes, O(ranks) with no comparisons, so a frame with 8,192 ranks
 * costs one pass over them plus the rows on screen; the aggregates of a node (min/median step,
 * median loss) are computed only for the node rows drawn. */
#ifndef DDPTOP_RANK_VIEW_H
#define DDPTOP_RANK_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job/job.h"

/* Attention classes, most urgent first. */
enum rank_attn {
    ATTN_FAILED,      /* non-zero exit or a signal */
    ATTN_LOST,        /* its node was lost */
    ATTN_STALLED,
    ATTN_UNKNOWN,     /* its node is silent or unreachable */
    ATTN_STRAGGLER,
    ATTN_THROTTLE,    /* its GPU throttles for a reason that slows it (GPU_THR_PROBLEMS) or has ECC errors */
    ATTN_REST,        /* running, pending, exited, stopped */
    ATTN_COUNT
};

/* The state filter (F cycles through them in this order). */
enum rank_filter {
    RF_ALL,
    RF_ATTENTION,     /* any class before ATTN_REST */
    RF_FAILED,        /* failed or lost */
    RF_STALLED,
    RF_STRAGGLER,
    RF_UNKNOWN,
    RF_THROTTLE,
    RF_RUNNING,       /* running and nothing to look at */
    RF_ENDED,         /* exited or stopped */
    RF_COUNT
};

/* The order: attention first when the ranks shown outnumber the rows (table only; the grid
 * keeps its cells in place), or as chosen with o. */
enum rank_order { ORDER_AUTO, ORDER_ATTENTION, ORDER_RANK };

/* What the view is asked for (from the UI state). */
struct rank_view_opts {
    enum rank_order order;
    enum rank_filter filter;
    const char *host;         /* a glob on node names (no wildcard: a substring); NULL or "" none */
    int node;                 /* only this node's ranks; -1 none */
    int rows;                 /* rank rows on screen (for ORDER_AUTO) */
    bool grid;
};

struct rank_view {
    int *idx;                 /* the ranks shown, in order (n of them) */
    int *pos;                 /* per rank: its place in idx, -1 when filtered out */
    size_t n, cap;
    bool attention;           /* the order in effect */
    int *nodes;               /* the nodes shown in the node view, in order (n_nodes_shown) */
    int *node_pos;            /* per node: its place in nodes, -1 when filtered out */
    size_t n_nodes_shown, nodes_cap;
    /* the cache key: what the view was computed from */
    const struct job *job;
    uint64_t gen;
    struct rank_view_opts opts;
    char host[128];
    bool valid;
};

/* A node row's aggregates (one pass over the node's ranks). */
struct node_summary {
    int counts[ATTN_COUNT];   /* ranks per class */
    int n_running, n_exited, n_pending, n_stopped;   /* of ATTN_REST */
    int worst;                /* the most urgent class of its ranks, lost/unknown from the node's
                               * state and link (ATTN_REST: nothing to look at) */
    bool has_step, has_loss;
    long step_min, step_median;
    double loss_median;       /* NAN when none */
    int n_gpus;               /* 0: no sample (shown as "-") */
    double gpu_util;          /* mean over its GPUs with a value; NAN unknown */
    double mem_used_mib, mem_total_mib;   /* sums; NAN unknown */
    double temp_max;          /* NAN unknown */
    int throttling, ecc;      /* GPUs throttling (GPU_THR_PROBLEMS), GPUs with ECC errors */
};

void rank_view_init(struct rank_view *v);
void rank_view_done(struct rank_view *v);
/* Recomputes the view when the job, its generation or the options moved (else nothing). */
void rank_view_update(struct rank_view *v, const struct job *j, const struct rank_view_opts *o);
/* The rank's place in the view (-1 when it is not shown). */
int rank_view_pos(const struct rank_view *v, int rank);

enum rank_attn rank_attn_class(const struct job *j, const struct rank_info *r);
bool rank_filter_match(enum rank_filter f, enum rank_attn c, const struct rank_info *r);
/* "all", "attention", "failed", ... (for titles and notices). */
const char *rank_filter_name(enum rank_filter f);
/* Whether node name matches the host filter (a glob; without wildcards, a substring). */
bool rank_view_host_match(const char *pattern, const char *name);

void node_summarize(const struct job *j, size_t node, struct node_summary *s);

#endif
