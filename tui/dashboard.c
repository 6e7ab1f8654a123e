/* The dashboard (dashboard.h): the terminal's life cycle (take it at the first frame, give it
 * back on every way out), the frame loop (draw only when the model's generation moved, a key
 * changed the UI or a one-second timer for ages is due; at most 10 frames a second; one
 * window per area of the layout, wnoutrefresh each, one doupdate), and the controller's hooks.
 * What each area shows and how is the pane table's (pane_table.h); keys are in
 * dashboard_keys.c, the panes in pane_*.c. */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "check/check_report_text.h"
#include "dashboard.h"
#include "dashboard_int.h"
#include "headless.h"
#include "keymap.h"
#include "util/util.h"
/* last: term.h defines macros named like common words (lines, columns) */
#include <term.h>

#define FRAME_MIN_MS   100     /* at most 10 frames a second */
#define TIMER_MS       1000    /* ages and the elapsed time tick once a second */
#define MERGED_CAP     16384   /* lines of the all-ranks view */

/* For the crash handlers and the fatal hook, which cannot be given a context. */
static volatile sig_atomic_t term_taken;
static int saved_stderr = -1;      /* the real stderr while ours goes to capture_file */
static FILE *capture_file;

/* Gives the terminal back. Called from normal paths and from signal handlers: endwin is
 * what htop calls there too; everything else here is async-signal-safe. */
static void terminal_restore(void)
{
    if (!term_taken) return;
    term_taken = 0;
    endwin();
    if (saved_stderr >= 0) dup2(saved_stderr, STDERR_FILENO);
}

static void crash_handler(int sig)
{
    terminal_restore();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_crash_handlers(void)
{
    static const int sigs[] = { SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL };
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = crash_handler;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
}

/* What anything (libssh, the controller) writes to stderr while the screen is ours goes to
 * a temporary file, shown after the terminal is back; written raw it would tear the screen. */
static void stderr_capture_begin(void)
{
    fflush(stderr);
    capture_file = tmpfile();
    if (!capture_file) return;
    saved_stderr = dup(STDERR_FILENO);
    if (saved_stderr < 0 || dup2(fileno(capture_file), STDERR_FILENO) < 0) {
        if (saved_stderr >= 0) close(saved_stderr);
        saved_stderr = -1;
        fclose(capture_file);
        capture_file = NULL;
    }
}

static void stderr_capture_end(void)
{
    fflush(stderr);
    if (saved_stderr >= 0) {
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        saved_stderr = -1;
    }
    if (!capture_file) return;
    rewind(capture_file);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, capture_file)) > 0) fwrite(buf, 1, n, stderr);
    fclose(capture_file);
    capture_file = NULL;
}

static bool no_color_env(void)
{
    const char *s = getenv("NO_COLOR");
    return s && *s;
}

void dashboard_build_paint(struct dashboard *d)
{
    int colors = 0;
    if (d->screen_on && has_colors() && !d->no_color) colors = COLORS;
    struct theme_resolved res;
    theme_resolve(&d->theme, colors, d->no_color || colors < 8, &res);
    for (int r = 0; r < ROLE_COUNT; r++) {
        const struct theme_style *st = &res.style[r];
        attr_t a = A_NORMAL;
        if (st->attrs & THEME_BOLD) a |= A_BOLD;
        if (st->attrs & THEME_DIM) a |= A_DIM;
        if (st->attrs & THEME_REVERSE) a |= A_REVERSE;
        if (st->attrs & THEME_UNDERLINE) a |= A_UNDERLINE;
#ifdef A_ITALIC
        if (st->attrs & THEME_ITALIC) a |= A_ITALIC;
#endif
        if (!res.mono && colors >= 8 && r + 1 < COLOR_PAIRS) {
            init_pair((short)(r + 1), st->fg, st->bg);
            a |= COLOR_PAIR(r + 1);
        }
        d->paint.role[r] = a;
    }
    d->paint.ascii = !d->ui.utf8;
}

/* Takes the terminal: the first frame, not dashboard_new, so that errors before it stay on a
 * normal terminal. */
static int terminal_take(struct dashboard *d)
{
    if (d->screen_on) return 0;
    const char *cs = nl_langinfo(CODESET);
    d->ui.utf8 = cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
    stderr_capture_begin();
    d->screen = newterm(NULL, stdout, stdin);
    if (!d->screen) {
        stderr_capture_end();
        return -1;
    }
    term_taken = 1;
    d->screen_on = true;
    install_crash_handlers();
    util_set_fatal_hook(terminal_restore);
    cbreak();
    noecho();
    nonl();
    intrflush(stdscr, FALSE);
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    if (has_colors() && !d->no_color) {
        start_color();
        use_default_colors();
    }
    dashboard_build_paint(d);
    d->rows = LINES;
    d->cols = COLS;
    d->have_lay = false;
    return 0;
}

static void windows_free(struct dashboard *d)
{
    for (int i = 0; i < AREA_COUNT; i++) {
        if (d->win[i]) delwin(d->win[i]);
        d->win[i] = NULL;
    }
}

static void terminal_give_back(struct dashboard *d)
{
    if (!d->screen_on) return;
    windows_free(d);
    terminal_restore();
    d->screen_on = false;
    delscreen(d->screen);
    d->screen = NULL;
    util_set_fatal_hook(NULL);
    stderr_capture_end();
}

/* The layout for the current size and toggles; windows are made again only when it moved. */
static void layout_update(struct dashboard *d)
{
    const struct job *j = d->job;
    struct layout_in in = {
        .rows = d->rows, .cols = d->cols,
        .show_help = d->ui.modal == KM_HELP,
        .log_maximized = d->ui.log_max,
        .grid_mode = d->ui.grid && !d->ui.node_view,
        .show_check = d->ui.show_check,
        /* the node view sizes the pane by its nodes */
        .n_ranks = !j ? 0 : d->ui.node_view ? (int)j->n_nodes : (int)j->n_ranks,
        /* the GPU view takes what the screen has: its lines grow with the samples */
        .help_lines = d->ui.gpu_view ? 10000 : (int)d->ui.n_help + 2,
        .check_lines = d->ui.n_check ? (int)d->ui.n_check + 1 : 0,
    };
    struct layout l;
    layout_compute(&in, &l);
    if (d->have_lay && memcmp(&l, &d->lay, sizeof l) == 0) return;
    d->lay = l;
    d->have_lay = true;
    windows_free(d);
    werase(stdscr);
    wnoutrefresh(stdscr);
    if (l.too_small) return;
    for (int a = 0; a < AREA_COUNT; a++) {
        const struct rect *r = &l.area[a];
        if (rect_visible(r)) d->win[a] = newwin(r->h, r->w, r->y, r->x);
    }
    struct pane_ctx c;
    dashboard_pane_ctx(d, &c, d->ui.now_ms);
    pane_focus_check(&c);
}

void dashboard_pane_ctx(struct dashboard *d, struct pane_ctx *c, int64_t now_ms)
{
    *c = (struct pane_ctx){
        .job = d->job, .ui = &d->ui, .view = &d->view, .chart = &d->chart, .paint = &d->paint,
        .lay = d->have_lay ? &d->lay : NULL, .now_ms = now_ms,
    };
}

size_t dashboard_running_ranks(const struct job *j)
{
    size_t n = 0;
    for (size_t i = 0; j && i < j->n_ranks; i++)
        if (j->ranks[i].state == RANK_RUNNING || j->ranks[i].state == RANK_STALLED) n++;
    return n;
}

void dashboard_notice(struct dashboard *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ui_notice_v(&d->ui, mono_ms(), fmt, ap);
    va_end(ap);
}

/* The terminal's size from the kernel: SIGWINCH reaches us through the controller's
 * self-pipe (on_resize), and this also catches a resize that arrived some other way. */
static void size_check(struct dashboard *d)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) return;
    if (ws.ws_row != LINES || ws.ws_col != COLS) resizeterm(ws.ws_row, ws.ws_col);
    if (d->rows != LINES || d->cols != COLS) {
        d->rows = LINES;
        d->cols = COLS;
        d->pending |= DK_RELAYOUT | DK_REDRAW;
    }
}

static void draw_frame(struct dashboard *d, const struct job *j, int64_t now)
{
    struct ui_state *ui = &d->ui;
    ui->now_ms = now;
    ui->show_check = j->state == JOB_CHECKING || j->state == JOB_CHECK_FAILED;
    if (j->attempt != ui->log_seen_attempt) {
        /* a restart: the log pane follows the new attempt (a position scrolled to in the
         * old one is not among the lines it shows now) */
        ui->log_seen_attempt = j->attempt;
        if (!ui->log_pinned && ui->log_mode != LOGV_STACKS) {
            ui->follow = true;
            ui->mark = 0;
        }
    }
    layout_update(d);
    if (d->pending & DK_REPAINT) clearok(curscr, TRUE);
    d->pending = 0;
    if (d->lay.too_small) {
        werase(stdscr);
        pane_too_small(stdscr, d->rows, d->cols, &d->paint);
        wnoutrefresh(stdscr);
        doupdate();
        return;
    }
    const struct layout *l = &d->lay;
    bool grid = ui->grid && !ui->node_view;
    int cap = layout_rank_capacity(&l->area[AREA_RANKS], grid);
    d->job = j;
    struct pane_ctx c;
    dashboard_pane_ctx(d, &c, now);
    pane_ranks_view_refresh(&c);
    if (ui->selected >= (int)j->n_ranks) ui->selected = j->n_ranks ? (int)j->n_ranks - 1 : 0;
    if (ui->selected < 0) ui->selected = 0;
    /* only kept in range here: keys scroll to the selection (pane_ranks_keys.c), a rank moving
     * in the attention order does not */
    int per_row = grid ? layout_grid_per_row(&l->area[AREA_RANKS]) : 1;
    if (ui->node_view) ranks_scroll_to(&ui->nodes_top, -1, (int)d->view.n_nodes_shown, cap, 1);
    else ranks_scroll_to(&ui->ranks_top, -1, (int)d->view.n, cap, per_row);
    /* each area shows the kind of pane the UI state chooses; the overlay last, over them */
    for (int a = 0; a < AREA_COUNT; a++) {
        const struct pane_class *pc = pane_table_shown((enum area)a, ui);
        if (d->win[a] && pc && a != AREA_OVERLAY) pc->draw(d->win[a], &c);
    }
    for (int a = 0; a < AREA_COUNT; a++)
        if (d->win[a] && a != AREA_OVERLAY) wnoutrefresh(d->win[a]);
    const struct pane_class *top = pane_table_shown(AREA_OVERLAY, ui);
    if (d->win[AREA_OVERLAY] && top) {
        top->draw(d->win[AREA_OVERLAY], &c);
        touchwin(d->win[AREA_OVERLAY]);    /* on top of the panes drawn under it */
        wnoutrefresh(d->win[AREA_OVERLAY]);
    }
    doupdate();
}

/* ---- the controller's hooks ------------------------------------------------------------ */

static int fe_input_fd(void *ctx)
{
    (void)ctx;
    return STDIN_FILENO;
}

static void fe_on_input(void *ctx, struct controller *c)
{
    struct dashboard *d = ctx;
    d->ctl = c;
    d->job = controller_job(c);
    dashboard_read_keys(d);
    /* a key is answered now, not at the next model change or the one-second timer */
    if (d->key_frame && d->job) dashboard_tick(d, d->job);
}

void dashboard_read_keys(struct dashboard *d)
{
    if (!d->screen_on) {
        /* input before the first frame: take the terminal now so keys are read in its mode */
        if (terminal_take(d) != 0) return;
    }
    wint_t ch;
    int rc, budget = 256;           /* a paste of thousands of keys must not starve the loop */
    while (budget-- > 0 && (rc = wget_wch(stdscr, &ch)) != ERR) {
        if (rc == KEY_CODE_YES && ch == KEY_RESIZE) {
            size_check(d);
            d->rows = LINES;
            d->cols = COLS;
            d->pending |= DK_RELAYOUT | DK_REDRAW;
            continue;
        }
        unsigned f = dashboard_key(d, (int)ch, rc == KEY_CODE_YES);
        d->pending |= f;
        if (f) d->key_frame = true;
    }
}

static int fe_on_tick(void *ctx, const struct job *j)
{
    return dashboard_tick(ctx, j);
}

int dashboard_tick(struct dashboard *d, const struct job *j)
{
    d->job = j;
    int64_t now = mono_ms();
    if (!d->screen_on && terminal_take(d) != 0) return -1;
    if (now - d->last_size_check_ms >= 250) {
        d->last_size_check_ms = now;
        size_check(d);
    }
    bool want = d->pending || j->generation != d->drawn_gen || now >= d->next_timer_ms;
    if (!want) return (int)(d->next_timer_ms - now);
    /* the model's changes draw at most 10 frames a second; a key's frame goes out at once (keys
     * come at a person's pace, and 100 ms more would be felt) */
    if (!d->key_frame && now - d->last_frame_ms < FRAME_MIN_MS)
        return (int)(FRAME_MIN_MS - (now - d->last_frame_ms));
    d->key_frame = false;
    draw_frame(d, j, now);
    d->drawn_gen = j->generation;
    d->last_frame_ms = now;
    d->next_timer_ms = now + TIMER_MS;
    return TIMER_MS;
}

static void fe_on_line(void *ctx, const struct job *j, int rank, const struct log_line *line)
{
    dashboard_merged_add(ctx, j, rank, line);
}

/* The line goes at the end of the merged list, and into the folded list: with the fold's
 * group (job/log_fold.h) when other ranks printed it within the window, else as a folded line
 * of its own. Nothing waits here: a folded line is on screen at its first line's place at once
 * and gains its ranks as they come. */
void dashboard_merged_add(struct dashboard *d, const struct job *j, int rank, const struct log_line *l)
{
    struct ui_state *ui = &d->ui;
    if (!ui->merged) {
        ui->merged_cap = MERGED_CAP;
        ui->merged = xcalloc(ui->merged_cap, sizeof *ui->merged);
        ui->folds = xcalloc(ui->merged_cap, sizeof *ui->folds);
        d->fold = log_fold_new(LOG_FOLD_VIEW_WINDOW_MS, LOG_FOLD_MAX_GROUPS, LOG_FOLD_MAX_BYTES);
    }
    uint64_t m = ++ui->merged_total, cap = ui->merged_cap;
    ui->merged[(m - 1) % cap] = (struct merged_ref){ rank, l->seq, 0 };
    int64_t now = mono_ms();
    log_fold_set_world(d->fold, j->n_ranks);
    struct log_fold_group *g = log_fold_add(d->fold, now, rank, l->stream, l->attempt, l->flags, l->text, l->len);
    struct fold_ref *fr = NULL;
    /* the group's folded line, while it is still held (its first line, and so all of them) */
    if (g->n > 1 && ui->folds_total - g->user < cap && m - (fr = &ui->folds[(g->user - 1) % cap])->first < cap) {
        ui->merged[(fr->last - 1) % cap].fold_next = m;
        fr->last = m;
        fr->n++;
    } else {
        g->user = ++ui->folds_total;
        ui->folds[(g->user - 1) % cap] = (struct fold_ref){ m, m, 1 };
    }
    while (log_fold_due(d->fold, now, false)) log_fold_pop(d->fold);
}

static void fe_on_event(void *ctx, const struct job *j, const struct job_event *ev)
{
    struct dashboard *d = ctx;
    (void)j;
    (void)ev;
    d->pending |= DK_REDRAW;
}

static void fe_on_resize(void *ctx)
{
    dashboard_resized(ctx);
}

void dashboard_resized(struct dashboard *d)
{
    if (!d->screen_on) return;
    size_check(d);
    d->pending |= DK_RELAYOUT | DK_REDRAW;
}

/* Text split into malloc'd lines (no trailing empty line). */
static char **split_lines(const char *text, size_t *n_out)
{
    size_t n = 0, cap = 16;
    char **v = xmalloc(cap * sizeof *v);
    const char *s = text ? text : "";
    while (*s) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (n == cap) v = xrealloc(v, (cap *= 2) * sizeof *v);
        v[n++] = xstrndup(s, len);
        s += len + (e ? 1 : 0);
    }
    *n_out = n;
    return v;
}

static void free_lines(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void fe_on_check(void *ctx, const struct check_report *r)
{
    struct dashboard *d = ctx;
    struct strbuf sb;
    strbuf_init(&sb);
    check_report_table(r, &sb, 0);
    strbuf_adds(&sb, "\n");
    check_report_details(r, &sb, 0);
    free_lines(d->ui.check_lines, d->ui.n_check);
    d->ui.check_lines = split_lines(sb.buf, &d->ui.n_check);
    d->ui.check_top = 0;
    strbuf_done(&sb);
    d->pending |= DK_REDRAW | DK_RELAYOUT;
}

static void fe_on_stacks(void *ctx, const struct job *j, int rank, const char *text)
{
    struct dashboard *d = ctx;
    (void)j;
    free_lines(d->ui.stacks, d->ui.n_stacks);
    d->ui.stacks = split_lines(text && *text ? text : "(the agent sent no stack)",
                               &d->ui.n_stacks);
    d->ui.stacks_rank = rank;
    d->ui.log_mode = LOGV_STACKS;
    d->ui.follow = false;
    /* from the first frame down */
    d->ui.log_pos = (uint64_t)pane_log_rows(d->have_lay ? &d->lay : NULL);
    d->ui.log_hscroll = 0;
    d->ui.mark = 0;
    d->pending |= DK_REDRAW;
}

/* ---- life cycle -------------------------------------------------------------------------- */

struct dashboard *dashboard_new(const char *theme, char *err, size_t errlen)
{
    struct dashboard *d = xcalloc(1, sizeof *d);
    theme_dirs_init(&d->dirs, NULL, NULL, NULL);
    if (theme_load(&d->theme, theme ? theme : "default", &d->dirs, err, errlen) != 0) {
        theme_dirs_done(&d->dirs);
        free(d);
        return NULL;
    }
    snprintf(d->ui.theme_name, sizeof d->ui.theme_name, "%s", d->theme.name);
    setlocale(LC_ALL, "");
    d->no_color = no_color_env();
    d->ui.focus = AREA_RANKS;
    d->ui.modal = KM_COUNT;
    d->ui.follow = true;
    d->ui.log_mode = LOGV_RANK;
    d->ui.help_lines = keymap_help_lines(&d->ui.n_help);
    chart_cache_init(&d->chart);
    rank_view_init(&d->view);
    return d;
}

void dashboard_free(struct dashboard *d)
{
    if (!d) return;
    terminal_give_back(d);
    chart_cache_done(&d->chart);
    rank_view_done(&d->view);
    keymap_help_free(d->ui.help_lines, d->ui.n_help);
    free_lines(d->ui.check_lines, d->ui.n_check);
    free_lines(d->ui.stacks, d->ui.n_stacks);
    free(d->ui.merged);
    free(d->ui.folds);
    log_fold_free(d->fold);
    theme_dirs_done(&d->dirs);
    free(d);
}

void dashboard_frontend(struct dashboard *d, struct frontend *fe)
{
    memset(fe, 0, sizeof *fe);
    fe->ctx = d;
    fe->input_fd = fe_input_fd;
    fe->on_input = fe_on_input;
    fe->on_tick = fe_on_tick;
    fe->on_line = fe_on_line;
    fe->on_event = fe_on_event;
    fe->on_resize = fe_on_resize;
    fe->on_check = fe_on_check;
    fe->on_stacks = fe_on_stacks;
}

void dashboard_view_only(struct dashboard *d, const struct job *j)
{
    d->job = j;
    d->view_only = true;
    d->ui.read_only = true;
    /* a failed run opens on the rank that failed first: its last lines are what one came for */
    if (j->cause.set && j->cause.rank >= 0 && (size_t)j->cause.rank < j->n_ranks)
        d->ui.selected = j->cause.rank;
}

bool dashboard_quit_asked(const struct dashboard *d)
{
    return d->quit;
}

void dashboard_set_controller(struct dashboard *d, struct controller *c)
{
    d->ctl = c;
    d->job = controller_job(c);
}

int dashboard_run(const struct run_opts *o, const struct hostlist *hl, const char *theme,
                  const struct frontend_session *s)
{
    char err[512] = "";
    /* a terminal curses cannot drive still gets the job, line by line */
    int term_err = 0;
    if (setupterm(NULL, STDOUT_FILENO, &term_err) != OK) {
        const char *t = getenv("TERM");
        fprintf(stderr, "ddptop: the terminal '%s' is unknown to terminfo; showing the job as "
                "lines (set TERM, e.g. TERM=xterm-256color, for the dashboard)\n", t ? t : "");
        return headless_run(o, hl, s);
    }
    del_curterm(cur_term);
    struct dashboard *d = dashboard_new(theme, err, sizeof err);
    if (!d) {
        fprintf(stderr, "ddptop: %s\n", err);
        return 2;
    }
    d->ui.unfold = o->no_fold;
    struct frontend fe;
    dashboard_frontend(d, &fe);
    struct controller *c = controller_new(o, hl, &fe, err, sizeof err);
    if (!c) {
        dashboard_free(d);
        fprintf(stderr, "ddptop: %s\n", err);
        return 2;
    }
    dashboard_set_controller(d, c);
    d->session = s;
    if (s && s->note_run) s->note_run(controller_job(c)->run_id, controller_job(c)->log_dir);
    int rc = controller_run(c);
    dashboard_free(d);
    const struct job *j = controller_job(c);
    if (j)
        fprintf(stderr, "ddptop: job %s after %d attempt%s (exit %d); logs in %s\n",
                job_state_name(j->state), j->attempt + 1, j->attempt ? "s" : "", rc,
                j->log_dir ? j->log_dir : "?");
    if (j && j->incomplete[0])
        fprintf(stderr, "ddptop: the run's record is incomplete (%s): %s\n", j->incomplete, j->incomplete_what);
    controller_free(c);
    return rc;
}
