/* The NCCL part's verdicts (check_bench_nccl.h), against the median of the node pairs as the
 * rest of the bench is against its medians. The pairs are bisected as the TCP transfers are
 * (check_bench_attribute): a node whose pairs are slow while its peers' other pairs are not is
 * named; a slow pair of two nodes that are fine elsewhere is a slow link, said on both. The
 * world's figure says whether the job as a whole would be held back: below --bench-min-ratio x
 * the pairs' median with nobody named is a finding on every node. */
#include "check_bench_nccl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_bench_int.h"
#include "util/util.h"

static const char *const HINT_NCCL_SLOW = "NCCL's all-reduce with this node is slow while its peers are fast with "
                                          "others: check its NICs and their driver (ibstat, ip -s link), "
                                          "NCCL_SOCKET_IFNAME / NCCL_IB_HCA, its PCIe and NVLink (nvidia-smi topo -m); "
                                          "or leave the node out (--nnodes with spares does)";
static const char *const HINT_NCCL_LINK = "the path between these two nodes is slow for NCCL while both are fine "
                                          "elsewhere: check the switch ports and cables between them";
static const char *const HINT_NCCL_ERR = "run the training's NCCL set-up on this node with NCCL_DEBUG=INFO (its "
                                         "libnccl.so.2, its interfaces, NCCL_SOCKET_IFNAME), or drain the node";
static const char *const HINT_NCCL_NONE = "install NCCL (libnccl.so.2) and the GPU driver there like on the other "
                                          "nodes, or keep the node out of GPU jobs";
static const char *const HINT_NCCL_WORLD = "every pair is fast but the whole world is not: check the network's "
                                           "bisection (oversubscribed uplinks) and NCCL's topology (NCCL_DEBUG=INFO)";

struct check_bench_nccl_eval {
    const struct check_bench_nccl *nc;
    size_t n;
    double ratio, med;
    struct check_bench_xfer *px;   /* the pairs, as the bisection takes them: gbps is busbw */
    size_t np;
    double *fig;
    bool *slow, *took;
    bool named;                    /* a node or a pair was found slow */
};

struct check_bench_nccl_eval *check_bench_nccl_eval_new(const struct check_bench_nccl *nc, const bool *took,
                                                        double ratio)
{
    struct check_bench_nccl_eval *ev = xcalloc(1, sizeof *ev);
    size_t n = nc->n ? nc->n : 1;
    double *v;
    ev->nc = nc;
    ev->n = nc->n;
    ev->ratio = ratio;
    ev->fig = xcalloc(n, sizeof *ev->fig);
    ev->slow = xcalloc(n, sizeof *ev->slow);
    ev->took = xcalloc(n, sizeof *ev->took);
    ev->px = xcalloc(nc->nc ? nc->nc : 1, sizeof *ev->px);
    v = xcalloc(nc->nc ? nc->nc : 1, sizeof *v);
    size_t nv = 0;
    for (size_t i = 0; i < nc->n; i++) {
        ev->took[i] = nc->in[i] && took[i];
        ev->fig[i] = -1;
    }
    for (size_t k = 1; k < nc->nc; k++) {
        const struct nccl_comm *c = &nc->c[k];
        struct check_bench_xfer *x = &ev->px[ev->np++];
        *x = (struct check_bench_xfer){.src = c->node[0], .dst = c->node[1], .round = c->round, .gbps = c->busbw_gbs,
                                       .seconds = -1, .rtt_us = -1, .bytes = nc->bytes};
        if (c->busbw_gbs < 0) x->error = (char *)"failed";   /* not freed: a marker, the words are the comm's */
        else v[nv++] = c->busbw_gbs;
    }
    ev->med = check_bench_median(v, nv);
    free(v);
    struct check_bench_attr a = {.x = ev->px, .nx = ev->np, .n = ev->n, .took = ev->took, .ratio = ratio, .med = ev->med};
    check_bench_attribute(&a, ev->fig, ev->slow);
    for (size_t i = 0; i < ev->n; i++) ev->named = ev->named || ev->slow[i];
    for (size_t k = 0; k < ev->np; k++) {
        const struct check_bench_xfer *x = &ev->px[k];
        if (!x->error && ev->med > 0 && x->gbps < ratio * ev->med && !ev->slow[x->src] && !ev->slow[x->dst])
            ev->named = true;
    }
    return ev;
}

void check_bench_nccl_eval_free(struct check_bench_nccl_eval *ev)
{
    if (!ev) return;
    free(ev->fig);
    free(ev->slow);
    free(ev->took);
    free(ev->px);
    free(ev);
}

static const struct nccl_comm *world(const struct check_bench_nccl *nc)
{
    return nc->nc ? &nc->c[0] : NULL;
}

static size_t member(const struct nccl_comm *c, size_t i)
{
    for (size_t j = 0; j < c->nn; j++)
        if (c->node[j] == i) return j;
    return SIZE_MAX;
}

static bool any_own(const struct nccl_comm *c)
{
    for (size_t j = 0; j < c->nn; j++)
        if (c->own[j]) return true;
    return false;
}

/* The error a comm met, for words: the member's own first, else node i's. */
static const char *comm_error(const struct nccl_comm *c, size_t i)
{
    for (size_t j = 0; j < c->nn; j++)
        if (c->own[j] && c->error[j]) return c->error[j];
    size_t j = member(c, i);
    return j != SIZE_MAX && c->error[j] ? c->error[j] : "failed";
}

void check_bench_nccl_eval_node(const struct check_bench_nccl_eval *ev, size_t i, const char *const *names,
                                struct check_bench_verdict *v, cJSON *f)
{
    const struct check_bench_nccl *nc = ev->nc;
    const struct nccl_comm *w = world(nc);
    char a[32], b[32];
    if (nc->note[i]) check_bench_say(v, CHECK_WARN, HINT_NCCL_NONE, "%s", nc->note[i]);
    if (!ev->took[i] || !w) {
        cJSON_AddNullToObject(f, "nccl");
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(f, "nccl"), *pairs;
    size_t j = member(w, i), n_pairs = 0, n_ok = 0;
    const char *first_bad = NULL;
    size_t first_peer = 0;
    bool own_world = j != SIZE_MAX && w->own[j];
    cJSON_AddItemToObject(o, "busbw_gbs", check_bench_num(ev->fig[i]));
    cJSON_AddBoolToObject(o, "slow", ev->slow[i]);
    cJSON_AddItemToObject(o, "world_busbw_gbs", check_bench_num(w->busbw_gbs));
    if (j != SIZE_MAX && w->error[j]) cJSON_AddStringToObject(o, "world_error", w->error[j]);
    else cJSON_AddNullToObject(o, "world_error");
    pairs = cJSON_AddArrayToObject(o, "pairs");
    if (own_world)
        check_bench_say(v, CHECK_FAIL, HINT_NCCL_ERR, "NCCL all-reduce of the world failed here: %s", w->error[j]);
    for (size_t k = 1; k < nc->nc; k++) {
        const struct nccl_comm *c = &nc->c[k];
        size_t m = member(c, i);
        if (m == SIZE_MAX) continue;
        size_t peer = c->node[1 - m];
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "with", names[peer]);
        cJSON_AddItemToObject(p, "busbw_gbs", check_bench_num(c->busbw_gbs));
        if (c->busbw_gbs < 0) cJSON_AddStringToObject(p, "error", comm_error(c, i));
        else cJSON_AddNullToObject(p, "error");
        cJSON_AddItemToArray(pairs, p);
        n_pairs++;
        if (c->busbw_gbs >= 0) n_ok++;
        else if (!first_bad) {
            first_bad = comm_error(c, i);
            first_peer = peer;
        }
    }
    if (n_pairs && !n_ok && !own_world) {
        check_bench_say(v, CHECK_FAIL, HINT_NCCL_ERR, "no NCCL all-reduce with its peers completed (with %s: %s)",
                        names[first_peer], first_bad);
    } else if (ev->slow[i]) {
        check_bench_fmt(a, sizeof a, ev->fig[i]);
        check_bench_fmt(b, sizeof b, ev->med);
        check_bench_say(v, CHECK_FAIL, HINT_NCCL_SLOW, "NCCL all-reduce with its peers: busbw %s GB/s, median %s GB/s",
                        a, b);
    }
    for (size_t k = 1; k < nc->nc && n_ok; k++) {
        const struct nccl_comm *c = &nc->c[k];
        size_t m = member(c, i);
        if (m == SIZE_MAX) continue;
        size_t peer = c->node[1 - m];
        if (c->busbw_gbs < 0) {
            check_bench_say(v, CHECK_WARN, HINT_NCCL_ERR, "NCCL pair with %s failed: %s", names[peer], comm_error(c, i));
        } else if (!ev->slow[i] && !ev->slow[peer] && ev->med > 0 && c->busbw_gbs < ev->ratio * ev->med) {
            check_bench_fmt(a, sizeof a, c->busbw_gbs);
            check_bench_fmt(b, sizeof b, ev->med);
            check_bench_say(v, CHECK_WARN, HINT_NCCL_LINK, "slow NCCL pair %s-%s: busbw %s GB/s, median %s GB/s",
                            names[c->node[0]], names[c->node[1]], a, b);
        }
    }
    /* the world went wrong and nobody is named for it: said on every node of it */
    if (!own_world && !any_own(w) && j != SIZE_MAX && w->error[j] && !ev->named && n_ok)
        check_bench_say(v, CHECK_WARN, HINT_NCCL_ERR, "NCCL all-reduce of the world did not complete: %s", w->error[j]);
    if (w->busbw_gbs >= 0 && ev->med > 0 && w->busbw_gbs < ev->ratio * ev->med && !ev->named) {
        check_bench_fmt(a, sizeof a, w->busbw_gbs);
        check_bench_fmt(b, sizeof b, ev->med);
        check_bench_say(v, CHECK_WARN, HINT_NCCL_WORLD,
                        "NCCL all-reduce of the world: busbw %s GB/s, below %g x the pairs' median %s GB/s", a,
                        ev->ratio, b);
    }
}

void check_bench_nccl_eval_pass(const struct check_bench_nccl_eval *ev, size_t i, struct strbuf *sb)
{
    const struct check_bench_nccl *nc = ev->nc;
    const struct nccl_comm *w = world(nc);
    char a[32], b[32];
    if (nc->skipped && nc->gpus[i] > 0) {
        strbuf_addf(sb, "%sNCCL not measured: %s", sb->len ? "; " : "", nc->skipped);
        return;
    }
    if (!ev->took[i] || !w || w->busbw_gbs < 0) return;
    bool same = true;
    for (size_t j = 1; j < w->nn; j++) same = same && nc->gpus[w->node[j]] == nc->gpus[w->node[0]];
    check_bench_fmt(a, sizeof a, w->busbw_gbs);
    if (same) strbuf_addf(sb, "%sNCCL all-reduce %zu nodes x %d GPUs: busbw %s GB/s", sb->len ? "; " : "", w->nn,
                          nc->gpus[w->node[0]], a);
    else strbuf_addf(sb, "%sNCCL all-reduce %zu nodes, %d ranks: busbw %s GB/s", sb->len ? "; " : "", w->nn, w->ranks, a);
    if (ev->fig[i] >= 0) {
        check_bench_fmt(b, sizeof b, ev->fig[i]);
        strbuf_addf(sb, ", with its peers %s GB/s", b);
    }
}

cJSON *check_bench_nccl_eval_doc(const struct check_bench_nccl_eval *ev, const char *const *names)
{
    const struct check_bench_nccl *nc = ev->nc;
    const struct nccl_comm *w = world(nc);
    cJSON *doc = cJSON_CreateObject(), *pairs;
    cJSON_AddNumberToObject(doc, "bytes", nc->bytes);
    if (nc->skipped) cJSON_AddStringToObject(doc, "skipped", nc->skipped);
    else cJSON_AddNullToObject(doc, "skipped");
    if (w) {
        cJSON *o = cJSON_AddObjectToObject(doc, "world");
        const char *err = NULL;
        for (size_t j = 0; j < w->nn && !err; j++) err = w->own[j] ? w->error[j] : NULL;
        for (size_t j = 0; j < w->nn && !err; j++) err = w->error[j];
        cJSON_AddNumberToObject(o, "nodes", (double)w->nn);
        cJSON_AddNumberToObject(o, "ranks", w->ranks);
        cJSON_AddNumberToObject(o, "bytes", nc->bytes);
        cJSON_AddItemToObject(o, "algbw_gbs", check_bench_num(w->algbw_gbs));
        cJSON_AddItemToObject(o, "busbw_gbs", check_bench_num(w->busbw_gbs));
        if (err) cJSON_AddStringToObject(o, "error", err);
        else cJSON_AddNullToObject(o, "error");
    } else {
        cJSON_AddNullToObject(doc, "world");
    }
    pairs = cJSON_AddArrayToObject(doc, "pairs");
    for (size_t k = 1; k < nc->nc; k++) {
        const struct nccl_comm *c = &nc->c[k];
        const struct check_bench_xfer *x = &ev->px[k - 1];
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "a", names[c->node[0]]);
        cJSON_AddStringToObject(p, "b", names[c->node[1]]);
        cJSON_AddNumberToObject(p, "round", c->round);
        cJSON_AddItemToObject(p, "busbw_gbs", check_bench_num(c->busbw_gbs));
        cJSON_AddBoolToObject(p, "slow", !x->error && ev->med > 0 && x->gbps < ev->ratio * ev->med);
        if (c->busbw_gbs < 0) cJSON_AddStringToObject(p, "error", comm_error(c, c->node[0]));
        else cJSON_AddNullToObject(p, "error");
        cJSON_AddItemToArray(pairs, p);
    }
    cJSON_AddItemToObject(doc, "median_pair_busbw_gbs", check_bench_num(ev->med));
    return doc;
}
