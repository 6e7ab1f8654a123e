/* The node view's NCCL columns (C, docs/dashboard.md and docs/nccl.md): one row per node of
 * the rank_view, what NCCL said on it (launcher/job/nccl.h): its version, the network in use
 * and its devices, the bootstrap interface and address, the transports its channels use, the
 * slowest rank's init time and its WARN count. A value that differs from the first reporting
 * node's (version, network, bootstrap interface) is drawn as a warning: the odd one out is
 * seen without reading the events. Only the rows on screen are summed up. */
#include <stdio.h>
#include <string.h>

#include "job/nccl.h"
#include "panes.h"

enum ccol { C_NODE, C_SEEN, C_VER, C_NET, C_BOOT, C_DEVS, C_TR, C_INIT, C_WARN, C_N };

static const struct { const char *title; int width, priority; bool right; } ccols[C_N] = {
    [C_NODE] = { "NODE", 12, 0, false },  [C_SEEN] = { "SEEN", 5, 5, true },
    [C_VER] = { "NCCL", 16, 1, false },   [C_NET] = { "NET", 7, 2, false },
    [C_BOOT] = { "BOOTSTRAP", 20, 3, false }, [C_DEVS] = { "DEVICES", 22, 7, false },
    [C_TR] = { "TRANSPORTS", 11, 6, false }, [C_INIT] = { "INIT", 6, 4, true },
    [C_WARN] = { "WARN", 4, 2, true },
};

static void choose(int width, bool shown[C_N])
{
    int used = 0;
    for (int i = 0; i < C_N; i++) shown[i] = false;
    for (int prio = 0; prio < C_N; prio++)
        for (int i = 0; i < C_N; i++)
            if (ccols[i].priority == prio && used + ccols[i].width + 1 <= width) {
                shown[i] = true;
                used += ccols[i].width + 1;
            }
}

/* The first node that said anything: what the others are compared with. */
static bool reference(const struct job *j, struct nccl_node_sum *ref)
{
    for (size_t i = 0; i < j->n_nodes; i++) {
        nccl_node_sum(j, i, ref);
        if (ref->ranks_seen) return true;
    }
    return false;
}

/* "eth0:10.0.0.1<0>" -> "eth0" */
static void iface_of(const char *boot, char *out, size_t n)
{
    size_t k = strcspn(boot, ":");
    snprintf(out, n, "%.*s", (int)k, boot);
}

static void cell(const struct job *j, int node, const struct nccl_node_sum *s, enum ccol c, char *buf, size_t n)
{
    const struct node_info *nd = &j->nodes[node];
    snprintf(buf, n, "-");
    switch (c) {
    case C_NODE: snprintf(buf, n, "%s", nd->name ? nd->name : "?"); break;
    case C_SEEN: snprintf(buf, n, "%d/%d", s->ranks_seen, nd->n_ranks); break;
    case C_VER: if (s->version[0]) snprintf(buf, n, "%s", s->version); break;
    case C_NET: if (s->net[0]) snprintf(buf, n, "%s", s->net); break;
    case C_BOOT: if (s->boot[0]) snprintf(buf, n, "%s", s->boot); break;
    case C_DEVS: if (s->devs[0]) snprintf(buf, n, "%s", s->devs); break;
    case C_TR: if (s->transports[0]) snprintf(buf, n, "%s", s->transports); break;
    case C_INIT: if (s->init_s >= 0) snprintf(buf, n, "%.2fs", s->init_s); break;
    case C_WARN: if (s->ranks_seen) snprintf(buf, n, "%u", s->warns); break;
    case C_N: break;
    }
}

static bool odd(const struct nccl_node_sum *s, const struct nccl_node_sum *ref, enum ccol c)
{
    char a[40], b[40];
    if (!s->ranks_seen) return false;
    switch (c) {
    case C_VER: return s->version[0] && strcmp(s->version, ref->version) != 0;
    case C_NET: return s->net[0] && strcmp(s->net, ref->net) != 0;
    case C_BOOT:
        iface_of(s->boot, a, sizeof a);
        iface_of(ref->boot, b, sizeof b);
        return a[0] && strcmp(a, b) != 0;
    case C_WARN: return s->warns > 0;
    default: return false;
    }
}

void pane_nodes_nccl_draw(WINDOW *w, const struct job *j, const struct ui_state *ui,
                          const struct rank_view *v, const struct paint *p)
{
    int h = getmaxy(w), wd = getmaxx(w);
    werase(w);
    struct nccl_node_sum ref;
    bool any = reference(j, &ref);
    char title[200];
    snprintf(title, sizeof title, " Nodes %zu: NCCL%s  C: node columns, Enter: its ranks", j->n_nodes,
             any ? "" : " (no NCCL lines yet: NCCL_DEBUG=INFO prints them)");
    pane_title(w, p, title, ui->focus == AREA_RANKS);
    bool shown[C_N];
    choose(wd, shown);
    int x = 0;
    wmove(w, 1, 0);
    for (int c = 0; c < C_N; c++)
        if (shown[c])
            x = pane_cell(w, p, x, wd, ccols[c].title, ccols[c].width, ccols[c].right,
                          p->role[ROLE_DIM] | A_BOLD, p->role[ROLE_DIM]);
    char txt[200];
    for (int row = 0; row < h - 2; row++) {
        int at = ui->nodes_top + row;
        if (at < 0 || (size_t)at >= v->n_nodes_shown) break;
        int node = v->nodes[at];
        struct nccl_node_sum s;
        nccl_node_sum(j, (size_t)node, &s);
        bool sel = node == ui->node_selected;
        attr_t rowa = sel ? p->role[ROLE_SELECTION] : p->role[ROLE_NORMAL];
        pane_row_begin(w, 2 + row, wd, sel, rowa);
        x = 0;
        for (int c = 0; c < C_N; c++) {
            if (!shown[c]) continue;
            cell(j, node, &s, (enum ccol)c, txt, sizeof txt);
            attr_t a = odd(&s, &ref, (enum ccol)c) ? p->role[ROLE_WARN] | A_BOLD : rowa;
            x = pane_cell(w, p, x, wd, txt, ccols[c].width, ccols[c].right, a, rowa);
        }
    }
}
