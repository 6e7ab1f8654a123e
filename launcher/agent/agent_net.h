/* The agent's TCP reachability requests: "listen" (a temporary listener that greets every
 * connection with "ddptop <nonce>\n"), "connect" (a nonblocking connect that checks that
 * greeting) and "unlisten". All run inside the agent's poll loop; see docs/protocol.md. */
#ifndef DDPTOP_AGENT_NET_H
#define DDPTOP_AGENT_NET_H

#include "agent.h"

struct addrinfo;

void agent_net_listen_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_net_unlisten_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_net_connect_op(struct agent *ag, const cJSON *req, const cJSON *id);

/* For the other requests that connect (bench_send): addr ("10.0.0.2", "[::1]", a name) for
 * port, numeric without blocking, a name through getaddrinfo (IPv4 first); NULL when it does
 * not resolve. freeaddrinfo the result. agent_net_host: addr without IPv6 brackets (free it). */
struct addrinfo *agent_net_resolve(const char *addr, int port);
char *agent_net_host(const char *addr);
/* A connect's errno as the protocol words it ("connection refused", "timed out", "no route to
 * host"), or NULL for the others (strerror then). */
const char *agent_net_connect_error(int e);

#endif
