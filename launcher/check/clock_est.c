/* Clock offset estimation from request/answer round trips (see clock_est.h). The node read its
 * clock somewhere inside the round trip; assuming the midpoint is off by at most half the round
 * trip whatever the path asymmetry, so the shortest round trip gives the tightest bound. */
#include "clock_est.h"

/* The round trip of one sample: the monotonic one when the caller measured it, else the
 * realtime difference; -1 when the sample is unusable. A realtime step here during the sample
 * (NTP slewing is far smaller) shows as the two spans disagreeing by more than the noise, and
 * would move the midpoint by half the step: such a sample is dropped. */
static int64_t sample_rtt(const struct clock_sample *s)
{
    int64_t wall = s->local_recv_ns - s->local_send_ns;
    if (wall < 0) return -1;
    if (s->rtt_ns <= 0) return wall;
    int64_t diff = wall > s->rtt_ns ? wall - s->rtt_ns : s->rtt_ns - wall;
    return diff > s->rtt_ns / 2 + 1000000 ? -1 : s->rtt_ns;
}

int clock_estimate(const struct clock_sample *s, size_t n, struct clock_estimate *out)
{
    size_t best = n, usable = 0;
    int64_t best_rtt = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t rtt = sample_rtt(&s[i]);
        if (rtt < 0) continue;
        usable++;
        if (best == n || rtt < best_rtt) {                       /* ties: the earliest */
            best = i;
            best_rtt = rtt;
        }
    }
    if (best == n) return -1;
    const struct clock_sample *b = &s[best];
    /* remote - (send + recv) / 2, written so that it cannot overflow near INT64 limits. */
    int64_t half = (b->local_recv_ns - b->local_send_ns) / 2;
    int64_t offset_ns = (b->remote_ns - b->local_send_ns) - half;
    out->offset_ms = (double)offset_ns / 1e6;
    /* The midpoint is taken on the realtime clock, so the bound is half the larger span. */
    int64_t wall = b->local_recv_ns - b->local_send_ns;
    out->error_ms = (double)(wall > best_rtt ? wall : best_rtt) / 2e6;
    out->samples = usable;
    return 0;
}
