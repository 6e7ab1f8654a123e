/* The preflight pane, which takes the chart's and the events' place while the job is
 * CHECKING or the checks refused it: the nodes being asked, then the report's table and
 * details coloured by status; its class (pane_table.h) has the keys while it is shown (the
 * moving keys scroll it; Enter, launch anyway, is the dashboard's: it acts on the job). */
#include <stdio.h>
#include <string.h>

#include "pane_table.h"
#include "panes.h"

/* The status words of the report's table, coloured where they appear. */
static void draw_check_line(WINDOW *w, const struct paint *p, const char *s, int wd)
{
    static const struct { const char *word; enum theme_role role; } words[] = {
        { "fail", ROLE_FAIL }, { "FAIL", ROLE_FAIL }, { "warn", ROLE_WARN },
        { "WARN", ROLE_WARN }, { "pass", ROLE_OK }, { "PASS", ROLE_OK },
        { "skip", ROLE_DIM }, { "fix:", ROLE_DIM },
    };
    int x = 0;
    size_t len = strlen(s), i = 0;
    while (i < len && x < wd) {
        size_t best = len, bw = 0;
        enum theme_role br = ROLE_NORMAL;
        for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
            const char *hit = strstr(s + i, words[k].word);
            if (hit && (size_t)(hit - s) < best) {
                best = (size_t)(hit - s);
                bw = strlen(words[k].word);
                br = words[k].role;
            }
        }
        if (best > i) x += pane_put(w, p, s + i, best - i, wd - x, p->role[ROLE_NORMAL]);
        if (best < len && x < wd) x += pane_put(w, p, s + best, bw, wd - x, p->role[br] | A_BOLD);
        i = best + bw;
    }
}

void pane_check_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                     const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w);
    char title[128];
    if (j->state == JOB_CHECK_FAILED)
        snprintf(title, sizeof title, " Preflight refused the launch: Enter launches anyway, q quits");
    else if (ui->n_check)
        snprintf(title, sizeof title, " Preflight results");
    else
        snprintf(title, sizeof title, " Preflight: checking %zu node%s (ssh, env, tcp)...",
                 j->n_nodes, j->n_nodes == 1 ? "" : "s");
    werase(w);
    pane_title(w, p, title, true);
    if (!ui->n_check) {
        /* the report comes complete; meanwhile, which nodes are asked */
        for (size_t i = 0; i < j->n_nodes && (int)i + 1 < h; i++) {
            wmove(w, 1 + (int)i, 1);
            char line[160];
            snprintf(line, sizeof line, "%-24s %s", j->nodes[i].name ? j->nodes[i].name : "?",
                     "checking");
            pane_put(w, p, line, strlen(line), wd - 1, p->role[ROLE_DIM]);
        }
        return;
    }
    int top = ui->check_top;
    if (top < 0) top = 0;
    for (int y = 1; y < h && (size_t)(top + y - 1) < ui->n_check; y++) {
        wmove(w, y, 0);
        draw_check_line(w, p, ui->check_lines[top + y - 1], wd);
    }
}

static unsigned check_move(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    int *t = &ui->check_top;
    const struct rect *r = pane_ctx_area(c, AREA_CHECK);
    int cp = r->h > 2 ? r->h - 1 : 1;
    if (a == UI_UP) (*t)--;
    else if (a == UI_DOWN) (*t)++;
    else if (a == UI_PAGE_UP) *t -= cp;
    else if (a == UI_PAGE_DOWN) *t += cp;
    else if (a == UI_HOME) *t = 0;
    else if (a == UI_END) *t = (int)ui->n_check - cp;
    if (*t > (int)ui->n_check - cp) *t = (int)ui->n_check - cp;
    if (*t < 0) *t = 0;
    return DK_REDRAW;
}

static bool check_shown(const struct ui_state *ui)
{
    return ui->show_check;
}

static void check_draw(WINDOW *w, struct pane_ctx *c)
{
    pane_check_draw(w, c->job, c->ui, c->paint);
}

const struct pane_class pane_check_class = {
    .name = "preflight",
    .area = AREA_CHECK,
    .shown = check_shown,
    .grabs = true,
    .mode = KM_CHECK,
    .draw = check_draw,
    .move = check_move,
};
