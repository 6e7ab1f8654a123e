/* What both `ddptop check` and `ddptop run` are told about the nodes: how they are reached (the
 * SSH options, --transport and its kind, --fanout, the Slurm or PBS job they belong to), what
 * runs there (the command, --env, --master-port) and what the preflight checks (--mesh, the
 * clock skew allowed; check's --json and --all). The run's controller keeps them as its
 * run_opts.nodes; the checks themselves: preflight.h. */
#ifndef DDPTOP_NODE_OPTS_H
#define DDPTOP_NODE_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "hosts/hostfile.h"
#include "hosts/hosts_source.h"
#include "ssh/ssh_conn.h"
#include "ssh/transport_kind.h"

struct node_opts {
    struct ssh_conn_opts ssh;
    bool json;
    bool all;                /* --all: a line per host in the text report (no folding) */
    int fanout;              /* hosts connecting at once */
    int max_skew_ms;
    int master_port;
    int mesh;                /* --mesh: enum check_mesh_mode (auto: full up to 64 nodes) */
    long mesh_seed;          /* --mesh-seed: the sample's seed; -1: a new one each run */
    bool bench;              /* --bench: the measured preflight (check_bench.h) */
    double bench_seconds;    /* --bench-seconds: each transfer's length (default 1) */
    double bench_min_ratio;  /* --bench-min-ratio: below this x the median is slow (0.5) */
    int bench_nccl_mib;      /* --bench-nccl-mib: each NCCL all-reduce's size (256 MiB); 0: no NCCL part */
    bool bench_dcgmi;        /* --bench-dcgmi: `dcgmi diag -r 1` where DCGM is installed */
    struct host_env *env;    /* --env K=V, in order */
    size_t n_env;
    struct transport_opts transport; /* --transport, the kinds' own options, the kind chosen
                                      * (ssh/transport_kind.h, docs/slurm.md) */
    const char *slurm_jobid; /* the hosts' Slurm job (--jobid/--salloc; NULL: SLURM_JOB_ID);
                              * lives as long as the process */
    bool slurm_release;      /* ddptop allocated that job (--salloc): scancel when done */
    bool slurm;              /* the hosts are a Slurm job's (--slurm, --jobid, --salloc) */
    bool pbs;                /* the hosts are a PBS job's (PBS_NODEFILE) */
    char **cmd;              /* training command after "--" (NULL: none) */
    size_t n_cmd;
    int verbose;
};

/* Defaults: fanout 64, timeout 10 s, max skew 500 ms, master port 29500, mesh auto. */
void node_opts_init(struct node_opts *o);
void node_opts_done(struct node_opts *o);
/* Decides how the agents of src's hosts start (o->transport.kind: transport_opts_choose), then
 * reads the hosts into *hl (hosts_source_load: salloc first for --salloc) and what the kinds
 * are told of them (o->slurm_jobid, o->slurm, o->pbs; o->slurm_release). 0, or -1 with a message. */
int node_opts_hosts(struct node_opts *o, struct hosts_source *src, struct hostlist *hl, char *err, size_t errlen);
/* --env KEY=VALUE: appended to o->env, or -1 with a message when it is not KEY=VALUE. */
int node_opts_add_env(struct node_opts *o, const char *kv, char *err, size_t errlen);
/* --mesh and --mesh-seed, shared by check and run: 1 when argv[*i] was one of them (and its
 * value taken), 0 when not, -1 with a message on a bad value. */
int node_opts_mesh_option(struct node_opts *o, int argc, char **argv, int *i, char *err, size_t errlen);
/* --bench, --bench-seconds S, --bench-min-ratio R, --bench-nccl-mib M, --bench-dcgmi
 * (docs/check.md, "Measured preflight"): the same contract. */
int node_opts_bench_option(struct node_opts *o, int argc, char **argv, int *i, char *err, size_t errlen);

#endif
