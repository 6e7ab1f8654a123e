/* Unit tests for launcher/ssh/srun_step_lines.c: what the controller makes of srun's output and
 * messages, fed as bytes (srun_step_feed) to a step that is never started. srun's lines cut
 * short ("srun: error: n1: task 0:", the out-of-bounds read of issue 18), empty fields and huge
 * numbers; the bounds shared with SSH (wire/protocol.h): a line longer than PROTOCOL_MAX_LINE
 * fails its node with the SSH path's message, and srun's output stops being read while a node
 * holds PROTOCOL_BACKLOG_MAX bytes its transport has not taken. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "ssh/srun_step_int.h"
#include "tap.h"
#include "util/util.h"
#include "wire/protocol.h"
#include "wire/relay.h"

static struct srun_step *step2(void)
{
    static const char *const names[] = {"n1", "n2"};
    struct srun_step_opts o = {.agent_path = "/nonexistent/ddptop-agent"};
    struct srun_step *s = srun_step_new(&o, names, 2);
    s->started = true; /* as if srun ran: the members' states are read (no process, no pipe) */
    return s;
}

static void step_done(struct srun_step *s)
{
    srun_step_release(s, 0);
    srun_step_release(s, 1);
}

static void feed(struct srun_step *s, enum srun_stream from, const char *text)
{
    srun_step_feed(s, from, text, strlen(text));
}

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

/* "srun: error: n1: task 0:" ends right after the prefix: the task's end is still read, and
 * its reason is the line itself (ASan found the read past it). */
static void test_task_line_cut(void)
{
    struct srun_step *s = step2();
    feed(s, SRUN_STDERR, "srun: error: n1: task 0:\n");
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_FAILED);
    CHECK_STR(srun_step_error(s, 0), "the agent's task on n1 ended: srun: error: n1: task 0:");
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_RUNNING);
    feed(s, SRUN_STDERR, "srun: error: n2: task 1");
    feed(s, SRUN_STDERR, "\n");
    CHECK_STR(srun_step_error(s, 1), "the agent's task on n2 ended: srun: error: n2: task 1");
    step_done(s);

    s = step2();
    feed(s, SRUN_STDERR, "srun: error: n1: task 0:    \n");
    CHECK_STR(srun_step_error(s, 0), "the agent's task on n1 ended: srun: error: n1: task 0:    ");
    feed(s, SRUN_STDERR, "srun: error: n2: task 1: Killed\n");
    CHECK_STR(srun_step_error(s, 1), "the agent's task on n2 ended: Killed");
    step_done(s);
}

/* No task id, or one too large for an int: not a task's end (and no undefined behaviour);
 * the line is srun's last error. A name missing or cut: the task id still says which. */
static void test_task_line_numbers(void)
{
    static const char *const not_tasks[] = {
        "srun: error: n1: task \n", "srun: error: n1: task x: Killed\n", "srun: error: n1: task -1: Killed\n",
        "srun: error: n1: task 99999999999999999999999: Killed\n", "srun: error: n1: task 2147483648: Killed\n",
    };
    for (size_t i = 0; i < sizeof not_tasks / sizeof not_tasks[0]; i++) {
        struct srun_step *s = step2();
        feed(s, SRUN_STDERR, not_tasks[i]);
        CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_RUNNING);
        CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_RUNNING);
        CHECK(strncmp(s->srun_err, not_tasks[i], strlen(not_tasks[i]) - 1) == 0);
        step_done(s);
    }
    struct srun_step *s = step2();
    /* ": task " inside the prefix itself: no name, task 1 is n2 by its place in the list */
    feed(s, SRUN_STDERR, "srun: error: task 1: Killed\n");
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_RUNNING);
    CHECK_STR(srun_step_error(s, 1), "the agent's task on n2 ended: Killed");
    feed(s, SRUN_STDERR, "srun: : task 0\n");
    CHECK_STR(srun_step_error(s, 0), "the agent's task on n1 ended: srun: : task 0");
    step_done(s);
}

/* Lines that end after a prefix, empty fields, on either stream: nothing happens to a member
 * that none of them names, and nothing reads past them (run under ASan: make asan). */
static void test_prefixes_only(void)
{
    static const char *const err_lines[] = {
        "", "srun", "srun: ", "srun: error: ", "srun: fatal: ", ": task ", "0:", "0: ", "0: slurmstepd-",
        "0: slurmstepd-:", "1: slurmstepd-n2", "7: slurmstepd-n9: error", "\r", " 0: x",
    };
    static const char *const out_lines[] = {
        "", "0", "0:", "0: ", "0: +", "0: +3", "0: +38", "1: .", "1: .00", "0: =", "1: = ", "5: =n1 1.2.3.4",
        "0: !", "  : +384", "99999999999: .003abc",
    };
    struct srun_step *s = step2();
    for (size_t i = 0; i < sizeof err_lines / sizeof err_lines[0]; i++) {
        feed(s, SRUN_STDERR, err_lines[i]);
        feed(s, SRUN_STDERR, "\n");
    }
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_RUNNING);
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_RUNNING);
    CHECK_STR(s->m[1].last_err, "slurmstepd-n2");
    for (size_t i = 0; i < sizeof out_lines / sizeof out_lines[0]; i++) {
        feed(s, SRUN_STDOUT, out_lines[i]);
        feed(s, SRUN_STDOUT, "\n");
    }
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_RUNNING);
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_RUNNING);
    step_done(s);
}

/* "=NAME ADDR[ kept]": only a numeric address is taken for MASTER_ADDR; else the node's name. */
static void test_announce(void)
{
    struct srun_step *s = step2();
    feed(s, SRUN_STDOUT, "1: =n2 10.0.0.12\n0: =n1 not-an-address\n");
    CHECK_INT(s->m[0].task, 0);
    CHECK_INT(s->m[1].task, 1);
    CHECK_STR(srun_step_address(s, 0), "n1");
    CHECK_STR(srun_step_address(s, 1), "10.0.0.12");
    step_done(s);

    s = step2();
    char *longaddr = xasprintf("0: =n1 %0200d\n1: =n2 \n", 1);
    feed(s, SRUN_STDOUT, longaddr);
    free(longaddr);
    CHECK_STR(srun_step_address(s, 0), "n1");
    CHECK_STR(srun_step_address(s, 1), "n2");
    CHECK(s->m[1].announced);
    step_done(s);

    /* " kept" after the address: the agent keeps its copy; the address is still taken */
    s = step2();
    feed(s, SRUN_STDOUT, "0: =n1 10.0.0.11 kept\n1: =n2 10.0.0.12 kept-not\n");
    CHECK_STR(srun_step_address(s, 0), "10.0.0.11");
    CHECK_STR(srun_step_address(s, 1), "10.0.0.12");
    CHECK(s->m[0].kept);
    CHECK(!s->m[1].kept);
    step_done(s);
}

/* "!STATUS": the agent's exit status; unreadable ones (empty, huge, not digits) said so. */
static void test_exit_status(void)
{
    static const struct {
        const char *status, *why;
    } cases[] = {
        {"!143", "Slurm stopped the agent on n1 with SIGTERM"},
        {"!7", "the agent on n1 exited with status 7"},
        {"!", "the agent on n1 exited (its relay sent an unreadable exit status)"},
        {"!99999999999999999999", "the agent on n1 exited (its relay sent an unreadable exit status)"},
        {"!12x", "the agent on n1 exited (its relay sent an unreadable exit status)"},
        {"!-1", "the agent on n1 exited (its relay sent an unreadable exit status)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct srun_step *s = step2();
        struct strbuf f;
        strbuf_init(&f);
        strbuf_adds(&f, "0: ");
        relay_frame(cases[i].status, strlen(cases[i].status), &f);
        feed(s, SRUN_STDOUT, "0: =n1 -\n");
        srun_step_feed(s, SRUN_STDOUT, f.buf, f.len);
        CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_CLOSED);
        CHECK(contains(srun_step_error(s, 0), cases[i].why));
        strbuf_done(&f);
        step_done(s);
    }
}

/* Pieces make lines; a piece cut in two by slurmstepd continues on the next labelled line. */
static void test_lines(void)
{
    struct srun_step *s = step2();
    struct strbuf f;
    char *line;
    strbuf_init(&f);
    feed(s, SRUN_STDOUT, "0: =n1 -\n1: =n2 -\n");
    relay_frame("{\"ev\":\"hello\"}", 14, &f);
    strbuf_add(&f, "", 1);
    char *framed = xasprintf("1: %.*s\n1: %s", 5, f.buf, f.buf + 5);
    feed(s, SRUN_STDOUT, framed);
    free(framed);
    CHECK(srun_step_next_line(s, 0) == NULL);
    line = srun_step_next_line(s, 1);
    CHECK_STR(line, "{\"ev\":\"hello\"}");
    free(line);
    CHECK_INT((long long)srun_step_bytes_in(s, 1), 15);
    strbuf_done(&f);
    step_done(s);
}

/* A relay's empty lines (its acknowledgement of requests for other nodes, agent_relay.c) come
 * before, between and after the pieces of a line: they are nothing, the line comes back whole
 * and alone, and its node keeps running. */
static void test_empty_lines(void)
{
    struct srun_step *s = step2();
    struct strbuf f, want;
    char *line;
    strbuf_init(&f);
    strbuf_init(&want);
    strbuf_adds(&want, "{\"ev\":\"facts\",\"x\":\"");
    for (int i = 0; i < RELAY_PIECE_MAX + 100; i++) strbuf_add(&want, "a", 1);
    strbuf_adds(&want, "\"}");
    feed(s, SRUN_STDOUT, "0: =n1 -\n1: =n2 -\n1: \n0: \n");
    relay_frame(want.buf, want.len, &f);
    strbuf_add(&f, "", 1);
    const char *nl = strchr(f.buf, '\n'); /* the first piece ends there; the second follows */
    char *framed = xasprintf("1: %.*s1: \n0: \n1: %s1: \n", (int)(nl - f.buf + 1), f.buf, nl + 1);
    feed(s, SRUN_STDOUT, framed);
    free(framed);
    CHECK(srun_step_next_line(s, 0) == NULL);
    line = srun_step_next_line(s, 1);
    CHECK_STR(line, want.buf);
    free(line);
    CHECK(srun_step_next_line(s, 1) == NULL);
    CHECK_INT((long long)srun_step_bytes_in(s, 1), (long long)want.len + 1);
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_RUNNING);
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_RUNNING);
    strbuf_done(&f);
    strbuf_done(&want);
    step_done(s);
}

/* One protocol line that never ends (a "+" piece after another): past PROTOCOL_MAX_LINE its
 * node fails with the SSH path's message, its agent's stdin is ended, and what it sends next
 * is dropped; the other node goes on. */
static void test_endless_line(void)
{
    struct srun_step *s = step2();
    char piece[RELAY_PIECE_MAX + 16];
    char *want = xasprintf(PROTOCOL_LONG_LINE_FMT, "n1", PROTOCOL_MAX_LINE);
    char *line;
    int n = snprintf(piece, sizeof piece, "0: +%03x", RELAY_PIECE_MAX);
    memset(piece + n, 'a', RELAY_PIECE_MAX);
    piece[n + RELAY_PIECE_MAX] = '\n';
    feed(s, SRUN_STDOUT, "0: =n1 -\n1: =n2 -\n");
    for (size_t sent = 0; sent < 3u * PROTOCOL_MAX_LINE; sent += RELAY_PIECE_MAX)
        srun_step_feed(s, SRUN_STDOUT, piece, (size_t)n + RELAY_PIECE_MAX + 1);
    CHECK_INT(srun_step_state(s, 0), SRUN_MEMBER_FAILED);
    CHECK_STR(srun_step_error(s, 0), want);
    CHECK(s->m[0].piece.line.len <= RELAY_PIECE_MAX);
    CHECK(contains(s->wbuf.buf, "0 " RELAY_EOF "\n"));
    CHECK(srun_step_next_line(s, 0) == NULL);
    feed(s, SRUN_STDOUT, "1: .002{}\n");
    line = srun_step_next_line(s, 1);
    CHECK_STR(line, "{}");
    free(line);
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_RUNNING);
    free(want);
    step_done(s);
}

/* One line of srun's output past PROTOCOL_MAX_LINE (no line srun writes): the node it is
 * labelled with fails the same way, the rest of the line is dropped up to its end and the
 * next line is read as usual. On stderr the line's start is read, the rest dropped. */
static void test_long_raw_line(void)
{
    struct srun_step *s = step2();
    size_t big = (size_t)PROTOCOL_MAX_LINE + 4096;
    char *junk = xmalloc(big);
    char *want = xasprintf(PROTOCOL_LONG_LINE_FMT, "n2", PROTOCOL_MAX_LINE), *line;
    memset(junk, 'z', big);
    feed(s, SRUN_STDOUT, "0: =n1 -\n1: =n2 -\n1: +384");
    for (int i = 0; i < 3; i++) srun_step_feed(s, SRUN_STDOUT, junk, big);
    CHECK(line_reader_pending(&s->olines) <= (size_t)PROTOCOL_MAX_LINE + 1);
    feed(s, SRUN_STDOUT, "zzz: .002{}\n0: .002[]\n");
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_FAILED);
    CHECK_STR(srun_step_error(s, 1), want);
    line = srun_step_next_line(s, 0);
    CHECK_STR(line, "[]");
    free(line);

    feed(s, SRUN_STDERR, "srun: error: n1: task 0: ");
    for (int i = 0; i < 3; i++) srun_step_feed(s, SRUN_STDERR, junk, big);
    CHECK(line_reader_pending(&s->elines) <= (size_t)PROTOCOL_MAX_LINE + 1);
    feed(s, SRUN_STDERR, "\nsrun: fatal: after the long line\n");
    CHECK(contains(srun_step_error(s, 0), "the agent's task on n1 ended: zzzz"));
    CHECK(strlen(srun_step_error(s, 0)) < 400);
    CHECK_STR(s->srun_err, "srun: fatal: after the long line");
    free(junk);
    free(want);
    step_done(s);
}

/* A node whose lines are not taken: at PROTOCOL_BACKLOG_MAX the step says it is backlogged
 * (srun's stdout is then not read); taking the lines ends that. Lines of a node closed by
 * ddptop are not kept, so it never holds the others up. */
static void test_backlog(void)
{
    struct srun_step *s = step2();
    struct strbuf f;
    size_t lines = 0, taken = 0;
    char *line;
    strbuf_init(&f);
    s->out_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* srun's stdout, still open */
    feed(s, SRUN_STDOUT, "0: =n1 -\n1: =n2 -\n");
    for (int i = 0; i < 64; i++) strbuf_addf(&f, "0: .384%0900d\n", i);
    while (!srun_step_backlogged(s)) {
        srun_step_feed(s, SRUN_STDOUT, f.buf, f.len);
        lines += 64;
        CHECK(lines < 10000);
        if (lines >= 10000) break;
    }
    CHECK(line_reader_pending(&s->m[0].in) < (size_t)PROTOCOL_BACKLOG_MAX + f.len);
    /* srun may hold the last lines of n2's agent, which ended, behind n1's backlog */
    feed(s, SRUN_STDERR, "srun: error: n2: task 1: Killed\n");
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_RUNNING);
    while ((line = srun_step_next_line(s, 0)) != NULL) {
        CHECK_INT((int)strlen(line), 0x384);
        taken++;
        free(line);
        if (!srun_step_backlogged(s)) break;
    }
    CHECK(!srun_step_backlogged(s));
    CHECK(taken > 0 && taken < lines);
    CHECK_INT(srun_step_state(s, 1), SRUN_MEMBER_CLOSED);

    srun_step_close(s, 0);
    size_t held = line_reader_pending(&s->m[0].in);
    for (int i = 0; i < 200; i++) srun_step_feed(s, SRUN_STDOUT, f.buf, f.len);
    CHECK_INT((long long)line_reader_pending(&s->m[0].in), (long long)held);
    CHECK(!srun_step_backlogged(s));
    strbuf_done(&f);
    step_done(s);
}

/* Bytes of any kind, cut anywhere: the same fed at once or byte by byte gives the same lines
 * (a small fuzz; the long one is tests/fuzz). */
static void test_any_bytes(void)
{
    static const char *const atoms[] = {
        "0: ", "1: ", " 1: ", "0:", "=n1 ", "=n2 10.0.0.2", "+384", ".003", ".001!", "+", ".", "{}", "\n", "\n",
        "srun: error: ", "n1: task ", "n2: task 1:", "0", "99999999999", ":", " ", "slurmstepd-n1: ", "\xff", "\0",
    };
    unsigned seed = 12345;
    for (int round = 0; round < 300; round++) {
        struct srun_step *a = step2(), *b = step2();
        struct strbuf bytes;
        strbuf_init(&bytes);
        for (int k = 0; k < 200; k++) {
            seed = seed * 1103515245u + 12345u;
            const char *atom = atoms[(seed >> 16) % (sizeof atoms / sizeof atoms[0])];
            strbuf_add(&bytes, atom, atom[0] ? strlen(atom) : 1);
        }
        enum srun_stream from = round % 2 ? SRUN_STDERR : SRUN_STDOUT;
        srun_step_feed(a, from, bytes.buf, bytes.len);
        for (size_t i = 0; i < bytes.len; i++) srun_step_feed(b, from, bytes.buf + i, 1);
        for (size_t m = 0; m < 2; m++) {
            char *la, *lb;
            CHECK_INT(srun_step_state(a, m), srun_step_state(b, m));
            do {
                la = srun_step_next_line(a, m);
                lb = srun_step_next_line(b, m);
                CHECK((la == NULL) == (lb == NULL));
                if (la && lb) CHECK_STR(la, lb);
                free(la);
                free(lb);
            } while (la && lb);
        }
        strbuf_done(&bytes);
        step_done(a);
        step_done(b);
    }
}

int main(void)
{
    RUN(test_task_line_cut);
    RUN(test_task_line_numbers);
    RUN(test_prefixes_only);
    RUN(test_announce);
    RUN(test_exit_status);
    RUN(test_lines);
    RUN(test_empty_lines);
    RUN(test_endless_line);
    RUN(test_long_raw_line);
    RUN(test_backlog);
    RUN(test_any_bytes);
    return tap_done();
}
