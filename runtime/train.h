/* The training run of ddptop-train: rendezvous, resume, the step loop with bucketed gradient
 * all-reduce, snapshots, metrics. train_main.c turns the command line into train_opts. */
#ifndef DDPTOP_TRAIN_H
#define DDPTOP_TRAIN_H

#include <stdint.h>

#include "model.h"

enum fault_kind { FAULT_NONE, FAULT_CRASH, FAULT_HANG, FAULT_EXIT };

struct train_fault {
    enum fault_kind kind;
    long step;      /* fires just before this step (1-based) would run */
    int rank;       /* -1: every rank */
};

struct train_opts {
    const char *data;           /* NULL: the built-in corpus */
    long steps;
    int batch;
    float lr;
    uint64_t seed;
    struct model_config cfg;
    const char *snapshot;       /* NULL: no snapshots */
    long snapshot_every;        /* 0: only at the end */
    long log_every;
    int device_cuda;            /* -1 auto (cuda when this rank can have a GPU), 0 cpu, 1 cuda */
    double bucket_mb;
    struct train_fault fault;
    double rdzv_timeout;
    int no_overlap;
    int precision;              /* GPU matrix products: 0 fp32, 1 tf32 (default), 2 bf16 */
};

/* The defaults, which train the built-in corpus below a loss of 2.5 in well under a minute. */
void train_opts_default(struct train_opts *o);

/* Parses "crash@10", "hang@5:1", "exit@3:0". -1 when malformed. */
int train_parse_fault(const char *s, struct train_fault *f);

/* Runs to the end; returns the process exit status (0, 1 runtime failure, 2 configuration).
 * Fatal errors inside may also exit directly through RT_CHECK. */
int train_run(const struct train_opts *o);

#endif
