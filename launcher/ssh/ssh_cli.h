/* The SSH options of the command line, the same for `ddptop check` and `ddptop run`
 * (--known-hosts, --accept-new-hosts, -i/--identity, -F/--ssh-config, --agent-dir, --timeout,
 * --login-timeout), filling struct ssh_conn_opts; and where our own ddptop-agent is. */
#ifndef DDPTOP_SSH_CLI_H
#define DDPTOP_SSH_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "ssh_conn.h"

/* Tries the option at argv[*i] as one of the SSH options of `ddptop CMD` (named in the hints).
 * Returns 1 when consumed (*i moved past its value), 0 when it is not an SSH option, -1 with a
 * message in err. */
int ssh_cli_option(const char *cmd, int argc, char **argv, int *i, struct ssh_conn_opts *o, char *err,
                   size_t errlen);
/* The SSH options' lines of the usage text (after the hosts' sources, hosts_source_usage, and
 * the transports', transport_kinds_usage). */
void ssh_cli_usage(FILE *f);
/* Our ddptop-agent: next to the running executable. malloc'd, NULL when unknown. */
char *ssh_cli_local_agent(void);

#endif
