/* The dashboard's panes without a terminal: selection scrolling through thousands of ranks,
 * the chart's per-step aggregate (incremental, no double counting, a restarted attempt
 * replaces the steps it re-runs), the log pane's positions, search and error jumps (rank and
 * merged), and what the panes put on a curses screen written to /dev/null (read back with
 * winnstr): rank rows, hostile host names and log bytes shown escaped, the too-small notice;
 * and issue 12: step lines in words, long events wrapped (or cut with w), the log following
 * the current attempt after a restart; issue 30: the all-ranks log folded (a line of several
 * ranks once, with its ranks and node, each rank's lines in order, the search finding it), and
 * unfolded with u's flag. */
#include <curses.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dashboard_int.h"
#include "job/job.h"
#include "record/logw.h"
#include "job/rank_report.h"
#include "keymap.h"
#include "job_files.h"
#include "tap.h"
#include "util/util.h"
#include "panes.h"

static char tmpdir[] = "/tmp/ddptop-test-views.XXXXXX";

static struct job *make_job(int n_ranks, const char *node_name)
{
    char err[256];
    const char *names[] = { node_name };
    int per[] = { n_ranks };
    struct job *j = tjob_new("t", tmpdir, 0, names, NULL, per, 1, err, sizeof err);
    if (!j) { printf("# job_new: %s\n", err); return NULL; }
    if (job_attempt_begin(j, err, sizeof err) != 0) printf("# attempt: %s\n", err);
    return j;
}

static void init_ui(struct ui_state *ui)
{
    memset(ui, 0, sizeof *ui);
    ui->focus = AREA_RANKS;
    ui->modal = KM_COUNT;
    ui->follow = true;
}

static void test_scroll_keeps_selection_visible(void)
{
    struct ui_state ui;
    init_ui(&ui);
    const int n = 5000, cap = 20;
    int max_jump = 0;
    for (int s = 0; s < n; s++) {
        int before = ui.ranks_top;
        ranks_scroll_to(&ui.ranks_top, s, n, cap, 1);
        CHECK(s >= ui.ranks_top && s < ui.ranks_top + cap);
        if (abs(ui.ranks_top - before) > max_jump) max_jump = abs(ui.ranks_top - before);
    }
    CHECK_INT(max_jump, 1);              /* smooth: one line at a time */
    CHECK_INT(ui.ranks_top, n - cap);
    ranks_scroll_to(&ui.ranks_top, 3, n, cap, 1);
    CHECK_INT(ui.ranks_top, 3);
    /* out of range places are clamped; fewer ranks than rows: top 0 */
    ranks_scroll_to(&ui.ranks_top, 99999, 7, cap, 1);
    CHECK_INT(ui.ranks_top, 0);
    /* grid: 10 per row, 5 rows on screen */
    init_ui(&ui);
    ranks_scroll_to(&ui.ranks_top, 4999, n, 50, 10);
    CHECK_INT(ui.ranks_top, 500 - 5);
    ranks_scroll_to(&ui.ranks_top, 0, n, 50, 10);
    CHECK_INT(ui.ranks_top, 0);
    /* a selection the filter hides (-1): the top only stays in range */
    ui.ranks_top = 4990;
    ranks_scroll_to(&ui.ranks_top, -1, 100, cap, 1);
    CHECK_INT(ui.ranks_top, 80);
}

static void test_chart_aggregate(void)
{
    struct job *j = make_job(3, "localhost");
    if (!j) { CHECK(0); return; }
    struct chart_cache c;
    chart_cache_init(&c);
    for (int r = 0; r < 3; r++) {
        job_metric_add(j, r, 10, 4.0 + r, NAN, NAN);
        job_metric_add(j, r, 20, 3.0 + r, NAN, NAN);
    }
    chart_cache_update(&c, j);
    CHECK_INT(c.n, 2);
    if (c.n == 2) {
        CHECK_NEAR(c.pts[0].step, 10, 0);
        CHECK_NEAR(c.pts[0].sum / c.pts[0].n, 5.0, 1e-9);
        CHECK_NEAR(c.pts[0].lo, 4.0, 0);
        CHECK_NEAR(c.pts[0].hi, 6.0, 0);
        CHECK_INT(c.pts[1].n, 3);
    }
    /* nothing new: nothing counted twice */
    chart_cache_update(&c, j);
    CHECK_INT(c.n, 2);
    CHECK_INT(c.n ? c.pts[0].n : 0, 3);
    /* one rank ahead */
    job_metric_add(j, 0, 30, 2.0, NAN, NAN);
    chart_cache_update(&c, j);
    CHECK_INT(c.n, 3);
    CHECK_INT(c.n == 3 ? c.pts[2].n : 0, 1);
    CHECK_INT(c.pts[1].n, 3);
    /* then the last rank alone, twice between two updates: both points, once each, and the
     * ranks that added nothing (told by their series' stamps) add nothing */
    job_metric_add(j, 2, 30, 4.0, NAN, NAN);
    job_metric_add(j, 2, 40, 3.0, NAN, NAN);
    chart_cache_update(&c, j);
    chart_cache_update(&c, j);
    CHECK_INT(c.n, 4);
    CHECK_INT(c.n == 4 ? c.pts[2].n : 0, 2);
    CHECK_NEAR(c.n == 4 ? c.pts[2].sum : 0, 6.0, 1e-9);
    CHECK_INT(c.n == 4 ? c.pts[3].n : 0, 1);
    CHECK_INT(c.pts[1].n, 3);
    /* a restart resumed from the snapshot at step 10: its step 20 replaces the old 20 and 30 */
    j->attempt = 1;
    for (int r = 0; r < 3; r++) job_metric_add(j, r, 20, 2.5, NAN, NAN);
    chart_cache_update(&c, j);
    CHECK_INT(c.n, 2);
    if (c.n == 2) {
        CHECK_INT(c.pts[1].n, 3);
        CHECK_NEAR(c.pts[1].sum / c.pts[1].n, 2.5, 1e-9);
        CHECK_INT(c.pts[0].n, 3);
    }
    /* bounded: many steps are merged, the newest kept */
    for (long s = 30; s < 30 + 3 * CHART_MAX_POINTS; s++) job_metric_add(j, 0, s, 1.0, NAN, NAN);
    chart_cache_update(&c, j);
    CHECK(c.n <= CHART_MAX_POINTS);
    CHECK(c.n > CHART_MAX_POINTS / 2);
    CHECK(c.n && c.pts[c.n - 1].step >= 29 + 3 * CHART_MAX_POINTS - 1);
    chart_cache_done(&c);
    tjob_free(j);
}

static void add_line(struct job *j, int rank, const char *s)
{
    job_log_append(j, rank, LOG_STDOUT, 0, s, strlen(s));
}

static void test_log_positions_and_search(void)
{
    struct job *j = make_job(2, "localhost");
    if (!j) { CHECK(0); return; }
    add_line(j, 0, "hello");
    add_line(j, 0, "Traceback (most recent call last):");
    add_line(j, 0, "foo bar");
    add_line(j, 0, "RuntimeError: boom");
    add_line(j, 0, "the end");
    add_line(j, 1, "NCCL WARN peer gone");
    struct ui_state ui;
    init_ui(&ui);
    uint64_t first, end;
    log_src_range(j, &ui, &first, &end);
    CHECK_INT(first, 1);
    CHECK_INT(end, 6);
    size_t len;
    const char *t = log_src_text(j, &ui, 3, &len, NULL, NULL);
    CHECK(t && len == 7 && memcmp(t, "foo bar", 7) == 0);
    CHECK(log_src_text(j, &ui, 6, &len, NULL, NULL) == NULL);
    /* e: from the bottom towards older lines, wrapping */
    uint64_t e1 = log_src_find(j, &ui, 0, -1, NULL);
    CHECK_INT(e1, 4);
    uint64_t e2 = log_src_find(j, &ui, e1, -1, NULL);
    CHECK_INT(e2, 2);
    CHECK_INT(log_src_find(j, &ui, e2, -1, NULL), 4);
    /* search, case-insensitive, both directions */
    CHECK_INT(log_src_find(j, &ui, 0, -1, "FOO"), 3);
    CHECK_INT(log_src_find(j, &ui, 0, 1, "e"), 1);
    CHECK_INT(log_src_find(j, &ui, 1, 1, "e"), 2);
    CHECK_INT(log_src_find(j, &ui, 0, -1, "absent"), 0);
    CHECK(log_is_error_line("NCCL WARN x", 11));
    CHECK(!log_is_error_line("all good", 8));
    /* merged: references by arrival */
    struct merged_ref refs[4] = { { 0, 1, 0 }, { 1, 1, 0 }, { 0, 2, 0 }, { 0, 99, 0 } };
    ui.merged = refs;
    ui.merged_cap = 4;
    ui.merged_total = 4;
    ui.log_mode = LOGV_ALL;
    log_src_range(j, &ui, &first, &end);
    CHECK_INT(first, 1);
    CHECK_INT(end, 5);
    int rank = -1;
    t = log_src_text(j, &ui, 2, &len, &rank, NULL);
    CHECK(t && rank == 1 && len == 19 && memcmp(t, "NCCL WARN", 9) == 0);
    CHECK(log_src_text(j, &ui, 4, &len, NULL, NULL) == NULL);   /* gone from the ring */
    CHECK_INT(log_src_find(j, &ui, 0, -1, NULL), 3);             /* Traceback, newest error */
    tjob_free(j);
}

/* Row y of window w as text (trailing blanks kept). */
static void row_text(WINDOW *w, int y, char *buf, int n)
{
    mvwinnstr(w, y, 0, buf, n - 1);
}

static bool any_row_contains(WINDOW *w, const char *needle)
{
    char buf[512];
    for (int y = 0; y < getmaxy(w); y++) {
        row_text(w, y, buf, sizeof buf);
        if (strstr(buf, needle)) return true;
    }
    return false;
}

static void test_drawing(void)
{
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    setenv("LINES", "40", 1);
    setenv("COLUMNS", "120", 1);
    SCREEN *scr = newterm("xterm", out, in);
    if (!scr) { tap_skip("drawing", "no xterm terminfo entry"); return; }
    struct paint p;
    memset(&p, 0, sizeof p);
    for (int r = 0; r < ROLE_COUNT; r++) p.role[r] = A_NORMAL;
    p.ascii = true;
    struct job *j = make_job(3, "evil\x1b]0;pwned\x07");
    if (!j) { CHECK(0); endwin(); delscreen(scr); return; }
    job_rank_started(j, 0, 4242);
    job_metric_add(j, 0, 17, 2.5, 12.0, NAN);
    job_rank_started(j, 1, 4343);
    job_metric_add_as(j, 1, 17, NAN, LOSS_NAN, 12.0, NAN);   /* `loss nan`: said, in no mean */
    add_line(j, 0, "\x1b[31mred\x1b[0m text");
    struct ui_state ui;
    init_ui(&ui);
    ui.now_ms = mono_ms();

    WINDOW *w = newwin(10, 100, 0, 0);
    struct rank_view v;
    rank_view_init(&v);
    struct rank_view_opts vo;
    ranks_view_opts(&ui, 8, &vo);
    rank_view_update(&v, j, &vo);
    pane_ranks_draw(w, j, &ui, &v, &p);
    rank_view_done(&v);
    char row[512];
    row_text(w, 2, row, sizeof row);
    CHECK(strstr(row, "4242") != NULL);
    CHECK(strstr(row, "running") != NULL);
    CHECK(strstr(row, " 17 ") != NULL);
    CHECK(strstr(row, "2.5") != NULL);
    CHECK(strstr(row, "^[]0;pwned^G") != NULL);     /* the title-setting host name, escaped */
    CHECK(any_row_contains(w, "pending"));           /* rank 2 not started */
    CHECK(any_row_contains(w, "NaN"));               /* rank 1's loss, not "-" */
    CHECK(!any_row_contains(w, "\x1b"));
    delwin(w);

    w = newwin(8, 100, 0, 0);
    pane_log_draw(w, j, &ui, &p);
    CHECK(any_row_contains(w, "^[[31mred^[[0m text"));
    CHECK(any_row_contains(w, "Log of rank 0"));
    delwin(w);

    w = newwin(2, 120, 0, 0);
    pane_header_draw(w, j, &ui, &p);
    CHECK(any_row_contains(w, "world 3"));
    CHECK(any_row_contains(w, "loss 2.5"));         /* rank 1's NaN is not in the mean */
    CHECK(any_row_contains(w, "loss NaN/inf on 1 rank"));
    delwin(w);

    w = newwin(8, 30, 0, 0);
    pane_too_small(w, 8, 30, &p);
    CHECK(any_row_contains(w, "terminal too small"));
    delwin(w);

    /* the help overlay lists every key of the table (first lines at least) */
    ui.help_lines = keymap_help_lines(&ui.n_help);
    w = newwin(40, 80, 0, 0);
    pane_help_draw(w, &ui, &p);
    CHECK(any_row_contains(w, "restart"));
    CHECK(any_row_contains(w, "quit"));
    delwin(w);
    keymap_help_free(ui.help_lines, ui.n_help);

    tjob_free(j);
    endwin();
    delscreen(scr);
    fclose(out);
    fclose(in);
}

/* A curses screen on /dev/null and a paint without colours, for the drawing tests. */
struct scr {
    FILE *out, *in;
    SCREEN *scr;
    struct paint p;
};

static bool scr_open(struct scr *s)
{
    s->out = fopen("/dev/null", "w");
    s->in = fopen("/dev/null", "r");
    setenv("LINES", "40", 1);
    setenv("COLUMNS", "120", 1);
    s->scr = newterm("xterm", s->out, s->in);
    memset(&s->p, 0, sizeof s->p);
    for (int r = 0; r < ROLE_COUNT; r++) s->p.role[r] = A_NORMAL;
    s->p.ascii = true;
    return s->scr != NULL;
}

static void scr_close(struct scr *s)
{
    if (s->scr) {
        endwin();
        delscreen(s->scr);
    }
    fclose(s->out);
    fclose(s->in);
}

/* Issue 12, 2: the runtime's JSON step line in words in the pane; the ring and the log file
 * keep the raw line; a search finds it by either text. */
static void test_step_lines_in_words(void)
{
    struct scr sc;
    if (!scr_open(&sc)) { tap_skip("step lines", "no xterm terminfo entry"); scr_close(&sc); return; }
    struct job *j = make_job(1, "localhost");
    if (!j) { CHECK(0); scr_close(&sc); return; }
    const char *raw = "{\"event\":\"step\",\"v\":1,\"rank\":0,\"step\":12,\"loss\":4.87,"
                      "\"step_ms\":100.0,\"tokens_per_s\":12345.6}";
    add_line(j, 0, "hello");
    add_line(j, 0, raw);
    add_line(j, 0, "{\"loss\": 3.25}");              /* someone else's JSON: as it is */
    struct ui_state ui;
    init_ui(&ui);
    WINDOW *w = newwin(6, 100, 0, 0);
    pane_log_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "step 12  loss 4.87  100.0 ms/step  12.3k tok/s"));
    CHECK(!any_row_contains(w, "\"event\""));
    CHECK(any_row_contains(w, "{\"loss\": 3.25}"));
    /* the model keeps the raw line */
    size_t len;
    const char *t = log_src_text(j, &ui, 2, &len, NULL, NULL);
    CHECK(t && len == strlen(raw) && memcmp(t, raw, len) == 0);
    /* found by the words on screen and by the JSON in the log file */
    CHECK_INT(log_src_find(j, &ui, 0, -1, "tok/s"), 2);
    CHECK_INT(log_src_find(j, &ui, 0, -1, "ms/step"), 2);
    CHECK_INT(log_src_find(j, &ui, 0, -1, "\"tokens_per_s\""), 2);
    CHECK_INT(log_src_find(j, &ui, 0, -1, "step 12"), 2);
    /* a search hit in the words is highlighted there (the line is drawn, not the JSON) */
    snprintf(ui.search, sizeof ui.search, "loss 4.87");
    pane_log_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "step 12  loss 4.87"));
    delwin(w);
    /* the log file holds exactly what the rank wrote */
    run_files_flush(tjob_files(j));
    CHECK(logw_drain(tjob_writer(j), 10000));
    char path[256], buf[8192] = "";
    snprintf(path, sizeof path, "%s/t/attempt-0/rank-0.log", tmpdir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(buf, raw) != NULL);
    CHECK(strstr(buf, "ms/step") == NULL);
    tjob_free(j);
    scr_close(&sc);
}

/* Text of the events pane's rows from row y0 with the heads (time and kind: 19 columns on
 * a row that starts with the time) and the indent of wrapped rows (9) left out, blanks
 * dropped, to compare with the events' texts without their spaces. */
static void events_text(WINDOW *w, int y0, char *out, size_t n)
{
    size_t o = 0;
    for (int y = y0; y < getmaxy(w); y++) {
        char row[512];
        row_text(w, y, row, sizeof row);
        for (const char *c = row + (row[0] >= '0' && row[0] <= '9' ? 19 : 9); *c && o + 1 < n; c++)
            if (*c != ' ') out[o++] = *c;
    }
    out[o] = '\0';
}

static void squeeze(const char *s, char *out, size_t n)
{
    size_t o = strlen(out);
    for (; *s && o + 1 < n; s++)
        if (*s != ' ') out[o++] = *s;
    out[o] = '\0';
}

/* Issue 12, 3: a long event wraps over as many rows as it needs; w cuts each to one row with
 * an ellipsis; when one event needs more rows than the pane has, its last row says so. */
static void test_events_wrap(void)
{
    struct scr sc;
    if (!scr_open(&sc)) { tap_skip("events", "no xterm terminfo entry"); scr_close(&sc); return; }
    struct job *j = make_job(1, "localhost");
    if (!j) { CHECK(0); scr_close(&sc); return; }
    const char *ev = "attempt 0: launching 1 rank on 1 node (run t, logs in "
                     "/tmp/a-rather-long-directory/logs/t/attempt-0)";
    const char *ev2 = "rank 0 on localhost exited with code 0";
    job_event_add(j, EV_LAUNCH, -1, -1, "%s", ev);
    struct ui_state ui;
    init_ui(&ui);
    WINDOW *w = newwin(8, 40, 0, 0);
    pane_events_draw(w, j, &ui, &sc.p);
    char got[1024], want[1024] = "", row[512];
    events_text(w, 1, got, sizeof got);
    squeeze(ev, want, sizeof want);
    CHECK_STR(got, want);                    /* every character of it, in order */
    row_text(w, 1, row, sizeof row);
    CHECK(strstr(row, "launch") != NULL);
    row_text(w, 2, row, sizeof row);
    CHECK(strncmp(row, "         ", 9) == 0 && row[9] != ' ');   /* under the kind word */
    /* an event after it: both whole, the newest below */
    job_event_add(j, EV_EXIT, 0, 0, "%s", ev2);
    pane_events_draw(w, j, &ui, &sc.p);
    events_text(w, 1, got, sizeof got);
    squeeze(ev2, want, sizeof want);
    CHECK_STR(got, want);
    /* w: one row each, cut with an ellipsis ('~' without UTF-8) */
    ui.events_cut = true;
    pane_events_draw(w, j, &ui, &sc.p);
    row_text(w, 1, row, sizeof row);
    CHECK(strstr(row, "launch") != NULL && row[39] == '~');
    row_text(w, 2, row, sizeof row);
    CHECK(strstr(row, "rank 0 on localhost") != NULL && row[39] == '~');
    CHECK(!any_row_contains(w, "attempt-0)"));
    delwin(w);
    /* a pane of three event rows: the newest event whole, the older one's end above it */
    ui.events_cut = false;
    w = newwin(4, 40, 0, 0);
    pane_events_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "rank 0 on localhost"));
    CHECK(any_row_contains(w, "code 0"));
    CHECK(any_row_contains(w, "attempt-0)"));
    CHECK(!any_row_contains(w, "launch"));
    /* one event taller than the pane: its first rows, the last one ending in '~' */
    ui.events_back = 1;
    pane_events_draw(w, j, &ui, &sc.p);
    row_text(w, 1, row, sizeof row);
    CHECK(strstr(row, "launch") != NULL);
    row_text(w, 3, row, sizeof row);
    CHECK(row[39] == '~');
    CHECK(!any_row_contains(w, "code 0"));
    delwin(w);
    tjob_free(j);
    scr_close(&sc);
}

/* Issue 20: the root cause pinned above the events has its class, the line that proved it
 * and the fix, each on a row of its own. */
static void test_root_cause_class(void)
{
    struct scr sc;
    if (!scr_open(&sc)) { tap_skip("root cause class", "no xterm terminfo entry"); scr_close(&sc); return; }
    struct job *j = make_job(1, "localhost");
    if (!j) { CHECK(0); scr_close(&sc); return; }
    job_rank_started(j, 0, 100);
    const char *oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.";
    job_log_append(j, 0, LOG_STDERR, 0, oom, strlen(oom));
    job_rank_exited(j, 0, 1, 0, false, NULL, 0);   /* the only rank: the class is decided */
    struct ui_state ui;
    init_ui(&ui);
    WINDOW *w = newwin(12, 100, 0, 0);
    pane_events_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "ROOT CAUSE: rank 0 on localhost exited with code 1"));
    CHECK(any_row_contains(w, "class: CUDA out of memory"));
    CHECK(any_row_contains(w, "evidence: torch.OutOfMemoryError: CUDA out of memory. Tried"));
    CHECK(any_row_contains(w, "fix: lower the per-GPU batch size"));
    delwin(w);
    /* a short pane keeps the class, drops the rest */
    w = newwin(4, 100, 0, 0);
    pane_events_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "class: CUDA out of memory"));
    CHECK(!any_row_contains(w, "fix: "));
    delwin(w);
    /* the header's root cause leads with the class */
    w = newwin(2, 160, 0, 0);
    pane_header_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "root cause: CUDA out of memory: rank 0 on localhost exited with code 1"));
    delwin(w);
    tjob_free(j);
    scr_close(&sc);
}

/* Issue 12, 4: after a restart the pane shows the new attempt's lines after a marker; [
 * pins an earlier attempt; search stays within the attempt shown. */
static void test_log_attempts(void)
{
    struct scr sc;
    if (!scr_open(&sc)) { tap_skip("attempts", "no xterm terminfo entry"); scr_close(&sc); return; }
    struct job *j = make_job(2, "localhost");
    if (!j) { CHECK(0); scr_close(&sc); return; }
    add_line(j, 0, "old line one");
    add_line(j, 0, "old line two");
    add_line(j, 1, "old of rank 1");
    struct ui_state ui;
    init_ui(&ui);
    uint64_t first, end;
    log_src_range(j, &ui, &first, &end);
    CHECK_INT(first, 1);                     /* attempt 0: no marker */
    CHECK_INT(end, 3);
    j->attempt = 1;                          /* what a restart's job_attempt_begin leaves */
    log_src_range(j, &ui, &first, &end);
    CHECK_INT(first, 2);                     /* only the marker, no line of attempt 1 yet */
    CHECK_INT(end, 3);
    WINDOW *w = newwin(6, 100, 0, 0);
    pane_log_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "--- attempt 1"));
    CHECK(!any_row_contains(w, "old line"));
    add_line(j, 0, "new line one");
    add_line(j, 0, "new line two");
    add_line(j, 1, "new of rank 1");
    log_src_range(j, &ui, &first, &end);
    CHECK_INT(first, 2);
    CHECK_INT(end, 5);
    size_t len;
    int rank = 0, stream = LOG_STDOUT;
    const char *t = log_src_text(j, &ui, 2, &len, &rank, &stream);
    CHECK(t && strncmp(t, "--- attempt 1", 13) == 0 && rank == -1 && stream == LOG_SYSTEM);
    CHECK(log_src_text(j, &ui, 1, &len, NULL, NULL) == NULL);
    pane_log_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "new line one"));
    CHECK(any_row_contains(w, "new line two"));
    CHECK(!any_row_contains(w, "old line"));
    CHECK(any_row_contains(w, "attempt 1"));
    char row[512];
    row_text(w, 1, row, sizeof row);
    CHECK(strstr(row, "--- attempt 1") != NULL);   /* the boundary, right above the lines */
    CHECK_INT(log_src_find(j, &ui, 0, -1, "old"), 0);
    CHECK_INT(log_src_find(j, &ui, 0, -1, "new line one"), 3);
    /* [: attempt 0, no marker, its lines only */
    ui.log_pinned = true;
    ui.log_attempt = 0;
    CHECK_INT(log_shown_attempt(j, &ui), 0);
    log_src_range(j, &ui, &first, &end);
    CHECK_INT(first, 1);
    CHECK_INT(end, 3);
    pane_log_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "old line one") && any_row_contains(w, "old line two"));
    CHECK(!any_row_contains(w, "new line"));
    CHECK(any_row_contains(w, "attempt 0 of 0-1"));
    /* merged: the same, by arrival */
    struct merged_ref refs[6] = { { 0, 1, 0 }, { 0, 2, 0 }, { 1, 1, 0 }, { 0, 3, 0 }, { 1, 2, 0 }, { 0, 4, 0 } };
    ui.merged = refs;
    ui.merged_cap = 6;
    ui.merged_total = 6;
    ui.log_mode = LOGV_ALL;
    ui.log_pinned = false;
    log_src_range(j, &ui, &first, &end);
    CHECK_INT(first, 3);                     /* the marker where rank 1's old line was */
    CHECK_INT(end, 7);
    pane_log_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "[r1] new of rank 1"));
    CHECK(any_row_contains(w, "--- attempt 1"));
    CHECK(!any_row_contains(w, "old"));
    ui.merged = NULL;
    delwin(w);
    tjob_free(j);
    scr_close(&sc);
}

/* Issue 20: NCCL's INFO lines are marked once as they are kept (LOG_LINE_NCCL, counted by the
 * ring), folded out of the pane's rows, its moves and its search unless shown; WARN lines stay. */
static void test_nccl_folded(void)
{
    struct scr sc;
    if (!scr_open(&sc)) { tap_skip("nccl folded", "no xterm terminfo entry"); scr_close(&sc); return; }
    struct job *j = make_job(1, "localhost");
    if (!j) { CHECK(0); scr_close(&sc); return; }
    add_line(j, 0, "own a");                                                     /* 1 */
    for (int i = 0; i < 5; i++) add_line(j, 0, "n1:42:42 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"); /* 2-6 */
    add_line(j, 0, "own b");                                                     /* 7 */
    add_line(j, 0, "n1:42:42 [0] NCCL WARN NET/IB : Got completion from peer");  /* 8 */
    for (int i = 0; i < 3; i++) add_line(j, 0, "n1:42:42 [0] NCCL INFO Connected all rings"); /* 9-11 */
    add_line(j, 0, "own c");                                                     /* 12 */
    const struct log_ring *r = &j->ranks[0].log;
    CHECK_INT((int)r->nccl, 8);
    CHECK(log_ring_at(r, 1)->flags & LOG_LINE_NCCL);
    CHECK(!(log_ring_at(r, 7)->flags & LOG_LINE_NCCL));              /* WARN */
    CHECK(!(log_ring_at(r, 0)->flags & LOG_LINE_NCCL));
    struct ui_state ui;
    init_ui(&ui);
    CHECK_INT((int)log_src_folded_count(j, &ui), 8);
    CHECK(log_src_folded(j, &ui, 3));
    CHECK(!log_src_folded(j, &ui, 8));
    /* moves count the lines shown */
    long moved;
    CHECK_INT((int)log_src_move(j, &ui, 12, -2, &moved), 7);
    CHECK_INT((int)moved, -2);
    CHECK_INT((int)log_src_move(j, &ui, 12, -10, &moved), 1);
    CHECK_INT((int)moved, -3);
    CHECK_INT((int)log_src_move(j, &ui, 1, 1, NULL), 7);
    CHECK_INT((int)log_src_move(j, &ui, 8, 5, &moved), 12);
    CHECK_INT((int)moved, 1);
    /* four rows: the title and the newest three lines shown */
    WINDOW *w = newwin(4, 100, 0, 0);
    pane_log_draw(w, j, &ui, &sc.p);
    char row[128];
    row_text(w, 0, row, sizeof row);
    CHECK(strstr(row, "8 NCCL lines folded (I shows)") != NULL);
    row_text(w, 1, row, sizeof row);
    CHECK(strncmp(row, "own b", 5) == 0);
    row_text(w, 3, row, sizeof row);
    CHECK(strncmp(row, "own c", 5) == 0);
    CHECK(!any_row_contains(w, "NCCL INFO"));
    CHECK(any_row_contains(w, "NCCL WARN"));
    /* scrolled to a folded line: the rows end at the line shown before it */
    ui.follow = false;
    ui.log_pos = 10;
    pane_log_draw(w, j, &ui, &sc.p);
    row_text(w, 3, row, sizeof row);
    CHECK(strstr(row, "NCCL WARN") != NULL);
    row_text(w, 1, row, sizeof row);
    CHECK(strncmp(row, "own a", 5) == 0);
    /* a search looks at what is shown */
    CHECK_INT(log_src_find(j, &ui, 0, -1, "Connected all rings"), 0);
    CHECK_INT(log_src_find(j, &ui, 0, -1, "own"), 12);
    ui.show_nccl = true;
    CHECK_INT(log_src_find(j, &ui, 0, -1, "Connected all rings"), 11);
    ui.follow = true;
    pane_log_draw(w, j, &ui, &sc.p);
    CHECK(any_row_contains(w, "NCCL INFO Connected all rings"));
    CHECK(any_row_contains(w, "NCCL lines shown (I folds)"));
    CHECK_INT((int)log_src_move(j, &ui, 12, -2, NULL), 10);
    delwin(w);
    /* lines dropped from the ring leave the count */
    log_ring_set_limits(&j->ranks[0].log, 4, 1u << 20);
    CHECK_INT((int)j->ranks[0].log.nccl, 3);   /* lines 9-12 are left */
    tjob_free(j);
    scr_close(&sc);
}

/* A line as the controller hands it to the dashboard (on_line): into the ring, then the
 * merged and folded lists. */
static void merged_line(struct dashboard *d, struct job *j, int rank, const char *s)
{
    add_line(j, rank, s);
    const struct log_ring *r = &j->ranks[rank].log;
    dashboard_merged_add(d, j, rank, log_ring_at(r, r->count - 1));
}

static void test_all_ranks_folded(void)
{
    struct scr sc;
    char err[256], row[128];
    if (!scr_open(&sc)) { tap_skip("all ranks folded", "no xterm terminfo entry"); scr_close(&sc); return; }
    struct job *j = make_job(8, "n01");
    struct dashboard *d = dashboard_new("default", err, sizeof err);
    if (!j || !d) { CHECK(0); printf("# %s\n", err); scr_close(&sc); return; }
    struct ui_state *ui = &d->ui;
    for (int r = 0; r < 3; r++) merged_line(d, j, r, "UserWarning: W");
    merged_line(d, j, 3, "hello");
    for (int r = 3; r < 8; r++) merged_line(d, j, r, "UserWarning: W");   /* rank 3's after its hello */
    merged_line(d, j, 0, "after");
    ui->log_mode = LOGV_ALL;
    uint64_t first, end;
    log_src_range(j, ui, &first, &end);
    CHECK_INT(first, 1);
    CHECK_INT(end, 5);
    CHECK_INT(log_src_fold_saved(ui), 6);
    CHECK_INT(log_src_fold(ui, 1)->n, 7);
    CHECK_INT(log_src_find(j, ui, 0, -1, "hello"), 2);
    CHECK_INT(log_src_find(j, ui, 0, -1, "userwarning"), 3);
    WINDOW *w = newwin(12, 100, 0, 0);
    pane_log_draw(w, j, ui, &sc.p);
    row_text(w, 0, row, sizeof row);
    CHECK(strstr(row, "6 lines folded (u unfolds)") != NULL);
    row_text(w, 1, row, sizeof row);
    CHECK(strncmp(row, "[r0-2,4-7 n01] UserWarning: W", 29) == 0);
    row_text(w, 2, row, sizeof row);
    CHECK(strncmp(row, "[r3] hello", 10) == 0);
    row_text(w, 3, row, sizeof row);
    CHECK(strncmp(row, "[r3] UserWarning: W", 19) == 0);
    row_text(w, 4, row, sizeof row);
    CHECK(strncmp(row, "[r0] after", 10) == 0);
    /* unfolded: every line as it came */
    ui->unfold = true;
    log_src_range(j, ui, &first, &end);
    CHECK_INT(end - first, 10);
    pane_log_draw(w, j, ui, &sc.p);
    CHECK(any_row_contains(w, "unfolded (u folds)"));
    row_text(w, 2, row, sizeof row);
    CHECK(strncmp(row, "[r1] UserWarning: W", 19) == 0);
    row_text(w, 10, row, sizeof row);
    CHECK(strncmp(row, "[r0] after", 10) == 0);
    delwin(w);
    dashboard_free(d);
    tjob_free(j);
    scr_close(&sc);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_scroll_keeps_selection_visible);
    RUN(test_chart_aggregate);
    RUN(test_log_positions_and_search);
    RUN(test_drawing);
    RUN(test_step_lines_in_words);
    RUN(test_events_wrap);
    RUN(test_root_cause_class);
    RUN(test_log_attempts);
    RUN(test_nccl_folded);
    RUN(test_all_ranks_folded);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmpdir);
    return tap_done();
}
