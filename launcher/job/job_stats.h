/* Job-level summaries for the dashboard's header and the headless printer: the step across
 * ranks (min / median / max), the mean loss, the job's tokens/s and how many ranks are in
 * each state. Computed from the model on demand (a sort of at most n_ranks numbers). */
#ifndef DDPTOP_JOB_STATS_H
#define DDPTOP_JOB_STATS_H

#include <stdbool.h>
#include <stddef.h>

#include "job.h"

struct job_stats {
    size_t n_step;             /* ranks with a step this attempt; the three below need >= 1 */
    long step_min, step_median, step_max;   /* median: the lower one for an even count */
    size_t n_loss;             /* ranks whose loss is a number */
    double loss_mean;          /* over those; NAN when none */
    size_t n_loss_bad;         /* ranks whose loss is NaN or inf (job/health.h): not in the mean */
    size_t n_tokens;
    double tokens_per_s;       /* NAN when none: see job_stats_compute */
    double step_ms_median;     /* NAN when none */
    size_t by_state[RANK_LOST + 1];   /* ranks per enum rank_state */
    size_t n_stragglers;
};

/* tokens_per_s: the runtime's tokens_per_s is already the whole job's rate estimated by each
 * rank (docs/metrics.md), so this is the mean over the ranks that report it, not a sum. */
void job_stats_compute(const struct job *j, struct job_stats *st);

#endif
