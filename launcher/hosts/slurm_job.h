/* A Slurm job as the source of hosts when ddptop runs outside it (a login node): --jobid ID
 * reads the job's nodes with scontrol, --salloc "ARGS" first asks salloc for an allocation and
 * ddptop gives it back at the end. Inside an allocation, --slurm reads the environment instead
 * (hostfile_from_slurm). See docs/slurm.md. */
#ifndef DDPTOP_SLURM_JOB_H
#define DDPTOP_SLURM_JOB_H

#include <stddef.h>

#include "hostfile.h"

/* The nodes of running job `jobid` in Slurm's order, with GPUs per node as slots (else tasks
 * per node). Returns 0, or -1 with a message naming the job and what to do. */
int slurm_job_hosts(const char *jobid, struct hostlist *out, char *err, size_t errlen);
/* salloc --no-shell ARGS (words split as a shell would, quotes honoured, nothing expanded):
 * the new job's id (malloc'd),
 * or NULL with salloc's reason in err. Blocks until Slurm grants it (Ctrl-C gives up). */
char *slurm_job_allocate(const char *args, char *err, size_t errlen);
/* scancel: gives an allocation made by slurm_job_allocate back. */
void slurm_job_cancel(const char *jobid);

#endif
