/* Command line of `ddptop run` (and of plain `ddptop [HOSTFILE] [-- CMD]`): options in any
 * order around an optional HOSTFILE (or --slurm / --pbs), the command after "--". The SSH
 * options are check's (ssh/ssh_cli.h). Documented in docs/run.md. */
#ifndef DDPTOP_RUN_CLI_H
#define DDPTOP_RUN_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "controller/controller.h"
#include "hosts/hostfile.h"

/* Parses the arguments after "run". Returns 0 (run: *o and *hl filled, the kind of transport
 * chosen in o->nodes.transport; no hosts: hl->n 0 and this machine's own agent), 1 (--help
 * was printed), or -1 (usage or hostfile error: message in err, exit 2). Either way the
 * caller calls run_opts_done(o) and hostlist_free(hl). */
int cmd_run_parse(int argc, char **argv, struct run_opts *o, struct hostlist *hl, char *err, size_t errlen);
void cmd_run_usage(FILE *f);

/* Parses, then hands the options to `runner` (the headless printer or the dashboard, which
 * live in tui/). Returns the process exit code: runner's, 0 after --help, 2 on a usage error. */
int cmd_run_main(int argc, char **argv, int (*runner)(const struct run_opts *o, const struct hostlist *hl));

/* The front end a run gets (cmd_run.c, below the parser): the dashboard in a session on a
 * terminal, the headless printer otherwise. main keeps its command line first (the session's
 * dashboard runs with it). */
void cmd_run_save_argv(int argc, char **argv);
/* Plain `ddptop [HOSTFILE] [options] [-- CMD]` (argv as main got it): `ddptop run`, and
 * without a hostfile the embedded default runs 2 local ranks unless --nproc-per-node says
 * otherwise. */
int cmd_run_default(int argc, char **argv);
/* `ddptop attach RUN` taking a run over: `ddptop run ARGS --adopt` (argv[0] "ddptop",
 * argv[1] "run") in this process, as if it had been typed. */
int cmd_run_again(int argc, char **argv);

#endif
