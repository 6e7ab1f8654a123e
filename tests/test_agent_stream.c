/* The agent's rank-output assembly and encodings (launcher/agent_stream.c) and its /proc stat
 * parser: what the controller's log files depend on to get every byte back as the rank wrote it. */
#include "agent/agent_proc.h"
#include "agent/agent_stream.h"
#include "wire/base64.h"
#include "tap.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

struct piece {
    char *data;
    size_t len;
    int flags;
};
static struct piece pieces[64];
static int npieces;

static void collect(void *ctx, const char *data, size_t len, int flags)
{
    (void)ctx;
    if (npieces == 64) return;
    pieces[npieces].data = xmalloc(len + 1);
    memcpy(pieces[npieces].data, data, len);
    pieces[npieces].data[len] = '\0';
    pieces[npieces].len = len;
    pieces[npieces].flags = flags;
    npieces++;
}

static void reset(void)
{
    for (int i = 0; i < npieces; i++) free(pieces[i].data);
    npieces = 0;
}

static void test_lines_in_pieces_of_any_size(void)
{
    struct stream_buf s;
    const char *in = "one\ntwo\n\nthree";
    stream_init(&s);
    for (size_t i = 0; in[i]; i++) stream_feed(&s, in + i, 1, 100, collect, NULL);
    /* byte by byte: each newline completes one line, a block of its own */
    CHECK_INT(npieces, 3);
    CHECK_STR(pieces[0].data, "one\n");
    CHECK_STR(pieces[1].data, "two\n");
    CHECK_STR(pieces[2].data, "\n"); /* an empty line is a line */
    CHECK_INT(pieces[0].flags | pieces[1].flags | pieces[2].flags, 0);
    CHECK_INT(stream_deadline(&s), 100 + STREAM_PARTIAL_MS);
    stream_flush(&s, collect, NULL);
    CHECK_INT(npieces, 4);
    CHECK_STR(pieces[3].data, "three");
    CHECK_INT(pieces[3].flags, STREAM_PARTIAL);
    CHECK_INT(stream_deadline(&s), 0);
    stream_flush(&s, collect, NULL); /* nothing buffered: nothing sent */
    CHECK_INT(npieces, 4);
    stream_done(&s);
    reset();
}

static void test_partial_ages_from_its_first_byte(void)
{
    struct stream_buf s;
    stream_init(&s);
    stream_feed(&s, "10%\r", 4, 1000, collect, NULL);
    stream_feed(&s, "20%\r", 4, 1150, collect, NULL);
    /* A progress bar that never pauses for 200 ms is still shown every 200 ms. */
    CHECK_INT(stream_deadline(&s), 1000 + STREAM_PARTIAL_MS);
    stream_feed(&s, "done\nnext", 9, 1300, collect, NULL);
    CHECK_INT(npieces, 1);
    CHECK_STR(pieces[0].data, "10%\r20%\rdone\n"); /* '\r' kept as written */
    CHECK_INT(stream_deadline(&s), 1300 + STREAM_PARTIAL_MS);
    stream_done(&s);
    reset();
}

static void test_long_lines_split_at_64k(void)
{
    struct stream_buf s;
    size_t n = 3 * STREAM_PIECE_MAX + 100;
    char *line = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) line[i] = (char)('a' + i % 26);
    line[n] = '\n';
    stream_init(&s);
    for (size_t off = 0; off <= n; off += 4000)
        stream_feed(&s, line + off, off + 4000 <= n + 1 ? 4000 : n + 1 - off, 1, collect, NULL);
    CHECK_INT(npieces, 4);
    size_t total = 0;
    for (int i = 0; i < npieces && i < 4; i++) {
        CHECK_INT(pieces[i].flags, i < 3 ? STREAM_SPLIT : 0);
        CHECK(memcmp(pieces[i].data, line + total, pieces[i].len) == 0);
        total += pieces[i].len;
    }
    CHECK_INT(pieces[0].len, STREAM_PIECE_MAX);
    CHECK_INT(total, n + 1); /* the last piece ends the line: its newline comes with it */
    stream_done(&s);
    reset();
    free(line);
}

static void test_exactly_64k_is_one_piece(void)
{
    struct stream_buf s;
    char *line = xmalloc(STREAM_PIECE_MAX + 1);
    memset(line, 'x', STREAM_PIECE_MAX);
    line[STREAM_PIECE_MAX] = '\n';
    stream_init(&s);
    stream_feed(&s, line, STREAM_PIECE_MAX, 1, collect, NULL);
    CHECK_INT(npieces, 0); /* its newline may be the next byte */
    stream_feed(&s, line + STREAM_PIECE_MAX, 1, 1, collect, NULL);
    CHECK_INT(npieces, 1);
    CHECK_INT(pieces[0].len, STREAM_PIECE_MAX + 1);
    CHECK_INT(pieces[0].flags, 0);
    stream_done(&s);
    reset();
    free(line);
}

/* What one read brought goes as one block: one message for many lines, every byte kept. */
static void test_one_read_one_block(void)
{
    struct stream_buf s;
    stream_init(&s);
    stream_feed(&s, "a\nbb\n\nccc\ndd", 12, 5, collect, NULL);
    CHECK_INT(npieces, 1);
    CHECK_STR(pieces[0].data, "a\nbb\n\nccc\n");
    CHECK_INT(pieces[0].flags, 0);
    CHECK_INT(s.buf.len, 2); /* "dd" waits for its newline */
    stream_feed(&s, "d\ne\n", 4, 6, collect, NULL);
    CHECK_INT(npieces, 2);
    CHECK_STR(pieces[1].data, "ddd\ne\n");
    stream_done(&s);
    reset();
}

/* A block holds at most 64 KiB of whole lines (and one newline more): 1,000-byte lines worth
 * 200 KiB in one read come as 4 blocks, none longer, each of whole lines, together the input. */
static void test_blocks_bounded_at_64k(void)
{
    struct stream_buf s;
    size_t n = 200 * 1024 / 1000 * 1000, total = 0;
    char *in = xmalloc(n);
    for (size_t i = 0; i < n; i++) in[i] = i % 1000 == 999 ? '\n' : (char)('a' + i % 26);
    stream_init(&s);
    stream_feed(&s, in, n, 1, collect, NULL);
    CHECK_INT(npieces, 4);
    for (int i = 0; i < npieces; i++) {
        CHECK(pieces[i].len <= STREAM_PIECE_MAX + 1);
        CHECK(pieces[i].len % 1000 == 0);
        CHECK_INT(pieces[i].flags, 0);
        CHECK(memcmp(pieces[i].data, in + total, pieces[i].len) == 0);
        total += pieces[i].len;
    }
    CHECK_INT(total, n);
    CHECK_INT(s.buf.len, 0);
    stream_done(&s);
    reset();
    free(in);
}

static void test_split_keeps_characters_whole(void)
{
    struct stream_buf s;
    size_t n = STREAM_PIECE_MAX + 10;
    char *line = xmalloc(n);
    memset(line, 'x', n);
    memcpy(line + STREAM_PIECE_MAX - 1, "\xe2\x82\xac", 3); /* a euro sign across the cut */
    stream_init(&s);
    stream_feed(&s, line, n, 1, collect, NULL);
    CHECK_INT(npieces, 1);
    CHECK_INT(pieces[0].len, STREAM_PIECE_MAX - 1);
    CHECK(stream_utf8_valid(pieces[0].data, pieces[0].len));
    CHECK_INT(s.buf.len, n - (STREAM_PIECE_MAX - 1));
    CHECK(memcmp(s.buf.buf, "\xe2\x82\xac", 3) == 0);
    stream_done(&s);
    reset();
    free(line);
}

static void test_utf8_validity(void)
{
    CHECK(stream_utf8_valid("", 0));
    CHECK(stream_utf8_valid("plain \t\r\x1b[0m", 12));
    CHECK(stream_utf8_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14));
    CHECK(!stream_utf8_valid("a\0b", 3));             /* NUL cannot be a JSON string byte */
    CHECK(!stream_utf8_valid("\xff", 1));
    CHECK(!stream_utf8_valid("\xc3", 1));             /* cut short */
    CHECK(!stream_utf8_valid("\xc0\xaf", 2));         /* overlong '/' */
    CHECK(!stream_utf8_valid("\xe0\x80\xaf", 3));     /* overlong */
    CHECK(!stream_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    CHECK(!stream_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
    CHECK(stream_utf8_valid("\xf4\x8f\xbf\xbf", 4));  /* U+10FFFF */
}

static void test_base64_vectors(void)
{
    static const char *const in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
    static const char *const out[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
    for (int i = 0; i < 7; i++) {
        struct strbuf sb;
        strbuf_init(&sb);
        base64_encode(&sb, in[i], strlen(in[i]));
        CHECK_STR(sb.buf ? sb.buf : "", out[i]);
        strbuf_done(&sb);
    }
    struct strbuf sb;
    strbuf_init(&sb);
    base64_encode(&sb, "x\0\xff", 3);
    CHECK_STR(sb.buf, "eAD/");
    strbuf_done(&sb);
}

/* ---- the framing as it was before stream_json_text (a check, then the escaping; kept here as
 * the reference the one-pass version must match byte for byte) ---- */
#define R_ONES 0x0101010101010101u
#define R_HIGHS 0x8080808080808080u
static int ref_has_zero_byte(uint64_t w) { return ((w - R_ONES) & ~w & R_HIGHS) != 0; }
static int ref_ascii8(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return !(w & R_HIGHS) && !ref_has_zero_byte(w);
}
static int ref_json_plain8(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    if (((w & ~R_HIGHS) - R_ONES * 0x20) & ~w & R_HIGHS) return 0;
    return !ref_has_zero_byte(w ^ (R_ONES * '"')) && !ref_has_zero_byte(w ^ (R_ONES * '\\'));
}
static size_t ref_utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c == 0) return 0;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}
static int ref_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n && ref_ascii8(p + i)) { i += 8; continue; }
        if (p[i] >= 0x01 && p[i] < 0x80) { i++; continue; }
        size_t k = ref_utf8_seq(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}
static void ref_json_string(struct strbuf *sb, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0;
    strbuf_add(sb, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        while (i + 8 <= n && ref_json_plain8((const unsigned char *)s + i)) i += 8;
        if (i == n) break;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        strbuf_add(sb, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': strbuf_add(sb, "\\\"", 2); break;
        case '\\': strbuf_add(sb, "\\\\", 2); break;
        case '\n': strbuf_add(sb, "\\n", 2); break;
        case '\r': strbuf_add(sb, "\\r", 2); break;
        case '\t': strbuf_add(sb, "\\t", 2); break;
        case '\b': strbuf_add(sb, "\\b", 2); break;
        case '\f': strbuf_add(sb, "\\f", 2); break;
        default: {
            char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            strbuf_add(sb, u, sizeof u);
        }
        }
    }
    strbuf_add(sb, s + run, n - run);
    strbuf_add(sb, "\"", 1);
}

/* stream_json_text against the check and the escaping it replaced, on random text: lines of
 * printable ASCII with now and then a control, a quote, a backslash, a NUL, UTF-8 good and bad
 * (cut short, overlong, surrogates, past U+10FFFF, stray continuation bytes) at any offset
 * and length, appended after something already in the buffer. Same verdict, same bytes, and
 * on a no the buffer as it was. */
static void test_json_text_as_before(void)
{
    static const char *const odd[] = { "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x01", "\x1f", "\x7f",
                                       "\0", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc3",
                                       "\xe2\x82", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                       "\x80", "\xbf", "\xf5", "\xff", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf" };
    unsigned seed = 12345;
    size_t mismatches = 0, valid = 0, invalid = 0;
    char in[600];
    for (int round = 0; round < 60000; round++) {
        size_t n = 0, want;
        seed = seed * 1103515245u + 12345u;
        want = (seed >> 8) % (round % 10 == 0 ? 560 : 120);
        while (n < want) {
            seed = seed * 1103515245u + 12345u;
            unsigned r = (seed >> 8) % 100;
            if (r < (round % 3 ? 97u : 80u)) {
                in[n++] = (char)(0x20 + (seed >> 16) % 95);
            } else if (round % 7 == 0) {
                in[n++] = (char)((seed >> 16) & 0xff);          /* any byte at all */
            } else {
                const char *o = odd[(seed >> 16) % (sizeof odd / sizeof *odd)];
                size_t k = o[0] ? strlen(o) : 1;
                if (n + k > sizeof in) break;
                memcpy(in + n, o, k);
                n += k;
            }
        }
        struct strbuf a, b;
        strbuf_init(&a);
        strbuf_init(&b);
        strbuf_adds(&a, "{\"t\":");
        strbuf_adds(&b, "{\"t\":");
        int ok_ref = ref_utf8_valid(in, n), ok_new;
        if (ok_ref) ref_json_string(&a, in, n);
        ok_new = stream_json_text(&b, in, n);
        if (ok_ref != ok_new || a.len != b.len || memcmp(a.buf, b.buf, a.len + 1) != 0) {
            if (!mismatches) printf("#   round %d: ref %d new %d\n#   ref %s\n#   new %s\n", round, ok_ref, ok_new, a.buf, b.buf);
            mismatches++;
        }
        ok_ref ? valid++ : invalid++;
        strbuf_done(&a);
        strbuf_done(&b);
    }
    CHECK_INT(mismatches, 0);
    CHECK(valid > 10000 && invalid > 10000);   /* both verdicts were asked about often */
}

static void test_json_string_and_sanitize(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    CHECK(stream_json_text(&sb, "a\"b\\c\n\r\t\x01\x1b caf\xc3\xa9", 16));
    CHECK_STR(sb.buf, "\"a\\\"b\\\\c\\n\\r\\t\\u0001\\u001b caf\xc3\xa9\"");
    strbuf_reset(&sb);
    stream_sanitize(&sb, "ok\xff\0\xc3\xa9\xe2\x82", 8);
    CHECK_STR(sb.buf, "ok??\xc3\xa9??");
    strbuf_done(&sb);
}

/* Text goes 8 bytes at a time: a byte to escape or an invalid one at any offset of a longer
 * text is still seen, and cJSON reads back exactly what went in. */
static void test_word_at_a_time(void)
{
    static const char *const odd[] = { "\"", "\\", "\n", "\x01", "\x1f", "\xc3\xa9", "\xe2\x82\xac" };
    bool ok = true;
    for (size_t k = 0; k < sizeof odd / sizeof *odd && ok; k++)
        for (size_t off = 0; off < 24 && ok; off++) {
            char in[40];
            struct strbuf sb;
            memset(in, 'a', sizeof in);
            memcpy(in + off, odd[k], strlen(odd[k]));
            strbuf_init(&sb);
            strbuf_adds(&sb, "[");
            if (!stream_json_text(&sb, in, 32)) ok = false;
            strbuf_adds(&sb, "]");
            cJSON *j = cJSON_Parse(sb.buf);
            const char *back = cJSON_GetStringValue(cJSON_GetArrayItem(j, 0));
            if (!stream_utf8_valid(in, 32) || !back || strlen(back) != 32 || memcmp(back, in, 32) != 0) {
                printf("#   case %zu at %zu: %s\n", k, off, sb.buf);
                ok = false;
            }
            cJSON_Delete(j);
            strbuf_done(&sb);
            in[off] = '\0';
            if (stream_utf8_valid(in, 32)) ok = false;         /* NUL anywhere */
            in[off] = '\xff';
            if (stream_utf8_valid(in, 32)) ok = false;         /* not UTF-8 anywhere */
        }
    CHECK(ok);
}

static void test_proc_stat_parse(void)
{
    struct proc_stat ps;
    long tck = sysconf(_SC_CLK_TCK);
    /* A command name with spaces and ')' in it, as a program may choose. */
    const char *line = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194304 100 0 0 0 "
                       "150 50 30 20 20 0 1 0 12345 1000000 100 18446744073709551615";
    CHECK_INT(proc_stat_parse(line, &ps), 0);
    CHECK_INT(ps.state, 'S');
    CHECK_NEAR(ps.cpu_s, 250.0 / (double)tck, 1e-9);
    CHECK_INT(proc_stat_parse("4242 (x", &ps), -1);
    CHECK_INT(proc_stat_read(getpid(), &ps), 0);
    CHECK_INT(ps.state, 'R');
}

int main(void)
{
    RUN(test_lines_in_pieces_of_any_size);
    RUN(test_partial_ages_from_its_first_byte);
    RUN(test_long_lines_split_at_64k);
    RUN(test_exactly_64k_is_one_piece);
    RUN(test_split_keeps_characters_whole);
    RUN(test_utf8_validity);
    RUN(test_one_read_one_block);
    RUN(test_blocks_bounded_at_64k);
    RUN(test_base64_vectors);
    RUN(test_json_string_and_sanitize);
    RUN(test_word_at_a_time);
    RUN(test_json_text_as_before);
    RUN(test_proc_stat_parse);
    return tap_done();
}
