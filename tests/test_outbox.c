/* The agent's outbox and spool (launcher/agent/agent_outbox.c): what a controller that loses its
 * link and comes back relies on. Messages leave whole and in the order they were made, also when
 * the link takes them a few bytes at a time; durable ones (rank output, exits) are numbered per
 * rank and kept until acknowledged, plain ones are freed once written and dropped with their
 * link; a new link gets nothing but its hello until the resume, which sends every durable message
 * after the controller's "from" again, in order, then what came since; and the byte counts the
 * agent's back-pressure and spool bound read stay equal to what is really held. */
#include "agent/agent_outbox.h"
#include "tap.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* ---- helpers ---- */

/* A pipe standing for the link: non-blocking on both ends (the agent's output is), pipe_size
 * bytes of buffer when non-zero (F_SETPIPE_SZ rounds up to a page). */
static void link_open(int p[2], int pipe_size)
{
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
        perror("pipe2");
        exit(1);
    }
    if (pipe_size && fcntl(p[1], F_SETPIPE_SZ, pipe_size) < 0) {
        perror("F_SETPIPE_SZ");
        exit(1);
    }
}

static void link_close(int p[2])
{
    close(p[0]);
    close(p[1]);
}

/* Reads up to max bytes (0: all there is) into got; returns how many. */
static size_t link_read(int fd, struct strbuf *got, size_t max)
{
    char buf[8192];
    size_t total = 0;
    while (!max || total < max) {
        size_t want = sizeof buf;
        if (max && max - total < want) want = max - total;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        strbuf_add(got, buf, (size_t)n);
        total += (size_t)n;
    }
    return total;
}

static size_t in_pipe(int fd)
{
    int n = 0;
    ioctl(fd, FIONREAD, &n);
    return (size_t)n;
}

/* Writes until nothing is left unsent (reading the pipe in between), then reads the rest.
 * Returns the number of outbox_write calls, or -1 when a write failed or made no progress. */
static int link_drain(struct outbox *ob, int p[2], struct strbuf *got)
{
    int calls = 0;
    while (outbox_unsent(ob) > 0 && !outbox_held(ob)) {
        size_t before = outbox_unsent(ob);
        if (outbox_write(ob, p[1]) != 0) return -1;
        calls++;
        size_t taken = link_read(p[0], got, 0);
        if (outbox_unsent(ob) == before && !taken) return -1;
        if (calls > 100000) return -1;
    }
    if (outbox_write(ob, p[1]) != 0) return -1; /* urgent lines while held */
    link_read(p[0], got, 0);
    return calls;
}

static bool got_is(const struct strbuf *got, const char *want)
{
    size_t n = strlen(want);
    bool ok = got->len == n && (n == 0 || memcmp(got->buf, want, n) == 0);
    if (!ok) printf("#   got \"%.*s\"\n#   expected \"%s\"\n", (int)(got->len > 400 ? 400 : got->len),
                    got->buf ? got->buf : "", want);
    return ok;
}

static void plain(struct outbox *ob, const char *s)
{
    outbox_add(ob, s, strlen(s));
}

/* A durable message of rank, numbered by the outbox ("r<rank>q<seq>:<text>"); returns its
 * length on the link (its newline included). */
static size_t durable(struct outbox *ob, int rank, const char *text)
{
    uint64_t seq = outbox_next_seq(ob, rank);
    char *line = xasprintf("r%dq%llu:%s", rank, (unsigned long long)seq, text);
    size_t len = strlen(line);
    outbox_add_durable(ob, rank, seq, line, len);
    free(line);
    return len + 1;
}

/* "from" for outbox_resume out of a table of (rank, seq) pairs ended by rank -1; ranks not in
 * it: 0, as a controller that has nothing of them. */
struct from_pair { int rank; uint64_t seq; };
static int from_calls;
static uint64_t from_table(void *ctx, int rank)
{
    const struct from_pair *f = ctx;
    from_calls++;
    for (; f->rank >= 0; f++)
        if (f->rank == rank) return f->seq;
    return 0;
}

/* ---- tests ---- */

static void test_seq_numbers_per_rank(void)
{
    struct outbox *ob = outbox_new();
    CHECK_INT(outbox_next_seq(ob, 0), 1);
    CHECK_INT(outbox_next_seq(ob, 0), 1); /* asking does not take the number */
    durable(ob, 0, "a");
    CHECK_INT(outbox_next_seq(ob, 0), 2);
    CHECK_INT(outbox_next_seq(ob, 1), 1); /* each rank counts on its own */
    durable(ob, 1, "b");
    durable(ob, 1, "c");
    CHECK_INT(outbox_next_seq(ob, 1), 3);
    CHECK_INT(outbox_next_seq(ob, 0), 2);
    /* a number given from outside moves the count past it */
    outbox_add_durable(ob, 0, 10, "x", 1);
    CHECK_INT(outbox_next_seq(ob, 0), 11);
    /* many ranks, made in descending order (slots inserted at the front, grown past 16) */
    for (int r = 99; r >= 2; r--) {
        CHECK_INT(outbox_next_seq(ob, r), 1);
        durable(ob, r, "y");
    }
    for (int r = 2; r < 100; r++) {
        CHECK_INT(outbox_next_seq(ob, r), 2);
    }
    CHECK_INT(outbox_next_seq(ob, 1), 3);
    CHECK_INT(outbox_next_seq(ob, 0), 11);
    outbox_free(ob);
}

static void test_written_whole_and_in_order(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got;
    strbuf_init(&got);
    link_open(p, 0);
    CHECK_INT(outbox_unsent(ob), 0);
    CHECK_INT(outbox_bytes(ob), 0);
    plain(ob, "{\"ev\":\"hello\"}");
    size_t d1 = durable(ob, 0, "zero");
    plain(ob, "{\"ev\":\"status\"}");
    size_t d2 = durable(ob, 1, "one");
    size_t total = 15 + d1 + 16 + d2;
    CHECK_INT(outbox_unsent(ob), total);
    CHECK_INT(outbox_bytes(ob), total);
    CHECK(!outbox_held(ob));
    CHECK_INT(outbox_write(ob, p[1]), 0);
    link_read(p[0], &got, 0);
    CHECK(got_is(&got, "{\"ev\":\"hello\"}\nr0q1:zero\n{\"ev\":\"status\"}\nr1q1:one\n"));
    CHECK_INT(outbox_unsent(ob), 0);
    /* the first plain message went; the unacknowledged durable one holds what came after it */
    CHECK_INT(outbox_bytes(ob), d1 + 16 + d2);
    /* nothing is written twice */
    strbuf_reset(&got);
    CHECK_INT(outbox_write(ob, p[1]), 0);
    CHECK_INT(link_read(p[0], &got, 0), 0);
    outbox_free(ob);

    /* plain messages alone: freed as soon as they are written */
    ob = outbox_new();
    for (int i = 0; i < 10; i++) plain(ob, "{\"ev\":\"pong\"}");
    CHECK_INT(outbox_bytes(ob), 10 * 14);
    strbuf_reset(&got);
    CHECK(link_drain(ob, p, &got) >= 1);
    CHECK_INT(got.len, 10 * 14);
    CHECK_INT(outbox_bytes(ob), 0);
    CHECK_INT(outbox_unsent(ob), 0);
    outbox_free(ob);

    /* more messages than one writev takes: all of them, in order */
    ob = outbox_new();
    struct strbuf want;
    strbuf_init(&want);
    for (int i = 0; i < 300; i++) {
        char line[32];
        int n = snprintf(line, sizeof line, "m%03d", i);
        if (i % 3) outbox_add(ob, line, (size_t)n);
        else outbox_add_durable(ob, 7, outbox_next_seq(ob, 7), line, (size_t)n);
        strbuf_addf(&want, "%s\n", line);
    }
    strbuf_reset(&got);
    CHECK(link_drain(ob, p, &got) >= 1);
    CHECK(got_is(&got, want.buf));
    CHECK_INT(outbox_unsent(ob), 0);
    outbox_ack(ob, 7, outbox_next_seq(ob, 7) - 1);
    CHECK_INT(outbox_bytes(ob), 0);
    outbox_free(ob);
    strbuf_done(&want);
    strbuf_done(&got);
    link_close(p);
}

static void test_ack_frees_durable(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got;
    strbuf_init(&got);
    link_open(p, 0);
    size_t a1 = durable(ob, 0, "a1"), a2 = durable(ob, 0, "a2"), a3 = durable(ob, 0, "a3");
    size_t b1 = durable(ob, 1, "b1"), b2 = durable(ob, 1, "b2");
    size_t all = a1 + a2 + a3 + b1 + b2;
    CHECK_INT(outbox_bytes(ob), all);
    /* an acknowledgement of what was not written yet frees nothing: it is still to go */
    outbox_ack(ob, 0, 1);
    CHECK_INT(outbox_bytes(ob), all);
    CHECK_INT(outbox_unsent(ob), all);
    CHECK(link_drain(ob, p, &got) >= 1);
    CHECK(got_is(&got, "r0q1:a1\nr0q2:a2\nr0q3:a3\nr1q1:b1\nr1q2:b2\n"));
    /* written: the acknowledged a1 goes; the rest waits for its acknowledgement */
    CHECK_INT(outbox_bytes(ob), all - a1);
    outbox_ack(ob, 0, 2);
    CHECK_INT(outbox_bytes(ob), a3 + b1 + b2);
    /* b1, b2 acknowledged but behind a3, which is not: held (freed from the front) */
    outbox_ack(ob, 1, 2);
    CHECK_INT(outbox_bytes(ob), a3 + b1 + b2);
    /* an older acknowledgement (a late ping) takes nothing back: when the link is lost now,
     * only a3 waits for the next one, b2 is not sent twice */
    outbox_ack(ob, 1, 1);
    outbox_ack(ob, 0, 1);
    outbox_unlink(ob);
    CHECK_INT(outbox_bytes(ob), a3);
    CHECK_INT(outbox_unsent(ob), a3);
    /* and a3 goes once the next link's controller says it has it */
    outbox_relink(ob);
    struct from_pair from[] = {{0, 3}, {-1, 0}};
    size_t n = 99;
    outbox_resume(ob, from_table, from, &n, NULL);
    CHECK_INT(n, 0);
    CHECK_INT(outbox_bytes(ob), 0);
    CHECK_INT(outbox_unsent(ob), 0);
    /* numbering goes on after everything was let go */
    CHECK_INT(outbox_next_seq(ob, 0), 4);
    CHECK_INT(outbox_next_seq(ob, 1), 3);
    outbox_free(ob);
    strbuf_done(&got);
    link_close(p);
}

/* A link that takes a few KiB at a time: every outbox_write writes what fits and stops, the
 * next one goes on mid-message; the reader gets the same bytes as through a wide link. */
static void test_full_pipe_resumes_mid_message(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got, want;
    strbuf_init(&got);
    strbuf_init(&want);
    link_open(p, 4096);
    CHECK_INT(fcntl(p[1], F_GETPIPE_SZ), 4096);
    /* 200 messages of 8 to 1,507 bytes, each line distinct, plain and durable mixed */
    size_t *ends = xcalloc(201, sizeof *ends);
    for (int i = 0; i < 200; i++) {
        size_t len = 8 + (size_t)(i * 7919) % 1500;
        char *line = xmalloc(len + 1);
        int head = snprintf(line, len + 1, "%d:", i);
        for (size_t k = (size_t)head; k < len; k++) line[k] = (char)('a' + (i + k) % 26);
        if (i % 2) outbox_add(ob, line, len);
        else outbox_add_durable(ob, i % 4 / 2, outbox_next_seq(ob, i % 4 / 2), line, len);
        strbuf_add(&want, line, len);
        strbuf_add(&want, "\n", 1);
        ends[i + 1] = want.len;
        free(line);
    }
    CHECK_INT(outbox_unsent(ob), want.len);
    CHECK_INT(outbox_bytes(ob), want.len);
    int calls = 0, mid_message = 0, bad_accounting = 0, stalls = 0;
    while (outbox_unsent(ob) && calls < 10000) {
        size_t before = outbox_unsent(ob);
        CHECK_INT(outbox_write(ob, p[1]), 0);
        calls++;
        /* what left the outbox is in the pipe or read already */
        size_t out = want.len - outbox_unsent(ob);
        if (out != got.len + in_pipe(p[0])) bad_accounting++;
        if (outbox_unsent(ob) && outbox_unsent(ob) == before && in_pipe(p[0]) == 0) stalls++;
        bool boundary = false;
        for (int i = 0; i <= 200; i++) boundary |= ends[i] == out;
        if (!boundary) mid_message++;
        /* the reader takes an odd amount each time, so the pipe fills and empties unevenly */
        link_read(p[0], &got, 1000 + (size_t)(calls * 37) % 3000);
    }
    link_read(p[0], &got, 0);
    CHECK_INT(outbox_unsent(ob), 0);
    CHECK_INT(bad_accounting, 0);
    CHECK_INT(stalls, 0);
    CHECK(calls > 20);      /* the pipe really was full most of the time */
    CHECK(mid_message > 0); /* and writes stopped inside a message */
    CHECK_INT(got.len, want.len);
    CHECK(got.len == want.len && memcmp(got.buf, want.buf, want.len) == 0);
    printf("#   %d writes, %d of them stopped mid-message\n", calls, mid_message);
    /* the first message is durable and unacknowledged: it holds everything written after it */
    CHECK_INT(outbox_bytes(ob), want.len);
    outbox_ack(ob, 0, outbox_next_seq(ob, 0) - 1);
    outbox_ack(ob, 1, outbox_next_seq(ob, 1) - 1);
    CHECK_INT(outbox_bytes(ob), 0);
    free(ends);
    outbox_free(ob);
    strbuf_done(&got);
    strbuf_done(&want);
    link_close(p);
}

static void test_urgent_first_and_whole(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got, want;
    strbuf_init(&got);
    strbuf_init(&want);
    link_open(p, 0);
    plain(ob, "queued");
    outbox_add_urgent(ob, "urgent", 6);
    CHECK_INT(outbox_unsent(ob), 7 + 7);
    CHECK_INT(outbox_bytes(ob), 7); /* urgent lines are not the spool */
    CHECK(link_drain(ob, p, &got) >= 1);
    CHECK(got_is(&got, "urgent\nqueued\n"));
    CHECK_INT(outbox_unsent(ob), 0);
    link_close(p);

    /* an urgent line longer than the pipe: it goes on where it stopped, and nothing queued
     * comes in the middle of it */
    link_open(p, 4096);
    char *big = xmalloc(10001);
    for (int i = 0; i < 10000; i++) big[i] = (char)('A' + i % 26);
    durable(ob, 3, "after");
    outbox_add_urgent(ob, big, 10000);
    strbuf_add(&want, big, 10000);
    strbuf_adds(&want, "\nr3q1:after\n");
    strbuf_reset(&got);
    CHECK_INT(outbox_write(ob, p[1]), 0);
    CHECK(outbox_unsent(ob) > 0);                 /* the pipe is full */
    CHECK_INT(outbox_unsent(ob), want.len - in_pipe(p[0]));
    int rounds = 0;
    while (outbox_unsent(ob) && rounds++ < 100) {
        link_read(p[0], &got, 0);
        CHECK_INT(outbox_write(ob, p[1]), 0);
    }
    link_read(p[0], &got, 0);
    CHECK(got_is(&got, want.buf));
    free(big);
    outbox_free(ob);
    strbuf_done(&got);
    strbuf_done(&want);
    link_close(p);
}

static void test_unlink_keeps_unacked_durable(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got;
    strbuf_init(&got);
    link_open(p, 0);
    plain(ob, "p1");
    size_t d1 = durable(ob, 0, "d1");
    plain(ob, "p2");
    size_t d2 = durable(ob, 0, "d2");
    size_t e1 = durable(ob, 1, "e1");
    CHECK(link_drain(ob, p, &got) >= 1);
    outbox_ack(ob, 0, 1); /* d1 is the controller's */
    /* p1 went once written; d1 and p2 behind it once d1 was acknowledged */
    CHECK_INT(outbox_bytes(ob), d2 + e1);
    /* queued, not written yet, when the link ends */
    plain(ob, "p3");
    size_t d3 = durable(ob, 0, "d3");
    outbox_add_urgent(ob, "u", 1);
    outbox_unlink(ob);
    /* plain ones (written or not) and the urgent line go; unacknowledged durable ones stay,
     * the written ones too: the next link's controller may not have them */
    CHECK_INT(outbox_bytes(ob), d2 + e1 + d3);
    CHECK_INT(outbox_unsent(ob), d2 + e1 + d3);
    CHECK(!outbox_held(ob));
    (void)d1;
    strbuf_reset(&got);
    CHECK(link_drain(ob, p, &got) >= 1);
    CHECK(got_is(&got, "r0q2:d2\nr1q1:e1\nr0q3:d3\n"));
    /* a second end of the link with nothing new: the same stays */
    outbox_unlink(ob);
    CHECK_INT(outbox_bytes(ob), d2 + e1 + d3);
    outbox_ack(ob, 0, 3);
    outbox_ack(ob, 1, 1);
    outbox_unlink(ob);
    CHECK_INT(outbox_bytes(ob), 0);
    CHECK_INT(outbox_unsent(ob), 0);
    outbox_free(ob);
    strbuf_done(&got);
    link_close(p);
}

static void test_relink_holds_until_resume(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got;
    strbuf_init(&got);
    link_open(p, 0);
    size_t d1 = durable(ob, 0, "d1");
    size_t d2 = durable(ob, 0, "d2");
    CHECK(link_drain(ob, p, &got) >= 1);
    plain(ob, "old-status");          /* queued for the old link: nobody will read it */
    outbox_add_urgent(ob, "old-urgent", 10);
    /* the link is lost while the old controller was away; output goes on meanwhile */
    outbox_unlink(ob);
    size_t d3 = durable(ob, 0, "d3");
    size_t d4 = durable(ob, 0, "d4");
    link_close(p);

    /* a new link */
    link_open(p, 0);
    outbox_relink(ob);
    CHECK(outbox_held(ob));
    outbox_add_urgent(ob, "hello", 5);
    plain(ob, "status");
    size_t d5 = durable(ob, 0, "d5");
    strbuf_reset(&got);
    CHECK_INT(outbox_write(ob, p[1]), 0);
    CHECK_INT(outbox_write(ob, p[1]), 0);
    link_read(p[0], &got, 0);
    CHECK(got_is(&got, "hello\n")); /* only the urgent line while held */
    CHECK_INT(outbox_unsent(ob), 0);  /* nothing can go until the resume: nothing to poll for */
    CHECK_INT(outbox_bytes(ob), d1 + d2 + d3 + d4 + 7 + d5);

    struct from_pair from[] = {{0, 2}, {-1, 0}};
    size_t n = 99, bytes = 99;
    outbox_resume(ob, from_table, from, &n, &bytes);
    CHECK(!outbox_held(ob));
    CHECK_INT(n, 3);
    CHECK_INT(bytes, d3 + d4 + d5);
    CHECK_INT(outbox_bytes(ob), d3 + d4 + 7 + d5);
    CHECK_INT(outbox_unsent(ob), d3 + d4 + 7 + d5);
    strbuf_reset(&got);
    CHECK(link_drain(ob, p, &got) >= 1);
    CHECK(got_is(&got, "r0q3:d3\nr0q4:d4\nstatus\nr0q5:d5\n"));
    outbox_ack(ob, 0, 5);
    CHECK_INT(outbox_bytes(ob), 0);
    outbox_free(ob);
    strbuf_done(&got);
    link_close(p);
}

static void test_resume_from_per_rank(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got;
    strbuf_init(&got);
    link_open(p, 0);
    /* three ranks interleaved, all written on the first link, none acknowledged */
    size_t len[7];
    len[0] = durable(ob, 0, "a");  /* r0q1 */
    len[1] = durable(ob, 1, "b");  /* r1q1 */
    len[2] = durable(ob, 0, "c");  /* r0q2 */
    len[3] = durable(ob, 2, "d");  /* r2q1 */
    len[4] = durable(ob, 1, "e");  /* r1q2 */
    len[5] = durable(ob, 0, "f");  /* r0q3 */
    len[6] = durable(ob, 1, "g");  /* r1q3 */
    CHECK(link_drain(ob, p, &got) >= 1);
    outbox_unlink(ob);
    outbox_relink(ob);
    /* the controller has rank 0 up to 2, rank 2 up to 1, nothing of rank 1 (not named) */
    struct from_pair from[] = {{0, 2}, {2, 1}, {-1, 0}};
    size_t n = 0, bytes = 0;
    from_calls = 0;
    outbox_resume(ob, from_table, from, &n, &bytes);
    CHECK(from_calls >= 3); /* asked for every rank it holds */
    CHECK_INT(n, 4);
    CHECK_INT(bytes, len[1] + len[4] + len[5] + len[6]);
    strbuf_reset(&got);
    CHECK(link_drain(ob, p, &got) >= 1);
    CHECK(got_is(&got, "r1q1:b\nr1q2:e\nr0q3:f\nr1q3:g\n"));
    CHECK_INT(outbox_bytes(ob), bytes);
    /* a controller that says it has less than it said before gets nothing twice: the same four */
    outbox_relink(ob);
    struct from_pair none[] = {{-1, 0}};
    outbox_resume(ob, from_table, none, &n, &bytes);
    CHECK_INT(n, 4);
    strbuf_reset(&got);
    CHECK(link_drain(ob, p, &got) >= 1);
    CHECK(got_is(&got, "r1q1:b\nr1q2:e\nr0q3:f\nr1q3:g\n"));
    outbox_free(ob);
    strbuf_done(&got);
    link_close(p);
}

/* A message cut off by the end of its link goes again whole on the next one. */
static void test_cut_message_resent_whole(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got, want;
    strbuf_init(&got);
    strbuf_init(&want);
    link_open(p, 4096);
    char *big = xmalloc(9001);
    memset(big, 'x', 9000);
    big[9000] = '\0';
    size_t d1 = durable(ob, 0, big);
    CHECK_INT(outbox_write(ob, p[1]), 0);
    size_t first = in_pipe(p[0]);
    CHECK(first > 0 && first < d1);
    CHECK_INT(outbox_unsent(ob), d1 - first);
    link_close(p);
    outbox_unlink(ob);
    CHECK_INT(outbox_unsent(ob), d1);
    CHECK_INT(outbox_bytes(ob), d1);
    link_open(p, 0);
    outbox_relink(ob);
    size_t n = 0, bytes = 0;
    struct from_pair none[] = {{-1, 0}};
    outbox_resume(ob, from_table, none, &n, &bytes);
    CHECK_INT(n, 1);
    CHECK_INT(bytes, d1);
    CHECK(link_drain(ob, p, &got) >= 1);
    strbuf_addf(&want, "r0q1:%s\n", big);
    CHECK(got_is(&got, want.buf));
    free(big);
    outbox_free(ob);
    strbuf_done(&got);
    strbuf_done(&want);
    link_close(p);
}

/* Links come and go several times, each cut while output is on its way (the controller keeps
 * the whole lines it got); each resume says what the controller has by then: every durable
 * message reaches it exactly once, in order, and the spool holds exactly what it has not. */
#define ROUNDS 6
#define PER_ROUND 40
static size_t made_len[2][ROUNDS * PER_ROUND + 1];

/* What the spool must hold: every message after what the controller last said it has. */
static size_t spool_expected(const uint64_t told[2], const uint64_t made[2])
{
    size_t sum = 0;
    for (int r = 0; r < 2; r++)
        for (uint64_t q = told[r] + 1; q <= made[r]; q++) sum += made_len[r][q];
    return sum;
}

/* Takes the whole lines of got ("r<rank>q<seq>:...") as a controller does: each must be the
 * next of its rank. Appends them to all. */
static void controller_take(const struct strbuf *got, uint64_t have[2], struct strbuf *all, int round)
{
    size_t keep = got->len;
    while (keep && got->buf[keep - 1] != '\n') keep--;
    for (size_t off = 0; off < keep;) {
        char *nl = memchr(got->buf + off, '\n', keep - off);
        if (got->buf[off] == 'r') {
            int r = got->buf[off + 1] - '0';
            uint64_t q = strtoull(got->buf + off + 3, NULL, 10);
            if (q != have[r] + 1)
                printf("#   round %d: rank %d seq %llu after %llu\n", round, r, (unsigned long long)q,
                       (unsigned long long)have[r]);
            CHECK_INT(q, have[r] + 1);
            have[r] = q;
            strbuf_add(all, got->buf + off, (size_t)(nl - got->buf - off) + 1);
        }
        off = (size_t)(nl - got->buf) + 1;
    }
}

/* A pipe with room for everything takes a queue longer than one writev in one call. */
static void test_one_write_takes_all(void)
{
    int p[2];
    CHECK(pipe2(p, O_NONBLOCK) == 0);
    struct outbox *ob = outbox_new();
    for (int i = 0; i < 100; i++) plain(ob, "123456789");
    CHECK_INT(outbox_unsent(ob), 1000);
    CHECK_INT(outbox_write(ob, p[1]), 0);
    CHECK_INT(outbox_unsent(ob), 0);
    CHECK_INT(in_pipe(p[0]), 1000);
    outbox_free(ob);
    close(p[0]);
    close(p[1]);
}

static void test_repeated_resume_no_duplicates(void)
{
    struct outbox *ob = outbox_new();
    int p[2];
    struct strbuf got, all;
    strbuf_init(&got);
    strbuf_init(&all);
    uint64_t have[2] = {0, 0}, made[2] = {0, 0}, told[2] = {0, 0};
    int msgs = 0, resent = 0;
    char dots[600];
    memset(dots, '.', sizeof dots - 1);
    dots[sizeof dots - 1] = '\0';
    for (int round = 0; round < ROUNDS; round++) {
        link_open(p, 4096);
        strbuf_reset(&got);
        if (round) {
            outbox_relink(ob);
            outbox_add_urgent(ob, "hello", 5);
            CHECK_INT(outbox_write(ob, p[1]), 0);
            struct from_pair from[] = {{0, have[0]}, {1, have[1]}, {-1, 0}};
            size_t n = 0, bytes = 0;
            outbox_resume(ob, from_table, from, &n, &bytes);
            told[0] = have[0];
            told[1] = have[1];
            /* what the cut link did not bring */
            CHECK(n > 0);
            CHECK_INT(bytes, spool_expected(told, made));
            resent += (int)n;
            /* the same resume again before anything went: the same, not twice as much */
            size_t n2 = 99;
            outbox_resume(ob, from_table, from, &n2, NULL);
            CHECK_INT(n2, n);
            CHECK_INT(outbox_bytes(ob), bytes);
        }
        for (int i = 0; i < PER_ROUND; i++) {
            char t[700];
            snprintf(t, sizeof t, "round %d line %d %.*s", round, i, 100 + i * 10, dots);
            int r = i % 2;
            made_len[r][++made[r]] = durable(ob, r, t);
            msgs++;
        }
        CHECK_INT(outbox_bytes(ob), spool_expected(told, made));
        /* the link takes two pipes full, then it is cut */
        outbox_write(ob, p[1]);
        link_read(p[0], &got, 0);
        outbox_write(ob, p[1]);
        link_read(p[0], &got, 0);
        controller_take(&got, have, &all, round);
        link_close(p);
        outbox_unlink(ob);
        CHECK_INT(outbox_bytes(ob), spool_expected(told, made));
        CHECK_INT(outbox_unsent(ob), outbox_bytes(ob));
    }
    /* the last link: everything left */
    link_open(p, 0);
    outbox_relink(ob);
    struct from_pair from[] = {{0, have[0]}, {1, have[1]}, {-1, 0}};
    outbox_resume(ob, from_table, from, NULL, NULL);
    strbuf_reset(&got);
    CHECK(link_drain(ob, p, &got) >= 0);
    controller_take(&got, have, &all, ROUNDS);
    CHECK_INT(have[0], made[0]);
    CHECK_INT(have[1], made[1]);
    /* every message exactly once */
    int count = 0;
    for (size_t off = 0; off < all.len; off++) count += all.buf[off] == '\n';
    CHECK_INT(count, msgs);
    CHECK(resent > 0);
    outbox_ack(ob, 0, have[0]);
    outbox_ack(ob, 1, have[1]);
    CHECK_INT(outbox_bytes(ob), 0);
    CHECK_INT(outbox_unsent(ob), 0);
    outbox_free(ob);
    strbuf_done(&got);
    strbuf_done(&all);
    link_close(p);
}

int main(void)
{
    RUN(test_seq_numbers_per_rank);
    RUN(test_written_whole_and_in_order);
    RUN(test_ack_frees_durable);
    RUN(test_full_pipe_resumes_mid_message);
    RUN(test_urgent_first_and_whole);
    RUN(test_unlink_keeps_unacked_durable);
    RUN(test_relink_holds_until_resume);
    RUN(test_resume_from_per_rank);
    RUN(test_cut_message_resent_whole);
    RUN(test_repeated_resume_no_duplicates);
    RUN(test_one_write_takes_all);
    return tap_done();
}
