/* Job-level summaries (job_stats.h). */
#include "job_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void job_stats_compute(const struct job *j, struct job_stats *st)
{
    memset(st, 0, sizeof *st);
    st->loss_mean = st->tokens_per_s = st->step_ms_median = NAN;
    long *steps = xmalloc((j->n_ranks + 1) * sizeof *steps);
    double *ms = xmalloc((j->n_ranks + 1) * sizeof *ms);
    size_t n_ms = 0;
    double loss_sum = 0, tok_sum = 0;
    for (size_t i = 0; i < j->n_ranks; i++) {
        const struct rank_info *r = &j->ranks[i];
        if ((unsigned)r->state <= RANK_LOST) st->by_state[r->state]++;
        if (r->straggler) st->n_stragglers++;
        if (r->has_step) steps[st->n_step++] = r->step;
        /* a NaN or inf loss (kept as +INFINITY) would make the mean inf: counted apart */
        if (r->has_loss && isfinite(r->loss)) { loss_sum += r->loss; st->n_loss++; }
        else if (r->has_loss && !isnan(r->loss)) st->n_loss_bad++;
        if (!isnan(r->tokens_per_s)) { tok_sum += r->tokens_per_s; st->n_tokens++; }
        if (isfinite(r->step_ms)) ms[n_ms++] = r->step_ms;
    }
    if (st->n_step) {
        qsort(steps, st->n_step, sizeof *steps, cmp_long);
        st->step_min = steps[0];
        st->step_max = steps[st->n_step - 1];
        st->step_median = steps[(st->n_step - 1) / 2];
    }
    if (n_ms) {
        qsort(ms, n_ms, sizeof *ms, cmp_double);
        st->step_ms_median = ms[(n_ms - 1) / 2];
    }
    if (st->n_loss) st->loss_mean = loss_sum / (double)st->n_loss;
    if (st->n_tokens) st->tokens_per_s = tok_sum / (double)st->n_tokens;
    free(steps);
    free(ms);
}
