/* The signal state a program started by the agent begins with (agent_child.h), in one place:
 * a signal added to the agent's own set is added here for every child at once. */
#include "agent_child.h"

#include <stddef.h>

/* What the agent catches or ignores (agent_main.c, agent_ranks_ops.c). */
static const int agent_signals[] = { SIGPIPE, SIGTERM, SIGHUP, SIGINT, SIGUSR1, SIGUSR2, SIGCHLD };

void agent_child_block(sigset_t *old)
{
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof agent_signals / sizeof *agent_signals; i++)
        if (agent_signals[i] != SIGPIPE) sigaddset(&block, agent_signals[i]);
    sigprocmask(SIG_BLOCK, &block, old);
}

void agent_child_unblock(const sigset_t *old)
{
    sigprocmask(SIG_SETMASK, old, NULL);
}

void agent_child_signals(void)
{
    sigset_t none;
    for (size_t i = 0; i < sizeof agent_signals / sizeof *agent_signals; i++) signal(agent_signals[i], SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}
