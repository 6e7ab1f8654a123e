/* Pure formatting helpers for the dashboard's cells (see format.h): short human units that fit
 * narrow columns, rank state glyphs, and UTF-8 width handling so that a host name or a log
 * line with wide characters never pushes a column out of place. */
#include "format.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include "util/utf8.h"

static char *dash(char *buf, size_t n)
{
    if (n) snprintf(buf, n, "-");
    return buf;
}

char *format_duration(char *buf, size_t n, int64_t ms)
{
    if (ms < 0) return dash(buf, n);
    if (ms < 1000) {
        snprintf(buf, n, "%dms", (int)ms);
        return buf;
    }
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(buf, n, "%ds", (int)s);
    else if (s < 3600)
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)(s % 60));
    else if (s < 86400)
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s % 3600 / 60));
    else
        snprintf(buf, n, "%lldd%02dh", (long long)(s / 86400), (int)(s % 86400 / 3600));
    return buf;
}

char *format_age(char *buf, size_t n, int64_t ms)
{
    if (ms < 0) return dash(buf, n);
    int64_t s = ms / 1000;
    if (s < 1)
        snprintf(buf, n, "now");
    else if (s < 60)
        snprintf(buf, n, "%ds", (int)s);
    else if (s < 3600)
        snprintf(buf, n, "%dm", (int)(s / 60));
    else if (s < 86400)
        snprintf(buf, n, "%dh", (int)(s / 3600));
    else
        snprintf(buf, n, "%lldd", (long long)(s / 86400));
    return buf;
}

char *format_si(char *buf, size_t n, double v)
{
    static const char suffix[] = { 0, 'k', 'M', 'G', 'T', 'P', 'E' };
    if (!isfinite(v)) return dash(buf, n);
    const char *sign = v < 0 ? "-" : "";
    double a = fabs(v);
    size_t i = 0;
    /* round first so 999.96 becomes "1.0k", not "1000" */
    while (i + 1 < sizeof suffix && a >= 999.5) {
        a /= 1000.0;
        i++;
    }
    if (i == 0) {
        if (a == floor(a) || a >= 100)
            snprintf(buf, n, "%s%.0f", sign, a);
        else
            snprintf(buf, n, "%s%.3g", sign, a);
    } else if (a < 99.95) {
        snprintf(buf, n, "%s%.1f%c", sign, a, suffix[i]);
    } else {
        snprintf(buf, n, "%s%.0f%c", sign, a, suffix[i]);
    }
    return buf;
}

char *format_loss(char *buf, size_t n, double v)
{
    if (!isfinite(v)) return dash(buf, n);
    double a = fabs(v);
    if (a == 0)
        snprintf(buf, n, "0");
    else if (a < 1e-3 || a >= 1e5)
        snprintf(buf, n, "%.2e", v);
    else
        snprintf(buf, n, "%.4g", v);
    return buf;
}

/* Appends one field to buf[0..n) (*o bytes used), two spaces after the one before. */
static void __attribute__((format(printf, 4, 5)))
add_field(char *buf, size_t n, size_t *o, const char *fmt, ...)
{
    if (*o + 1 >= n) return;
    if (*o) {
        int k = snprintf(buf + *o, n - *o, "  ");
        *o += (size_t)k < n - *o ? (size_t)k : n - *o - 1;
    }
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *o, n - *o, fmt, ap);
    va_end(ap);
    if (k > 0) *o += (size_t)k < n - *o ? (size_t)k : n - *o - 1;
}

char *format_step_line(char *buf, size_t n, const struct metrics_sample *m)
{
    if (n == 0) return buf;
    buf[0] = '\0';
    size_t o = 0;
    char v[32];
    if (m->has_step) add_field(buf, n, &o, "step %ld", m->step);
    if (m->has_loss && isfinite(m->loss))
        add_field(buf, n, &o, "loss %s", format_loss(v, sizeof v, m->loss));
    else if (m->has_loss)
        add_field(buf, n, &o, "loss non-finite");
    if (m->has_step_ms && isfinite(m->step_ms) && m->step_ms >= 0)
        add_field(buf, n, &o, "%.1f ms/step", m->step_ms);
    if (m->has_tokens && isfinite(m->tokens_per_s) && m->tokens_per_s >= 0)
        add_field(buf, n, &o, "%s tok/s", format_si(v, sizeof v, m->tokens_per_s));
    return buf;
}

char *format_step(char *buf, size_t n, long step)
{
    if (step < 0) return dash(buf, n);
    if (step <= 999999) {
        snprintf(buf, n, "%ld", step);
        return buf;
    }
    double a = (double)step;
    const char *suffix = "M";
    a /= 1e6;
    if (a >= 999.5) {
        a /= 1e3;
        suffix = "G";
    }
    snprintf(buf, n, a < 9.995 ? "%.2f%s" : a < 99.95 ? "%.1f%s" : "%.0f%s", a, suffix);
    return buf;
}

char *format_step_ms(char *buf, size_t n, double ms)
{
    if (!isfinite(ms) || ms < 0) return dash(buf, n);
    if (ms < 9.95)
        snprintf(buf, n, "%.1fms", ms);
    else if (ms < 999.5)
        snprintf(buf, n, "%.0fms", ms);
    else if (ms < 59995)
        snprintf(buf, n, "%.2fs", ms / 1000.0);
    else
        format_duration(buf, n, (int64_t)ms);
    return buf;
}

char *format_pct(char *buf, size_t n, double pct)
{
    if (!isfinite(pct) || pct < 0) return dash(buf, n);
    if (pct < 9.95)
        snprintf(buf, n, "%.1f%%", pct);
    else
        snprintf(buf, n, "%.0f%%", pct);
    return buf;
}

const char *format_rank_glyph(enum rank_state s, bool ascii)
{
    switch (s) {
    case RANK_PENDING: return ascii ? "." : "\u00b7";
    case RANK_RUNNING: return ascii ? "R" : "\u25cf";
    case RANK_STALLED: return ascii ? "S" : "\u25d0";
    case RANK_EXITED:  return ascii ? "D" : "\u2713";
    case RANK_FAILED:  return ascii ? "F" : "\u2717";
    case RANK_STOPPED: return ascii ? "X" : "\u25a0";
    case RANK_LOST:    return "?";
    }
    return "?";
}

/* Decodes one UTF-8 character at s (len > 0, util/utf8.h). Returns its byte length (1 for an
 * invalid byte, with *cp = -1) so that broken input still advances one byte at a time. */
static size_t utf8_next(const unsigned char *s, size_t len, long *cp)
{
    uint32_t v;
    size_t bad, n = utf8_decode(s, len, &v, &bad);
    *cp = n ? (long)v : -1;
    return n ? n : 1;
}

static int cp_width(long cp)
{
    if (cp < 0) return 1;
    if (cp < 0x80) return 1;   /* controls are replaced by one visible cell when drawn */
    int w = wcwidth((wchar_t)cp);
    return w < 0 ? 1 : w;      /* unknown in this locale: one replacement cell */
}

size_t format_fit(const char *s, size_t len, int max_cols, int *cols)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    int used = 0;
    while (i < len) {
        long cp;
        size_t k = utf8_next(u + i, len - i, &cp);
        int w = cp_width(cp);
        if (used + w > max_cols) break;
        used += w;
        i += k;
    }
    if (cols) *cols = used;
    return i;
}

size_t format_wrap(const char *s, size_t len, int max_cols)
{
    size_t fit = format_fit(s, len, max_cols, NULL);
    if (fit >= len) return len;
    if (fit == 0) {   /* a character wider than the row: it goes alone */
        long cp;
        return utf8_next((const unsigned char *)s, len, &cp);
    }
    /* the space right after the row's last character ends a word too */
    if (s[fit] == ' ') return fit + 1;
    size_t k = fit;
    while (k > 0 && s[k - 1] != ' ') k--;
    return k > 0 ? k : fit;
}

int format_width(const char *s, size_t len)
{
    int cols;
    format_fit(s, len, 1 << 30, &cols);
    return cols;
}

char *format_truncate(char *buf, size_t n, const char *s, int max_cols, bool ascii)
{
    if (n == 0) return buf;
    buf[0] = '\0';
    if (max_cols <= 0) return buf;
    size_t len = strlen(s);
    size_t fit = format_fit(s, len, max_cols, NULL);
    const char *ell = "";
    if (fit < len) {   /* cut: the ellipsis takes the last column */
        ell = ascii ? "~" : "\u2026";
        fit = format_fit(s, len, max_cols - 1, NULL);
    }
    size_t el = strlen(ell);
    if (el + 1 > n) el = 0;
    if (fit + el + 1 > n) {   /* the buffer is the limit: cut on a character boundary */
        fit = n - 1 - el;
        while (fit > 0 && ((unsigned char)s[fit] & 0xc0) == 0x80) fit--;
    }
    memcpy(buf, s, fit);
    memcpy(buf + fit, ell, el);
    buf[fit + el] = '\0';
    return buf;
}

char *format_pad(char *buf, size_t n, const char *s, int max_cols, bool right, bool ascii)
{
    if (n == 0) return buf;
    format_truncate(buf, n, s, max_cols, ascii);
    size_t len = strlen(buf);
    int w = format_width(buf, len);
    int pad = max_cols - w;
    if (pad <= 0 || len + (size_t)pad + 1 > n) return buf;
    if (right) {
        memmove(buf + pad, buf, len + 1);
        memset(buf, ' ', (size_t)pad);
    } else {
        memset(buf + len, ' ', (size_t)pad);
        buf[len + (size_t)pad] = '\0';
    }
    return buf;
}
