/* libFuzzer harness for the controller's reading of what a node's agent says (docs/protocol.md
 * "Run requests"; launcher/controller/controller_agent.c): every line goes through agent_message, the
 * decoder ctl_agent_lines applies to each line its transport hands over (the fast path for
 * "out", the wire client's parse and id matching, then the message table: hello, spawned,
 * out, status, exit, error, notice, gpu, resume...); the exits it holds (controller_exits.c)
 * are applied at the end, as ctl_agent_lines does once their hold is over.
 *
 * agent_message is static: the file is compiled into this harness (#include below), so that
 * the decoder is fuzzed as it is without an entry point added for a test only; the archive's
 * copy of controller_agent.o is then not linked. The controller is a real one of a running
 * job (2 nodes, 2 ranks each, in memory: no log directory), without transports (what it
 * would send goes nowhere), node 0 reading the input; requests 1 to 4 of node 0 are in
 * flight (a spawn, a stop, a resume and a ping), so that their answers are taken (the status
 * heartbeat and the pong by their fast paths, fast_status and fast_pong, when in shape). A stop the handlers
 * note is the progress step's to act on, which is not run here: the note is only checked.
 *
 * Invariants: the job's ranks stay in their states' range, the job stays in a state it can be
 * in, and a stop is noted only while the job runs; nothing crashes, leaks or reads past a
 * line. */
#include "fuzz_common.h"

#include "../../launcher/controller/controller_agent.c"

#include "job/job.h"
#include "job/job_state.h"

static const char *const node_names[] = { "n1", "n2" };
static const int rpn[] = { 2, 2 };

static struct controller *ctl_new(void)
{
    char err[256];
    struct controller *c = xcalloc(1, sizeof *c);
    c->n = 2;
    c->job = job_new("fuzz", NULL, 1, node_names, NULL, rpn, c->n, err, sizeof err);
    EXPECT(c->job);
    c->nodes = xcalloc(c->n, sizeof *c->nodes);
    c->ranks = xcalloc(c->job->n_ranks, sizeof *c->ranks);
    c->metrics = metrics_parser_new(NULL, err, sizeof err);
    EXPECT(c->metrics);
    job_launching(c->job);
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        wire_client_init(&nd->cl);
        nd->hello = true;
        nd->gpu_count = -1;
        job_node_ready(c->job, i);
        job_node_running(c->job, i);
    }
    for (size_t r = 0; r < c->job->n_ranks; r++) job_rank_running(c->job, (int)r, 1000 + (int)r);
    job_running(c->job);
    /* requests in flight on node 0: their answers are matched by id (ids 1, 2, 3) */
    struct cnode *nd = &c->nodes[0];
    cJSON_Delete(wire_client_request(&nd->cl, WIRE_OP_SPAWN, WIRE_TAG_SPAWN, &nd->spawn_id));
    cJSON_Delete(wire_client_request(&nd->cl, WIRE_OP_STOP, WIRE_TAG_STOP, &nd->stop_id));
    cJSON_Delete(wire_client_request(&nd->cl, WIRE_OP_RESUME, WIRE_TAG_RESUME, &nd->resume_id));
    wire_client_begin(&nd->cl, WIRE_TAG_PING); /* 4: a ping, whose pong fast_pong takes */
    return c;
}

static void ctl_free(struct controller *c)
{
    for (size_t i = 0; i < c->n; i++) {
        ctl_exits_release(c, i, false);
        wire_client_done(&c->nodes[i].cl);
        free(c->nodes[i].gone);
        free(c->nodes[i].trace_prefix);
    }
    for (size_t r = 0; r < c->job->n_ranks; r++)
        EXPECT(c->job->ranks[r].state >= RANK_PENDING && c->job->ranks[r].state <= RANK_LOST);
    metrics_parser_free(c->metrics);
    ctl_stacks_free(c);
    job_free(c->job);
    free(c->nodes);
    free(c->ranks);
    free(c->unesc);
    strbuf_done(&c->line_in);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct controller *c = ctl_new();
    struct cnode *nd = &c->nodes[0];
    size_t at = 0;
    while (at < size && !nd->lost) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t n = nl ? (size_t)(nl - (data + at)) : size - at;
        char *line = fuzz_str(data + at, n);
        at += n + 1;
        agent_message(c, 0, line);
        free(line);
    }
    if (!nd->lost && nd->n_exits) ctl_exits_release(c, 0, true);
    EXPECT(c->stop_noted == STOP_NONE || job_is_running(c->job));
    ctl_free(c);
    return 0;
}
