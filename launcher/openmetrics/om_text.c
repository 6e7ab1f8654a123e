/* The OpenMetrics text format's pieces (om_text.h). Numbers are written by hand where they are
 * whole (most samples: steps, states, bytes, counts), since snprintf is most of the cost of an
 * exposition of 8,192 ranks (docs/performance.md, "OpenMetrics endpoint"). */
#include "om_text.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

void om_family(struct strbuf *sb, const char *name, const char *type, const char *unit, const char *help)
{
    strbuf_adds(sb, "# TYPE ");
    strbuf_adds(sb, name);
    strbuf_add(sb, " ", 1);
    strbuf_adds(sb, type);
    strbuf_add(sb, "\n", 1);
    if (unit) {
        strbuf_adds(sb, "# UNIT ");
        strbuf_adds(sb, name);
        strbuf_add(sb, " ", 1);
        strbuf_adds(sb, unit);
        strbuf_add(sb, "\n", 1);
    }
    strbuf_adds(sb, "# HELP ");
    strbuf_adds(sb, name);
    strbuf_add(sb, " ", 1);
    strbuf_adds(sb, help);
    strbuf_add(sb, "\n", 1);
}

void om_label_value(struct strbuf *sb, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, plain = 0;
    while (i < n) {
        unsigned char b = p[i];
        if (b >= 0x20 && b < 0x80 && b != '\\' && b != '"') {
            i++;
            continue;
        }
        uint32_t cp;
        size_t bad = 0, k = b < 0x80 ? 1 : utf8_decode(p + i, n - i, &cp, &bad);
        if (k > 1) {   /* a well-formed sequence stays as it is */
            i += k;
            continue;
        }
        strbuf_add(sb, p + plain, i - plain);
        if (b == '\\') strbuf_add(sb, "\\\\", 2);
        else if (b == '"') strbuf_add(sb, "\\\"", 2);
        else if (b == '\n') strbuf_add(sb, "\\n", 2);
        else if (b < 0x80) strbuf_add(sb, &b, 1);   /* other controls are allowed as they are */
        else strbuf_add(sb, "\xef\xbf\xbd", 3);
        i += k ? k : bad;
        plain = i;
    }
    strbuf_add(sb, p + plain, n - plain);
}

void om_int(struct strbuf *sb, long long v)
{
    char tmp[24], *e = tmp + sizeof tmp, *q = e;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--q = '-';
    strbuf_add(sb, q, (size_t)(e - q));
}

void om_number(struct strbuf *sb, double v)
{
    char tmp[40];
    if (isnan(v)) {
        strbuf_add(sb, "NaN", 3);
        return;
    }
    if (isinf(v)) {
        strbuf_adds(sb, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        om_int(sb, (long long)v);
        return;
    }
    /* Most other values have a few decimals (a loss as a rank printed it, an age in ms, a
     * utilisation in percent): N / 10^d that reads back as v is written as digits, no printf */
    static const struct { double scale; long long ten; int digits; } fixed[] = {{1e3, 1000, 3}, {1e6, 1000000, 6}};
    for (size_t f = 0; f < sizeof fixed / sizeof *fixed && fabs(v) < 1e9; f++) {
        long long n = llround(v * fixed[f].scale);
        if ((double)n / fixed[f].scale != v) continue;
        unsigned long long u = n < 0 ? (unsigned long long)-n : (unsigned long long)n;
        unsigned long long frac = u % (unsigned long long)fixed[f].ten;
        int d = fixed[f].digits;
        char *q = tmp + sizeof tmp;
        while (frac % 10 == 0 && d > 0) {   /* frac != 0: v is not whole */
            frac /= 10;
            d--;
        }
        for (int k = 0; k < d; k++, frac /= 10) *--q = (char)('0' + frac % 10);
        *--q = '.';
        u /= (unsigned long long)fixed[f].ten;
        do {
            *--q = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (n < 0) *--q = '-';
        strbuf_add(sb, q, (size_t)(tmp + sizeof tmp - q));
        return;
    }
    /* the shortest of 15 or 17 significant digits that reads back exactly */
    int n = snprintf(tmp, sizeof tmp, "%.15g", v);
    if (strtod(tmp, NULL) != v) n = snprintf(tmp, sizeof tmp, "%.17g", v);
    strbuf_add(sb, tmp, (size_t)n);
}

void om_eof(struct strbuf *sb)
{
    strbuf_add(sb, "# EOF\n", 6);
}
