/* The state transitions (job_state.h). Kept small on purpose: what a transition means for the
 * other fields of the model (pid, straggler marks, the end time) is set here with the state,
 * and nowhere else. */
#include "job_state.h"

#include <assert.h>
#include <stdlib.h>

#include "util/util.h"

static void job_to(struct job *j, enum job_state st)
{
    j->state = st;
    j->generation++;
}

bool job_is_running(const struct job *j)
{
    return j->state == JOB_RUNNING || j->state == JOB_STALLED;
}

bool job_is_stopping(const struct job *j)
{
    return j->state == JOB_STOPPING || j->state == JOB_RESTARTING || j->state == JOB_FAILING;
}

bool job_is_ended(const struct job *j)
{
    return j->state == JOB_DONE || j->state == JOB_FAILED || j->state == JOB_STOPPED;
}

void job_checking(struct job *j) { job_to(j, JOB_CHECKING); }
void job_check_refused(struct job *j) { job_to(j, JOB_CHECK_FAILED); }
void job_launching(struct job *j) { job_to(j, JOB_LAUNCHING); }
void job_running(struct job *j) { job_to(j, JOB_RUNNING); }

bool job_stall_update(struct job *j)
{
    enum job_state want = JOB_RUNNING;
    if (j->state != JOB_RUNNING && j->state != JOB_STALLED) return false;
    for (size_t i = 0; i < j->n_ranks; i++)
        if (j->ranks[i].state == RANK_STALLED) {
            want = JOB_STALLED;
            break;
        }
    if (want == j->state) return false;
    job_to(j, want);
    return true;
}

void job_stopping(struct job *j, enum job_state during)
{
    assert(during == JOB_STOPPING || during == JOB_RESTARTING || during == JOB_FAILING);
    job_to(j, during);
}

void job_restart_asked(struct job *j) { job_to(j, JOB_RESTARTING); }

void job_stop_asked(struct job *j)
{
    if (j->state == JOB_RESTARTING) job_to(j, JOB_STOPPING);
}

void job_ended(struct job *j, enum job_state st)
{
    assert(st == JOB_DONE || st == JOB_FAILED || st == JOB_STOPPED);
    j->ended_ms = mono_ms(); /* the header's elapsed time stops here */
    job_to(j, st);
}

/* ---- nodes ---------------------------------------------------------------------------------- */

static void node_to(struct job *j, size_t node, enum node_state st)
{
    assert(node < j->n_nodes);
    j->nodes[node].state = st;
    j->generation++;
}

void job_node_connecting(struct job *j, size_t node)
{
    j->nodes[node].link = LINK_UP;
    node_to(j, node, NODE_CONNECTING);
}

bool job_rank_unknown(const struct job *j, const struct rank_info *r)
{
    return (r->state == RANK_RUNNING || r->state == RANK_STALLED) && (size_t)r->node < j->n_nodes &&
           j->nodes[r->node].link != LINK_UP;
}

void job_node_link(struct job *j, size_t node, enum node_link link)
{
    assert(node < j->n_nodes);
    if (j->nodes[node].link == link) return;
    j->nodes[node].link = link;
    j->nodes[node].link_since_wall_ns = wall_ns();
    j->generation++;
}
void job_node_ready(struct job *j, size_t node) { node_to(j, node, NODE_READY); }
void job_node_running(struct job *j, size_t node) { node_to(j, node, NODE_RUNNING); }
void job_node_done(struct job *j, size_t node) { node_to(j, node, NODE_DONE); }

static void node_error(struct job *j, size_t node, const char *why)
{
    free(j->nodes[node].error);
    j->nodes[node].error = xstrdup(why ? why : "?");
}

void job_node_unreachable(struct job *j, size_t node, const char *why)
{
    node_error(j, node, why);
    node_to(j, node, NODE_FAILED);
}

void job_node_lost(struct job *j, size_t node, const char *why, bool with_pending)
{
    struct node_info *n = &j->nodes[node];
    node_error(j, node, why);
    for (int k = 0; k < n->n_ranks; k++) {
        struct rank_info *r = &j->ranks[n->first_rank + k];
        if (r->state == RANK_RUNNING || r->state == RANK_STALLED || (with_pending && r->state == RANK_PENDING)) {
            r->state = RANK_LOST;
            r->pid = 0;
            r->straggler = false;
            r->straggler_since_ms = 0;
        }
    }
    node_to(j, node, NODE_LOST);
}

/* ---- ranks ---------------------------------------------------------------------------------- */

static struct rank_info *rank_at(struct job *j, int rank)
{
    assert(rank >= 0 && (size_t)rank < j->n_ranks);
    j->generation++;
    return &j->ranks[rank];
}

void job_rank_running(struct job *j, int rank, int pid)
{
    struct rank_info *r = rank_at(j, rank);
    r->state = RANK_RUNNING;
    r->pid = pid;
    r->step_changed_ms = mono_ms();
}

void job_rank_stalled(struct job *j, int rank)
{
    struct rank_info *r = rank_at(j, rank);
    r->state = RANK_STALLED;
    r->stalled_step = r->step;
    r->stalled_has_step = r->has_step;
}

void job_rank_resumed(struct job *j, int rank) { rank_at(j, rank)->state = RANK_RUNNING; }

void job_rank_ended(struct job *j, int rank, enum rank_state st)
{
    struct rank_info *r = rank_at(j, rank);
    assert(st == RANK_STOPPED || st == RANK_EXITED || st == RANK_FAILED);
    r->state = st;
    r->pid = 0;
    r->proc_state = '?';
    r->straggler = false;
}

void job_rank_ended_as(struct job *j, int rank, const struct rank_info *was)
{
    struct rank_info *r = rank_at(j, rank);
    assert(was->state == RANK_STOPPED || was->state == RANK_EXITED || was->state == RANK_FAILED ||
           was->state == RANK_LOST);
    r->state = was->state;
    r->exit_code = was->exit_code;
    r->term_signal = was->term_signal;
    r->pid = 0;
    r->proc_state = '?';
    r->straggler = false;
}

void job_ranks_stopped(struct job *j)
{
    for (size_t r = 0; r < j->n_ranks; r++)
        if (j->ranks[r].state == RANK_RUNNING || j->ranks[r].state == RANK_STALLED)
            job_rank_ended(j, (int)r, RANK_STOPPED);
}

void job_take_history(struct job *j, struct job *from, const bool *ended)
{
    for (size_t k = 0; k < j->n_ranks; k++) {
        struct rank_info *ri = &j->ranks[k], *old = &from->ranks[k];
        struct log_ring lr = ri->log;
        struct metric_series ms = ri->series;
        ri->log = old->log;
        old->log = lr;
        ri->series = old->series;
        old->series = ms;
        ri->has_step = old->has_step;
        ri->step = old->step;
        ri->has_loss = old->has_loss;
        ri->loss = old->loss;
        ri->step_ms = old->step_ms;
        if (ended[k]) job_rank_ended_as(j, (int)k, old);
        else job_rank_running(j, (int)k, 0);
    }
    struct job_event *ev = j->events;
    size_t head = j->ev_head, count = j->ev_count;
    j->events = from->events;
    j->ev_head = from->ev_head;
    j->ev_count = from->ev_count;
    from->events = ev;
    from->ev_head = head;
    from->ev_count = count;
    struct root_cause cause = j->cause;
    j->cause = from->cause;
    from->cause = cause;
}
