/* Taking a run over (docs/run.md "Taking a run over"). Every controller writes the run's record
 * (run_record.h, controller_record.c) when an attempt begins and when the job's state changes;
 * `ddptop attach RUN`, when the run's controller is gone, starts `ddptop run ARGS --adopt` with
 * the recorded command line, directory and environment, and that controller begins here
 * instead of checking and launching: the job's shape and token come from the record, each
 * rank's log is cut back to what the log index says is on disk, and every node is unreachable
 * at first, so that controller_link.c starts a bridge to each node's agent, which says what it
 * holds and sends again everything after the index. A beginning, like the preflight's and the
 * launch's: it sits above the progress step and may continue a stop the record says was under
 * way. */
#include "controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/logw.h"
#include "record/run_record.h"
#include "record/run_replay.h"
#include "util/util.h"

int ctl_adopt_read(struct controller *c, char *err, size_t errlen)
{
    char *dir = xasprintf("%s/%s", c->log_root, c->o.run_id);
    c->adopt = xcalloc(1, sizeof *c->adopt);
    int rc = run_record_read(dir, c->adopt, err, errlen);
    free(dir);
    if (rc < 0) return -1;
    if (!c->adopt->adoptable) {
        snprintf(err, errlen, "run %s cannot be taken over: its record says %s and holds no environment any more",
                 c->o.run_id, c->adopt->state);
        return -1;
    }
    if (c->adopt->n_nodes != c->n) {
        snprintf(err, errlen, "run %s had %zu node%s; its hosts now give %zu: ddptop attach needs the same hosts",
                 c->o.run_id, c->adopt->n_nodes, c->adopt->n_nodes == 1 ? "" : "s", c->n);
        return -1;
    }
    for (size_t i = 0; i < c->n; i++) {
        const char *now = c->hl ? c->hl->hosts[i].name : "localhost";
        if (strcmp(now, c->adopt->hosts[i]) != 0) {
            snprintf(err, errlen, "node %zu of run %s was %s; its hosts now say %s: ddptop attach needs the same hosts",
                     i, c->o.run_id, c->adopt->hosts[i], now);
            return -1;
        }
    }
    snprintf(c->token, sizeof c->token, "%s", c->adopt->token);
    /* --salloc's allocation came back as --jobid (ctl_record_write): still ours to give back */
    if (c->adopt->slurm_release && c->o.nodes.slurm_jobid) c->o.nodes.slurm_release = true;
    return 0;
}

static enum after_stop after_of(const char *s)
{
    return s && strcmp(s, "restart") == 0 ? AFTER_RESTART : s && strcmp(s, "quit") == 0 ? AFTER_QUIT : AFTER_END;
}

/* What the run's files say of the attempt under way (run_replay.h): each rank's log tail,
 * metrics, the events and root cause go into the live job, and a rank whose end events.jsonl
 * records is ended (its agent may have let its exit go: it was acknowledged). The others ran
 * when the controller went away. */
static void take_history(struct controller *c)
{
    struct job *j = c->job;
    struct run_replay rp;
    char err[512];
    bool ok = run_replay_load(j->log_dir, j->run_id, OWNER_GONE, &rp, err, sizeof err) == 0;
    if (ok && (rp.job->n_ranks != j->n_ranks || rp.job->attempt != j->attempt)) {
        run_replay_done(&rp);
        ok = false;
    }
    if (!ok) {
        for (size_t k = 0; k < j->n_ranks; k++) job_rank_running(j, (int)k, 0);
        return;
    }
    job_take_history(j, rp.job, rp.rank_ended);
    /* shown already, by the controller that wrote them */
    c->ev_head_seen = j->ev_head;
    c->ev_count_seen = j->ev_count;
    run_replay_done(&rp);
}

void ctl_adopt_begin(struct controller *c)
{
    struct job *j = c->job;
    struct run_record *r = c->adopt;
    struct logw_mark *marks = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *marks);
    int64_t now = mono_ms(), wall = wall_ns();
    int64_t alive = run_record_last_alive(j->log_dir);
    int64_t since = alive && alive < wall ? (wall - alive) / 1000000 : 0;
    j->attempt = r->attempt;
    /* each rank's log back to what the index says is on disk: the agents send the rest */
    logw_read_index(j->log_dir, marks, j->n_ranks);
    for (size_t k = 0; k < j->n_ranks; k++)
        if (marks[k].attempt >= 0 && marks[k].base != r->rank_base[k]) marks[k].attempt = -1; /* an older agent's */
    logw_cut_back(run_files_writer(c->files), marks, j->attempt);
    char err[256];
    job_attempt_begin(j, err, sizeof err);
    for (size_t k = 0; k < j->n_ranks; k++) {
        struct rank_info *ri = &j->ranks[k];
        ri->seq_base = r->rank_base[k];
        ri->seq = marks[k].attempt >= 0 ? marks[k].seq : 0;
    }
    free(marks);
    take_history(c);
    job_event_add(j, EV_INFO, -1, -1, "taking over run %s, attempt %d: its controller was last heard of %lld s ago; "
                  "reconnecting to %zu node%s", j->run_id, j->attempt, (long long)(since / 1000), c->n,
                  c->n == 1 ? "" : "s");
    for (size_t i = 0; i < c->n; i++) {
        struct cnode *nd = &c->nodes[i];
        nd->holds_ranks = true;
        nd->away = true;
        nd->spawn_answered = true;
        nd->next_try_ms = now;
        /* the agents' grace runs from when the old controller was last heard of */
        nd->last_msg_ms = nd->quiet_from_ms = now - since;
        job_node_running(j, i);
        job_node_link(j, i, LINK_UNREACHABLE);
    }
    job_running(j);
    if (strcmp(r->state, "RUNNING") == 0 || strcmp(r->state, "STALLED") == 0) {
        /* a failure the dead controller had not acted on yet */
        for (size_t k = 0; k < j->n_ranks; k++)
            if (j->ranks[k].state == RANK_FAILED) {
                ctl_rank_failed_begin_stop(c);
                break;
            }
    } else if (strcmp(r->state, "FAILING") == 0 || strcmp(r->state, "RESTARTING") == 0 ||
               strcmp(r->state, "STOPPING") == 0) {
        /* a stop was under way: it goes on once the nodes are back */
        enum job_state during = r->state[0] == 'F' ? JOB_FAILING : r->state[0] == 'R' ? JOB_RESTARTING : JOB_STOPPING;
        ctl_begin_stop(c, during, during == JOB_FAILING ? JOB_FAILED : JOB_STOPPED, after_of(r->after),
                       r->auto_restart);
    }
    ctl_record_write(c);
}
