/* `ddptop-agent --relay`: the agent as one task of a Slurm job step that runs an agent on every
 * node (wire/relay.h has the framing and why). A thread of the agent's process sits between
 * srun's standard input/output and the agent's loop: it keeps the lines addressed to this task,
 * cuts the agent's lines into pieces srun passes whole, and announces the node's name and
 * address first. The agent's loop itself is unchanged: it reads and writes two pipes. */
#ifndef DDPTOP_AGENT_RELAY_H
#define DDPTOP_AGENT_RELAY_H

#include <stddef.h>

/* Starts the relay on stdin/stdout. *in_fd and *out_fd get the pipe ends the agent's loop reads
 * and writes. Returns 0, or -1 with a message in err (not inside a Slurm step, no thread). */
int agent_relay_start(int *in_fd, int *out_fd, char *err, size_t errlen);
/* After the agent's loop: closes in_fd and out_fd (the relay forwards what is left), waits for
 * the relay and writes the agent's exit status as the last line. */
void agent_relay_finish(int in_fd, int out_fd, int status);

/* The node's address for the controller and for MASTER_ADDR: the source address this node
 * uses toward srun's host (SLURM_SRUN_COMM_HOST), else the first non-loopback IPv4 address of
 * an interface that is up; "-" when there is none. */
void agent_relay_address(char *buf, size_t len);

/* Under --relay, when the direct connection to ddptop could not be made: why, in a line the
 * agent's hello carries ("link_note"); else NULL. */
const char *agent_relay_note(void);

#endif
