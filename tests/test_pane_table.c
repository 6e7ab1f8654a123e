/* Unit tests for tui/pane_table.c, the one table of the dashboard's panes, against the key
 * map (tui/keymap.c) and the layout (tui/layout.c), without a terminal: the table is well
 * formed (each kind a name, an area, a drawing; kinds sharing an area never shown at once;
 * one Tab ring); every key the help lists does something in every mode it is bound in (a
 * moving key moves the pane that has the keys, a pane's own key, Enter, v, H, is done by that
 * pane or the dashboard, never passed to another), and nothing is done twice or never bound;
 * every kind of pane is reached from the dashboard's start (a running job, a preflight on
 * screen) within two keys; Tab and Shift-Tab walk the panes on screen; and a few keys a user
 * relies on do what docs/dashboard.md says through the table (f follows the log from the
 * ranks pane, C opens the NCCL columns from the log, Enter on the events opens the log). */
#include <curses.h>
#include <stdlib.h>
#include <string.h>

#include "dashboard_int.h"
#include "job/job.h"
#include "keymap.h"
#include "layout.h"
#include "pane_table.h"
#include "panes.h"
#include "rank_view.h"
#include "tap.h"

/* A dashboard's pane context without a terminal: 4 ranks on 2 nodes, a 120x40 screen. */
struct bench {
    struct job *job;
    struct ui_state ui;
    struct rank_view view;
    struct chart_cache chart;
    struct paint paint;
    struct layout lay;
    struct pane_ctx c;
};

/* The layout for the UI state, as the dashboard's layout_update asks for it. */
static void bench_layout(struct bench *b)
{
    const struct ui_state *ui = &b->ui;
    struct layout_in in = {
        .rows = 40, .cols = 120, .show_help = ui->modal == KM_HELP, .log_maximized = ui->log_max,
        .grid_mode = ui->grid && !ui->node_view, .show_check = ui->show_check,
        .n_ranks = ui->node_view ? (int)b->job->n_nodes : (int)b->job->n_ranks,
        .help_lines = ui->gpu_view ? 10000 : (int)ui->n_help + 2,
    };
    layout_compute(&in, &b->lay);
}

static bool bench_init(struct bench *b)
{
    memset(b, 0, sizeof *b);
    const char *names[] = { "n1", "n2" };
    int per[] = { 2, 2 };
    char err[256];
    b->job = job_new("t", NULL, 0, names, NULL, per, 2, err, sizeof err);
    if (!b->job) {
        printf("# job_new: %s\n", err);
        return false;
    }
    /* the dashboard's start (dashboard_new) */
    b->ui.focus = AREA_RANKS;
    b->ui.modal = KM_COUNT;
    b->ui.follow = true;
    b->ui.log_mode = LOGV_RANK;
    b->ui.help_lines = keymap_help_lines(&b->ui.n_help);
    rank_view_init(&b->view);
    chart_cache_init(&b->chart);
    bench_layout(b);
    b->c = (struct pane_ctx){ .job = b->job, .ui = &b->ui, .view = &b->view, .chart = &b->chart,
                              .paint = &b->paint, .lay = &b->lay, .now_ms = 1000 };
    return true;
}

static void bench_done(struct bench *b)
{
    keymap_help_free(b->ui.help_lines, b->ui.n_help);
    rank_view_done(&b->view);
    chart_cache_done(&b->chart);
    job_free(b->job);
}

/* A key as the dashboard takes it, as far as the panes go: looked up in the mode of the pane
 * that has the keys and done through the table, Tab along its ring (dashboard_keys.c's
 * key_focus). False when no pane did it. */
static bool bench_key(struct bench *b, int key)
{
    enum ui_action a = keymap_lookup(pane_table_mode(&b->ui), key);
    unsigned flags = 0;
    if (a == UI_FOCUS_NEXT || a == UI_FOCUS_PREV) {
        pane_focus_move(&b->c, a == UI_FOCUS_NEXT ? 1 : -1);
        return true;
    }
    if (a == UI_NONE || !pane_table_key(&b->c, a, &flags)) return false;
    if (flags & DK_RELAYOUT) bench_layout(b);
    return true;
}

static void test_table_well_formed(void)
{
    size_t n = pane_table_len;
    const struct pane_class *const *t = pane_table;
    CHECK(n >= 8);
    int kinds[AREA_COUNT] = { 0 }, ring_area[16];
    for (int p = 0; p < 16; p++) ring_area[p] = -1;
    int ring = 0;
    for (size_t i = 0; i < n; i++) {
        const struct pane_class *pc = t[i];
        CHECK(pc->name && *pc->name);
        for (size_t k = 0; k < i; k++) CHECK(strcmp(pc->name, t[k]->name) != 0);
        CHECK((int)pc->area >= 0 && pc->area < AREA_COUNT);
        CHECK(pc->draw != NULL);
        CHECK((int)pc->mode >= 0 && pc->mode <= KM_COUNT);
        /* moving keys or the keys while shown need a mode to be looked up in */
        if (pc->grabs || pc->move) CHECK(pc->mode != KM_COUNT);
        for (const struct pane_key *k = pc->keys; k && k->action != UI_NONE; k++) {
            CHECK(k->action > UI_NONE && k->action < UI_ACTION_COUNT && k->fn);
            for (const struct pane_key *e = pc->keys; e != k; e++) CHECK(e->action != k->action);
        }
        if (pc->area < AREA_COUNT) kinds[pc->area]++;
        /* the ring: places from 1, one area each, the kinds of an area at its place */
        if (pc->focus) {
            CHECK(pc->focus > 0 && pc->focus < 16);
            CHECK(pc->mode == KM_RANKS || pc->mode == KM_LOG || pc->mode == KM_EVENTS);
            CHECK(pc->hints && *pc->hints);
            if (pc->focus > 0 && pc->focus < 16) {
                if (ring_area[pc->focus] < 0) ring_area[pc->focus] = (int)pc->area;
                CHECK_INT(ring_area[pc->focus], pc->area);
                if (pc->focus > ring) ring = pc->focus;
            }
        }
        /* two kinds of one area: told apart by the UI state */
        if (kinds[pc->area] > 1) CHECK(pc->shown != NULL);
    }
    CHECK_INT(ring, 3);
    for (int p = 1; p <= ring; p++) CHECK(ring_area[p] >= 0);
    for (int a = 0; a < AREA_COUNT; a++) {
        if (!kinds[a]) printf("#   area %d has no kind of pane\n", a);
        CHECK(kinds[a] > 0);
    }
}

/* In every UI state the toggles make, an area shows at most one kind; the body's areas and
 * the header and status always one, the overlay and the preflight only while they are up. */
static void test_one_kind_per_area(void)
{
    size_t n = pane_table_len;
    const struct pane_class *const *t = pane_table;
    for (unsigned bits = 0; bits < 64; bits++) {
        struct ui_state ui;
        memset(&ui, 0, sizeof ui);
        ui.node_view = bits & 1;
        ui.nccl_cols = bits & 2;
        ui.modal = bits & 4 ? KM_HELP : bits & 32 ? KM_SEARCH : KM_COUNT;
        ui.gpu_view = bits & 8;
        ui.show_check = bits & 16;
        for (int a = 0; a < AREA_COUNT; a++) {
            int shown = 0;
            for (size_t i = 0; i < n; i++)
                shown += t[i]->area == (enum area)a && pane_is_shown(t[i], &ui);
            bool up = a == AREA_OVERLAY ? ui.modal == KM_HELP : a == AREA_CHECK ? ui.show_check : true;
            if (shown != (up ? 1 : 0)) printf("#   bits %u: area %d shows %d kinds\n", bits, a, shown);
            CHECK_INT(shown, up ? 1 : 0);
        }
    }
}

static bool is_move(enum ui_action a)
{
    return a >= UI_UP && a <= UI_END;
}

/* Whether some kind of pane does action a (a moving action: has moving keys). */
static bool some_pane_does(enum ui_action a)
{
    size_t n = pane_table_len;
    const struct pane_class *const *t = pane_table;
    for (size_t i = 0; i < n; i++)
        if (pane_class_key(t[i], a)) return true;
    return false;
}

static void test_every_key_is_done(void)
{
    size_t n = pane_table_len, nb;
    const struct pane_class *const *t = pane_table;
    const struct km_binding *kb = keymap_table(&nb);
    char name[32];
    for (size_t b = 0; b < nb; b++) {
        enum ui_action a = kb[b].action;
        bool common = (kb[b].modes & KM_FOCUS) == KM_FOCUS;   /* bound in every pane */
        keymap_key_name(kb[b].key, name, sizeof name);
        /* one doer: a pane's action is not the dashboard's too (who would win is unclear) */
        if (some_pane_does(a) && dashboard_key_does(a) && !is_move(a)) {
            printf("#   %s (%s): done by a pane and by the dashboard\n", name, ui_action_name(a));
            CHECK(0);
        }
        for (int m = 0; m < KM_COUNT; m++) {
            if (!(kb[b].modes & KM_BIT(m))) continue;
            bool pane_mode = false;
            for (size_t i = 0; i < n; i++) {
                if (t[i]->mode != (enum km_mode)m) continue;
                pane_mode = true;
                bool done = pane_class_key(t[i], a) || (!is_move(a) && dashboard_key_does(a)) ||
                            (common && !is_move(a) && some_pane_does(a));
                if (!done) {
                    printf("#   %s: %s (%s) is done by no one\n", t[i]->name, name, ui_action_name(a));
                    CHECK(0);
                }
            }
            /* a question and the line being typed: the dashboard's */
            if (!pane_mode && !dashboard_key_does(a)) {
                printf("#   %s: %s (%s) is done by no one\n", km_mode_name(m), name, ui_action_name(a));
                CHECK(0);
            }
        }
    }
    /* and every action a pane does is bound to a key (no handler left behind) */
    for (size_t i = 0; i < n; i++)
        for (const struct pane_key *k = t[i]->keys; k && k->action != UI_NONE; k++) {
            bool bound = false;
            for (size_t b = 0; b < nb && !bound; b++) bound = kb[b].action == k->action;
            if (!bound)
                printf("#   %s does %s, which no key asks for\n", t[i]->name, ui_action_name(k->action));
            CHECK(bound);
        }
}

/* From each start, every key of the mode then, and again from where it led: which kinds were
 * shown. */
static void reach_from(bool preflight, bool *seen)
{
    size_t n = pane_table_len, nb;
    const struct pane_class *const *t = pane_table;
    const struct km_binding *kb = keymap_table(&nb);
    for (size_t b1 = 0; b1 <= nb; b1++)
        for (size_t b2 = 0; b2 <= nb; b2++) {
            if (b1 == nb && b2 != nb) continue;
            struct bench B;
            if (!bench_init(&B)) return;
            B.ui.show_check = preflight;
            bench_layout(&B);
            if (b1 < nb) bench_key(&B, kb[b1].key);
            if (b2 < nb) bench_key(&B, kb[b2].key);
            for (size_t i = 0; i < n; i++)
                if (pane_table_shown(t[i]->area, &B.ui) == t[i]) seen[i] = true;
            bench_done(&B);
        }
}

static void test_every_pane_reachable(void)
{
    size_t n = pane_table_len;
    const struct pane_class *const *t = pane_table;
    bool *seen = calloc(n, sizeof *seen);
    if (!seen) { CHECK(0); return; }
    reach_from(false, seen);
    reach_from(true, seen);
    for (size_t i = 0; i < n; i++) {
        if (!seen[i]) printf("#   %s is never shown\n", t[i]->name);
        CHECK(seen[i]);
    }
    free(seen);
}

static void test_focus_ring(void)
{
    struct bench B;
    if (!bench_init(&B)) { CHECK(0); return; }
    static const enum area order[] = { AREA_LOG, AREA_EVENTS, AREA_RANKS };
    for (int i = 0; i < 3; i++) {
        CHECK(bench_key(&B, '\t'));
        CHECK_INT(B.ui.focus, order[i]);
    }
    CHECK(bench_key(&B, KEY_BTAB));
    CHECK_INT(B.ui.focus, AREA_EVENTS);
    CHECK_INT(pane_table_mode(&B.ui), KM_EVENTS);
    /* the log maximized hides the events: Tab steps over them, and a focus on them moves */
    CHECK(bench_key(&B, 'z'));
    pane_focus_check(&B.c);
    CHECK_INT(B.ui.focus, AREA_RANKS);
    CHECK(bench_key(&B, '\t'));
    CHECK_INT(B.ui.focus, AREA_LOG);
    CHECK(bench_key(&B, '\t'));
    CHECK_INT(B.ui.focus, AREA_RANKS);
    bench_done(&B);
}

/* Keys a user relies on, through the table: a pane's key from another pane acts on its pane;
 * Enter depends on the pane; the overlay and the preflight take the moving keys. */
static void test_keys_through_the_table(void)
{
    struct bench B;
    if (!bench_init(&B)) { CHECK(0); return; }
    CHECK(bench_key(&B, 'f'));                  /* from the ranks pane: the log stops following */
    CHECK(!B.ui.follow);
    CHECK(bench_key(&B, 'L'));
    CHECK(B.ui.log_scale);
    CHECK(bench_key(&B, '\t'));
    CHECK_INT(B.ui.focus, AREA_LOG);
    CHECK(bench_key(&B, 'C'));                  /* from the log: the node view, NCCL's columns */
    CHECK(B.ui.node_view && B.ui.nccl_cols);
    CHECK_STR(pane_table_shown(AREA_RANKS, &B.ui)->name, "nodes-nccl");
    CHECK(bench_key(&B, 'v') == false);         /* v is the ranks pane's alone */
    CHECK(bench_key(&B, '\t'));
    CHECK(bench_key(&B, '\t'));
    CHECK_INT(B.ui.focus, AREA_RANKS);
    CHECK(bench_key(&B, 'v'));                  /* v again: the rank table */
    CHECK(!B.ui.node_view && !B.ui.nccl_cols);
    CHECK(bench_key(&B, KEY_DOWN));
    CHECK_INT(B.ui.selected, 1);
    CHECK(bench_key(&B, KEY_END));
    CHECK_INT(B.ui.selected, 3);
    CHECK(bench_key(&B, '\n'));                 /* Enter on a rank: its log, focused */
    CHECK_INT(B.ui.focus, AREA_LOG);
    CHECK(bench_key(&B, '\n'));                 /* Enter on the log: maximized */
    CHECK(B.ui.log_max);
    CHECK(bench_key(&B, '?'));
    CHECK_STR(pane_table_keys_pane(&B.ui)->name, "help");
    CHECK_INT(pane_table_mode(&B.ui), KM_HELP);
    CHECK(bench_key(&B, KEY_NPAGE));
    CHECK(B.ui.help_top > 0);
    CHECK(!bench_key(&B, 27));                  /* Esc closes it: the dashboard's */
    bench_done(&B);

    /* the preflight has the keys while it is up; r means nothing there */
    if (!bench_init(&B)) { CHECK(0); return; }
    B.ui.show_check = true;
    B.ui.n_check = 100;
    bench_layout(&B);
    CHECK_INT(pane_table_mode(&B.ui), KM_CHECK);
    CHECK(bench_key(&B, KEY_NPAGE));
    CHECK(B.ui.check_top > 0);
    CHECK_INT(B.ui.selected, 0);
    CHECK(!bench_key(&B, 'r'));
    /* a question has the keys over it */
    B.ui.modal = KM_CONFIRM;
    CHECK(pane_table_keys_pane(&B.ui) == NULL);
    CHECK_INT(pane_table_mode(&B.ui), KM_CONFIRM);
    bench_done(&B);
}

int main(void)
{
    RUN(test_table_well_formed);
    RUN(test_one_kind_per_area);
    RUN(test_every_key_is_done);
    RUN(test_every_pane_reachable);
    RUN(test_focus_ring);
    RUN(test_keys_through_the_table);
    return tap_done();
}
