/* A rank's metric history (job.h's rank_info.series): the newest points in a ring that grows
 * on demand up to its bound, then overwrites the oldest. Pure memory: no I/O. */
#ifndef DDPTOP_SERIES_H
#define DDPTOP_SERIES_H

#include <stddef.h>

struct metric_point {
    long step;
    double loss;              /* NAN when the line had no loss */
    double step_ms;           /* NAN when unknown */
};

struct metric_series {
    struct metric_point *pts;
    size_t cap, head, count;
    size_t max;               /* cap grows on demand up to this */
};

void series_push(struct metric_series *s, const struct metric_point *p);
/* i-th oldest (0) .. newest (count-1); NULL out of range. */
const struct metric_point *metric_series_at(const struct metric_series *s, size_t i);

#endif
