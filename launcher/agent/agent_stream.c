/* Line assembly and text encodings for rank output: see agent_stream.h. */
#include "agent_stream.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "util/ascii_run.h"
#include "util/utf8.h"

void stream_init(struct stream_buf *s)
{
    strbuf_init(&s->buf);
    s->scanned = 0;
    s->first_ms = 0;
}

void stream_done(struct stream_buf *s)
{
    strbuf_done(&s->buf);
    s->scanned = 0;
    s->first_ms = 0;
}

/* Where to cut a piece of an over-long line: at STREAM_PIECE_MAX, moved back (at most 3 bytes)
 * so that a multi-byte character is not cut in two and each piece stays valid text. */
static size_t piece_cut(const char *p)
{
    size_t cut = STREAM_PIECE_MAX;
    while (cut > STREAM_PIECE_MAX - 3 && ((unsigned char)p[cut] & 0xC0) == 0x80) cut--;
    return ((unsigned char)p[cut] & 0xC0) == 0x80 ? STREAM_PIECE_MAX : cut;
}

void stream_feed(struct stream_buf *s, const char *data, size_t n, int64_t now_ms,
                 stream_piece_fn fn, void *ctx)
{
    if (!n) return;
    /* Nothing held: the lines go out straight from the caller's buffer and only the unfinished
     * tail is kept (a copy of every byte less, most reads of a streaming rank). */
    bool direct = s->buf.len == 0;
    if (direct) s->first_ms = now_ms;
    else strbuf_add(&s->buf, data, n);
    const char *all = direct ? data : s->buf.buf;
    size_t total = direct ? n : s->buf.len;
    size_t start = 0;
    for (;;) {
        const char *base = all + start;
        size_t avail = total - start;
        if (!avail) break;
        /* Every whole line within the first STREAM_PIECE_MAX + 1 bytes goes as one block: a
         * line of exactly STREAM_PIECE_MAX bytes is still whole when its newline is the next
         * byte. */
        size_t lim = avail < STREAM_PIECE_MAX + 1 ? avail : STREAM_PIECE_MAX + 1;
        size_t from = s->scanned < lim ? s->scanned : lim;
        const char *nl = memrchr(base + from, '\n', lim - from);
        if (nl) {
            fn(ctx, base, (size_t)(nl - base) + 1, 0);
            start += (size_t)(nl - base) + 1;
            s->scanned = 0;
            continue;
        }
        if (avail > STREAM_PIECE_MAX) {
            size_t cut = piece_cut(base);
            fn(ctx, base, cut, STREAM_SPLIT);
            start += cut;
            s->scanned = 0;
            continue;
        }
        s->scanned = avail;
        break;
    }
    if (direct) {
        strbuf_add(&s->buf, data + start, n - start);
        if (start) s->first_ms = s->buf.len ? now_ms : 0;
    } else if (start) {
        strbuf_consume(&s->buf, start);
        /* What is left came with this read (or the line it ends was older): age it from now. */
        s->first_ms = s->buf.len ? now_ms : 0;
    }
}

void stream_flush(struct stream_buf *s, stream_piece_fn fn, void *ctx)
{
    if (!s->buf.len) return;
    fn(ctx, s->buf.buf, s->buf.len, STREAM_PARTIAL);
    strbuf_reset(&s->buf);
    s->scanned = 0;
    s->first_ms = 0;
}

void stream_rewait(struct stream_buf *s, int64_t now_ms)
{
    if (s->buf.len) s->first_ms = now_ms;
}

int64_t stream_deadline(const struct stream_buf *s)
{
    return s->buf.len ? s->first_ms + STREAM_PARTIAL_MS : 0;
}

/* ---- text ---- */

/* Rank output is mostly plain ASCII: these ask 8 bytes at a time before looking at each. */
#define ONES 0x0101010101010101u
#define HIGHS 0x8080808080808080u

static int has_zero_byte(uint64_t w)
{
    return ((w - ONES) & ~w & HIGHS) != 0;
}

/* 8 bytes of ASCII without NUL: valid UTF-8 as they are. */
static int ascii8(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return !(w & HIGHS) && !has_zero_byte(w);
}

/* Length of the valid UTF-8 sequence at p (util/utf8.h), or 0 when there is none: NUL is
 * not text here (stream_utf8_valid). */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    uint32_t cp;
    size_t bad;
    return p[0] ? utf8_decode(p, n, &cp, &bad) : 0;
}

int stream_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n && ascii8(p + i)) {
            i += 8;
            continue;
        }
        if (p[i] >= 0x01 && p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

void stream_sanitize(struct strbuf *sb, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, run = 0;
    while (i < n) {
        size_t k = utf8_seq(p + i, n - i);
        if (k) {
            i += k;
            continue;
        }
        strbuf_add(sb, s + run, i - run);
        strbuf_add(sb, "?", 1);
        run = ++i;
    }
    strbuf_add(sb, s + run, n - run);
}

int stream_json_text(struct strbuf *sb, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t start = sb->len, i = 0;
    char *o;
    /* Room for the quotes and the text as it is, so that runs are copied without a call to
     * strbuf_add each (two per line: the run, then its "\n"); each escape makes its own. The
     * invariant: room at o for the input left (n - i), the closing quote and the NUL. */
    strbuf_reserve(sb, n + 2);
    o = sb->buf + sb->len;
    *o++ = '"';
    while (i < n) {
        size_t k = i + ascii_json_run(p + i, n - i);
        unsigned char c;
        memcpy(o, p + i, k - i);
        o += k - i;
        i = k;
        if (i == n) break;
        c = p[i];
        if (c >= 0x80) {                    /* UTF-8 goes as it is, once checked */
            size_t m = utf8_seq(p + i, n - i);
            if (!m) goto bad;
            memcpy(o, p + i, m);
            o += m;
            i += m;
            continue;
        }
        if (c == 0) goto bad;               /* NUL: not text (stream_utf8_valid) */
        if ((size_t)(sb->buf + sb->cap - o) < n - i + 8) {
            sb->len = (size_t)(o - sb->buf);
            strbuf_reserve(sb, n - i + 8);
            o = sb->buf + sb->len;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        default:
            memcpy(o, "u00", 3);
            o[3] = hex[c >> 4];
            o[4] = hex[c & 15];
            o += 5;
        }
        i++;
    }
    *o++ = '"';
    sb->len = (size_t)(o - sb->buf);
    sb->buf[sb->len] = '\0';
    return 1;
bad:
    sb->len = start;
    sb->buf[start] = '\0';
    return 0;
}
