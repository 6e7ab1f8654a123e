/* Inside the dashboard: the state dashboard.c (terminal, frames, hooks) and dashboard_keys.c
 * (keys to actions) share. Not for other modules. */
#ifndef DDPTOP_DASHBOARD_INT_H
#define DDPTOP_DASHBOARD_INT_H

#include <curses.h>
#include <stdbool.h>
#include <stdint.h>

#include "controller/controller.h"
#include "job/log_fold.h"
#include "dashboard.h"
#include "layout.h"
#include "pane_table.h"
#include "panes.h"
#include "theme.h"

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
    struct log_fold *fold;        /* which lines of the all-ranks log fold (job/log_fold.h) */
    struct chart_cache chart;
    struct rank_view view;        /* the ranks pane's order and filters (a cache of the model) */
    struct layout lay;
    bool have_lay;
    WINDOW *win[AREA_COUNT];      /* one per area the layout shows */
    int rows, cols;
    unsigned pending;             /* DK_* flags not yet acted on */
    bool key_frame;               /* a key changed the UI: its frame is drawn at once */
    uint64_t drawn_gen;
    int64_t last_frame_ms, next_timer_ms, last_size_check_ms;
};

/* dashboard_keys.c: one key (wget_wch's result: a code point, or a KEY_* code when
 * function_key), through the key map and the pane table. Returns DK_* flags. */
unsigned dashboard_key(struct dashboard *d, int key, bool function_key);
/* Whether action a is one of the dashboard's own (not a pane's: pane_table.h). */
bool dashboard_key_does(enum ui_action a);
/* What the panes draw from and their keys change, for this dashboard at now_ms. */
void dashboard_pane_ctx(struct dashboard *d, struct pane_ctx *c, int64_t now_ms);
/* The number of running ranks (for the quit question). */
size_t dashboard_running_ranks(const struct job *j);
/* The paint for the current theme and terminal (dashboard.c). */
void dashboard_build_paint(struct dashboard *d);

#endif
