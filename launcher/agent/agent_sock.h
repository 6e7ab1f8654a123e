/* The node-local Unix socket through which a controller that lost its link comes back to a
 * waiting agent (docs/protocol.md "Reconnecting"). The controller starts a bridge on the node
 * (`ddptop-agent --attach`, agent_bridge.c) over a new SSH exec, srun task or child; the bridge
 * connects here and passes its own stdin and stdout; the agent takes them as its new link.
 *
 * Only the agent's user can get here: the socket lives in a directory of ours (0700, owned by
 * us, not a link, checked after every step), it is 0600, and every connection's peer
 * credentials must be our uid. Nothing listens on a network address. */
#ifndef DDPTOP_AGENT_SOCK_H
#define DDPTOP_AGENT_SOCK_H

#include <stdbool.h>
#include <stddef.h>

#include "agent.h"

/* Longest attach line a bridge passes on. */
#define AGENT_SOCK_LINE_MAX 4096


/* The socket's path for run's node: in the first usable private directory of
 * $TMPDIR/ddptop-UID/agents, /tmp/ddptop-UID/agents, /dev/shm/ddptop-UID/agents (made 0700). NULL
 * with err filled when none is usable (another user owns them all) or the path would be too
 * long. malloc'd. */
char *agent_sock_path(const char *run, int node, char *err, size_t errlen);
/* The socket's path for run's node in the candidate directory dir (malloc'd): the bridge tries
 * each candidate the agent could have chosen (agent_bridge.c). */
char *agent_sock_in(const char *dir, const char *run, int node);

/* Listens for bridges of run's node (once; later calls with the same run and node do nothing).
 * 0, or -1 with err filled (the run goes on, but cannot be reconnected on this node). */
int agent_sock_listen(struct agent *ag, const char *run, int node, char *err, size_t errlen);
/* Stops listening and removes the socket (the agent exits). */
void agent_sock_close(struct agent *ag);

#endif
