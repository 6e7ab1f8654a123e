/* ddptop-agent: the remote side of ddptop, started over an SSH exec channel (or as a local
 * child). It speaks JSON lines on stdin/stdout (docs/protocol.md) and exits when stdin ends.
 * This file holds the request table: a new request is one more line here. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_bench.h"
#include "agent_bridge.h"
#include "agent_nvml.h"
#include "agent_facts.h"
#include "agent_files.h"
#include "agent_net.h"
#include "agent_ranks.h"
#include "agent_relay.h"
#include "util/util.h"
#include "util/version.h"
#include "wire/protocol.h"

/* {"op":"clock"}: the agent's CLOCK_REALTIME, taken first thing so the controller's round-trip
 * midpoint matches it as closely as possible. Written as an integer: a double would round the
 * nanoseconds away. */
static void op_clock(struct agent *ag, const cJSON *req, const cJSON *id)
{
    int64_t now = wall_ns();
    char num[32];
    (void)req;
    snprintf(num, sizeof num, "%lld", (long long)now);
    cJSON *msg = agent_reply_new(WIRE_EV_CLOCK, id);
    cJSON_AddRawToObject(msg, "wall_ns", num);
    agent_send(ag, msg);
}

/* {"op":"exit"}: answer, then leave as on stdin EOF (listeners closed, output flushed). */
static void op_exit(struct agent *ag, const cJSON *req, const cJSON *id)
{
    (void)req;
    agent_send(ag, agent_reply_new(WIRE_EV_EXIT, id));
    agent_quit(ag, 0);
}

static const struct agent_op agent_ops[] = {
    { WIRE_OP_FACTS, agent_facts_op },
    { WIRE_OP_CLOCK, op_clock },
    { WIRE_OP_LISTEN, agent_net_listen_op },
    { WIRE_OP_CONNECT, agent_net_connect_op },
    { WIRE_OP_UNLISTEN, agent_net_unlisten_op },
    { WIRE_OP_SPAWN, agent_ranks_spawn_op },
    { WIRE_OP_SIGNAL, agent_ranks_signal_op },
    { WIRE_OP_STOP, agent_ranks_stop_op },
    { WIRE_OP_STACKS, agent_ranks_stacks_op },
    { WIRE_OP_LIST, agent_files_list_op },
    { WIRE_OP_READ, agent_files_read_op },
    { WIRE_OP_PING, agent_ranks_ping_op },
    { WIRE_OP_EXIT, op_exit },
    { WIRE_OP_GPU_WATCH, agent_nvml_watch_op },
    { WIRE_OP_RESUME, agent_ranks_resume_op },
    { WIRE_OP_BENCH_LISTEN, agent_bench_listen_op },
    { WIRE_OP_BENCH_UNLISTEN, agent_bench_unlisten_op },
    { WIRE_OP_BENCH_SEND, agent_bench_send_op },
    { WIRE_OP_BENCH_HOST, agent_bench_host_op },
    { WIRE_OP_BENCH_NCCL, agent_bench_nccl_op },
    { WIRE_OP_BENCH_NCCL_STOP, agent_bench_nccl_stop_op },
    { WIRE_OP_BENCH_DCGMI, agent_bench_dcgmi_op },
    { NULL, NULL },
};

int main(int argc, char **argv)
{
    int in_fd = STDIN_FILENO, out_fd = STDOUT_FILENO, relay = 0, attach = 0, bad = 0;
    char err[256];
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("ddptop-agent %s\n", DDPTOP_VERSION);
        return 0;
    }
    /* bench_nccl's own process (agent_bench_nccl_run.c), started by the agent, not by hand */
    if (argc > 1 && strcmp(argv[1], "--bench-nccl") == 0) return agent_bench_nccl_main(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--relay") == 0 && !relay) relay = 1;
        else if (strcmp(argv[i], "--attach") == 0 && !attach) attach = 1;
        else bad = 1;
    }
    if (bad) {
        fprintf(stderr, "usage: ddptop-agent [--version | [--relay] [--attach]]\n"
                        "  speaks the ddptop JSON-lines protocol on stdin/stdout; "
                        "it is started by ddptop, not by hand\n");
        return 2;
    }
    /* A vanished controller shows up as EPIPE on write, handled in the loop, not as a signal. */
    signal(SIGPIPE, SIG_IGN);
    /* a scheduler's warning before agent_ranks_init installs its handler must not kill us */
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    if (relay && agent_relay_start(&in_fd, &out_fd, err, sizeof err) < 0) {
        fprintf(stderr, "ddptop-agent: %s\n", err);
        return 2;
    }
    if (attach) {
        /* a bridge to a waiting agent: no loop, no ranks of its own */
        int status = agent_bridge_main(in_fd, out_fd);
        if (relay) agent_relay_finish(in_fd, out_fd, status);
        return status;
    }
    struct agent *ag = agent_new(in_fd, out_fd, agent_ops);
    agent_ranks_init(ag);
    agent_ranks_set_slurm_step(relay);
    int status = agent_loop(ag);
    agent_ranks_done(ag); /* no rank outlives the agent */
    agent_free(ag);
    if (relay) agent_relay_finish(in_fd, out_fd, status);
    return status;
}
