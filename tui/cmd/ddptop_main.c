/* ddptop: entry point. The subcommands (run, check, ls, logs, attach, view) are the table of
 * cmd.c: each one parses its own arguments and returns the exit code (0 ok, 1 a check or job
 * failed, 2 usage or configuration error, 3 the preflight refused a run). Without a
 * subcommand, `ddptop [HOSTFILE] [-- CMD]` runs the job like `ddptop run` and shows it in the
 * dashboard when stdin and stdout are a terminal and --headless is not given (else the
 * headless line printer). The dashboard runs in a session (session.h): this same program
 * again, on a pseudo-terminal, which the terminal attaches to; `ddptop attach` attaches
 * another. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmd.h"
#include "cmd_run.h"
#include "session/session.h"
#include "util/util.h"

/* make dist's tarball carries terminfo entries (share/ddptop/terminfo) for machines without
 * the common ones: searched after the system's (the empty first entry of TERMINFO_DIRS is
 * ncurses's own list). Nothing changes where that directory is not there. */
static void terminfo_fallback(void)
{
    char *own = util_exe_sibling("../share/ddptop/terminfo");
    if (own && access(own, R_OK | X_OK) == 0) {
        const char *was = getenv("TERMINFO_DIRS");
        char *dirs = xasprintf("%s:%s", was ? was : "", own);
        setenv("TERMINFO_DIRS", dirs, 1);
        free(dirs);
    }
    free(own);
}

int main(int argc, char **argv)
{
    /* a node that closes its connection must give an error, not kill us */
    signal(SIGPIPE, SIG_IGN);
    terminfo_fallback();
    session_inner_init();
    cmd_run_save_argv(argc, argv);
    return cmd_dispatch(argc, argv);
}
