/* Command line of `ddptop check` (and the SSH options that `ddptop run` will share). */
#ifndef DDPTOP_CHECK_CLI_H
#define DDPTOP_CHECK_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "check/check.h"
#include "hosts/hostfile.h"
#include "ssh/ssh_conn.h"

/* Tries the option at argv[*i] as one of the SSH options (--known-hosts, --accept-new-hosts,
 * -i/--identity, -F/--ssh-config, --agent-dir, --timeout). Returns 1 when consumed (*i moved
 * past its value), 0 when it is not an SSH option, -1 with a message in err. */
int ssh_cli_option(int argc, char **argv, int *i, struct ssh_conn_opts *o, char *err, size_t errlen);
/* The SSH options' lines of the usage text. */
void ssh_cli_usage(FILE *f);
/* Our ddptop-agent: next to the running executable. malloc'd, NULL when unknown. */
char *ssh_cli_local_agent(void);

/* Shared by the command lines of check and run. */
/* Writes the message to err and returns -1. */
int cli_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Matches argv[*i] against a long name (and an optional short one, or NULL) that takes a
 * value: "--name VALUE", "--name=VALUE", "-x VALUE", "-xVALUE". Returns 1 with *val set, 0 when
 * it is another option, -1 when the value is missing. */
int cli_opt_value(int argc, char **argv, int *i, const char *lng, const char *shrt, const char **val);
/* A whole number in [lo, hi] for option opt, or -1 with a message naming both. */
int cli_parse_int(const char *opt, const char *s, long lo, long hi, int *out, char *err, size_t errlen);
/* --env KEY=VALUE: appended to o->env, or -1 with a message when it is not KEY=VALUE. */
int check_opts_add_env(struct check_opts *o, const char *kv, char *err, size_t errlen);

/* Parses the arguments after "check". Returns 0 (run: *o and *hl filled), 1 (--help was
 * printed), or -1 (usage or hostfile error: message in err, exit 2). */
int check_cli_parse(int argc, char **argv, struct check_opts *o, struct hostlist *hl, char *err, size_t errlen);
void check_cli_usage(FILE *f);
/* Runs the preflight on hl as the controller's check-only mode (one connection per node),
 * shows the table filling in (a TTY) or a progress line, then prints the table and details, or
 * --json. Returns the exit code: 0 nothing failed, 1 a check failed (130: interrupted). */
int check_run(const struct check_opts *o, const struct hostlist *hl);
/* `ddptop check ARGS`: parse, run, print. Returns the process exit code (0, 1 or 2). */
int check_cli_main(int argc, char **argv);

#endif
