/* What a rank says. stdout: exactly one JSON object per line, the metrics stream that ddptop
 * (and anyone with jq) reads; every line carries "v": METRICS_VERSION. stderr: text for people.
 * The format is documented in docs/metrics.md; a field once shipped is never renamed or given
 * another meaning: new fields may be added, and a breaking change bumps METRICS_VERSION. */
#ifndef DDPTOP_METRICS_H
#define DDPTOP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_VERSION 1

/* Sets the rank named in every line and message (before that: rank 0, world 1). */
void metrics_init(int rank, int world_size);

/* resumed_from < 0 prints null (a fresh start). */
void metrics_start(size_t params, long resumed_from, const char *device);
void metrics_step(long step, double loss, double step_ms, double comm_ms, double wait_ms,
                  double tokens_per_s);
void metrics_snapshot(long step, const char *path);
void metrics_done(long step, uint64_t param_checksum);

/* Appends s to out (capacity cap, always NUL-terminated) as a JSON string with its quotes.
 * Returns the length it needed, like snprintf. */
size_t metrics_json_string(char *out, size_t cap, const char *s);

/* People-facing text on stderr, prefixed "ddptop-train rank R: ". */
void rt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "ddptop-train rank R: file:line: message" on stderr and exits with status 1. */
void rt_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* The runtime's check for fatal errors (allowed here, not in launcher/ or tui/: a rank that
 * cannot go on says why and exits; the launcher reports it). */
#define RT_CHECK(cond, ...) do { if (!(cond)) rt_fatal(__FILE__, __LINE__, __VA_ARGS__); } while (0)

#endif
