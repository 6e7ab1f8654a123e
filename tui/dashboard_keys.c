/* Keys of the dashboard: the key is looked up in the keymap table for the mode of the pane
 * that has the keys (pane_table.h: the overlay, the preflight or the focused pane; a question
 * or the line being typed have modes of their own), and the action goes to the pane table,
 * whose panes change the UI state (selection, scrolling, search, views, filters). What is
 * left are the dashboard's own actions, in the table below: those that go to the controller
 * (restart, stop, stacks, quit, launch anyway; y/n first where keymap.h says so), the
 * questions, the line being typed, the focus, the theme, Esc and the terminal. Handlers
 * return DK_* flags the frame loop acts on once. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "dashboard_int.h"
#include "keymap.h"
#include "pane_table.h"
#include "util/util.h"

/* The dashboard runs in a session that can detach a terminal (the entry handed one over). */
static bool in_session(const struct dashboard *d)
{
    return d->session && d->session->detach;
}

static void act(struct dashboard *d, enum action a, int rank)
{
    if (d->ctl) controller_act(d->ctl, a, rank);
}

/* A question answered yes: do what it asked about. */
static void confirmed(struct dashboard *d, enum ui_action a)
{
    enum action ca = ui_action_controller(a);
    if (ca != ACT_NONE) act(d, ca, d->ui.selected);
}

typedef unsigned dash_key_fn(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key);

static unsigned key_focus(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    (void)d, (void)key;
    pane_focus_move(c, a == UI_FOCUS_NEXT ? 1 : -1);
    return DK_REDRAW;
}

/* r and q: asked first while the job runs (keymap.h says when). */
static unsigned key_ask_or_act(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    struct ui_state *ui = &d->ui;
    (void)c, (void)key;
    if (ui_action_needs_confirm(a, d->job->state, dashboard_running_ranks(d->job))) {
        ui->modal = KM_CONFIRM;
        ui->confirm = a == UI_QUIT && in_session(d) ? UI_QUIT_OR_DETACH : a;
    } else {
        confirmed(d, a);
    }
    return DK_REDRAW;
}

static unsigned key_stop(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    (void)c, (void)a, (void)key;
    act(d, ACT_STOP, -1);
    dashboard_notice(d, "stopping every rank (r restarts)");
    return DK_REDRAW;
}

static unsigned key_stacks(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    (void)c, (void)a, (void)key;
    act(d, ACT_STACKS, d->ui.selected);
    dashboard_notice(d, "asking for the stacks of rank %d...", d->ui.selected);
    return DK_REDRAW;
}

static unsigned key_launch_anyway(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    (void)c, (void)a, (void)key;
    if (d->job->state == JOB_CHECK_FAILED) act(d, ACT_LAUNCH_ANYWAY, -1);
    return DK_REDRAW;
}

static unsigned key_confirm(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    enum ui_action q = d->ui.confirm;
    (void)c, (void)a, (void)key;
    d->ui.modal = KM_COUNT;
    d->ui.confirm = UI_NONE;
    confirmed(d, q);
    return DK_REDRAW;
}

/* d: a detach, from the panes or as the quit question's third answer (not any question's). */
static unsigned key_detach(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    struct ui_state *ui = &d->ui;
    (void)c, (void)a, (void)key;
    if (ui->modal == KM_CONFIRM && ui->confirm != UI_QUIT_OR_DETACH) return 0;
    ui->modal = KM_COUNT;
    ui->confirm = UI_NONE;
    if (!in_session(d))
        dashboard_notice(d, "not in a session (DDPTOP_NO_SESSION): nothing to detach from");
    else if (d->session->detach() != 0)
        dashboard_notice(d, "the session did not take the detach request: Ctrl-\\ detaches this terminal");
    return DK_REDRAW;
}

/* The line being typed (a search after /, a host filter after H): a character as UTF-8. */
static unsigned key_text_input(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    struct ui_state *ui = &d->ui;
    char mb[MB_LEN_MAX];
    mbstate_t st;
    (void)c, (void)a;
    memset(&st, 0, sizeof st);
    size_t n = wcrtomb(mb, (wchar_t)key, &st);
    if (n == (size_t)-1 || ui->input_len + n >= sizeof ui->input) return DK_REDRAW;
    memcpy(ui->input + ui->input_len, mb, n);
    ui->input_len += n;
    ui->input[ui->input_len] = '\0';
    return DK_REDRAW;
}

static unsigned key_text_delete(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    struct ui_state *ui = &d->ui;
    (void)c, (void)a, (void)key;
    /* back over one whole UTF-8 character */
    while (ui->input_len > 0) {
        unsigned char ch = (unsigned char)ui->input[--ui->input_len];
        if ((ch & 0xC0) != 0x80) break;
    }
    ui->input[ui->input_len] = '\0';
    return DK_REDRAW;
}

/* Enter on the typed line: the host filter, or the search from the newest line up. */
static unsigned key_text_accept(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    struct ui_state *ui = &d->ui;
    (void)a, (void)key;
    ui->modal = KM_COUNT;
    if (ui->input_host) {
        ui->input_host = false;
        snprintf(ui->host_filter, sizeof ui->host_filter, "%s", ui->input);
        ui->filter_node = 0;
        pane_ranks_filter_changed(c);
        if (ui->host_filter[0])
            dashboard_notice(d, "host %s: %zu rank%s, %zu node%s (H changes it, Esc clears it)",
                             ui->host_filter, d->view.n, d->view.n == 1 ? "" : "s",
                             d->view.n_nodes_shown, d->view.n_nodes_shown == 1 ? "" : "s");
        return DK_REDRAW;
    }
    snprintf(ui->search, sizeof ui->search, "%s", ui->input);
    ui->mark = 0;
    if (ui->search[0]) pane_log_find(c, -1, ui->search);
    return DK_REDRAW;
}

static unsigned key_next_theme(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    char name[64], err[256];
    (void)c, (void)a, (void)key;
    theme_next_name(&d->dirs, d->ui.theme_name, name, sizeof name);
    struct theme t;
    if (theme_load(&t, name, &d->dirs, err, sizeof err) != 0) {
        dashboard_notice(d, "theme %s: %s", name, err);
    } else {
        d->theme = t;
        snprintf(d->ui.theme_name, sizeof d->ui.theme_name, "%s", name);
        dashboard_build_paint(d);
        dashboard_notice(d, "theme: %s (t: next)", name);
    }
    return DK_REDRAW | DK_REPAINT;
}

/* Esc, one step back: the overlay or the question, a maximized log, the stacks, the search,
 * then the rank filters. */
static unsigned key_cancel(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    struct ui_state *ui = &d->ui;
    (void)a, (void)key;
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
        pane_log_show_selected(ui);
    } else if (ui->search[0]) {
        ui->search[0] = '\0';
        ui->mark = 0;
    } else if (pane_ranks_filtered(ui)) {
        ui->filter = RF_ALL;
        ui->host_filter[0] = '\0';
        ui->filter_node = 0;
        pane_ranks_filter_changed(c);
        dashboard_notice(d, "every rank shown (F, H or Enter on a node filter them)");
    }
    return DK_REDRAW;
}

static unsigned key_redraw(struct dashboard *d, struct pane_ctx *c, enum ui_action a, int key)
{
    (void)d, (void)c, (void)a, (void)key;
    return DK_REDRAW | DK_REPAINT;
}

/* The dashboard's own actions; every other bound action is a pane's (pane_table.h). */
static dash_key_fn *const dash_keys[UI_ACTION_COUNT] = {
    [UI_FOCUS_NEXT] = key_focus,
    [UI_FOCUS_PREV] = key_focus,
    [UI_RESTART] = key_ask_or_act,
    [UI_QUIT] = key_ask_or_act,
    [UI_STOP] = key_stop,
    [UI_STACKS] = key_stacks,
    [UI_LAUNCH_ANYWAY] = key_launch_anyway,
    [UI_CONFIRM] = key_confirm,
    [UI_DETACH] = key_detach,
    [UI_TEXT_INPUT] = key_text_input,
    [UI_TEXT_DELETE] = key_text_delete,
    [UI_TEXT_ACCEPT] = key_text_accept,
    [UI_NEXT_THEME] = key_next_theme,
    [UI_CANCEL] = key_cancel,
    [UI_REDRAW] = key_redraw,
};

bool dashboard_key_does(enum ui_action a)
{
    return (int)a >= 0 && a < UI_ACTION_COUNT && dash_keys[a];
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
    /* the table speaks wgetch codes: function keys above KEY_MIN, characters as themselves */
    (void)function_key;
    if (!d->job) return 0;
    enum ui_action a = keymap_lookup(pane_table_mode(&d->ui), key);
    if (a == UI_NONE) return 0;
    if (d->view_only && view_only_key(d, a, key)) return DK_REDRAW;
    struct pane_ctx c;
    dashboard_pane_ctx(d, &c, mono_ms());
    unsigned flags = 0;
    if (pane_table_key(&c, a, &flags)) return flags;
    /* bound but done by no one would be a bug tests/test_pane_table.c finds */
    return dashboard_key_does(a) ? dash_keys[a](d, &c, a, key) : 0;
}
