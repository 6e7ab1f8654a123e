/* Every change of a job's, node's or rank's state, one function per transition (the state
 * machines are drawn in docs/architecture.md). No other file assigns those states: the
 * controller (controller/), the hang detector and the exit handling call these, so each transition
 * has one place that says what it means and what goes with it (events stay with the callers,
 * which know why). Each bumps the job's generation, so views redraw. */
#ifndef DDPTOP_JOB_STATE_H
#define DDPTOP_JOB_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "job.h"

/* ---- the job -------------------------------------------------------------------------------- */
/* The job's state is also the controller's phase (there is no second machine):
 *
 *   CHECKING -> CHECK_FAILED -> LAUNCHING -> RUNNING <-> STALLED
 *   RUNNING|STALLED -> STOPPING | RESTARTING | FAILING -> LAUNCHING (restart) | STOPPED | FAILED
 *   RUNNING -> DONE; anything -> STOPPED (quit before a launch)
 *
 * These say which part of it the job is in. */
bool job_is_running(const struct job *j);         /* RUNNING, STALLED: the attempt's ranks run */
bool job_is_stopping(const struct job *j);        /* STOPPING, RESTARTING, FAILING */
bool job_is_ended(const struct job *j);           /* DONE, FAILED, STOPPED */

void job_checking(struct job *j);                 /* the preflight runs */
void job_check_refused(struct job *j);            /* the preflight refused: the user decides */
void job_launching(struct job *j);                /* agents (re)connect, then spawn */
void job_running(struct job *j);                  /* every node was sent its ranks */
/* RUNNING <-> STALLED, as the hang detector sees the ranks; false when nothing changed. */
bool job_stall_update(struct job *j);
/* Stopping every rank: during is STOPPING (asked for), RESTARTING, or FAILING (a failure). */
void job_stopping(struct job *j, enum job_state during);
void job_restart_asked(struct job *j);            /* a stop in progress ends in a restart */
void job_stop_asked(struct job *j);               /* a restart in progress ends stopped */
/* The end: DONE, FAILED or STOPPED; the elapsed time stops. */
void job_ended(struct job *j, enum job_state st);

/* ---- nodes ---------------------------------------------------------------------------------- */
void job_node_connecting(struct job *j, size_t node);
void job_node_ready(struct job *j, size_t node);      /* its agent greeted, or its ranks stopped */
void job_node_running(struct job *j, size_t node);    /* its ranks were spawned */
void job_node_done(struct job *j, size_t node);       /* every rank of the job succeeded */
/* Could not be reached, or its agent never greeted (why is kept as its error). */
void job_node_unreachable(struct job *j, size_t node, const char *why);
/* Lost while it had ranks (heartbeats stopped, the connection dropped): its running ranks, and
 * its pending ones when with_pending, become LOST. */
void job_node_lost(struct job *j, size_t node, const char *why, bool with_pending);

/* How the controller hears from it (the caller adds the event that says why). */
void job_node_link(struct job *j, size_t node, enum node_link link);
/* A rank that was running when its node was last heard of, and the node is silent or being
 * reconnected: not failed, unknown (shown as such, never flagged stalled). */
bool job_rank_unknown(const struct job *j, const struct rank_info *r);

/* ---- ranks ---------------------------------------------------------------------------------- */
void job_rank_running(struct job *j, int rank, int pid); /* spawned */
void job_rank_stalled(struct job *j, int rank);          /* its step stopped advancing */
void job_rank_resumed(struct job *j, int rank);
/* It ended: stopped by us, exited 0, or failed. */
void job_rank_ended(struct job *j, int rank, enum rank_state st);
/* It had ended as `was` says (the run's files, read back when a run is taken over): its end
 * state (exited, failed, stopped, lost), exit code and signal. */
void job_rank_ended_as(struct job *j, int rank, const struct rank_info *was);
/* The stop is complete: ranks still running or stalled are stopped. */
void job_ranks_stopped(struct job *j);

/* ---- a run taken over ------------------------------------------------------------------------ */
/* A run taken over (`ddptop attach`): the history of the same attempt read back from its files
 * (run_replay.h: `from`, of the same shape) goes into j: each rank's log tail, metrics, step and
 * loss, the events and the root cause; a rank whose end `ended` records has ended as it says,
 * the others run. `from` gets j's empty ones in exchange. */
void job_take_history(struct job *j, struct job *from, const bool *ended);

#endif
