/* The dashboard's views without a terminal: selection scrolling through thousands of ranks,
 * the chart's per-step aggregate (incremental, no double counting, a restarted attempt
 * replaces the steps it re-runs), the log pane's positions, search and error jumps (rank and
 * merged), and what the panes put on a curses screen written to /dev/null (read back with
 * winnstr): rank rows, hostile host names and log bytes shown escaped, the too-small notice. */
#include <curses.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/job.h"
#include "job/rank_report.h"
#include "keymap.h"
#include "tap.h"
#include "util/util.h"
#include "views.h"

static char tmpdir[] = "/tmp/ddptop-test-views.XXXXXX";

static struct job *make_job(int n_ranks, const char *node_name)
{
    char err[256];
    const char *names[] = { node_name };
    int per[] = { n_ranks };
    struct job *j = job_new("t", tmpdir, 0, names, NULL, per, 1, err, sizeof err);
    if (!j) { printf("# job_new: %s\n", err); return NULL; }
    if (job_attempt_begin(j, err, sizeof err) != 0) printf("# attempt: %s\n", err);
    return j;
}

static void init_ui(struct ui_state *ui)
{
    memset(ui, 0, sizeof *ui);
    ui->focus = KM_RANKS;
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
        ui.selected = s;
        ranks_scroll_to_selection(&ui, n, cap, 1);
        CHECK(ui.selected >= ui.ranks_top && ui.selected < ui.ranks_top + cap);
        if (abs(ui.ranks_top - before) > max_jump) max_jump = abs(ui.ranks_top - before);
    }
    CHECK_INT(max_jump, 1);              /* smooth: one line at a time */
    CHECK_INT(ui.ranks_top, n - cap);
    ui.selected = 3;
    ranks_scroll_to_selection(&ui, n, cap, 1);
    CHECK_INT(ui.ranks_top, 3);
    /* out of range selections are clamped; fewer ranks than rows: top 0 */
    ui.selected = 99999;
    ranks_scroll_to_selection(&ui, 7, cap, 1);
    CHECK_INT(ui.selected, 6);
    CHECK_INT(ui.ranks_top, 0);
    /* grid: 10 per row, 5 rows on screen */
    init_ui(&ui);
    ui.grid = true;
    ui.selected = 4999;
    ranks_scroll_to_selection(&ui, n, 50, 10);
    CHECK_INT(ui.ranks_top, 500 - 5);
    ui.selected = 0;
    ranks_scroll_to_selection(&ui, n, 50, 10);
    CHECK_INT(ui.ranks_top, 0);
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
    job_free(j);
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
    struct merged_ref refs[4] = { { 0, 1 }, { 1, 1 }, { 0, 2 }, { 0, 99 } };
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
    job_free(j);
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
    add_line(j, 0, "\x1b[31mred\x1b[0m text");
    struct ui_state ui;
    init_ui(&ui);
    ui.now_ms = mono_ms();

    WINDOW *w = newwin(10, 100, 0, 0);
    view_ranks_draw(w, j, &ui, &p);
    char row[512];
    row_text(w, 2, row, sizeof row);
    CHECK(strstr(row, "4242") != NULL);
    CHECK(strstr(row, "running") != NULL);
    CHECK(strstr(row, " 17 ") != NULL);
    CHECK(strstr(row, "2.5") != NULL);
    CHECK(strstr(row, "^[]0;pwned^G") != NULL);     /* the title-setting host name, escaped */
    CHECK(any_row_contains(w, "pending"));           /* ranks 1 and 2 not started */
    CHECK(!any_row_contains(w, "\x1b"));
    delwin(w);

    w = newwin(8, 100, 0, 0);
    view_log_draw(w, j, &ui, &p);
    CHECK(any_row_contains(w, "^[[31mred^[[0m text"));
    CHECK(any_row_contains(w, "Log of rank 0"));
    delwin(w);

    w = newwin(2, 120, 0, 0);
    view_header_draw(w, j, &ui, &p);
    CHECK(any_row_contains(w, "world 3"));
    CHECK(any_row_contains(w, "loss 2.5"));
    delwin(w);

    w = newwin(8, 30, 0, 0);
    view_too_small(w, 8, 30, &p);
    CHECK(any_row_contains(w, "terminal too small"));
    delwin(w);

    /* the help overlay lists every key of the table (first lines at least) */
    ui.help_lines = keymap_help_lines(&ui.n_help);
    w = newwin(40, 80, 0, 0);
    view_help_draw(w, &ui, &p);
    CHECK(any_row_contains(w, "restart"));
    CHECK(any_row_contains(w, "quit"));
    delwin(w);
    keymap_help_free(ui.help_lines, ui.n_help);

    job_free(j);
    endwin();
    delscreen(scr);
    fclose(out);
    fclose(in);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_scroll_keeps_selection_visible);
    RUN(test_chart_aggregate);
    RUN(test_log_positions_and_search);
    RUN(test_drawing);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmpdir);
    return tap_done();
}
