/* The links to agents that hold ranks (docs/run.md "When the controller loses a node"). The
 * control plane is never the reason a job dies: with --agent-grace an agent keeps its ranks
 * and spools their output while nobody talks to it, so a node whose messages stop is only
 * silent (its ranks are unknown, not failed), then unreachable after --node-timeout: its
 * transport is let go and a bridge (ddptop-agent --attach) is started on it again and again,
 * until the agent takes the new link, says what it holds and sends again what we miss. A node
 * is lost only when its agent is known to be gone, or when it stayed unreachable past the
 * grace, when its agent has stopped the ranks by itself.
 *
 * Without a grace (--agent-grace 0) it is as before: no message for --node-timeout, or the
 * connection ending, loses the node at once.
 *
 * Also here: recording a node as lost, whoever found it (ctl_node_lost_as: its ranks, its
 * event, the root cause; what follows is the progress step's), the acknowledgements that let
 * agents drop what the log index holds, the renumbering when a node gets a fresh agent, and
 * the controller's own stalls, which are never blamed on the nodes.
 *
 * These are handlers: they record what happened to a link, they never decide what the job
 * does about it (controller.c's progress step does). */
#include "controller_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/logw.h"
#include "job/root_cause.h"
#include "util/util.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

/* A node is lost this long after the agents' grace ran out with no word from it. */
#define GRACE_MARGIN_MS 10000
#define RETRY_FIRST_MS 1000
#define RETRY_MAX_MS 5000

/* "8 s", "3 min 12 s", "2 h 5 min". */
static void span_text(int64_t ms, char *buf, size_t n)
{
    long long s = ms / 1000;
    if (s < 120) snprintf(buf, n, "%lld s", s);
    else if (s < 7200 && s % 60 == 0) snprintf(buf, n, "%lld min", s / 60);
    else if (s < 7200) snprintf(buf, n, "%lld min %lld s", s / 60, s % 60);
    else snprintf(buf, n, "%lld h %lld min", s / 3600, (s / 60) % 60);
}

bool ctl_link_applies(const struct controller *c, size_t i)
{
    const struct cnode *nd = &c->nodes[i];
    return c->o.agent_grace_s > 0 && nd->holds_ranks && !nd->lost && !nd->released;
}

void ctl_link_heard(struct controller *c, size_t i)
{
    struct cnode *nd = &c->nodes[i];
    struct node_info *ni = &c->job->nodes[i];
    int64_t now = mono_ms();
    int64_t quiet = now - nd->last_msg_ms;
    if (nd->away) return; /* a bridge on its way is not the agent: its resumed hello is */
    nd->last_msg_ms = nd->quiet_from_ms = now;
    ni->last_heartbeat_ms = now;
    ni->last_seen_wall_ns = wall_ns();
    if (ni->link == LINK_SILENT) {
        char span[48];
        span_text(quiet, span, sizeof span);
        job_node_link(c->job, i, LINK_UP);
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s answers again after %s of silence", ni->name, span);
    }
}

void ctl_node_lost(struct controller *c, size_t i, const char *why)
{
    ctl_node_lost_as(c, i, why, NULL);
}

/* Marks the node's running ranks lost; closes its transport (reconnected before a restart).
 * A stop is noted when the job runs (the ranks of a lost node are gone); while it launches,
 * the progress step finds the active node lost (a spare takes its place, or the job ends). */
void ctl_node_lost_as(struct controller *c, size_t i, const char *why, const char *summary)
{
    struct cnode *nd = &c->nodes[i];
    struct node_info *ni = &c->job->nodes[i];
    if (nd->lost) return;
    if (c->job->state != JOB_CHECKING && !ctl_node_active(c, i)) {
        /* a spare's or an excluded node's agent: no ranks there, nothing fails */
        nd->lost = nd->stopped = true;
        nd->away = false;
        if (nd->t) transport_close(nd->t);
        return;
    }
    /* the job runs and nothing stopped it yet (a stop noted in this pass already counts) */
    bool running = ctl_stop_open(c), launching = c->job->state == JOB_LAUNCHING;
    if (running || launching) {
        char *fault = xasprintf("lost (%s)", why);
        ctl_spare_fault(c, i, fault);
        free(fault);
    }
    nd->lost = true;
    nd->stopped = true;
    nd->away = false;
    ctl_exits_release(c, i, false);
    if (nd->t) transport_close(nd->t);
    job_node_link(c->job, i, LINK_UP);
    if (c->job->state == JOB_CHECKING) {
        /* the preflight names it in its report, which decides whether to launch */
        ctl_check_node_down(c, i, why, NULL);
        return;
    }
    /* hang_check may have marked the model already (heartbeats), with its event */
    if (ni->state != NODE_LOST) {
        if (launching && !nd->hello) job_node_unreachable(c->job, i, why);
        else job_node_lost(c->job, i, why, running);
        job_event_add(c->job, EV_NODE_LOST, -1, (int)i, "node %s %s: %s", ni->name,
                      ni->state == NODE_FAILED ? "unreachable" : "lost", why);
        if (running || launching) {
            if (summary) root_cause_told(c->job, (int)i, summary);
            else root_cause_node(c->job, (int)i, why);
        }
    }
    if (running) ctl_note_stop(c, STOP_FAILURE);
}

/* Why a node is lost, told as what happened: the controller's own stall when it was longer
 * than what the agents wait for. */
static char *lost_why(struct controller *c, const char *why)
{
    int64_t limit = c->o.agent_grace_s > 0 ? (int64_t)c->o.agent_grace_s * 1000 : WATCHDOG_MS;
    if (c->stall_end_ms && mono_ms() - c->stall_end_ms < limit + 30000 && c->stall_ms >= limit) {
        char span[48];
        span_text(c->stall_ms, span, sizeof span);
        return xasprintf("the controller did not run for %s (stopped, or starved of CPU), longer than its "
                         "agents wait (%s): they stopped their ranks (%s)",
                         span, c->o.agent_grace_s > 0 ? "--agent-grace" : "the watchdog of --agent-grace 0", why);
    }
    return xstrdup(why);
}

/* The node is lost for good: the job fails (or restarts) without it. */
void ctl_link_lost(struct controller *c, size_t i, const char *why)
{
    char *full = lost_why(c, why);
    /* the summary says what happened, not only that a node was lost: the controller's own
     * stall, "node n3 unreachable for 10 min", "node n3 lost: its agent ended: ..." */
    const char *name = c->job->nodes[i].name;
    char *sum = strcmp(full, why) != 0 ? xstrdup(full)
                : strncmp(why, "unreachable", 11) == 0 ? xasprintf("node %s %s", name, why)
                                                         : xasprintf("node %s lost: %s", name, why);
    ctl_node_lost_as(c, i, full, sum);
    free(sum);
    free(full);
}

/* Lets the transport go without ending the agent: it waits for us. A bridge that did not get
 * the agent's link is ended instead (it holds nothing). */
static void drop_transport(struct controller *c, size_t i)
{
    struct cnode *nd = &c->nodes[i];
    if (!nd->t) return;
    if (nd->bridge && !nd->hello) transport_abandon(nd->t);
    else transport_detach(nd->t);
    transport_free(nd->t);
    nd->t = NULL;
}

static void try_failed(struct controller *c, size_t i, const char *why_t);

/* Unreachable: the transport goes, a bridge follows at once. */
static void go_away(struct controller *c, size_t i, const char *why_t)
{
    struct cnode *nd = &c->nodes[i];
    struct node_info *ni = &c->job->nodes[i];
    char span[48], why[300];
    snprintf(why, sizeof why, "%s", why_t); /* it may be the transport's own text */
    ctl_exits_release(c, i, true); /* what came before it went is the node's word */
    drop_transport(c, i);
    wire_client_reset(&nd->cl);
    ctl_stacks_node_reset(c, i);
    nd->away = true;
    nd->hello = nd->bridge = nd->attach_sent = false;
    nd->resume_id = 0;
    nd->tries = 0;
    nd->next_try_ms = mono_ms();
    free(nd->gone);
    nd->gone = NULL;
    job_node_link(c->job, i, LINK_UNREACHABLE);
    span_text((int64_t)c->o.agent_grace_s * 1000, span, sizeof span);
    if (nd->no_reconnect)
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s unreachable (%s); it said it cannot be reached again, "
                      "its agent stops its ranks within %s", ni->name, why, span);
    else
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s unreachable (%s): reconnecting; its ranks go on "
                      "(its agent keeps them for %s)", ni->name, why, span);
}

void ctl_link_ended(struct controller *c, size_t i, const char *why, bool agent_gone)
{
    if (agent_gone) {
        char *w = xasprintf("its agent ended: %s", why);
        ctl_link_lost(c, i, w);
        free(w);
        return;
    }
    go_away(c, i, why);
}

void ctl_link_gone(struct controller *c, size_t i, const char *why, bool final)
{
    struct cnode *nd = &c->nodes[i];
    if (!final && nd->bridge && nd->away) {
        /* this bridge could not reach the agent (slow, refused): another one will try */
        try_failed(c, i, why);
        return;
    }
    free(nd->gone);
    nd->gone = xstrdup(why);
    ctl_link_lost(c, i, why);
}

/* A bridge attempt that came to nothing: the next one later, a little later each time when it
 * cost the node a login (or a task); RETRY_FIRST_MS later when the node answered no at once
 * (a connection refused); at the next link check when its SYNs went unanswered for a second or
 * more: a SYN costs nothing, and a link that came back during a second's pause between two
 * tries was used only after it (the last of 16 nodes reconnected 2 s after the link came
 * back, with a try's SYNs 250 ms apart, ssh_conn.c; issue 32). */
static void try_failed(struct controller *c, size_t i, const char *why_t)
{
    struct cnode *nd = &c->nodes[i];
    bool reached = !nd->t || transport_reached(nd->t);
    int64_t wait = !reached && mono_ms() - nd->try_ms >= RETRY_FIRST_MS ? LINK_CHECK_MS : RETRY_FIRST_MS;
    char why[300];
    snprintf(why, sizeof why, "%s", why_t); /* it may be the transport's own text */
    if (reached)
        for (int k = 1; k < nd->tries && wait < RETRY_MAX_MS; k++) wait *= 2;
    if (wait > RETRY_MAX_MS) wait = RETRY_MAX_MS;
    drop_transport(c, i);
    nd->bridge = nd->attach_sent = false;
    nd->next_try_ms = mono_ms() + wait;
    if (nd->tries == 1 || nd->tries % 10 == 0)
        job_event_add(c->job, EV_INFO, -1, (int)i, "node %s: reconnect attempt %d failed (%s); trying again", 
                      c->job->nodes[i].name, nd->tries, why);
}

/* Bridges to every node whose next attempt is due (in one step, for a kind whose nodes share
 * one). */
static void start_tries(struct controller *c, int64_t now)
{
    bool *need = NULL;
    size_t n_tries = 0;
    /* at most --fanout bridges connect at once, as agents do at the start */
    size_t busy = 0, fanout = c->o.nodes.fanout > 0 ? (size_t)c->o.nodes.fanout : 1;
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].away && c->nodes[i].t) busy++;
    for (size_t i = 0; i < c->n && busy < fanout; i++) {
        struct cnode *nd = &c->nodes[i];
        if (!nd->away || nd->t || now < nd->next_try_ms || nd->no_reconnect) continue;
        busy++;
        nd->tries++;
        nd->try_ms = now;
        nd->bridge = true;
        nd->attach_sent = nd->hello = false;
        nd->hello_deadline_ms = 0;
        nd->queued = false;
        if (!need) need = xcalloc(c->n, sizeof *need);
        need[i] = true;
        n_tries++;
    }
    if (n_tries) {
        ctl_open_nodes(c, need, true);
        for (size_t i = 0; i < c->n; i++)
            if (need[i]) transport_start(c->nodes[i].t);
    }
    free(need);
}

void ctl_link_check(struct controller *c, int64_t now)
{
    int64_t timeout = (int64_t)c->o.node_timeout_s * 1000;
    int64_t grace = (int64_t)c->o.agent_grace_s * 1000;
    /* the preflight's requests have deadlines of their own (facts may block the agent) */
    if (c->job->state == JOB_CHECKING) return;
    bool live = job_is_running(c->job) || job_is_stopping(c->job);
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        struct node_info *ni = &c->job->nodes[i];
        char span[48], at[16], why[160];
        if (nd->lost || nd->released) continue;
        if (!live || !ctl_link_applies(c, i)) {
            /* no ranks to wait for, or no grace: silence loses the node, as always */
            if (ctl_node_usable(nd) && now - nd->quiet_from_ms > timeout) {
                span_text(now - nd->quiet_from_ms, span, sizeof span);
                snprintf(why, sizeof why, "no message for %s (network down, node hung or agent killed)", span);
                ctl_link_lost(c, i, why);
            }
            continue;
        }
        if (!nd->away) {
            int64_t quiet = now - nd->quiet_from_ms;
            if (quiet >= timeout) {
                span_text(quiet, span, sizeof span);
                snprintf(why, sizeof why, "no message for %s (--node-timeout %d s)", span, c->o.node_timeout_s);
                go_away(c, i, why);
            } else if (quiet >= SILENT_AFTER_MS && ni->link == LINK_UP) {
                util_clock_text(ni->last_seen_wall_ns ? ni->last_seen_wall_ns : wall_ns(), at, sizeof at);
                job_node_link(c->job, i, LINK_SILENT);
                job_event_add(c->job, EV_INFO, -1, (int)i, "node %s silent since %s: its ranks are unknown, not "
                              "failed (unreachable after --node-timeout %d s)", ni->name, at, c->o.node_timeout_s);
            }
            continue;
        }
        /* away */
        if (now - nd->last_msg_ms >= grace + GRACE_MARGIN_MS) {
            span_text(now - nd->last_msg_ms, span, sizeof span);
            snprintf(why, sizeof why, "unreachable for %s (longer than --agent-grace %d s): its agent has "
                     "stopped its ranks", span, c->o.agent_grace_s);
            ctl_link_lost(c, i, why);
            continue;
        }
        if (!nd->t) continue;
        enum transport_state st = transport_state(nd->t);
        if (st == TRANSPORT_FAILED || st == TRANSPORT_CLOSED) {
            const char *e = transport_error(nd->t);
            try_failed(c, i, e ? e : "closed");
        } else if (st == TRANSPORT_READY && !nd->hello) {
            if (!nd->hello_deadline_ms) nd->hello_deadline_ms = now + ctl_hello_timeout_ms(c);
            else if (now >= nd->hello_deadline_ms) try_failed(c, i, "the bridge did not reach the agent in time");
        }
    }
    start_tries(c, now);
}

/* What the log index holds of rank, in its agent's numbers: 0 when nothing, or when the marks
 * are those of an earlier agent of the node (another base). */
static uint64_t durable_seq(const struct controller *c, int rank)
{
    uint64_t seq, base;
    logw_durable(run_files_writer(c->files), rank, &seq, &base);
    return base == c->job->ranks[rank].seq_base ? seq : 0;
}

/* ---- a bridge, then the agent ------------------------------------------------------------- */

void ctl_link_bridge(struct controller *c, size_t i)
{
    struct cnode *nd = &c->nodes[i];
    if (!nd->bridge || nd->attach_sent) return;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "op", WIRE_OP_ATTACH);
    cJSON_AddStringToObject(m, "run", c->job->run_id);
    cJSON_AddNumberToObject(m, "node", (double)i);
    ctl_send(c, i, m);
    nd->attach_sent = true;
}

/* The agent's ranks as it said them: a spawn answer lost with the old link is made good. */
static bool take_rank_list(struct controller *c, size_t i, const cJSON *ranks)
{
    const struct node_info *ni = &c->job->nodes[i];
    bool any = false;
    const cJSON *r;
    cJSON_ArrayForEach(r, ranks) {
        int rank = (int)ctl_int(c, i, WIRE_EV_HELLO, r, "rank", 0, INT_MAX, -1);
        int at = (int)ctl_int(c, i, WIRE_EV_HELLO, r, "attempt", 0, INT_MAX, -1);
        if (rank < ni->first_rank || rank >= ni->first_rank + ni->n_ranks || at != c->job->attempt) continue;
        any = true;
        int pid = (int)ctl_int(c, i, WIRE_EV_HELLO, r, "pid", 1, INT_MAX, 0);
        if (!pid) continue;
        if (c->job->ranks[rank].state == RANK_PENDING) job_rank_started(c->job, rank, pid);
        else if (!c->job->ranks[rank].pid) c->job->ranks[rank].pid = pid; /* taken over */
    }
    return any;
}

void ctl_link_resumed(struct controller *c, size_t i, const cJSON *hello)
{
    struct cnode *nd = &c->nodes[i];
    struct node_info *ni = &c->job->nodes[i];
    char span[48];
    if (!nd->bridge || !nd->away) return;
    int64_t away = mono_ms() - nd->last_msg_ms;
    nd->away = false;
    ctl_link_heard(c, i);
    nd->hello = true;
    nd->tries = 0;
    job_node_link(c->job, i, LINK_UP);
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(hello, "ranks");
    int alive = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, ranks)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "alive"))) alive++;
    span_text(away, span, sizeof span);
    job_event_add(c->job, EV_INFO, -1, (int)i, "node %s reconnected after %s: its agent kept its ranks (%d alive); "
                  "catching up", ni->name, span, alive);
    /* What of each rank is on disk (and in the log index): the agent may let that go and
     * sends the rest again. What came after and is still on its way to the disk comes again
     * too, and is dropped as a repeat (seq_take): the agent never lets go of what a
     * controller killed now would not find on disk. */
    cJSON *m = ctl_request(c, i, WIRE_OP_RESUME, WIRE_TAG_RESUME, &nd->resume_id);
    cJSON *from = cJSON_AddObjectToObject(m, "from");
    for (int k = 0; k < ni->n_ranks; k++) {
        int rank = ni->first_rank + k;
        uint64_t seq = durable_seq(c, rank);
        char key[24];
        if (seq > c->job->ranks[rank].seq) seq = c->job->ranks[rank].seq;
        if (!seq) continue;
        snprintf(key, sizeof key, "%d", rank);
        cJSON_AddNumberToObject(from, key, (double)seq);
    }
    ctl_send(c, i, m);
    if (take_rank_list(c, i, ranks)) nd->spawn_answered = true;
    if (job_is_stopping(c->job) && !nd->stopped) {
        ctl_send_stop(c, i);
    }
    ctl_gpu_watch(c, i);
    /* the ranks' steps may have moved while we did not hear: the stall clock starts again */
    for (int k = 0; k < ni->n_ranks; k++) {
        struct rank_info *ri = &c->job->ranks[ni->first_rank + k];
        if (ri->step_changed_ms < mono_ms()) ri->step_changed_ms = mono_ms();
    }
}

void ctl_link_resume_answer(struct controller *c, size_t i, const cJSON *m)
{
    struct cnode *nd = &c->nodes[i];
    const struct node_info *ni = &c->job->nodes[i];
    long long n = ctl_int(c, i, WIRE_EV_RESUME, m, "messages", 0, JSON_EXACT_MAX, 0);
    long long b = ctl_int(c, i, WIRE_EV_RESUME, m, "bytes", 0, JSON_EXACT_MAX, 0);
    nd->resume_id = 0;
    job_event_add(c->job, EV_INFO, -1, (int)i, "node %s caught up: %lld message%s (%lld bytes) sent again", ni->name,
                  n, n == 1 ? "" : "s", b);
    /* The spawn never reached the agent (it names none of this attempt's ranks and sent no
     * exit for them): it goes again. */
    if (!job_is_running(c->job) || nd->spawn_answered || !nd->spawn_id || nd->n_exits) return;
    for (int k = 0; k < ni->n_ranks; k++)
        if (c->job->ranks[ni->first_rank + k].state != RANK_PENDING) return;
    job_event_add(c->job, EV_INFO, -1, (int)i, "node %s: its agent never got the spawn; sending it again", ni->name);
    ctl_send(c, i, ctl_spawn_request(c, i, &nd->spawn_id));
}

/* ---- acknowledgements and numbering ------------------------------------------------------- */

void ctl_link_ack(struct controller *c, size_t i, struct strbuf *ping)
{
    const struct node_info *ni = &c->job->nodes[i];
    bool any = false;
    for (int k = 0; k < ni->n_ranks; k++) {
        int rank = ni->first_rank + k;
        struct crank *cr = &c->ranks[rank];
        uint64_t seq = durable_seq(c, rank), base = c->job->ranks[rank].seq_base;
        if (!seq || (seq == cr->acked && base == cr->acked_base)) continue;
        /* written here, not through cJSON, whose every number is printed and read back */
        strbuf_addf(ping, "%s\"%d\":%llu", any ? "," : ",\"ack\":{", rank, (unsigned long long)seq);
        any = true;
        cr->acked = seq;
        cr->acked_base = base;
    }
    if (any) strbuf_adds(ping, "}");
}

void ctl_link_fresh_agent(struct controller *c, size_t i)
{
    const struct node_info *ni = &c->job->nodes[i];
    for (int k = 0; k < ni->n_ranks; k++) {
        struct rank_info *ri = &c->job->ranks[ni->first_rank + k];
        ri->seq_base += ri->seq;
        ri->seq = 0;
        c->ranks[ni->first_rank + k].acked = 0;
    }
}

void ctl_link_hold(struct controller *c, int64_t held_ms)
{
    int64_t now = mono_ms();
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        nd->quiet_from_ms += held_ms;
        if (nd->quiet_from_ms > now) nd->quiet_from_ms = now;
        if (nd->hello_deadline_ms) nd->hello_deadline_ms += held_ms;
    }
    if (c->stop_deadline_ms) c->stop_deadline_ms += held_ms;
}

void ctl_link_stalled(struct controller *c, int64_t gap_ms)
{
    char span[48];
    int64_t now = mono_ms();
    bool say = !c->stall_said_ms || now - c->stall_said_ms >= 30000 || gap_ms >= 10000;
    span_text(gap_ms, span, sizeof span);
    c->stall_ms = gap_ms;
    c->stall_end_ms = now;
    ctl_link_hold(c, gap_ms);
    /* a starved controller stalls pass after pass: said once in a while, not each time */
    if (!say) return;
    c->stall_said_ms = now;
    job_event_add(c->job, EV_INFO, -1, -1, "the controller did not run for %s (stopped, or starved of CPU): its "
                  "nodes are not blamed for that silence", span);
}
