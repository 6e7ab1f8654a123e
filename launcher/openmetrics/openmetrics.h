/* ddptop's OpenMetrics exposition: the job model (job/job.h) as the families a Prometheus
 * server scrapes from `--metrics` (docs/integrations.md, "Prometheus", lists them). Pure: the
 * model and a clock reading in, text out, so that it is tested without a socket and timed
 * without a run (tests/test_openmetrics.c, tests/bench/openmetrics.sh).
 *
 * The names are a contract like the metrics lines' (docs/metrics.md): a family once shipped is
 * not renamed nor given another unit or meaning; new families may be added within a version.
 * Labels are bounded by the job's shape, never by what ranks print: run, rank, node, gpu, and
 * fixed sets (state, link, class, reason), so 8,192 ranks make one series per rank and family. */
#ifndef DDPTOP_OPENMETRICS_H
#define DDPTOP_OPENMETRICS_H

#include <stdint.h>

#include "job/job.h"
#include "util/util.h"

/* The families' version: what docs/integrations.md lists (a break of the rule above bumps it). */
#define OPENMETRICS_VERSION 1

/* Appends the whole exposition of j, ending in "# EOF", to out. now_ms: mono_ms() of the
 * reading (the ages of the ranks' last output are counted to it). */
void openmetrics_render(const struct job *j, int64_t now_ms, struct strbuf *out);

#endif
