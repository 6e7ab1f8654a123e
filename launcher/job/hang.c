/* Hang, straggler and lost-node detectors (hang.h). Pure over the model and now_ms. The
 * medians are "the others'" for two ranks: the step-time median is the lower one and the
 * step median the upper one, so with two ranks the slow one is compared with the fast one
 * (a plain mean of the two would hide a rank twice as slow from a 1.5x rule). */
#include "hang.h"

#include "gpu.h"
#include "job_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "root_cause.h"
#include "util/util.h"

void hang_opts_init(struct hang_opts *o)
{
    *o = (struct hang_opts){
        .hang_timeout_s = 300,
        .straggler_steps = 3,
        .straggler_ratio = 1.5,
        .straggler_grace_ms = 2000,
    };
}

static const char *const action_names[] = {
    [HANG_ACTION_NONE] = "none", [HANG_ACTION_STACKS] = "stacks",
    [HANG_ACTION_RESTART] = "restart", [HANG_ACTION_STOP] = "stop",
};

int hang_action_parse(const char *s, enum hang_action *out)
{
    for (size_t i = 0; s && i < sizeof action_names / sizeof *action_names; i++)
        if (strcmp(s, action_names[i]) == 0) {
            *out = (enum hang_action)i;
            return 0;
        }
    return -1;
}

const char *hang_action_name(enum hang_action a)
{
    return (unsigned)a < sizeof action_names / sizeof *action_names ? action_names[a] : "?";
}

int hang_first_stalled(const struct job *j)
{
    int best = -1;
    for (size_t i = 0; i < j->n_ranks; i++) {
        const struct rank_info *r = &j->ranks[i], *b = best >= 0 ? &j->ranks[best] : NULL;
        if (r->state != RANK_STALLED) continue;
        if (b) {
            long rs = r->has_step ? r->step : -1, bs = b->has_step ? b->step : -1;
            if (rs > bs) continue;
            if (rs == bs && r->step_changed_ms >= b->step_changed_ms) continue;
        }
        best = (int)i;
    }
    return best;
}

static bool rank_alive(const struct rank_info *r)
{
    return r->state == RANK_RUNNING || r->state == RANK_STALLED;
}

unsigned hang_check_stalls(struct job *j, const struct hang_opts *o, int64_t now_ms)
{
    unsigned res = 0;
    for (size_t i = 0; i < j->n_ranks; i++) {
        struct rank_info *r = &j->ranks[i];
        /* a rank whose node is silent is unknown, not stalled: its steps may be on the way */
        if (j->nodes[r->node].link != LINK_UP) continue;
        if (r->state == RANK_RUNNING && o->hang_timeout_s > 0) {
            int64_t ref = r->step_changed_ms ? r->step_changed_ms : j->attempt_started_ms;
            int64_t idle = now_ms - ref;
            if (idle < (int64_t)o->hang_timeout_s * 1000) continue;
            job_rank_stalled(j, (int)i);
            char note[200];
            job_gpu_stall_note(j, r->rank, note, sizeof note);
            if (r->has_step)
                job_event_add(j, EV_STALL, r->rank, r->node, "rank %d on %s stalled: step %ld "
                              "has not advanced for %lld s%s", r->rank, job_rank_host(j, r->rank),
                              r->step, (long long)(idle / 1000), note);
            else
                job_event_add(j, EV_STALL, r->rank, r->node, "rank %d on %s stalled: no step "
                              "reported in the %lld s since it started%s", r->rank,
                              job_rank_host(j, r->rank), (long long)(idle / 1000), note);
            res |= HANG_CHANGED | HANG_STALL;
        } else if (r->state == RANK_STALLED) {
            if (r->has_step == r->stalled_has_step && r->step == r->stalled_step &&
                o->hang_timeout_s > 0)
                continue;
            job_rank_resumed(j, (int)i);
            if (r->has_step)
                job_event_add(j, EV_RESUME, r->rank, r->node, "rank %d on %s resumed at step %ld",
                              r->rank, job_rank_host(j, r->rank), r->step);
            else
                job_event_add(j, EV_RESUME, r->rank, r->node, "rank %d on %s resumed", r->rank,
                              job_rank_host(j, r->rank));
            res |= HANG_CHANGED;
        }
    }
    return res;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* Median step time (lower) and step (upper) of the alive ranks; NAN / false when fewer than
 * two ranks report one. */
static void alive_medians(const struct job *j, double *med_ms, bool *has_med_step,
                          long *med_step)
{
    double *ms = xmalloc((j->n_ranks + 1) * sizeof *ms);
    long *steps = xmalloc((j->n_ranks + 1) * sizeof *steps);
    size_t n_ms = 0, n_steps = 0;
    for (size_t i = 0; i < j->n_ranks; i++) {
        const struct rank_info *r = &j->ranks[i];
        if (!rank_alive(r)) continue;
        if (isfinite(r->step_ms) && r->step_ms > 0) ms[n_ms++] = r->step_ms;
        if (r->has_step) steps[n_steps++] = r->step;
    }
    *med_ms = NAN;
    *has_med_step = false;
    if (n_ms >= 2) {
        qsort(ms, n_ms, sizeof *ms, cmp_double);
        *med_ms = ms[(n_ms - 1) / 2];
    }
    if (n_steps >= 2) {
        qsort(steps, n_steps, sizeof *steps, cmp_long);
        *med_step = steps[n_steps / 2];
        *has_med_step = true;
    }
    free(ms);
    free(steps);
}

unsigned hang_check_stragglers(struct job *j, const struct hang_opts *o, int64_t now_ms)
{
    unsigned res = 0;
    double med_ms;
    long med_step = 0;
    bool has_med_step;
    alive_medians(j, &med_ms, &has_med_step, &med_step);
    bool by_time = o->straggler_ratio > 0 && !isnan(med_ms);
    bool by_steps = o->straggler_steps > 0 && has_med_step;
    for (size_t i = 0; i < j->n_ranks; i++) {
        struct rank_info *r = &j->ranks[i];
        bool timed = by_time && isfinite(r->step_ms);
        bool slow = timed && r->step_ms > o->straggler_ratio * med_ms;
        bool behind = by_steps && r->has_step && med_step - r->step > o->straggler_steps;
        if (!rank_alive(r)) {
            slow = behind = false;
        }
        if (r->straggler) {
            /* Released below a lower bar than it was flagged at, so it does not flap. */
            bool still = (timed && r->step_ms > (1 + o->straggler_ratio) / 2 * med_ms) || behind;
            if (rank_alive(r) && still) continue;
            r->straggler = false;
            r->straggler_since_ms = 0;
            res |= HANG_CHANGED;
            continue;
        }
        if (!slow && !behind) {
            r->straggler_since_ms = 0;
            continue;
        }
        if (!r->straggler_since_ms) r->straggler_since_ms = now_ms;
        if (now_ms - r->straggler_since_ms < o->straggler_grace_ms) continue;
        r->straggler = true;
        char note[200];
        job_gpu_straggler_note(j, r->rank, note, sizeof note);
        if (slow)
            job_event_add(j, EV_STRAGGLER, r->rank, r->node, "rank %d on %s is a straggler: "
                          "step time %.1f ms, %.1fx the median %.1f ms%s", r->rank,
                          job_rank_host(j, r->rank), r->step_ms, r->step_ms / med_ms, med_ms, note);
        else
            job_event_add(j, EV_STRAGGLER, r->rank, r->node, "rank %d on %s is a straggler: "
                          "at step %ld, %ld steps behind the median %ld%s", r->rank,
                          job_rank_host(j, r->rank), r->step, med_step - r->step, med_step, note);
        res |= HANG_CHANGED;
    }
    return res;
}

unsigned hang_update_job_state(struct job *j)
{
    return job_stall_update(j) ? HANG_CHANGED : 0;
}

unsigned hang_check(struct job *j, const struct hang_opts *o, int64_t now_ms)
{
    unsigned res = hang_check_stalls(j, o, now_ms);
    res |= hang_check_stragglers(j, o, now_ms);
    res |= hang_update_job_state(j);
    if (res & HANG_CHANGED) j->generation++;
    return res;
}
