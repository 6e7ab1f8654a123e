/* `ddptop-agent --attach`: the bridge from a new controller link to a waiting agent (see
 * agent_bridge.c and docs/protocol.md "Reconnecting"). */
#ifndef DDPTOP_AGENT_BRIDGE_H
#define DDPTOP_AGENT_BRIDGE_H

/* Runs the bridge on the link in_fd/out_fd (stdin/stdout, or the relay's pipes in a Slurm
 * step). Returns the exit status: 0 the agent took the link and let it go, 3 no agent. */
int agent_bridge_main(int in_fd, int out_fd);

#endif
