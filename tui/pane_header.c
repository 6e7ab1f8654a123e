/* The header (job state, run id, attempt, nodes, world size, elapsed, step spread, tokens/s,
 * mean loss) and the status line at the bottom (key hints, y/n questions, the search being
 * typed, a notice), with their pane classes. Also the two drawing helpers every pane uses:
 * pane_put, which is the only way text reaches the screen (every byte through the
 * sanitizer), and pane_title. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "job/failure_line.h"
#include "util/sanitize.h"
#include "pane_table.h"
#include "panes.h"

/* Scratch for pane_put: panes run one at a time on the loop's thread, and reusing the buffer
 * keeps a frame free of allocations once it has grown. */
static struct strbuf put_buf;

int pane_put(WINDOW *w, const struct paint *p, const char *text, size_t len, int max_cols,
             attr_t attr)
{
    if (max_cols <= 0 || len == 0) return 0;
    strbuf_reset(&put_buf);
    sanitize_append(&put_buf, text, len, 0);
    if (!put_buf.buf) return 0;
    if (p->ascii) {
        /* no UTF-8 locale: a multibyte character would show as several garbage cells */
        size_t o = 0;
        for (size_t i = 0; i < put_buf.len; i++) {
            unsigned char c = (unsigned char)put_buf.buf[i];
            if (c < 0x80) put_buf.buf[o++] = (char)c;
            else if ((c & 0xC0) != 0x80) put_buf.buf[o++] = '?';
        }
        put_buf.len = o;
        put_buf.buf[o] = '\0';
    }
    int cols = 0;
    size_t n = format_fit(put_buf.buf, put_buf.len, max_cols, &cols);
    if (n == 0) return 0;
    wattrset(w, attr);
    waddnstr(w, put_buf.buf, (int)n);
    wattrset(w, A_NORMAL);
    return cols;
}

int pane_cell(WINDOW *w, const struct paint *p, int x, int wd, const char *text, int width, bool right,
              attr_t attr, attr_t gap)
{
    char buf[128];
    format_pad(buf, sizeof buf, text, width, right, p->ascii);
    x += pane_put(w, p, buf, strlen(buf), wd - x, attr);
    if (x < wd) x += pane_put(w, p, " ", 1, wd - x, gap);
    return x;
}

void pane_row_begin(WINDOW *w, int y, int wd, bool selected, attr_t attr)
{
    if (selected) {
        wattrset(w, attr);
        for (int i = 0; i < wd; i++) mvwaddch(w, y, i, ' ');
        wattrset(w, A_NORMAL);
    }
    wmove(w, y, 0);
}

/* Text we wrote ourselves (numbers, labels): still through pane_put, so a host name inside
 * is made safe too. */
static int put_str(WINDOW *w, const struct paint *p, const char *s, int max_cols, attr_t attr)
{
    return pane_put(w, p, s, strlen(s), max_cols, attr);
}

static void fill_rest(WINDOW *w, attr_t attr)
{
    int y, x, h, wd;
    getyx(w, y, x);
    getmaxyx(w, h, wd);
    (void)h;
    wattrset(w, attr);
    for (int i = x; i < wd; i++) mvwaddch(w, y, i, ' ');
    wattrset(w, A_NORMAL);
    wmove(w, y, x);
}

void pane_title(WINDOW *w, const struct paint *p, const char *title, bool focused)
{
    attr_t a = p->role[focused ? ROLE_TITLE_FOCUS : ROLE_TITLE];
    wmove(w, 0, 0);
    fill_rest(w, a);
    put_str(w, p, title, getmaxx(w), a);
}

static enum theme_role job_state_role(enum job_state s)
{
    switch (s) {
    case JOB_RUNNING: case JOB_DONE: return ROLE_OK;
    case JOB_STALLED: return ROLE_STALLED;
    case JOB_FAILED: case JOB_CHECK_FAILED: case JOB_FAILING: return ROLE_FAIL;
    case JOB_CHECKING: case JOB_LAUNCHING: case JOB_RESTARTING: case JOB_STOPPING:
        return ROLE_WARN;
    case JOB_STOPPED: return ROLE_DIM;
    }
    return ROLE_HEADER;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Fields of the header as separate pieces, so a narrow terminal drops whole fields. */
struct hdr_field {
    char text[96];
    enum theme_role role;
};

static size_t header_fields(const struct job *j, const struct ui_state *ui,
                            struct hdr_field *f, size_t max)
{
    size_t n = 0;
    char a[32], b[32], c[32];
#define ADD(role_, ...) do { if (n < max) { snprintf(f[n].text, sizeof f[n].text, __VA_ARGS__); \
                              f[n].role = (role_); n++; } } while (0)
    ADD(ROLE_HEADER, "ddptop");
    ADD(job_state_role(j->state), "%s", job_state_name(j->state));
    /* the files on disk lack something (a full disk): said beside the state, not in a log */
    if (j->incomplete[0]) ADD(ROLE_FAIL, "record incomplete: %.60s", j->incomplete);
    ADD(ROLE_HEADER, "run %s", j->run_id ? j->run_id : "-");
    if (j->max_restarts > 0) ADD(ROLE_HEADER, "attempt %d/%d", j->attempt, j->max_restarts);
    else ADD(ROLE_HEADER, "attempt %d", j->attempt);
    ADD(ROLE_HEADER, "nodes %zu", j->n_nodes);
    ADD(ROLE_HEADER, "world %d", j->world_size ? j->world_size : (int)j->n_ranks);
    ADD(ROLE_HEADER, "elapsed %s", format_duration(a, sizeof a, (j->ended_ms ? j->ended_ms : ui->now_ms) - j->started_ms));

    /* step spread, tokens/s and loss across the ranks that reported them */
    long *steps = j->n_ranks ? malloc(j->n_ranks * sizeof *steps) : NULL;
    size_t ns = 0, nl = 0, nt = 0, nbad = 0;
    double loss_sum = 0, tok = 0;
    for (size_t i = 0; i < j->n_ranks; i++) {
        const struct rank_info *r = &j->ranks[i];
        if (r->has_step && steps) steps[ns++] = r->step;
        if (r->has_loss && isfinite(r->loss)) { loss_sum += r->loss; nl++; }
        else if (r->has_loss && !isnan(r->loss)) nbad++;   /* NaN or inf: not in the mean */
        if (isfinite(r->tokens_per_s) && r->tokens_per_s >= 0) { tok += r->tokens_per_s; nt++; }
    }
    if (ns) {
        qsort(steps, ns, sizeof *steps, cmp_long);
        ADD(ROLE_HEADER, "step %s/%s/%s", format_step(a, sizeof a, steps[0]),
            format_step(b, sizeof b, steps[ns / 2]), format_step(c, sizeof c, steps[ns - 1]));
    } else {
        ADD(ROLE_DIM, "step -");
    }
    free(steps);
    if (nt) ADD(ROLE_HEADER, "tok/s %s", format_si(a, sizeof a, tok));
    if (nl) ADD(ROLE_HEADER, "loss %s", format_loss(a, sizeof a, loss_sum / (double)nl));
    else ADD(ROLE_DIM, "loss -");
    if (nbad) ADD(ROLE_FAIL, "loss NaN/inf on %zu rank%s", nbad, nbad == 1 ? "" : "s");
    /* what failed first is the one thing a user needs to see at once after a failure */
    if (j->cause.set && j->cause.summary) {
        /* its class first once it is known (docs/failures.md): "disk full" says more at a
         * glance than an exit code; unknown, lost nodes, hangs and losses say it in the summary */
        enum failure_class fc = (enum failure_class)j->cause.failure;
        if (fc != FAILURE_NONE && fc != FAILURE_UNKNOWN && fc != FAILURE_NODE_LOST && fc != FAILURE_HANG &&
            !j->cause.health)   /* "loss became NaN on rank 5 ..." says it */
            ADD(ROLE_FAIL, "root cause: %s: %.80s", failure_class_label(fc), j->cause.summary);
        else
            ADD(ROLE_FAIL, "root cause: %.80s", j->cause.summary);
    }
#undef ADD
    return n;
}

void pane_header_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                      const struct paint *p)
{
    struct hdr_field f[16];
    size_t n = header_fields(j, ui, f, 16);
    int h = getmaxy(w), wd = getmaxx(w);
    attr_t base = p->role[ROLE_HEADER];
    werase(w);
    for (int y = 0; y < h; y++) {
        wmove(w, y, 0);
        fill_rest(w, base);
    }
    /* two rows: the job on the first, the training figures (from "step") on the second */
    int y = 0, x = 0;
    for (size_t i = 0; i < n; i++) {
        bool second = strncmp(f[i].text, "step", 4) == 0;
        if (second && h >= 2 && y == 0) { y = 1; x = 0; }
        int need = (int)strlen(f[i].text) + (x ? 3 : 1);
        bool last = i + 1 == n;
        if (x + need > wd && last && wd - x > 24) need = wd - x;   /* cut the root cause */
        if (x + need > wd) {
            if (y + 1 < h) { y++; x = 0; need = (int)strlen(f[i].text) + 1; }
            else continue;                 /* no room: drop the field, keep later short ones */
        }
        wmove(w, y, x);
        x += put_str(w, p, x ? " | " : " ", wd - x, base);
        attr_t a = p->role[f[i].role];
        if (f[i].role != ROLE_HEADER) a |= A_BOLD;
        x += put_str(w, p, f[i].text, wd - x, a);
    }
}

/* The key hints that make sense in the job's state. */
static const char *status_hints(const struct job *j, const struct ui_state *ui)
{
    if (ui->modal == KM_HELP) return " Esc/q close help  Up/Down scroll";
    if (ui->read_only)
        return " finished run (read-only)  ? help  q quit  / search  n/N next  e error"
               "  [ ] attempts  a all ranks  G GPUs  Tab focus";
    if (j->state == JOB_CHECK_FAILED)
        return " Enter launch anyway  q quit  Up/Down scroll  ? help";
    if (j->state == JOB_CHECKING) return " preflight running...  q quit  ? help";
    /* the focused pane's keys (pane_table.h) */
    const struct pane_class *pc = pane_table_shown(ui->focus, ui);
    return pc && pc->hints ? pc->hints : "";
}

void pane_status_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                      const struct paint *p)
{
    int wd = getmaxx(w);
    werase(w);
    wmove(w, 0, 0);
    attr_t st = p->role[ROLE_STATUS];
    fill_rest(w, st);
    if (ui->modal == KM_CONFIRM) {
        const char *q = ui_action_confirm_text(ui->confirm);
        char buf[160];
        snprintf(buf, sizeof buf, " %s", q ? q : "Are you sure? y/n");
        put_str(w, p, buf, wd, p->role[ROLE_WARN] | A_BOLD);
        return;
    }
    if (ui->modal == KM_SEARCH) {
        int x = put_str(w, p, ui->input_host ? "host (glob or part of a name): " : "/", wd, st | A_BOLD);
        x += pane_put(w, p, ui->input, ui->input_len, wd - x - 1, st);
        if (x < wd) put_str(w, p, "_", 1, st | A_BLINK);
        return;
    }
    if (ui->notice[0] && ui->now_ms < ui->notice_until_ms) {
        char buf[200];
        snprintf(buf, sizeof buf, " %s", ui->notice);
        put_str(w, p, buf, wd, st | A_BOLD);
        return;
    }
    put_str(w, p, status_hints(j, ui), wd, st);
}

void ui_notice_v(struct ui_state *ui, int64_t now_ms, const char *fmt, va_list ap)
{
    vsnprintf(ui->notice, sizeof ui->notice, fmt, ap);
    ui->notice_until_ms = now_ms + 4000;
}

void ui_notice(struct ui_state *ui, int64_t now_ms, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ui_notice_v(ui, now_ms, fmt, ap);
    va_end(ap);
}

/* ---- the pane classes (pane_table.h) ----------------------------------------------------- */

static void header_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_header_draw(w, c->job, c->ui, c->paint);
}

static void status_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_status_draw(w, c->job, c->ui, c->paint);
}

const struct pane_class pane_header_class = {
    .name = "header",
    .area = AREA_HEADER,
    .mode = KM_COUNT,
    .draw = header_draw,
};

const struct pane_class pane_status_class = {
    .name = "status",
    .area = AREA_STATUS,
    .mode = KM_COUNT,
    .draw = status_draw,
};
