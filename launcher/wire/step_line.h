/* The runtime's metrics line, {"event":"step","step":N,"loss":X,"step_ms":T,"tokens_per_s":R}
 * (docs/metrics.md), read in one place for both readers: the agent (a rank's last step, in its
 * status messages) and the controller (job/metrics_parse.c: the metric series). A cheap look
 * turns away every other line before any JSON is parsed: a line must start with '{' (after
 * blanks) and hold "step" in quotes. */
#ifndef DDPTOP_STEP_LINE_H
#define DDPTOP_STEP_LINE_H

#include <stdbool.h>
#include <stddef.h>

struct step_line {
    bool has_step, has_loss, has_step_ms, has_tokens;
    long step;
    double loss;            /* JSON null (a diverged run's non-finite loss) is +INFINITY */
    double step_ms;
    double tokens_per_s;
};

/* Whether s[0..n) may be a step line at all: the cheap look, no parsing. */
bool step_line_maybe(const char *s, size_t n);

/* Fills *out and returns true when s[0..n) is the runtime's step line with a step or a loss;
 * false (and *out with NAN numbers) for anything else. */
bool step_line_parse(const char *s, size_t n, struct step_line *out);

#endif
