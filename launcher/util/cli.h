/* Helpers for command lines: the option forms every ddptop subcommand accepts ("--name VALUE",
 * "--name=VALUE", "-x VALUE", "-xVALUE"), whole numbers in a range, and the error path that
 * writes a message for the caller to print. Nothing here prints or exits: a usage error is a
 * message and -1, and the subcommand returns exit status 2. */
#ifndef DDPTOP_CLI_H
#define DDPTOP_CLI_H

#include <stddef.h>

/* Writes the message to err and returns -1. */
int cli_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Matches argv[*i] against a long name (and an optional short one, or NULL) that takes a
 * value: "--name VALUE", "--name=VALUE", "-x VALUE", "-xVALUE". Returns 1 with *val set (and *i
 * past the value), 0 when it is another option, -1 when the value is missing. */
int cli_opt_value(int argc, char **argv, int *i, const char *lng, const char *shrt, const char **val);
/* A whole number in [lo, hi] for option opt, or -1 with a message naming both. */
int cli_parse_int(const char *opt, const char *s, long lo, long hi, int *out, char *err, size_t errlen);

#endif
