/* Pure formatting for the dashboard: durations, ages, rates, losses, step counts, rank state
 * glyphs (with ASCII fallbacks), and display-width aware measuring and truncation of UTF-8
 * strings. Every function writes into the caller's buffer and returns it; unknown values
 * (NAN, negative where meaningless) come out as "-". No curses. */
#ifndef DDPTOP_FORMAT_H
#define DDPTOP_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job/job.h"
#include "job/metrics_parse.h"

/* "850ms", "45s", "3m07s", "1h02m", "2d03h"; negative: "-". */
char *format_duration(char *buf, size_t n, int64_t ms);
/* Age of a last event, coarse for a narrow column: "now" (< 1 s), "45s", "3m", "2h", "4d";
 * negative: "-". */
char *format_age(char *buf, size_t n, int64_t ms);
/* Numbers with an SI suffix, one decimal below 100: "950", "1.2k", "34.5k", "345k", "3.4M", "12.0G";
 * NAN or infinite: "-". */
char *format_si(char *buf, size_t n, double v);
/* A loss: 4 significant digits, scientific outside [1e-3, 1e5): "2.345", "0.01234",
 * "1.23e-05"; NAN: "-". */
char *format_loss(char *buf, size_t n, double v);
/* A step count: exact up to 999999, then SI ("1.23M"); negative: "-". */
char *format_step(char *buf, size_t n, long step);
/* A step time in ms: "85ms", "1.25s", "2m05s"; NAN or negative: "-". */
char *format_step_ms(char *buf, size_t n, double ms);
/* A percentage: "97%", "4.5%", "1234%"; negative or NAN: "-". */
char *format_pct(char *buf, size_t n, double pct);

/* The runtime's step line as the log pane shows it: "step 12  loss 4.870  100.0 ms/step
 * 12.3k tok/s" (two spaces between fields; a field the line lacks is left out; a non-finite
 * loss, JSON null, is "loss non-finite"). Returns buf. */
char *format_step_line(char *buf, size_t n, const struct metrics_sample *m);

/* One glyph (one display column) per rank state: · pending, ● running, ◐ stalled, ✓ exited,
 * ✗ failed, ■ stopped, ? lost; ascii: . R S D F X ? (D done, X stopped by us). */
const char *format_rank_glyph(enum rank_state s, bool ascii);

/* Display columns of the UTF-8 string s[0..len) (wcwidth; needs a UTF-8 LC_CTYPE for widths
 * of non-ASCII; invalid bytes and unprintables count 1, as the panes draw them as one
 * replacement cell). */
int format_width(const char *s, size_t len);
/* Bytes of s[0..len) that fit in max_cols columns without splitting a character; *cols gets
 * their width (may be NULL). */
size_t format_fit(const char *s, size_t len, int max_cols, int *cols);
/* Wrapping: the bytes of s[0..len) for the next row of max_cols columns. All of it when it
 * fits; else up to and including the last space that fits, so words stay whole; else (one
 * word longer than the row) as many whole characters as fit. At least one character when
 * len > 0, so a caller's loop always advances. */
size_t format_wrap(const char *s, size_t len, int max_cols);
/* Copies s into buf (NUL-terminated), cut to max_cols display columns; when cut and
 * max_cols >= 1 the last column becomes "…" (ascii: "~"). Returns buf. */
char *format_truncate(char *buf, size_t n, const char *s, int max_cols, bool ascii);
/* Like format_truncate, then padded with spaces to exactly max_cols columns (left aligned;
 * right aligned when right is true). */
char *format_pad(char *buf, size_t n, const char *s, int max_cols, bool right, bool ascii);

#endif
