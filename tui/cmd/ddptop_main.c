/* ddptop: entry point. Dispatches the subcommand (run, check, ls, logs, attach, view); each one
 * parses its own arguments and returns the exit code (0 ok, 1 a check or job failed, 2 usage
 * or configuration error, 3 the preflight refused a run). Without a subcommand, `ddptop
 * [HOSTFILE] [-- CMD]` runs the job like `ddptop run` and shows it in the dashboard when
 * stdin and stdout are a terminal and --headless is not given (else the headless line
 * printer). The dashboard runs in a session (session.h): this same program again, on a
 * pseudo-terminal, which the terminal attaches to; `ddptop attach` attaches another. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/check_cli.h"
#include "dashboard.h"
#include "headless.h"
#include "run/logs_cli.h"
#include "run/ls_cli.h"
#include "run/run_cli.h"
#include "session.h"
#include "util/util.h"
#include "util/version.h"
#include "view_cli.h"

static void usage(FILE *f)
{
    fputs("usage: ddptop [HOSTFILE] [options] [--theme NAME] [-- CMD ARGS...]\n"
          "                                 run a job (options as ddptop run) in the dashboard\n"
          "       ddptop run [HOSTFILE] [options] [-- CMD ARGS...]    launch on every node, stream logs\n"
          "       ddptop check HOSTFILE [options] [-- CMD ARGS...]    preflight of a cluster\n"
          "       ddptop check --slurm|--pbs [options] [-- CMD ARGS...]\n"
          "       ddptop ls [--log-dir DIR] [--json]                  the runs in the log directory\n"
          "       ddptop logs RUN [--rank R] [--attempt N] [-f] [--events]\n"
          "                                 a run's logs, or its events; -f follows them\n"
          "       ddptop attach [RUN]                                 back to a run's dashboard\n"
          "       ddptop view RUN [--log-dir DIR]                     a finished run's dashboard\n"
          "       ddptop --version\n"
          "       ddptop --help | ddptop COMMAND --help    (COMMAND: run, check, ls, logs, attach, view)\n",
          f);
}

/* --theme NAME (the dashboard's only option of its own), taken out of argv before the run
 * options are parsed; only before "--", where the command's own arguments begin. */
static const char *theme_opt;

static int take_theme_option(int *argc, char **argv)
{
    int o = 1;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            while (i < *argc) argv[o++] = argv[i++];
            break;
        }
        if (strcmp(argv[i], "--theme") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "ddptop: --theme needs a name (default, light, high-contrast, "
                        "mono) or a path to a .theme file\n");
                return -1;
            }
            theme_opt = argv[++i];
            continue;
        }
        if (strncmp(argv[i], "--theme=", 8) == 0) {
            theme_opt = argv[i] + 8;
            continue;
        }
        argv[o++] = argv[i];
    }
    *argc = o;
    argv[o] = NULL;
    return 0;
}

/* Our command line as main got it (take_theme_option reorders argv): the session's
 * dashboard runs with it, and where "--run-id RUN" goes in it (after "run"). */
static struct session_start session_args;

static int start_session(const struct run_opts *o, bool detach)
{
    struct session_start s = session_args;
    s.run_id = o->run_id;
    s.detach = detach;
    return session_start(&s);
}

/* `ddptop run`: the dashboard on a terminal, in a session (its own, inside one: the
 * session's dashboard; DDPTOP_NO_SESSION=1: none); the line printer with --headless or no
 * TTY; --detach: a session with no terminal yet. */
static int run_frontend(const struct run_opts *o, const struct hostlist *hl)
{
    const char *no_session = getenv("DDPTOP_NO_SESSION");
    if (session_inside()) {
        /* the session's server gone (killed, crashed) hangs us up: the run is left to its
         * agents, and ddptop attach takes it over */
        struct run_opts in = *o;
        in.hup_detaches = true;
        return dashboard_run(&in, hl, theme_opt);
    }
    if (o->detach) return start_session(o, true);
    if (o->headless || !isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) return headless_run(o, hl);
    if (no_session && *no_session && strcmp(no_session, "0") != 0) return dashboard_run(o, hl, theme_opt);
    return start_session(o, false);
}

/* `ddptop attach RUN` taking a run over: `ddptop run ARGS --adopt` in this process, as if it
 * had been typed (a session of its own on a terminal). */
static int run_again(int argc, char **argv)
{
    session_args.argc = argc;
    session_args.argv = argv;
    session_args.run_id_at = 2;
    argc--, argv++;
    if (take_theme_option(&argc, argv) != 0) return 2;
    return run_cli_main(argc - 1, argv + 1, run_frontend);
}

/* Plain `ddptop`: the same, and without a hostfile the embedded default runs 2 local ranks
 * unless --nproc-per-node says otherwise. */
static int run_chosen_frontend(const struct run_opts *o, const struct hostlist *hl)
{
    struct run_opts local = *o;
    if (local.local && local.nproc_per_node == 0) local.nproc_per_node = 2;
    return run_frontend(&local, hl);
}

int main(int argc, char **argv)
{
    /* a node that closes its connection must give an error, not kill us */
    signal(SIGPIPE, SIG_IGN);
    session_inner_init();
    session_args.argc = argc;
    session_args.argv = xcalloc((size_t)argc + 1, sizeof *argv);
    memcpy(session_args.argv, argv, (size_t)argc * sizeof *argv);
    session_args.run_id_at = argc >= 2 && strcmp(argv[1], "run") == 0 ? 2 : 1;
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("ddptop %s\n", DDPTOP_VERSION);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "check") == 0) return check_cli_main(argc - 2, argv + 2);
    /* ls and logs make no connections: `ddptop logs RUN | head` ends quietly, as cat does */
    if (argc >= 2 && strcmp(argv[1], "ls") == 0) {
        signal(SIGPIPE, SIG_DFL);
        return ls_cli_main(argc - 2, argv + 2);
    }
    if (argc >= 2 && strcmp(argv[1], "logs") == 0) {
        signal(SIGPIPE, SIG_DFL);
        return logs_cli_main(argc - 2, argv + 2);
    }
    if (argc >= 2 && strcmp(argv[1], "attach") == 0) return session_attach_main(argc - 2, argv + 2, run_again);
    if (argc >= 2 && strcmp(argv[1], "view") == 0) return view_cli_main(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "run") == 0) {
        argc--, argv++;
        if (take_theme_option(&argc, argv) != 0) return 2;
        return run_cli_main(argc - 1, argv + 1, run_frontend);
    }
    /* a word that is neither a subcommand nor an existing file is a typo, not a hostfile */
    if (argc >= 2 && argv[1][0] != '-' && !strchr(argv[1], '/') && access(argv[1], F_OK) != 0) {
        fprintf(stderr, "ddptop: '%s' is neither a command (run, check, ls, logs, attach, view) nor a "
                "hostfile\n", argv[1]);
        usage(stderr);
        return 2;
    }
    if (take_theme_option(&argc, argv) != 0) return 2;
    return run_cli_main(argc - 1, argv + 1, run_chosen_frontend);
}
