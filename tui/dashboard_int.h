/* Inside the dashboard: the state dashboard.c (terminal, frames, hooks) and dashboard_keys.c
 * (keys to actions) share. Not for other modules. */
#ifndef DDPTOP_DASHBOARD_INT_H
#define DDPTOP_DASHBOARD_INT_H

#include <curses.h>
#include <stdbool.h>
#include <stdint.h>

#include "controller/controller.h"
#include "dashboard.h"
#include "layout.h"
#include "theme.h"
#include "panes.h"

enum pane { P_HEADER, P_RANKS, P_CHART, P_LOG, P_EVENTS, P_STATUS, P_HELP, P_CHECK, P_COUNT };

/* What a key handler asks the frame loop for (htop's flags: acted on once per batch). */
#define DK_REDRAW   0x1u    /* draw the next frame even if the model did not change */
#define DK_RELAYOUT 0x2u    /* recompute the layout (a toggle changed what is shown) */
#define DK_REPAINT  0x4u    /* repaint every cell (Ctrl-L) */

struct dashboard {
    struct controller *ctl;       /* NULL in `ddptop view` (view_only) */
    const struct frontend_session *session;   /* what the session does for us; NULL: none */
    bool view_only;               /* a finished run: nothing acts on processes */
    bool quit;                    /* view_only: q was pressed */
    const struct job *job;        /* the model, as the last hook saw it */
    SCREEN *screen;
    bool screen_on;               /* the terminal is ours (newterm done, not ended) */
    struct theme theme;
    struct theme_dirs dirs;
    struct paint paint;
    bool no_color;
    struct ui_state ui;
    struct chart_cache chart;
    struct rank_view view;        /* the ranks pane's order and filters (a cache of the model) */
    struct layout lay;
    bool have_lay;
    WINDOW *win[P_COUNT];
    int rows, cols;
    unsigned pending;             /* DK_* flags not yet acted on */
    bool key_frame;               /* a key changed the UI: its frame is drawn at once */
    uint64_t drawn_gen;
    int64_t last_frame_ms, next_timer_ms, last_size_check_ms;
};

/* dashboard_keys.c: one key (wget_wch's result: a code point, or a KEY_* code when
 * function_key). Returns DK_* flags. */
unsigned dashboard_key(struct dashboard *d, int key, bool function_key);
/* The pane rows the log shows (for paging), and the number of running ranks (for the quit
 * question). */
int dashboard_log_rows(const struct dashboard *d);
size_t dashboard_running_ranks(const struct job *j);
/* Brings d->view up to the model and the UI's order and filters (dashboard.c; cheap when
 * nothing moved). */
void dashboard_view_refresh(struct dashboard *d);
/* The paint for the current theme and terminal (dashboard.c). */
void dashboard_build_paint(struct dashboard *d);

#endif
