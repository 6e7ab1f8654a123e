/* The training health rules (health.h): NaN or inf losses and loss spikes, per rank, judged as
 * each metric point is recorded. An episode is a rank's loss staying bad (NaN, or above the
 * spike rule): one event at its start, never one a line, so a rank that prints `loss nan` at
 * every step for an hour is one event. An incident groups the episodes of the ranks that
 * start within HEALTH_FOLLOW_STEPS of each other: in data-parallel training a NaN on one rank
 * reaches every rank through the all-reduced gradients a step later, and 1,024 events for
 * that would bury the first one, which is the one to look at. */
#include "health.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_state.h"
#include "root_cause.h"
#include "util/util.h"

static const char *const action_names[] = {
    [HEALTH_NONE] = "none", [HEALTH_STOP] = "stop", [HEALTH_RESTART] = "restart",
};

int health_action_parse(const char *s, enum health_action *out)
{
    for (size_t i = 0; s && i < sizeof action_names / sizeof *action_names; i++)
        if (strcmp(s, action_names[i]) == 0) {
            *out = (enum health_action)i;
            return 0;
        }
    return -1;
}

const char *health_action_name(enum health_action a)
{
    return (unsigned)a < sizeof action_names / sizeof *action_names ? action_names[a] : "?";
}

int health_spike_parse(const char *s, double *factor, int *window, char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    double f = s && *s ? strtod(s, &end) : NAN;
    long n = HEALTH_SPIKE_WINDOW;
    bool ok = end && end != s && errno == 0 && isfinite(f) && f > 1 && f <= 1e6;
    if (ok && *end == ':') {
        char *e2;
        errno = 0;
        n = strtol(end + 1, &e2, 10);
        ok = e2 != end + 1 && *e2 == '\0' && errno == 0 && n >= 3 && n <= HEALTH_SPIKE_WINDOW_MAX;
    } else if (ok && *end) {
        ok = false;
    }
    if (!ok) {
        snprintf(err, errlen, "--loss-spike wants X[:N], a factor above 1 and optionally the window of "
                 "losses its median is taken over (3 to %d, default %d), such as 3 or 3:50; not '%s'",
                 HEALTH_SPIKE_WINDOW_MAX, HEALTH_SPIKE_WINDOW, s ? s : "");
        return -1;
    }
    *factor = f;
    *window = (int)n;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bool health_window_median(const struct metric_series *s, int n, double *out)
{
    if (n <= 0 || s->count < 2) return false;
    double small[64], *v = n <= 64 ? small : xmalloc((size_t)n * sizeof *v);
    int got = 0;
    /* newest first, the newest itself left out: it is the one being judged. Points without a
     * finite loss (a step time alone, a NaN) are not losses to compare with. */
    for (size_t i = s->count - 1; i-- > 0 && got < n;) {
        const struct metric_point *p = metric_series_at(s, i);
        if (isfinite(p->loss)) v[got++] = p->loss;
    }
    bool ok = got == n;
    if (ok) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        *out = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
    if (v != small) free(v);
    return ok;
}

/* An incident opened: when its rule asks for more than the event and nothing failed before it,
 * it is the attempt's root cause and the ask waits for the progress step (health_take). */
static void incident_asks(struct job *j, enum health_kind kind, const struct rank_info *r, long step,
                          int action)
{
    if (action == HEALTH_NONE || !job_is_running(j) || j->cause.set) return;
    if (root_cause_health(j, (int)kind, r->rank, step)) j->health.asks = action;
}

/* Whether step belongs to the open incident whose first step is at (-1: none). */
static bool in_incident(long at, long step)
{
    return at >= 0 && step >= at - HEALTH_FOLLOW_STEPS && step <= at + HEALTH_FOLLOW_STEPS;
}

static bool on_bad(struct job *j, struct rank_info *r, const struct metric_point *p)
{
    struct job_health *h = &j->health;
    if (r->in_nan) return false;        /* still bad: the same episode */
    r->in_nan = true;
    r->spiking = false;
    r->nan_step = p->step;
    r->nan_bad = p->loss_bad;
    if (h->nan_rank >= 0 && in_incident(h->nan_step, p->step)) return false; /* a follower */
    h->nan_rank = r->rank;
    h->nan_step = p->step;
    char st[40];
    job_event_add(j, EV_NAN, r->rank, r->node, "loss became %s on rank %d at step %s (%s)",
                  health_loss_word(p->loss_bad), r->rank, health_step_words(p->step, st, sizeof st),
                  job_rank_host(j, r->rank));
    incident_asks(j, HEALTH_NAN, r, p->step, h->on_nan);
    return true;
}

static bool on_loss(struct job *j, struct rank_info *r, const struct metric_point *p)
{
    struct job_health *h = &j->health;
    double med;
    r->in_nan = false;
    if (!(h->spike_factor > 0)) return false;
    if (!health_window_median(&r->series, health_spike_window(j), &med) || !(med > 0)) return false;
    if (!(p->loss > h->spike_factor * med)) {
        r->spiking = false;             /* back under the rule: the next spike is a new one */
        return false;
    }
    if (r->spiking) return false;
    r->spiking = true;
    r->spike_step = p->step;
    if (h->spike_rank >= 0 && in_incident(h->spike_step, p->step)) return false;
    h->spike_rank = r->rank;
    h->spike_step = p->step;
    char st[40];
    job_event_add(j, EV_SPIKE, r->rank, r->node, "loss spiked to %.4g on rank %d at step %s (%s): "
                  "%.1fx the median %.4g of its last %d (--loss-spike %g)", p->loss, r->rank,
                  health_step_words(p->step, st, sizeof st), job_rank_host(j, r->rank), p->loss / med, med,
                  health_spike_window(j), h->spike_factor);
    incident_asks(j, HEALTH_SPIKE, r, p->step, h->on_spike);
    return true;
}

bool health_point(struct job *j, int rank)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return false;
    struct rank_info *r = &j->ranks[rank];
    const struct metric_point *p = r->series.count ? metric_series_at(&r->series, r->series.count - 1) : NULL;
    if (!p || isnan(p->loss)) return false;        /* a line with no loss */
    bool changed = p->loss_bad != LOSS_FINITE ? on_bad(j, r, p) : on_loss(j, r, p);
    if (changed) j->generation++;
    return changed;
}

enum health_action health_take(struct job *j)
{
    enum health_action a = (enum health_action)j->health.asks;
    j->health.asks = HEALTH_NONE;
    return a;
}
