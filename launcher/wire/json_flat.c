/* Flat JSON objects without a tree (json_flat.h). The controller decodes about 10,000 agent
 * messages a second with 1,024 ranks; through cJSON each one cost a dozen allocations and a
 * strcmp per member looked up. Only what the agents and the runtime write is taken here; the
 * rest goes to cJSON as before. */
#include "json_flat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* Eight bytes at a time (the byte order of x86 and arm64): the first quote or backslash of a
 * word. A line of JSON text escapes every quote and ends in "\n", so a string of a few hundred
 * bytes has a dozen of them: a memchr to each (and a walk back over the backslashes before
 * every quote) cost more in calls than in bytes, a quarter of the controller's CPU in a replay
 * of 16 nodes' JSON lines (docs/performance.md). */
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The index (0-7) of the first quote or backslash in the 8 bytes at p, or 8. The zero-byte
 * test ((x - 1) & ~x & 0x80 per byte) can mark a byte above a true match (the borrow), never
 * one below it, so the lowest mark is exact. */
static unsigned first_special(const char *p)
{
    uint64_t w, q, b, m;
    memcpy(&w, p, 8);
    q = w ^ (ONES * '"');
    b = w ^ (ONES * '\\');
    m = (((q - ONES) & ~q) | ((b - ONES) & ~b)) & HIGHS;
    return m ? (unsigned)__builtin_ctzll(m) >> 3 : 8;
}
#define WORDS 1
#else
#define WORDS 0
#endif

/* The index of the first quote or backslash at or after k, or n. */
static size_t next_special(const char *s, size_t n, size_t k)
{
#if WORDS
    while (n - k >= 8) {
        unsigned z = first_special(s + k);
        if (z < 8) return k + z;
        k += 8;
    }
#endif
    while (k < n && s[k] != '"' && s[k] != '\\') k++;
    return k;
}

static int hex4(const char *s, size_t len, size_t i, unsigned *out)
{
    unsigned v = 0;
    if (len - i < 4) return -1;
    for (size_t k = i; k < i + 4; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* What each one-letter escape stands for (0: not one) */
static const char simple_escape[256] = {
    ['"'] = '"', ['\\'] = '\\', ['/'] = '/', ['b'] = '\b', ['f'] = '\f', ['n'] = '\n', ['r'] = '\r', ['t'] = '\t',
};

/* One escape, s[*i] its backslash, decoded at out + *o; *i ends after it. False: an escape
 * cJSON would refuse (a lone surrogate, a bad \u, \u0000 where cJSON's strings end). A \uXXXX
 * (6 bytes in) never makes more than 3 bytes out, a pair (12) never more than 4. */
static bool unescape_one(const char *s, size_t len, size_t *i, char *out, size_t *o)
{
    size_t k = *i + 1;
    unsigned cp;
    char c = k < len ? simple_escape[(unsigned char)s[k]] : 0;
    if (c) {
        out[(*o)++] = c;
        *i = k + 1;
        return true;
    }
    if (k >= len || s[k] != 'u') return false;
    if (hex4(s, len, k + 1, &cp) < 0) return false;
    k += 4;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return false;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        unsigned lo;
        if (len - k < 7 || s[k + 1] != '\\' || s[k + 2] != 'u' || hex4(s, len, k + 3, &lo) < 0 || lo < 0xDC00 ||
            lo > 0xDFFF)
            return false;
        k += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0) return false;
    char *p = out + *o;
    if (cp < 0x80) {
        *p++ = (char)cp;
    } else if (cp < 0x800) {
        *p++ = (char)(0xC0 | (cp >> 6));
        *p++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *p++ = (char)(0xE0 | (cp >> 12));
        *p++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *p++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *p++ = (char)(0xF0 | (cp >> 18));
        *p++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *p++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *p++ = (char)(0x80 | (cp & 0x3F));
    }
    *o = (size_t)(p - out);
    *i = k + 1;
    return true;
}

/* A string starting after its opening quote; *i ends after the closing one. A backslash always
 * takes the byte after it, so the closing quote is the first quote not so taken. */
static bool scan_string(const char *s, size_t n, size_t *i, const char **str, size_t *len, bool *escaped)
{
    size_t k = *i;
    *escaped = false;
    for (;;) {
        k = next_special(s, n, k);
        if (k >= n) return false;
        if (s[k] == '"') break;
        if (n - k < 2) return false;
        *escaped = true;
        k += 2;
    }
    *str = s + *i;
    *len = k - *i;
    *i = k + 1;
    return true;
}

/* The same, decoding as it goes: a string without escapes stays where it is; one with escapes
 * is decoded at out (room for n - *i bytes: its text, the NUL, and a word's store past the
 * text, all inside the bytes still to read), the words before each escape copied whole. False
 * also for an escape cJSON would refuse. */
static bool scan_string_decode(const char *s, size_t n, size_t *i, char *out, const char **str, size_t *len)
{
    size_t k = next_special(s, n, *i), o;
    if (k >= n) return false;
    if (s[k] == '"') {
        *str = s + *i;
        *len = k - *i;
        *i = k + 1;
        return true;
    }
    o = k - *i;
    memcpy(out, s + *i, o);
    for (;;) {
        char c = k + 1 < n ? simple_escape[(unsigned char)s[k + 1]] : 0;
        if (c) {    /* \" and \n, one every 8 bytes of a JSON line's text: here, not in a call */
            out[o++] = c;
            k += 2;
        } else if (!unescape_one(s, n, &k, out, &o)) {
            return false;
        }
#if WORDS
        while (n - k >= 8) {
            unsigned z = first_special(s + k);
            memcpy(out + o, s + k, 8);
            k += z;
            o += z;
            if (z < 8) break;
        }
#endif
        while (k < n && s[k] != '"' && s[k] != '\\') out[o++] = s[k++];
        if (k >= n) return false;
        if (s[k] == '"') break;
    }
    out[o] = '\0';
    *str = out;
    *len = o;
    *i = k + 1;
    return true;
}

/* JSON's number grammar, read by strtod (which must end exactly where the grammar does: in a
 * locale whose decimal point is not '.', it does not, and cJSON takes over). */
static bool scan_number(const char *s, size_t n, size_t *i, double *out)
{
    size_t k = *i, digits;
    char buf[64], *end;
    bool neg = k < n && s[k] == '-';
    if (neg) k++;
    if (k >= n || s[k] < '0' || s[k] > '9') return false;
    digits = k;
    if (s[k] == '0') k++;
    else while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    /* A whole number of up to 19 digits (ranks, sequence numbers, clocks: most of what is
     * read here) fits a uint64_t, whose conversion rounds as strtod does: no copy, no strtod. */
    if (k - digits <= 19 && (k >= n || (s[k] != '.' && s[k] != 'e' && s[k] != 'E'))) {
        uint64_t v = 0;
        for (size_t d = digits; d < k; d++) v = v * 10 + (uint64_t)(s[d] - '0');
        *out = neg ? -(double)v : (double)v;
        *i = k;
        return true;
    }
    if (k < n && s[k] == '.') {
        size_t point = k;
        if (++k >= n || s[k] < '0' || s[k] > '9') return false;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
        /* A fraction of at most 15 digits in all (a loss, a step time): the digits make an
         * integer below 2^53 and 10^fraction is exact, so their quotient, rounded once, is what
         * strtod reads (Clinger's fast path) */
        if ((point - digits) + (k - point - 1) <= 15 && (k >= n || (s[k] != 'e' && s[k] != 'E'))) {
            static const double p10[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                                          1e13, 1e14, 1e15 };
            uint64_t v = 0;
            for (size_t d = digits; d < k; d++)
                if (d != point) v = v * 10 + (uint64_t)(s[d] - '0');
            double q = (double)v / p10[k - point - 1];
            *out = neg ? -q : q;
            *i = k;
            return true;
        }
    }
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        k++;
        if (k < n && (s[k] == '+' || s[k] == '-')) k++;
        if (k >= n || s[k] < '0' || s[k] > '9') return false;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    }
    if (k - *i >= sizeof buf) return false;
    memcpy(buf, s + *i, k - *i);
    buf[k - *i] = '\0';
    *out = strtod(buf, &end);
    if ((size_t)(end - buf) != k - *i) return false;
    *i = k;
    return true;
}

static bool scan_word(const char *s, size_t n, size_t *i, const char *w)
{
    size_t l = strlen(w);
    if (n - *i < l || memcmp(s + *i, w, l) != 0) return false;
    *i += l;
    return true;
}

/* buf: NULL, or room for n bytes where string values with escapes are decoded (each begins no
 * later in buf than its text in s, so with its word stores it stays inside n). */
static size_t scan_object(const char *s, size_t n, struct json_flat *out, char *buf)
{
    size_t i = skip_ws(s, n, 0), used = 0;
    out->n = 0;
    if (i >= n || s[i++] != '{') return 0;
    i = skip_ws(s, n, i);
    if (i < n && s[i] == '}') return i + 1;
    for (;;) {
        struct json_flat_field *f;
        bool esc;
        if (out->n == JSON_FLAT_MAX || i >= n || s[i++] != '"') return 0;
        f = &out->f[out->n];
        if (!scan_string(s, n, &i, &f->key, &f->key_len, &esc) || esc) return 0;
        i = skip_ws(s, n, i);
        if (i >= n || s[i++] != ':') return 0;
        i = skip_ws(s, n, i);
        if (i >= n) return 0;
        f->str = NULL;
        f->str_len = 0;
        f->str_escaped = false;
        f->num = 0;
        if (s[i] == '"') {
            i++;
            f->type = JF_STRING;
            if (!buf) {
                if (!scan_string(s, n, &i, &f->str, &f->str_len, &f->str_escaped)) return 0;
            } else {
                if (!scan_string_decode(s, n, &i, buf + used, &f->str, &f->str_len)) return 0;
                if (f->str == buf + used) used += f->str_len + 1;
            }
        } else if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
            f->type = JF_NUMBER;
            if (!scan_number(s, n, &i, &f->num)) return 0;
        } else if (scan_word(s, n, &i, "true")) {
            f->type = JF_TRUE;
        } else if (scan_word(s, n, &i, "false")) {
            f->type = JF_FALSE;
        } else if (scan_word(s, n, &i, "null")) {
            f->type = JF_NULL;
        } else {
            return 0; /* nested, or not JSON */
        }
        out->n++;
        i = skip_ws(s, n, i);
        if (i >= n) return 0;
        if (s[i] == '}') return i + 1;
        if (s[i++] != ',') return 0;
        i = skip_ws(s, n, i);
    }
}

bool json_flat_scan(const char *s, size_t n, struct json_flat *out)
{
    return scan_object(s, n, out, NULL) != 0;
}

size_t json_flat_scan_at(const char *s, size_t n, struct json_flat *out)
{
    return scan_object(s, n, out, NULL);
}

bool json_flat_scan_decoded(const char *s, size_t n, struct json_flat *out, char *buf)
{
    return scan_object(s, n, out, buf) != 0;
}

const struct json_flat_field *json_flat_get(const struct json_flat *o, const char *key)
{
    size_t l = strlen(key);
    for (int k = 0; k < o->n; k++)
        if (o->f[k].key_len == l && memcmp(o->f[k].key, key, l) == 0) return &o->f[k];
    return NULL;
}

size_t json_flat_unescape(const char *s, size_t len, char *out)
{
    size_t o = 0, i = 0;
    while (i < len) {
        const char *b = memchr(s + i, '\\', len - i);   /* the run up to it, in one copy */
        size_t run = b ? (size_t)(b - (s + i)) : len - i;
        memcpy(out + o, s + i, run);
        o += run;
        i += run;
        if (i < len && !unescape_one(s, len, &i, out, &o)) return (size_t)-1;
    }
    out[o] = '\0';
    return o;
}
