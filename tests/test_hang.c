/* Unit tests for launcher/hang.c with synthetic times: a rank stalls once its step has not
 * moved for --hang-timeout (from its start when it never printed one) and resumes when it
 * moves; stragglers by step time (1.5x the median) and by steps behind, flagged after the
 * grace period and once per episode; a node without heartbeats for 10 s is lost with its
 * ranks; the job state follows RUNNING <-> STALLED. Where a step arrives "at" a synthetic
 * time the test sets step_changed_ms as job_metric_add would have. */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "job/hang.h"
#include "job/job.h"
#include "job/job_state.h"
#include "job/rank_report.h"
#include "job/root_cause.h"
#include "job_files.h"
#include "tap.h"
#include "tmptree.h"
#include "util/util.h"

static char tmpdir[64];
static char err[512];
static struct hang_opts opts;
static int64_t t0;

/* 2 nodes ("gpu1", "gpu2") x 2 ranks, all running since t0, nodes heard from at t0. */
static struct job *running_job(const char *id)
{
    const char *names[] = { "gpu1", "gpu2" };
    int per_node[] = { 2, 2 };
    struct job *j = tjob_new(id, tmpdir, 0, names, NULL, per_node, 2, err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) { printf("# %s\n", err); return j; }
    for (int r = 0; r < 4; r++) job_rank_started(j, r, 1000 + r);
    t0 = mono_ms();
    for (int r = 0; r < 4; r++) j->ranks[r].step_changed_ms = t0;
    for (int n = 0; n < 2; n++) {
        j->nodes[n].state = NODE_RUNNING;
        j->nodes[n].last_heartbeat_ms = t0;
    }
    j->state = JOB_RUNNING;
    return j;
}

/* Step `step` reported by `rank` at synthetic time `at`. */
static void step_at(struct job *j, int rank, long step, double step_ms, int64_t at)
{
    job_metric_add(j, rank, step, 2.0, step_ms, NAN);
    j->ranks[rank].step_changed_ms = at;
}

static size_t count_events(const struct job *j, enum job_event_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < j->ev_count; i++) n += job_event_at(j, i)->kind == k;
    return n;
}

static const struct job_event *last_event(const struct job *j)
{
    return j->ev_count ? job_event_at(j, j->ev_count - 1) : NULL;
}

static void test_stall_and_resume(void)
{
    struct job *j = running_job("stall");
    if (!j) { CHECK(0); return; }
    opts.straggler_steps = 0;
    for (int r = 0; r < 3; r++) step_at(j, r, 50, 10, t0 + 250000);
    step_at(j, 3, 5, 10, t0);
    CHECK_INT(hang_check(j, &opts, t0 + 299999) & HANG_STALL, 0);
    CHECK_INT(j->ranks[3].state, RANK_RUNNING);
    unsigned res = hang_check(j, &opts, t0 + 300000);
    CHECK(res & HANG_STALL);
    CHECK(res & HANG_CHANGED);
    CHECK_INT(j->ranks[3].state, RANK_STALLED);
    CHECK_INT(j->ranks[0].state, RANK_RUNNING);
    CHECK_INT(j->state, JOB_STALLED);
    CHECK_INT(count_events(j, EV_STALL), 1);
    CHECK_STR(last_event(j)->text, "rank 3 on gpu2 stalled: step 5 has not advanced for 300 s");
    CHECK_INT(last_event(j)->node, 1);
    /* Once per stall. */
    hang_check(j, &opts, t0 + 310000);
    hang_check(j, &opts, t0 + 549999);
    CHECK_INT(count_events(j, EV_STALL), 1);
    /* The other ranks stall in turn (their step stopped at 250 s). */
    hang_check(j, &opts, t0 + 550000);
    CHECK_INT(count_events(j, EV_STALL), 4);
    /* The step moves: resumed. */
    step_at(j, 3, 6, 10, t0 + 900500);
    hang_check(j, &opts, t0 + 901000);
    CHECK_INT(j->ranks[3].state, RANK_RUNNING);
    CHECK_INT(count_events(j, EV_RESUME), 1);
    CHECK_STR(last_event(j)->text, "rank 3 on gpu2 resumed at step 6");
    CHECK_INT(j->state, JOB_STALLED);              /* the others still are */
    for (int r = 0; r < 3; r++) step_at(j, r, 51, 10, t0 + 901500);
    hang_check(j, &opts, t0 + 902000);
    CHECK_INT(count_events(j, EV_RESUME), 4);
    CHECK_INT(j->state, JOB_RUNNING);
    CHECK_STR(job_event_at(j, j->ev_count - 1)->text, "rank 2 on gpu2 resumed at step 51");
    /* A second stall of the same rank is a new episode: a new event. */
    hang_check(j, &opts, t0 + 900500 + 300000);
    CHECK_INT(j->ranks[3].state, RANK_STALLED);
    CHECK_INT(count_events(j, EV_STALL), 5);
    tjob_free(j);
}

static void test_stall_without_steps(void)
{
    struct job *j = running_job("nostep");
    if (!j) { CHECK(0); return; }
    opts.hang_timeout_s = 5;
    for (int r = 1; r < 4; r++) step_at(j, r, 1, 10, t0 + 4000);
    hang_check(j, &opts, t0 + 5000);      /* rank 0 never printed a step: from its start */
    CHECK_INT(j->ranks[0].state, RANK_STALLED);
    CHECK_INT(j->ranks[1].state, RANK_RUNNING);
    CHECK_STR(last_event(j)->text, "rank 0 on gpu1 stalled: no step reported in the 5 s since "
              "it started");
    /* Ended ranks never stall; --hang-timeout 0 turns the detector off. */
    job_rank_exited(j, 1, 0, 0, false, NULL, 0);
    opts.hang_timeout_s = 0;
    hang_check(j, &opts, t0 + 999000);
    CHECK_INT(j->ranks[2].state, RANK_RUNNING);
    CHECK_INT(j->ranks[1].state, RANK_EXITED);
    opts.hang_timeout_s = 5;
    hang_check(j, &opts, t0 + 999000);
    CHECK_INT(j->ranks[1].state, RANK_EXITED);
    CHECK_INT(j->ranks[2].state, RANK_STALLED);
    /* The job state is only toggled between RUNNING and STALLED. */
    j->state = JOB_FAILED;
    hang_check(j, &opts, t0 + 999000);
    CHECK_INT(j->state, JOB_FAILED);
    tjob_free(j);
}

static void test_straggler_by_time(void)
{
    struct job *j = running_job("strag_t");
    if (!j) { CHECK(0); return; }
    double ms[] = { 10, 10, 11, 30 };
    for (int r = 0; r < 4; r++) step_at(j, r, 10, ms[r], t0);
    int64_t t = t0 + 1000;
    hang_check(j, &opts, t);
    CHECK(!j->ranks[3].straggler);                    /* not before the grace period */
    hang_check(j, &opts, t + 1999);
    CHECK(!j->ranks[3].straggler);
    hang_check(j, &opts, t + 2000);
    CHECK(j->ranks[3].straggler);
    CHECK(!j->ranks[0].straggler && !j->ranks[1].straggler && !j->ranks[2].straggler);
    CHECK_INT(count_events(j, EV_STRAGGLER), 1);
    CHECK_STR(last_event(j)->text, "rank 3 on gpu2 is a straggler: step time 30.0 ms, 3.0x the "
              "median 10.0 ms");
    hang_check(j, &opts, t + 3000);
    CHECK_INT(count_events(j, EV_STRAGGLER), 1);      /* once per episode */
    /* 1.4x: no longer over 1.5x, but not yet back under 1.25x: still flagged. */
    j->ranks[3].step_ms = 14;
    hang_check(j, &opts, t + 4000);
    CHECK(j->ranks[3].straggler);
    j->ranks[3].step_ms = 11;
    hang_check(j, &opts, t + 5000);
    CHECK(!j->ranks[3].straggler);
    /* A short spike shorter than the grace period is not flagged. */
    j->ranks[3].step_ms = 40;
    hang_check(j, &opts, t + 6000);
    j->ranks[3].step_ms = 10;
    hang_check(j, &opts, t + 7000);
    j->ranks[3].step_ms = 40;
    hang_check(j, &opts, t + 8000);
    CHECK(!j->ranks[3].straggler);
    hang_check(j, &opts, t + 10000);                 /* a second episode */
    CHECK(j->ranks[3].straggler);
    CHECK_INT(count_events(j, EV_STRAGGLER), 2);
    /* A rank that ended is no straggler. */
    job_rank_exited(j, 3, 0, 0, false, NULL, 0);
    hang_check(j, &opts, t + 11000);
    CHECK(!j->ranks[3].straggler);
    tjob_free(j);
}

static void test_straggler_by_steps(void)
{
    struct job *j = running_job("strag_s");
    if (!j) { CHECK(0); return; }
    long steps[] = { 100, 100, 101, 90 };
    for (int r = 0; r < 4; r++) step_at(j, r, steps[r], NAN, t0);
    hang_check(j, &opts, t0 + 1);
    hang_check(j, &opts, t0 + 2001);
    CHECK(j->ranks[3].straggler);
    CHECK_INT(count_events(j, EV_STRAGGLER), 1);
    CHECK_STR(last_event(j)->text, "rank 3 on gpu2 is a straggler: at step 90, 10 steps behind "
              "the median 100");
    /* Exactly straggler_steps behind is not "more than". */
    step_at(j, 3, 97, NAN, t0 + 3000);
    hang_check(j, &opts, t0 + 3000);
    CHECK(!j->ranks[3].straggler);
    hang_check(j, &opts, t0 + 9000);
    CHECK(!j->ranks[3].straggler);
    /* --straggler-steps 0 turns this rule off. */
    step_at(j, 3, 10, NAN, t0 + 9000);
    opts.straggler_steps = 0;
    hang_check(j, &opts, t0 + 9000);
    hang_check(j, &opts, t0 + 20000);
    CHECK(!j->ranks[3].straggler);
    tjob_free(j);
}

static void test_straggler_two_ranks(void)
{
    int per_node[] = { 2 };
    struct job *j = tjob_new("two", tmpdir, 0, NULL, NULL, per_node, 1, err, sizeof err);
    if (!j) { CHECK(0); return; }
    job_rank_started(j, 0, 1);
    job_rank_started(j, 1, 2);
    int64_t t = mono_ms();
    /* With two ranks the median is the other's: 16 ms against 10 ms is over 1.5x. */
    step_at(j, 0, 5, 10, t);
    step_at(j, 1, 5, 16, t);
    hang_check(j, &opts, t);
    hang_check(j, &opts, t + 2000);
    CHECK(!j->ranks[0].straggler);
    CHECK(j->ranks[1].straggler);
    CHECK_STR(last_event(j)->text, "rank 1 on localhost is a straggler: step time 16.0 ms, 1.6x "
              "the median 10.0 ms");
    tjob_free(j);
    /* ... and 14 ms against 10 ms is not. */
    j = tjob_new("two2", tmpdir, 0, NULL, NULL, per_node, 1, err, sizeof err);
    job_rank_started(j, 0, 1);
    job_rank_started(j, 1, 2);
    step_at(j, 0, 5, 10, t);
    step_at(j, 1, 5, 14, t);
    hang_check(j, &opts, t);
    hang_check(j, &opts, t + 5000);
    CHECK(!j->ranks[1].straggler);
    CHECK_INT(count_events(j, EV_STRAGGLER), 0);
    tjob_free(j);
}

/* A node whose link is not up (silent, or reconnecting) has ranks that are unknown, not
 * stalled: no stall is flagged for them however long it lasts, and they are judged again once
 * it answers. */
static void test_silent_node_not_stalled(void)
{
    struct job *j = running_job("silent");
    if (!j) { CHECK(0); return; }
    opts.hang_timeout_s = 10;
    opts.straggler_steps = 0;
    step_at(j, 0, 5, 10, t0);
    step_at(j, 1, 5, 10, t0);
    step_at(j, 2, 5, 10, t0);
    step_at(j, 3, 5, 10, t0);
    job_node_link(j, 1, LINK_SILENT);
    hang_check(j, &opts, t0 + 60000);
    CHECK_INT(j->ranks[2].state, RANK_RUNNING);
    CHECK_INT(j->ranks[3].state, RANK_RUNNING);
    CHECK_INT(j->ranks[0].state, RANK_STALLED);  /* node 0 answers and its ranks stood still */
    job_node_link(j, 1, LINK_UP);
    hang_check(j, &opts, t0 + 61000);
    CHECK_INT(j->ranks[2].state, RANK_STALLED);
    tjob_free(j);
}

/* The documented defaults: --hang-timeout 300, --straggler-steps 3, 1.5x, 10 s. */
static void test_defaults(void)
{
    CHECK_INT(opts.hang_timeout_s, 300);
    CHECK_INT(opts.straggler_steps, 3);
    CHECK_NEAR(opts.straggler_ratio, 1.5, 0);
}

/* The rank blamed for a hang: the one furthest behind, then the one still the longest, then
 * the lowest; and the root cause that names it with where every rank is. */
static void test_first_stalled_and_cause(void)
{
    struct job *j = running_job("first");
    if (!j) { CHECK(0); return; }
    opts.straggler_steps = 0;
    opts.hang_timeout_s = 10;
    CHECK_INT(hang_first_stalled(j), -1);
    step_at(j, 0, 8, 10, t0 + 1000);
    step_at(j, 1, 7, 10, t0 + 2000);   /* behind: blamed although it moved later */
    step_at(j, 2, 8, 10, t0 + 500);
    step_at(j, 3, 8, 10, t0 + 500);
    CHECK(hang_check(j, &opts, t0 + 13000) & HANG_STALL);
    CHECK_INT(hang_first_stalled(j), 1);
    step_at(j, 1, 9, 10, t0 + 13000);
    hang_check(j, &opts, t0 + 13000);   /* rank 1 resumed: of ranks 0, 2, 3 at step 8, 2 and 3 stood still longest */
    CHECK_INT(j->ranks[1].state, RANK_RUNNING);
    CHECK_INT(hang_first_stalled(j), 2);

    CHECK(root_cause_hang(j, 2, t0 + 20500, "all 4 ranks in all_reduce"));
    CHECK(j->cause.set && j->cause.hang && j->cause.rank == 2 && j->cause.node == 1);
    CHECK_STR(j->cause.summary, "rank 2 on gpu2 hung: step 8 has not advanced for 20 s; all 4 ranks in all_reduce");
    CHECK_INT(last_event(j)->kind, EV_ROOT_CAUSE);
    CHECK(!root_cause_hang(j, 1, t0 + 30000, NULL));   /* the first cause stays */
    tjob_free(j);

    j = running_job("first2");
    if (!j) { CHECK(0); return; }
    CHECK(hang_check(j, &opts, t0 + 11000) & HANG_STALL);   /* no step at all: the lowest rank */
    CHECK_INT(hang_first_stalled(j), 0);
    CHECK(root_cause_hang(j, 0, t0 + 11000, NULL));
    CHECK_STR(j->cause.summary, "rank 0 on gpu1 hung: no step reported in 11 s");
    tjob_free(j);

    enum hang_action a;
    CHECK_INT(hang_action_parse("restart", &a), 0);
    CHECK_INT(a, HANG_ACTION_RESTART);
    CHECK_STR(hang_action_name(HANG_ACTION_NONE), "none");
    CHECK_INT(hang_action_parse("Stop", &a), -1);
}

#define RUN_OPTS(fn) do { hang_opts_init(&opts); RUN(fn); } while (0)

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-hang-XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN_OPTS(test_defaults);
    RUN_OPTS(test_stall_and_resume);
    RUN_OPTS(test_stall_without_steps);
    RUN_OPTS(test_straggler_by_time);
    RUN_OPTS(test_straggler_by_steps);
    RUN_OPTS(test_straggler_two_ranks);
    RUN_OPTS(test_silent_node_not_stalled);
    RUN_OPTS(test_first_stalled_and_cause);
    tmptree_remove(tmpdir);
    return tap_done();
}
