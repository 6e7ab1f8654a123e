/* Clock offset estimation, NTP-style: each sample is one request/answer round trip to a node's
 * agent. The sample with the smallest round trip bounds the error best, so it is the one used:
 * offset = remote - (send + recv) / 2, error = round trip / 2. */
#ifndef DDPTOP_CLOCK_EST_H
#define DDPTOP_CLOCK_EST_H

#include <stddef.h>
#include <stdint.h>

struct clock_sample {
    int64_t local_send_ns;   /* CLOCK_REALTIME here when the request left */
    int64_t local_recv_ns;   /* CLOCK_REALTIME here when the answer arrived */
    int64_t remote_ns;       /* the node's CLOCK_REALTIME in the answer */
    int64_t rtt_ns;          /* CLOCK_MONOTONIC round trip (immune to a clock step here) */
};

struct clock_estimate {
    double offset_ms;        /* node clock minus ours; positive: the node is ahead */
    double error_ms;         /* half the smallest round trip */
    size_t samples;          /* how many samples were considered */
};

/* Returns 0 and fills *out, or -1 when n == 0. */
int clock_estimate(const struct clock_sample *s, size_t n, struct clock_estimate *out);

#endif
