/* The agent's "facts" request: what `ddptop check` compares across nodes (versions, NCCL
 * environment, config and command hashes, GPUs, interfaces). Shape: docs/protocol.md. */
#ifndef DDPTOP_AGENT_FACTS_H
#define DDPTOP_AGENT_FACTS_H

#include "agent.h"

/* {"op":"facts","id":N,"cmd":"...","env":{...}} -> {"ev":"facts","id":N,...}. Blocks the agent
 * while its probes run (python3, torch, nvidia-smi; each with its own time limit). */
void agent_facts_op(struct agent *ag, const cJSON *req, const cJSON *id);

/* The facts object without "ev"/"id" (env: the request's env object or NULL). */
cJSON *agent_facts_collect(const char *cmd, const cJSON *env);

#endif
