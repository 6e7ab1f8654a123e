/* libFuzzer harness for what ddptop-agent reads from the controller (docs/protocol.md): the
 * input is the agent's stdin, request lines and all, read by the real loop (agent_loop: line
 * reassembly, the length bound, JSON parsing, dispatch by "op") and handled by the real
 * handlers of every request that has no effect outside the process: signal, stop, ping (its
 * acknowledgements), resume, list, read, unlisten, bench_unlisten, exit. The requests that
 * start processes or touch the network or the GPUs (spawn, facts, stacks, listen, connect,
 * gpu_watch, bench_listen, bench_send, bench_host) are answered by a stub here, so the
 * fuzzer never runs a command it made up nor opens a socket or a GPU; their parsing is
 * covered by the unit and integration tests.
 *
 * The input goes through a pipe (at most FUZZ_AGENT_MAX bytes, within a pipe's buffer) whose
 * end is the link's end; the agent's answers go to a memfd and are checked afterwards: each
 * is one JSON object with an "ev" string, the first the hello. */
#include "fuzz_common.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "agent/agent.h"
#include "agent/agent_bench.h"
#include "agent/agent_files.h"
#include "agent/agent_net.h"
#include "agent/agent_ranks.h"
#include "wire/protocol.h"

#define FUZZ_AGENT_MAX 60000

static void op_stub(struct agent *ag, const cJSON *req, const cJSON *id)
{
    (void)req;
    agent_send_error(ag, id, "not run by the fuzzer");
}

static const struct agent_op ops[] = {
    { WIRE_OP_FACTS, op_stub },
    { WIRE_OP_LISTEN, op_stub },
    { WIRE_OP_CONNECT, op_stub },
    { WIRE_OP_UNLISTEN, agent_net_unlisten_op },
    { WIRE_OP_SPAWN, op_stub },
    { WIRE_OP_SIGNAL, agent_ranks_signal_op },
    { WIRE_OP_STOP, agent_ranks_stop_op },
    { WIRE_OP_STACKS, op_stub },
    { WIRE_OP_LIST, agent_files_list_op },
    { WIRE_OP_READ, agent_files_read_op },
    { WIRE_OP_PING, agent_ranks_ping_op },
    { WIRE_OP_GPU_WATCH, op_stub },
    { WIRE_OP_RESUME, agent_ranks_resume_op },
    { WIRE_OP_BENCH_LISTEN, op_stub },
    { WIRE_OP_BENCH_UNLISTEN, agent_bench_unlisten_op },
    { WIRE_OP_BENCH_SEND, op_stub },
    { WIRE_OP_BENCH_HOST, op_stub },
    { NULL, NULL },
};

static void check_answers(int fd)
{
    off_t len = lseek(fd, 0, SEEK_END);
    EXPECT(len > 0);
    char *buf = malloc((size_t)len + 1);
    EXPECT(buf && pread(fd, buf, (size_t)len, 0) == len);
    buf[len] = '\0';
    EXPECT(buf[len - 1] == '\n');
    int k = 0;
    for (char *line = buf, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1, k++) {
        cJSON *m = cJSON_ParseWithLength(line, (size_t)(nl - line));
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(m, "ev");
        EXPECT(cJSON_IsObject(m) && cJSON_IsString(ev));
        if (k == 0) EXPECT(strcmp(ev->valuestring, WIRE_EV_HELLO) == 0);
        cJSON_Delete(m);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int p[2];
    if (size > FUZZ_AGENT_MAX) return -1; /* not added to the corpus */
    EXPECT(pipe(p) == 0);
    int out = memfd_create("fuzz-agent-out", MFD_CLOEXEC);
    EXPECT(out >= 0);
    EXPECT(size == 0 || write(p[1], data, size) == (ssize_t)size);
    close(p[1]);
    int link_out = dup(out);
    EXPECT(link_out >= 0);
    struct agent *ag = agent_new(p[0], link_out, ops);
    agent_ranks_init(ag);
    (void)agent_loop(ag);
    agent_ranks_done(ag);
    agent_free(ag);
    /* the loop put /dev/null in their place (the link's descriptors are kept numbered) */
    close(p[0]);
    close(link_out);
    check_answers(out);
    close(out);
    return 0;
}
