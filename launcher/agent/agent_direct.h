/* The agent's side of the direct connection under srun (wire/direct.h). */
#ifndef DDPTOP_AGENT_DIRECT_H
#define DDPTOP_AGENT_DIRECT_H

#include <stddef.h>

/* Before the step's variables are scrubbed: when ddptop gave a port and a key
 * (DDPTOP_SRUN_PORT, DDPTOP_SRUN_KEY; both then removed from the environment, so the ranks never
 * see the key), connects to srun's host on that port, proves the key, checks ddptop's proof and
 * sends greeting ("=NAME ADDR[ kept]"). Returns the connected socket (blocking, TCP_NODELAY),
 * or -1: none was offered (why is "") or it failed (why says what; the agent then speaks
 * through srun's I/O). Waits at most a second for the connection and three for the rest. */
int agent_direct_connect(int task, const char *greeting, char *why, size_t whylen);

#endif
