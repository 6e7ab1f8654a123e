/* Unit tests for launcher/clock_est.c: synthetic round trips with a known node offset and
 * asymmetric path delays. The estimator must pick the shortest round trip and the true
 * offset must always lie within the error it reports. */
#include <stdint.h>
#include <stdlib.h>

#include "check/clock_est.h"
#include "tap.h"

#define MS 1000000LL

/* A realistic epoch (2025) so that the arithmetic runs at full int64 magnitude. */
static const int64_t T0 = 1750000000LL * 1000000000LL;

/* One round trip starting at `at` (our clock), reaching the node after `there` ns, coming
 * back after `back` ns; the node's clock is `offset` ns ahead of ours. */
static struct clock_sample trip(int64_t at, int64_t there, int64_t back, int64_t offset)
{
    struct clock_sample s;
    s.local_send_ns = at;
    s.remote_ns = at + there + offset;
    s.local_recv_ns = at + there + back;
    s.rtt_ns = there + back;
    return s;
}

static void test_picks_smallest_round_trip(void)
{
    const int64_t offset = 2500 * MS;                    /* node 2.5 s ahead */
    struct clock_sample s[] = {
        trip(T0, 5 * MS, 1 * MS, offset),                /* rtt 6 ms, skewed by +2 ms */
        trip(T0 + 10 * MS, 3 * MS, 7 * MS, offset),      /* rtt 10 ms, skewed by -2 ms */
        trip(T0 + 30 * MS, MS / 5, MS / 10, offset),     /* rtt 0.3 ms: the one to use */
        trip(T0 + 40 * MS, 40 * MS, 1 * MS, offset),     /* rtt 41 ms */
    };
    struct clock_estimate e;
    CHECK_INT(clock_estimate(s, 4, &e), 0);
    CHECK_INT(e.samples, 4);
    /* midpoint error of the chosen sample: (there - back) / 2 = +0.05 ms */
    CHECK_NEAR(e.offset_ms, 2500.05, 1e-6);
    CHECK_NEAR(e.error_ms, 0.15, 1e-9);
    CHECK(e.offset_ms - e.error_ms <= 2500.0 && 2500.0 <= e.offset_ms + e.error_ms);
}

static void test_negative_offset_and_symmetric_path(void)
{
    struct clock_sample s[] = {
        trip(T0, 2 * MS, 2 * MS, -750 * MS),
        trip(T0 + MS, 1 * MS, 1 * MS, -750 * MS),
    };
    struct clock_estimate e;
    CHECK_INT(clock_estimate(s, 2, &e), 0);
    CHECK_NEAR(e.offset_ms, -750.0, 1e-9);               /* symmetric: exact */
    CHECK_NEAR(e.error_ms, 1.0, 1e-9);
}

/* Whatever the asymmetry, the true offset is inside offset +- error (the NTP bound). */
static void test_true_offset_always_within_error(void)
{
    srand(12345);
    int outside = 0, wrong_pick = 0;
    for (int trial = 0; trial < 2000; trial++) {
        int64_t offset = ((int64_t)(rand() % 2000001) - 1000000) * 1000;   /* +-1 s, us steps */
        struct clock_sample s[8];
        int64_t min_rtt = INT64_MAX;
        for (int i = 0; i < 8; i++) {
            int64_t there = rand() % (20 * MS), back = rand() % (20 * MS);
            s[i] = trip(T0 + i * 50 * MS, there, back, offset);
            if (there + back < min_rtt) min_rtt = there + back;
        }
        struct clock_estimate e;
        if (clock_estimate(s, 8, &e) != 0) { outside++; continue; }
        double truth = (double)offset / 1e6;
        if (e.offset_ms - e.error_ms > truth + 1e-9 || e.offset_ms + e.error_ms < truth - 1e-9)
            outside++;
        if (e.error_ms * 2e6 > (double)min_rtt + 0.5 || e.error_ms * 2e6 < (double)min_rtt - 0.5)
            wrong_pick++;
    }
    CHECK_INT(outside, 0);
    CHECK_INT(wrong_pick, 0);
}

static void test_no_samples(void)
{
    struct clock_estimate e = { 1, 2, 3 };
    CHECK_INT(clock_estimate(NULL, 0, &e), -1);
    struct clock_sample s = trip(T0, MS, MS, 0);
    CHECK_INT(clock_estimate(&s, 0, &e), -1);
}

static void test_ties_take_the_earliest(void)
{
    struct clock_sample s[] = {
        trip(T0, 1 * MS, 1 * MS, 10 * MS),
        trip(T0 + MS, MS / 2, 3 * MS / 2, 10 * MS),      /* same rtt, different skew */
    };
    struct clock_estimate e;
    CHECK_INT(clock_estimate(s, 2, &e), 0);
    CHECK_NEAR(e.offset_ms, 10.0, 1e-9);
}

/* Without a monotonic round trip (rtt_ns 0) the realtime span is used. */
static void test_realtime_span_when_no_rtt(void)
{
    struct clock_sample s = trip(T0, 3 * MS, 1 * MS, 0);
    s.rtt_ns = 0;
    struct clock_estimate e;
    CHECK_INT(clock_estimate(&s, 1, &e), 0);
    CHECK_NEAR(e.error_ms, 2.0, 1e-9);
    CHECK_NEAR(e.offset_ms, 1.0, 1e-9);
}

/* A step of our realtime clock inside a sample (here +3 s, as NTP or a person might do)
 * would move its midpoint by 1.5 s; such a sample is dropped even when it looks shortest. */
static void test_realtime_step_is_dropped(void)
{
    struct clock_sample s[] = {
        trip(T0, MS / 10, MS / 10, 0),
        trip(T0 + 10 * MS, 2 * MS, 2 * MS, 0),
    };
    s[0].local_recv_ns += 3000 * MS;
    struct clock_estimate e;
    CHECK_INT(clock_estimate(s, 2, &e), 0);
    CHECK_INT(e.samples, 1);
    CHECK_NEAR(e.offset_ms, 0.0, 1e-9);
    CHECK_NEAR(e.error_ms, 2.0, 1e-9);
    /* A backwards step makes the realtime span negative: unusable too. */
    s[1].local_recv_ns = s[1].local_send_ns - MS;
    CHECK_INT(clock_estimate(s, 2, &e), -1);
}

int main(void)
{
    RUN(test_picks_smallest_round_trip);
    RUN(test_negative_offset_and_symmetric_path);
    RUN(test_true_offset_always_within_error);
    RUN(test_no_samples);
    RUN(test_ties_take_the_earliest);
    RUN(test_realtime_span_when_no_rtt);
    RUN(test_realtime_step_is_dropped);
    return tap_done();
}
