/* What every program the agent starts (a rank, a measuring program, a probe, a stack dump's
 * tools) must not inherit from it: the agent ignores SIGPIPE and, until its loop catches them,
 * SIGUSR1/2; an ignored signal stays ignored across exec, and a blocked one stays blocked. Its
 * caught signals (TERM, HUP, INT, USR1, USR2) write the agent's own self-pipe, so they are
 * blocked across the fork and put back to their default in the child before it unblocks. */
#ifndef DDPTOP_AGENT_CHILD_H
#define DDPTOP_AGENT_CHILD_H

#include <signal.h>

/* In the parent, just before fork(): the agent's caught signals blocked; *old for
 * agent_child_unblock after it. */
void agent_child_block(sigset_t *old);
void agent_child_unblock(const sigset_t *old);
/* In the child, before exec: every signal the agent ignores or catches back to its default,
 * and nothing blocked. */
void agent_child_signals(void);

#endif
