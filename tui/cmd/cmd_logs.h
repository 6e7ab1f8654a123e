/* `ddptop logs RUN`: a run's rank logs (each rank's file after a `==> rank R (HOST) <==`
 * header, or one rank's file byte for byte), following them like `tail -f` until the run's
 * controller exits, or its events.jsonl as readable lines (docs/logs.md, "Looking back").
 * Reads record/runs.h; writes nothing under the run. */
#ifndef DDPTOP_LOGS_CLI_H
#define DDPTOP_LOGS_CLI_H

#include <stdbool.h>
#include <stdio.h>

struct run_summary;

void cmd_logs_usage(FILE *f);
/* `ddptop logs ARGS`: returns the exit code (0 printed; 1 nothing to print or a read error;
 * 2 usage error, or no such run, attempt or rank). */
int cmd_logs_main(int argc, char **argv);
/* --nccl (logs_nccl.c): NCCL's account of the attempt of the run in dir, per node, and
 * its odd ones out; json: as one JSON object. 0 printed, 1 none or unreadable. */
int logs_nccl_print(const char *dir, const char *name, int attempt, const struct run_summary *sum, bool json);

#endif
