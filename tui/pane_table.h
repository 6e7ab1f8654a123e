/* The pane table: every kind of pane the dashboard has, as one const struct pane_class each
 * (htop's meter classes), defined with designated initialisers in the pane's own file and
 * listed once in pane_table.c. The layout, the drawing and the keys read it: the dashboard
 * makes a window for each area the layout shows and draws in it the kind the UI state chooses
 * (`shown`); a key's action goes to the pane that has the keys (its moving keys, its own
 * actions), then to a pane that does that action from anywhere (f follows the log from the
 * ranks pane), then to the dashboard's own actions (dashboard_keys.c: what acts on processes,
 * questions, typing); Tab walks the panes in the order of their `focus`.
 *
 * Adding a pane that takes turns in an existing area (a view of the ranks, an overlay) is its
 * file and its line in pane_table.c (the table, and its name in the declaration above it); a
 * new area is also a line of layout.h's enum area and its place in layout.c, which keeps the
 * arrangement one pure function tested at every size. A new key is a binding in keymap.c (a
 * new action, a line of keymap.h's enum ui_action).
 *
 * Pane keys are functions of a pane_ctx (the model read only, the UI state, the caches of the
 * model): no terminal and no controller, so that tests drive them as they are. */
#ifndef DDPTOP_PANE_TABLE_H
#define DDPTOP_PANE_TABLE_H

#include <curses.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job/job.h"
#include "keymap.h"
#include "layout.h"
#include "panes.h"
#include "rank_view.h"

/* What a key asks the frame loop for (htop's flags: acted on once per batch of keys). */
#define DK_REDRAW   0x1u    /* draw the next frame even if the model did not change */
#define DK_RELAYOUT 0x2u    /* recompute the layout (a toggle changed what is shown) */
#define DK_REPAINT  0x4u    /* repaint every cell (Ctrl-L) */

/* What a pane is drawn from and what its keys change. */
struct pane_ctx {
    const struct job *job;        /* the model: read, never changed */
    struct ui_state *ui;
    struct rank_view *view;       /* the ranks pane's order and filters, a cache of the model */
    struct chart_cache *chart;    /* the chart's points, a cache of the model */
    const struct paint *paint;
    const struct layout *lay;     /* NULL before the first layout */
    int64_t now_ms;               /* a key's time: its notice lasts from then */
};

/* Does action a (one that keymap.h bound to the key pressed); returns DK_* flags. */
typedef unsigned pane_key_fn(struct pane_ctx *c, enum ui_action a);

struct pane_key {
    enum ui_action action;
    pane_key_fn *fn;
};

struct pane_class {
    const char *name;             /* "ranks", "log": for tests and messages */
    enum area area;               /* where the layout places it */
    /* Whether it is the kind its area shows now (the node view instead of the rank table,
     * the GPUs instead of the help); NULL: the only kind of its area, always shown there. */
    bool (*shown)(const struct ui_state *ui);
    bool grabs;                   /* while shown it has the keys, whatever has the focus
                                   * (the overlay, the preflight results) */
    enum km_mode mode;            /* the key table's mode while it has the keys (KM_COUNT:
                                   * it never has them) */
    int focus;                    /* its place in the Tab ring, from 1 (0: never focused);
                                   * kinds of one area share their area's place */
    const char *hints;            /* the status line's keys while it has the focus */
    void (*draw)(WINDOW *w, struct pane_ctx *c);
    pane_key_fn *move;            /* the moving keys: Up/Down, Left/Right, PgUp/PgDn, Home/End */
    const struct pane_key *keys;  /* the actions it does, ended by { UI_NONE, NULL } */
};

/* The table, every kind once (pane_table.c). */
extern const struct pane_class *const pane_table[];
extern const size_t pane_table_len;
/* Whether pc is the kind its area shows for this UI state. */
bool pane_is_shown(const struct pane_class *pc, const struct ui_state *ui);
/* The kind area a shows for this UI state (NULL: none). */
const struct pane_class *pane_table_shown(enum area a, const struct ui_state *ui);
/* The pane that has the keys: the topmost shown pane that grabs them (the overlay, the
 * preflight), else the focused one; NULL while a question or a typed line has them. */
const struct pane_class *pane_table_keys_pane(const struct ui_state *ui);
/* The key table's mode now: the keys pane's, or the question's or typed line's. */
enum km_mode pane_table_mode(const struct ui_state *ui);
/* The handler of action a in pc (NULL: pc does not do it; moving actions are pc->move's). */
pane_key_fn *pane_class_key(const struct pane_class *pc, enum ui_action a);
/* Does action a through the table (see the top of this file): true with *flags set when a
 * pane did it, false when no pane does (the dashboard's own actions). */
bool pane_table_key(struct pane_ctx *c, enum ui_action a, unsigned *flags);
/* Tab (dir 1) and Shift-Tab (-1): the focus moves along the ring to the next pane on screen. */
void pane_focus_move(struct pane_ctx *c, int dir);
/* A focused pane the layout left off screen gives the focus to the ring's first. */
void pane_focus_check(struct pane_ctx *c);
/* The area's rect (hidden before the first layout). */
const struct rect *pane_ctx_area(const struct pane_ctx *c, enum area a);

/* What panes' keys share. (pane_ranks_keys.c) The ranks pane's view brought up to the model
 * and the UI's order and filters (cheap when nothing moved); rank r selected, the log
 * showing it, the table scrolled to it; after a filter changed, a selection it hides moves to
 * the first rank shown and the table starts from the top; whether any filter is on. */
void pane_ranks_view_refresh(struct pane_ctx *c);
void pane_ranks_select(struct pane_ctx *c, long r);
void pane_ranks_filter_changed(struct pane_ctx *c);
bool pane_ranks_filtered(const struct ui_state *ui);
/* (pane_log_keys.c) The log pane's rows (paging); the log showing the selected rank from its
 * newest line; the selected rank's log opened, the focus on it; the next line with needle (or
 * with needle NULL the next error line) towards older (dir < 0) or newer lines, marked. */
int pane_log_rows(const struct layout *lay);
void pane_log_show_selected(struct ui_state *ui);
unsigned pane_log_open_selected(struct pane_ctx *c);
void pane_log_find(struct pane_ctx *c, int dir, const char *needle);
/* (pane_help.c) An overlay of n lines scrolled by a moving key. */
unsigned pane_overlay_scroll(struct pane_ctx *c, enum ui_action a, int n);

#endif
