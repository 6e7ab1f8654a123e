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

/* A string starting after its opening quote; i ends after the closing one. An out message's
 * text is up to 64 KiB with a "\n" every line: a memchr to each quote (rare in text), which is
 * escaped when an odd run of backslashes comes right before it (a backslash always takes the
 * byte after it, so a run pairs off from its start), and one memchr to the first backslash for
 * *escaped. A memchr to every backslash (one per line) was 2% of the controller in a flood. */
static bool scan_string(const char *s, size_t n, size_t *i, const char **str, size_t *len, bool *escaped)
{
    size_t k = *i;
    const char *q, *start = s + *i;
    *escaped = false;
    for (;;) {
        const char *p;
        if (k >= n) return false;
        q = memchr(s + k, '"', n - k);
        if (!q) return false;
        for (p = q; p > start && p[-1] == '\\';) p--;
        if ((q - p) % 2 == 0) break;  /* the run pairs off: the quote closes the string */
        k = (size_t)(q - s) + 1;
    }
    *escaped = memchr(start, '\\', (size_t)(q - start)) != NULL;
    *str = start;
    *len = (size_t)(q - start);
    *i = (size_t)(q - s) + 1;
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

bool json_flat_scan(const char *s, size_t n, struct json_flat *out)
{
    return json_flat_scan_at(s, n, out) != 0;
}

size_t json_flat_scan_at(const char *s, size_t n, struct json_flat *out)
{
    size_t i = skip_ws(s, n, 0);
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
            if (!scan_string(s, n, &i, &f->str, &f->str_len, &f->str_escaped)) return 0;
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

const struct json_flat_field *json_flat_get(const struct json_flat *o, const char *key)
{
    size_t l = strlen(key);
    for (int k = 0; k < o->n; k++)
        if (o->f[k].key_len == l && memcmp(o->f[k].key, key, l) == 0) return &o->f[k];
    return NULL;
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

size_t json_flat_unescape(const char *s, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned cp;
        if (s[i] != '\\') {          /* the run up to the next backslash, in one copy */
            const char *b = memchr(s + i, '\\', len - i);
            size_t run = b ? (size_t)(b - (s + i)) : len - i;
            memcpy(out + o, s + i, run);
            o += run;
            i += run - 1;
            continue;
        }
        if (++i >= len) return (size_t)-1;
        switch (s[i]) {
        case '"': case '\\': case '/': out[o++] = s[i]; continue;
        case 'b': out[o++] = '\b'; continue;
        case 'f': out[o++] = '\f'; continue;
        case 'n': out[o++] = '\n'; continue;
        case 'r': out[o++] = '\r'; continue;
        case 't': out[o++] = '\t'; continue;
        case 'u': break;
        default: return (size_t)-1;
        }
        /* \uXXXX (6 bytes in) never makes more than 3 bytes out; a pair (12) never more than 4 */
        if (hex4(s, len, i + 1, &cp) < 0) return (size_t)-1;
        i += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return (size_t)-1;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (len - i < 7 || s[i + 1] != '\\' || s[i + 2] != 'u' || hex4(s, len, i + 3, &lo) < 0 ||
                lo < 0xDC00 || lo > 0xDFFF)
                return (size_t)-1;
            i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0) return (size_t)-1; /* cJSON's strings end there: let it decide */
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else if (cp < 0x800) {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[o++] = (char)(0xE0 | (cp >> 12));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (cp >> 18));
            out[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[o] = '\0';
    return o;
}
