/* ddptop: entry point. Dispatches the subcommand; each one parses its own arguments and
 * returns the exit code (0 ok, 1 a check or job failed, 2 usage or configuration error). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "check_cli.h"
#include "version.h"

static void usage(FILE *f)
{
    fputs("usage: ddptop check HOSTFILE [options] [-- CMD ARGS...]   preflight of a cluster\n"
          "       ddptop check --slurm|--pbs [options] [-- CMD ARGS...]\n"
          "       ddptop --version\n"
          "       ddptop --help | ddptop check --help\n",
          f);
}

int main(int argc, char **argv)
{
    /* a node that closes its connection must give an error, not kill us */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("ddptop %s\n", DDPTOP_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "check") == 0) return check_cli_main(argc - 2, argv + 2);
    fprintf(stderr, "ddptop: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
