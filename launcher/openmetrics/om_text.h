/* The OpenMetrics text format's pieces (https://prometheus.io/docs/specs/om/open_metrics_spec/,
 * "Text format"): a family's descriptor lines, label values escaped, numbers as the format
 * spells them, the closing "# EOF". Pure: text into a strbuf, no clock, no model; openmetrics.c
 * puts ddptop's families together with them. */
#ifndef DDPTOP_OM_TEXT_H
#define DDPTOP_OM_TEXT_H

#include <stddef.h>

#include "util/util.h"

/* The media type a scraper is told (Prometheus reads it and parses accordingly). */
#define OM_CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"

/* A family's "# TYPE", "# UNIT" (unit NULL: none) and "# HELP" lines. name is the family's
 * (a counter's without "_total"; with a unit, name ends in "_" unit, as the format requires);
 * type "gauge", "counter", "info", ...; help plain ASCII without backslash, quote or newline. */
void om_family(struct strbuf *sb, const char *name, const char *type, const char *unit, const char *help);

/* s as the inside of a quoted label value: backslash, double quote and newline escaped, every
 * byte that starts no well-formed UTF-8 sequence replaced by U+FFFD (the format is UTF-8; a
 * scraper refuses the whole exposition for one bad byte). */
void om_label_value(struct strbuf *sb, const char *s);

/* A sample's value: a whole number below 2^53 as digits, NaN and the infinities as the format
 * names them ("NaN", "+Inf", "-Inf"), any other number in the fewest digits that read back as
 * the same double. */
void om_number(struct strbuf *sb, double v);
void om_int(struct strbuf *sb, long long v);

/* The last line of every exposition. */
void om_eof(struct strbuf *sb);

#endif
