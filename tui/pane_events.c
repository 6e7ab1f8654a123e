/* The events pane (launches, exits, the root cause of a failure, stalls and stragglers,
 * lost nodes, restarts), newest at the bottom with the root cause pinned above them, long
 * events wrapped over as many rows as they need (w: one row each, cut); its class and keys
 * (pane_table.h): scrolling event by event, Enter opens the log of the event's rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "job/failure_line.h"
#include "util/sanitize.h"
#include "util/util.h"
#include "pane_table.h"
#include "panes.h"

static enum theme_role event_role(enum job_event_kind k)
{
    switch (k) {
    case EV_FAILURE: case EV_ROOT_CAUSE: case EV_NODE_LOST: case EV_NAN: return ROLE_FAIL;
    case EV_STALL: case EV_STACKS: return ROLE_STALLED;
    case EV_STRAGGLER: return ROLE_STRAGGLER;
    case EV_RESTART: case EV_STOP: case EV_GPU: case EV_SIGNAL: case EV_NCCL: case EV_SPIKE: return ROLE_WARN;
    case EV_DONE: case EV_RESUME: case EV_LAUNCH: return ROLE_OK;
    case EV_EXIT: case EV_INFO: case EV_END: return ROLE_NORMAL;
    }
    return ROLE_NORMAL;
}

static const char *event_word(enum job_event_kind k)
{
    switch (k) {
    case EV_LAUNCH: return "launch";
    case EV_EXIT: return "exit";
    case EV_FAILURE: return "failure";
    case EV_ROOT_CAUSE: return "ROOT CAUSE";
    case EV_STALL: return "stall";
    case EV_STRAGGLER: return "straggler";
    case EV_NODE_LOST: return "node lost";
    case EV_RESTART: return "restart";
    case EV_STOP: return "stop";
    case EV_DONE: return "done";
    case EV_INFO: return "info";
    case EV_RESUME: return "resume";
    case EV_STACKS: return "stacks";
    case EV_GPU: return "gpu";
    case EV_SIGNAL: return "signal";
    case EV_NCCL: return "nccl";
    case EV_NAN: return "NaN";
    case EV_SPIKE: return "spike";
    case EV_END: return "end";
    }
    return "event";
}

static void wall_hms(int64_t wall_ns, char *buf, size_t n)
{
    if (wall_ns <= 0) snprintf(buf, n, "--:--:--");
    else util_clock_text(wall_ns, buf, n);
}

/* s (safe already) from column x of row y, wrapped over up to max_rows rows (at a space when
 * the rest does not fit; the rows after the first from column 2), the last row cut. Rows used. */
static int put_wrapped(WINDOW *w, const struct paint *p, int y, int x, const char *s, int max_rows, attr_t a)
{
    int wd = getmaxx(w), used = 0;
    size_t len = strlen(s), off = 0;
    while (off < len && used < max_rows) {
        size_t n = format_fit(s + off, len - off, wd - x, NULL);
        if (n == 0) break;
        if (off + n < len && used + 1 < max_rows) {
            size_t k = n;
            while (k > 0 && s[off + k - 1] != ' ') k--;
            if (k > 0) n = k;
        }
        wmove(w, y + used, x);
        pane_put(w, p, s + off, n, wd - x, a);
        off += n;
        used++;
        x = 2;
    }
    return used;
}

/* "  word: text" from row y over up to max_rows rows (text sanitised: it may hold a rank's
 * bytes). Rows used. */
static int cause_rows(WINDOW *w, const struct paint *p, int y, const char *word, const char *text,
                      int max_rows, attr_t a)
{
    char *t = sanitize_str(text, strlen(text), 0);
    wmove(w, y, 0);
    int x = pane_put(w, p, word, strlen(word), getmaxx(w), p->role[ROLE_DIM]);
    int used = put_wrapped(w, p, y, x, t, max_rows, a);
    free(t);
    return used ? used : 1;
}

/* The root cause's class and what it found ("collective timeout: rank 3 on n4 is 3
 * collectives behind ...", wrapped over up to 3 rows: the rank behind must not be cut off),
 * then, with room, the line that proved it and the fix. Rows used. */
static int draw_cause_class(WINDOW *w, const struct root_cause *c, const struct paint *p, int y, int rows)
{
    if (c->failure == FAILURE_NONE || rows < 2) return 0;
    char *line = xasprintf("%s%s%s", failure_class_label(c->failure), c->detail ? ": " : "",
                           c->detail ? c->detail : "");
    int used = cause_rows(w, p, y, "  class: ", line, rows >= 9 ? 3 : rows >= 6 ? 2 : 1,
                          p->role[ROLE_FAIL] | A_BOLD);
    free(line);
    if (rows - used >= 5 && c->evidence)
        used += cause_rows(w, p, y + used, "  evidence: ", c->evidence, 1, p->role[ROLE_FAIL]);
    if (rows - used >= 4 && c->fix && *c->fix)
        used += cause_rows(w, p, y + used, "  fix: ", c->fix, 1, p->role[ROLE_NORMAL]);
    return used;
}

/* The root cause: the summary, wrapped over up to 3 rows (it names rank, host and signal,
 * which must not be cut off in a narrow pane), then its class (above), then the last line the
 * rank printed (the rest is in its log). Returns the rows used. */
static int draw_root_cause(WINDOW *w, const struct job *j, const struct paint *p, int y,
                           int rows)
{
    if (!j->cause.set || rows < 1) return 0;
    int wd = getmaxx(w);
    attr_t a = p->role[ROLE_FAIL] | A_BOLD;
    wmove(w, y, 0);
    int x = pane_put(w, p, "ROOT CAUSE: ", 12, wd, a);
    char *s = sanitize_str(j->cause.summary ? j->cause.summary : "?",
                           j->cause.summary ? strlen(j->cause.summary) : 1, 0);
    int used = put_wrapped(w, p, y, x, s, rows >= 6 ? 3 : rows >= 3 ? 2 : 1, a);
    free(s);
    used += draw_cause_class(w, &j->cause, p, y + used, rows - used);
    if (rows - used < 3 || j->cause.n_last_lines == 0) return used;
    const char *last = j->cause.last_lines[j->cause.n_last_lines - 1];
    if (!last) return used;
    wmove(w, y + used, 0);
    x = pane_put(w, p, "  last output: ", 15, wd, p->role[ROLE_DIM]);
    pane_put(w, p, last, strlen(last), wd - x, p->role[ROLE_FAIL]);
    return used + 1;
}

/* An event's head, "HH:MM:SS kind      ", takes EV_HEAD_COLS columns; wrapped rows go on
 * under the kind word, so the times stay a clean column to scan. */
#define EV_HEAD_COLS 19
#define EV_CONT_COLS 9

static int max_i(int a, int b)
{
    return a > b ? a : b;
}

/* The rows event text s[0..len) takes in a pane wd columns wide: one when cut, else as many
 * as wrapping needs. */
static int event_rows(const char *s, size_t len, int wd, bool cut)
{
    if (cut) return 1;
    int rows = 1, cols = max_i(wd - EV_HEAD_COLS, 1);
    for (size_t off = format_wrap(s, len, cols); off < len; rows++)
        off += format_wrap(s + off, len - off, max_i(wd - EV_CONT_COLS, 1));
    return rows;
}

/* s[0..len) into one row of max_cols columns, ending in an ellipsis when cut. */
static void put_cut(WINDOW *w, const struct paint *p, const char *s, size_t len, int max_cols,
                    attr_t a)
{
    char *whole = xmalloc(len + 1), *cut = xmalloc(len + 8);
    memcpy(whole, s, len);
    whole[len] = '\0';
    format_truncate(cut, len + 8, whole, max_cols, p->ascii);
    pane_put(w, p, cut, strlen(cut), max_cols, a);
    free(whole);
    free(cut);
}

/* One event from y down: its rows from `skip` on, at most max_rows of them. The last row
 * drawn ends in an ellipsis when text is left over (w: every event on one row, cut). */
static void draw_event(WINDOW *w, const struct paint *p, const struct job_event *ev,
                       const char *s, size_t len, int y, int skip, int max_rows, bool cut)
{
    int wd = getmaxx(w);
    attr_t a = p->role[event_role(ev->kind)] | (ev->kind == EV_ROOT_CAUSE ? A_BOLD : 0);
    size_t off = 0;
    for (int r = 0, row = -skip; row < max_rows && (off < len || r == 0); r++, row++) {
        int x = r == 0 ? EV_HEAD_COLS : EV_CONT_COLS;
        size_t n = format_wrap(s + off, len - off, max_i(wd - x, 1));
        if (row >= 0) {
            wmove(w, y + row, r == 0 ? 0 : x);
            if (r == 0) {
                char tm[16], head[64];
                wall_hms(ev->wall_ns, tm, sizeof tm);
                snprintf(head, sizeof head, "%s %-9s ", tm, event_word(ev->kind));
                x = pane_put(w, p, head, strlen(head), wd, p->role[ROLE_DIM]);
            }
            if (cut || (off + n < len && row == max_rows - 1)) {
                put_cut(w, p, s + off, len - off, wd - x, a);   /* the pane ends here */
                return;
            }
            pane_put(w, p, s + off, n, wd - x, a);
        }
        off += n;
    }
}

void pane_events_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                      const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w);
    char title[96];
    snprintf(title, sizeof title, " Events %zu%s", j->ev_count,
             ui->events_back ? "  [scrolled: End follows]" : "");
    werase(w);
    pane_title(w, p, title, ui->focus == AREA_EVENTS);
    int y = 1 + draw_root_cause(w, j, p, 1, h - 1);
    int rows = h - y;
    if (rows <= 0) return;
    size_t n = j->ev_count;
    size_t back = (size_t)(ui->events_back > 0 ? ui->events_back : 0);
    if (back > n) back = n;
    size_t last = n - back;                  /* events [start, last) are shown */
    /* from the newest shown towards older ones until the rows are full; each event's text
     * sanitized once (text[0] the newest) */
    char **text = xcalloc((size_t)rows, sizeof *text);
    int *height = xcalloc((size_t)rows, sizeof *height);
    int used = 0;
    size_t start = last, k = 0;
    while (start > 0 && used < rows && k < (size_t)rows) {
        const struct job_event *ev = job_event_at(j, start - 1);
        const char *t = ev && ev->text ? ev->text : "";
        text[k] = sanitize_str(t, strlen(t), 0);
        height[k] = event_rows(text[k], strlen(text[k]), wd, ui->events_cut);
        used += height[k];
        k++;
        start--;
    }
    /* text[k - 1] is the oldest shown: when the rows overflow, it loses its first rows (its
     * end stays next to the newer events), unless it is the only one (its end is cut) */
    int over = used > rows ? used - rows : 0;
    for (size_t i = k; i-- > 0 && y < h;) {
        const struct job_event *ev = job_event_at(j, last - 1 - i);
        int skip = i == k - 1 && k > 1 ? over : 0;
        if (ev) draw_event(w, p, ev, text[i], strlen(text[i]), y, skip, h - y, ui->events_cut);
        y += height[i] - skip;
    }
    for (size_t i = 0; i < k; i++) free(text[i]);
    free(text);
    free(height);
}

/* ---- the class ---------------------------------------------------------------------------- */

/* The rank the pane points at: the root cause's, else the newest event's. */
static int events_rank(const struct job *j)
{
    if (j->cause.set && j->cause.rank >= 0) return j->cause.rank;
    for (size_t i = j->ev_count; i-- > 0;) {
        const struct job_event *ev = job_event_at(j, i);
        if (ev && ev->rank >= 0) return ev->rank;
    }
    return -1;
}

/* Event by event; a page is the log pane's rows (what PgUp moves everywhere). */
static unsigned events_move(struct pane_ctx *c, enum ui_action a)
{
    int page = pane_log_rows(c->lay);
    long back = c->ui->events_back;
    long max = (long)c->job->ev_count;
    if (a == UI_UP) back++;
    else if (a == UI_DOWN) back--;
    else if (a == UI_PAGE_UP) back += page;
    else if (a == UI_PAGE_DOWN) back -= page;
    else if (a == UI_HOME) back = max;
    else if (a == UI_END) back = 0;
    if (back > max) back = max;
    if (back < 0) back = 0;
    c->ui->events_back = (int)back;
    return DK_REDRAW;
}

static unsigned events_open(struct pane_ctx *c, enum ui_action a)
{
    (void)a;
    int r = events_rank(c->job);
    if (r >= 0) pane_ranks_select(c, r);
    return pane_log_open_selected(c);
}

static unsigned events_wrap(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->events_cut = !ui->events_cut;
    ui_notice(ui, c->now_ms, "events: %s (w: %s)", ui->events_cut ? "one row each" : "wrapped",
              ui->events_cut ? "wrap" : "one row each");
    return DK_REDRAW;
}

static void events_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_events_draw(w, c->job, c->ui, c->paint);
}

const struct pane_class pane_events_class = {
    .name = "events",
    .area = AREA_EVENTS,
    .mode = KM_EVENTS,
    .focus = 3,
    .hints = " ? help  Up/Down scroll  Enter rank  Tab focus  r restart  K stop  q quit",
    .draw = events_draw,
    .move = events_move,
    .keys = (const struct pane_key[]){
        { UI_OPEN, events_open },
        { UI_EVENTS_WRAP, events_wrap },
        { UI_NONE, NULL },
    },
};
