/* ddptop-agent: the remote side of ddptop, started over an SSH exec channel (or as a local
 * child). It speaks JSON lines on stdin/stdout (docs/protocol.md) and exits when stdin ends.
 * This file holds the request table: a new request is one more line here. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_facts.h"
#include "agent_net.h"
#include "agent_ranks.h"
#include "util/util.h"
#include "util/version.h"

/* {"op":"clock"}: the agent's CLOCK_REALTIME, taken first thing so the controller's round-trip
 * midpoint matches it as closely as possible. Written as an integer: a double would round the
 * nanoseconds away. */
static void op_clock(struct agent *ag, const cJSON *req, const cJSON *id)
{
    int64_t now = wall_ns();
    char num[32];
    (void)req;
    snprintf(num, sizeof num, "%lld", (long long)now);
    cJSON *msg = agent_reply_new("clock", id);
    cJSON_AddRawToObject(msg, "wall_ns", num);
    agent_send(ag, msg);
}

/* {"op":"exit"}: answer, then leave as on stdin EOF (listeners closed, output flushed). */
static void op_exit(struct agent *ag, const cJSON *req, const cJSON *id)
{
    (void)req;
    agent_send(ag, agent_reply_new("exit", id));
    agent_quit(ag, 0);
}

static const struct agent_op agent_ops[] = {
    { "facts", agent_facts_op },
    { "clock", op_clock },
    { "listen", agent_net_listen_op },
    { "connect", agent_net_connect_op },
    { "unlisten", agent_net_unlisten_op },
    { "spawn", agent_ranks_spawn_op },
    { "signal", agent_ranks_signal_op },
    { "stop", agent_ranks_stop_op },
    { "stacks", agent_ranks_stacks_op },
    { "ping", agent_ranks_ping_op },
    { "exit", op_exit },
    { NULL, NULL },
};

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("ddptop-agent %s\n", DDPTOP_VERSION);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: ddptop-agent [--version]\n"
                        "  speaks the ddptop JSON-lines protocol on stdin/stdout; "
                        "it is started by ddptop, not by hand\n");
        return 2;
    }
    /* A vanished controller shows up as EPIPE on write, handled in the loop, not as a signal. */
    signal(SIGPIPE, SIG_IGN);
    struct agent *ag = agent_new(STDIN_FILENO, STDOUT_FILENO, agent_ops);
    agent_ranks_init(ag);
    int status = agent_loop(ag);
    agent_ranks_done(ag); /* no rank outlives the agent */
    agent_free(ag);
    return status;
}
