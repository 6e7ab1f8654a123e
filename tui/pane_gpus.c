/* The GPU view (G): every GPU of every node in the overlay window, one line each under its
 * node: the rank on it, utilisation now and as a sparkline of its last minute (as wide as the
 * window allows), memory, power against its limit, temperature, SM clock, and what is wrong
 * (throttling and why, ECC errors) in the warning or failure colour. Drawn from the job model
 * (job/gpu.c) at every frame, like the panes. Its class (pane_table.h) shares the overlay's
 * area with the help: G opens it, the moving keys scroll it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "job/gpu.h"
#include "pane_table.h"
#include "panes.h"

int pane_gpus_lines(const struct job *j)
{
    int n = 0;
    for (size_t i = 0; i < j->n_nodes; i++)
        n += 1 + (j->nodes[i].gpus.seen ? j->nodes[i].gpus.n : 0);
    return n;
}

/* The last `cells` history samples as block characters (or 0-9 in ASCII). */
static void sparkline(char *buf, size_t cap, const struct gpu_info *g, int cells, bool ascii)
{
    static const char *const blocks[] = { "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588" };
    size_t o = 0;
    int from = g->hist_n > cells ? g->hist_n - cells : 0;
    buf[0] = '\0';
    for (int k = 0; k < cells - (g->hist_n - from); k++) o += (size_t)snprintf(buf + o, cap - o, " ");
    for (int k = from; k < g->hist_n && o + 4 < cap; k++) {
        int v = g->hist[k];
        if (ascii) o += (size_t)snprintf(buf + o, cap - o, "%d", v >= 100 ? 9 : v / 10);
        else o += (size_t)snprintf(buf + o, cap - o, "%s", blocks[v >= 100 ? 7 : v * 8 / 100]);
    }
}

/* "GPU 1  r5     42% throttling: thermal (hardware)  ▂▃▅▇  20.0/80G 690/700W 91C 1200MHz": the
 * trouble right after the utilisation, so a narrow window still shows it; the sparkline gets
 * what the numbers leave. */
static void gpu_line(WINDOW *w, int y, int wd, const struct gpu_info *g, const struct paint *p, attr_t base)
{
    char head[64], trouble[200] = "", nums[96], spark[GPU_HIST * 4 + 8], names[160];
    char who[16] = "-", util[16] = "-";
    attr_t a = base;
    int x = 2;
    if (g->rank >= 0) snprintf(who, sizeof who, "r%d", g->rank);
    if (!isnan(g->util)) snprintf(util, sizeof util, "%.0f", g->util);
    snprintf(head, sizeof head, "GPU %-2d %-5s %3s%% ", g->index, who, util);
    if (g->has_throttle && (g->throttle & GPU_THR_PROBLEMS)) {
        snprintf(trouble, sizeof trouble, "throttling: %s ",
                 gpu_throttle_names(g->throttle & GPU_THR_PROBLEMS, names, sizeof names));
        a = p->role[ROLE_WARN];
    }
    if (g->has_ecc && g->ecc > 0) {
        size_t n = strlen(trouble);
        snprintf(trouble + n, sizeof trouble - n, "ECC errors: %llu ", g->ecc);
        a = p->role[ROLE_FAIL];
    }
    snprintf(nums, sizeof nums, " %.1f/%.0fG %.0f/%.0fW %.0fC %.0fMHz", g->mem_used_mib / 1024,
             g->mem_total_mib / 1024, g->power_w, g->power_limit_w, g->temp_c, g->sm_mhz);
    int cells = wd - 6 - (int)(strlen(head) + strlen(trouble) + strlen(nums));
    if (cells > GPU_HIST) cells = GPU_HIST;
    if (cells < 0) cells = 0;
    sparkline(spark, sizeof spark, g, cells, p->ascii);
    wmove(w, y, x);
    x += pane_put(w, p, head, strlen(head), wd - 2 - x, a);
    x += pane_put(w, p, trouble, strlen(trouble), wd - 2 - x, a | A_BOLD);
    x += pane_put(w, p, spark, strlen(spark), wd - 2 - x, p->role[ROLE_OK]);
    pane_put(w, p, nums, strlen(nums), wd - 2 - x, a);
}

void pane_gpus_draw(WINDOW *w, const struct job *j, const struct ui_state *ui, const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w), rows = h - 2, line = 0;
    char buf[200];
    attr_t a = pane_overlay_frame(w, p, " GPUs: utilisation now and its last minute (Esc, q or G closes; "
                                        "Up/Down scroll) ");
    int total = pane_gpus_lines(j), top = ui->help_top;
    if (top > total - rows) top = total - rows;
    if (top < 0) top = 0;
    for (size_t i = 0; i < j->n_nodes; i++) {
        const struct node_gpus *ng = &j->nodes[i].gpus;
        if (line - top >= 0 && line - top < rows) {
            if (!ng->seen) snprintf(buf, sizeof buf, "%s: no GPU samples (no NVML on the node, or none yet)",
                                    j->nodes[i].name);
            else snprintf(buf, sizeof buf, "%s: %d GPU%s%s%s", j->nodes[i].name, ng->n, ng->n == 1 ? "" : "s",
                          ng->n ? ", " : "", ng->n ? ng->g[0].name : "");
            wmove(w, 1 + line - top, 2);
            pane_put(w, p, buf, strlen(buf), wd - 4, a | A_BOLD);
        }
        line++;
        for (int k = 0; ng->seen && k < ng->n; k++, line++)
            if (line - top >= 0 && line - top < rows) gpu_line(w, 1 + line - top, wd, &ng->g[k], p, a);
    }
    if (total == 0) {
        wmove(w, 1, 2);
        pane_put(w, p, "no nodes yet", 12, wd - 4, a);
    }
    wbkgdset(w, ' ');
}

/* ---- the class ---------------------------------------------------------------------------- */

static unsigned gpus_open(struct pane_ctx *c, enum ui_action a)
{
    struct ui_state *ui = c->ui;
    (void)a;
    ui->modal = KM_HELP;
    ui->gpu_view = true;
    ui->help_top = 0;
    ui->n_gpu_lines = pane_gpus_lines(c->job);
    return DK_REDRAW | DK_RELAYOUT;
}

static unsigned gpus_move(struct pane_ctx *c, enum ui_action a)
{
    return pane_overlay_scroll(c, a, c->ui->n_gpu_lines);
}

static bool gpus_shown(const struct ui_state *ui)
{
    return ui->modal == KM_HELP && ui->gpu_view;
}

/* Its line count kept for scrolling: the samples grow it. */
static void gpus_draw(WINDOW *w, struct pane_ctx *c)
{
    c->ui->n_gpu_lines = pane_gpus_lines(c->job);
    pane_gpus_draw(w, c->job, c->ui, c->paint);
}

const struct pane_class pane_gpus_class = {
    .name = "gpus",
    .area = AREA_OVERLAY,
    .shown = gpus_shown,
    .grabs = true,
    .mode = KM_HELP,
    .draw = gpus_draw,
    .move = gpus_move,
    .keys = (const struct pane_key[]){
        { UI_GPUS, gpus_open },
        { UI_NONE, NULL },
    },
};
