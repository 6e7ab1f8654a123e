/* `ddptop ls`: the runs under the log directory, newest first, as a table or as JSON
 * (docs/logs.md, "Looking back"). Reads record/runs.h; writes nothing. */
#ifndef DDPTOP_LS_CLI_H
#define DDPTOP_LS_CLI_H

#include <stdio.h>

void cmd_ls_usage(FILE *f);
/* `ddptop ls ARGS`: returns the exit code (0 listed, even none; 2 usage error or a log
 * directory that cannot be read). */
int cmd_ls_main(int argc, char **argv);

#endif
