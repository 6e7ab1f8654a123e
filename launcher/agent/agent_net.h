/* The agent's TCP reachability requests: "listen" (a temporary listener that greets every
 * connection with "ddptop <nonce>\n"), "connect" (a nonblocking connect that checks that
 * greeting) and "unlisten". All run inside the agent's poll loop; see docs/protocol.md. */
#ifndef DDPTOP_AGENT_NET_H
#define DDPTOP_AGENT_NET_H

#include "agent.h"

void agent_net_listen_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_net_unlisten_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_net_connect_op(struct agent *ag, const cJSON *req, const cJSON *id);

#endif
