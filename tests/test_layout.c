/* Unit tests for tui/layout.c: every terminal size from 40x10 to 300x100 under several
 * combinations of what is shown: every visible pane inside the screen, no two overlapping
 * (the help overlay excepted), panes side by side a blank column apart, header, ranks and
 * status always there, panes big enough to draw; "too small" below 40x10; and the
 * arrangement a user sees at typical sizes. */
#include <stdio.h>

#include "layout.h"
#include "tap.h"

/* An area of the layout l in scope, by name: A(RANKS). */
#define A(name) (l.area[AREA_##name])

struct flags {
    bool help, maxi, grid, check;
    int n_ranks;
};

static const struct flags combos[] = {
    { false, false, false, false, 2 },
    { false, false, false, false, 4096 },
    { true, false, true, false, 1024 },
    { false, true, false, false, 8 },
    { false, false, false, true, 16 },
    { true, false, false, true, 1 },
    { false, false, true, false, 3 },
    { true, true, true, false, 0 },
};

/* Returns the number of violations for one size (printing the first few). */
static int check_one(int rows, int cols, const struct flags *f, int *printed)
{
    struct layout_in in = { .rows = rows, .cols = cols, .show_help = f->help,
                            .log_maximized = f->maxi, .grid_mode = f->grid,
                            .show_check = f->check, .n_ranks = f->n_ranks };
    struct layout l;
    layout_compute(&in, &l);
    /* every area but the overlay, which lies over the others by design */
    static const char *const names[AREA_COUNT] = {
        [AREA_HEADER] = "header", [AREA_RANKS] = "ranks", [AREA_CHART] = "chart",
        [AREA_LOG] = "log", [AREA_EVENTS] = "events", [AREA_CHECK] = "check",
        [AREA_STATUS] = "status",
    };
    _Static_assert(AREA_OVERLAY == AREA_COUNT - 1, "the overlay is the last area");
    const struct rect *panes[AREA_COUNT - 1];
    for (int a = 0; a < AREA_OVERLAY; a++) panes[a] = &l.area[a];
    int bad = 0;
#define BAD(...) do { bad++; if ((*printed)++ < 10) { printf("#   %dx%d help=%d max=%d " \
    "grid=%d check=%d n=%d: ", cols, rows, f->help, f->maxi, f->grid, f->check, f->n_ranks); \
    printf(__VA_ARGS__); printf("\n"); } } while (0)
    if (l.too_small) BAD("too_small at a size that fits");
    for (size_t i = 0; i < sizeof panes / sizeof *panes; i++) {
        const struct rect *r = panes[i];
        if (!rect_inside(r, rows, cols))
            BAD("%s %d,%d %dx%d outside", names[i], r->y, r->x, r->w, r->h);
        if (rect_visible(r) && i != AREA_HEADER && i != AREA_STATUS &&
            (r->h < LAYOUT_MIN_PANE_H || r->w < LAYOUT_MIN_PANE_W))
            BAD("%s too small to draw: %dx%d", names[i], r->w, r->h);
        for (size_t k = i + 1; k < sizeof panes / sizeof *panes; k++)
            if (rect_overlaps(r, panes[k])) BAD("%s overlaps %s", names[i], names[k]);
    }
    if (!rect_visible(&A(HEADER)) || A(HEADER).y != 0 || A(HEADER).w != cols) BAD("no header");
    if (!rect_visible(&A(STATUS)) || A(STATUS).y != rows - 1 || A(STATUS).w != cols)
        BAD("no status line");
    if (!rect_visible(&A(RANKS))) BAD("ranks hidden");
    if (!rect_visible(&A(LOG)) && !f->check) BAD("log hidden");
    if (f->check != rect_visible(&A(CHECK))) BAD("check pane shown=%d", rect_visible(&A(CHECK)));
    if (f->help != rect_visible(&A(OVERLAY)))
        BAD("help shown=%d", rect_visible(&A(OVERLAY)));
    if (f->help && !rect_inside(&A(OVERLAY), rows, cols)) BAD("help outside");
    /* panes side by side are LAYOUT_GAP columns apart (issue 12: the log's text ran into
     * the events' first column), never touching */
    for (size_t i = 0; i < sizeof panes / sizeof *panes; i++)
        for (size_t k = 0; k < sizeof panes / sizeof *panes; k++) {
            const struct rect *a = panes[i], *b = panes[k];
            if (i == k || !rect_visible(a) || !rect_visible(b)) continue;
            bool same_rows = a->y < b->y + b->h && b->y < a->y + a->h;
            if (same_rows && a->x < b->x && a->x + a->w + LAYOUT_GAP > b->x)
                BAD("%s ends at column %d, %s starts at %d: no gap", names[i], a->x + a->w,
                    names[k], b->x);
        }
    /* every cell belongs to a pane or to a gap: no wasted, undrawn holes; in the wide
     * arrangement each body row has one gap (ranks | chart above, log | events below) */
    int area = 0;
    for (size_t i = 0; i < sizeof panes / sizeof *panes; i++) area += panes[i]->h * panes[i]->w;
    int gaps = l.wide ? (rows - A(HEADER).h - A(STATUS).h) * LAYOUT_GAP : 0;
    if (area + gaps != rows * cols)
        BAD("panes cover %d of %d cells (gaps %d)", area, rows * cols, gaps);
    return bad;
}

static void test_every_size(void)
{
    int printed = 0;
    long sizes = 0;
    for (size_t c = 0; c < sizeof combos / sizeof *combos; c++)
        for (int rows = 10; rows <= 100; rows++)
            for (int cols = 40; cols <= 300; cols++) {
                CHECK_INT(check_one(rows, cols, &combos[c], &printed), 0);
                sizes++;
            }
    CHECK_INT(sizes, 8L * 91 * 261);
}

static void test_too_small(void)
{
    static const int sizes[][2] = { { 9, 40 }, { 10, 39 }, { 1, 1 }, { 0, 0 }, { 9, 300 },
                                    { 100, 39 }, { -5, 80 } };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        struct layout_in in = { .rows = sizes[i][0], .cols = sizes[i][1], .show_help = true,
                                .n_ranks = 4 };
        struct layout l;
        layout_compute(&in, &l);
        CHECK(l.too_small);
        CHECK(!rect_visible(&A(HEADER)) && !rect_visible(&A(RANKS)) && !rect_visible(&A(LOG)) &&
              !rect_visible(&A(OVERLAY)) && !rect_visible(&A(STATUS)));
    }
}

static void test_minimal_40x10(void)
{
    struct layout_in in = { .rows = 10, .cols = 40, .n_ranks = 2 };
    struct layout l;
    layout_compute(&in, &l);
    CHECK(!l.too_small);
    CHECK(rect_visible(&A(HEADER)) && rect_visible(&A(RANKS)) && rect_visible(&A(LOG)));
    CHECK(!rect_visible(&A(CHART)));
    CHECK(!rect_visible(&A(EVENTS)));
    /* both ranks fit: title + column header + 2 rows */
    CHECK_INT(layout_rank_capacity(&A(RANKS), false), 2);
}

static void test_full_120x40(void)
{
    struct layout_in in = { .rows = 40, .cols = 120, .n_ranks = 8 };
    struct layout l;
    layout_compute(&in, &l);
    CHECK(l.wide);
    CHECK(rect_visible(&A(CHART)) && rect_visible(&A(EVENTS)) && rect_visible(&A(LOG)));
    CHECK_INT(A(HEADER).h, 2);
    /* chart beside the ranks, events beside the log */
    CHECK_INT(A(CHART).y, A(RANKS).y);
    CHECK(A(CHART).x >= A(RANKS).x + A(RANKS).w);
    CHECK_INT(A(EVENTS).y, A(LOG).y);
    /* one blank column between them, the right pane reaching the right edge */
    CHECK_INT(A(CHART).x, A(RANKS).x + A(RANKS).w + 1);
    CHECK_INT(A(EVENTS).x, A(LOG).x + A(LOG).w + 1);
    CHECK_INT(A(EVENTS).x + A(EVENTS).w, 120);
    CHECK_INT(A(CHART).x + A(CHART).w, 120);
    CHECK(A(RANKS).w >= 72);   /* the whole rank row fits */
    CHECK(layout_rank_capacity(&A(RANKS), false) >= 8);
    CHECK(A(LOG).h >= 10);
}

static void test_narrow_80x24(void)
{
    struct layout_in in = { .rows = 24, .cols = 80, .n_ranks = 4 };
    struct layout l;
    layout_compute(&in, &l);
    CHECK(!l.wide);
    CHECK(rect_visible(&A(CHART)) && rect_visible(&A(EVENTS)));
    CHECK(A(RANKS).y < A(CHART).y && A(CHART).y < A(LOG).y && A(LOG).y < A(EVENTS).y);
    CHECK_INT(layout_rank_capacity(&A(RANKS), false), 4);
}

static void test_many_ranks_leave_room_for_log(void)
{
    struct layout_in in = { .rows = 50, .cols = 100, .n_ranks = 4096 };
    struct layout l;
    layout_compute(&in, &l);
    CHECK(A(LOG).h >= (50 - 3) / 4);
    CHECK(A(RANKS).h <= (50 - 3) / 2);
    /* grid mode needs far fewer rows for the same ranks */
    in.n_ranks = 64;
    in.grid_mode = true;
    layout_compute(&in, &l);
    CHECK_INT(layout_grid_per_row(&A(RANKS)), 50);
    CHECK_INT(A(RANKS).h, 1 + 2);   /* title + two rows of 50 cells */
    CHECK(layout_rank_capacity(&A(RANKS), true) >= 64);
}

static void test_maximized_and_check(void)
{
    struct layout_in in = { .rows = 40, .cols = 160, .n_ranks = 64, .log_maximized = true };
    struct layout l;
    layout_compute(&in, &l);
    CHECK_INT(A(RANKS).h, LAYOUT_MIN_PANE_H);
    CHECK_INT(A(LOG).h, 40 - 2 - 1 - LAYOUT_MIN_PANE_H);
    CHECK(!rect_visible(&A(CHART)) && !rect_visible(&A(EVENTS)));

    struct layout_in ck = { .rows = 40, .cols = 160, .n_ranks = 4, .show_check = true,
                            .check_lines = 6 };
    layout_compute(&ck, &l);
    CHECK_INT(A(CHECK).h, 7);   /* what it asked for; the rest goes to the log */
    CHECK(!rect_visible(&A(CHART)));
    CHECK(A(LOG).h > 10);
}

static void test_help_centred(void)
{
    struct layout_in in = { .rows = 50, .cols = 200, .show_help = true, .help_lines = 30 };
    struct layout l;
    layout_compute(&in, &l);
    CHECK_INT(A(OVERLAY).h, 32);
    CHECK_INT(A(OVERLAY).y, 9);
    CHECK_INT(A(OVERLAY).x + A(OVERLAY).w / 2, 100);
    in.rows = 12;
    layout_compute(&in, &l);
    CHECK_INT(A(OVERLAY).h, 10);   /* scrolls inside */
}

static void test_rect_helpers(void)
{
    struct rect a = { 0, 0, 2, 2 }, b = { 1, 1, 2, 2 }, c = { 2, 0, 1, 5 }, z = { 0, 0, 0, 9 };
    CHECK(rect_overlaps(&a, &b));
    CHECK(!rect_overlaps(&a, &c));
    CHECK(!rect_overlaps(&a, &z));
    CHECK(rect_contains(&b, 2, 2));
    CHECK(!rect_contains(&b, 3, 2));
    CHECK(rect_inside(&c, 3, 5));
    CHECK(!rect_inside(&c, 3, 4));
}

int main(void)
{
    RUN(test_every_size);
    RUN(test_too_small);
    RUN(test_minimal_40x10);
    RUN(test_full_120x40);
    RUN(test_narrow_80x24);
    RUN(test_many_ranks_leave_room_for_log);
    RUN(test_maximized_and_check);
    RUN(test_help_centred);
    RUN(test_rect_helpers);
    return tap_done();
}
