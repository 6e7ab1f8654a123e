/* The ranks pane's order and filters, and a node row's aggregates (rank_view.h). */
#include "rank_view.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/gpu.h"
#include "job/job_state.h"
#include "util/util.h"

static bool gpu_troubled(const struct gpu_info *g)
{
    return g && ((g->has_throttle && (g->throttle & GPU_THR_PROBLEMS)) || (g->has_ecc && g->ecc > 0));
}

enum rank_attn rank_attn_class(const struct job *j, const struct rank_info *r)
{
    if (job_rank_unknown(j, r)) return ATTN_UNKNOWN;
    switch (r->state) {
    case RANK_FAILED: return ATTN_FAILED;
    case RANK_LOST: return ATTN_LOST;
    case RANK_STALLED: return ATTN_STALLED;
    case RANK_RUNNING:
        if (r->straggler) return ATTN_STRAGGLER;
        if (r->gpu >= 0 && gpu_troubled(job_rank_gpu(j, r->rank))) return ATTN_THROTTLE;
        return ATTN_REST;
    default: return ATTN_REST;
    }
}

bool rank_filter_match(enum rank_filter f, enum rank_attn c, const struct rank_info *r)
{
    switch (f) {
    case RF_ALL: return true;
    case RF_ATTENTION: return c != ATTN_REST;
    case RF_FAILED: return c == ATTN_FAILED || c == ATTN_LOST;
    case RF_STALLED: return c == ATTN_STALLED;
    case RF_STRAGGLER: return c == ATTN_STRAGGLER;
    case RF_UNKNOWN: return c == ATTN_UNKNOWN;
    case RF_THROTTLE: return c == ATTN_THROTTLE;
    case RF_RUNNING: return c == ATTN_REST && r->state == RANK_RUNNING;
    case RF_ENDED: return c == ATTN_REST && (r->state == RANK_EXITED || r->state == RANK_STOPPED);
    case RF_COUNT: break;
    }
    return true;
}

const char *rank_filter_name(enum rank_filter f)
{
    static const char *const names[RF_COUNT] = {
        [RF_ALL] = "all", [RF_ATTENTION] = "attention", [RF_FAILED] = "failed",
        [RF_STALLED] = "stalled", [RF_STRAGGLER] = "stragglers", [RF_UNKNOWN] = "unknown",
        [RF_THROTTLE] = "throttling", [RF_RUNNING] = "running", [RF_ENDED] = "ended",
    };
    return (unsigned)f < RF_COUNT ? names[f] : "?";
}

bool rank_view_host_match(const char *pattern, const char *name)
{
    if (!pattern || !*pattern) return true;
    if (!name) return false;
    if (strpbrk(pattern, "*?[")) return fnmatch(pattern, name, 0) == 0;
    return strstr(name, pattern) != NULL;
}

void rank_view_init(struct rank_view *v)
{
    memset(v, 0, sizeof *v);
}

void rank_view_done(struct rank_view *v)
{
    free(v->idx);
    free(v->pos);
    free(v->nodes);
    free(v->node_pos);
    memset(v, 0, sizeof *v);
}

int rank_view_pos(const struct rank_view *v, int rank)
{
    if (rank < 0 || (size_t)rank >= v->cap || !v->pos) return -1;
    return v->pos[rank];
}

static bool same_opts(const struct rank_view *v, const struct job *j, const struct rank_view_opts *o)
{
    const char *h = o->host ? o->host : "";
    return v->valid && v->job == j && v->gen == j->generation && v->opts.order == o->order &&
           v->opts.filter == o->filter && v->opts.node == o->node && v->opts.rows == o->rows &&
           v->opts.grid == o->grid && strcmp(v->host, h) == 0;
}

/* Counting sort of the kept items by class; within a class they stay in index order. */
static void place(int *out, int *pos_of, const unsigned char *cls, size_t n, bool by_class)
{
    size_t start[ATTN_COUNT + 1] = { 0 };
    for (size_t i = 0; i < n; i++)
        if (cls[i] != 0xff) start[by_class ? cls[i] + 1 : 1]++;
    for (int c = 0; c < ATTN_COUNT; c++) start[c + 1] += start[c];
    for (size_t i = 0; i < n; i++) {
        if (cls[i] == 0xff) { pos_of[i] = -1; continue; }
        size_t p = start[by_class ? cls[i] : 0]++;
        out[p] = (int)i;
        pos_of[i] = (int)p;
    }
}

void rank_view_update(struct rank_view *v, const struct job *j, const struct rank_view_opts *o)
{
    if (same_opts(v, j, o)) return;
    if (v->cap < j->n_ranks || !v->idx) {
        v->cap = j->n_ranks ? j->n_ranks : 1;
        v->idx = xrealloc(v->idx, v->cap * sizeof *v->idx);
        v->pos = xrealloc(v->pos, v->cap * sizeof *v->pos);
    }
    if (v->nodes_cap < j->n_nodes || !v->nodes) {
        v->nodes_cap = j->n_nodes ? j->n_nodes : 1;
        v->nodes = xrealloc(v->nodes, v->nodes_cap * sizeof *v->nodes);
        v->node_pos = xrealloc(v->node_pos, v->nodes_cap * sizeof *v->node_pos);
    }
    /* classes: one pass over the ranks; 0xff marks one filtered out */
    unsigned char *cls = xmalloc((j->n_ranks ? j->n_ranks : 1) + (j->n_nodes ? j->n_nodes : 1));
    unsigned char *ncls = cls + (j->n_ranks ? j->n_ranks : 1);
    size_t shown = 0;
    for (size_t i = 0; i < j->n_nodes; i++) {
        bool host_ok = rank_view_host_match(o->host, j->nodes[i].name) &&
                       (o->node < 0 || (size_t)o->node == i);
        ncls[i] = host_ok ? ATTN_REST : 0xff;
        if (host_ok && o->filter == RF_ALL) {
            /* a node's link and state count even before its ranks say anything */
            enum node_state s = j->nodes[i].state;
            if (s == NODE_LOST || s == NODE_FAILED) ncls[i] = ATTN_LOST;
            else if (j->nodes[i].link != LINK_UP) ncls[i] = ATTN_UNKNOWN;
        } else if (host_ok) {
            ncls[i] = 0xfe;        /* shown only if one of its ranks passes the filter */
        }
    }
    for (size_t i = 0; i < j->n_ranks; i++) {
        const struct rank_info *r = &j->ranks[i];
        size_t nd = (size_t)r->node;
        if (nd >= j->n_nodes || ncls[nd] == 0xff) { cls[i] = 0xff; continue; }
        enum rank_attn c = rank_attn_class(j, r);
        if (!rank_filter_match(o->filter, c, r)) { cls[i] = 0xff; continue; }
        cls[i] = (unsigned char)c;
        if (ncls[nd] == 0xfe || c < ncls[nd]) ncls[nd] = (unsigned char)c;
        shown++;
    }
    for (size_t i = 0; i < j->n_nodes; i++)
        if (ncls[i] == 0xfe) ncls[i] = 0xff;
    v->attention = o->order == ORDER_ATTENTION ||
                   (o->order == ORDER_AUTO && !o->grid && shown > (size_t)(o->rows > 0 ? o->rows : 0));
    place(v->idx, v->pos, cls, j->n_ranks, v->attention);
    for (size_t i = j->n_ranks; i < v->cap; i++) v->pos[i] = -1;
    v->n = shown;
    place(v->nodes, v->node_pos, ncls, j->n_nodes, v->attention);
    v->n_nodes_shown = 0;
    for (size_t i = 0; i < j->n_nodes; i++)
        if (ncls[i] != 0xff) v->n_nodes_shown++;
    free(cls);
    v->job = j;
    v->gen = j->generation;
    v->opts = *o;
    snprintf(v->host, sizeof v->host, "%s", o->host ? o->host : "");
    v->opts.host = v->host;
    v->valid = true;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void node_summarize(const struct job *j, size_t node, struct node_summary *s)
{
    memset(s, 0, sizeof *s);
    s->worst = ATTN_REST;
    s->loss_median = NAN;
    s->gpu_util = s->mem_used_mib = s->mem_total_mib = s->temp_max = NAN;
    if (node >= j->n_nodes) return;
    const struct node_info *nd = &j->nodes[node];
    int n = nd->n_ranks > 0 ? nd->n_ranks : 0;
    long *steps = xmalloc((size_t)(n ? n : 1) * sizeof *steps);
    double *losses = xmalloc((size_t)(n ? n : 1) * sizeof *losses);
    int ns = 0, nl = 0;
    for (int k = 0; k < n; k++) {
        size_t ri = (size_t)(nd->first_rank + k);
        if (ri >= j->n_ranks) break;
        const struct rank_info *r = &j->ranks[ri];
        enum rank_attn c = rank_attn_class(j, r);
        s->counts[c]++;
        if ((int)c < s->worst) s->worst = (int)c;
        if (c == ATTN_REST) {
            if (r->state == RANK_RUNNING) s->n_running++;
            else if (r->state == RANK_EXITED) s->n_exited++;
            else if (r->state == RANK_PENDING) s->n_pending++;
            else s->n_stopped++;
        }
        if (r->has_step) steps[ns++] = r->step;
        if (r->has_loss && isfinite(r->loss)) losses[nl++] = r->loss;   /* not a NaN rank's inf */
    }
    if (ns) {
        qsort(steps, (size_t)ns, sizeof *steps, cmp_long);
        s->has_step = true;
        s->step_min = steps[0];
        s->step_median = steps[(ns - 1) / 2];   /* the lower median: a step some rank reached */
    }
    if (nl) {
        qsort(losses, (size_t)nl, sizeof *losses, cmp_double);
        s->has_loss = true;
        s->loss_median = nl % 2 ? losses[nl / 2] : (losses[nl / 2 - 1] + losses[nl / 2]) / 2;
    }
    free(steps);
    free(losses);
    if (nd->state == NODE_LOST || nd->state == NODE_FAILED) {
        if (s->worst > ATTN_LOST) s->worst = ATTN_LOST;
    } else if (nd->link != LINK_UP && s->worst > ATTN_UNKNOWN) {
        s->worst = ATTN_UNKNOWN;
    }
    const struct node_gpus *ng = &nd->gpus;
    if (!ng->seen || ng->n <= 0) return;
    s->n_gpus = ng->n;
    double util = 0, used = 0, total = 0, temp = -INFINITY;
    int nu = 0, nm = 0, nt = 0;
    for (int g = 0; g < ng->n; g++) {
        const struct gpu_info *gi = &ng->g[g];
        if (!isnan(gi->util)) { util += gi->util; nu++; }
        if (!isnan(gi->mem_used_mib) && !isnan(gi->mem_total_mib)) {
            used += gi->mem_used_mib;
            total += gi->mem_total_mib;
            nm++;
        }
        if (!isnan(gi->temp_c)) { if (gi->temp_c > temp) temp = gi->temp_c; nt++; }
        if (gi->has_throttle && (gi->throttle & GPU_THR_PROBLEMS)) s->throttling++;
        if (gi->has_ecc && gi->ecc > 0) s->ecc++;
    }
    if (nu) s->gpu_util = util / nu;
    if (nm) { s->mem_used_mib = used; s->mem_total_mib = total; }
    if (nt) s->temp_max = temp;
}
