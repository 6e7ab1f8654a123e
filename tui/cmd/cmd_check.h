/* Command line of `ddptop check`, and the check-only run it starts. The SSH options it shares
 * with `ddptop run` are ssh/ssh_cli.h; the option helpers util/cli.h. */
#ifndef DDPTOP_CHECK_CLI_H
#define DDPTOP_CHECK_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "check/node_opts.h"
#include "hosts/hostfile.h"

/* Parses the arguments after "check". Returns 0 (run: *o and *hl filled), 1 (--help was
 * printed), or -1 (usage or hostfile error: message in err, exit 2). */
int cmd_check_parse(int argc, char **argv, struct node_opts *o, struct hostlist *hl, char *err, size_t errlen);
void cmd_check_usage(FILE *f);
/* Runs the preflight on hl as the controller's check-only mode (one connection per node),
 * shows the table filling in (a TTY) or a progress line, then prints the table and details, or
 * --json. Returns the exit code: 0 nothing failed, 1 a check failed (130: interrupted). */
int cmd_check_run(const struct node_opts *o, const struct hostlist *hl);
/* `ddptop check ARGS`: parse, run, print. Returns the process exit code (0, 1 or 2). */
int cmd_check_main(int argc, char **argv);

#endif
