/* The controller of `ddptop run` and `ddptop check` (controller.h), its phases: connecting the
 * agents (their transports, --fanout, one Slurm step for srun), launching, stopping, restarting
 * and ending; also the requests to a node's agent and run_opts' init and done. Its phase is the job's state (job_state.h):
 * CHECKING (agents connect and greet, the preflight runs on them: controller_check.c) ->
 * LAUNCHING (nodes lost or released since are connected again; all greeted) -> RUNNING (ranks
 * spawned) -> STOPPING / RESTARTING / FAILING (stop sent, waiting for answers) -> LAUNCHING
 * again for a restart, or DONE / FAILED / STOPPED. Each node is logged in to once: the
 * preflight and every attempt use the same connection, unless it was lost. The loop is in
 * controller_run.c, agent lines are decoded in controller_agent.c, silent and unreachable
 * nodes are controller_link.c's.
 *
 * The job object is replaced once, after the preflight, when --nproc-per-node gpu learned GPU
 * counts that change the rank map; front ends take the job from each callback or
 * controller_job(). */
#include "controller_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check/check_report.h"
#include "hosts/slurm_job.h"
#include "wire/protocol.h"
#include "job/nccl.h"
#include "job/root_cause.h"
#include "util/util.h"

extern char **environ;

void run_opts_init(struct run_opts *o)
{
    memset(o, 0, sizeof *o);
    check_opts_init(&o->check);
    o->log_dir = JOB_LOG_ROOT_DEFAULT;
    o->hang_timeout_s = 300;
    o->on_hang = HANG_ACTION_STACKS;
    o->gpu_interval_ms = 1000;
    o->term_timeout_s = 10;
    o->agent_grace_s = 600;
    o->node_timeout_s = 30;
    o->agent_spool_mb = 256;
    o->straggler_steps = 3;
}

void run_opts_done(struct run_opts *o)
{
    check_opts_done(&o->check);
    free(o->export_regex);
    memset(o, 0, sizeof *o);
}

void ctl_send(struct controller *c, size_t node, cJSON *msg)
{
    char *s = wire_line(msg);
    if (c->nodes[node].t) transport_send_line(c->nodes[node].t, s);
    free(s);
}

cJSON *ctl_request(struct controller *c, size_t node, const char *op, int tag, int *id)
{
    return wire_client_request(&c->nodes[node].cl, op, tag, id);
}

/* Hands the events added since the last call to the front end, oldest first. Works on the
 * model's ring without a total counter: growth of count plus movement of head. */
void ctl_events_flush(struct controller *c)
{
    struct job *j = c->job;
    size_t added = (j->ev_count - c->ev_count_seen) + (j->ev_head + j->ev_cap - c->ev_head_seen) % j->ev_cap;
    if (added > j->ev_count) added = j->ev_count;
    for (size_t i = j->ev_count - added; i < j->ev_count; i++)
        if (c->fe.on_event) c->fe.on_event(c->fe.ctx, j, job_event_at(j, i));
    c->ev_head_seen = j->ev_head;
    c->ev_count_seen = j->ev_count;
}

/* ---- nodes -------------------------------------------------------------------------------- */

bool ctl_node_usable(const struct cnode *nd)
{
    return nd->t && nd->hello && !nd->lost && !nd->away && !nd->released;
}

void ctl_node_lost(struct controller *c, size_t i, const char *why)
{
    ctl_node_lost_as(c, i, why, NULL);
}

/* Marks the node's running ranks lost; closes its transport (reconnected before a restart). */
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
    if (job_is_running(c->job) || c->job->state == JOB_LAUNCHING) {
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
        if (c->job->state == JOB_LAUNCHING && !nd->hello) job_node_unreachable(c->job, i, why);
        else job_node_lost(c->job, i, why, job_is_running(c->job));
        job_event_add(c->job, EV_NODE_LOST, -1, (int)i, "node %s %s: %s", ni->name,
                      ni->state == NODE_FAILED ? "unreachable" : "lost", why);
        if (job_is_running(c->job) || c->job->state == JOB_LAUNCHING) {
            if (summary) root_cause_told(c->job, (int)i, summary);
            else root_cause_node(c->job, (int)i, why);
        }
    }
    if (job_is_running(c->job)) {
        ctl_rank_failed_begin_stop(c);
    } else if (c->job->state == JOB_LAUNCHING) {
        /* No node runs ranks while agents connect. Without every node there is no launch, and
         * restarting would meet the same node: the job ends here, unless a spare takes its
         * place (--nnodes) */
        if (ctl_spare_on(c) && ctl_spare_replace(c)) {
            ctl_connect_nodes(c);
            return;
        }
        c->after = AFTER_END;
        ctl_finish(c, JOB_FAILED);
    }
}

void ctl_start_queued(struct controller *c)
{
    size_t busy = 0, fanout = c->o.check.fanout > 0 ? (size_t)c->o.check.fanout : 1;
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].t && !c->nodes[i].queued && transport_connecting(c->nodes[i].t)) busy++;
    for (size_t i = 0; i < c->n && busy < fanout; i++) {
        struct cnode *nd = &c->nodes[i];
        if (!nd->queued) continue;
        nd->queued = false;
        nd->hello_deadline_ms = 0;
        transport_start(nd->t);
        if (c->pf && c->job->state == JOB_CHECKING)
            preflight_node_connecting(c->pf, i, transport_address(nd->t), transport_port(nd->t));
        busy++;
    }
}

int64_t ctl_hello_timeout_ms(const struct controller *c)
{
    return (int64_t)c->o.check.ssh.timeout_s * 1000 + transport_kind_hello_ms(c->o.check.transport.kind);
}

static char *agent_log(const struct controller *c)
{
    return c->job->log_dir ? xasprintf("%s/agent.log", c->job->log_dir) : NULL;
}

struct transport_env ctl_transport_env(const struct controller *c, const char *stderr_path)
{
    return (struct transport_env){.o = &c->o.check.transport, .hosts = c->hl ? c->hl->hosts : NULL, .n = c->n,
                                  .conn = &c->o.check.ssh, .agent_path = c->agent_path, .stderr_path = stderr_path,
                                  .slurm_jobid = c->o.check.slurm_jobid, .pbs = c->o.check.pbs,
                                  .verbose = c->o.verbose};
}

void ctl_open_nodes(struct controller *c, const bool *need, bool bridge)
{
    char *errlog = agent_log(c);
    struct transport_env env = ctl_transport_env(c, errlog);
    struct transport **t = xcalloc(c->n ? c->n : 1, sizeof *t);
    for (size_t i = 0; i < c->n; i++) {
        if (!need[i]) continue;
        transport_free(c->nodes[i].t);
        c->nodes[i].t = NULL;
    }
    transport_kind_open(&env, need, bridge, t);
    for (size_t i = 0; i < c->n; i++)
        if (need[i]) c->nodes[i].t = t[i];
    free(t);
    free(errlog);
}

/* (Re)creates the transport of every node that has none or lost it. */
void ctl_connect_nodes(struct controller *c)
{
    if (!c->transport_noticed) {
        struct transport_env env = ctl_transport_env(c, NULL);
        char *said = transport_kind_announce(&env);
        c->transport_noticed = true;
        if (said) job_event_add(c->job, EV_INFO, -1, -1, "%s", said);
        free(said);
    }
    bool *need = xcalloc(c->n ? c->n : 1, sizeof *need);
    for (size_t i = 0; i < c->n; i++) {
        /* the preflight checks spares too; an attempt connects its active nodes only */
        bool wanted = c->job->state == JOB_CHECKING ? c->job->nodes[i].role != NODE_EXCLUDED : ctl_node_active(c, i);
        need[i] = wanted && (!c->nodes[i].t || c->nodes[i].lost || c->nodes[i].released || c->nodes[i].away);
    }
    for (size_t i = 0; i < c->n; i++) {
        /* a node still unreachable gets a fresh agent: its old one stops its ranks itself */
        if (need[i] && c->nodes[i].t) transport_detach(c->nodes[i].t);
    }
    ctl_open_nodes(c, need, false);
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        if (!need[i]) continue;
        wire_client_reset(&nd->cl); /* answers on the old connection never come */
        ctl_stacks_node_reset(c, i);
        nd->queued = true;
        nd->hello = nd->lost = nd->released = nd->away = nd->bridge = nd->holds_ranks = false;
        nd->last_msg_ms = nd->quiet_from_ms = mono_ms();
        job_node_connecting(c->job, i);
    }
    free(need);
    ctl_start_queued(c);
}

/* ---- launching ---------------------------------------------------------------------------- */

void ctl_launch_begin(struct controller *c)
{
    job_launching(c->job);
    ctl_connect_nodes(c);
}

/* What the environment of node i's local rank k depends on. */
static struct rank_env_in rank_env_in_for(const struct controller *c, size_t i, int k)
{
    const struct job *j = c->job;
    const struct node_info *ni = &j->nodes[i];
    return (struct rank_env_in){
        .rank = ni->first_rank + k, .local_rank = k, .node = ni->node_rank, .local_world_size = ni->n_ranks,
        .world_size = j->world_size, .nnodes = (int)ctl_active_count(c),
        /* the first active node: node 0 unless it was excluded (--nnodes) */
        .master_addr = transport_address(c->nodes[ctl_first_active(c)].t),
        .master_port = c->o.check.master_port, .attempt = j->attempt, .max_restarts = j->max_restarts,
        .run_id = j->run_id, .token = c->token, .exports = &c->exports, .cli_env = c->o.check.env,
        .n_cli_env = c->o.check.n_env, .host = c->hl ? &c->hl->hosts[i] : NULL,
        .launcher_env = environ,
    };
}

cJSON *ctl_spawn_request(struct controller *c, size_t i, int *id)
{
    struct job *j = c->job;
    struct node_info *ni = &j->nodes[i];
    cJSON *m = ctl_request(c, i, WIRE_OP_SPAWN, WIRE_TAG_SPAWN, id), *argv, *ranks;
    bool remote = c->hl != NULL; /* hosts named: the nodes are other machines */
    cJSON_AddNumberToObject(m, "attempt", j->attempt);
    if (remote) job_node_address(j, i, transport_address(c->nodes[i].t));   /* a peer's address finds it */
    argv = cJSON_AddArrayToObject(m, "argv");
    if (c->user_argv) {
        for (size_t k = 0; c->user_argv[k]; k++) cJSON_AddItemToArray(argv, cJSON_CreateString(c->user_argv[k]));
    } else {
        size_t n;
        char **d = plan_default_argv(c->train_path, j->log_dir, remote, &n);
        for (size_t k = 0; k < n; k++) cJSON_AddItemToArray(argv, cJSON_CreateString(d[k]));
        plan_argv_free(d);
    }
    cJSON_AddStringToObject(m, "workdir", c->workdir);
    cJSON_AddNumberToObject(m, "watchdog_ms", WATCHDOG_MS);
    /* the agent keeps the ranks this long without us, and can be found again (its socket is
     * named after the run and the node) */
    cJSON_AddNumberToObject(m, "grace_ms", (double)c->o.agent_grace_s * 1000);
    cJSON_AddNumberToObject(m, "spool_bytes", (double)c->o.agent_spool_mb * 1048576.0);
    cJSON_AddStringToObject(m, "run", j->run_id);
    cJSON_AddNumberToObject(m, "node", (double)i);
    ranks = cJSON_AddArrayToObject(m, "ranks");
    for (int k = 0; k < ni->n_ranks; k++) {
        struct env_list env = {0};
        struct rank_env_in in = rank_env_in_for(c, i, k);
        cJSON *r = cJSON_CreateObject(), *e;
        plan_rank_env(&in, &env);
        if (k == 0) { /* the same for every rank of a node: run id, attempt, the node's keys */
            const char *prefix = plan_trace_prefix(&env);
            free(c->nodes[i].trace_prefix);
            c->nodes[i].trace_prefix = prefix && prefix[0] == '/' ? xstrdup(prefix) : NULL;
        }
        cJSON_AddNumberToObject(r, "rank", in.rank);
        cJSON_AddNumberToObject(r, "local_rank", k);
        e = cJSON_AddObjectToObject(r, "env");
        /* ddptop's NCCL_DEBUG goes as a default: the agent drops it where the node's own
         * environment or NCCL's configuration files set NCCL_DEBUG(_SUBSYS) */
        bool dflt = plan_nccl_debug_defaulted(&in);
        c->job->nccl_debug_default = dflt;
        cJSON *d = dflt ? cJSON_AddObjectToObject(r, "env_default") : NULL;
        for (size_t v = 0; v < env.n; v++) {
            bool nccl = false;
            for (size_t q = 0; dflt && plan_nccl_debug_vars[q]; q++)
                nccl = nccl || strcmp(env.v[v].key, plan_nccl_debug_vars[q]) == 0;
            cJSON_AddStringToObject(nccl ? d : e, env.v[v].key, env.v[v].value);
        }
        env_list_free(&env);
        cJSON_AddItemToArray(ranks, r);
    }
    return m;
}

static void spawn_all(struct controller *c)
{
    char err[512];
    struct job *j = c->job;
    if (job_attempt_begin(j, err, sizeof err) < 0) {
        job_event_add(j, EV_INFO, -1, -1, "%s", err);
    }
    for (size_t r = 0; r < j->n_ranks; r++) c->ranks[r] = (struct crank){0};
    c->stop_for_hang = false;
    ctl_spare_faults_clear(c); /* a fault excludes a node after the attempt it happened in */
    /* Once per run, as torchrun warns once per launch: not per node, rank or attempt. */
    for (size_t i = 0; i < c->n && !c->omp_noticed; i++) {
        if (!ctl_node_active(c, i)) continue;
        struct rank_env_in in = rank_env_in_for(c, i, 0);
        if (!plan_omp_defaulted(&in)) continue;
        job_event_add(j, EV_INFO, -1, -1, "%s", plan_omp_notice);
        c->omp_noticed = true;
    }
    job_event_add(j, EV_LAUNCH, -1, -1, "attempt %d: launching %d rank%s on %zu node%s (run %s, logs in %s/attempt-%d)",
                  j->attempt, j->world_size, j->world_size == 1 ? "" : "s", ctl_active_count(c),
                  ctl_active_count(c) == 1 ? "" : "s", j->run_id, j->log_dir, j->attempt);
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        if (!ctl_node_active(c, i)) continue;
        nd->spawn_answered = false;
        nd->stop_id = 0;
        nd->stopped = false;
        nd->holds_ranks = true;
        ctl_send(c, i, ctl_spawn_request(c, i, &nd->spawn_id));
        job_node_running(j, i);
    }
    job_running(j);
    ctl_record_write(c); /* what `ddptop attach` needs to take the run over */
}

/* In CONNECT: spawn once every node greeted; fail nodes that never do. */
static void connect_progress(struct controller *c)
{
    int64_t now = mono_ms();
    bool all = true;
    ctl_start_queued(c);
    for (size_t i = 0; i < c->n && c->job->state == JOB_LAUNCHING; i++) {
        struct cnode *nd = &c->nodes[i];
        enum transport_state st;
        if (nd->hello || !ctl_node_active(c, i)) continue;
        all = false;
        if (nd->queued) continue;
        st = transport_state(nd->t);
        if (st == TRANSPORT_FAILED || st == TRANSPORT_CLOSED) {
            const char *e = transport_error(nd->t), *h = transport_hint(nd->t);
            char *why = xasprintf("%s%s%s", e ? e : "connection closed", h ? " -- " : "", h ? h : "");
            ctl_node_lost(c, i, why);
            free(why);
        } else if (st == TRANSPORT_READY) {
            if (!nd->hello_deadline_ms) nd->hello_deadline_ms = now + ctl_hello_timeout_ms(c);
            else if (now >= nd->hello_deadline_ms) ctl_node_lost(c, i, "the agent did not greet in time (run ddptop-agent by hand on the node to see why)");
        }
    }
    if (all && c->job->state == JOB_LAUNCHING) spawn_all(c);
}

/* ---- stopping, restarting, ending --------------------------------------------------------- */

void ctl_send_stop(struct controller *c, size_t i)
{
    cJSON *m = ctl_request(c, i, WIRE_OP_STOP, WIRE_TAG_STOP, &c->nodes[i].stop_id);
    cJSON_AddNumberToObject(m, "term_timeout_ms", (double)c->o.term_timeout_s * 1000);
    ctl_send(c, i, m);
}

void ctl_begin_stop(struct controller *c, enum job_state during, enum job_state after_state,
                       enum after_stop after, bool auto_restart)
{
    int64_t grace = (int64_t)c->o.term_timeout_s * 1000;
    job_stopping(c->job, during);
    c->stop_state = after_state;
    c->after = after;
    c->auto_restart = auto_restart;
    c->stop_deadline_ms = mono_ms() + grace + 5000;
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        if (nd->away && ctl_link_applies(c, i)) {
            /* unreachable: the stop goes when it is back (ctl_link_resumed); until then only a
             * restart waits for it, so that two attempts never share the node (stop_progress) */
            nd->stopped = false;
            continue;
        }
        if (!ctl_node_usable(nd)) {
            nd->stopped = true;
            continue;
        }
        nd->stopped = false;
        ctl_send_stop(c, i);
    }
    c->job->generation++;
    ctl_record_write(c);
}

void ctl_rank_failed_begin_stop(struct controller *c)
{
    if (!job_is_running(c->job)) return;
    ctl_begin_stop(c, JOB_FAILING, JOB_FAILED, AFTER_END, true);
}

void ctl_record_end(struct controller *c)
{
    enum job_state st = c->job->state;
    enum run_state rs = st == JOB_DONE ? RUN_SUCCEEDED
                      : st == JOB_STOPPED ? (c->signals ? RUN_INTERRUPTED : RUN_STOPPED)
                      : RUN_FAILED;
    if (c->o.check_only) return; /* `ddptop check` writes no run */
    root_cause_settle(c->job);
    nccl_flush(c->job);   /* NCCL's findings still pending go before the end */
    job_event_end(c->job, rs, plan_exit_code(st));
}

/* Every agent is told to exit (an agent with a grace waits for us otherwise) and its
 * transport closed; a node still unreachable is left to its agent's grace. abandon: nobody
 * is told anything, every agent waits (ddptop attach can take the run over). */
void ctl_release_node(struct controller *c, size_t i)
{
    struct cnode *nd = &c->nodes[i];
    if (!nd->t || nd->released) return;
    if (ctl_node_usable(nd)) {
        int id;
        ctl_send(c, i, ctl_request(c, i, WIRE_OP_EXIT, WIRE_TAG_NONE, &id));
    }
    transport_close(nd->t);
    nd->released = true;
    nd->holds_ranks = false;
}

void ctl_release_all(struct controller *c, bool abandon)
{
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        if (!nd->t || nd->released) continue;
        if (abandon || (nd->away && !nd->lost)) {
            transport_detach(nd->t);
            continue;
        }
        ctl_release_node(c, i);
    }
}

void ctl_finish(struct controller *c, enum job_state st)
{
    job_ended(c->job, st);
    ctl_record_end(c);
    ctl_record_write(c); /* the end, and no environment any more: nothing can take it over */
    run_files_flush(c->files);
    /* A finished job lets go at once: of its agents (a restart from the dashboard starts fresh
     * ones), and of the Slurm allocation --salloc made. The final screen stays. */
    ctl_release_all(c, false);
    if (c->o.check.slurm_release && c->o.check.slurm_jobid && !c->o.check_only) {
        slurm_job_cancel(c->o.check.slurm_jobid);
        c->allocation_released = true;
        job_event_add(c->job, EV_INFO, -1, -1, "Slurm allocation %s given back (--salloc)", c->o.check.slurm_jobid);
    }
    if (!c->interactive) c->quit = true;
}

void ctl_restart(struct controller *c, const char *why)
{
    root_cause_settle(c->job); /* its class and event belong to the attempt that ended */
    nccl_flush(c->job);   /* the attempt's NCCL WARNs still pending */
    c->job->attempt++;
    job_event_add(c->job, EV_RESTART, -1, -1, "restarting (%s): attempt %d%s", why, c->job->attempt,
                  c->user_argv ? "" : "; ddptop-train resumes from its snapshot");
    ctl_launch_begin(c);
}

static void stop_complete(struct controller *c)
{
    struct job *j = c->job;
    job_ranks_stopped(j);
    for (size_t i = 0; i < c->n; i++)
        if (!c->nodes[i].lost && ctl_node_active(c, i)) job_node_ready(j, i);
    run_files_flush(c->files);
    /* --nnodes: the nodes that failed through their own fault leave before a restart */
    bool restarts = c->after == AFTER_RESTART || (c->after == AFTER_END && c->auto_restart && j->attempt < j->max_restarts);
    if (restarts && ctl_spare_on(c) && !ctl_spare_replace(c)) {
        ctl_finish(c, JOB_FAILED);
        return;
    }
    if (c->after == AFTER_QUIT) {
        c->quit = true;
        ctl_finish(c, c->stop_state == JOB_FAILED ? JOB_FAILED : JOB_STOPPED);
    } else if (c->after == AFTER_RESTART) {
        ctl_restart(c, "asked for");
    } else if (c->auto_restart && j->attempt < j->max_restarts) {
        ctl_restart(c, c->stop_for_hang ? "after a hang" : "after a failure");
    } else {
        if (c->auto_restart && j->max_restarts > 0)
            job_event_add(j, EV_INFO, -1, -1, "no restarts left (--max-restarts %d)", j->max_restarts);
        ctl_finish(c, c->stop_state);
    }
}

/* Whether the stop in progress waits for unreachable nodes: when a restart follows (their old
 * ranks must be gone before new ones start beside them) or a takeover continues a stop; they
 * are back (the stop goes to them: ctl_link_resumed) or lost after their grace. Otherwise they
 * are left to their agents' grace. */
static bool stop_waits_away(const struct controller *c)
{
    const struct job *j = c->job;
    return c->after == AFTER_RESTART || c->adopt ||
           (c->after == AFTER_END && c->auto_restart && j->attempt < j->max_restarts);
}

static void stop_progress(struct controller *c)
{
    bool all = true, wait_away = stop_waits_away(c);
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        if (nd->away && !nd->stopped && !wait_away) {
            nd->stopped = true;
            job_event_add(c->job, EV_INFO, -1, (int)i, "node %s is unreachable: its agent stops its ranks by itself "
                          "within --agent-grace", c->job->nodes[i].name);
        }
        if (!nd->stopped || nd->n_exits) all = false; /* held exits first */
    }
    if (!all && mono_ms() >= c->stop_deadline_ms) {
        for (size_t i = 0; i < c->n; i++)
            if (!c->nodes[i].stopped && !(c->nodes[i].away && wait_away))
                ctl_node_lost(c, i, "did not confirm the stop in time");
        all = true;
        for (size_t i = 0; i < c->n; i++)
            if (!c->nodes[i].stopped) all = false;
    }
    if (all) stop_complete(c);
}

static void run_progress(struct controller *c)
{
    struct job *j = c->job;
    bool done = j->n_ranks > 0;
    for (size_t r = 0; r < j->n_ranks && done; r++) /* runs every loop: stop at the first */
        if (j->ranks[r].state != RANK_EXITED) done = false;
    if (!done) return;
    job_event_add(j, EV_DONE, -1, -1, "all %d rank%s exited with code 0 (attempt %d)", j->world_size,
                  j->world_size == 1 ? "" : "s", j->attempt);
    for (size_t i = 0; i < c->n; i++)
        if (ctl_node_active(c, i)) job_node_done(j, i);
    ctl_finish(c, JOB_DONE);
}

void ctl_check_progress(struct controller *c)
{
    if (c->job->state == JOB_CHECKING) ctl_check_progress_phase(c);
    else if (c->job->state == JOB_LAUNCHING) connect_progress(c);
    else if (job_is_running(c->job)) run_progress(c);
    else if (job_is_stopping(c->job)) stop_progress(c);
    ctl_stacks_progress(c);
    /* a takeover acts on the state adopt.json says (a stall, a stop under way): it follows */
    if (c->record_state >= 0 && c->record_state != (int)c->job->state) ctl_record_write(c);
}
