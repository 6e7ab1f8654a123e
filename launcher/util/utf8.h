/* The one UTF-8 decoder (well-formed sequences as Unicode's table 3-7 defines them: no
 * overlongs, no surrogates, nothing above U+10FFFF) for the terminal sanitizer, the agent's
 * framing of rank output, the events file and the dashboard's widths. Inline: the agent runs it
 * on every non-ASCII byte a rank prints. */
#ifndef DDPTOP_UTIL_UTF8_H
#define DDPTOP_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1-4) of the well-formed sequence at s (n > 0 bytes there), its code point in *cp;
 * an ASCII byte, NUL included, is a sequence of 1. 0 when s starts no well-formed sequence:
 * *bad is then the length of the maximal ill-formed piece to replace by one U+FFFD (Unicode's
 * "maximal subpart" practice: a truncated sequence is one piece), at least 1. */
static inline size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp, size_t *bad)
{
    unsigned char b = s[0];
    size_t need, i;
    unsigned char lo = 0x80, hi = 0xbf;
    uint32_t v;
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b >= 0xc2 && b <= 0xdf) {
        need = 2;
        v = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
        need = 3;
        v = b & 0x0f;
        if (b == 0xe0) lo = 0xa0;        /* overlong */
        else if (b == 0xed) hi = 0x9f;   /* surrogates */
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 4;
        v = b & 0x07;
        if (b == 0xf0) lo = 0x90;        /* overlong */
        else if (b == 0xf4) hi = 0x8f;   /* above U+10FFFF */
    } else {
        *bad = 1;                        /* 0x80..0xc1 and 0xf5..0xff never start a sequence */
        return 0;
    }
    for (i = 1; i < need; i++) {
        unsigned char c = i < n ? s[i] : 0;
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
        if (i >= n || c < l || c > h) {
            *bad = i;
            return 0;
        }
        v = (v << 6) | (c & 0x3f);
    }
    *cp = v;
    return need;
}

#endif
