/* Unit tests for launcher/wire/line_reader.c, the one bounded reader of lines every transport
 * reads its agent through: the same lines whatever the bytes' cuts, empty lines kept; a line
 * of exactly max_line bytes is whole, one byte more is refused where it stands (overlong) or
 * handed out cut by line_reader_next with its rest dropped, the next line read as usual; the
 * backlog is what was received and not taken; nothing grows past what was fed. */
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/util.h"
#include "wire/line_reader.h"

/* Every line of text fed in pieces of `cut` bytes, joined with '|', taken by take. */
static char *lines_of(const char *text, size_t cut)
{
    struct line_reader r;
    struct strbuf out;
    char *l;
    line_reader_init(&r, 64);
    strbuf_init(&out);
    for (size_t at = 0, n = strlen(text); at < n; at += cut) {
        line_reader_add(&r, text + at, n - at < cut ? n - at : cut);
        while ((l = line_reader_take(&r)) != NULL) {
            strbuf_addf(&out, "%s|", l);
            free(l);
        }
    }
    line_reader_done(&r);
    return out.buf ? out.buf : xstrdup("");
}

static void test_lines_whatever_the_cuts(void)
{
    const char *text = "hello\n\nworld, a longer line\nx\npartial";
    for (size_t cut = 1; cut <= strlen(text); cut++) {
        char *got = lines_of(text, cut);
        CHECK_STR(got, "hello||world, a longer line|x|");
        free(got);
    }
}

static void test_into_peek_ready_and_backlog(void)
{
    struct line_reader r;
    struct strbuf out;
    line_reader_init(&r, 64);
    strbuf_init(&out);
    CHECK(!line_reader_ready(&r) && !line_reader_peek(&r, &out));
    char *space = line_reader_space(&r, 16);
    memcpy(space, "first\nsec", 9);
    line_reader_wrote(&r, 9);
    CHECK_INT(line_reader_pending(&r), 9);
    CHECK(line_reader_peek(&r, &out));
    CHECK_STR(out.buf, "first");
    CHECK_INT(line_reader_pending(&r), 9); /* peek takes nothing */
    CHECK(line_reader_next_into(&r, &out));
    CHECK_STR(out.buf, "first");
    CHECK(!line_reader_ready(&r) && !line_reader_next_into(&r, &out));
    line_reader_add(&r, "ond\n", 4);
    CHECK(line_reader_ready(&r) && line_reader_next_into(&r, &out));
    CHECK_STR(out.buf, "second");
    CHECK_INT(line_reader_pending(&r), 0);
    line_reader_add(&r, "rest", 4);
    line_reader_reset(&r);
    CHECK_INT(line_reader_pending(&r), 0);
    strbuf_done(&out);
    line_reader_done(&r);
}

/* max_line bytes and its '\n' is a line; one byte more is not, with or without its end. */
static void test_overlong_is_refused_where_it_stands(void)
{
    struct line_reader r;
    line_reader_init(&r, 8);
    line_reader_add(&r, "12345678\n", 9);
    char *l = line_reader_take(&r);
    CHECK_STR(l, "12345678");
    free(l);
    line_reader_add(&r, "12345678", 8);
    CHECK(!line_reader_overlong(&r)); /* may still end here */
    line_reader_add(&r, "9", 1);
    CHECK(line_reader_overlong(&r));
    line_reader_add(&r, "\nok\n", 4);
    CHECK(line_reader_overlong(&r));           /* ended too late: still refused */
    CHECK(line_reader_take(&r) == NULL);       /* and never handed out */
    line_reader_done(&r);
}

/* line_reader_next: a long line's head, its rest dropped across any number of adds, then the
 * next line; whole lines are NUL-terminated in place and their end may be written. */
static void test_next_cuts_long_lines(void)
{
    struct line_reader r;
    char *p;
    size_t n;
    line_reader_init(&r, 8);
    line_reader_add(&r, "short\n0123456789abc", 19);
    CHECK_INT(line_reader_next(&r, &p, &n), LINE_WHOLE);
    CHECK_INT(n, 5);
    CHECK_STR(p, "short");
    p[n] = '\n';
    CHECK_INT(line_reader_next(&r, &p, &n), LINE_LONG);
    CHECK_INT(n, 8);
    CHECK_STR(p, "01234567");
    CHECK_INT(line_reader_next(&r, &p, &n), LINE_NONE);
    for (int i = 0; i < 100; i++) line_reader_add(&r, "zzzzzzzzzzzzzzzzzzzz", 20);
    CHECK_INT(line_reader_next(&r, &p, &n), LINE_NONE);
    CHECK_INT(line_reader_pending(&r), 0); /* the middle of a long line is not kept */
    line_reader_add(&r, "zz\nafter\n", 9);
    CHECK_INT(line_reader_next(&r, &p, &n), LINE_WHOLE);
    CHECK_STR(p, "after");
    /* a long line whose end came with it */
    line_reader_add(&r, "0123456789\nx\n", 13);
    CHECK_INT(line_reader_next(&r, &p, &n), LINE_LONG);
    CHECK_INT(line_reader_next(&r, &p, &n), LINE_WHOLE);
    CHECK_STR(p, "x");
    CHECK_INT(line_reader_next(&r, &p, &n), LINE_NONE);
    line_reader_done(&r);
}

/* Lines taken as they come keep the buffer near one read's size, however much went through. */
static void test_buffer_stays_small(void)
{
    struct line_reader r;
    struct strbuf out;
    line_reader_init(&r, 1024);
    strbuf_init(&out);
    for (int i = 0; i < 100000; i++) {
        line_reader_add(&r, "a line of rank output\n", 22);
        CHECK(line_reader_next_into(&r, &out));
    }
    CHECK(r.data.cap < 4096);
    strbuf_done(&out);
    line_reader_done(&r);
}

int main(void)
{
    RUN(test_lines_whatever_the_cuts);
    RUN(test_into_peek_ready_and_backlog);
    RUN(test_overlong_is_refused_where_it_stands);
    RUN(test_next_cuts_long_lines);
    RUN(test_buffer_stays_small);
    return tap_done();
}
