/* NCCL's account of a finished (or running) run read back (docs/nccl.md): the attempt's
 * nccl.json, which the live run wrote through the job's sink (run_files.c), or, for a run
 * that has none (older ddptop, a run killed before its NCCL lines were decided), the rank
 * logs of the attempt parsed again with the same parser (job/nccl.h). */
#ifndef DDPTOP_RUN_NCCL_H
#define DDPTOP_RUN_NCCL_H

#include <stdbool.h>

#include "job/job.h"

#define RUN_NCCL_FILE "nccl.json"
/* Of each rank log parsed again: its first RUN_NCCL_HEAD bytes (NCCL's init lines) and its
 * last RUN_NCCL_TAIL (the WARNs of a failure), less for many ranks: RUN_NCCL_BUDGET bytes in
 * all, at least 64 KiB and 16 KiB a rank (NCCL's init lines come in the first few KiB). */
#define RUN_NCCL_HEAD (4u * 1024 * 1024)
#define RUN_NCCL_TAIL (1u * 1024 * 1024)
#define RUN_NCCL_BUDGET (256u * 1024 * 1024)

enum run_nccl_source { RUN_NCCL_NONE, RUN_NCCL_JSON, RUN_NCCL_LOGS };

/* Fills j->nccl (quiet: no events) for attempt of the run in dir. The findings the live run
 * said are in its events; from the logs, nccl_findings recomputes them. */
enum run_nccl_source run_nccl_load(struct job *j, const char *dir, int attempt);

#endif
