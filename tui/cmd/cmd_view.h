/* `ddptop view RUN`: the dashboard, read-only, on a finished run built from its files
 * (record/run_replay.h). docs/dashboard.md, "Looking back: view". */
#ifndef DDPTOP_VIEW_CLI_H
#define DDPTOP_VIEW_CLI_H

#include <stdio.h>

/* argv after "view". Returns the exit status: 0 (quit with q), 1 (the run is still running:
 * use ddptop attach; or the terminal could not be used), 2 (usage: no such run, not a run
 * directory, no terminal). */
int cmd_view_main(int argc, char **argv);
void cmd_view_usage(FILE *f);

#endif
