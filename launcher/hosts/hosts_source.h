/* Where the hosts come from, as both `ddptop check` and `ddptop run` let a user say it: a
 * HOSTFILE operand, --slurm (SLURM_JOB_NODELIST) or --pbs (PBS_NODEFILE), exactly one of them.
 * The command lines collect the choice while they walk argv; hosts_source_load reads it. */
#ifndef DDPTOP_HOSTS_SOURCE_H
#define DDPTOP_HOSTS_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "hostfile.h"

struct hosts_source {
    const char *hostfile;    /* the HOSTFILE operand (borrowed from argv), or NULL */
    bool slurm, pbs;
};

/* arg is --slurm or --pbs: noted, true. Anything else: false. */
bool hosts_source_option(struct hosts_source *s, const char *arg);
/* A HOSTFILE operand: 0, or -1 with a message in err when one was given already. */
int hosts_source_file(struct hosts_source *s, const char *path, char *err, size_t errlen);
/* Whether any of the three was given (`ddptop run` runs locally without one). */
bool hosts_source_given(const struct hosts_source *s);
/* Reads the hosts into *hl (hostfile_parse, hostfile_from_slurm or hostfile_from_pbs).
 * Returns 0, or -1 with a message in err: more than one source or none given, the reader's
 * own error, or a source without hosts. */
int hosts_source_load(const struct hosts_source *s, struct hostlist *hl, char *err, size_t errlen);

#endif
