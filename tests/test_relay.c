/* Unit tests for launcher/wire/relay.c: the framing that carries protocol lines through one
 * Slurm step (srun's stdin copied to every task, its stdout merged with "K: " labels). A line
 * of any length comes back whole from its pieces, also when a piece arrives cut in two; no
 * piece is longer than srun passes whole; labels and addresses parse; what is not one is
 * refused. */
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/util.h"
#include "wire/relay.h"

/* Reassembles framed output as the controller does. cut > 0: every output line longer than
 * cut bytes arrives as two lines, cut there (what slurmstepd does to what it still holds when
 * a task exits). */
static char *unframe(const char *framed, size_t cut, int *lines, size_t *longest)
{
    struct strbuf in, out;
    struct relay_piece p;
    size_t off = 0;
    char *l;
    strbuf_init(&in);
    strbuf_init(&out);
    strbuf_init(&p.line);
    p.need = 0;
    p.hdr_len = 0;
    p.last = false;
    strbuf_adds(&in, framed);
    *lines = 0;
    *longest = 0;
    while ((l = strbuf_take_line(&in, &off)) != NULL) {
        size_t n = strlen(l), first = cut && n > cut ? cut : n;
        int rc = 0;
        if (n > *longest) *longest = n;
        CHECK(l[0] == '+' || l[0] == '.');
        rc = relay_piece_feed(&p, l, first);
        if (first < n) {
            CHECK_INT(rc, 0);
            rc = relay_piece_feed(&p, l + first, n - first);
        }
        CHECK(rc >= 0);
        if (rc == 1) {
            strbuf_add(&out, p.line.buf, p.line.len);
            strbuf_add(&out, "\n", 1);
            strbuf_reset(&p.line);
            (*lines)++;
        }
        free(l);
    }
    strbuf_done(&in);
    strbuf_done(&p.line);
    strbuf_add(&out, "", 1);
    return out.buf;
}

static void test_frame_roundtrip(void)
{
    static const size_t sizes[] = {0, 1, RELAY_PIECE_MAX - 1, RELAY_PIECE_MAX, RELAY_PIECE_MAX + 1, 70000};
    static const size_t cuts[] = {0, 124, 3, 5};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            char *line = xmalloc(sizes[k] + 1), *back, *want;
            struct strbuf f;
            int lines;
            size_t longest;
            for (size_t i = 0; i < sizes[k]; i++) line[i] = (char)(i % 7 == 0 ? '.' : i % 5 == 0 ? '+' : 'a' + i % 26);
            line[sizes[k]] = '\0';
            strbuf_init(&f);
            relay_frame(line, sizes[k], &f);
            relay_frame("{\"ev\":\"pong\"}", 13, &f);
            strbuf_add(&f, "", 1);
            back = unframe(f.buf, cuts[c], &lines, &longest);
            want = xasprintf("%s\n{\"ev\":\"pong\"}\n", line);
            CHECK_STR(back, want);
            CHECK_INT(lines, 2);
            CHECK(longest <= RELAY_PIECE_MAX + 4);
            free(line);
            free(back);
            free(want);
            strbuf_done(&f);
        }
    /* with srun's "NNNNNN: " label a piece stays under its 1 KiB I/O message */
    CHECK(RELAY_PIECE_MAX + 4 + 1 + 8 < 1024);
}

static void test_piece_refused(void)
{
    struct relay_piece p = {.need = 0, .hdr_len = 0};
    strbuf_init(&p.line);
    CHECK_INT(relay_piece_feed(&p, "{\"ev\":1}", 9), -1);
    CHECK_INT(relay_piece_feed(&p, ".0x3abc", 7), -1);
    CHECK_INT(relay_piece_feed(&p, "x", 1), -1);
    CHECK_INT(relay_piece_feed(&p, ".003abcdef", 10), 1); /* more than it said: the rest dropped */
    CHECK_INT((int)p.line.len, 3);
    strbuf_done(&p.line);
}

static void test_label(void)
{
    const char *rest;
    CHECK_INT(relay_label("0: .{}", &rest), 0);
    CHECK_STR(rest, ".{}");
    CHECK_INT(relay_label(" 7: =n7 10.0.0.7", &rest), 7);
    CHECK_STR(rest, "=n7 10.0.0.7");
    CHECK_INT(relay_label("12: ", &rest), 12);
    CHECK_STR(rest, "");
    CHECK_INT(relay_label("srun: error: n2: task 1: Killed", &rest), -1);
    CHECK_STR(rest, "srun: error: n2: task 1: Killed");
    CHECK_INT(relay_label("3:x", &rest), -1);
    CHECK_INT(relay_label(": x", &rest), -1);
    CHECK_INT(relay_label("99999999999: x", &rest), -1);
}

static void test_address(void)
{
    int task = -1;
    const char *rest;
    CHECK_INT(relay_address("1 {\"op\":\"ping\"}", &task, &rest), 0);
    CHECK_INT(task, 1);
    CHECK_STR(rest, "{\"op\":\"ping\"}");
    CHECK_INT(relay_address("0 " RELAY_EOF, &task, &rest), 0);
    CHECK_STR(rest, RELAY_EOF);
    CHECK_INT(relay_address("{\"op\":\"ping\"}", &task, &rest), -1);
    CHECK_INT(relay_address("1{}", &task, &rest), -1);
    CHECK_INT(relay_address("-1 {}", &task, &rest), -1);
}

/* Task ids and exit statuses: digits only, never an overflow, whatever follows or how many. */
static void test_number(void)
{
    const char *end = NULL;
    CHECK_INT(relay_number("0", &end), 0);
    CHECK_STR(end, "");
    CHECK_INT(relay_number("143: x", &end), 143);
    CHECK_STR(end, ": x");
    CHECK_INT(relay_number("1000000", &end), RELAY_NUMBER_MAX);
    end = NULL;
    CHECK_INT(relay_number("1000001", &end), -1);
    CHECK_INT(relay_number("99999999999999999999999999", &end), -1);
    CHECK_INT(relay_number("", &end), -1);
    CHECK_INT(relay_number("-1", &end), -1);
    CHECK_INT(relay_number(" 1", &end), -1);
    CHECK_INT(relay_number(":", &end), -1);
    CHECK(end == NULL);
}

int main(void)
{
    RUN(test_frame_roundtrip);
    RUN(test_piece_refused);
    RUN(test_label);
    RUN(test_address);
    RUN(test_number);
    return tap_done();
}
