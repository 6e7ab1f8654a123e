/* Unit tests for the headless line printer (tui/headless.c): every rank line comes out as the
 * printer wrote it before its lines went straight into the output queue (the reference below
 * is that formatting: the "[rN host] " prefix, the sanitized text, " [...]" for a line cut in
 * memory, a newline), on random lines with controls, UTF-8 good and bad, long lines, both
 * streams and ddptop's own; NCCL's lines folded when ddptop asked for them; and, with a
 * reader that does not read, lines beyond the queue's bound dropped and counted before the
 * next line that is never dropped, as before. With folding on (issue 30): lines that several
 * ranks print come out once with their ranks as ranges and their nodes as a hostlist (the
 * prefix sanitized), a line of one rank exactly as before, each rank's lines in order, and an
 * event after the lines that came before it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job/job.h"
#include "headless.h"
#include "tap.h"
#include "util/sanitize.h"
#include "util/util.h"

static char err[512];

static struct job *new_job(void)
{
    /* a host name with an escape sequence: the prefix is sanitized too */
    const char *names[] = { "gpu1", "n\x1b[31mode2" };
    int per[] = { 2, 2 };
    struct job *j = job_new("hl", NULL, 0, names, NULL, per, 2, err, sizeof err);
    if (!j) printf("# job_new: %s\n", err);
    return j;
}

/* The line as on_line formatted it before (prefix with snprintf and the sanitizer, the text
 * through the sanitizer into a scratch buffer, then copied to the queue). */
static void ref_line(struct strbuf *out, const struct job *j, int rank, const struct log_line *l)
{
    struct strbuf line;
    const char *host = job_rank_host(j, rank);
    strbuf_init(&line);
    strbuf_addf(&line, "[r%d ", rank);
    sanitize_append(&line, host, strlen(host), 0);
    strbuf_adds(&line, l->stream == LOG_STDERR ? " err] " : l->stream == LOG_SYSTEM ? " ddptop] " : "] ");
    sanitize_append(&line, l->text, l->len, 0);
    if (l->flags & LOG_LINE_TRUNCATED) strbuf_adds(&line, " [...]");
    strbuf_adds(&line, "\n");
    strbuf_add(out, line.buf, line.len);
    strbuf_done(&line);
}

static char *slurp_fd(int fd, size_t *len)
{
    struct strbuf sb;
    char buf[65536];
    ssize_t n;
    strbuf_init(&sb);
    while ((n = read(fd, buf, sizeof buf)) > 0) strbuf_add(&sb, buf, (size_t)n);
    if (!sb.buf) strbuf_add(&sb, "", 0);
    *len = sb.len;
    return sb.buf;
}

/* Reads the headless output back from fd (closing it) and checks that it begins with want. */
static void expect_output(int fd, const char *want)
{
    size_t got_len;
    lseek(fd, 0, SEEK_SET);
    char *got = slurp_fd(fd, &got_len);
    close(fd);
    CHECK(strncmp(got, want, strlen(want)) == 0);
    if (strncmp(got, want, strlen(want)) != 0) printf("# got:\n%s", got);
    free(got);
}

static unsigned seed = 4242;
static unsigned rnd(void)
{
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
}

/* Random lines into a file: the file holds exactly the reference's bytes. */
static void test_lines_as_before(void)
{
    static const char *const odd[] = { "\t", "\x1b[0m", "\x01", "\x7f", "\r", "\xc3\xa9", "\xe2\x82\xac",
                                       "\xf0\x9f\x98\x80", "\xc3", "\xff", "\xc2\x85", "\xe2\x80\xae",
                                       "\xed\xa0\x80", "\0", "\xe0\x80\xaf" };
    char path[] = "/tmp/test_headless.XXXXXX";
    int fd = mkstemp(path);
    struct job *j = new_job();
    struct headless *h = fd >= 0 ? headless_new(fd) : NULL;
    struct frontend fe;
    struct strbuf want;
    static char text[9000];
    size_t got_len = 0;
    if (!j || !h) {
        CHECK(0);
        return;
    }
    unlink(path);
    strbuf_init(&want);
    headless_frontend(h, &fe);
    j->nccl_debug_default = true;
    for (int i = 0; i < 40000; i++) {
        size_t n = 0, len = rnd() % (i % 50 == 0 ? 8500 : 160);
        while (n < len) {
            if (rnd() % 100 < (i % 4 ? 97u : 70u)) {
                text[n++] = (char)(0x20 + rnd() % 95);
            } else {
                const char *o = odd[rnd() % (sizeof odd / sizeof *odd)];
                size_t k = o[0] ? strlen(o) : 1;
                if (n + k > sizeof text) break;
                memcpy(text + n, o, k);
                n += k;
            }
        }
        struct log_line l = {
            .seq = (uint64_t)i + 1,
            .stream = (uint8_t)(rnd() % 10 == 0 ? LOG_STDERR : rnd() % 50 == 0 ? LOG_SYSTEM : LOG_STDOUT),
            .flags = (uint8_t)((rnd() % 20 == 0 ? LOG_LINE_TRUNCATED : 0) | (rnd() % 40 == 0 ? LOG_LINE_NCCL : 0)),
            .len = (uint32_t)n,
            .text = text,
        };
        int rank = (int)(rnd() % 7 < 4 ? (unsigned)(i / 100) % 4 : rnd() % 4);
        j->attempt = i / 10000;
        fe.on_line(fe.ctx, j, rank, &l);
        if (!(l.flags & LOG_LINE_NCCL)) ref_line(&want, j, rank, &l);
        if (i % 1000 == 0) fe.on_tick(fe.ctx, j);
    }
    headless_free(h);
    lseek(fd, 0, SEEK_SET);
    char *got = slurp_fd(fd, &got_len);
    close(fd);
    CHECK_INT(got_len, want.len);
    size_t k = 0;
    while (k < got_len && k < want.len && got[k] == want.buf[k]) k++;
    if (k < want.len || k < got_len) printf("#   first difference at byte %zu\n", k);
    CHECK(got_len == want.len && memcmp(got, want.buf, got_len) == 0);
    free(got);
    strbuf_done(&want);
    job_free(j);
}

/* A pipe nobody reads while 20 MB of lines come: the queue takes lines while they fit in its
 * bound, the rest are dropped, and the count comes before the next event's line. */
static void test_dropped_counted(void)
{
    int p[2];
    char out[] = "/tmp/test_headless_out.XXXXXX";
    int ofd = mkstemp(out);
    struct job *j = new_job();
    struct headless *h;
    struct frontend fe;
    struct strbuf want;
    char text[100];
    size_t total = 200000, line_len, fit, got_len = 0;
    pid_t child;
    if (!j || ofd < 0 || pipe(p) != 0) {
        CHECK(0);
        return;
    }
    unlink(out);
    h = headless_new(p[1]);
    headless_frontend(h, &fe);
    memset(text, 'x', sizeof text);
    strbuf_init(&want);
    for (size_t i = 0; i < total; i++) {
        struct log_line l = { .stream = LOG_STDOUT, .len = sizeof text, .text = text };
        memcpy(text, &"0123456789"[i % 10], 1);
        fe.on_line(fe.ctx, j, 1, &l);
        if (!i) {
            size_t m = want.len;
            ref_line(&want, j, 1, &l);
            line_len = want.len - m;
            strbuf_reset(&want);
        }
    }
    fit = HEADLESS_QUEUE_MAX / line_len;   /* lines that fit in the bound: the rest dropped */
    for (size_t i = 0; i < fit; i++) {
        struct log_line l = { .stream = LOG_STDOUT, .len = sizeof text, .text = text };
        memcpy(text, &"0123456789"[i % 10], 1);
        ref_line(&want, j, 1, &l);
    }
    strbuf_addf(&want, "[ddptop] %zu lines not shown here (output too slow); the log files have them\n", total - fit);
    strbuf_adds(&want, "[ddptop] the end\n");
    child = fork();
    if (child == 0) {            /* the reader, only now: copies the pipe into the file */
        char buf[65536];
        ssize_t n;
        close(p[1]);
        while ((n = read(p[0], buf, sizeof buf)) > 0)
            if (write(ofd, buf, (size_t)n) != n) _exit(1);
        _exit(0);
    }
    close(p[0]);
    struct job_event ev = { .kind = EV_INFO, .rank = -1, .node = -1, .text = (char *)"the end" };
    fe.on_event(fe.ctx, j, &ev);
    headless_free(h);
    close(p[1]);
    waitpid(child, NULL, 0);
    lseek(ofd, 0, SEEK_SET);
    char *got = slurp_fd(ofd, &got_len);
    close(ofd);
    CHECK_INT(got_len, want.len);
    CHECK(got_len == want.len && memcmp(got, want.buf, got_len) == 0);
    free(got);
    strbuf_done(&want);
    job_free(j);
}

static void line(struct frontend *fe, struct job *j, int rank, int stream, const char *text)
{
    struct log_line l = { .stream = (uint8_t)stream, .len = (uint32_t)strlen(text), .text = (char *)text };
    fe->on_line(fe->ctx, j, rank, &l);
}

static void test_folded(void)
{
    char path[] = "/tmp/test_headless_fold.XXXXXX";
    int fd = mkstemp(path);
    struct job *j = new_job();
    struct headless *h = fd >= 0 ? headless_new(fd) : NULL;
    struct frontend fe;
    if (!j || !h) {
        CHECK(0);
        return;
    }
    unlink(path);
    headless_set_fold(h, true);
    headless_frontend(h, &fe);
    line(&fe, j, 0, LOG_STDERR, "UserWarning: \x1b]0;x\x07" "deprecated");
    line(&fe, j, 2, LOG_STDERR, "UserWarning: \x1b]0;x\x07" "deprecated");
    line(&fe, j, 1, LOG_STDERR, "UserWarning: \x1b]0;x\x07" "deprecated");
    line(&fe, j, 3, LOG_STDOUT, "hello from 3");
    /* rank 3's warning comes after its hello: it cannot join the group before it */
    line(&fe, j, 3, LOG_STDERR, "UserWarning: \x1b]0;x\x07" "deprecated");
    line(&fe, j, 0, LOG_STDOUT, "step 1");
    line(&fe, j, 1, LOG_STDOUT, "step 1");
    struct job_event ev = { .kind = EV_INFO, .rank = 1, .node = 0, .text = (char *)"rank 1 exited" };
    fe.on_event(fe.ctx, j, &ev);
    line(&fe, j, 2, LOG_STDOUT, "step 1");   /* joins rank 0's and 1's: the event is about 1 */
    line(&fe, j, 1, LOG_STDOUT, "step 1");   /* after its exit: a line of its own */
    headless_finish(h, j, 0);
    headless_free(h);
    const char *want =
        "[r0-2 gpu1,n^[[31mode2 err] UserWarning: ^[]0;x^Gdeprecated\n"
        "[r3 n^[[31mode2] hello from 3\n"
        "[r3 n^[[31mode2 err] UserWarning: ^[]0;x^Gdeprecated\n"
        "[r0-2 gpu1,n^[[31mode2] step 1\n"
        "[ddptop] rank 1 exited\n"
        "[r1 gpu1] step 1\n";
    expect_output(fd, want);
    job_free(j);
}

/* A folded line's prefix is kept for the next group of the same ranks (issue 32 part 3): it
 * must follow every change of the ranks, their order, and the stream. */
static void test_folded_prefix_follows(void)
{
    char path[] = "/tmp/test_headless_fold2.XXXXXX";
    int fd = mkstemp(path);
    struct job *j = new_job();
    struct headless *h = fd >= 0 ? headless_new(fd) : NULL;
    struct frontend fe;
    if (!j || !h) {
        CHECK(0);
        return;
    }
    unlink(path);
    headless_set_fold(h, true);
    headless_frontend(h, &fe);
    static const struct { int rank, stream; const char *text; } in[] = {
        {0, LOG_STDOUT, "a"}, {1, LOG_STDOUT, "a"}, {0, LOG_STDOUT, "b"}, {1, LOG_STDOUT, "b"},
        {2, LOG_STDOUT, "c"}, {0, LOG_STDOUT, "c"}, {1, LOG_STDOUT, "d"}, {0, LOG_STDOUT, "d"},
        {0, LOG_STDERR, "e"}, {1, LOG_STDERR, "e"}, {0, LOG_STDOUT, "f"}, {1, LOG_STDOUT, "f"},
        {3, LOG_STDOUT, "f"}, {2, LOG_STDOUT, "f"},
    };
    for (size_t k = 0; k < sizeof in / sizeof in[0]; k++) line(&fe, j, in[k].rank, in[k].stream, in[k].text);
    headless_finish(h, j, 0);
    headless_free(h);
    const char *want =
        "[r0-1 gpu1] a\n"
        "[r0-1 gpu1] b\n"
        "[r0,2 gpu1,n^[[31mode2] c\n"
        "[r0-1 gpu1] d\n"
        "[r0-1 gpu1 err] e\n"
        "[r0-3 gpu1,n^[[31mode2] f\n";
    expect_output(fd, want);
    job_free(j);
}

int main(void)
{
    RUN(test_lines_as_before);
    RUN(test_folded);
    RUN(test_folded_prefix_follows);
    RUN(test_dropped_counted);
    return tap_done();
}
