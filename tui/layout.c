/* The dashboard's layout as a pure function of the terminal size and what is shown (see
 * layout.h for the guarantees). The body between the header and the status line is split in
 * one of four ways: preflight (ranks, check results, log), log maximized (ranks at their
 * minimum, log), wide (ranks | chart over log | events) or narrow (ranks, chart, log, events
 * stacked, chart and events only when there is room for them to be useful). */
#include "layout.h"

#include <string.h>

static int clampi(int v, int lo, int hi)
{
    if (v > hi) v = hi;
    if (v < lo) v = lo;
    return v;
}

static struct rect mk(int y, int x, int h, int w)
{
    struct rect r = { y, x, h, w };
    if (h <= 0 || w <= 0) r = (struct rect){ 0, 0, 0, 0 };
    return r;
}

bool rect_visible(const struct rect *r)
{
    return r->h > 0 && r->w > 0;
}

bool rect_overlaps(const struct rect *a, const struct rect *b)
{
    if (!rect_visible(a) || !rect_visible(b)) return false;
    return a->y < b->y + b->h && b->y < a->y + a->h && a->x < b->x + b->w && b->x < a->x + a->w;
}

bool rect_inside(const struct rect *r, int rows, int cols)
{
    if (!rect_visible(r)) return true;
    return r->y >= 0 && r->x >= 0 && r->y + r->h <= rows && r->x + r->w <= cols;
}

bool rect_contains(const struct rect *r, int y, int x)
{
    return rect_visible(r) && y >= r->y && y < r->y + r->h && x >= r->x && x < r->x + r->w;
}

int layout_grid_per_row(const struct rect *ranks)
{
    int n = ranks->w / LAYOUT_GRID_CELL_W;
    return n > 0 ? n : 1;
}

int layout_rank_capacity(const struct rect *ranks, bool grid_mode)
{
    if (!rect_visible(ranks)) return 0;
    if (grid_mode) {
        int rows = ranks->h - 1;
        return rows > 0 ? rows * layout_grid_per_row(ranks) : 0;
    }
    return ranks->h > 2 ? ranks->h - 2 : 0;
}

/* Rows the ranks pane would like at width w: every rank plus its title (and column header). */
static int ranks_wanted(const struct layout_in *in, int w)
{
    int n = in->n_ranks > 0 ? in->n_ranks : 1;
    if (in->grid_mode) {
        struct rect r = { 0, 0, 1, w };
        int per = layout_grid_per_row(&r);
        return 1 + (n + per - 1) / per;
    }
    return 2 + n;
}

static void place_help(const struct layout_in *in, struct layout *out)
{
    if (!in->show_help) return;
    int w = in->cols - 4 < 80 ? in->cols - 4 : 80;
    int max_h = in->rows - 2;
    int h = in->help_lines > 0 ? clampi(in->help_lines + 2, LAYOUT_MIN_PANE_H, max_h) : max_h;
    out->area[AREA_OVERLAY] = mk((in->rows - h) / 2, (in->cols - w) / 2, h, w);
}

/* Preflight on screen: the check results get the room, the log what is left if enough. */
static void body_check(const struct layout_in *in, struct layout *out, int by, int bh)
{
    int cols = in->cols;
    int ranks_h = clampi(ranks_wanted(in, cols), LAYOUT_MIN_PANE_H,
                         bh / 4 > LAYOUT_MIN_PANE_H ? bh / 4 : LAYOUT_MIN_PANE_H);
    int rem = bh - ranks_h;
    int log_h = rem >= 10 ? (rem / 4 > LAYOUT_MIN_PANE_H ? rem / 4 : LAYOUT_MIN_PANE_H) : 0;
    int check_h = rem - log_h;
    if (log_h && in->check_lines > 0 && check_h > in->check_lines + 1) {
        log_h += check_h - (in->check_lines + 1);
        check_h = in->check_lines + 1;
    }
    out->area[AREA_RANKS] = mk(by, 0, ranks_h, cols);
    out->area[AREA_CHECK] = mk(by + ranks_h, 0, check_h, cols);
    out->area[AREA_LOG] = mk(by + ranks_h + check_h, 0, log_h, cols);
}

static void body_log_maximized(const struct layout_in *in, struct layout *out, int by, int bh)
{
    out->area[AREA_RANKS] = mk(by, 0, LAYOUT_MIN_PANE_H, in->cols);
    out->area[AREA_LOG] = mk(by + LAYOUT_MIN_PANE_H, 0, bh - LAYOUT_MIN_PANE_H, in->cols);
}

/* Wide: ranks with the chart beside them on top, the log with the events beside it below,
 * each pair LAYOUT_GAP columns apart. */
static void body_wide(const struct layout_in *in, struct layout *out, int by, int bh)
{
    int cols = in->cols;
    int ranks_w = clampi(cols * 11 / 20, 72, 110);
    int chart_w = cols - ranks_w - LAYOUT_GAP;
    int chart_want = clampi(bh * 2 / 5, 4, 20);
    int want = ranks_wanted(in, ranks_w);
    if (want < chart_want) want = chart_want;
    int top_max = bh * 3 / 5;
    if (top_max > bh - LAYOUT_MIN_PANE_H) top_max = bh - LAYOUT_MIN_PANE_H;
    int top_h = clampi(want, LAYOUT_MIN_PANE_H, top_max);
    int bot_h = bh - top_h;
    int events_w = clampi(cols * 3 / 10, 30, 70);

    out->area[AREA_RANKS] = mk(by, 0, top_h, ranks_w);
    out->area[AREA_CHART] = mk(by, ranks_w + LAYOUT_GAP, top_h, chart_w);
    out->area[AREA_LOG] = mk(by + top_h, 0, bot_h, cols - events_w - LAYOUT_GAP);
    out->area[AREA_EVENTS] = mk(by + top_h, cols - events_w, bot_h, events_w);
}

/* Narrow: a stack; the chart from 17 body rows, the events from 21, the log never below a
 * quarter of the body so that output stays readable next to many ranks. */
static void body_narrow(const struct layout_in *in, struct layout *out, int by, int bh)
{
    int cols = in->cols;
    int chart_h = bh >= 17 ? clampi(bh / 4, 4, 12) : 0;
    int events_h = bh >= 21 ? clampi(bh / 6, LAYOUT_MIN_PANE_H, 10) : 0;
    int log_min = bh / 4 > LAYOUT_MIN_PANE_H ? bh / 4 : LAYOUT_MIN_PANE_H;
    int ranks_max = bh - chart_h - events_h - log_min;
    if (ranks_max > bh / 2) ranks_max = bh / 2;
    int ranks_h = clampi(ranks_wanted(in, cols), LAYOUT_MIN_PANE_H, ranks_max);
    int log_h = bh - ranks_h - chart_h - events_h;
    int y = by;

    out->area[AREA_RANKS] = mk(y, 0, ranks_h, cols);
    y += ranks_h;
    out->area[AREA_CHART] = mk(y, 0, chart_h, cols);
    y += chart_h;
    out->area[AREA_LOG] = mk(y, 0, log_h, cols);
    y += log_h;
    out->area[AREA_EVENTS] = mk(y, 0, events_h, cols);
}

void layout_compute(const struct layout_in *in, struct layout *out)
{
    memset(out, 0, sizeof *out);
    if (in->rows < LAYOUT_MIN_ROWS || in->cols < LAYOUT_MIN_COLS) {
        out->too_small = true;
        return;
    }
    int header_h = in->rows >= 16 ? 2 : 1;
    out->area[AREA_HEADER] = mk(0, 0, header_h, in->cols);
    out->area[AREA_STATUS] = mk(in->rows - 1, 0, 1, in->cols);
    int by = header_h, bh = in->rows - header_h - 1;   /* bh >= 7 */

    out->wide = in->cols >= LAYOUT_WIDE_COLS && !in->show_check && !in->log_maximized;
    if (in->show_check)
        body_check(in, out, by, bh);
    else if (in->log_maximized)
        body_log_maximized(in, out, by, bh);
    else if (out->wide)
        body_wide(in, out, by, bh);
    else
        body_narrow(in, out, by, bh);
    place_help(in, out);
}
