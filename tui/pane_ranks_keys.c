/* The ranks area's three kinds of pane (pane_table.h): the rank table or grid
 * (pane_ranks.c), the node view (v, pane_nodes.c) and its NCCL columns (C,
 * pane_nodes_nccl.c), and their keys, which they share: the selection, Enter (a rank's log, a
 * node's ranks), the view (g, v, C), the order (o) and the filters (F, H). */
#include <stdio.h>
#include <string.h>

#include "pane_table.h"
#include "panes.h"
#include "rank_view.h"

void pane_ranks_view_refresh(struct pane_ctx *c)
{
    if (!c->job) return;
    const struct ui_state *ui = c->ui;
    bool grid = ui->grid && !ui->node_view;
    struct rank_view_opts o;
    ranks_view_opts(ui, c->lay ? layout_rank_capacity(&c->lay->area[AREA_RANKS], grid) : 0, &o);
    rank_view_update(c->view, c->job, &o);
}

/* The table scrolls to the selection only when a key moved it: a rank that moves in the
 * attention order (its state changed) does not scroll the table, so the top rows, the most
 * urgent ones, stay on screen until a key scrolls away from them. */
static void scroll_to_selection(struct pane_ctx *c)
{
    const struct rect *r = pane_ctx_area(c, AREA_RANKS);
    bool grid = c->ui->grid && !c->ui->node_view;
    pane_ranks_view_refresh(c);
    ranks_scroll_to_selection(c->ui, c->view, layout_rank_capacity(r, grid),
                              grid ? layout_grid_per_row(r) : 1);
}

void pane_ranks_select(struct pane_ctx *c, long r)
{
    long n = c->job ? (long)c->job->n_ranks : 0;
    if (r >= n) r = n - 1;
    if (r < 0) r = 0;
    if (r != c->ui->selected) {
        c->ui->selected = (int)r;
        pane_log_show_selected(c->ui);
    }
    scroll_to_selection(c);
}

void pane_ranks_filter_changed(struct pane_ctx *c)
{
    struct ui_state *ui = c->ui;
    pane_ranks_view_refresh(c);
    const struct rank_view *v = c->view;
    ui->ranks_top = 0;
    ui->nodes_top = 0;
    if (v->n && rank_view_pos(v, ui->selected) < 0) pane_ranks_select(c, v->idx[0]);
    if (v->n_nodes_shown && (ui->node_selected < 0 || (size_t)ui->node_selected >= v->nodes_cap ||
                             v->node_pos[ui->node_selected] < 0))
        ui->node_selected = v->nodes[0];
}

bool pane_ranks_filtered(const struct ui_state *ui)
{
    return ui->filter != RF_ALL || ui->host_filter[0] || ui->filter_node;
}

/* Table rows, or grid rows and cells, as places in the view (its order and filters); the
 * node view moves among its nodes. */
static unsigned ranks_move(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    const struct rect *r = pane_ctx_area(c, AREA_RANKS);
    int rank_page = layout_rank_capacity(r, ui->grid);
    int per_row = ui->grid ? layout_grid_per_row(r) : 1;
    if (per_row < 1) per_row = 1;
    if (rank_page < 1) rank_page = 1;
    pane_ranks_view_refresh(c);
    const struct rank_view *v = c->view;
    bool nodes = ui->node_view;
    long n = nodes ? (long)v->n_nodes_shown : (long)v->n;
    if (nodes) per_row = 1;
    if (n <= 0) return DK_REDRAW;
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
        scroll_to_selection(c);
    } else {
        pane_ranks_select(c, v->idx[at]);
    }
    return DK_REDRAW;
}

/* Enter on a node: the rank table shows that node's ranks (the most urgent selected). */
static void open_node(struct pane_ctx *c)
{
    struct ui_state *ui = c->ui;
    const struct job *j = c->job;
    if (ui->node_selected < 0 || (size_t)ui->node_selected >= j->n_nodes) return;
    ui->node_view = false;
    ui->filter_node = ui->node_selected + 1;
    ui->filter = RF_ALL;
    ui->host_filter[0] = '\0';
    /* the node's ranks in attention order put its worst first: that one is selected */
    pane_ranks_filter_changed(c);
    if (c->view->n) pane_ranks_select(c, c->view->idx[0]);
    ui_notice(ui, c->now_ms, "the ranks of node %s (Esc: every rank)", j->nodes[ui->node_selected].name);
}

static unsigned ranks_open(struct pane_ctx *c, enum ui_action a)
{
    (void)a;
    if (c->ui->node_view) {
        open_node(c);
        return DK_REDRAW | DK_RELAYOUT;
    }
    return pane_log_open_selected(c);
}

static unsigned ranks_grid(struct pane_ctx *c, enum ui_action a)
{
    (void)a;
    c->ui->grid = !c->ui->grid;
    c->ui->ranks_top = 0;
    return DK_REDRAW | DK_RELAYOUT;
}

static unsigned ranks_nodes(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->node_view = !ui->node_view;
    if (!ui->node_view) ui->nccl_cols = false;   /* v again: the usual node columns */
    if (ui->node_view && (size_t)ui->selected < c->job->n_ranks)
        ui->node_selected = c->job->ranks[ui->selected].node;   /* the selected rank's node */
    pane_ranks_filter_changed(c);
    return DK_REDRAW | DK_RELAYOUT;
}

/* The node view with NCCL's columns; again: its usual ones. */
static unsigned ranks_nccl(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->nccl_cols = !(ui->nccl_cols && ui->node_view);
    if (ui->nccl_cols && !ui->node_view) {
        ui->node_view = true;
        if ((size_t)ui->selected < c->job->n_ranks) ui->node_selected = c->job->ranks[ui->selected].node;
        pane_ranks_filter_changed(c);
    }
    return DK_REDRAW | DK_RELAYOUT;
}

static unsigned ranks_order(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    pane_ranks_view_refresh(c);
    ui->order = c->view->attention ? ORDER_RANK : ORDER_ATTENTION;
    ui->ranks_top = 0;
    ui->nodes_top = 0;
    ui_notice(ui, c->now_ms, "%s: %s (o: %s)", ui->node_view ? "nodes" : "ranks",
              ui->order == ORDER_RANK ? "by rank" : "attention first",
              ui->order == ORDER_RANK ? "attention first" : "by rank");
    return DK_REDRAW;
}

static unsigned ranks_filter_state(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->filter = (enum rank_filter)((ui->filter + 1) % RF_COUNT);
    pane_ranks_filter_changed(c);
    ui_notice(ui, c->now_ms, "state filter: %s, %zu rank%s (F: next, Esc: all)",
              rank_filter_name(ui->filter), c->view->n, c->view->n == 1 ? "" : "s");
    return DK_REDRAW;
}

/* H: the search's input line types the host filter, started from the one in effect (the
 * dashboard applies it on Enter). */
static unsigned ranks_filter_host(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->modal = KM_SEARCH;
    ui->input_host = true;
    snprintf(ui->input, sizeof ui->input, "%s", ui->host_filter);
    ui->input_len = strlen(ui->input);
    return DK_REDRAW;
}

static const struct pane_key ranks_keys[] = {
    { UI_OPEN, ranks_open },
    { UI_GRID, ranks_grid },
    { UI_NODES, ranks_nodes },
    { UI_NCCL, ranks_nccl },
    { UI_ORDER, ranks_order },
    { UI_FILTER_STATE, ranks_filter_state },
    { UI_FILTER_HOST, ranks_filter_host },
    { UI_NONE, NULL },
};

static const char ranks_hints[] =
    " ? help  q quit  r restart  K stop  s stacks  / search  v nodes  o order"
    "  F state  H host  g grid  a all ranks  Tab focus";

static bool ranks_shown(const struct ui_state *ui) { return !ui->node_view; }
static bool nodes_shown(const struct ui_state *ui) { return ui->node_view && !ui->nccl_cols; }
static bool nccl_shown(const struct ui_state *ui) { return ui->node_view && ui->nccl_cols; }

static void ranks_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_ranks_draw(w, c->job, c->ui, c->view, c->paint);
}

static void nodes_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_nodes_draw(w, c->job, c->ui, c->view, c->paint);
}

static void nccl_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_nodes_nccl_draw(w, c->job, c->ui, c->view, c->paint);
}

const struct pane_class pane_ranks_class = {
    .name = "ranks",
    .area = AREA_RANKS,
    .shown = ranks_shown,
    .mode = KM_RANKS,
    .focus = 1,
    .hints = ranks_hints,
    .draw = ranks_draw,
    .move = ranks_move,
    .keys = ranks_keys,
};

const struct pane_class pane_nodes_class = {
    .name = "nodes",
    .area = AREA_RANKS,
    .shown = nodes_shown,
    .mode = KM_RANKS,
    .focus = 1,
    .hints = ranks_hints,
    .draw = nodes_draw,
    .move = ranks_move,
    .keys = ranks_keys,
};

const struct pane_class pane_nodes_nccl_class = {
    .name = "nodes-nccl",
    .area = AREA_RANKS,
    .shown = nccl_shown,
    .mode = KM_RANKS,
    .focus = 1,
    .hints = ranks_hints,
    .draw = nccl_draw,
    .move = ranks_move,
    .keys = ranks_keys,
};
