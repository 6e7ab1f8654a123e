/* Training health rules over the ranks' losses (docs/run.md "Training health"): a rank's loss
 * that becomes NaN or inf, or that jumps above --loss-spike's rule (X times the median of its
 * last N finite losses), is an event naming the rank and the step. Per rank, as the ranks
 * print; the first rank of an incident gets the event, the ranks that follow within
 * HEALTH_FOLLOW_STEPS steps are counted for the root cause ("loss became NaN on rank 5 at
 * step 1,204 (first rank; 7 followed within 2 steps)"). When the incident's rule asks for a
 * stop or a restart (--on-nan, --on-spike) and the job runs with no root cause yet, the
 * incident becomes the attempt's root cause and the rule's ask is left for the controller's
 * progress step (health_take), which decides: hang_action's way for the loss. Pure over the
 * model: no I/O, no clock. */
#ifndef DDPTOP_HEALTH_H
#define DDPTOP_HEALTH_H

#include <stdbool.h>
#include <stddef.h>

#include "health_cause.h"
#include "job.h"

#define HEALTH_SPIKE_WINDOW_MAX 1000

/* What a rule asks of the controller: nothing more than the event, stop the job as failed,
 * or restart it (counted against --max-restarts; without restarts left, a stop). */
enum health_action { HEALTH_NONE = 0, HEALTH_STOP, HEALTH_RESTART };

/* "none", "stop" or "restart"; 0, or -1 for anything else. */
int health_action_parse(const char *s, enum health_action *out);
const char *health_action_name(enum health_action a);

/* --loss-spike X[:N]: X a factor above 1, N (default HEALTH_SPIKE_WINDOW) from 3 to
 * HEALTH_SPIKE_WINDOW_MAX. 0, or -1 with err saying what it wants. */
int health_spike_parse(const char *s, double *factor, int *window, char *err, size_t errlen);

/* The median of the newest n finite losses of s before its newest point (which is the one
 * being judged); false when it holds fewer than n. */
bool health_window_median(const struct metric_series *s, int n, double *out);

/* The newest metric point of rank was just recorded (job_metric_add_as): applies the rules.
 * Returns true when it changed the model (an event, a root cause). */
bool health_point(struct job *j, int rank);

/* The action a rule asked for since the last call (the incident is the attempt's root cause),
 * cleared: the controller's progress step calls it once a pass. HEALTH_NONE: none. */
enum health_action health_take(struct job *j);

#endif
