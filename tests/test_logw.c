/* Unit tests for the run's file writer and its log index (launcher/record/logw.c), the part a
 * takeover relies on: the durable marks move only with an index on disk that holds them; the
 * index is read back as written; a controller taking a run over cuts each rank's log back to
 * the index (bytes written after it, and later attempts, go) so that what the agents send again
 * follows without a gap or a repeat; and an index that cannot be written moves no mark (the
 * agents keep the output) and says so once. */
#include <errno.h>
#include <stdbool.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record/logw.h"
#include "tap.h"
#include "tmptree.h"
#include "util/util.h"

static char tmpdir[64];

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return xstrdup("");
    char *buf = xcalloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A writer of n ranks in a new directory tmpdir/name (*dir, the caller's to free), its
 * attempt 0 begun; NULL (said) when it cannot be made. */
static struct logw *writer_in(const char *name, size_t n, char **dir)
{
    char err[256] = "";
    *dir = xasprintf("%s/%s", tmpdir, name);
    mkdir(*dir, 0700);
    struct logw *w = logw_new(*dir, n, err, sizeof err);
    CHECK(w != NULL);
    if (!w) {
        printf("# logw_new: %s\n", err);
        free(*dir);
        *dir = NULL;
        return NULL;
    }
    logw_attempt(w, 0);
    return w;
}

static void line(struct logw *w, int rank, int attempt, uint64_t seq, uint64_t base, const char *text)
{
    logw_rank(w, rank, attempt, seq, base, text, strlen(text), true);
}

static void test_marks_follow_the_index(void)
{
    char *dir = xasprintf("%s/marks", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    struct logw *w = logw_new(dir, 2, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { printf("# logw_new: %s\n", err); free(dir); return; }
    logw_attempt(w, 0);
    line(w, 0, 0, 1, 0, "a");
    line(w, 0, 0, 2, 0, "bb");
    line(w, 0, 0, 3, 0, "ccc");
    uint64_t seq = 9, base = 9;
    logw_durable(w, 0, &seq, &base);
    CHECK_INT(seq, 0); /* written perhaps, but no index counts it yet: nothing to acknowledge */
    CHECK(logw_drain(w, 10000));
    logw_durable(w, 0, &seq, &base);
    CHECK_INT(seq, 3);
    CHECK_INT(base, 0);
    logw_durable(w, 1, &seq, &base);
    CHECK_INT(seq, 0);

    struct logw_mark m[2];
    CHECK_INT(logw_read_index(dir, m, 2), 0);
    CHECK_INT(m[0].attempt, 0);
    CHECK_INT(m[0].seq, 3);
    CHECK_INT(m[0].bytes, 9); /* "a\nbb\nccc\n" */
    CHECK_INT(m[1].attempt, -1);

    /* a note of ddptop's own (seq 0) moves no number but is counted in the bytes */
    line(w, 0, 0, 0, 0, "note");
    line(w, 1, 0, 5, 100, "x");
    CHECK(logw_drain(w, 10000));
    CHECK_INT(logw_read_index(dir, m, 2), 0);
    CHECK_INT(m[0].seq, 3);
    CHECK_INT(m[0].bytes, 14);
    CHECK_INT(m[1].seq, 5);
    CHECK_INT(m[1].base, 100);
    logw_durable(w, 1, &seq, &base);
    CHECK_INT(seq, 5);
    CHECK_INT(base, 100);
    logw_free(w);
    free(dir);
}

/* Many ranks (more than LOGW_SYNCFS_MIN) are made durable by one syncfs, not one fdatasync
 * each: the marks of every one of them still move with the index, and the index counts each
 * rank's bytes. */
static void test_many_ranks_durable(void)
{
    enum { N = 100 };
    char *dir = xasprintf("%s/many", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    struct logw *w = logw_new(dir, N, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { printf("# logw_new: %s\n", err); free(dir); return; }
    logw_attempt(w, 0);
    for (int r = 0; r < N; r++) {
        line(w, r, 0, 1, 0, "first");
        line(w, r, 0, 2, 0, "second");
    }
    CHECK(logw_drain(w, 10000));
    bool all = true;
    for (int r = 0; r < N; r++) {
        uint64_t seq = 0, base = 9;
        logw_durable(w, r, &seq, &base);
        if (seq != 2 || base != 0) all = false;
    }
    CHECK(all);
    struct logw_mark m[N];
    CHECK_INT(logw_read_index(dir, m, N), 0);
    CHECK_INT(m[0].seq, 2);
    CHECK_INT(m[N - 1].seq, 2);
    CHECK_INT(m[N - 1].bytes, 13); /* "first\nsecond\n" */
    logw_free(w);
    free(dir);
}

/* The controller wrote lines 4 and 5 and died before the index counted them; a later attempt
 * had begun. The taker cuts back to the index and starts its marks there. */
static void test_cut_back_to_the_index(void)
{
    char *dir = xasprintf("%s/cut", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    struct logw *w = logw_new(dir, 1, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { free(dir); return; }
    logw_attempt(w, 0);
    line(w, 0, 0, 1, 0, "one");
    line(w, 0, 0, 2, 0, "two");
    CHECK(logw_drain(w, 10000));
    char *index = xasprintf("%s/%s", dir, LOG_INDEX_FILE);
    char *kept = slurp(index);
    line(w, 0, 0, 3, 0, "three");
    logw_attempt(w, 1);
    line(w, 0, 1, 4, 0, "again");
    logw_free(w);
    /* the index the dead controller left: only lines 1 and 2 */
    FILE *f = fopen(index, "w");
    fputs(kept, f);
    fclose(f);

    struct logw_mark m[1];
    CHECK_INT(logw_read_index(dir, m, 1), 0);
    CHECK_INT(m[0].attempt, 0);
    CHECK_INT(m[0].seq, 2);
    w = logw_new(dir, 1, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { free(kept); free(index); free(dir); return; }
    logw_cut_back(w, m, 1);
    uint64_t seq, base;
    logw_durable(w, 0, &seq, &base);
    CHECK_INT(seq, 2);
    logw_attempt(w, 0);
    line(w, 0, 0, 3, 0, "three"); /* what the agent sends again, after 2 */
    CHECK(logw_drain(w, 10000));
    logw_free(w);
    char *p0 = xasprintf("%s/attempt-0/rank-0.log", dir), *p1 = xasprintf("%s/attempt-1/rank-0.log", dir);
    char *got = slurp(p0);
    CHECK_STR(got, "one\ntwo\nthree\n");
    CHECK_INT(file_size(p1), 0);
    free(got);
    free(p0);
    free(p1);
    free(kept);
    free(index);
    free(dir);
}

/* An index that cannot be replaced (here: a directory stands where it goes) acknowledges
 * nothing, says why once, and the marks move again once it can be written. */
static void test_no_index_no_acknowledgement(void)
{
    char *dir = xasprintf("%s/noindex", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    char *index = xasprintf("%s/%s", dir, LOG_INDEX_FILE);
    mkdir(index, 0700);
    char *inside = xasprintf("%s/x", index);
    FILE *f = fopen(inside, "w"); /* not empty: rename() cannot replace it */
    fclose(f);
    struct logw *w = logw_new(dir, 1, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { free(inside); free(index); free(dir); return; }
    logw_attempt(w, 0);
    line(w, 0, 0, 1, 0, "kept by the agent");
    CHECK(logw_drain(w, 10000));
    uint64_t seq = 9, base;
    logw_durable(w, 0, &seq, &base);
    CHECK_INT(seq, 0);
    char *e = logw_take_error(w);
    CHECK(e && strstr(e, "cannot write") && strstr(e, LOG_INDEX_FILE) && strstr(e, "agents keep"));
    if (e) printf("# %s\n", e);
    free(e);
    e = logw_take_error(w);
    CHECK(e == NULL); /* once */
    free(e);
    unlink(inside);
    rmdir(index);
    CHECK(logw_drain(w, 10000));
    logw_durable(w, 0, &seq, &base);
    CHECK_INT(seq, 1);
    logw_free(w);
    free(inside);
    free(index);
    free(dir);
}

static int file_mode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

/* What reached an idle writer is in the files without a sync (a SIGKILL of the controller
 * loses none of it): the buffers only join the pieces of a busy spell. */
static void test_idle_writer_writes(void)
{
    char *dir = xasprintf("%s/idle", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    struct logw *w = logw_new(dir, 2, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { free(dir); return; }
    logw_attempt(w, 0);
    line(w, 0, 0, 1, 0, "first");
    line(w, 1, 0, 1, 0, "other rank");
    line(w, 0, 0, 2, 0, "second");
    char *p0 = xasprintf("%s/attempt-0/rank-0.log", dir), *p1 = xasprintf("%s/attempt-0/rank-1.log", dir);
    int64_t until = mono_ms() + 5000;
    while ((file_size(p0) != 13 || file_size(p1) != 11) && mono_ms() < until) usleep(10000);
    CHECK_INT(file_size(p0), 13);  /* no logw_sync was asked for */
    CHECK_INT(file_size(p1), 11);
    logw_free(w);
    free(p0);
    free(p1);
    free(dir);
}

/* A rank's buffer starts at 1 KiB and grows as the rank prints more (8,192 ranks at a line a
 * second kept 40 MiB of mostly empty 64 KiB buffers): pieces of every size, across each
 * doubling and past 64 KiB, reach the file whole and in order. */
static void test_rank_buffer_grows(void)
{
    char *dir = NULL;
    struct logw *w = writer_in("grow", 1, &dir);
    if (!w) return;
    size_t total = 0, cap = 400000;
    char *want = xmalloc(cap);
    uint64_t seq = 0;
    for (size_t n = 1; total + n + 1 <= cap && n < 90000; n = n * 3 / 2 + 7) {
        char *piece = xmalloc(n + 1);
        for (size_t k = 0; k < n; k++) piece[k] = (char)('a' + (seq + k) % 26);
        piece[n] = '\n';
        logw_rank(w, 0, 0, ++seq, 0, piece, n + 1, false);
        memcpy(want + total, piece, n + 1);
        total += n + 1;
        free(piece);
    }
    CHECK(logw_drain(w, 10000));
    logw_free(w);
    char *p = xasprintf("%s/attempt-0/rank-0.log", dir);
    FILE *f = fopen(p, "rb");
    char *got = xmalloc(cap + 1);
    size_t n = f ? fread(got, 1, cap + 1, f) : 0;
    if (f) fclose(f);
    CHECK_INT((long long)n, (long long)total);
    CHECK(n == total && memcmp(got, want, total) == 0);
    free(got);
    free(want);
    free(p);
    free(dir);
}

/* The run's files are private (0600, directories 0700) until logw_set_mode, which changes
 * those open and those made afterwards; the reserve is gone after logw_free. */
static void test_modes(void)
{
    char *dir = xasprintf("%s/modes", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    mode_t old = umask(0);  /* the modes must not depend on it */
    struct logw *w = logw_new(dir, 1, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { umask(old); free(dir); return; }
    char *ev = xasprintf("%s/events.jsonl", dir), *a0 = xasprintf("%s/attempt-0", dir),
         *a1 = xasprintf("%s/attempt-1", dir), *r0 = xasprintf("%s/attempt-0/rank-0.log", dir),
         *r1 = xasprintf("%s/attempt-1/rank-0.log", dir), *res = xasprintf("%s/%s", dir, LOG_RESERVE_FILE);
    logw_attempt(w, 0);
    line(w, 0, 0, 1, 0, "x");
    CHECK(logw_drain(w, 10000));
    CHECK_INT(file_mode(ev), 0600);
    CHECK_INT(file_mode(a0), 0700);
    CHECK_INT(file_mode(r0), 0600);
    CHECK_INT(file_size(res), 64 * 1024);
    logw_set_mode(w, 0640);
    logw_attempt(w, 1);
    line(w, 0, 1, 2, 0, "y");
    CHECK(logw_drain(w, 10000));
    CHECK_INT(file_mode(ev), 0640);
    CHECK_INT(file_mode(r0), 0640);
    CHECK_INT(file_mode(a1), 0750);
    CHECK_INT(file_mode(r1), 0640);
    struct logw_loss l;
    CHECK(!logw_loss(w, &l)); /* nothing lost */
    logw_free(w);
    umask(old);
    CHECK_INT(file_size(res), -1);
    free(ev); free(a0); free(a1); free(r0); free(r1); free(res);
    free(dir);
}

static void test_log_mode_parse(void)
{
    unsigned m = 0;
    CHECK(log_mode_parse("private", &m) == 0 && m == 0600);
    CHECK(log_mode_parse("group", &m) == 0 && m == 0640);
    CHECK(log_mode_parse("0644", &m) == 0 && m == 0644);
    CHECK(log_mode_parse("604", &m) == 0 && m == 0604);
    CHECK(log_mode_parse("0666", &m) < 0);   /* writable by others */
    CHECK(log_mode_parse("0660", &m) < 0);
    CHECK(log_mode_parse("0400", &m) < 0);   /* we must write them */
    CHECK(log_mode_parse("0755", &m) < 0);
    CHECK(log_mode_parse("", &m) < 0);
    CHECK(log_mode_parse("0640x", &m) < 0);
    CHECK_INT(log_mode_dir(0600), 0700);
    CHECK_INT(log_mode_dir(0640), 0750);
    CHECK_INT(log_mode_dir(0644), 0755);
}

/* The incomplete file as `ddptop ls` reads it: bounded, a link refused. */
static void test_read_incomplete(void)
{
    char *dir = xasprintf("%s/incomplete", tmpdir);
    mkdir(dir, 0700);
    char *p = xasprintf("%s/%s", dir, LOG_INCOMPLETE_FILE);
    char reason[16], detail[32];
    CHECK(!logw_read_incomplete(dir, reason, sizeof reason, detail, sizeof detail));
    FILE *f = fopen(p, "w");
    fputs("disk full\nnot written: 3 events and a very long tail that is cut\n", f);
    fclose(f);
    CHECK(logw_read_incomplete(dir, reason, sizeof reason, detail, sizeof detail));
    CHECK_STR(reason, "disk full");
    CHECK_STR(detail, "not written: 3 events and a ver");
    unlink(p);
    CHECK(symlink("/etc/passwd", p) == 0);
    CHECK(!logw_read_incomplete(dir, reason, sizeof reason, detail, sizeof detail));
    unlink(p);
    free(p);
    free(dir);
}

/* Small pieces (a line: the usual message of a job of many ranks) are not put in the pool's
 * 4 KiB chunks: a backlog of them would take 30 times its bytes (logw_pool.c). */
static void test_chunk_pool_small(void)
{
    char *dir = xasprintf("%s/pool-small", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    struct logw *w = logw_new(dir, 4, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { free(dir); return; }
    logw_attempt(w, 0);
    char line[100];
    memset(line, 'x', sizeof line);
    for (int i = 0; i < 1000; i++) logw_rank(w, i % 4, 0, (uint64_t)(i / 4 + 1), 0, line, sizeof line, true);
    CHECK(logw_drain(w, 10000));
    size_t held = 1;
    uint64_t reused = 1;
    logw_pool_stats(w, &held, &reused);
    CHECK(held == 0);
    CHECK(reused == 0);
    logw_free(w);
    free(dir);
}

/* The chunks between the loop and the writer are recycled (logw_pool.c): pieces of every size
 * from 1 byte to 200 KiB, every byte value, reach the file exactly, in order; chunks are
 * reused; what the pool holds stays within its bound. */
static void test_chunk_pool(void)
{
    char *dir = xasprintf("%s/pool", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    struct logw *w = logw_new(dir, 1, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { free(dir); return; }
    logw_attempt(w, 0);
    size_t max = 200 * 1024, total = 0;
    unsigned char *piece = xmalloc(max);
    uint64_t seq = 0;
    for (int round = 0; round < 3; round++)
        for (size_t n = 1; n <= max; n = n * 3 + 1) {
            for (size_t k = 0; k < n; k++) piece[k] = (unsigned char)((total + k) * 7);
            logw_rank(w, 0, 0, ++seq, 0, piece, n, false);
            total += n;
            if (n > 1000) CHECK(logw_drain(w, 10000)); /* processed, so its chunk is back */
        }
    CHECK(logw_drain(w, 10000));
    size_t held = 0;
    uint64_t reused = 0;
    logw_pool_stats(w, &held, &reused);
    CHECK(reused > 0);
    CHECK(held <= 2u << 20);
    logw_free(w);
    char *path = xasprintf("%s/attempt-0/rank-0.log", dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    size_t got = 0, bad = 0;
    int ch;
    while (f && (ch = fgetc(f)) != EOF) {
        if ((unsigned char)ch != (unsigned char)(got * 7)) bad++;
        got++;
    }
    if (f) fclose(f);
    CHECK_INT(got, total);
    CHECK_INT(bad, 0);
    free(path);
    free(piece);
    free(dir);
}

/* A loop that kicks (logw_kick): its rank bytes reach the writer at the kick, or at once when
 * 1 MiB waits; events are never held back. */
static void test_kick(void)
{
    char *dir = xasprintf("%s/kick", tmpdir);
    char err[256] = "";
    mkdir(dir, 0700);
    struct logw *w = logw_new(dir, 1, err, sizeof err);
    CHECK(w != NULL);
    if (!w) { free(dir); return; }
    logw_attempt(w, 0);
    CHECK(logw_drain(w, 10000));
    logw_kick(w);
    line(w, 0, 0, 1, 0, "held until the kick");
    char *p0 = xasprintf("%s/attempt-0/rank-0.log", dir);
    logw_kick(w);                         /* without it the thread may sleep on (until 1 MiB) */
    int64_t until = mono_ms() + 5000;
    while (file_size(p0) != 20 && mono_ms() < until) usleep(10000);
    CHECK_INT(file_size(p0), 20);
    /* past 1 MiB queued the thread is woken without a kick */
    char *big = xmalloc(64 * 1024);
    memset(big, 'x', 64 * 1024);
    for (int k = 0; k < 17; k++) logw_rank(w, 0, 0, (uint64_t)k + 2, 0, big, 64 * 1024, false);
    until = mono_ms() + 5000;
    while (file_size(p0) < 20 + 16 * 64 * 1024 && mono_ms() < until) usleep(10000);
    CHECK(file_size(p0) >= 20 + 16 * 64 * 1024);
    logw_free(w);
    CHECK_INT(file_size(p0), 20 + 17 * 64 * 1024);
    free(big);
    free(p0);
    free(dir);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-logw.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_marks_follow_the_index);
    RUN(test_many_ranks_durable);
    RUN(test_cut_back_to_the_index);
    RUN(test_no_index_no_acknowledgement);
    RUN(test_idle_writer_writes);
    RUN(test_rank_buffer_grows);
    RUN(test_modes);
    RUN(test_log_mode_parse);
    RUN(test_read_incomplete);
    RUN(test_chunk_pool);
    RUN(test_chunk_pool_small);
    RUN(test_kick);
    tmptree_remove(tmpdir);
    return tap_done();
}
