/* The agent's rank-output assembly and encodings (launcher/agent_stream.c) and its /proc stat
 * parser: what the controller's log files depend on to get every byte back as the rank wrote it. */
#include "agent/agent_proc.h"
#include "agent/agent_stream.h"
#include "wire/base64.h"
#include "tap.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

static void test_json_string_and_sanitize(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    stream_json_string(&sb, "a\"b\\c\n\r\t\x01\x1b caf\xc3\xa9", 16);
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
            stream_json_string(&sb, in, 32);
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
    RUN(test_proc_stat_parse);
    return tap_done();
}
