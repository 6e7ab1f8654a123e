/* Unit tests for launcher/job/health.c, the training health rules, fed the way an agent's
 * lines reach the model (job_rank_output with the default metrics parser): `nan`, `NaN`,
 * `inf` and `-inf` are losses that became bad, one event a rank's episode and one an incident
 * (the ranks that follow within 2 steps are counted, not said); --on-nan stop or restart makes
 * the incident the root cause and asks the progress step; --loss-spike X[:N] against the
 * median of the rank's last N finite losses, one event an episode; a NaN poisons no median. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/failure_line.h"
#include "job/health.h"
#include "job/job.h"
#include "job/job_state.h"
#include "job/job_stats.h"
#include "job/metrics_parse.h"
#include "job/rank_report.h"
#include "job/root_cause.h"
#include "tap.h"
#include "util/util.h"

static char err[512];
static struct metrics_parser *mp;

/* n ranks on n/2 nodes ("gpu1", "gpu2", ...), running, in memory only. */
static struct job *running_job(int n)
{
    const char *names[] = { "gpu1", "gpu2", "gpu3", "gpu4" };
    int per_node[] = { 2, 2, 2, 2 };
    size_t nodes = (size_t)(n + 1) / 2;
    if (n == 1) per_node[0] = 1;
    struct job *j = job_new("health", NULL, 0, names, NULL, per_node, nodes, err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) { printf("# %s\n", err); return j; }
    for (int r = 0; r < n; r++) job_rank_started(j, r, 1000 + r);
    for (size_t i = 0; i < nodes; i++) job_node_running(j, i);
    job_running(j);
    return j;
}

/* One line of rank's stdout, as its agent sends it. */
static void say(struct job *j, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(struct job *j, int rank, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    line[n++] = '\n';
    job_rank_output(j, rank, -1, 0, LOG_STDOUT, 0, line, (size_t)n, mp, NULL);
}

static size_t count_events(const struct job *j, enum job_event_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < j->ev_count; i++) n += job_event_at(j, i)->kind == k;
    return n;
}

static const struct job_event *last_event(const struct job *j, enum job_event_kind k)
{
    for (size_t i = j->ev_count; i-- > 0;)
        if (job_event_at(j, i)->kind == k) return job_event_at(j, i);
    return NULL;
}

static void test_parse_bad_losses(void)
{
    static const struct { const char *line; int bad; } cases[] = {
        { "step 5 loss nan", LOSS_NAN }, { "step 5 loss: NaN", LOSS_NAN },
        { "step 5 loss=inf", LOSS_INF }, { "step 5 loss -inf", LOSS_NEG_INF },
        { "step 5 loss: Infinity", LOSS_INF }, { "{\"event\":\"step\",\"step\":5,\"loss\":null}", LOSS_NULL },
        { "step 5 loss 2.5", LOSS_FINITE },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct metrics_sample m;
        bool ok = metrics_parse_line(mp, cases[i].line, strlen(cases[i].line), &m);
        CHECK(ok && m.has_loss && m.step == 5);
        if (m.loss_bad != cases[i].bad) printf("#   \"%s\": loss_bad %d, want %d\n", cases[i].line, m.loss_bad, cases[i].bad);
        CHECK_INT(m.loss_bad, cases[i].bad);
        /* the model's contract: not finite is +INFINITY, never NAN (which is "no loss") */
        CHECK(cases[i].bad == LOSS_FINITE ? isfinite(m.loss) : isinf(m.loss) && m.loss > 0);
    }
}

static void test_actions_and_spike_option(void)
{
    enum health_action a;
    CHECK(health_action_parse("none", &a) == 0 && a == HEALTH_NONE);
    CHECK(health_action_parse("stop", &a) == 0 && a == HEALTH_STOP);
    CHECK(health_action_parse("restart", &a) == 0 && a == HEALTH_RESTART);
    CHECK(health_action_parse("stacks", &a) < 0 && health_action_parse("STOP", &a) < 0);
    CHECK_STR(health_action_name(HEALTH_RESTART), "restart");
    CHECK_STR(health_kind_name(HEALTH_NAN), "nan");
    CHECK_STR(health_kind_name(HEALTH_SPIKE), "spike");
    double f;
    int n;
    CHECK(health_spike_parse("3", &f, &n, err, sizeof err) == 0 && f == 3 && n == HEALTH_SPIKE_WINDOW);
    CHECK(health_spike_parse("2.5:50", &f, &n, err, sizeof err) == 0 && f == 2.5 && n == 50);
    const char *bad[] = { "", "1", "0.5", "x", "3:", "3:2", "3:1001", "3:10x", "inf", "nan", "3,5" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        if (health_spike_parse(bad[i], &f, &n, err, sizeof err) == 0) printf("#   '%s' was taken\n", bad[i]);
        CHECK(strstr(err, "--loss-spike wants X[:N]") != NULL);
    }
}

static void test_window_median(void)
{
    struct metric_series s = { .max = 64 };
    double med;
    for (int i = 1; i <= 5; i++) {
        struct metric_point p = { .step = i, .loss = i, .step_ms = NAN };
        series_push(&s, &p);
    }
    /* the newest (5) is the one judged: the window is 1..4 */
    CHECK(health_window_median(&s, 4, &med) && med == 2.5);
    CHECK(health_window_median(&s, 3, &med) && med == 3);
    CHECK(!health_window_median(&s, 5, &med));
    /* a NaN (+INFINITY) or a point without a loss is no loss to compare with */
    struct metric_point bad = { .step = 6, .loss = INFINITY, .step_ms = NAN, .loss_bad = LOSS_NAN };
    struct metric_point none = { .step = 6, .loss = NAN, .step_ms = 10 };
    struct metric_point last = { .step = 7, .loss = 1, .step_ms = NAN };
    series_push(&s, &bad);
    series_push(&s, &none);
    series_push(&s, &last);
    CHECK(health_window_median(&s, 5, &med) && med == 3);
    free(s.pts);
}

/* The case: rank 1 prints `loss nan` at step 50 first, ranks 0 and 3 follow within 2
 * steps, rank 2 much later; --on-nan none: one event, no root cause, nothing asked. */
static void test_nan_event_once(void)
{
    struct job *j = running_job(4);
    for (long s = 48; s < 50; s++)
        for (int r = 0; r < 4; r++) say(j, r, "step %ld loss %.2f", s, 2.0);
    say(j, 1, "step 50 loss nan");
    CHECK_INT(count_events(j, EV_NAN), 1);
    const struct job_event *e = last_event(j, EV_NAN);
    CHECK(e && e->rank == 1);
    CHECK_STR(e ? e->text : NULL, "loss became NaN on rank 1 at step 50 (gpu1)");
    say(j, 1, "step 51 loss nan");      /* the same episode */
    say(j, 0, "step 51 loss NaN");      /* a follower */
    say(j, 3, "step 52 loss inf");
    CHECK_INT(count_events(j, EV_NAN), 1);
    CHECK(!j->cause.set);
    CHECK_INT(health_take(j), HEALTH_NONE);
    /* the cell and the stats: a NaN rank is said, and poisons no mean */
    CHECK(j->ranks[0].has_loss && j->ranks[0].loss_bad == LOSS_NAN && j->ranks[3].loss_bad == LOSS_INF);
    struct job_stats st;
    job_stats_compute(j, &st);
    CHECK(st.n_loss == 1 && st.n_loss_bad == 3 && st.loss_mean == 2.0);
    int first;
    long step;
    CHECK_INT(health_followers(j, HEALTH_NAN, 1, 50, &first, &step), 2);
    CHECK(first == 1 && step == 50);
    /* far later: a new incident, a new event */
    for (long s = 50; s < 400; s++) say(j, 2, "step %ld loss 1.5", s);
    say(j, 2, "step 400 loss nan");
    CHECK_INT(count_events(j, EV_NAN), 2);
    job_free(j);
}

/* --on-nan restart: the incident is the root cause, the ask goes to the progress step once;
 * the summary counts the followers when it settles, and the first rank is the lowest step. */
static void test_nan_root_cause(void)
{
    struct job *j = running_job(4);
    j->health.on_nan = HEALTH_RESTART;
    for (int r = 0; r < 4; r++) say(j, r, "step 1203 loss %.2f", 2.0);
    say(j, 2, "step 1205 loss nan");    /* seen first, but not the first to go bad */
    CHECK(j->cause.set && j->cause.health == HEALTH_NAN && j->cause.pending);
    CHECK_INT(j->cause.failure, FAILURE_LOSS_NAN);
    CHECK(j->cause.fix && strstr(j->cause.fix, "gradient clipping"));
    CHECK_STR(j->cause.summary, "loss became NaN on rank 2 at step 1,205");
    CHECK_STR(j->cause.evidence, "step 1205 loss nan");
    CHECK_INT(j->cause.evidence_rank, 2);
    CHECK_INT(health_take(j), HEALTH_RESTART);
    CHECK_INT(health_take(j), HEALTH_NONE);
    say(j, 3, "step 1204 loss nan");    /* a step earlier: the first rank */
    say(j, 0, "step 1206 loss -inf");
    CHECK_INT(count_events(j, EV_NAN), 1);
    say(j, 1, "step 1209 loss nan");    /* too late to be a follower: an incident of its own */
    CHECK_INT(count_events(j, EV_NAN), 2);
    CHECK(root_cause_settle(j));
    CHECK_STR(j->cause.summary, "loss became NaN on rank 3 at step 1,204 (first rank; 2 followed within 2 steps)");
    CHECK(j->cause.rank == 3 && j->cause.node == 1 && j->cause.health_step == 1204 && j->cause.health_followers == 2);
    const struct job_event *e = last_event(j, EV_ROOT_CAUSE);
    CHECK_STR(e ? e->text : NULL, "root cause: loss became NaN on rank 3 at step 1,204 (first rank; 2 followed within 2 steps)");
    /* a later failure does not replace it; a new attempt forgets it */
    job_rank_exited(j, 1, 1, 0, false, NULL, 0);
    CHECK(j->cause.health == HEALTH_NAN && j->cause.rank == 3);
    j->attempt++;
    job_attempt_begin(j, err, sizeof err);
    CHECK(!j->cause.set && j->health.nan_rank < 0 && j->ranks[3].nan_step < 0 && !j->ranks[3].in_nan);
    job_free(j);
}

/* A failure first keeps the root cause: the rule asks nothing (the failure decides). */
static void test_nan_after_failure(void)
{
    struct job *j = running_job(2);
    j->health.on_nan = HEALTH_STOP;
    say(j, 0, "step 3 loss 1.0");
    job_rank_exited(j, 1, 1, 0, false, NULL, 0);
    say(j, 0, "step 4 loss nan");
    CHECK_INT(count_events(j, EV_NAN), 1);
    CHECK(j->cause.set && !j->cause.health && j->cause.rank == 1);
    CHECK_INT(health_take(j), HEALTH_NONE);
    job_free(j);
}

/* --loss-spike 3:5: rank 0's loss jumps to 10 over a median of 2; one event for the episode,
 * a follower within 2 steps is not said; back under the rule, the next spike is a new one. */
static void test_spike(void)
{
    struct job *j = running_job(2);
    j->health.spike_factor = 3;
    j->health.spike_window = 5;
    j->health.on_spike = HEALTH_NONE;
    say(j, 0, "step 1 loss 50");        /* fewer than 5 before it: no rule yet */
    for (long s = 2; s <= 7; s++) { say(j, 0, "step %ld loss 2.0", s); say(j, 1, "step %ld loss 2.1", s); }
    CHECK_INT(count_events(j, EV_SPIKE), 0);
    say(j, 0, "step 8 loss 10");
    CHECK_INT(count_events(j, EV_SPIKE), 1);
    const struct job_event *e = last_event(j, EV_SPIKE);
    CHECK_STR(e ? e->text : NULL, "loss spiked to 10 on rank 0 at step 8 (gpu1): 5.0x the median 2 of its last 5 (--loss-spike 3)");
    CHECK(j->ranks[0].spiking);
    say(j, 0, "step 9 loss 12");        /* the same episode */
    say(j, 1, "step 9 loss 30");        /* a follower */
    CHECK_INT(count_events(j, EV_SPIKE), 1);
    CHECK(!j->cause.set);
    say(j, 0, "step 10 loss 2.0");
    CHECK(!j->ranks[0].spiking);
    for (long s = 11; s <= 20; s++) say(j, 0, "step %ld loss 2.0", s);
    say(j, 0, "step 21 loss 9");
    CHECK_INT(count_events(j, EV_SPIKE), 2);
    /* a median of 0 or below: no ratio to speak of */
    for (long s = 22; s <= 30; s++) say(j, 1, "step %ld loss -1", s);
    say(j, 1, "step 31 loss 5");
    CHECK_INT(count_events(j, EV_SPIKE), 2);
    job_free(j);
}

/* --on-spike stop: the spike is the root cause, its class loss_spike. */
static void test_spike_root_cause(void)
{
    struct job *j = running_job(2);
    j->health.spike_factor = 2;
    j->health.spike_window = 3;
    j->health.on_spike = HEALTH_STOP;
    for (long s = 1; s <= 4; s++) { say(j, 0, "step %ld loss 1.0", s); say(j, 1, "step %ld loss 1.0", s); }
    say(j, 1, "step 5 loss 4");
    CHECK(j->cause.set && j->cause.health == HEALTH_SPIKE && j->cause.rank == 1);
    CHECK_INT(j->cause.failure, FAILURE_LOSS_SPIKE);
    CHECK_STR(failure_class_name(FAILURE_LOSS_SPIKE), "loss_spike");
    CHECK_STR(failure_class_parse("loss_nan") == FAILURE_LOSS_NAN ? "ok" : "no", "ok");
    CHECK_INT(health_take(j), HEALTH_STOP);
    CHECK(root_cause_settle(j));
    CHECK_STR(j->cause.summary, "loss spiked above 2x the median of its last 3 on rank 1 at step 5 "
                                "(first rank; no other rank followed within 2 steps)");
    job_free(j);
}

/* One rank: no "first rank" to speak of. */
static void test_one_rank(void)
{
    struct job *j = running_job(1);
    j->health.on_nan = HEALTH_STOP;
    say(j, 0, "step 12 loss nan");
    CHECK(root_cause_settle(j));
    CHECK_STR(j->cause.summary, "loss became NaN on rank 0 at step 12");
    job_free(j);
}

int main(void)
{
    mp = metrics_parser_new(NULL, err, sizeof err);
    if (!mp) { printf("# %s\n", err); return 1; }
    RUN(test_parse_bad_losses);
    RUN(test_actions_and_spike_option);
    RUN(test_window_median);
    RUN(test_nan_event_once);
    RUN(test_nan_root_cause);
    RUN(test_nan_after_failure);
    RUN(test_spike);
    RUN(test_spike_root_cause);
    RUN(test_one_rank);
    metrics_parser_free(mp);
    return tap_done();
}
