/* `ddptop attach [RUN]`: the command's entry; the attaching itself is the session layer's
 * (session_attach.c), given how to take a run over (`ddptop run --adopt`, cmd_run.c) and how
 * to show one that ended (`ddptop view`, cmd_view.c): the session layer includes no command. */
#include "cmd.h"
#include "cmd_run.h"
#include "cmd_view.h"
#include "session/session.h"

static int attach_main(int argc, char **argv)
{
    return session_attach_main(argc - 1, argv + 1, cmd_run_again, cmd_view_main);
}

const struct cmd_entry cmd_attach_entry = {
    .name = "attach",
    .args = "[RUN | SOCKET] [--log-dir DIR] [--headless] [--force]",
    .summary = "back to a run's dashboard",
    .main = attach_main,
    .usage = session_attach_usage,
};
