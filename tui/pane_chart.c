/* The loss chart pane: the mean loss across ranks over steps, with the min-max band across
 * ranks behind it, in braille dots (chart.c computes the dots; this file keeps the per-step
 * aggregate and draws). The aggregate is updated incrementally: each call reads only the
 * points the ranks' series gained since the previous call, so 1,024 ranks reporting ten
 * times a second cost a few thousand additions a second, not a rescan of every series. Its
 * class (pane_table.h) takes L, the log scale, from any pane. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "format.h"
#include "pane_table.h"
#include "panes.h"

/* Per rank: the newest point already counted and the series' stamp then. A series whose stamp
 * moved is walked back to that point, compared by value (the series is a ring without a
 * running total, so a point is recognised by its contents). */
struct seen {
    struct metric_point pt;
    uint64_t stamp;       /* the series' stamp then (series.h): the same, nothing new */
    bool any;
    size_t from;          /* scratch of one update: where the new points begin */
};

void chart_cache_init(struct chart_cache *c)
{
    memset(c, 0, sizeof *c);
    c->attempt = -1;
}

void chart_cache_done(struct chart_cache *c)
{
    free(c->pts);
    free(c->seen);
    free(c->changed);
    free(c->x); free(c->mean); free(c->lo); free(c->hi);
    free(c->line); free(c->band);
    memset(c, 0, sizeof *c);
}

/* Pairs of neighbouring points merged in the older three quarters: memory stays bounded and
 * the recent part, where late ranks still add to their steps, keeps full detail. */
static void chart_compact(struct chart_cache *c)
{
    size_t old = c->n * 3 / 4, o = 0;
    for (size_t i = 0; i + 1 < old; i += 2) {
        struct chart_point a = c->pts[i], b = c->pts[i + 1];
        a.step = b.step;
        a.sum += b.sum;
        a.n += b.n;
        if (b.lo < a.lo) a.lo = b.lo;
        if (b.hi > a.hi) a.hi = b.hi;
        c->pts[o++] = a;
    }
    size_t from = old - (old % 2);
    memmove(&c->pts[o], &c->pts[from], (c->n - from) * sizeof *c->pts);
    c->n = o + (c->n - from);
}

static void chart_add(struct chart_cache *c, double step, double loss)
{
    size_t lo = 0, hi = c->n;
    if (c->n && c->pts[c->n - 1].step < step) lo = c->n;   /* the usual case: a new step */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->pts[mid].step < step) lo = mid + 1; else hi = mid;
    }
    if (lo < c->n && c->pts[lo].step == step) {
        struct chart_point *p = &c->pts[lo];
        p->sum += loss;
        p->n++;
        if (loss < p->lo) p->lo = loss;
        if (loss > p->hi) p->hi = loss;
        return;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        c->pts = xrealloc(c->pts, c->cap * sizeof *c->pts);
    }
    memmove(&c->pts[lo + 1], &c->pts[lo], (c->n - lo) * sizeof *c->pts);
    c->pts[lo] = (struct chart_point){ step, loss, loss, loss, 1 };
    c->n++;
    if (c->n > CHART_MAX_POINTS) chart_compact(c);
}

/* A restarted attempt resumes from a snapshot: its steps replace what the failed attempt had
 * drawn from there on. */
static void chart_trim_from(struct chart_cache *c, double step)
{
    while (c->n && c->pts[c->n - 1].step >= step) c->n--;
}

void chart_cache_update(struct chart_cache *c, const struct job *j)
{
    struct seen *seen = c->seen;
    if (c->n_ranks != j->n_ranks || !seen) {
        free(c->seen);
        free(c->changed);
        seen = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *seen);
        c->seen = seen;
        c->changed = xmalloc((j->n_ranks ? j->n_ranks : 1) * sizeof *c->changed);
        c->n_ranks = j->n_ranks;
        c->n = 0;
    }
    if (c->attempt != j->attempt) {
        if (c->attempt >= 0) c->trim_pending = true;
        c->attempt = j->attempt;
    }
    /* first pass: the ranks whose series moved and where their new points begin (walking
     * back to the newest point already counted), and the smallest new step for a pending
     * trim. Most ranks added nothing since the last frame (8,192 ranks at a line a second, 10
     * frames a second): the stamp says so without a look into their points (issue 32). */
    double min_new = INFINITY;
    size_t n_changed = 0;
    for (size_t r = 0; r < j->n_ranks; r++) {
        const struct metric_series *s = &j->ranks[r].series;
        if (s->stamp == seen[r].stamp) continue;   /* both 0: no point yet */
        size_t cnt = s->count, k = seen[r].any ? cnt : 0;
        if (seen[r].any) {
            while (k > 0) {
                const struct metric_point *pt = metric_series_at(s, k - 1);
                if (memcmp(pt, &seen[r].pt, sizeof *pt) == 0) break;
                k--;
            }
        }
        seen[r].from = k;
        c->changed[n_changed++] = r;
        if (k < cnt) {
            double st = (double)metric_series_at(s, k)->step;
            if (st < min_new) min_new = st;
        }
    }
    if (c->trim_pending && isfinite(min_new)) {
        chart_trim_from(c, min_new);
        c->trim_pending = false;
    }
    for (size_t x = 0; x < n_changed; x++) {
        size_t r = c->changed[x];
        const struct metric_series *s = &j->ranks[r].series;
        size_t cnt = s->count;
        for (size_t i = seen[r].from; i < cnt; i++) {
            const struct metric_point *pt = metric_series_at(s, i);
            if (pt->step >= 0 && isfinite(pt->loss)) chart_add(c, (double)pt->step, pt->loss);
        }
        if (cnt) {
            seen[r].pt = *metric_series_at(s, cnt - 1);
            seen[r].stamp = s->stamp;
            seen[r].any = true;
        }
    }
}

static void ensure_scratch(struct chart_cache *c, size_t cells)
{
    if (c->scratch_cells >= cells && c->x) return;
    free(c->x); free(c->mean); free(c->lo); free(c->hi);
    free(c->line); free(c->band);
    c->x = xmalloc(CHART_MAX_POINTS * 2 * sizeof *c->x);
    c->mean = xmalloc(CHART_MAX_POINTS * 2 * sizeof *c->mean);
    c->lo = xmalloc(CHART_MAX_POINTS * 2 * sizeof *c->lo);
    c->hi = xmalloc(CHART_MAX_POINTS * 2 * sizeof *c->hi);
    c->line = xmalloc(cells);
    c->band = xmalloc(cells);
    c->scratch_cells = cells;
}

void pane_chart_draw(WINDOW *w, struct chart_cache *c, const struct ui_state *ui,
                     const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w);
    char title[128];
    snprintf(title, sizeof title, " Loss: mean, min-max band across ranks%s",
             ui->log_scale ? "  [log]" : "");
    werase(w);
    pane_title(w, p, title, false);
    const int label_w = 8;
    int cw = wd - label_w - 1, ch = h - 2;   /* title row above, step labels below */
    if (cw < 2 || ch < 1) return;
    if (c->n == 0) {
        wmove(w, 1, 1);
        const char *m = "no loss reported yet";
        pane_put(w, p, m, strlen(m), wd - 2, p->role[ROLE_DIM]);
        return;
    }
    ensure_scratch(c, (size_t)cw * (size_t)ch);
    size_t n = c->n;
    for (size_t i = 0; i < n; i++) {
        c->x[i] = c->pts[i].step;
        c->mean[i] = c->pts[i].sum / c->pts[i].n;
        c->lo[i] = c->pts[i].lo;
        c->hi[i] = c->pts[i].hi;
    }
    struct chart_in in = { c->x, c->mean, c->lo, c->hi, n, cw, ch, ui->log_scale };
    struct chart_out out;
    memset(&out, 0, sizeof out);
    out.line = c->line;
    out.band = c->band;
    if (chart_compute(&in, &out) != 0 || out.empty) return;

    attr_t axis = p->role[ROLE_CHART_AXIS];
    for (int row = 0; row < ch; row++) {
        const char *lab = NULL;
        if (row == 0) lab = out.y_top;
        else if (row == ch - 1) lab = out.y_bottom;
        else if (row == ch / 2 && ch >= 5) lab = out.y_mid;
        char buf[32];
        format_pad(buf, sizeof buf, lab ? lab : "", label_w - 1, true, p->ascii);
        wmove(w, 1 + row, 0);
        pane_put(w, p, buf, strlen(buf), label_w - 1, axis);
        pane_put(w, p, p->ascii ? "|" : "\u2502", p->ascii ? 1 : 3, 1, axis);
        /* the cells are ours (braille from chart.c), not remote bytes: straight to curses,
         * one run of cells per colour, which keeps a 1,024-rank frame cheap */
        wmove(w, 1 + row, label_w);
        char run[4 * 512];
        size_t rl = 0;
        attr_t run_attr = A_NORMAL;
        for (int col = 0; col <= cw; col++) {
            uint8_t l = 0, b = 0;
            if (col < cw) { l = c->line[row * cw + col]; b = c->band[row * cw + col]; }
            attr_t a = !(l | b) ? A_NORMAL : p->role[l ? ROLE_CHART : ROLE_CHART_BAND];
            if (col == cw || a != run_attr || rl + 4 > sizeof run) {
                if (rl) {
                    wattrset(w, run_attr);
                    waddnstr(w, run, (int)rl);
                    wattrset(w, A_NORMAL);
                }
                rl = 0;
                run_attr = a;
                if (col == cw) break;
            }
            if (!(l | b)) run[rl++] = ' ';
            else if (p->ascii) run[rl++] = l ? '*' : ':';
            else {
                char cell[4];
                chart_braille_utf8((uint8_t)(l | b), cell);
                size_t cl = strlen(cell);
                memcpy(run + rl, cell, cl);
                rl += cl;
            }
        }
    }
    /* steps under the plot: first and last */
    wmove(w, h - 1, label_w);
    pane_put(w, p, out.x_left, strlen(out.x_left), cw, axis);
    int rl = (int)strlen(out.x_right);
    if (cw - rl > (int)strlen(out.x_left) + 1) {
        wmove(w, h - 1, label_w + cw - rl);
        pane_put(w, p, out.x_right, strlen(out.x_right), rl, axis);
    }
    if (out.clamped && wd > 40) {
        const char *m = " (values <= 0 at the bottom)";
        wmove(w, h - 1, label_w + cw / 2 - 14 > label_w ? label_w + cw / 2 - 14 : label_w);
        pane_put(w, p, m, strlen(m), cw / 2, p->role[ROLE_DIM]);
    }
}

/* ---- the class ---------------------------------------------------------------------------- */

static unsigned chart_log_scale(struct pane_ctx *c, enum ui_action a)
{
    (void)a;
    c->ui->log_scale = !c->ui->log_scale;
    return DK_REDRAW;
}

/* The points the series gained since the last frame, then the frame. */
static void chart_draw(WINDOW *w, struct pane_ctx *c)
{
    chart_cache_update(c->chart, c->job);
    pane_chart_draw(w, c->chart, c->ui, c->paint);
}

const struct pane_class pane_chart_class = {
    .name = "chart",
    .area = AREA_CHART,
    .mode = KM_COUNT,
    .draw = chart_draw,
    .keys = (const struct pane_key[]){
        { UI_LOG_SCALE, chart_log_scale },
        { UI_NONE, NULL },
    },
};
