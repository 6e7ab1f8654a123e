/* Unit tests for one line for N ranks (launcher/job/log_fold.c, issue 30): 64 ranks printing
 * the same warning are one group, closed as soon as the last rank joined, while one rank
 * printing something else stays alone; the window; a two-line warning as two folded lines in
 * order; random streams of lines from many ranks (with tight bounds) told once each, every
 * rank's lines in order, none held past the window; pieces of lines never folded; ranks as
 * ranges and nodes as a hostlist; and a flood of distinct lines that keeps the open groups
 * within their bounds at a cost per line that does not grow with the flood. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "job/job.h"
#include "job/log_fold.h"
#include "job/log_ring.h"
#include "tap.h"
#include "util/util.h"

static char err[256];

static struct log_fold_group *add(struct log_fold *f, int64_t now, int rank, const char *text)
{
    return log_fold_add(f, now, rank, LOG_STDERR, 0, 0, text, strlen(text));
}

static char *where(const struct job *j, const struct log_fold_group *g)
{
    struct strbuf sb;
    int *r = xmalloc(g->n * sizeof *r);
    memcpy(r, g->ranks, g->n * sizeof *r);
    strbuf_init(&sb);
    log_fold_where(&sb, j, r, g->n);
    free(r);
    return sb.buf ? sb.buf : xstrdup("");
}

static struct job *job_8x8(void)
{
    const char *names[] = { "n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08" };
    int per[] = { 8, 8, 8, 8, 8, 8, 8, 8 };
    struct job *j = job_new("fold", NULL, 0, names, NULL, per, 8, err, sizeof err);
    if (!j) printf("# job_new: %s\n", err);
    return j;
}

static void test_64_ranks_one_line(void)
{
    struct job *j = job_8x8();
    struct log_fold *f = log_fold_new(LOG_FOLD_WINDOW_MS, LOG_FOLD_MAX_GROUPS, LOG_FOLD_MAX_BYTES);
    const char *w = "/x/train.py:3: UserWarning: the thing is deprecated";
    log_fold_set_world(f, 64);
    /* rank 5 first with something else, then the warning from every rank (in node order
     * reversed, as the nodes' connections happen to be read) */
    add(f, 1000, 5, "rank 5 says hello");
    for (int i = 0; i < 64; i++) {
        int r = 63 - i;
        struct log_fold_group *g = add(f, 1000 + i, r, w);
        CHECK_INT(g->id, 2);
        CHECK_INT(g->n, (size_t)i + 1);
        CHECK_INT(g->ranks[0], 63);
        /* the hello (the oldest) holds the warning back until its window is over */
        CHECK(log_fold_due(f, 1000 + i, false) == NULL);
    }
    const struct log_fold_group *g = log_fold_due(f, 1499, false);
    CHECK(g == NULL);
    CHECK_INT(log_fold_wait_ms(f, 1499), 1);
    g = log_fold_due(f, 1500, false);
    CHECK(g && g->n == 1 && g->ranks[0] == 5 && strcmp(g->text, "rank 5 says hello") == 0);
    log_fold_pop(f);
    /* complete: every rank is in it, so it closes at once, long before its window */
    g = log_fold_due(f, 1500, false);
    CHECK(g && g->n == 64 && g->len == strlen(w) && memcmp(g->text, w, g->len) == 0);
    if (g && j) {
        char *s = where(j, g);
        CHECK_STR(s, "r0-63 n[01-08]");
        free(s);
    }
    log_fold_pop(f);
    CHECK(log_fold_due(f, 99999, true) == NULL);
    CHECK_INT(log_fold_wait_ms(f, 1500), -1);
    log_fold_free(f);

    /* without rank 5's other line first, the 64 lines close as soon as the last one came */
    f = log_fold_new(LOG_FOLD_WINDOW_MS, LOG_FOLD_MAX_GROUPS, LOG_FOLD_MAX_BYTES);
    log_fold_set_world(f, 64);
    for (int r = 0; r < 63; r++) add(f, 2000, r, w);
    CHECK(log_fold_due(f, 2000, false) == NULL);
    add(f, 2001, 63, w);
    g = log_fold_due(f, 2001, false);
    CHECK(g && g->n == 64);
    log_fold_free(f);
    job_free(j);
}

static void test_window(void)
{
    struct log_fold *f = log_fold_new(500, 64, 1 << 20);
    log_fold_set_world(f, 8);
    struct log_fold_group *a = add(f, 0, 0, "W");
    uint64_t id = a->id;
    CHECK_INT(add(f, 499, 1, "W")->id, id);     /* within the window: joins */
    CHECK_INT(add(f, 500, 2, "W")->id, id + 1); /* at its end: a new group */
    CHECK_INT(add(f, 600, 3, "W")->id, id + 1); /* the new group's window */
    CHECK_INT(add(f, 600, 3, "w")->id, id + 2); /* other bytes */
    CHECK_INT(log_fold_add(f, 600, 4, LOG_STDOUT, 0, 0, "W", 1)->id, id + 3); /* another stream */
    CHECK_INT(log_fold_add(f, 600, 5, LOG_STDERR, 1, 0, "W", 1)->id, id + 4); /* another attempt */
    CHECK_INT(log_fold_add(f, 600, 6, LOG_STDERR, 0, LOG_LINE_TRUNCATED, "W", 1)->id, id + 5);
    /* pieces of a line never fold, not even with each other */
    CHECK_INT(log_fold_add(f, 600, 0, LOG_STDERR, 0, LOG_LINE_PARTIAL, "progress 50%", 12)->id, id + 6);
    CHECK_INT(log_fold_add(f, 600, 1, LOG_STDERR, 0, LOG_LINE_PARTIAL, "progress 50%", 12)->id, id + 7);
    CHECK_INT(log_fold_add(f, 600, 2, LOG_STDERR, 0, LOG_LINE_SPLIT, "xx", 2)->id, id + 8);
    CHECK_INT(log_fold_add(f, 600, 3, LOG_STDERR, 0, LOG_LINE_SPLIT, "xx", 2)->id, id + 9);
    /* a rank already in the group: its second line is a line after it, not the same one */
    CHECK_INT(add(f, 601, 2, "W")->id, id + 10);
    CHECK_INT(add(f, 602, 7, "W")->id, id + 1);
    size_t bytes, n = log_fold_open(f, &bytes);
    CHECK_INT(n, 11);
    CHECK_INT(bytes, 7 + 12 * 2 + 4);
    /* closing: oldest first, each at its window's end */
    CHECK(log_fold_due(f, 499, false) == NULL);
    CHECK(log_fold_due(f, 500, false) != NULL);
    log_fold_pop(f);
    CHECK(log_fold_due(f, 999, false) == NULL);
    CHECK_INT(log_fold_wait_ms(f, 900), 100);
    const struct log_fold_group *g = log_fold_due(f, 1000, false);
    CHECK(g && g->n == 3 && g->ranks[0] == 2 && g->ranks[1] == 3 && g->ranks[2] == 7);
    log_fold_free(f);
}

/* A Python warning is two lines ("file:3: UserWarning: ..." and "  warnings.warn(...)"); each
 * rank prints both at once, the ranks one after another: two folded lines, in order. And two
 * ranks printing the same two lines in opposite orders: neither sees its lines swapped. */
static void test_order(void)
{
    struct log_fold *f = log_fold_new(500, 4096, 1 << 20);
    log_fold_set_world(f, 16);
    for (int r = 0; r < 16; r++) {
        CHECK_INT(add(f, r, r, "t.py:3: UserWarning: x")->id, 1);
        CHECK_INT(add(f, r, r, "  warnings.warn(")->id, 2);
    }
    const struct log_fold_group *g = log_fold_due(f, 20, false);
    CHECK(g && g->id == 1 && g->n == 16);
    log_fold_pop(f);
    g = log_fold_due(f, 20, false);
    CHECK(g && g->id == 2 && g->n == 16);
    log_fold_pop(f);

    add(f, 100, 0, "A");      /* 3 */
    add(f, 100, 0, "B");      /* 4 */
    CHECK_INT(add(f, 101, 1, "B")->id, 4);
    CHECK_INT(add(f, 101, 1, "A")->id, 5);   /* group 3 is before its B: a new one */
    while (log_fold_due(f, 0, true)) log_fold_pop(f);

    /* the printer's events go in line (LOG_FOLD_ALONE): rank 0's exit after its last line
     * keeps its place; rank 1's same last line still joins rank 0's, and a line of rank 0
     * after its exit does not; an alone entry closes as soon as it is the oldest */
    CHECK(!log_fold_holds(f, 0));
    CHECK_INT(add(f, 200, 0, "done")->id, 6);
    CHECK(log_fold_holds(f, 0) && !log_fold_holds(f, 1));
    CHECK_INT(log_fold_add(f, 200, 0, -1, 0, LOG_FOLD_ALONE, "rank 0 exited", 13)->id, 7);
    CHECK_INT(add(f, 201, 1, "done")->id, 6);
    CHECK_INT(log_fold_add(f, 201, 1, -1, 0, LOG_FOLD_ALONE, "rank 1 exited", 13)->id, 8);
    CHECK_INT(add(f, 202, 0, "done")->id, 9);
    CHECK(log_fold_due(f, 699, false) == NULL);
    CHECK_INT(log_fold_wait_ms(f, 600), 100);
    g = log_fold_due(f, 700, false);
    CHECK(g && g->id == 6 && g->n == 2);
    log_fold_pop(f);
    CHECK_INT(log_fold_wait_ms(f, 700), 0);
    g = log_fold_due(f, 700, false);
    CHECK(g && g->id == 7 && g->solo);
    log_fold_pop(f);
    g = log_fold_due(f, 700, false);
    CHECK(g && g->id == 8);
    log_fold_pop(f);
    CHECK(log_fold_due(f, 700, false) == NULL);
    CHECK(log_fold_holds(f, 0) && !log_fold_holds(f, 1));
    log_fold_free(f);
}

/* Random lines of 24 ranks from a few texts, at random times, with tight bounds, taken as the
 * printer takes them (after each line, and when the oldest group's window ends): every line
 * told once, in a group of its own text; each rank's lines in the order it printed them; none
 * held longer than the window; the open groups never over their bounds. */
enum { RANKS = 24, LINES = 200000, WIN = 300 };
static const char *const texts[] = { "warn A", "warn B", "loss 1", "", "step", "x y z" };
struct sim {
    struct log_fold *f;
    int seq_sent[RANKS], seq_told[RANKS];
    int *sent_text;           /* each rank's k-th line: its text */
    int64_t *sent_at;
    size_t told, worst_open, worst_bytes, bad_order, bad_text;
    int64_t worst_delay;
};

static void sim_take(struct sim *m, int64_t now, bool all)
{
    const struct log_fold_group *g;
    while ((g = log_fold_due(m->f, now, all))) {
        for (size_t k = 0; k < g->n; k++) {
            int rk = g->ranks[k];
            size_t at = (size_t)rk * LINES + (size_t)m->seq_told[rk]++;
            if (m->seq_told[rk] > m->seq_sent[rk]) m->bad_order++;
            else if (strcmp(texts[m->sent_text[at]], g->text) != 0) m->bad_text++;
            else if (!all && now - m->sent_at[at] > m->worst_delay) m->worst_delay = now - m->sent_at[at];
            m->told++;
        }
        log_fold_pop(m->f);
    }
    size_t bytes, open = log_fold_open(m->f, &bytes);
    if (open > m->worst_open) m->worst_open = open;
    if (bytes > m->worst_bytes) m->worst_bytes = bytes;
}

static void test_random_order_and_delay(void)
{
    static struct sim m;
    int64_t now = 0;
    unsigned s = 7;
    m.f = log_fold_new(WIN, 16, 256);
    m.sent_text = xcalloc((size_t)RANKS * LINES, sizeof *m.sent_text);
    m.sent_at = xcalloc((size_t)RANKS * LINES, sizeof *m.sent_at);
    log_fold_set_world(m.f, RANKS);
    for (int i = 0; i < LINES; i++) {
        s = s * 1103515245u + 12345u;
        int64_t next = now + ((s >> 16) % 7 == 0 ? (s >> 8) % 400 : 0);
        /* the loop's timer: the printer is called when the oldest group's window ends */
        for (int64_t w; (w = log_fold_wait_ms(m.f, now)) >= 0 && now + w <= next;) {
            now += w;
            sim_take(&m, now, false);
        }
        now = next;
        int r = (int)((s >> 4) % RANKS), t = (int)((s >> 12) % (sizeof texts / sizeof *texts));
        m.sent_text[(size_t)r * LINES + (size_t)m.seq_sent[r]] = t;
        m.sent_at[(size_t)r * LINES + (size_t)m.seq_sent[r]] = now;
        m.seq_sent[r]++;
        add(m.f, now, r, texts[t]);
        sim_take(&m, now, false);
    }
    sim_take(&m, now, true);
    printf("# %zu lines told, %zu open groups at most, %zu bytes, held %lld ms at most\n", m.told,
           m.worst_open, m.worst_bytes, (long long)m.worst_delay);
    CHECK_INT(m.told, LINES);
    CHECK_INT(m.bad_order, 0);
    CHECK_INT(m.bad_text, 0);
    for (int r = 0; r < RANKS; r++) CHECK_INT(m.seq_told[r], m.seq_sent[r]);
    CHECK(m.worst_delay <= WIN);
    CHECK(m.worst_open <= 16);
    CHECK(m.worst_bytes <= 256);
    free(m.sent_text);
    free(m.sent_at);
    log_fold_free(m.f);
}

static void test_ranges(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int a[] = { 15, 3, 8, 1, 2, 0, 12, 13, 14 };
    log_fold_ranks_format(&sb, a, sizeof a / sizeof *a);
    CHECK_STR(sb.buf, "0-3,8,12-15");
    strbuf_reset(&sb);
    int b[] = { 5 };
    log_fold_ranks_format(&sb, b, 1);
    CHECK_STR(sb.buf, "5");
    strbuf_reset(&sb);
    int c[] = { 7, 7, 6, 9, 9 };
    log_fold_ranks_format(&sb, c, 5);
    CHECK_STR(sb.buf, "6-7,9");
    strbuf_reset(&sb);
    struct job *j = job_8x8();
    if (j) {
        int d[] = { 8, 0, 1, 2, 3 };
        log_fold_where(&sb, j, d, 5);
        CHECK_STR(sb.buf, "r0-3,8 n[01-02]");
        strbuf_reset(&sb);
        int e[] = { 63, 0 };
        log_fold_where(&sb, j, e, 2);
        CHECK_STR(sb.buf, "r0,63 n[01,08]");
        job_free(j);
    }
    strbuf_done(&sb);
}

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A rank flooding distinct lines (a counter in each) within one window: the open groups stay
 * within their bounds (and the cost per line is printed for a hundred thousand and a million). A
 * caller that never takes what closed loses the oldest, and memory stays bounded too. */
static double flood(size_t lines, size_t *worst_open, size_t *worst_bytes, bool drain)
{
    struct log_fold *f = log_fold_new(LOG_FOLD_WINDOW_MS, LOG_FOLD_MAX_GROUPS, LOG_FOLD_MAX_BYTES);
    char text[128];
    double t0 = secs();
    log_fold_set_world(f, 2);
    *worst_open = *worst_bytes = 0;
    for (size_t i = 0; i < lines; i++) {
        int n = snprintf(text, sizeof text, "%098zu", i);
        log_fold_add(f, 0, 0, LOG_STDOUT, 0, 0, text, (size_t)n);
        if (i % 1000 == 0) log_fold_add(f, 0, 1, LOG_STDOUT, 0, 0, "quiet", 5);
        while (drain && log_fold_due(f, 0, false)) log_fold_pop(f);
        size_t bytes, open = log_fold_open(f, &bytes);
        if (open > *worst_open) *worst_open = open;
        if (bytes > *worst_bytes) *worst_bytes = bytes;
    }
    double dt = secs() - t0;
    log_fold_free(f);
    return dt / (double)lines;
}

static void test_flood_bounded(void)
{
    size_t open, bytes;
    double small = flood(100000, &open, &bytes, true);
    double big = flood(1000000, &open, &bytes, true);
    printf("# per line: %.0f ns (100k lines), %.0f ns (1M lines); open groups at most %zu, %zu bytes\n",
           small * 1e9, big * 1e9, open, bytes);
    CHECK(open <= LOG_FOLD_MAX_GROUPS);
    CHECK(bytes <= LOG_FOLD_MAX_BYTES);
    /* the per-line figures are printed, not asserted: speed is the bench's (docs/testing.md),
     * and a loaded machine makes a timed check fail for nothing */
    flood(200000, &open, &bytes, false);
    CHECK(open <= LOG_FOLD_MAX_GROUPS * 2);  /* the ring, a power of two above the bound */
}

/* Each line joins the group the definition names (log_fold.h): the oldest open group of its
 * text begun after its rank's last line, within the window; else a new one. Checked against a
 * plain scan of the open groups, for random lines of 6 ranks from 3 texts at random times,
 * partly in lockstep (every rank the same line, as in a flood: the path that skips the hash,
 * issue 32 part 3), with groups taken as the printer takes them. */
static void test_joins_as_defined(void)
{
    enum { R = 6, N = 100000, CAP = 64, W = 50 };
    static const char *const tx[] = { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab" };
    static int g_text[N + 1];
    static int64_t g_t0[N + 1];
    uint64_t last[R] = {0}, head = 1, next = 1;
    size_t bad = 0;
    int64_t now = 0;
    unsigned s = 11;
    struct log_fold *f = log_fold_new(W, CAP, 1u << 20);
    log_fold_set_world(f, R + 1);   /* no group closes for being full: only the window and the bound */
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        if ((s >> 16) % 5 == 0) now += (s >> 8) % 30;
        bool lockstep = (s >> 20) % 2;
        int r = lockstep ? i % R : (int)((s >> 4) % R);
        int t = lockstep ? (i / R) % 3 : (int)((s >> 12) % 3);
        uint64_t want = next;
        for (uint64_t id = last[r] + 1 > head ? last[r] + 1 : head; id < next; id++)
            if (g_text[id] == t && now - g_t0[id] < W) {
                want = id;
                break;
            }
        const struct log_fold_group *g = add(f, now, r, tx[t]);
        if (!g || g->id != want) bad++;
        if (want == next) {
            g_text[next] = t;
            g_t0[next++] = now;
        }
        last[r] = want;
        while (log_fold_due(f, now, false)) {
            log_fold_pop(f);
            head++;
        }
    }
    CHECK_INT(bad, 0);
    log_fold_free(f);
}

int main(void)
{
    RUN(test_64_ranks_one_line);
    RUN(test_joins_as_defined);
    RUN(test_window);
    RUN(test_order);
    RUN(test_random_order_and_delay);
    RUN(test_ranges);
    RUN(test_flood_bounded);
    return tap_done();
}
