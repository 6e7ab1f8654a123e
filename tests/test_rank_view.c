/* Issue 19, the dashboard by node: the ranks pane's attention-first order (failed, lost,
 * stalled, unknown, stragglers, throttling GPUs, then by rank) on by itself when the ranks do
 * not fit, by rank when they do or when chosen; the state and host filters (a glob, a
 * substring, one node); a node row's aggregates (state counts, min and median step, median
 * loss, its GPUs); and, on a curses screen written to /dev/null, that with 8,192 ranks on 1,024
 * nodes the failed, stalled and straggling ranks are the rows on screen, the node view puts
 * their nodes first, and Enter-style node filtering shows one node's ranks. The time of one
 * frame is printed as a TAP comment (docs/performance.md), never asserted. */
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "job/gpu.h"
#include "job/job.h"
#include "job/job_state.h"
#include "job/rank_report.h"
#include "tap.h"
#include "util/util.h"
#include "panes.h"
#include "rank_view.h"

#define NODES 1024
#define PER 8

static struct job *big_job(void)
{
    static char names[NODES][16];
    const char *np[NODES];
    int per[NODES];
    for (int i = 0; i < NODES; i++) {
        snprintf(names[i], sizeof names[i], "n%04d", i);
        np[i] = names[i];
        per[i] = PER;
    }
    char err[256];
    struct job *j = job_new("t", NULL, 0, np, NULL, per, NODES, err, sizeof err);
    if (!j) { printf("# job_new: %s\n", err); return NULL; }
    if (job_attempt_begin(j, err, sizeof err) != 0) printf("# attempt: %s\n", err);
    for (int r = 0; r < NODES * PER; r++) {
        job_rank_started(j, r, 1000 + r);
        job_metric_add(j, r, 100 + r % 3, 2.0, 10.0, NAN);
    }
    /* the troubles, scattered */
    job_rank_ended(j, 5000, RANK_FAILED);
    job_rank_stalled(j, 7000);
    j->ranks[100].straggler = true;
    job_node_link(j, 200, LINK_SILENT);          /* ranks 1600..1607: unknown */
    /* node 500's GPU 3 throttles (hardware thermal): rank 4003 uses it */
    struct node_gpus *ng = &j->nodes[500].gpus;
    ng->n = PER;
    ng->g = xcalloc(PER, sizeof *ng->g);
    ng->seen = true;
    for (int g = 0; g < PER; g++) {
        ng->g[g].index = g;
        ng->g[g].util = 90;
        ng->g[g].mem_used_mib = 1024;
        ng->g[g].mem_total_mib = 81920;
        ng->g[g].temp_c = 60 + g;
        ng->g[g].rank = 4000 + g;
        j->ranks[4000 + g].gpu = g;
    }
    ng->g[3].has_throttle = true;
    ng->g[3].throttle = GPU_THR_HW_THERMAL;
    j->generation++;
    return j;
}

static void opts(struct rank_view_opts *o, enum rank_order order, enum rank_filter f,
                 const char *host, int node, int rows)
{
    memset(o, 0, sizeof *o);
    o->order = order;
    o->filter = f;
    o->host = host;
    o->node = node;
    o->rows = rows;
}

static void test_attention_order(void)
{
    struct job *j = big_job();
    if (!j) { CHECK(0); return; }
    struct rank_view v;
    rank_view_init(&v);
    struct rank_view_opts o;
    opts(&o, ORDER_AUTO, RF_ALL, NULL, -1, 30);
    rank_view_update(&v, j, &o);
    CHECK(v.attention);                            /* 8,192 ranks, 30 rows: attention first */
    CHECK_INT(v.n, NODES * PER);
    static const int want[] = { 5000, 7000, 1600, 1601, 1602, 1603, 1604, 1605, 1606, 1607,
                                100, 4003, 0, 1, 2 };
    bool same = true;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (v.idx[i] != want[i]) {
            printf("# place %zu: rank %d, wanted %d\n", i, v.idx[i], want[i]);
            same = false;
        }
    CHECK(same);
    CHECK_INT(rank_view_pos(&v, 5000), 0);
    CHECK_INT(rank_view_pos(&v, 3), 15);
    CHECK_INT(rank_attn_class(j, &j->ranks[4003]), ATTN_THROTTLE);
    CHECK_INT(rank_attn_class(j, &j->ranks[4002]), ATTN_REST);
    /* nodes: the failed rank's node first, then the stalled one's, the silent node, ... */
    CHECK_INT(v.n_nodes_shown, NODES);
    CHECK_INT(v.nodes[0], 625);
    CHECK_INT(v.nodes[1], 875);
    CHECK_INT(v.nodes[2], 200);
    CHECK_INT(v.nodes[3], 12);
    CHECK_INT(v.nodes[4], 500);
    CHECK_INT(v.nodes[5], 0);
    /* they all fit: by rank */
    opts(&o, ORDER_AUTO, RF_ALL, NULL, -1, 10000);
    rank_view_update(&v, j, &o);
    CHECK(!v.attention);
    CHECK_INT(v.idx[0], 0);
    CHECK_INT(v.idx[5000], 5000);
    /* o chose by rank: by rank though they do not fit; the grid keeps its cells in place */
    opts(&o, ORDER_RANK, RF_ALL, NULL, -1, 30);
    rank_view_update(&v, j, &o);
    CHECK(!v.attention && v.idx[0] == 0);
    opts(&o, ORDER_AUTO, RF_ALL, NULL, -1, 30);
    o.grid = true;
    rank_view_update(&v, j, &o);
    CHECK(!v.attention && v.idx[0] == 0);
    /* the model moved (the failed rank is cleared by a restart): the view follows */
    opts(&o, ORDER_ATTENTION, RF_ALL, NULL, -1, 30);
    rank_view_update(&v, j, &o);
    CHECK_INT(v.idx[0], 5000);
    job_rank_running(j, 5000, 99);
    rank_view_update(&v, j, &o);
    CHECK_INT(v.idx[0], 7000);
    rank_view_done(&v);
    job_free(j);
}

static void test_filters(void)
{
    struct job *j = big_job();
    if (!j) { CHECK(0); return; }
    struct rank_view v;
    rank_view_init(&v);
    struct rank_view_opts o;
    opts(&o, ORDER_AUTO, RF_STALLED, NULL, -1, 30);
    rank_view_update(&v, j, &o);
    CHECK_INT(v.n, 1);
    CHECK_INT(v.idx[0], 7000);
    CHECK_INT(rank_view_pos(&v, 0), -1);
    CHECK_INT(v.n_nodes_shown, 1);                 /* the node view: only its node */
    CHECK_INT(v.nodes[0], 875);
    opts(&o, ORDER_AUTO, RF_ATTENTION, NULL, -1, 30);
    rank_view_update(&v, j, &o);
    CHECK_INT(v.n, 12);                            /* 1 failed, 1 stalled, 8 unknown, 1 + 1 */
    CHECK(!v.attention);                           /* 12 fit in 30 rows: by rank */
    CHECK_INT(v.idx[0], 100);
    opts(&o, ORDER_AUTO, RF_FAILED, NULL, -1, 30);
    rank_view_update(&v, j, &o);
    CHECK(v.n == 1 && v.idx[0] == 5000);
    opts(&o, ORDER_AUTO, RF_UNKNOWN, NULL, -1, 30);
    rank_view_update(&v, j, &o);
    CHECK(v.n == 8 && v.idx[0] == 1600);
    opts(&o, ORDER_AUTO, RF_RUNNING, NULL, -1, 30);
    rank_view_update(&v, j, &o);
    CHECK_INT(v.n, NODES * PER - 12);
    /* host: a substring, a glob, one node (Enter on a node row) */
    opts(&o, ORDER_AUTO, RF_ALL, "n0200", -1, 30);
    rank_view_update(&v, j, &o);
    CHECK(v.n == 8 && v.idx[0] == 1600 && v.idx[7] == 1607);
    opts(&o, ORDER_AUTO, RF_ALL, "n00[01]*", -1, 30);
    rank_view_update(&v, j, &o);
    CHECK_INT(v.n, 20 * PER);
    CHECK_INT(v.n_nodes_shown, 20);
    CHECK_INT(v.idx[0], 100);                      /* the straggler of n0012 first */
    opts(&o, ORDER_AUTO, RF_ALL, NULL, 3, 30);
    rank_view_update(&v, j, &o);
    CHECK(v.n == 8 && v.idx[0] == 24 && v.idx[7] == 31);
    opts(&o, ORDER_AUTO, RF_STALLED, "n01", -1, 30);   /* both: none */
    rank_view_update(&v, j, &o);
    CHECK_INT(v.n, 0);
    CHECK(rank_view_host_match("gpu*", "gpu07") && !rank_view_host_match("gpu*", "xgpu07"));
    CHECK(rank_view_host_match("pu0", "gpu07") && rank_view_host_match("", "a"));
    CHECK_STR(rank_filter_name(RF_STRAGGLER), "stragglers");
    rank_view_done(&v);
    job_free(j);
}

static void test_node_summary(void)
{
    const char *names[] = { "a", "b" };
    int per[] = { 4, 2 };
    char err[256];
    struct job *j = job_new("t", NULL, 0, names, NULL, per, 2, err, sizeof err);
    if (!j) { CHECK(0); return; }
    job_attempt_begin(j, err, sizeof err);
    static const long steps[] = { 14, 10, 12, 11 };
    static const double loss[] = { 4.0, 1.0, 3.0, 2.0 };
    for (int r = 0; r < 4; r++) {
        job_rank_started(j, r, 100 + r);
        job_metric_add(j, r, steps[r], loss[r], NAN, NAN);
    }
    job_rank_stalled(j, 2);
    j->ranks[3].straggler = true;
    struct node_summary s;
    node_summarize(j, 0, &s);
    CHECK(s.has_step && s.step_min == 10 && s.step_median == 11);
    CHECK_NEAR(s.loss_median, 2.5, 1e-12);
    CHECK_INT(s.counts[ATTN_STALLED], 1);
    CHECK_INT(s.counts[ATTN_STRAGGLER], 1);
    CHECK_INT(s.n_running, 2);
    CHECK_INT(s.worst, ATTN_STALLED);
    CHECK_INT(s.n_gpus, 0);                        /* no sample: "-" */
    CHECK(isnan(s.gpu_util));
    /* node b: pending ranks, no step; then lost */
    node_summarize(j, 1, &s);
    CHECK(!s.has_step && !s.has_loss && s.n_pending == 2 && s.worst == ATTN_REST);
    job_node_lost(j, 1, "test", true);
    node_summarize(j, 1, &s);
    CHECK_INT(s.worst, ATTN_LOST);
    /* GPUs: mean utilisation, memory summed, the hottest, throttling and ECC counted */
    struct node_gpus *ng = &j->nodes[0].gpus;
    ng->n = 2;
    ng->g = xcalloc(2, sizeof *ng->g);
    ng->seen = true;
    ng->g[0] = (struct gpu_info){ .index = 0, .util = 80, .mem_used_mib = 2048, .mem_total_mib = 4096,
                                  .temp_c = 70, .has_throttle = true, .throttle = GPU_THR_SW_POWER_CAP };
    ng->g[1] = (struct gpu_info){ .index = 1, .util = 40, .mem_used_mib = 1024, .mem_total_mib = 4096,
                                  .temp_c = 88, .has_ecc = true, .ecc = 2 };
    node_summarize(j, 0, &s);
    CHECK_INT(s.n_gpus, 2);
    CHECK_NEAR(s.gpu_util, 60, 1e-9);
    CHECK_NEAR(s.mem_used_mib, 3072, 1e-9);
    CHECK_NEAR(s.mem_total_mib, 8192, 1e-9);
    CHECK_NEAR(s.temp_max, 88, 1e-9);
    CHECK(s.throttling == 1 && s.ecc == 1);
    job_free(j);
}

static bool row_has(WINDOW *w, int y, const char *needle)
{
    char buf[512];
    mvwinnstr(w, y, 0, buf, sizeof buf - 1);
    return strstr(buf, needle) != NULL;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void test_drawing_8192(void)
{
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    setenv("LINES", "40", 1);
    setenv("COLUMNS", "120", 1);
    SCREEN *scr = newterm("xterm", out, in);
    if (!scr) { tap_skip("drawing", "no xterm terminfo entry"); fclose(out); fclose(in); return; }
    struct paint p;
    memset(&p, 0, sizeof p);
    for (int r = 0; r < ROLE_COUNT; r++) p.role[r] = A_NORMAL;
    p.ascii = true;
    struct job *j = big_job();
    if (!j) { CHECK(0); endwin(); delscreen(scr); return; }
    struct ui_state ui;
    memset(&ui, 0, sizeof ui);
    ui.focus = AREA_RANKS;
    ui.modal = KM_COUNT;
    ui.now_ms = mono_ms();
    struct rank_view v;
    rank_view_init(&v);
    struct rank_view_opts o;
    WINDOW *w = newwin(20, 110, 0, 0);             /* 18 rank rows */
    ranks_view_opts(&ui, 18, &o);
    rank_view_update(&v, j, &o);
    ranks_scroll_to_selection(&ui, &v, 18, 1);
    pane_ranks_draw(w, j, &ui, &v, &p);
    CHECK(row_has(w, 0, "[attention first]"));
    CHECK(row_has(w, 2, " 5000 ") && row_has(w, 2, "failed"));
    CHECK(row_has(w, 3, " 7000 ") && row_has(w, 3, "stalled"));
    CHECK(row_has(w, 4, " 1600 ") && row_has(w, 4, "unknown"));
    CHECK(row_has(w, 12, "  100 ") && row_has(w, 12, "straggler"));
    CHECK(row_has(w, 13, " 4003 "));
    CHECK(row_has(w, 14, "    0 "));                /* the selected rank 0, then by rank */

    /* one frame's cost: the view recomputed (the model moved) and the pane drawn */
    const int frames = 50;
    double t0 = now_us();
    for (int f = 0; f < frames; f++) {
        j->generation++;
        rank_view_update(&v, j, &o);
        pane_ranks_draw(w, j, &ui, &v, &p);
    }
    double ranks_us = (now_us() - t0) / frames;
    ui.node_view = true;
    ui.node_selected = 0;
    ranks_view_opts(&ui, 18, &o);
    rank_view_update(&v, j, &o);
    ranks_scroll_to_selection(&ui, &v, 18, 1);
    t0 = now_us();
    for (int f = 0; f < frames; f++) {
        j->generation++;
        rank_view_update(&v, j, &o);
        pane_nodes_draw(w, j, &ui, &v, &p);
    }
    double nodes_us = (now_us() - t0) / frames;
    printf("# one frame of the ranks pane, 8,192 ranks on 1,024 nodes, 110x20: ranks %.0f us, nodes %.0f us\n",
           ranks_us, nodes_us);
    t0 = now_us();
    for (int f = 0; f < frames; f++) { j->generation++; rank_view_update(&v, j, &o); }
    printf("# of which the view (order and filters over 8,192 ranks): %.0f us\n", (now_us() - t0) / frames);
    CHECK(row_has(w, 0, "Nodes 1024 (8192 ranks)"));
    CHECK(row_has(w, 2, "n0625") && row_has(w, 2, "F1 R7"));
    CHECK(row_has(w, 3, "n0875") && row_has(w, 3, "S1 R7"));
    CHECK(row_has(w, 4, "n0200") && row_has(w, 4, "silent") && row_has(w, 4, "?8"));
    CHECK(row_has(w, 6, "n0500") && row_has(w, 6, "T1 R7") && row_has(w, 6, "90"));
    CHECK(row_has(w, 6, "8/640G") && row_has(w, 6, "67C"));
    CHECK(row_has(w, 7, "n0000") && row_has(w, 7, "R8") && row_has(w, 7, "   100 ") &&
          row_has(w, 7, "   101 "));              /* steps 100 101 102 ...: min 100, median 101 */
    /* Enter on n0200 (what open_node does): its ranks only */
    ui.node_view = false;
    ui.filter_node = 200 + 1;
    ranks_view_opts(&ui, 18, &o);
    rank_view_update(&v, j, &o);
    pane_ranks_draw(w, j, &ui, &v, &p);
    CHECK(row_has(w, 0, "[8 shown: node n0200; Esc all]"));
    CHECK(row_has(w, 2, " 1600 ") && row_has(w, 9, " 1607 ") && !row_has(w, 10, "running"));
    rank_view_done(&v);
    delwin(w);
    job_free(j);
    endwin();
    delscreen(scr);
    fclose(out);
    fclose(in);
}

int main(void)
{
    RUN(test_attention_order);
    RUN(test_filters);
    RUN(test_node_summary);
    RUN(test_drawing_8192);
    return tap_done();
}
