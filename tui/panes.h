/* The dashboard's views: what each pane draws, as functions of (model, UI state, window).
 * No view reads the clock, a file or the network, and no view changes the model: the
 * dashboard (dashboard.c) owns the UI state and calls the panes once per frame through the
 * pane table (pane_table.h), whose pane classes also turn keys into changes of that state. Shared here: the UI state,
 * the paint (theme roles resolved to curses attributes), the log pane's line positions (which
 * the search keys use too) and the chart's per-step aggregate across ranks. */
#ifndef DDPTOP_PANES_H
#define DDPTOP_PANES_H

#include <curses.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job/job.h"
#include "keymap.h"
#include "layout.h"
#include "rank_view.h"
#include "theme.h"

/* Theme roles as curses attributes (colour pair | bold ...), for one terminal. */
struct paint {
    attr_t role[ROLE_COUNT];
    bool ascii;               /* no UTF-8 locale: ASCII glyphs, no braille, '?' for the rest */
};

enum log_mode {
    LOGV_RANK,                /* the selected rank's log ring */
    LOGV_ALL,                 /* every rank's lines merged by arrival */
    LOGV_STACKS,              /* the stacks captured for a rank (s) */
};

/* One line of the merged log: which rank and which of its lines, and the next line folded
 * with it (its merged number; 0: none). */
struct merged_ref {
    int rank;
    uint64_t seq;
    uint64_t fold_next;
};

/* One line of the folded all-ranks log (issue 30): lines of several ranks with the same text
 * (job/log_fold.h), shown at the place of the first; its lines are the merged list's first,
 * first's fold_next, ..., last (n of them). Shown only while the merged list holds first. */
struct fold_ref {
    uint64_t first, last;
    uint32_t n;
};

struct ui_state {
    int64_t now_ms;           /* the frame's mono_ms(): every age on screen agrees */
    enum area focus;          /* the focused pane's area: AREA_RANKS, AREA_LOG or AREA_EVENTS
                               * (the Tab ring of pane_table.h) */
    enum km_mode modal;       /* KM_SEARCH, KM_CONFIRM, KM_HELP, or KM_COUNT for none */
    int selected;             /* the selected rank */
    int ranks_top;            /* table: first rank shown; grid: first grid row shown */
    bool grid, log_scale, log_max;
    bool show_check;          /* preflight results on screen */
    bool utf8;
    bool read_only;           /* `ddptop view`: a finished run read back from its files */

    /* log pane: positions are seq numbers (rank mode), merged counters (all mode) or
     * line numbers from 1 (stacks); 0 means none */
    enum log_mode log_mode;
    bool follow;              /* the newest line stays at the bottom */
    uint64_t log_pos;         /* !follow: the position drawn on the bottom row */
    int log_hscroll;          /* columns scrolled sideways */
    char search[128];         /* the active search ("" none), matched case-insensitively */
    uint64_t mark;            /* the line the last search or error jump found (0 none) */
    bool show_nccl;           /* I: NCCL's INFO lines shown (default: folded away) */
    bool log_pinned;          /* [ ]: the pane shows attempt log_attempt; false: the current
                               * attempt, whichever it is (a restart moves the pane along) */
    int log_attempt;
    int log_seen_attempt;     /* the job's attempt at the last frame (dashboard.c: a new one
                               * turns follow back on) */

    /* merged log of all ranks, filled from on_line */
    struct merged_ref *merged;
    size_t merged_cap;
    uint64_t merged_total;    /* entries ever added; entry k (1-based) is merged[(k-1) % cap] */
    /* the same folded (the all-ranks view's default; u unfolds): entry k is folds[(k-1) %
     * merged_cap] */
    struct fold_ref *folds;
    uint64_t folds_total;
    bool unfold;              /* u: the all-ranks log shows every line as it came */

    /* stacks (s) */
    int stacks_rank;
    char **stacks;            /* lines, raw bytes from the agent (sanitized when drawn) */
    size_t n_stacks;

    int events_back;          /* events pane scrolled back this many from the newest */
    bool events_cut;          /* w: one row per event, cut with an ellipsis (default: wrapped) */
    char **check_lines;       /* the preflight report (table and details) as lines */
    size_t n_check;
    int check_top;
    char **help_lines;        /* generated from the keymap table */
    size_t n_help;
    int help_top;
    bool gpu_view;            /* the overlay shows every GPU (G) instead of the keys */

    /* issue 19: the ranks pane by node, its order and filters (rank_view.h) */
    bool node_view;           /* v: one row per node instead of one per rank */
    bool nccl_cols;           /* C: the node view shows what NCCL said (pane_nodes_nccl.c) */
    int node_selected;        /* node view: the selected node */
    int nodes_top;            /* node view: first place shown */
    enum rank_order order;    /* o: attention first / by rank (auto: attention when they do not fit) */
    enum rank_filter filter;  /* F: the state filter */
    char host_filter[128];    /* H: a glob (or substring) on node names; "" none */
    int filter_node;          /* 1 + the node whose ranks alone are shown (Enter on a node); 0 none */
    bool input_host;          /* KM_SEARCH types the host filter, not a log search */
    int n_gpu_lines;          /* its line count at the last frame (for scrolling) */

    enum ui_action confirm;   /* the action a y/n question is about */
    char input[128];          /* the search being typed */
    size_t input_len;
    char notice[160];         /* a short message in the status line */
    int64_t notice_until_ms;
    char theme_name[64];
};

/* The chart's data: mean, min and max loss across ranks per logged step, kept incrementally
 * from the ranks' metric series (each frame reads only the points that are new) and
 * bounded: past CHART_MAX_POINTS neighbouring steps are merged pairwise. */
#define CHART_MAX_POINTS 2048
struct chart_point {
    double step, sum, lo, hi;
    int n;
};
struct chart_cache {
    struct chart_point *pts;
    size_t n, cap;
    int attempt;              /* the attempt the points came from */
    bool trim_pending;        /* a new attempt began: its first points replace later steps */
    void *seen;               /* per rank: the newest point already counted (pane_chart.c) */
    size_t *changed;          /* scratch of one update: the ranks whose series moved */
    size_t n_ranks;
    double *x, *mean, *lo, *hi;    /* scratch for chart_compute */
    uint8_t *line, *band;
    size_t scratch_cells;
};

/* Text with attributes: sanitized, cut to max_cols display columns, '?' for non-ASCII when
 * p->ascii. Returns the columns drawn. (pane_header.c) */
int pane_put(WINDOW *w, const struct paint *p, const char *text, size_t len, int max_cols,
             attr_t attr);
/* A table's cell (the rank and node tables): text padded to width (right-aligned when right)
 * in attr at column x, then one space in gap. Returns the column after it. (pane_header.c) */
int pane_cell(WINDOW *w, const struct paint *p, int x, int wd, const char *text, int width, bool right,
              attr_t attr, attr_t gap);
/* A table's row y begins: the selected row is filled in attr first; the cursor at its start. */
void pane_row_begin(WINDOW *w, int y, int wd, bool selected, attr_t attr);
/* An overlay's frame (help, GPUs): cleared in the help colour, boxed, the title on its top
 * border. Returns the colour to write in. */
attr_t pane_overlay_frame(WINDOW *w, const struct paint *p, const char *title);
/* The GPU view (G): every GPU of every node, now and its last minute, in the overlay window. */
void pane_gpus_draw(WINDOW *w, const struct job *j, const struct ui_state *ui, const struct paint *p);
/* How many lines it has for this job (nodes' headings and GPUs). */
int pane_gpus_lines(const struct job *j);

/* Sets the status line's notice for a few seconds from now_ms. (pane_header.c) */
void ui_notice(struct ui_state *ui, int64_t now_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ui_notice_v(struct ui_state *ui, int64_t now_ms, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* A pane's title row: the text, the rest of the row in the same role. */
void pane_title(WINDOW *w, const struct paint *p, const char *title, bool focused);

/* The header (1 or 2 rows) and the status line (keys, questions, the search being typed). */
void pane_header_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                      const struct paint *p);
void pane_status_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                      const struct paint *p);

/* The ranks table (or grid): the ranks of the view v (its order and filters) from place
 * ui->ranks_top, kept valid by the dashboard with ranks_scroll_to_selection. Only the rows on
 * screen are formatted. */
void pane_ranks_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                     const struct rank_view *v, const struct paint *p);
/* What the view is asked for by the UI state, with `rows` rank rows on screen. */
void ranks_view_opts(const struct ui_state *ui, int rows, struct rank_view_opts *o);
/* Moves *top (a place in a list of n items, per_row of them a row) so that place sel stays
 * visible with `capacity` items on screen, scrolling one line at a time; sel < 0: only keeps
 * *top in range. */
void ranks_scroll_to(int *top, int sel, int n, int capacity, int per_row);
/* The same for the ranks pane: the selected rank's place in v (grid: per_row cells a row), or
 * in the node view the selected node's. */
void ranks_scroll_to_selection(struct ui_state *ui, const struct rank_view *v, int capacity,
                               int per_row);
/* The node view (v): one row per node of the view (its ranks' states as counts, min and
 * median step, median loss, its GPUs, how the controller hears from it). */
void pane_nodes_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                     const struct rank_view *v, const struct paint *p);
/* The node view's NCCL columns (C): version, network and devices, bootstrap, transports,
 * init time, WARNs per node; values unlike the first reporting node's as warnings. */
void pane_nodes_nccl_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                          const struct rank_view *v, const struct paint *p);
/* The role of an attention class (rank_view.h): failed, stalled, straggler, warn, normal. */
attr_t pane_attn_attr(enum rank_attn c, const struct paint *p);
/* The attribute of a rank by state (stalled, straggler, failed ...). */
attr_t pane_rank_attr(const struct job *j, const struct rank_info *r, const struct paint *p);

/* The loss chart. */
void chart_cache_init(struct chart_cache *c);
void chart_cache_done(struct chart_cache *c);
/* Reads the points added to the ranks' series since the last call. */
void chart_cache_update(struct chart_cache *c, const struct job *j);
void pane_chart_draw(WINDOW *w, struct chart_cache *c, const struct ui_state *ui,
                     const struct paint *p);

/* The attempt the log pane shows: the job's current one, or the one [ pinned. */
int log_shown_attempt(const struct job *j, const struct ui_state *ui);
/* The log pane's lines as one sequence of positions [*first, *end): in rank and merged mode
 * the shown attempt's lines, after a marker line ("--- attempt N ...") when an attempt came
 * before it. */
void log_src_range(const struct job *j, const struct ui_state *ui, uint64_t *first,
                   uint64_t *end);
/* The text of position pos, raw; NULL when it is gone from the ring or not shown. *rank (may
 * be NULL) gets the rank of the line (-1 for stacks and the attempt marker), *stream the log
 * stream (LOG_SYSTEM for the marker). */
const char *log_src_text(const struct job *j, const struct ui_state *ui, uint64_t pos,
                         size_t *len, int *rank, int *stream);
/* From position `from` (exclusive) towards older lines (dir < 0) or newer (dir > 0),
 * wrapping around once, within the shown attempt: the first line containing needle (a step
 * line: in its raw JSON or in the words shown), or with needle NULL the first error line. 0
 * when there is none. */
uint64_t log_src_find(const struct job *j, const struct ui_state *ui, uint64_t from, int dir,
                      const char *needle);
bool log_is_error_line(const char *s, size_t len);
/* True when position pos is one of NCCL's INFO lines (LOG_LINE_NCCL) and they are folded. */
bool log_src_folded(const struct job *j, const struct ui_state *ui, uint64_t pos);
/* Position pos moved by delta lines shown (negative: older), over the folded ones, stopping
 * at the first or last line; *moved (may be NULL) gets the lines actually moved. */
uint64_t log_src_move(const struct job *j, const struct ui_state *ui, uint64_t pos, long delta,
                      long *moved);
/* The all-ranks log is folded (and shown): positions are folded lines (struct fold_ref). */
bool log_src_folding(const struct ui_state *ui);
/* In the folded all-ranks log: the lines folded into position pos (NULL: none, or not
 * folding), and how many lines it shows fewer than it holds. */
const struct fold_ref *log_src_fold(const struct ui_state *ui, uint64_t pos);
uint64_t log_src_fold_saved(const struct ui_state *ui);
/* NCCL's INFO lines held in memory for the pane's rank (all ranks in merged mode). */
size_t log_src_folded_count(const struct job *j, const struct ui_state *ui);
/* The runtime's JSON step line ({"event":"step",...}, docs/metrics.md) in words, as the pane
 * shows it ("step 12  loss 4.870  100.0 ms/step  12.3k tok/s"), into buf; false for every
 * other line, which is shown as it is. A search finds a step line by either text. */
bool log_step_text(const char *s, size_t len, char *buf, size_t n);
void pane_log_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                   const struct paint *p);

/* Events and the root cause; the preflight pane. */
void pane_events_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                      const struct paint *p);
void pane_check_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                     const struct paint *p);

/* The help overlay (every key from the keymap table) and the too-small notice. */
void pane_help_draw(WINDOW *w, const struct ui_state *ui, const struct paint *p);
void pane_too_small(WINDOW *w, int rows, int cols, const struct paint *p);

#endif
