/* Hang and straggler detection over the job model. The controller calls hang_check on a timer
 * (every second) with the monotonic time; everything here is a pure function of the model and
 * now_ms, so tests drive it with synthetic times. Each episode (a stall, a straggler) gives one
 * event naming rank and host. Whether a node is lost is the controller's business
 * (controller/controller_link.c): the ranks of a silent node are unknown here, never stalled. */
#ifndef DDPTOP_HANG_H
#define DDPTOP_HANG_H

#include <stdint.h>

#include "job.h"

struct hang_opts {
    int hang_timeout_s;      /* --hang-timeout: step not advanced this long = stalled; 0 off */
    int straggler_steps;     /* --straggler-steps: trailing the median step by more; 0 off */
    double straggler_ratio;  /* step time over this x the median (1.5); 0 off */
    int straggler_grace_ms;  /* the condition must hold this long before it is flagged */
};

void hang_opts_init(struct hang_opts *o);

/* --on-hang: what the controller does at an attempt's first stall (docs/run.md). Every action
 * but NONE first saves the stacks of every rank; RESTART then fails the attempt with the hang
 * as its root cause (restarted when --max-restarts allows), STOP ends the job that way. */
enum hang_action { HANG_ACTION_NONE, HANG_ACTION_STACKS, HANG_ACTION_RESTART, HANG_ACTION_STOP };

/* "none", "stacks", "restart" or "stop"; 0, or -1 for anything else. */
int hang_action_parse(const char *s, enum hang_action *out);
const char *hang_action_name(enum hang_action a);

/* The rank to blame for an attempt's hang among the stalled ones: the one furthest behind (the
 * lowest step; a rank that never reported one first), then the one whose step stood still the
 * longest, then the lowest rank. -1 when none is stalled. */
int hang_first_stalled(const struct job *j);

/* What hang_check found this call (bits). */
#define HANG_CHANGED   0x1   /* something in the model changed (states, flags, events) */
#define HANG_STALL     0x2   /* a rank became stalled */

/* Runs every detector below, then derives the job state (RUNNING <-> STALLED). */
unsigned hang_check(struct job *j, const struct hang_opts *o, int64_t now_ms);

/* A RUNNING rank (of a node whose link is up) whose step has not changed for hang_timeout_s
 * (counted from its start when it never printed one) becomes RANK_STALLED with an EV_STALL; a stalled rank whose step
 * moved since becomes RUNNING again with an EV_RESUME. */
unsigned hang_check_stalls(struct job *j, const struct hang_opts *o, int64_t now_ms);
/* rank->straggler for alive ranks whose step_ms is over straggler_ratio x the median, or
 * whose step trails the median by more than straggler_steps, for straggler_grace_ms; one
 * EV_STRAGGLER per episode. Cleared when it caught up (step time back under
 * (1 + ratio) / 2 x the median and no longer trailing). */
unsigned hang_check_stragglers(struct job *j, const struct hang_opts *o, int64_t now_ms);
/* JOB_RUNNING <-> JOB_STALLED from the ranks' states; other job states are left alone. */
unsigned hang_update_job_state(struct job *j);

#endif
