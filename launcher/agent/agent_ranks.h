/* The ranks side of ddptop-agent: spawn the node's ranks (each under a keeper, see
 * agent_keeper.h), stream their stdout/stderr as "out" messages, report "status" every second
 * and "exit" when a rank ended, signal/stop them, dump their stacks, and make sure none outlives
 * the agent: on {"op":"exit"}, SIGTERM/SIGHUP/SIGINT, and when the controller is gone (its link
 * ended or it went silent) for the spawn's grace (without one: at once, or after watchdog_ms),
 * every rank's group gets SIGTERM, then SIGKILL. Requests and messages: docs/protocol.md, "Run
 * requests" and "Reconnecting". */
#ifndef DDPTOP_AGENT_RANKS_H
#define DDPTOP_AGENT_RANKS_H

#include "agent.h"

/* Before agent_run: the heartbeat timer, the quit hook and the signal handlers. */
void agent_ranks_init(struct agent *ag);
/* After agent_run returns: stops every rank still running (SIGTERM, SIGKILL after a short
 * grace; bounded, a few seconds at most), reaps every keeper and frees what the ranks side holds.
 * Call before agent_free. */
void agent_ranks_done(struct agent *ag);

/* Request handlers for agent_main.c's op table. */
void agent_ranks_spawn_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_ranks_signal_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_ranks_stop_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_ranks_stacks_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_ranks_ping_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_ranks_resume_op(struct agent *ag, const cJSON *req, const cJSON *id);

/* The agent runs as a task of a Slurm step (--relay): Slurm delivers its signals (scancel,
 * --signal warnings) to every process of the step, ranks included, so the agent does not pass
 * SIGUSR1/SIGUSR2 on again; it tells the controller (a "notice" message). */
void agent_ranks_set_slurm_step(int on);

#endif
