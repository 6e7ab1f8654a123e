/* The one table of the dashboard's panes (pane_table.h) and what reads it for everyone: which
 * kind an area shows, which pane has the keys and in which mode, who does an action, and the
 * focus ring. Pure: no terminal, no model changes. */
#include "pane_table.h"

extern const struct pane_class pane_header_class, pane_ranks_class, pane_nodes_class,
    pane_nodes_nccl_class, pane_chart_class, pane_log_class, pane_events_class,
    pane_check_class, pane_status_class, pane_help_class, pane_gpus_class;

/* Kinds that share an area are tried in this order for it; otherwise the order is free. */
const struct pane_class *const pane_table[] = {
    &pane_header_class,
    &pane_ranks_class,
    &pane_nodes_class,
    &pane_nodes_nccl_class,
    &pane_chart_class,
    &pane_log_class,
    &pane_events_class,
    &pane_check_class,
    &pane_status_class,
    &pane_help_class,
    &pane_gpus_class,
};

#define N_TABLE (sizeof pane_table / sizeof *pane_table)
const size_t pane_table_len = N_TABLE;

bool pane_is_shown(const struct pane_class *pc, const struct ui_state *ui)
{
    return !pc->shown || pc->shown(ui);
}

const struct pane_class *pane_table_shown(enum area a, const struct ui_state *ui)
{
    for (size_t i = 0; i < N_TABLE; i++)
        if (pane_table[i]->area == a && pane_is_shown(pane_table[i], ui)) return pane_table[i];
    return NULL;
}

const struct pane_class *pane_table_keys_pane(const struct ui_state *ui)
{
    /* the topmost area first: the overlay lies over the preflight results */
    for (int a = AREA_COUNT - 1; a >= 0; a--) {
        const struct pane_class *pc = pane_table_shown((enum area)a, ui);
        if (pc && pc->grabs)
            return ui->modal == KM_COUNT || ui->modal == pc->mode ? pc : NULL;
    }
    if (ui->modal != KM_COUNT) return NULL;       /* a question or a typed line */
    return pane_table_shown(ui->focus, ui);
}

enum km_mode pane_table_mode(const struct ui_state *ui)
{
    const struct pane_class *pc = pane_table_keys_pane(ui);
    return pc ? pc->mode : ui->modal;
}

static bool is_move(enum ui_action a)
{
    switch (a) {
    case UI_UP: case UI_DOWN: case UI_LEFT: case UI_RIGHT:
    case UI_PAGE_UP: case UI_PAGE_DOWN: case UI_HOME: case UI_END:
        return true;
    default:
        return false;
    }
}

pane_key_fn *pane_class_key(const struct pane_class *pc, enum ui_action a)
{
    if (is_move(a)) return pc->move;
    for (const struct pane_key *k = pc->keys; k && k->action != UI_NONE; k++)
        if (k->action == a) return k->fn;
    return NULL;
}

bool pane_table_key(struct pane_ctx *c, enum ui_action a, unsigned *flags)
{
    const struct pane_class *own = pane_table_keys_pane(c->ui);
    pane_key_fn *fn = own ? pane_class_key(own, a) : NULL;
    /* the moving keys move what has the keys, nothing else */
    if (!fn && !is_move(a)) {
        /* a pane's action from another pane: the kind on screen does it (C from the log:
         * the ranks area's), else whichever does (? opens the help, which is not shown) */
        for (int pass = 0; pass < 2 && !fn; pass++)
            for (size_t i = 0; i < N_TABLE && !fn; i++)
                if (pass || pane_is_shown(pane_table[i], c->ui)) fn = pane_class_key(pane_table[i], a);
    }
    if (!fn) return false;
    *flags = fn(c, a);
    return true;
}

const struct rect *pane_ctx_area(const struct pane_ctx *c, enum area a)
{
    static const struct rect hidden;
    return c->lay ? &c->lay->area[a] : &hidden;
}

/* The ring's place of area a (0: not in the ring). */
static int ring_place(enum area a)
{
    for (size_t i = 0; i < N_TABLE; i++)
        if (pane_table[i]->area == a && pane_table[i]->focus) return pane_table[i]->focus;
    return 0;
}

/* The area at place p of the ring, or AREA_COUNT. */
static enum area ring_area(int p)
{
    for (size_t i = 0; i < N_TABLE; i++)
        if (pane_table[i]->focus == p) return pane_table[i]->area;
    return AREA_COUNT;
}

static int ring_size(void)
{
    int n = 0;
    for (size_t i = 0; i < N_TABLE; i++)
        if (pane_table[i]->focus > n) n = pane_table[i]->focus;
    return n;
}

void pane_focus_move(struct pane_ctx *c, int dir)
{
    int n = ring_size(), p = ring_place(c->ui->focus);
    if (n == 0) return;
    if (p == 0) p = 1;
    /* around the ring once at most: a pane the layout hides is stepped over */
    for (int tries = 0; tries < n; tries++) {
        p = (p - 1 + (dir > 0 ? 1 : n - 1)) % n + 1;
        if (rect_visible(pane_ctx_area(c, ring_area(p)))) break;
    }
    c->ui->focus = ring_area(p);
}

void pane_focus_check(struct pane_ctx *c)
{
    /* nothing is on screen while the terminal is too small: the focus waits */
    if (!c->lay || c->lay->too_small) return;
    if (!rect_visible(pane_ctx_area(c, c->ui->focus))) c->ui->focus = ring_area(1);
}
