/* The dashboard's layout: where each pane goes for a terminal of rows x cols and what is shown.
 * A pure function of its input (no curses, no model), so tests check every size for overlap
 * and bounds without a terminal, as nvtop does with compute_sizes_from_layout.
 *
 * Every rect is in screen cells, y/x of its top-left corner. A rect with h == 0 or w == 0 is
 * hidden. A pane's rect includes its own title line (the panes draw the title on the rect's
 * first row; no box borders are assumed, so the whole rect is theirs to draw). Guarantees
 * when not too_small:
 *   - header (1 or 2 rows, full width, top) and status (1 row, full width, bottom) always;
 *   - ranks always, at least LAYOUT_MIN_PANE_H rows (title + column header + one rank);
 *   - every other visible pane has h >= LAYOUT_MIN_PANE_H and w >= LAYOUT_MIN_PANE_W;
 *   - no two visible rects overlap, except the overlay (help), centred on top of the others;
 *   - panes side by side (wide: ranks | chart, log | events) are LAYOUT_GAP columns apart:
 *     the gap belongs to no pane and stays blank, so text cut at one pane's edge never runs
 *     into the next pane's first column (issue 12); every other cell belongs to a pane;
 *   - everything lies inside [0, rows) x [0, cols).
 * Adapting: at 40x10 header + ranks + log (chart and events hidden); from about 80x24 every
 * pane; at >= LAYOUT_WIDE_COLS columns the chart sits beside the ranks and the events beside
 * the log. Below LAYOUT_MIN_COLS x LAYOUT_MIN_ROWS: too_small and every rect hidden (the panes
 * print a "terminal too small" notice). */
#ifndef DDPTOP_LAYOUT_H
#define DDPTOP_LAYOUT_H

#include <stdbool.h>

#define LAYOUT_MIN_ROWS   10
#define LAYOUT_MIN_COLS   40
#define LAYOUT_WIDE_COLS  110   /* chart beside ranks, events beside log from here */
#define LAYOUT_MIN_PANE_H 3
#define LAYOUT_MIN_PANE_W 20
#define LAYOUT_GRID_CELL_W 2    /* grid mode: columns per rank cell (glyph + gap) */
#define LAYOUT_GAP        1     /* blank columns between panes side by side */

struct rect {
    int y, x, h, w;
};

struct layout_in {
    int rows, cols;
    bool show_help;      /* the help overlay is open */
    bool log_maximized;  /* the log takes the body (ranks shrink to their minimum) */
    bool grid_mode;      /* ranks drawn as a grid of LAYOUT_GRID_CELL_W-wide cells */
    bool show_check;     /* preflight results pane (CHECKING / CHECK_FAILED) in place of
                          * the chart and events */
    int n_ranks;         /* sizes the ranks pane: few ranks, small pane */
    int help_lines;      /* lines of help text (overlay height); 0: as tall as fits */
    int check_lines;     /* lines the check pane would like (0: as many as fit) */
};

/* The layout's areas: where panes go. A pane kind (pane_table.h) names the area it is drawn
 * in; kinds that take turns in one place share its area (the ranks table, the node view and
 * its NCCL columns; the help and the GPU view over the panes). */
enum area {
    AREA_HEADER,
    AREA_RANKS,
    AREA_CHART,
    AREA_LOG,
    AREA_EVENTS,
    AREA_CHECK,          /* preflight results */
    AREA_STATUS,
    AREA_OVERLAY,        /* centred over the others (help, GPUs) */
    AREA_COUNT
};

struct layout {
    bool too_small;
    bool wide;           /* side-by-side arrangement chosen */
    struct rect area[AREA_COUNT];
};

/* Computes the layout for in; pure and cheap (call it on every resize or toggle). */
void layout_compute(const struct layout_in *in, struct layout *out);

/* Helpers the panes and tests share. */
bool rect_visible(const struct rect *r);
bool rect_overlaps(const struct rect *a, const struct rect *b);   /* both visible and meet */
bool rect_inside(const struct rect *r, int rows, int cols);       /* hidden counts as inside */
bool rect_contains(const struct rect *r, int y, int x);

/* How many ranks a ranks pane of this rect shows at once: table mode, h minus the title and
 * the column header; grid mode, (h minus the title) rows of layout_grid_per_row cells. */
int layout_rank_capacity(const struct rect *ranks, bool grid_mode);
int layout_grid_per_row(const struct rect *ranks);

#endif
