/* Unit tests for the log writer's hold (launcher/record/logw_hold.c): while thousands of small
 * pieces a second come in and nobody reads the logs, a rank's lines are joined into fewer
 * writes, but what a user relies on stays: every line reaches its file within the promised
 * bound (LOGW_HOLD_MS, then the next sync) without anyone asking; a reader of the logs on this
 * machine (`ddptop logs -f`, tail -f) gets the lines as before, not seconds late; so does a
 * rank's first line (the rank has started); logw_drain
 * (the end, a takeover) writes all of it; and the durable marks, which the agents' copies
 * hang on, never count a held byte. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record/logw.h"
#include "tap.h"
#include "tmptree.h"
#include "util/util.h"

#define RANKS 16
#define LINE_LEN 11 /* "l%09d" and its newline */
/* LOGW_HOLD_MS (logw_int.h): a held line is written at the first sync after this */
#define HOLD_MS 4000

static char tmpdir[64];

struct bed {
    struct logw *w;
    char *dir;
    uint64_t seq[RANKS];
    int64_t next_sync_ms;
};

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static char *rank_path(const struct bed *b, int rank)
{
    return xasprintf("%s/attempt-0/rank-%d.log", b->dir, rank);
}

static bool bed_open(struct bed *b, const char *name)
{
    char err[256] = "";
    memset(b, 0, sizeof *b);
    b->dir = xasprintf("%s/%s", tmpdir, name);
    mkdir(b->dir, 0700);
    b->w = logw_new(b->dir, RANKS, err, sizeof err);
    if (!b->w) {
        printf("# logw_new: %s\n", err);
        free(b->dir);
        return false;
    }
    logw_attempt(b->w, 0);
    logw_drain(b->w, 10000);
    b->next_sync_ms = mono_ms() + 1000;
    return true;
}

static void bed_close(struct bed *b)
{
    logw_free(b->w);
    free(b->dir);
}

static void put_line(struct bed *b, int rank)
{
    char text[16];
    b->seq[rank]++;
    snprintf(text, sizeof text, "l%09llu", (unsigned long long)b->seq[rank]);
    logw_rank(b->w, rank, 0, b->seq[rank], 0, text, strlen(text), true);
}

/* A line every 10 ms to each rank in [from, RANKS) (1,500-1,600 pieces a second: a trickle of
 * many ranks, as 1,024 nodes x 8 ranks printing a line a second), and a sync a second, as the
 * controller does, for ms. */
static void trickle(struct bed *b, int from, int ms)
{
    int64_t until = mono_ms() + ms;
    while (mono_ms() < until) {
        for (int r = from; r < RANKS; r++) put_line(b, r);
        if (mono_ms() >= b->next_sync_ms) {
            logw_sync(b->w);
            b->next_sync_ms = mono_ms() + 1000;
        }
        usleep(10000);
    }
}

/* Trickles on (ranks 1..) until rank's file holds want bytes or ms pass; how long it took. */
static int64_t trickle_until(struct bed *b, int rank, long long want, int ms)
{
    char *p = rank_path(b, rank);
    int64_t t0 = mono_ms();
    while (file_size(p) < want && mono_ms() - t0 < ms) trickle(b, 1, 50);
    int64_t took = mono_ms() - t0;
    free(p);
    return took;
}

/* Lines held are written within the bound with no one asking, in fewer writes than lines;
 * the marks count only what is written; a drain writes the rest. */
static void test_hold_bounded(void)
{
    struct bed b;
    if (!bed_open(&b, "bounded")) { CHECK(0); return; }
    uint64_t w0 = logw_rank_writes(b.w);
    trickle(&b, 0, 3000);
    uint64_t lines = 0;
    for (int r = 0; r < RANKS; r++) lines += b.seq[r];
    uint64_t writes = logw_rank_writes(b.w) - w0;
    printf("# %llu lines in %llu writes\n", (unsigned long long)lines, (unsigned long long)writes);
    CHECK(writes * 2 < lines);
    /* rank 0 goes quiet with one more line; the others go on */
    put_line(&b, 0);
    long long want = (long long)b.seq[0] * LINE_LEN;
    int64_t took = trickle_until(&b, 0, want, 3 * HOLD_MS);
    char *p0 = rank_path(&b, 0);
    CHECK_INT(file_size(p0), want);
    printf("# rank 0's last line on disk after %lld ms\n", (long long)took);
    CHECK(took <= HOLD_MS + 2000);
    /* the index never counts what is held: each rank's mark is at most what its file has */
    struct logw_mark m[RANKS];
    bool within = true;
    if (logw_read_index(b.dir, m, RANKS) == 0) {
        for (int r = 0; r < RANKS; r++) {
            char *p = rank_path(&b, r);
            if (m[r].attempt == 0 && ((long long)m[r].bytes > file_size(p) || m[r].seq * LINE_LEN != m[r].bytes))
                within = false;
            free(p);
        }
    }
    CHECK(within);
    CHECK(logw_drain(b.w, 10000));
    bool whole = true, marked = true;
    for (int r = 0; r < RANKS; r++) {
        char *p = rank_path(&b, r);
        uint64_t seq, base;
        if (file_size(p) != (long long)b.seq[r] * LINE_LEN) whole = false;
        logw_durable(b.w, r, &seq, &base);
        if (seq != b.seq[r]) marked = false;
        free(p);
    }
    CHECK(whole);
    CHECK(marked);
    free(p0);
    bed_close(&b);
}

/* Someone reading a rank log here (`ddptop logs -f` opens and reads them): the writer writes
 * what it has as soon as it is idle again, not a hold later. */
static void test_hold_reader(void)
{
    struct bed b;
    if (!bed_open(&b, "reader")) { CHECK(0); return; }
    trickle(&b, 0, 2000);
    char *p0 = rank_path(&b, 0);
    int fd = open(p0, O_RDONLY);
    CHECK(fd >= 0);
    char buf[4096];
    while (fd >= 0 && read(fd, buf, sizeof buf) > 0) {}
    trickle(&b, 1, 100);
    put_line(&b, 0);
    int64_t took = trickle_until(&b, 0, (long long)b.seq[0] * LINE_LEN, 3 * HOLD_MS);
    printf("# with a reader, rank 0's line on disk after %lld ms\n", (long long)took);
    CHECK_INT(file_size(p0), (long long)b.seq[0] * LINE_LEN);
    CHECK(took < HOLD_MS - 1000);
    if (fd >= 0) close(fd);
    free(p0);
    bed_close(&b);
}

/* While holding, a rank's first line of the attempt is written when the writer is next idle:
 * its file says at once that it has started. */
static void test_first_line_at_once(void)
{
    struct bed b;
    if (!bed_open(&b, "first")) { CHECK(0); return; }
    trickle(&b, 1, 2000);
    uint64_t w0 = logw_rank_writes(b.w);
    trickle(&b, 1, 1000);
    uint64_t lines = 15 * 100; /* about: ranks 1.. at a line every 10 ms, for a second */
    CHECK(logw_rank_writes(b.w) - w0 < lines / 2); /* holding by now */
    put_line(&b, 0);
    int64_t took = trickle_until(&b, 0, LINE_LEN, 3 * HOLD_MS);
    printf("# rank 0's first line on disk after %lld ms\n", (long long)took);
    char *p0 = rank_path(&b, 0);
    CHECK_INT(file_size(p0), LINE_LEN);
    CHECK(took < HOLD_MS - 1000);
    free(p0);
    bed_close(&b);
}

/* A few ranks printing: nothing is held (a reader of another machine sees lines as before). */
static void test_no_hold_when_few(void)
{
    struct bed b;
    if (!bed_open(&b, "few")) { CHECK(0); return; }
    uint64_t w0 = logw_rank_writes(b.w);
    int64_t until = mono_ms() + 1500;
    while (mono_ms() < until) {
        put_line(&b, 0);
        usleep(20000);
    }
    put_line(&b, 0);
    char *p0 = rank_path(&b, 0);
    long long want = (long long)b.seq[0] * LINE_LEN;
    until = mono_ms() + 5000;
    while (file_size(p0) < want && mono_ms() < until) usleep(10000);
    CHECK_INT(file_size(p0), want); /* no sync was asked for */
    CHECK(logw_rank_writes(b.w) - w0 > 1);
    free(p0);
    bed_close(&b);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-logw-hold.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_hold_bounded);
    RUN(test_hold_reader);
    RUN(test_first_line_at_once);
    RUN(test_no_hold_when_few);
    tmptree_remove(tmpdir);
    return tap_done();
}
