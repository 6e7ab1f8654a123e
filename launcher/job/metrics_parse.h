/* Metrics from rank output: a step, a loss, a step time and tokens/s out of one line. Two
 * sources, tried in order: the runtime's JSON lines ({"event":"step",...}, docs/metrics.md),
 * then --loss-regex (POSIX extended, case-insensitive; default: `loss` followed by `:`, `=`
 * or whitespace and a number), with a step/iter/it number on the same line picked up when
 * there is one. Most lines hold no metric: they are turned away by a cheap scan before any
 * JSON parsing or regex matching. docs/logs.md documents the rules. */
#ifndef DDPTOP_METRICS_PARSE_H
#define DDPTOP_METRICS_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#include "job.h"

/* The default --loss-regex: `loss` as a word's end (so also train_loss, lm loss; never
 * lossy), an optional quote, `:`/`=`/whitespace, an optional `tensor(`, then a number, nan
 * or inf. The number is parsed (strtod) where group 4 starts. */
#define METRICS_DEFAULT_LOSS_REGEX \
    "(^|[^[:alnum:]])loss[\"']?([[:space:]]*[:=][[:space:]]*|[[:space:]]+)(tensor\\()?" \
    "([-+]?([0-9]|\\.[0-9]|nan([^[:alnum:]]|$)|inf(inity)?([^[:alnum:]]|$)))"
#define METRICS_DEFAULT_LOSS_GROUP 4

/* The step on a loss line: step, iter, iteration or it as a word, an optional quote,
 * `:`/`=`/`#`/whitespace, an optional `[` or `(`, then digits (group 3). */
#define METRICS_STEP_REGEX \
    "(^|[^[:alnum:]])(step|iter|iteration|it)[\"']?[[:space:]]*[:=#]?[[:space:]]*[[(]?" \
    "[[:space:]]*([0-9]+)"
#define METRICS_STEP_GROUP 3

/* Only this much of a line is looked at (a split piece is at most 64 KiB). */
#define METRICS_SCAN_MAX (64 * 1024)

struct metrics_sample {
    bool has_step, has_loss, has_step_ms, has_tokens;
    long step;
    double loss;            /* a non-finite loss (JSON null, "nan", "inf") is +INFINITY */
    int loss_bad;           /* which it was (enum loss_bad, series.h); LOSS_FINITE otherwise */
    double step_ms;
    double tokens_per_s;
};

struct metrics_parser;

/* loss_regex NULL: the default. A regex that does not compile: NULL, and err says
 * "--loss-regex 'x(': <regerror text> (...)". */
struct metrics_parser *metrics_parser_new(const char *loss_regex, char *err, size_t errlen);
void metrics_parser_free(struct metrics_parser *p);

/* The runtime's step line only ({"event":"step",...} with a step or a loss; never the
 * regex): fills *out and returns true, else false with NAN numbers. For readers that show
 * that line differently from other output (the dashboard's log pane). */
bool metrics_parse_runtime(const char *text, size_t len, struct metrics_sample *out);

/* Fills *out and returns true when the line carries a metric (at least a step or a loss). */
bool metrics_parse_line(const struct metrics_parser *p, const char *text, size_t len,
                        struct metrics_sample *out);

/* Whether any line of a block of lines may carry a metric: false lets the caller skip every
 * line of it (with the default regex, a block without "loss" in any case and without the
 * runtime's "step" key; a user's --loss-regex is tried on every line). */
bool metrics_block_may_hold(const struct metrics_parser *p, const char *text, size_t len);

/* Parses one line of rank output and, when it carries a metric, records it with
 * job_metric_add_as (a missing step is inferred by the model). Returns true when it did. */
bool metrics_feed_line(const struct metrics_parser *p, struct job *j, int rank,
                       const char *text, size_t len);

#endif
