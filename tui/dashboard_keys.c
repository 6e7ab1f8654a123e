/* Keys of the dashboard: the key is looked up in the keymap table for the current mode (a
 * question, the search being typed, help, the preflight, or the focused pane), and the action
 * changes the UI state (selection, scrolling, search, follow, all ranks, grid, log scale,
 * theme, help) or goes to the controller (restart, stop, stacks, quit, launch anyway), asking
 * y/n first where keymap.h says so. Handlers return DK_* flags the frame loop acts on once. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "dashboard_int.h"
#include "keymap.h"

static enum km_mode current_mode(const struct dashboard *d)
{
    if (d->ui.modal != KM_COUNT) return d->ui.modal;
    if (d->ui.show_check) return KM_CHECK;
    return d->ui.focus;
}

/* The log's current bottom position (what is on the last row). */
static uint64_t log_bottom(const struct dashboard *d, uint64_t first, uint64_t end)
{
    if (end <= first) return 0;
    if (!d->ui.follow && d->ui.log_pos >= first && d->ui.log_pos < end) return d->ui.log_pos;
    return end - 1;
}

/* Scrolls the log by delta rows (negative: towards older lines); reaching the newest line
 * turns follow mode back on, as `less +F` users expect. */
static void log_scroll(struct dashboard *d, long delta)
{
    struct ui_state *ui = &d->ui;
    uint64_t first, end;
    log_src_range(d->job, ui, &first, &end);
    if (end <= first) return;
    int rows = dashboard_log_rows(d);
    uint64_t bottom = log_bottom(d, first, end);
    /* rows are the lines shown: NCCL's folded lines are stepped over */
    long moved;
    uint64_t nb = log_src_move(d->job, ui, bottom, delta, &moved);
    /* the top row never goes above the oldest line */
    uint64_t top = log_src_move(d->job, ui, nb, -(long)(rows - 1), &moved);
    if (moved > -(long)(rows - 1)) nb = log_src_move(d->job, ui, top, rows - 1, NULL);
    long after;
    log_src_move(d->job, ui, nb, 1, &after);
    if (after == 0 && ui->log_mode != LOGV_STACKS) {
        ui->follow = true;
        return;
    }
    ui->follow = false;
    ui->log_pos = nb;
}

/* Shows position pos in the middle of the log pane and marks it. */
static void log_jump(struct dashboard *d, uint64_t pos)
{
    d->ui.follow = false;
    d->ui.log_pos = log_src_move(d->job, &d->ui, pos, dashboard_log_rows(d) / 2, NULL);
    d->ui.mark = pos;
}

static void log_find(struct dashboard *d, int dir, const char *needle)
{
    uint64_t first, end;
    log_src_range(d->job, &d->ui, &first, &end);
    uint64_t from = d->ui.mark >= first && d->ui.mark < end ? d->ui.mark : 0;
    uint64_t pos = log_src_find(d->job, &d->ui, from, dir, needle);
    if (pos) log_jump(d, pos);
    else if (needle) dashboard_notice(d, "not found: %s", needle);
    else dashboard_notice(d, "no error line (Traceback, error, NCCL WARN) in this log");
}

/* The log shows the selected rank from its newest line. */
static void log_show_selected(struct ui_state *ui)
{
    if (ui->log_mode == LOGV_STACKS) ui->log_mode = LOGV_RANK;
    if (ui->log_mode == LOGV_RANK) {
        ui->follow = true;
        ui->mark = 0;
        ui->log_hscroll = 0;
    }
}

/* [ and ]: another attempt in the log pane, from its newest line. ] at the newest attempt
 * unpins: the pane follows the current attempt again, through restarts. */
static void log_attempt_shift(struct dashboard *d, int dir)
{
    struct ui_state *ui = &d->ui;
    int cur = d->job->attempt, shown = log_shown_attempt(d->job, ui);
    if (ui->log_mode == LOGV_STACKS) ui->log_mode = LOGV_RANK;
    if (dir < 0 && shown == 0) {
        dashboard_notice(d, cur ? "attempt 0 is the first" : "no restart yet: one attempt");
        return;
    }
    int want = shown + dir;
    if (want >= cur) {
        ui->log_pinned = false;
        if (dir > 0 && shown == cur) dashboard_notice(d, "attempt %d is the newest", cur);
    } else {
        ui->log_pinned = true;
        ui->log_attempt = want;
    }
    ui->follow = true;
    ui->mark = 0;
}

/* The table scrolls to the selection only when a key moved it: a rank that moves in the
 * attention order (its state changed) does not scroll the table, so the top rows, the most
 * urgent ones, stay on screen until a key scrolls away from them. */
static void scroll_to_selection(struct dashboard *d)
{
    struct ui_state *ui = &d->ui;
    bool grid = ui->grid && !ui->node_view;
    dashboard_view_refresh(d);
    ranks_scroll_to_selection(ui, &d->view, layout_rank_capacity(&d->lay.ranks, grid),
                              grid ? layout_grid_per_row(&d->lay.ranks) : 1);
}

static void select_rank(struct dashboard *d, long r)
{
    long n = d->job ? (long)d->job->n_ranks : 0;
    if (r >= n) r = n - 1;
    if (r < 0) r = 0;
    if (r != d->ui.selected) {
        d->ui.selected = (int)r;
        log_show_selected(&d->ui);
    }
    scroll_to_selection(d);
}

static void focus_move(struct dashboard *d, int dir)
{
    static const enum km_mode order[] = { KM_RANKS, KM_LOG, KM_EVENTS };
    int i = 0;
    for (int k = 0; k < 3; k++) if (order[k] == d->ui.focus) i = k;
    for (int tries = 0; tries < 3; tries++) {
        i = (i + (dir > 0 ? 1 : 2)) % 3;
        enum pane p = order[i] == KM_RANKS ? P_RANKS : order[i] == KM_LOG ? P_LOG : P_EVENTS;
        if (d->win[p]) break;
    }
    d->ui.focus = order[i];
}

/* The rank the events pane points at: the root cause's, else the newest event's. */
static int events_rank(const struct job *j)
{
    if (j->cause.set && j->cause.rank >= 0) return j->cause.rank;
    for (size_t i = j->ev_count; i-- > 0;) {
        const struct job_event *ev = job_event_at(j, i);
        if (ev && ev->rank >= 0) return ev->rank;
    }
    return -1;
}

/* The dashboard runs in a session that can detach a terminal (the entry handed one over). */
static bool in_session(const struct dashboard *d)
{
    return d->session && d->session->detach;
}

static void act(struct dashboard *d, enum action a, int rank)
{
    if (d->ctl) controller_act(d->ctl, a, rank);
}

/* Moving keys: what they move depends on the mode / focused pane. */
static void move_keys(struct dashboard *d, enum km_mode m, enum ui_action a)
{
    struct ui_state *ui = &d->ui;
    int page = dashboard_log_rows(d);
    int rank_page = layout_rank_capacity(&d->lay.ranks, ui->grid);
    int per_row = ui->grid ? layout_grid_per_row(&d->lay.ranks) : 1;
    if (per_row < 1) per_row = 1;
    if (rank_page < 1) rank_page = 1;
    switch (m) {
    case KM_HELP: {
        int *t = &ui->help_top;
        int hp = d->lay.help.h > 3 ? d->lay.help.h - 2 : 1;
        int n = ui->gpu_view ? ui->n_gpu_lines : (int)ui->n_help;
        if (a == UI_UP) (*t)--;
        else if (a == UI_DOWN) (*t)++;
        else if (a == UI_PAGE_UP) *t -= hp;
        else if (a == UI_PAGE_DOWN) *t += hp;
        else if (a == UI_HOME) *t = 0;
        else if (a == UI_END) *t = n;
        if (*t > n - hp) *t = n - hp;
        if (*t < 0) *t = 0;
        return;
    }
    case KM_CHECK: {
        int *t = &ui->check_top;
        int cp = d->lay.check.h > 2 ? d->lay.check.h - 1 : 1;
        if (a == UI_UP) (*t)--;
        else if (a == UI_DOWN) (*t)++;
        else if (a == UI_PAGE_UP) *t -= cp;
        else if (a == UI_PAGE_DOWN) *t += cp;
        else if (a == UI_HOME) *t = 0;
        else if (a == UI_END) *t = (int)ui->n_check - cp;
        if (*t > (int)ui->n_check - cp) *t = (int)ui->n_check - cp;
        if (*t < 0) *t = 0;
        return;
    }
    case KM_LOG:
        switch (a) {
        case UI_UP: log_scroll(d, -1); break;
        case UI_DOWN: log_scroll(d, 1); break;
        case UI_PAGE_UP: log_scroll(d, -(page > 1 ? page - 1 : 1)); break;
        case UI_PAGE_DOWN: log_scroll(d, page > 1 ? page - 1 : 1); break;
        case UI_HOME: log_scroll(d, -(1L << 40)); break;
        case UI_END: ui->follow = true; ui->mark = 0; break;
        case UI_LEFT: ui->log_hscroll = ui->log_hscroll > 8 ? ui->log_hscroll - 8 : 0; break;
        case UI_RIGHT: ui->log_hscroll += 8; break;
        default: break;
        }
        return;
    case KM_EVENTS: {
        long back = ui->events_back;
        long max = d->job ? (long)d->job->ev_count : 0;
        if (a == UI_UP) back++;
        else if (a == UI_DOWN) back--;
        else if (a == UI_PAGE_UP) back += page;
        else if (a == UI_PAGE_DOWN) back -= page;
        else if (a == UI_HOME) back = max;
        else if (a == UI_END) back = 0;
        if (back > max) back = max;
        if (back < 0) back = 0;
        ui->events_back = (int)back;
        return;
    }
    default:
        break;
    }
    /* ranks: table rows, or grid rows and cells, as places in the view (its order and
     * filters); the node view moves among its nodes */
    dashboard_view_refresh(d);
    const struct rank_view *v = &d->view;
    bool nodes = ui->node_view;
    long n = nodes ? (long)v->n_nodes_shown : (long)v->n;
    if (nodes) per_row = 1;
    if (n <= 0) return;
    long at = nodes ? (ui->node_selected >= 0 && (size_t)ui->node_selected < v->nodes_cap
                           ? v->node_pos[ui->node_selected] : -1)
                    : rank_view_pos(v, ui->selected);
    bool outside = at < 0;          /* filtered out: any move lands on the first shown */
    switch (a) {
    case UI_UP: at -= per_row; break;
    case UI_DOWN: at += per_row; break;
    case UI_LEFT: if (ui->grid && !nodes) at--; break;
    case UI_RIGHT: if (ui->grid && !nodes) at++; break;
    case UI_PAGE_UP: at -= (long)rank_page; break;
    case UI_PAGE_DOWN: at += (long)rank_page; break;
    case UI_HOME: at = 0; break;
    case UI_END: at = n - 1; break;
    default: break;
    }
    if (outside && a != UI_END) at = 0;
    if (at >= n) at = n - 1;
    if (at < 0) at = 0;
    if (nodes) {
        ui->node_selected = v->nodes[at];
        scroll_to_selection(d);
    } else {
        select_rank(d, v->idx[at]);
    }
}

/* After a filter changed: a selection the filter hides moves to the first rank shown (the log
 * shows that one), and the table starts from the top (the most urgent rows). */
static void filter_changed(struct dashboard *d)
{
    struct ui_state *ui = &d->ui;
    dashboard_view_refresh(d);
    const struct rank_view *v = &d->view;
    ui->ranks_top = 0;
    ui->nodes_top = 0;
    if (v->n && rank_view_pos(v, ui->selected) < 0) select_rank(d, v->idx[0]);
    if (v->n_nodes_shown && (ui->node_selected < 0 || (size_t)ui->node_selected >= v->nodes_cap ||
                             v->node_pos[ui->node_selected] < 0))
        ui->node_selected = v->nodes[0];
}

static bool filters_on(const struct ui_state *ui)
{
    return ui->filter != RF_ALL || ui->host_filter[0] || ui->filter_node;
}

/* Enter on a node: the rank table shows that node's ranks (the most urgent selected). */
static void open_node(struct dashboard *d)
{
    struct ui_state *ui = &d->ui;
    const struct job *j = d->job;
    if (ui->node_selected < 0 || (size_t)ui->node_selected >= j->n_nodes) return;
    ui->node_view = false;
    ui->filter_node = ui->node_selected + 1;
    ui->filter = RF_ALL;
    ui->host_filter[0] = '\0';
    /* the node's ranks in attention order put its worst first: that one is selected */
    filter_changed(d);
    if (d->view.n) select_rank(d, d->view.idx[0]);
    dashboard_notice(d, "the ranks of node %s (Esc: every rank)", j->nodes[ui->node_selected].name);
}

static void search_input(struct ui_state *ui, int key)
{
    char mb[MB_LEN_MAX];
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t n = wcrtomb(mb, (wchar_t)key, &st);
    if (n == (size_t)-1 || ui->input_len + n >= sizeof ui->input) return;
    memcpy(ui->input + ui->input_len, mb, n);
    ui->input_len += n;
    ui->input[ui->input_len] = '\0';
}

static void search_delete(struct ui_state *ui)
{
    /* back over one whole UTF-8 character */
    while (ui->input_len > 0) {
        unsigned char c = (unsigned char)ui->input[--ui->input_len];
        if ((c & 0xC0) != 0x80) break;
    }
    ui->input[ui->input_len] = '\0';
}

/* A question answered yes: do what it asked about. */
static void confirmed(struct dashboard *d, enum ui_action a)
{
    enum action ca = ui_action_controller(a);
    if (ca != ACT_NONE) act(d, ca, d->ui.selected);
}

/* `ddptop view`: no process is left to act on. True when the key was one of those (or q,
 * which quits at once: there is nothing to stop and no session to detach from). */
static bool view_only_key(struct dashboard *d, enum ui_action a, int key)
{
    char name[32];
    switch (a) {
    case UI_RESTART: case UI_STOP: case UI_STACKS: case UI_DETACH: case UI_LAUNCH_ANYWAY:
        dashboard_notice(d, "view of a finished run: %s does nothing",
                         keymap_key_name(key, name, sizeof name));
        return true;
    case UI_QUIT:
        d->quit = true;
        return true;
    default:
        return false;
    }
}

unsigned dashboard_key(struct dashboard *d, int key, bool function_key)
{
    struct ui_state *ui = &d->ui;
    enum km_mode m = current_mode(d);
    /* the table speaks wgetch codes: function keys above KEY_MIN, characters as themselves */
    enum ui_action a = keymap_lookup(m, key);
    (void)function_key;
    const struct job *j = d->job;
    if (!j) return 0;
    if (d->view_only && view_only_key(d, a, key)) return DK_REDRAW;
    switch (a) {
    case UI_NONE: return 0;
    case UI_UP: case UI_DOWN: case UI_LEFT: case UI_RIGHT: case UI_PAGE_UP: case UI_PAGE_DOWN:
    case UI_HOME: case UI_END:
        move_keys(d, m, a);
        return DK_REDRAW;
    case UI_OPEN:
        if (m == KM_RANKS && ui->node_view) {
            open_node(d);
            return DK_REDRAW | DK_RELAYOUT;
        }
        if (m == KM_EVENTS) {
            int r = events_rank(j);
            if (r >= 0) select_rank(d, r);
        }
        ui->log_mode = LOGV_RANK;
        log_show_selected(ui);
        if (d->win[P_LOG]) ui->focus = KM_LOG;
        return DK_REDRAW;
    case UI_FOCUS_NEXT: focus_move(d, 1); return DK_REDRAW;
    case UI_FOCUS_PREV: focus_move(d, -1); return DK_REDRAW;
    case UI_RESTART: case UI_QUIT:
        if (ui_action_needs_confirm(a, j->state, dashboard_running_ranks(j))) {
            ui->modal = KM_CONFIRM;
            ui->confirm = a == UI_QUIT && in_session(d) ? UI_QUIT_OR_DETACH : a;
        } else {
            confirmed(d, a);
        }
        return DK_REDRAW;
    case UI_STOP:
        act(d, ACT_STOP, -1);
        dashboard_notice(d, "stopping every rank (r restarts)");
        return DK_REDRAW;
    case UI_STACKS:
        act(d, ACT_STACKS, ui->selected);
        dashboard_notice(d, "asking for the stacks of rank %d...", ui->selected);
        return DK_REDRAW;
    case UI_SEARCH:
        ui->modal = KM_SEARCH;
        ui->input_host = false;
        ui->input_len = 0;
        ui->input[0] = '\0';
        return DK_REDRAW;
    case UI_FILTER_HOST:
        /* the search's input line, started from the filter in effect */
        ui->modal = KM_SEARCH;
        ui->input_host = true;
        snprintf(ui->input, sizeof ui->input, "%s", ui->host_filter);
        ui->input_len = strlen(ui->input);
        return DK_REDRAW;
    case UI_TEXT_INPUT: search_input(ui, key); return DK_REDRAW;
    case UI_TEXT_DELETE: search_delete(ui); return DK_REDRAW;
    case UI_TEXT_ACCEPT:
        ui->modal = KM_COUNT;
        if (ui->input_host) {
            ui->input_host = false;
            snprintf(ui->host_filter, sizeof ui->host_filter, "%s", ui->input);
            ui->filter_node = 0;
            filter_changed(d);
            if (ui->host_filter[0])
                dashboard_notice(d, "host %s: %zu rank%s, %zu node%s (H changes it, Esc clears it)",
                                 ui->host_filter, d->view.n, d->view.n == 1 ? "" : "s",
                                 d->view.n_nodes_shown, d->view.n_nodes_shown == 1 ? "" : "s");
            return DK_REDRAW;
        }
        snprintf(ui->search, sizeof ui->search, "%s", ui->input);
        ui->mark = 0;
        if (ui->search[0]) log_find(d, -1, ui->search);
        return DK_REDRAW;
    case UI_SEARCH_NEXT: case UI_SEARCH_PREV:
        if (!ui->search[0]) dashboard_notice(d, "no search yet: / starts one");
        else log_find(d, a == UI_SEARCH_NEXT ? -1 : 1, ui->search);
        return DK_REDRAW;
    case UI_NEXT_ERROR: log_find(d, -1, NULL); return DK_REDRAW;
    case UI_FOLLOW:
        if (ui->follow) {
            uint64_t first, end;
            log_src_range(j, ui, &first, &end);
            ui->follow = false;
            ui->log_pos = end > first ? end - 1 : 0;
        } else {
            ui->follow = true;
            ui->mark = 0;
        }
        return DK_REDRAW;
    case UI_ALL_RANKS:
        ui->log_mode = ui->log_mode == LOGV_ALL ? LOGV_RANK : LOGV_ALL;
        ui->follow = true;
        ui->mark = 0;
        return DK_REDRAW;
    case UI_ATTEMPT_PREV: case UI_ATTEMPT_NEXT: log_attempt_shift(d, a == UI_ATTEMPT_PREV ? -1 : 1);
        return DK_REDRAW;
    case UI_EVENTS_WRAP:
        ui->events_cut = !ui->events_cut;
        dashboard_notice(d, "events: %s (w: %s)", ui->events_cut ? "one row each" : "wrapped",
                         ui->events_cut ? "wrap" : "one row each");
        return DK_REDRAW;
    case UI_GRID: ui->grid = !ui->grid; ui->ranks_top = 0; return DK_REDRAW | DK_RELAYOUT;
    case UI_NODES:
        ui->node_view = !ui->node_view;
        if (!ui->node_view) ui->nccl_cols = false;   /* v again: the usual node columns */
        if (ui->node_view && (size_t)ui->selected < j->n_ranks)
            ui->node_selected = j->ranks[ui->selected].node;   /* the selected rank's node */
        filter_changed(d);
        return DK_REDRAW | DK_RELAYOUT;
    case UI_NCCL:   /* the node view with NCCL's columns; again: its usual ones */
        ui->nccl_cols = !(ui->nccl_cols && ui->node_view);
        if (ui->nccl_cols && !ui->node_view) {
            ui->node_view = true;
            if ((size_t)ui->selected < j->n_ranks) ui->node_selected = j->ranks[ui->selected].node;
            filter_changed(d);
        }
        return DK_REDRAW | DK_RELAYOUT;
    case UI_ORDER:
        dashboard_view_refresh(d);
        ui->order = d->view.attention ? ORDER_RANK : ORDER_ATTENTION;
        ui->ranks_top = 0;
        ui->nodes_top = 0;
        dashboard_notice(d, "%s: %s (o: %s)", ui->node_view ? "nodes" : "ranks",
                         ui->order == ORDER_RANK ? "by rank" : "attention first",
                         ui->order == ORDER_RANK ? "attention first" : "by rank");
        return DK_REDRAW;
    case UI_FILTER_STATE:
        ui->filter = (enum rank_filter)((ui->filter + 1) % RF_COUNT);
        filter_changed(d);
        dashboard_notice(d, "state filter: %s, %zu rank%s (F: next, Esc: all)", rank_filter_name(ui->filter),
                         d->view.n, d->view.n == 1 ? "" : "s");
        return DK_REDRAW;
    case UI_LOG_SCALE: ui->log_scale = !ui->log_scale; return DK_REDRAW;
    case UI_NCCL_LINES:
        ui->show_nccl = !ui->show_nccl;
        if (ui->log_mode == LOGV_STACKS) ui->log_mode = LOGV_RANK;
        dashboard_notice(d, "NCCL's INFO lines %s (I: %s; the log files keep them all)",
                         ui->show_nccl ? "shown" : "folded", ui->show_nccl ? "fold them" : "show them");
        return DK_REDRAW;
    case UI_MAXIMIZE: ui->log_max = !ui->log_max; return DK_REDRAW | DK_RELAYOUT;
    case UI_NEXT_THEME: {
        char name[64], err[256];
        theme_next_name(&d->dirs, ui->theme_name, name, sizeof name);
        struct theme t;
        if (theme_load(&t, name, &d->dirs, err, sizeof err) != 0) {
            dashboard_notice(d, "theme %s: %s", name, err);
        } else {
            d->theme = t;
            snprintf(ui->theme_name, sizeof ui->theme_name, "%s", name);
            dashboard_build_paint(d);
            dashboard_notice(d, "theme: %s (t: next)", name);
        }
        return DK_REDRAW | DK_REPAINT;
    }
    case UI_HELP: ui->modal = KM_HELP; ui->gpu_view = false; ui->help_top = 0; return DK_REDRAW | DK_RELAYOUT;
    case UI_GPUS:
        ui->modal = KM_HELP;
        ui->gpu_view = true;
        ui->help_top = 0;
        ui->n_gpu_lines = d->job ? pane_gpus_lines(d->job) : 0;
        return DK_REDRAW | DK_RELAYOUT;
    case UI_CANCEL:
        if (ui->modal != KM_COUNT) {
            bool was_help = ui->modal == KM_HELP;
            ui->modal = KM_COUNT;
            ui->input_host = false;
            ui->gpu_view = false;
            return DK_REDRAW | (was_help ? DK_RELAYOUT : 0);
        }
        if (ui->log_max) {
            ui->log_max = false;
            return DK_REDRAW | DK_RELAYOUT;
        }
        if (ui->log_mode == LOGV_STACKS) {
            ui->log_mode = LOGV_RANK;
            log_show_selected(ui);
        } else if (ui->search[0]) {
            ui->search[0] = '\0';
            ui->mark = 0;
        } else if (filters_on(ui)) {
            ui->filter = RF_ALL;
            ui->host_filter[0] = '\0';
            ui->filter_node = 0;
            filter_changed(d);
            dashboard_notice(d, "every rank shown (F, H or Enter on a node filter them)");
        }
        return DK_REDRAW;
    case UI_CONFIRM: {
        enum ui_action q = ui->confirm;
        ui->modal = KM_COUNT;
        ui->confirm = UI_NONE;
        confirmed(d, q);
        return DK_REDRAW;
    }
    case UI_LAUNCH_ANYWAY:
        if (j->state == JOB_CHECK_FAILED) act(d, ACT_LAUNCH_ANYWAY, -1);
        return DK_REDRAW;
    case UI_REDRAW: return DK_REDRAW | DK_REPAINT;
    case UI_DETACH:
        if (ui->modal == KM_CONFIRM && ui->confirm != UI_QUIT_OR_DETACH) return 0;
        ui->modal = KM_COUNT;
        ui->confirm = UI_NONE;
        if (!in_session(d))
            dashboard_notice(d, "not in a session (DDPTOP_NO_SESSION): nothing to detach from");
        else if (d->session->detach() != 0)
            dashboard_notice(d, "the session did not take the detach request: Ctrl-\\ detaches this terminal");
        return DK_REDRAW;
    case UI_QUIT_OR_DETACH: break;
    case UI_ACTION_COUNT: break;
    }
    return 0;
}
