/* The job's events (job.h): a ring of the newest in memory for the panes, and every one of
 * them handed to the sink, which writes it as a JSON line of LOGDIR/RUN_ID/events.jsonl
 * (record/run_events.c). A leaf of the model: it records what others say and calls none of
 * them; what is still pending elsewhere (NCCL's findings, the root cause) is said by whoever
 * ends the run, before job_event_end. */
#include "job.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

const char *job_event_kind_name(enum job_event_kind k)
{
    static const char *const names[] = {
        [EV_LAUNCH] = "launch", [EV_EXIT] = "exit", [EV_FAILURE] = "failure",
        [EV_ROOT_CAUSE] = "root_cause", [EV_STALL] = "stall", [EV_STRAGGLER] = "straggler",
        [EV_NODE_LOST] = "node_lost", [EV_RESTART] = "restart", [EV_STOP] = "stop",
        [EV_DONE] = "done", [EV_INFO] = "info", [EV_RESUME] = "resumed", [EV_SIGNAL] = "signal",
        [EV_STACKS] = "stacks",
        [EV_GPU] = "gpu", [EV_END] = "end", [EV_NCCL] = "nccl",
        [EV_NAN] = "nan", [EV_SPIKE] = "spike",
    };
    return (unsigned)k < sizeof names / sizeof *names && names[k] ? names[k] : "info";
}

const char *run_state_name(enum run_state s)
{
    static const char *const names[] = {
        [RUN_UNKNOWN] = "unknown", [RUN_RUNNING] = "running", [RUN_SUCCEEDED] = "succeeded",
        [RUN_FAILED] = "failed", [RUN_STOPPED] = "stopped", [RUN_INTERRUPTED] = "interrupted",
        [RUN_ORPHANED] = "orphaned",
    };
    return (unsigned)s < sizeof names / sizeof *names && names[s] ? names[s] : "unknown";
}

/* Hands the event to the sink: events.jsonl's line is made by record/run_events.c. */
static void write_event(struct job *j, const struct job_event *ev)
{
    if (j->sink) j->sink->event(j->sink->ctx, j, ev);
}

/* Into the ring (the oldest dropped when full); takes text. */
static struct job_event *event_push(struct job *j, enum job_event_kind kind, int64_t wall,
                                    int attempt, int rank, int node, char *text)
{
    if (node < 0 && rank >= 0 && (size_t)rank < j->n_ranks) node = j->ranks[rank].node;
    if (j->ev_count == j->ev_cap) {
        free(j->events[j->ev_head].text);
        j->ev_head = (j->ev_head + 1) % j->ev_cap;
        j->ev_count--;
    }
    struct job_event *ev = &j->events[(j->ev_head + j->ev_count) % j->ev_cap];
    *ev = (struct job_event){
        .kind = kind, .wall_ns = wall, .attempt = attempt, .rank = rank, .node = node,
        .text = text,
    };
    j->ev_count++;
    j->generation++;
    return ev;
}

void job_event_add(struct job *j, enum job_event_kind kind, int rank, int node,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    write_event(j, event_push(j, kind, wall_ns(), j->attempt, rank, node, text));
}

void job_event_restore(struct job *j, enum job_event_kind kind, int64_t wall, int attempt,
                       int rank, int node, const char *text)
{
    event_push(j, kind, wall, attempt, rank, node, xstrdup(text ? text : ""));
}

const struct job_event *job_event_at(const struct job *j, size_t i)
{
    if (!j || i >= j->ev_count) return NULL;
    return &j->events[(j->ev_head + i) % j->ev_cap];
}

void job_event_end(struct job *j, enum run_state st, int exit_code)
{
    j->end_state = st;
    j->end_exit_code = exit_code;
    j->end_written = true;
    /* a full disk: the reserve goes to the events held in memory and to this one */
    if (j->sink) j->sink->ending(j->sink->ctx);
    job_event_add(j, EV_END, -1, -1, "run %s %s (exit code %d)", j->run_id, run_state_name(st),
                  exit_code);
}
