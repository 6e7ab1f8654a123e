/* The ranks pane: a table with a row per rank (rank, host, local rank, pid, state glyph and
 * word, step, loss, step time, age of the last output, CPU%, and once a node sent GPU samples
 * its GPU's utilisation, memory, temperature and power) or, with `g`, a compact grid of
 * one cell per rank coloured by state for jobs of thousands of ranks. The rows are the places
 * of a rank_view (rank_view.h: attention first or by rank, filtered by state and host). Only
 * the rows on screen are formatted, so a frame costs one pass over the ranks (the title's
 * counts, the view's classes) plus the screen, for 8 ranks as for 8,000. Columns that do not
 * fit a narrow terminal are dropped, least useful first. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "job/gpu.h"
#include "job/job_state.h"
#include "util/util.h"
#include "panes.h"

enum col_id { C_RANK, C_HOST, C_LR, C_PID, C_STATE, C_STEP, C_LOSS, C_STEPT, C_AGE, C_CPU,
              C_GPU, C_GMEM, C_GTEMP, C_GPOW, C_N };
#define C_FIRST_GPU C_GPU

struct column {
    const char *title;
    int width;            /* cells, without the separating space */
    int priority;         /* lower: kept longer when the pane is narrow */
    bool right;           /* numbers are right aligned */
};

static const struct column columns[C_N] = {
    [C_RANK]  = { "RANK", 5, 0, true },
    [C_HOST]  = { "HOST", 9, 1, false },
    [C_LR]    = { "LR", 2, 7, true },
    [C_PID]   = { "PID", 7, 5, true },
    [C_STATE] = { "STATE", 11, 2, false },
    [C_STEP]  = { "STEP", 6, 3, true },
    [C_LOSS]  = { "LOSS", 8, 4, true },
    [C_STEPT] = { "STEP_T", 6, 6, true },
    [C_AGE]   = { "AGE", 4, 8, true },
    [C_CPU]   = { "CPU%", 5, 9, true },
    /* from the rank's GPU's last NVML sample (job/gpu.c); shown once a node sent one */
    [C_GPU]   = { "GPU%", 4, 4, true },
    [C_GMEM]  = { "GMEM", 5, 7, true },
    [C_GTEMP] = { "GTMP", 4, 8, true },
    [C_GPOW]  = { "GPOW", 5, 10, true },
};

/* Whether any node has sent a GPU sample: the GPU columns are left out for CPU jobs. */
static bool job_has_gpus(const struct job *j)
{
    for (size_t i = 0; i < j->n_nodes; i++)
        if (j->nodes[i].gpus.seen && j->nodes[i].gpus.n) return true;
    return false;
}

/* Which columns fit in `width` cells, and how wide the host column gets (the slack). */
static void choose_columns(int width, bool gpus, bool shown[C_N], int *host_w)
{
    int used = 0;
    for (int i = 0; i < C_N; i++) shown[i] = false;
    for (int prio = 0; prio <= C_N; prio++) {
        for (int i = 0; i < C_N; i++) {
            if (columns[i].priority != prio || (i >= C_FIRST_GPU && !gpus)) continue;
            int need = columns[i].width + 1;
            if (used + need <= width) { shown[i] = true; used += need; }
        }
    }
    int slack = width - used;
    *host_w = columns[C_HOST].width + (slack > 14 ? 14 : slack);
}

attr_t pane_rank_attr(const struct job *j, const struct rank_info *r, const struct paint *p)
{
    if (job_rank_unknown(j, r)) return p->role[ROLE_WARN];
    switch (r->state) {
    case RANK_STALLED: return p->role[ROLE_STALLED];
    case RANK_FAILED: case RANK_LOST: return p->role[ROLE_FAIL];
    case RANK_PENDING: case RANK_STOPPED: return p->role[ROLE_DIM];
    case RANK_EXITED: return p->role[ROLE_OK];
    case RANK_RUNNING: return r->straggler ? p->role[ROLE_STRAGGLER] : p->role[ROLE_NORMAL];
    }
    return p->role[ROLE_NORMAL];
}

static const char *state_word(const struct job *j, const struct rank_info *r)
{
    if (job_rank_unknown(j, r)) return "unknown";
    if (r->state == RANK_RUNNING && r->straggler) return "straggler";
    return rank_state_name(r->state);
}

static void cell_text(const struct job *j, const struct rank_info *r, enum col_id c,
                      const struct ui_state *ui, const struct paint *p, char *buf, size_t n)
{
    buf[0] = '\0';
    switch (c) {
    case C_RANK: snprintf(buf, n, "%d", r->rank); break;
    case C_HOST: {
        const char *h = (size_t)r->node < j->n_nodes && j->nodes[r->node].name
                            ? j->nodes[r->node].name : "?";
        snprintf(buf, n, "%s", h);
        break;
    }
    case C_LR: snprintf(buf, n, "%d", r->local_rank); break;
    case C_PID: if (r->pid > 0) snprintf(buf, n, "%d", r->pid); else snprintf(buf, n, "-"); break;
    case C_STATE:
        snprintf(buf, n, "%s %s", job_rank_unknown(j, r) ? "?" : format_rank_glyph(r->state, p->ascii),
                 state_word(j, r));
        break;
    case C_STEP:
        if (r->has_step) format_step(buf, n, r->step); else snprintf(buf, n, "-");
        break;
    case C_LOSS:
        /* a loss that is not a number says what it is: "-" would hide a diverged rank */
        if (r->has_loss && r->loss_bad != LOSS_FINITE)
            snprintf(buf, n, "%s", r->loss_bad == LOSS_NAN ? "NaN" : r->loss_bad == LOSS_INF ? "inf"
                                 : r->loss_bad == LOSS_NEG_INF ? "-inf" : "null");
        else
            format_loss(buf, n, r->has_loss ? r->loss : NAN);
        break;
    case C_STEPT: format_step_ms(buf, n, r->step_ms); break;
    case C_AGE:
        if (r->last_output_ms > 0) format_age(buf, n, ui->now_ms - r->last_output_ms);
        else snprintf(buf, n, "-");
        break;
    case C_CPU: format_pct(buf, n, r->cpu_pct); break;
    case C_GPU: case C_GMEM: case C_GTEMP: case C_GPOW: {
        const struct gpu_info *g = job_rank_gpu(j, r->rank);
        double v = !g ? NAN : c == C_GPU ? g->util : c == C_GMEM ? g->mem_used_mib / 1024
                 : c == C_GTEMP ? g->temp_c : g->power_w;
        if (isnan(v)) snprintf(buf, n, "-");
        else if (c == C_GPU) snprintf(buf, n, "%.0f", v);
        else if (c == C_GMEM) snprintf(buf, n, v < 10 ? "%.1fG" : "%.0fG", v);
        else if (c == C_GTEMP) snprintf(buf, n, "%.0fC", v);
        else snprintf(buf, n, "%.0fW", v);
        break;
    }
    case C_N: break;
    }
}

/* A GPU cell's colour: the GPU% of a GPU with ECC errors as a failure, of a throttling one as a
 * warning; a temperature from 85 C on as a warning. */
static attr_t gpu_cell_attr(const struct job *j, const struct rank_info *r, enum col_id c,
                            const struct paint *p, attr_t row)
{
    const struct gpu_info *g = job_rank_gpu(j, r->rank);
    if (!g) return row;
    if (c == C_GPU && g->has_ecc && g->ecc > 0) return p->role[ROLE_FAIL];
    if (c == C_GPU && g->has_throttle && (g->throttle & GPU_THR_PROBLEMS)) return p->role[ROLE_WARN];
    if (c == C_GTEMP && !isnan(g->temp_c) && g->temp_c >= 85) return p->role[ROLE_WARN];
    return row;
}

/* The loss cell's colour: NaN or inf as a failure, a spike (--loss-spike) as a warning. */
static attr_t loss_cell_attr(const struct rank_info *r, const struct paint *p, attr_t row)
{
    if (r->has_loss && r->loss_bad != LOSS_FINITE) return p->role[ROLE_FAIL];
    if (r->spiking) return p->role[ROLE_WARN];
    return row;
}

static void draw_table(WINDOW *w, const struct job *j, const struct ui_state *ui,
                       const struct rank_view *v, const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w);
    bool shown[C_N];
    int host_w;
    choose_columns(wd, job_has_gpus(j), shown, &host_w);
    char cell[96];

    /* column header */
    wmove(w, 1, 0);
    int x = 0;
    for (int c = 0; c < C_N; c++) {
        if (!shown[c]) continue;
        int cw = c == C_HOST ? host_w : columns[c].width;
        x = pane_cell(w, p, x, wd, columns[c].title, cw, columns[c].right, p->role[ROLE_DIM] | A_BOLD,
                      p->role[ROLE_DIM]);
    }

    int cap = h - 2;
    for (int row = 0; row < cap; row++) {
        int at = ui->ranks_top + row;
        if (at < 0 || (size_t)at >= v->n) break;
        int ri = v->idx[at];
        const struct rank_info *r = &j->ranks[ri];
        bool sel = ri == ui->selected;
        attr_t ra = pane_rank_attr(j, r, p);
        attr_t rowa = sel ? p->role[ROLE_SELECTION] : ra;
        pane_row_begin(w, 2 + row, wd, sel, rowa);
        x = 0;
        for (int c = 0; c < C_N; c++) {
            if (!shown[c]) continue;
            int cw = c == C_HOST ? host_w : columns[c].width;
            cell_text(j, r, (enum col_id)c, ui, p, cell, sizeof cell);
            attr_t a = rowa;
            /* the state stays in its colour on the selected row too */
            if (c == C_STATE && sel) a = ra | A_REVERSE;
            else if (c >= C_FIRST_GPU && !sel) a = gpu_cell_attr(j, r, (enum col_id)c, p, rowa);
            else if (c == C_LOSS && !sel) a = loss_cell_attr(r, p, rowa);
            x = pane_cell(w, p, x, wd, cell, cw, columns[c].right, a, rowa);
        }
    }
}

static void draw_grid(WINDOW *w, const struct job *j, const struct ui_state *ui,
                      const struct rank_view *v, const struct paint *p)
{
    int h = getmaxy(w);
    struct rect rr = { 0, 0, h, getmaxx(w) };
    int per_row = layout_grid_per_row(&rr);
    if (per_row < 1) per_row = 1;
    for (int row = 0; row < h - 1; row++) {
        for (int k = 0; k < per_row; k++) {
            long at = (long)(ui->ranks_top + row) * per_row + k;
            if (at >= (long)v->n) return;
            int ri = v->idx[at];
            const struct rank_info *r = &j->ranks[ri];
            attr_t a = pane_rank_attr(j, r, p);
            if (ri == ui->selected) a = p->role[ROLE_SELECTION];
            wmove(w, 1 + row, k * LAYOUT_GRID_CELL_W);
            const char *g = job_rank_unknown(j, r) ? "?" : format_rank_glyph(r->state, p->ascii);
            if (r->state == RANK_RUNNING && r->straggler) g = p->ascii ? "s" : "\u25d1";
            pane_put(w, p, g, strlen(g), LAYOUT_GRID_CELL_W, a);
        }
    }
}

/* What the title says of the view: its order, its filters and how many it shows. */
static int view_title(char *buf, size_t n, const struct job *j, const struct ui_state *ui,
                      const struct rank_view *v)
{
    int k = 0;
    bool filtered = v->n != j->n_ranks || ui->filter != RF_ALL || ui->host_filter[0] ||
                    ui->filter_node;
    if (v->attention) k += snprintf(buf + k, n - (size_t)k, " [attention first]");
    if (!filtered) return k;
    k += snprintf(buf + k, n - (size_t)k, " [%zu shown:", v->n);
    if (ui->filter != RF_ALL)
        k += snprintf(buf + k, n - (size_t)k, " %s", rank_filter_name(ui->filter));
    if (ui->filter_node > 0 && (size_t)ui->filter_node <= j->n_nodes)
        k += snprintf(buf + k, n - (size_t)k, " node %.40s", j->nodes[ui->filter_node - 1].name);
    if (ui->host_filter[0]) k += snprintf(buf + k, n - (size_t)k, " host %.40s", ui->host_filter);
    k += snprintf(buf + k, n - (size_t)k, "; Esc all]");
    return k;
}

void ranks_view_opts(const struct ui_state *ui, int rows, struct rank_view_opts *o)
{
    o->order = ui->order;
    o->filter = ui->filter;
    o->host = ui->host_filter;
    o->node = ui->filter_node - 1;
    o->rows = rows;
    o->grid = ui->grid && !ui->node_view;
}

void pane_ranks_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                     const struct rank_view *v, const struct paint *p)
{
    size_t count[RANK_LOST + 1] = { 0 };
    size_t stragglers = 0, unknown = 0;
    int64_t since = 0;
    for (size_t i = 0; i < j->n_ranks; i++) {
        const struct rank_info *r = &j->ranks[i];
        if (job_rank_unknown(j, r)) {
            int64_t seen = j->nodes[r->node].last_seen_wall_ns;
            unknown++;
            if (seen && (!since || seen < since)) since = seen;
            continue;
        }
        if ((unsigned)r->state <= RANK_LOST) count[r->state]++;
        if (r->straggler) stragglers++;
    }
    char title[384];
    int n = snprintf(title, sizeof title, " Ranks %zu%s", j->n_ranks, ui->grid ? " (grid)" : "");
    n += view_title(title + n, 200, j, ui, v);
    static const enum rank_state order[] = { RANK_RUNNING, RANK_STALLED, RANK_FAILED,
                                             RANK_LOST, RANK_EXITED, RANK_STOPPED, RANK_PENDING };
    for (size_t i = 0; i < sizeof order / sizeof *order && n < (int)sizeof title - 40; i++)
        if (count[order[i]])
            n += snprintf(title + n, sizeof title - (size_t)n, "  %zu %s", count[order[i]],
                          rank_state_name(order[i]));
    if (stragglers && n < (int)sizeof title - 40)
        n += snprintf(title + n, sizeof title - (size_t)n, "  %zu straggler%s", stragglers,
                      stragglers == 1 ? "" : "s");
    if (unknown && n < (int)sizeof title - 80) {
        /* their node is silent or being reconnected: they ran when it was last heard of */
        char at[16];
        util_clock_text(since, at, sizeof at);
        snprintf(title + n, sizeof title - (size_t)n, "  %zu unknown since %s (running when last seen)", unknown,
                 at);
    }
    werase(w);
    pane_title(w, p, title, ui->focus == AREA_RANKS);
    if (ui->grid) draw_grid(w, j, ui, v, p);
    else draw_table(w, j, ui, v, p);
    if (v->n == 0 && getmaxy(w) > 2)
        mvwaddstr(w, ui->grid ? 1 : 2, 1, "no rank passes the filter (F cycles, H host, Esc all)");
}

void ranks_scroll_to(int *top, int sel, int n, int capacity, int per_row)
{
    if (per_row < 1) per_row = 1;
    int rows_total = (n + per_row - 1) / per_row, rows_cap = capacity / per_row;
    if (rows_cap < 1) rows_cap = 1;
    if (sel >= n) sel = n - 1;
    if (sel >= 0) {
        int sel_row = sel / per_row;
        /* one line at a time: the view moves only as far as needed to keep the selection in */
        if (sel_row < *top) *top = sel_row;
        if (sel_row >= *top + rows_cap) *top = sel_row - rows_cap + 1;
    }
    int max_top = rows_total - rows_cap;
    if (max_top < 0) max_top = 0;
    if (*top > max_top) *top = max_top;
    if (*top < 0) *top = 0;
}

void ranks_scroll_to_selection(struct ui_state *ui, const struct rank_view *v, int capacity,
                               int per_row)
{
    if (ui->node_view) {
        int sel = ui->node_selected >= 0 && (size_t)ui->node_selected < v->nodes_cap &&
                  v->node_pos ? v->node_pos[ui->node_selected] : -1;
        ranks_scroll_to(&ui->nodes_top, sel, (int)v->n_nodes_shown, capacity, 1);
        return;
    }
    ranks_scroll_to(&ui->ranks_top, rank_view_pos(v, ui->selected), (int)v->n, capacity,
                    ui->grid ? per_row : 1);
}

attr_t pane_attn_attr(enum rank_attn c, const struct paint *p)
{
    switch (c) {
    case ATTN_FAILED: case ATTN_LOST: return p->role[ROLE_FAIL];
    case ATTN_STALLED: return p->role[ROLE_STALLED];
    case ATTN_UNKNOWN: case ATTN_THROTTLE: return p->role[ROLE_WARN];
    case ATTN_STRAGGLER: return p->role[ROLE_STRAGGLER];
    case ATTN_REST: case ATTN_COUNT: break;
    }
    return p->role[ROLE_NORMAL];
}
