/* A rank's metric history in memory (series.h). */
#include "series.h"

#include <stdlib.h>

#include "util/util.h"

static void series_realloc(struct metric_series *s, size_t new_cap)
{
    struct metric_point *n = xcalloc(new_cap, sizeof *n);
    for (size_t i = 0; i < s->count; i++) n[i] = s->pts[(s->head + i) % s->cap];
    free(s->pts);
    s->pts = n;
    s->cap = new_cap;
    s->head = 0;
}

/* Stamps count every push of every series (the loop's thread alone pushes): one value never
 * names two series' states, so a series swapped for another (job_take_history) is never taken
 * for one unchanged. */
static uint64_t stamps;

void series_push(struct metric_series *s, const struct metric_point *p)
{
    s->stamp = ++stamps;
    if (s->count == s->cap && s->cap < s->max) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        series_realloc(s, cap > s->max ? s->max : cap);
    }
    if (s->count == s->cap) {               /* full: overwrite the oldest */
        s->pts[s->head] = *p;
        s->head = (s->head + 1) % s->cap;
    } else {
        s->pts[(s->head + s->count) % s->cap] = *p;
        s->count++;
    }
}

const struct metric_point *metric_series_at(const struct metric_series *s, size_t i)
{
    if (!s || i >= s->count) return NULL;
    return &s->pts[(s->head + i) % s->cap];
}
