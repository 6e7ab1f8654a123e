/* The node view of the ranks pane (v, issue 19): one row per node of the rank_view (attention
 * first or in hostfile order, filtered like the ranks): its name, how the controller hears from
 * it (up, silent, unreachable; lost, failed), its ranks' states as counts with their glyphs
 * ("F1 S1 R6"), the lowest and the median step, the median loss, and its GPUs (mean
 * utilisation, memory used of total, the hottest, how many throttle or have ECC errors; "-"
 * unknown). Only the rows on screen are aggregated (node_summarize), so the pane costs its
 * rows, whatever the number of nodes. Enter on a row filters the rank table to that node. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "panes.h"

enum ncol { N_NODE, N_LINK, N_RANKS, N_SMIN, N_SMED, N_LOSS, N_GPU, N_GMEM, N_GTEMP, N_THR, N_N };

struct ncolumn {
    const char *title;
    int width, priority;
    bool right;
};

static const struct ncolumn ncols[N_N] = {
    [N_NODE]  = { "NODE", 12, 0, false },
    [N_LINK]  = { "LINK", 11, 2, false },
    [N_RANKS] = { "RANKS", 18, 1, false },
    [N_SMIN]  = { "STEPMIN", 7, 3, true },
    [N_SMED]  = { "STEPMED", 7, 4, true },
    [N_LOSS]  = { "LOSS", 8, 5, true },
    [N_GPU]   = { "GPU%", 4, 6, true },
    [N_GMEM]  = { "GMEM", 9, 8, true },
    [N_GTEMP] = { "GTMP", 4, 9, true },
    [N_THR]   = { "THR", 3, 7, true },
};

static void choose(int width, bool shown[N_N], int *node_w)
{
    int used = 0;
    for (int i = 0; i < N_N; i++) shown[i] = false;
    for (int prio = 0; prio < N_N; prio++)
        for (int i = 0; i < N_N; i++) {
            if (ncols[i].priority != prio) continue;
            int need = ncols[i].width + 1;
            if (used + need <= width) { shown[i] = true; used += need; }
        }
    int slack = width - used;
    *node_w = ncols[N_NODE].width + (slack > 12 ? 12 : slack);
}

static const char *link_word(const struct node_info *nd)
{
    /* --nnodes: a node out of this attempt says so first (why is in the events pane) */
    if (nd->role == NODE_EXCLUDED) return "excluded";
    if (nd->role == NODE_SPARE) return "spare";
    if (nd->state == NODE_LOST) return "lost";
    if (nd->state == NODE_FAILED) return "failed";
    /* issue 17's link states first: a silent node is what one looks for here */
    if (nd->link == LINK_SILENT) return "silent";
    if (nd->link == LINK_UNREACHABLE) return "unreachable";
    if (nd->state == NODE_CONNECTING) return "connecting";
    if (nd->state == NODE_DONE) return "done";
    return "up";
}

/* "F1 S1 R6": each non-empty class, most urgent first, as the rank table's glyph and a count. */
static void counts_text(const struct node_summary *s, bool ascii, char *buf, size_t n)
{
    static const struct { int cls; const char *a, *u; } g[] = {
        { ATTN_FAILED, "F", "\u2717" }, { ATTN_LOST, "L", "?" }, { ATTN_STALLED, "S", "\u25d0" },
        { ATTN_UNKNOWN, "?", "?" }, { ATTN_STRAGGLER, "s", "\u25d1" }, { ATTN_THROTTLE, "T", "T" },
    };
    size_t k = 0;
    buf[0] = '\0';
#define ADD(glyph, count) \
    do { if ((count) > 0 && k < n) k += (size_t)snprintf(buf + k, n - k, "%s%s%d", k ? " " : "", glyph, count); } while (0)
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) ADD(ascii ? g[i].a : g[i].u, s->counts[g[i].cls]);
    ADD(format_rank_glyph(RANK_RUNNING, ascii), s->n_running);
    ADD(format_rank_glyph(RANK_PENDING, ascii), s->n_pending);
    ADD(format_rank_glyph(RANK_EXITED, ascii), s->n_exited);
    ADD(format_rank_glyph(RANK_STOPPED, ascii), s->n_stopped);
#undef ADD
    if (!buf[0]) snprintf(buf, n, "-");
}

static void cell(const struct job *j, int node, const struct node_summary *s, enum ncol c,
                 bool ascii, char *buf, size_t n)
{
    const struct node_info *nd = &j->nodes[node];
    snprintf(buf, n, "-");
    switch (c) {
    case N_NODE: snprintf(buf, n, "%s", nd->name ? nd->name : "?"); break;
    case N_LINK: snprintf(buf, n, "%s", link_word(nd)); break;
    case N_RANKS: counts_text(s, ascii, buf, n); break;
    case N_SMIN: if (s->has_step) format_step(buf, n, s->step_min); break;
    case N_SMED: if (s->has_step) format_step(buf, n, s->step_median); break;
    case N_LOSS: if (s->has_loss) format_loss(buf, n, s->loss_median); break;
    case N_GPU: if (!isnan(s->gpu_util)) snprintf(buf, n, "%.0f", s->gpu_util); break;
    case N_GMEM:
        if (!isnan(s->mem_used_mib) && s->mem_total_mib > 0)
            snprintf(buf, n, "%.0f/%.0fG", s->mem_used_mib / 1024, s->mem_total_mib / 1024);
        break;
    case N_GTEMP: if (!isnan(s->temp_max)) snprintf(buf, n, "%.0fC", s->temp_max); break;
    case N_THR:
        if (s->n_gpus) snprintf(buf, n, "%d", s->throttling + s->ecc);
        break;
    case N_N: break;
    }
}

void pane_nodes_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                     const struct rank_view *v, const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w);
    werase(w);
    size_t troubled = 0;
    for (size_t i = 0; i < j->n_nodes; i++)
        if (j->nodes[i].link != LINK_UP || j->nodes[i].state == NODE_LOST ||
            j->nodes[i].state == NODE_FAILED)
            troubled++;
    char title[256];
    int k = snprintf(title, sizeof title, " Nodes %zu (%zu ranks)", j->n_nodes, j->n_ranks);
    if (troubled) k += snprintf(title + k, sizeof title - (size_t)k, "  %zu not up", troubled);
    if (v->attention) k += snprintf(title + k, sizeof title - (size_t)k, " [attention first]");
    if (v->n_nodes_shown != j->n_nodes || ui->filter != RF_ALL || ui->host_filter[0])
        k += snprintf(title + k, sizeof title - (size_t)k, " [%zu shown: %s%s%.40s; Esc all]",
                      v->n_nodes_shown, rank_filter_name(ui->filter),
                      ui->host_filter[0] ? " host " : "", ui->host_filter);
    snprintf(title + k, sizeof title - (size_t)k, "  Enter: its ranks, v: ranks, C: NCCL");
    pane_title(w, p, title, ui->focus == AREA_RANKS);

    bool shown[N_N];
    int node_w;
    choose(wd, shown, &node_w);
    char txt[96];
    wmove(w, 1, 0);
    int x = 0;
    for (int c = 0; c < N_N; c++) {
        if (!shown[c]) continue;
        int cw = c == N_NODE ? node_w : ncols[c].width;
        x = pane_cell(w, p, x, wd, ncols[c].title, cw, ncols[c].right, p->role[ROLE_DIM] | A_BOLD,
                      p->role[ROLE_DIM]);
    }
    for (int row = 0; row < h - 2; row++) {
        int at = ui->nodes_top + row;
        if (at < 0 || (size_t)at >= v->n_nodes_shown) break;
        int node = v->nodes[at];
        struct node_summary s;
        node_summarize(j, (size_t)node, &s);
        bool sel = node == ui->node_selected;
        attr_t na = pane_attn_attr((enum rank_attn)s.worst, p);
        attr_t rowa = sel ? p->role[ROLE_SELECTION] : na;
        pane_row_begin(w, 2 + row, wd, sel, rowa);
        x = 0;
        for (int c = 0; c < N_N; c++) {
            if (!shown[c]) continue;
            int cw = c == N_NODE ? node_w : ncols[c].width;
            cell(j, node, &s, (enum ncol)c, p->ascii, txt, sizeof txt);
            attr_t a = rowa;
            if (sel && (c == N_RANKS || c == N_LINK)) a = na | A_REVERSE;
            x = pane_cell(w, p, x, wd, txt, cw, ncols[c].right, a, rowa);
        }
    }
    if (v->n_nodes_shown == 0 && h > 2)
        mvwaddstr(w, 2, 1, "no node passes the filter (F cycles, H host, Esc all)");
}
