/* The help overlay, generated from the keymap table (keymap_help_lines) so that it lists
 * every key the dashboard knows, with its class (pane_table.h: ? opens it, the moving keys
 * scroll it), and the notice shown instead of the panes when the terminal is smaller than
 * the layout's minimum. */
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "pane_table.h"
#include "panes.h"

attr_t pane_overlay_frame(WINDOW *w, const struct paint *p, const char *title)
{
    int h = getmaxy(w), wd = getmaxx(w);
    attr_t a = p->role[ROLE_HELP];
    werase(w);
    wbkgdset(w, ' ' | a);
    werase(w);
    if (h >= 3 && wd >= 4) {
        wattrset(w, a);
        box(w, 0, 0);
        wattrset(w, A_NORMAL);
    }
    wmove(w, 0, 2);
    pane_put(w, p, title, strlen(title), wd - 4, a | A_BOLD);
    return a;
}

void pane_help_draw(WINDOW *w, const struct ui_state *ui, const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w);
    attr_t a = pane_overlay_frame(w, p, " Keys (Esc or q closes, Up/Down scroll) ");
    int rows = h - 2;
    int top = ui->help_top;
    if (top > (int)ui->n_help - rows) top = (int)ui->n_help - rows;
    if (top < 0) top = 0;
    for (int y = 0; y < rows && (size_t)(top + y) < ui->n_help; y++) {
        const char *l = ui->help_lines[top + y];
        /* section headings are the lines that do not start with a space */
        attr_t la = l[0] != ' ' ? a | A_BOLD : a;
        wmove(w, 1 + y, 2);
        pane_put(w, p, l, strlen(l), wd - 4, la);
    }
    wbkgdset(w, ' ');
}

void pane_too_small(WINDOW *w, int rows, int cols, const struct paint *p)
{
    char l1[64], l2[64];
    snprintf(l1, sizeof l1, "terminal too small");
    snprintf(l2, sizeof l2, "%dx%d, need %dx%d", cols, rows, LAYOUT_MIN_COLS, LAYOUT_MIN_ROWS);
    werase(w);
    int y = rows / 2 - 1;
    if (y < 0) y = 0;
    const char *lines[] = { l1, l2, "q quits" };
    for (int i = 0; i < 3 && y + i < rows; i++) {
        int len = (int)strlen(lines[i]);
        int x = (cols - len) / 2;
        if (x < 0) x = 0;
        wmove(w, y + i, x);
        pane_put(w, p, lines[i], strlen(lines[i]), cols - x, i == 0 ? p->role[ROLE_WARN] | A_BOLD
                                                                     : p->role[ROLE_NORMAL]);
    }
}

/* ---- the class ---------------------------------------------------------------------------- */

unsigned pane_overlay_scroll(struct pane_ctx *c, enum ui_action a, int n)
{
    int *t = &c->ui->help_top;
    const struct rect *r = pane_ctx_area(c, AREA_OVERLAY);
    int hp = r->h > 3 ? r->h - 2 : 1;
    if (a == UI_UP) (*t)--;
    else if (a == UI_DOWN) (*t)++;
    else if (a == UI_PAGE_UP) *t -= hp;
    else if (a == UI_PAGE_DOWN) *t += hp;
    else if (a == UI_HOME) *t = 0;
    else if (a == UI_END) *t = n;
    if (*t > n - hp) *t = n - hp;
    if (*t < 0) *t = 0;
    return DK_REDRAW;
}

static unsigned help_open(struct pane_ctx *c, enum ui_action a)
{
    (void)a;
    c->ui->modal = KM_HELP;
    c->ui->gpu_view = false;
    c->ui->help_top = 0;
    return DK_REDRAW | DK_RELAYOUT;
}

static unsigned help_move(struct pane_ctx *c, enum ui_action a)
{
    return pane_overlay_scroll(c, a, (int)c->ui->n_help);
}

static bool help_shown(const struct ui_state *ui)
{
    return ui->modal == KM_HELP && !ui->gpu_view;
}

static void help_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_help_draw(w, c->ui, c->paint);
}

const struct pane_class pane_help_class = {
    .name = "help",
    .area = AREA_OVERLAY,
    .shown = help_shown,
    .grabs = true,
    .mode = KM_HELP,
    .draw = help_draw,
    .move = help_move,
    .keys = (const struct pane_key[]){
        { UI_HELP, help_open },
        { UI_NONE, NULL },
    },
};
