/* Where the hosts come from, as both `ddptop check` and `ddptop run` let a user say it: a
 * HOSTFILE operand, --slurm (SLURM_JOB_NODELIST), --jobid, --salloc or --pbs (PBS_NODEFILE),
 * at most one of them (none: `ddptop run` on this machine). The command lines collect the
 * choice while they walk argv; hosts_source_load reads it. How the hosts' agents start is the
 * transport kinds' to say (ssh/transport_kind.h), from what this tells them. */
#ifndef DDPTOP_HOSTS_SOURCE_H
#define DDPTOP_HOSTS_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "hostfile.h"

struct hosts_source {
    const char *hostfile;    /* the HOSTFILE operand (borrowed from argv), or NULL */
    bool slurm, pbs;
    const char *jobid;       /* --jobid ID: the nodes of that Slurm job (borrowed) */
    const char *salloc;      /* --salloc ARGS: a new allocation's nodes (borrowed) */
    char *allocated;         /* the job id salloc gave (hosts_source_release gives it back) */
};

/* The lines of --help for the options below (both command lines print them). */
const char *hosts_source_usage(void);

/* arg is --slurm or --pbs: noted, true. Anything else: false. */
bool hosts_source_option(struct hosts_source *s, const char *arg);
/* --jobid ID and --salloc ARGS (they take a value): 1 taken (*i moved on), 0 not ours, -1 with
 * a message in err. */
int hosts_source_value_option(struct hosts_source *s, int argc, char **argv, int *i, const char *cmd,
                              char *err, size_t errlen);
/* Whether the hosts are a Slurm job's (--slurm, --jobid, --salloc): srun reaches them. */
bool hosts_source_slurm(const struct hosts_source *s);
/* The Slurm job the hosts belong to when named (--jobid, or --salloc's), else NULL. */
const char *hosts_source_jobid(const struct hosts_source *s);
/* --salloc leaves the new job's id in the environment (DDPTOP_SALLOC_JOBID) for the dashboard's
 * session, which runs ddptop again; the process that runs the job removes it from there. */
void hosts_source_forget_allocation(void);
/* scancel of an allocation --salloc made; nothing otherwise. */
void hosts_source_release(struct hosts_source *s);
/* A HOSTFILE operand: 0, or -1 with a message in err when one was given already. */
int hosts_source_file(struct hosts_source *s, const char *path, char *err, size_t errlen);
/* Whether any of the three was given (`ddptop run` runs locally without one). */
bool hosts_source_given(const struct hosts_source *s);
/* Reads the hosts into *hl (hostfile_parse, hostfile_from_slurm, slurm_job_hosts after
 * salloc for --salloc, or hostfile_from_pbs).
 * Returns 0, or -1 with a message in err: more than one source or none given, the reader's
 * own error, or a source without hosts. */
int hosts_source_load(struct hosts_source *s, struct hostlist *hl, char *err, size_t errlen);

#endif
