/* The controller's decisions (controller_int.h, the layer between the loop above and the
 * handlers below): the progress step, once per loop pass, and the phases it drives. The job's
 * state is the controller's phase (job_state.h): CHECKING (agents connect and greet, the
 * preflight runs on them: controller_check.c) -> LAUNCHING (nodes lost or released since are
 * connected again; all greeted) -> RUNNING (ranks spawned) -> STOPPING / RESTARTING / FAILING
 * (stop sent, waiting for answers) -> LAUNCHING again for a restart, or DONE / FAILED /
 * STOPPED. Each node is logged in to once: the preflight and every attempt use the same
 * connection, unless it was lost.
 *
 * The handlers of the agents' messages and of the links (controller_agent.c, _link.c, _exits.c,
 * ...) only record what happened: a rank's end, a node lost, the scheduler's SIGTERM, a fault.
 * Here, and only here (besides a person's own stop, restart or quit, controller_run.c's
 * actions), is decided what follows: stop, restart, exclude nodes, finish. The loop is in
 * controller_run.c; the plumbing that sends and connects in controller_node.c.
 *
 * The job object is replaced once, after the preflight, when --nproc-per-node gpu learned GPU
 * counts that change the rank map; front ends take the job from each callback or
 * controller_job(). */
#include "controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check_report.h"
#include "hosts/slurm_job.h"
#include "job/gpu.h"
#include "job/nccl.h"
#include "job/root_cause.h"
#include "util/util.h"

static void launch_lost(struct controller *c);

/* ---- launching ---------------------------------------------------------------------------- */

/* Connects the nodes that need it; the requests in flight on a replaced connection are given up. */
static void connect_nodes(struct controller *c)
{
    bool *renewed = xcalloc(c->n ? c->n : 1, sizeof *renewed);
    ctl_connect_nodes(c, renewed);
    for (size_t i = 0; i < c->n; i++)
        if (renewed[i]) ctl_stacks_node_reset(c, i);
    free(renewed);
}

void ctl_launch_begin(struct controller *c)
{
    job_launching(c->job);
    connect_nodes(c);
}

/* How long a pass sends spawn requests (ctl_spawn_more): the rest go in the next passes, which
 * do not wait. A key waits for the end of the pass it came in (controller_run.c). */
#define SPAWN_PASS_MS 10

static void spawn_all(struct controller *c)
{
    char err[512];
    struct job *j = c->job;
    if (job_attempt_begin(j, err, sizeof err) < 0) {
        job_event_add(j, EV_INFO, -1, -1, "%s", err);
    }
    for (size_t r = 0; r < j->n_ranks; r++) c->ranks[r] = (struct crank){0};
    c->stop_for_hang = false;
    c->stop_for_health = HEALTH_KIND_NONE;
    ctl_spare_faults_clear(c); /* a fault excludes a node after the attempt it happened in */
    /* Once per run, as torchrun warns once per launch: not per node, rank or attempt. */
    for (size_t i = 0; i < c->n && !c->omp_noticed; i++) {
        if (!ctl_node_active(c, i)) continue;
        struct rank_env_in in = ctl_rank_env_in(c, i, 0);
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
        ctl_spawn_due(c, i); /* sent from this pass on, a few ms a pass (ctl_spawn_more) */
        job_node_running(j, i);
    }
    c->spawn_next = 0;
    job_running(j);
    ctl_record_write(c); /* what `ddptop attach` needs to take the run over */
}

/* LAUNCHING: spawn once every node greeted; a node that never does is lost, and without it
 * there is no launch (launch_lost). */
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
            launch_lost(c);
        } else if (st == TRANSPORT_READY) {
            if (!nd->hello_deadline_ms) {
                nd->hello_deadline_ms = now + ctl_hello_timeout_ms(c);
            } else if (now >= nd->hello_deadline_ms) {
                ctl_node_lost(c, i, "the agent did not greet in time (run ddptop-agent by hand on the node to see why)");
                launch_lost(c);
            }
        }
    }
    if (all && c->job->state == JOB_LAUNCHING) spawn_all(c);
}

/* An active node was lost while the agents connect (it has no ranks yet; ctl_node_lost recorded
 * it). Without every node there is no launch, and restarting would meet the same node: the job
 * ends here, unless a spare takes its place (--nnodes). Nothing when no active node is lost. */
static void launch_lost(struct controller *c)
{
    bool any = false;
    for (size_t i = 0; i < c->n && !any && c->job->state == JOB_LAUNCHING; i++)
        any = c->nodes[i].lost && ctl_node_active(c, i);
    if (!any) return;
    if (ctl_spare_on(c) && ctl_spare_replace(c)) {
        connect_nodes(c);
        return;
    }
    c->after = AFTER_END;
    ctl_finish(c, JOB_FAILED);
}

/* ---- stopping, restarting, ending --------------------------------------------------------- */

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
    job_gpu_flush(c->job);   /* the GPUs as the run left them: a short run's busy GPU */
    job_event_end(c->job, rs, plan_exit_code(st));
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
    if (c->o.nodes.slurm_release && c->o.nodes.slurm_jobid && !c->o.check_only) {
        slurm_job_cancel(c->o.nodes.slurm_jobid);
        c->allocation_released = true;
        job_event_add(c->job, EV_INFO, -1, -1, "Slurm allocation %s given back (--salloc)", c->o.nodes.slurm_jobid);
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
        ctl_restart(c, c->stop_for_hang ? "after a hang"
                       : c->stop_for_health == HEALTH_NAN ? "after the loss became NaN"
                       : c->stop_for_health == HEALTH_SPIKE ? "after a loss spike" : "after a failure");
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
                ctl_node_lost(c, i, "did not confirm the stop in time");   /* stopping: nothing to note */
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

/* CHECKING: once the preflight is done, `ddptop check` ends; a run excludes the nodes it
 * failed (--nnodes), then launches on the same connections or refuses. */
static void check_progress(struct controller *c)
{
    if (!ctl_check_step(c)) return;
    if (c->o.check_only) {
        size_t pass, warn, fail;
        check_report_summary(preflight_report(c->pf), &pass, &warn, &fail);
        c->quit = true;
        ctl_finish(c, fail ? JOB_FAILED : JOB_DONE);
        return;
    }
    bool refused = ctl_check_settle(c);
    /* --nnodes: the failed nodes are excluded and the good ones launch when enough are left */
    if (ctl_spare_on(c)) ctl_spare_after_check(c, preflight_report(c->pf), &refused);
    ctl_check_say(c, refused);
    if (refused) {
        job_check_refused(c->job);
        if (!c->interactive) c->quit = true;
    } else {
        ctl_launch_begin(c); /* every node greeted: the same connections launch */
    }
}

/* What the handlers found since the last step, acted on: the job stops for the first stop
 * noted (a failure restarts when attempts remain; the scheduler's SIGTERM does not, and waits
 * for Slurm's KillWait); an active node lost while launching ends the launch or brings in a
 * spare. A health rule's ask (--on-nan, --on-spike: the model made its incident the root
 * cause, so it came before any failure of this pass) goes before a failure's restart: `stop`
 * means no restart even when the ranks die of the NaN in the same pass. */
static void decide(struct controller *c)
{
    enum stop_cause why = c->stop_noted;
    enum health_action health = health_take(c->job);
    c->stop_noted = STOP_NONE;
    launch_lost(c);
    if (!job_is_running(c->job)) return;
    if (why != STOP_SCHEDULER && health != HEALTH_NONE && c->job->cause.health) {
        ctl_begin_stop(c, JOB_FAILING, JOB_FAILED, AFTER_END, health == HEALTH_RESTART);
        c->stop_for_health = c->job->cause.health;
    } else if (why == STOP_FAILURE) {
        ctl_rank_failed_begin_stop(c);
    } else if (why == STOP_SCHEDULER) {
        ctl_begin_stop(c, JOB_FAILING, JOB_FAILED, AFTER_END, false);
        c->stop_deadline_ms = mono_ms() + SLURM_KILLWAIT_MS + 5000;
    }
}

void ctl_progress(struct controller *c)
{
    decide(c);
    if (c->job->state == JOB_CHECKING) check_progress(c);
    else if (c->job->state == JOB_LAUNCHING) connect_progress(c);
    else if (job_is_running(c->job)) run_progress(c);
    else if (job_is_stopping(c->job)) stop_progress(c);
    enum hang_verdict hang = ctl_stacks_progress(c);
    if (hang != HANG_GOES_ON) {
        /* --on-hang restart or stop: the hang is the attempt's root cause (controller_stacks.c) */
        ctl_begin_stop(c, JOB_FAILING, JOB_FAILED, AFTER_END, hang == HANG_RESTART);
        c->stop_for_hang = true;
    }
    /* a takeover acts on the state adopt.json says (a stall, a stop under way): it follows */
    if (c->record_state >= 0 && c->record_state != (int)c->job->state) ctl_record_write(c);
    if (c->spawns_due) ctl_spawn_more(c, SPAWN_PASS_MS); /* the launch's spawns, this pass's share */
}
