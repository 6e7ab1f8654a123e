/* The agent's side of the direct connection under srun (wire/direct.h). */
#ifndef DDPTOP_AGENT_DIRECT_H
#define DDPTOP_AGENT_DIRECT_H

#include <stddef.h>

#include "wire/direct_line.h"

/* Before the step's variables are scrubbed: when ddptop gave a port and a key
 * (DDPTOP_SRUN_PORT, DDPTOP_SRUN_KEY), connects to srun's host on that port, proves the key,
 * checks ddptop's proof and sends greeting ("=NAME ADDR[ kept]"). Returns the connected socket
 * (blocking, TCP_NODELAY) with the keys of its lines (tx: ours, rx: ddptop's; direct_line.h),
 * or -1: none was offered (why is "") or it failed (why says what; the agent then speaks
 * through srun's I/O). Waits at most a second for the connection and three for the rest.
 *
 * The key never outlives this call: its text is overwritten where the kernel put the
 * environment (what /proc/PID/environ shows, for this process and the keepers it forks, all its
 * life), then removed, so the ranks never see it; every copy is wiped. While it or the lines'
 * keys are held, the process is not dumpable (PR_SET_DUMPABLE 0: no other process of the user
 * reads its memory or its /proc files, no core dump); with no connection it is dumpable again,
 * holding nothing. */
int agent_direct_connect(int task, const char *greeting, struct direct_line_key *tx, struct direct_line_key *rx,
                         char *why, size_t whylen);

#endif
