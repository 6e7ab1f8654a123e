/* A rank's metric history (job.h's rank_info.series): the newest points in a ring that grows
 * on demand up to its bound, then overwrites the oldest. Pure memory: no I/O. */
#ifndef DDPTOP_SERIES_H
#define DDPTOP_SERIES_H

#include <stddef.h>
#include <stdint.h>

/* What a loss that is not a number was. The model keeps such a loss as +INFINITY (NAN stays
 * "the line had no loss", and every reader that wants a number already skips what is not
 * finite); this says which it was, for the health rules' words (job/health.h) and the
 * dashboard's loss cell. */
enum loss_bad {
    LOSS_FINITE = 0,          /* a number, or no loss at all */
    LOSS_NAN,                 /* "nan", "NaN" */
    LOSS_INF,                 /* "inf", "Infinity" */
    LOSS_NEG_INF,             /* "-inf" */
    LOSS_NULL,                /* the runtime's JSON null: not finite, which is not known */
};

struct metric_point {
    long step;
    double loss;              /* NAN when the line had no loss; +INFINITY when not finite */
    double step_ms;           /* NAN when unknown */
    unsigned char loss_bad;   /* enum loss_bad */
};

struct metric_series {
    struct metric_point *pts;
    size_t cap, head, count;
    size_t max;               /* cap grows on demand up to this */
    uint64_t stamp;           /* its newest push's, unique among all series (0: none yet): a
                               * reader that kept it knows, without a look at the points, that
                               * nothing was added since */
};

void series_push(struct metric_series *s, const struct metric_point *p);
/* i-th oldest (0) .. newest (count-1); NULL out of range. */
const struct metric_point *metric_series_at(const struct metric_series *s, size_t i);

#endif
