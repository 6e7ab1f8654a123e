/* Unit tests for the run's file writer and its log index (launcher/job/logw.c), the part a
 * takeover relies on: the durable marks move only with an index on disk that holds them; the
 * index is read back as written; a controller taking a run over cuts each rank's log back to
 * the index (bytes written after it, and later attempts, go) so that what the agents send again
 * follows without a gap or a repeat; and an index that cannot be written moves no mark (the
 * agents keep the output) and says so once. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job/logw.h"
#include "tap.h"
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

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-logw.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_marks_follow_the_index);
    RUN(test_cut_back_to_the_index);
    RUN(test_no_index_no_acknowledgement);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
