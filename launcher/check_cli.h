/* Command line of `ddptop check` (and the SSH options that `ddptop run` will share). */
#ifndef DDPTOP_CHECK_CLI_H
#define DDPTOP_CHECK_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "check.h"
#include "hostfile.h"
#include "ssh_conn.h"

/* Tries the option at argv[*i] as one of the SSH options (--known-hosts, --accept-new-hosts,
 * -i/--identity, -F/--ssh-config, --agent-dir, --timeout). Returns 1 when consumed (*i moved
 * past its value), 0 when it is not an SSH option, -1 with a message in err. */
int ssh_cli_option(int argc, char **argv, int *i, struct ssh_conn_opts *o, char *err, size_t errlen);
/* The SSH options' lines of the usage text. */
void ssh_cli_usage(FILE *f);
/* Our ddptop-agent: next to the running executable. malloc'd, NULL when unknown. */
char *ssh_cli_local_agent(void);

/* Parses the arguments after "check". Returns 0 (run: *o and *hl filled), 1 (--help was
 * printed), or -1 (usage or hostfile error: message in err, exit 2). */
int check_cli_parse(int argc, char **argv, struct check_opts *o, struct hostlist *hl, char *err, size_t errlen);
void check_cli_usage(FILE *f);
/* `ddptop check ARGS`: parse, run, print. Returns the process exit code (0, 1 or 2). */
int check_cli_main(int argc, char **argv);

#endif
