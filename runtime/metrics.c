/* The metrics stream (JSON lines on stdout) and the rank's messages on stderr. JSON is written
 * with printf: every value is a number we format, null, or a string through
 * metrics_json_string, which escapes everything JSON requires. */
#include "metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int g_rank, g_world = 1;

void metrics_init(int rank, int world_size)
{
    g_rank = rank;
    g_world = world_size;
}

size_t metrics_json_string(char *out, size_t cap, const char *s)
{
    size_t n = 0;
#define PUT(ch) do { if (n + 1 < cap) out[n] = (ch); n++; } while (0)
    PUT('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char ch = *p;
        if (ch == '"' || ch == '\\') {
            PUT('\\');
            PUT((char)ch);
        } else if (ch < 0x20 || ch == 0x7f) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            for (char *e = esc; *e; e++) PUT(*e);
        } else {
            PUT((char)ch);   /* bytes >= 0x80 pass through (paths are usually UTF-8) */
        }
    }
    PUT('"');
#undef PUT
    if (cap) out[n < cap ? n : cap - 1] = '\0';
    return n;
}

/* A JSON number, or null for NaN/inf (JSON has neither). */
static const char *num(char *buf, size_t cap, double x, const char *fmt)
{
    if (!isfinite(x)) return "null";
    snprintf(buf, cap, fmt, x);
    return buf;
}

void metrics_start(size_t params, long resumed_from, const char *device)
{
    char from[32], dev[64];
    if (resumed_from < 0) snprintf(from, sizeof from, "null");
    else snprintf(from, sizeof from, "%ld", resumed_from);
    metrics_json_string(dev, sizeof dev, device);
    printf("{\"event\":\"start\",\"v\":%d,\"rank\":%d,\"world_size\":%d,\"params\":%zu,"
           "\"resumed_from\":%s,\"device\":%s}\n", METRICS_VERSION, g_rank, g_world, params,
           from, dev);
    fflush(stdout);
}

void metrics_step(long step, double loss, double step_ms, double comm_ms, double wait_ms,
                  double tokens_per_s)
{
    char a[32], b[32], c[32], d[32], e[32];
    printf("{\"event\":\"step\",\"v\":%d,\"rank\":%d,\"step\":%ld,\"loss\":%s,\"step_ms\":%s,"
           "\"comm_ms\":%s,\"wait_ms\":%s,\"tokens_per_s\":%s}\n", METRICS_VERSION, g_rank, step,
           num(a, sizeof a, loss, "%.6f"), num(b, sizeof b, step_ms, "%.3f"),
           num(c, sizeof c, comm_ms, "%.3f"), num(d, sizeof d, wait_ms, "%.3f"),
           num(e, sizeof e, tokens_per_s, "%.1f"));
    fflush(stdout);
}

void metrics_snapshot(long step, const char *path)
{
    char p[8192];
    metrics_json_string(p, sizeof p, path);
    printf("{\"event\":\"snapshot\",\"v\":%d,\"rank\":%d,\"step\":%ld,\"path\":%s}\n",
           METRICS_VERSION, g_rank, step, p);
    fflush(stdout);
}

void metrics_done(long step, uint64_t param_checksum)
{
    printf("{\"event\":\"done\",\"v\":%d,\"rank\":%d,\"step\":%ld,"
           "\"param_checksum\":\"%016llx\"}\n", METRICS_VERSION, g_rank, step,
           (unsigned long long)param_checksum);
    fflush(stdout);
}

void rt_log(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ddptop-train rank %d: %s\n", g_rank, msg);
}

void rt_fatal(const char *file, int line, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "ddptop-train rank %d: %s:%d: %s\n", g_rank, file, line, msg);
    exit(1);
}
