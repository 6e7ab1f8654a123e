/* The root cause of a failed attempt: the first failure observed (a rank's non-zero exit or
 * fatal signal, or a lost node), with the rank's last output lines and its
 * TORCHELASTIC_ERROR_FILE (PyTorch's @record JSON made readable). First failure wins: later
 * failures in the same attempt, the ranks we stopped included, never replace it. */
#ifndef DDPTOP_ROOT_CAUSE_H
#define DDPTOP_ROOT_CAUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

#define ROOT_CAUSE_LINES      20           /* last output lines kept */
#define ROOT_CAUSE_LINE_MAX   4096         /* bytes kept of each of them */
#define ROOT_CAUSE_ERROR_MAX  (64 * 1024)  /* bytes kept of the error file */

/* Rank `rank` failed (exit_code when term_signal is 0). When the attempt has no root cause
 * yet, records it (summary, last lines from the rank's ring for this attempt, error file) and
 * returns true; its class and EV_ROOT_CAUSE event (written to events.jsonl with all of it)
 * follow when it settles (below). */
bool root_cause_rank(struct job *j, int rank, int exit_code, int term_signal,
                     const char *error_file, size_t error_len);
/* A rank's root cause is classified (failure_class.h) and its EV_ROOT_CAUSE event added once,
 * when the attempt's other ranks have all ended or ROOT_CAUSE_SETTLE_MS after the first
 * failure, whichever comes first: the other ranks' lines (PyTorch's watchdog numbers, a peer's
 * reset) often come after the first rank has gone. root_cause_settle does it now (before a
 * restart or the run's end); root_cause_settle_if_ended when every rank has ended;
 * root_cause_tick on the controller's timer. Each returns whether it added the event. */
#define ROOT_CAUSE_SETTLE_MS 5000
bool root_cause_settle(struct job *j);
bool root_cause_settle_if_ended(struct job *j);
bool root_cause_tick(struct job *j, int64_t now_ms);
/* Node `node` was lost (why: "no heartbeat for 10 s"); same rule, no output lines. */
bool root_cause_node(struct job *j, int node, const char *why);
/* A cause already told whole, first seen on node `node`: the control plane lost the node for
 * good ("node n3 unreachable for 10 min ...", "the controller did not run for 8 s ..."), or
 * too few nodes are left (--nnodes). summary is the whole summary; class node_lost. */
bool root_cause_told(struct job *j, int node, const char *summary);
/* The scheduler ended the job (Slurm's SIGTERM to the step: scancel, a time limit,
 * preemption): root_cause_told's rule, in the class preempted. */
bool root_cause_scheduler(struct job *j, int node, const char *summary);
/* The attempt hung (--on-hang restart or stop): `rank` stalled first (hang_first_stalled);
 * where says where every rank was (stack_where_summary; NULL: unknown). Same rule, with the
 * rank's last output lines: "rank 1 on gpu2 hung: step 4 has not advanced for 12 s; rank 1 in
 * freeze (job.py), rank 0 in all_reduce". */
bool root_cause_hang(struct job *j, int rank, int64_t now_ms, const char *where);
/* A health rule's incident (--on-nan, --on-spike; job/health.h) stops the attempt: kind (enum
 * health_kind), the rank that opened it and its step. Same rule, with the rank's last output
 * lines and the line that had the loss as evidence; its class at once, its event when it
 * settles (as a rank's failure), when the ranks that followed within HEALTH_FOLLOW_STEPS
 * have been counted: "loss became NaN on rank 5 at step 1,204 (first rank; 7 followed within
 * 2 steps)". */
bool root_cause_health(struct job *j, int kind, int rank, long step);

/* PyTorch's error file ({"message":{"message":"...","extraInfo":{"py_callstack":"...",
 * "timestamp":"..."}}}, or "message" as a plain string) as readable text: the message, the
 * call stack, the time. Anything else is returned as it is. Caller frees. */
char *root_cause_format_error_file(const char *text, size_t len);

#endif
