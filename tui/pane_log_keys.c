/* The log pane's class (pane_table.h) and its keys: scrolling (the rows are the lines shown,
 * NCCL's folded lines stepped over), follow, search and error jumps, every rank merged, the
 * attempts before, NCCL's lines shown or folded, every rank's lines unfolded, maximized. The drawing is pane_log.c's. */
#include "pane_table.h"
#include "panes.h"

int pane_log_rows(const struct layout *lay)
{
    int h = lay ? lay->area[AREA_LOG].h - 1 : 10;
    return h > 1 ? h : 1;
}

/* The log's current bottom position (what is on the last row). */
static uint64_t log_bottom(const struct ui_state *ui, uint64_t first, uint64_t end)
{
    if (end <= first) return 0;
    if (!ui->follow && ui->log_pos >= first && ui->log_pos < end) return ui->log_pos;
    return end - 1;
}

/* Scrolls the log by delta rows (negative: towards older lines); reaching the newest line
 * turns follow mode back on, as `less +F` users expect. */
static void log_scroll(struct pane_ctx *c, long delta)
{
    struct ui_state *ui = c->ui;
    const struct job *j = c->job;
    uint64_t first, end;
    log_src_range(j, ui, &first, &end);
    if (end <= first) return;
    int rows = pane_log_rows(c->lay);
    uint64_t bottom = log_bottom(ui, first, end);
    /* rows are the lines shown: NCCL's folded lines are stepped over */
    long moved;
    uint64_t nb = log_src_move(j, ui, bottom, delta, &moved);
    /* the top row never goes above the oldest line */
    uint64_t top = log_src_move(j, ui, nb, -(long)(rows - 1), &moved);
    if (moved > -(long)(rows - 1)) nb = log_src_move(j, ui, top, rows - 1, NULL);
    long after;
    log_src_move(j, ui, nb, 1, &after);
    if (after == 0 && ui->log_mode != LOGV_STACKS) {
        ui->follow = true;
        return;
    }
    ui->follow = false;
    ui->log_pos = nb;
}

/* Shows position pos in the middle of the log pane and marks it. */
static void log_jump(struct pane_ctx *c, uint64_t pos)
{
    c->ui->follow = false;
    c->ui->log_pos = log_src_move(c->job, c->ui, pos, pane_log_rows(c->lay) / 2, NULL);
    c->ui->mark = pos;
}

void pane_log_find(struct pane_ctx *c, int dir, const char *needle)
{
    uint64_t first, end;
    log_src_range(c->job, c->ui, &first, &end);
    uint64_t from = c->ui->mark >= first && c->ui->mark < end ? c->ui->mark : 0;
    uint64_t pos = log_src_find(c->job, c->ui, from, dir, needle);
    if (pos) log_jump(c, pos);
    else if (needle) ui_notice(c->ui, c->now_ms, "not found: %s", needle);
    else ui_notice(c->ui, c->now_ms, "no error line (Traceback, error, NCCL WARN) in this log");
}

void pane_log_show_selected(struct ui_state *ui)
{
    if (ui->log_mode == LOGV_STACKS) ui->log_mode = LOGV_RANK;
    if (ui->log_mode == LOGV_RANK) {
        ui->follow = true;
        ui->mark = 0;
        ui->log_hscroll = 0;
    }
}

unsigned pane_log_open_selected(struct pane_ctx *c)
{
    c->ui->log_mode = LOGV_RANK;
    pane_log_show_selected(c->ui);
    if (rect_visible(pane_ctx_area(c, AREA_LOG))) c->ui->focus = AREA_LOG;
    return DK_REDRAW;
}

static unsigned log_move(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    int page = pane_log_rows(c->lay);
    switch (a) {
    case UI_UP: log_scroll(c, -1); break;
    case UI_DOWN: log_scroll(c, 1); break;
    case UI_PAGE_UP: log_scroll(c, -(page > 1 ? page - 1 : 1)); break;
    case UI_PAGE_DOWN: log_scroll(c, page > 1 ? page - 1 : 1); break;
    case UI_HOME: log_scroll(c, -(1L << 40)); break;
    case UI_END: ui->follow = true; ui->mark = 0; break;
    case UI_LEFT: ui->log_hscroll = ui->log_hscroll > 8 ? ui->log_hscroll - 8 : 0; break;
    case UI_RIGHT: ui->log_hscroll += 8; break;
    default: break;
    }
    return DK_REDRAW;
}

/* /: the input line types a search (the dashboard runs it on Enter). */
static unsigned log_search(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->modal = KM_SEARCH;
    ui->input_host = false;
    ui->input_len = 0;
    ui->input[0] = '\0';
    return DK_REDRAW;
}

static unsigned log_search_next(struct pane_ctx *c, enum ui_action a)
{
    if (!c->ui->search[0]) ui_notice(c->ui, c->now_ms, "no search yet: / starts one");
    else pane_log_find(c, a == UI_SEARCH_NEXT ? -1 : 1, c->ui->search);
    return DK_REDRAW;
}

static unsigned log_next_error(struct pane_ctx *c, enum ui_action a)
{
    (void)a;
    pane_log_find(c, -1, NULL);
    return DK_REDRAW;
}

static unsigned log_follow(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    if (ui->follow) {
        uint64_t first, end;
        log_src_range(c->job, ui, &first, &end);
        ui->follow = false;
        ui->log_pos = end > first ? end - 1 : 0;
    } else {
        ui->follow = true;
        ui->mark = 0;
    }
    return DK_REDRAW;
}

static unsigned log_all_ranks(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->log_mode = ui->log_mode == LOGV_ALL ? LOGV_RANK : LOGV_ALL;
    ui->follow = true;
    ui->mark = 0;
    return DK_REDRAW;
}

/* [ and ]: another attempt in the log pane, from its newest line. ] at the newest attempt
 * unpins: the pane follows the current attempt again, through restarts. */
static unsigned log_attempt(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    int dir = a == UI_ATTEMPT_PREV ? -1 : 1;
    int cur = c->job->attempt, shown = log_shown_attempt(c->job, ui);
    if (ui->log_mode == LOGV_STACKS) ui->log_mode = LOGV_RANK;
    if (dir < 0 && shown == 0) {
        ui_notice(ui, c->now_ms, cur ? "attempt 0 is the first" : "no restart yet: one attempt");
        return DK_REDRAW;
    }
    int want = shown + dir;
    if (want >= cur) {
        ui->log_pinned = false;
        if (dir > 0 && shown == cur) ui_notice(ui, c->now_ms, "attempt %d is the newest", cur);
    } else {
        ui->log_pinned = true;
        ui->log_attempt = want;
    }
    ui->follow = true;
    ui->mark = 0;
    return DK_REDRAW;
}

static unsigned log_nccl_lines(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->show_nccl = !ui->show_nccl;
    if (ui->log_mode == LOGV_STACKS) ui->log_mode = LOGV_RANK;
    ui_notice(ui, c->now_ms, "NCCL's INFO lines %s (I: %s; the log files keep them all)",
              ui->show_nccl ? "shown" : "folded", ui->show_nccl ? "fold them" : "show them");
    return DK_REDRAW;
}

/* u: the all-ranks log with every line as it came, or folded again; shown at once (from a
 * rank's log too), from the newest line: positions mean other lines in the two lists. */
static unsigned log_unfold(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->unfold = !ui->unfold;
    ui->log_mode = LOGV_ALL;
    ui->follow = true;
    ui->mark = 0;
    ui_notice(ui, c->now_ms, "all ranks: %s (u: %s; a: the selected rank)",
              ui->unfold ? "every line as it came" : "a line several ranks printed shown once",
              ui->unfold ? "fold" : "unfold");
    return DK_REDRAW;
}

static unsigned log_maximize(struct pane_ctx *c, enum ui_action a)
{
    (void)a;
    c->ui->log_max = !c->ui->log_max;
    return DK_REDRAW | DK_RELAYOUT;
}

static void log_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_log_draw(w, c->job, c->ui, c->paint);
}

const struct pane_class pane_log_class = {
    .name = "log",
    .area = AREA_LOG,
    .mode = KM_LOG,
    .focus = 2,
    .hints = " ? help  PgUp/PgDn scroll  f follow  / search  n/N next  e error  a all ranks"
             "  Tab focus  q quit",
    .draw = log_draw,
    .move = log_move,
    .keys = (const struct pane_key[]){
        { UI_SEARCH, log_search },
        { UI_SEARCH_NEXT, log_search_next },
        { UI_SEARCH_PREV, log_search_next },
        { UI_NEXT_ERROR, log_next_error },
        { UI_FOLLOW, log_follow },
        { UI_ALL_RANKS, log_all_ranks },
        { UI_ATTEMPT_PREV, log_attempt },
        { UI_ATTEMPT_NEXT, log_attempt },
        { UI_NCCL_LINES, log_nccl_lines },
        { UI_UNFOLD, log_unfold },
        { UI_MAXIMIZE, log_maximize },
        { UI_NONE, NULL },
    },
};
