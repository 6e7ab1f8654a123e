/* The tcp check's failures grouped by cause and by node sets (check_eval.h,
 * check_tcp_group): a node nobody reaches, a node that reaches nobody, two halves that do not
 * reach each other, and what is left pair by pair (at most TG_PAIRS_SHOWN named). Each finding is
 * one line of text that every node it concerns carries word for word, so a folded report
 * prints it once with the node set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_eval.h"
#include "hosts/hostlist.h"
#include "util/util.h"

#define TG_PAIRS_SHOWN 3     /* scattered failing pairs named in one finding */
#define TG_FINDINGS_SHOWN 3  /* findings named in one node's detail */
#define TG_SET_CHARS 200     /* a node set longer than this as text ends in "and N more" */

enum tg_cause { TG_UNKNOWN_HOST, TG_REFUSED, TG_NO_ROUTE, TG_NO_ANSWER, TG_WRONG_SERVICE, TG_OTHER, TG_CAUSES };

static const char *const cause_text[TG_CAUSES] = {
    "unknown host", "connection refused", "no route to host", "no answer", "wrong service", "failed",
};

static enum tg_cause cause_of(const struct check_tcp_result *t)
{
    const char *e = t->error ? t->error : "";
    if (!t->done || strncmp(e, "timed out", 9) == 0) return TG_NO_ANSWER;
    if (strncmp(e, "unknown host", 12) == 0) return TG_UNKNOWN_HOST;
    if (strcmp(e, "connection refused") == 0) return TG_REFUSED;
    if (strcmp(e, "no route to host") == 0) return TG_NO_ROUTE;
    if (strncmp(e, "wrong service", 13) == 0) return TG_WRONG_SERVICE;
    return TG_OTHER;
}

/* ---- node sets as text -------------------------------------------------------------------- */

/* Node set idx[0..k) (ascending node indexes) as a hostlist (hostlist_compress); bounded by
 * TG_SET_CHARS. */
static void tcp_add_set(struct strbuf *sb, const struct check_node_info *nodes, const size_t *idx, size_t k)
{
    const char **names = xcalloc(k ? k : 1, sizeof *names);
    for (size_t i = 0; i < k; i++) names[i] = nodes[idx[i]].name;
    char *set = hostlist_compress(names, k);
    size_t len = set ? strlen(set) : 0;
    if (len > TG_SET_CHARS) {
        size_t cut = TG_SET_CHARS;
        while (cut > 0 && set[cut] != ',') cut--;
        strbuf_addf(sb, "%.*s... (%zu nodes)", (int)cut, set, k);
    } else {
        strbuf_adds(sb, len ? set : "(none)");
    }
    free(set);
    free(names);
}

/* ---- findings ----------------------------------------------------------------------------- */

struct tg {
    const struct check_node_info *nodes;
    size_t n;
    const struct check_tcp_result *res;
    size_t n_res;
    enum check_status *st;
    struct strbuf *msg;
    size_t *shown, *more;    /* per node: findings in msg, findings left out */
    bool *handled;           /* per result: in a finding already */
};

/* Adds text to every node of set (FAIL) and of warn (WARN), each node once. */
static void tg_emit(struct tg *g, const char *text, const bool *fail, const bool *warn)
{
    for (size_t i = 0; i < g->n; i++) {
        enum check_status s = fail[i] ? CHECK_FAIL : warn[i] ? CHECK_WARN : CHECK_PASS;
        if (s == CHECK_PASS) continue;
        if (s > g->st[i]) g->st[i] = s;
        if (g->shown[i] >= TG_FINDINGS_SHOWN) {
            g->more[i]++;
            continue;
        }
        if (g->msg[i].len) strbuf_adds(&g->msg[i], "; ");
        strbuf_adds(&g->msg[i], text);
        g->shown[i]++;
    }
}

/* Ascending indexes of the nodes marked in mark; returns the count. */
static size_t tg_list(const struct tg *g, const bool *mark, size_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++)
        if (mark[i]) out[k++] = i;
    return k;
}

/* "CAUSE from S to T[:port]": the pairs of cause c chosen by pick, S their sources, T their
 * targets; blame_dst: the targets fail and the sources warn, else the other way round. */
static void tg_from_to(struct tg *g, enum tg_cause c, const bool *pick, bool rdv, bool blame_dst)
{
    bool *src = xcalloc(g->n, 1), *dst = xcalloc(g->n, 1);
    size_t *idx = xcalloc(g->n, sizeof *idx), ns, nd;
    const char *first_err = NULL;
    bool same_err = true;
    int port = -1;
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t k = 0; k < g->n_res; k++) {
        if (!pick[k]) continue;
        src[g->res[k].src] = dst[g->res[k].dst] = true;
        port = g->res[k].port;
        if (!first_err) first_err = g->res[k].error;
        else if (g->res[k].error && strcmp(first_err, g->res[k].error) != 0) same_err = false;
        g->handled[k] = true;
    }
    strbuf_adds(&sb, c >= TG_WRONG_SERVICE && first_err ? first_err : cause_text[c]);
    if (c >= TG_WRONG_SERVICE && !same_err) strbuf_adds(&sb, " (and other errors)");
    strbuf_adds(&sb, " from ");
    ns = tg_list(g, src, idx);
    tcp_add_set(&sb, g->nodes, idx, ns);
    strbuf_adds(&sb, " to ");
    nd = tg_list(g, dst, idx);
    tcp_add_set(&sb, g->nodes, idx, nd);
    if (nd == 1) strbuf_addf(&sb, ":%d", port);
    if (rdv) strbuf_adds(&sb, " (the rendezvous port)");
    /* a node on both sides (sources and targets) fails */
    if (blame_dst) {
        for (size_t i = 0; i < g->n; i++) src[i] = src[i] && !dst[i];
        tg_emit(g, sb.buf, dst, src);
    } else {
        for (size_t i = 0; i < g->n; i++) dst[i] = dst[i] && !src[i];
        tg_emit(g, sb.buf, src, dst);
    }
    strbuf_done(&sb);
    free(src);
    free(dst);
    free(idx);
}

/* The rendezvous probes of cause c: node 0 is blamed when most of them fail, else the sources. */
static void tg_rendezvous(struct tg *g)
{
    size_t total = 0, failed = 0;
    bool *pick = xcalloc(g->n_res ? g->n_res : 1, 1);
    for (size_t k = 0; k < g->n_res; k++) {
        if (!g->res[k].rendezvous) continue;
        total++;
        failed += !(g->res[k].done && g->res[k].ok);
    }
    for (int c = 0; c < TG_CAUSES; c++) {
        bool any = false;
        for (size_t k = 0; k < g->n_res; k++) {
            const struct check_tcp_result *t = &g->res[k];
            pick[k] = t->rendezvous && !(t->done && t->ok) && cause_of(t) == (enum tg_cause)c;
            any |= pick[k];
        }
        if (any) tg_from_to(g, (enum tg_cause)c, pick, true, failed >= 2 && failed * 2 > total);
    }
    free(pick);
}

static size_t uf_find(size_t *up, size_t x)
{
    while (up[x] != x) x = up[x] = up[up[x]];
    return x;
}

/* What no node-wide rule explained: failing pairs across two groups of nodes that reach each
 * other inside (a partition) become "CAUSE between A and B"; the rest are named pair by pair. */
static void tg_rest(struct tg *g)
{
    size_t *up = xcalloc(g->n, sizeof *up), *idx = xcalloc(g->n, sizeof *idx), *fails = xcalloc(g->n, sizeof *fails);
    bool *a = xcalloc(g->n, 1), *b = xcalloc(g->n, 1);
    for (size_t i = 0; i < g->n; i++) up[i] = i;
    for (size_t k = 0; k < g->n_res; k++) {
        const struct check_tcp_result *t = &g->res[k];
        if (t->done && t->ok) up[uf_find(up, t->src)] = uf_find(up, t->dst);
        else fails[t->src]++, fails[t->dst]++;
    }
    for (size_t k = 0; k < g->n_res; k++) {
        const struct check_tcp_result *t = &g->res[k];
        size_t ra, rb, na, nb;
        enum tg_cause c;
        struct strbuf sb;
        if (g->handled[k] || t->rendezvous || (t->done && t->ok)) continue;
        ra = uf_find(up, t->src);
        rb = uf_find(up, t->dst);
        c = cause_of(t);
        strbuf_init(&sb);
        if (ra != rb) {
            /* every failing pair of this cause between the same two groups, both directions */
            for (size_t q = k; q < g->n_res; q++) {
                const struct check_tcp_result *u = &g->res[q];
                size_t ua, ub;
                if (g->handled[q] || u->rendezvous || (u->done && u->ok) || cause_of(u) != c) continue;
                ua = uf_find(up, u->src);
                ub = uf_find(up, u->dst);
                if ((ua == ra && ub == rb) || (ua == rb && ub == ra)) g->handled[q] = true;
            }
            for (size_t i = 0; i < g->n; i++) {
                a[i] = uf_find(up, i) == ra;
                b[i] = uf_find(up, i) == rb;
            }
            /* the side with the first node first */
            na = tg_list(g, a, idx);
            nb = tg_list(g, b, idx + na);
            if (nb && idx[na] < idx[0]) {
                bool *sw = a;
                a = b;
                b = sw;
                na = tg_list(g, a, idx);
                nb = tg_list(g, b, idx + na);
            }
            strbuf_addf(&sb, "%s between ", cause_text[c]);
            tcp_add_set(&sb, g->nodes, idx, na);
            strbuf_adds(&sb, " and ");
            tcp_add_set(&sb, g->nodes, idx + na, nb);
            strbuf_adds(&sb, " (a partition: each side reaches itself, not the other)");
            for (size_t i = 0; i < g->n; i++) a[i] = a[i] || b[i];
            memset(b, 0, g->n);
            tg_emit(g, sb.buf, a, b);
        } else {
            /* scattered pairs of this cause: named (a few), each blamed on the end that fails
             * with more peers, as a node dropping traffic fails with everyone */
            size_t count = 0;
            memset(a, 0, g->n);
            memset(b, 0, g->n);
            for (size_t q = k; q < g->n_res; q++) {
                const struct check_tcp_result *u = &g->res[q];
                if (g->handled[q] || u->rendezvous || (u->done && u->ok) || cause_of(u) != c) continue;
                if (uf_find(up, u->src) != uf_find(up, u->dst)) continue;
                g->handled[q] = true;
                if (count++ < TG_PAIRS_SHOWN)
                    strbuf_addf(&sb, "%s%s -> %s:%d", count > 1 ? ", " : "", g->nodes[u->src].name,
                                g->nodes[u->dst].name, u->port);
                if (fails[u->src] >= fails[u->dst]) a[u->src] = true;
                else b[u->src] = true;
                if (fails[u->dst] >= fails[u->src]) a[u->dst] = true;
                else b[u->dst] = true;
            }
            {
                struct strbuf full;
                strbuf_init(&full);
                strbuf_addf(&full, "%s on %zu pair%s: %s", c >= TG_WRONG_SERVICE && t->error ? t->error : cause_text[c],
                            count, count == 1 ? "" : "s", sb.buf);
                if (count > TG_PAIRS_SHOWN) strbuf_addf(&full, " and %zu more (--json)", count - TG_PAIRS_SHOWN);
                for (size_t i = 0; i < g->n; i++) b[i] = b[i] && !a[i];
                tg_emit(g, full.buf, a, b);
                strbuf_done(&full);
            }
        }
        strbuf_done(&sb);
    }
    free(up);
    free(idx);
    free(fails);
    free(a);
    free(b);
}

/* Node-wide rules per cause: a node whose every probe in (at least 2) failed with that cause is
 * the one nobody reaches; a node whose every probe out failed is the one that reaches nobody. */
static void tg_nodes(struct tg *g)
{
    size_t *in = xcalloc(g->n, sizeof *in), *out = xcalloc(g->n, sizeof *out);
    size_t *in_c = xcalloc(g->n, sizeof *in_c), *out_c = xcalloc(g->n, sizeof *out_c);
    bool *pick = xcalloc(g->n_res ? g->n_res : 1, 1);
    for (size_t k = 0; k < g->n_res; k++) {
        if (g->res[k].rendezvous) continue;
        in[g->res[k].dst]++;
        out[g->res[k].src]++;
    }
    for (int dir = 0; dir < 2; dir++) {
        for (int c = 0; c < TG_CAUSES; c++) {
            bool any = false;
            memset(in_c, 0, g->n * sizeof *in_c);
            memset(out_c, 0, g->n * sizeof *out_c);
            for (size_t k = 0; k < g->n_res; k++) {
                const struct check_tcp_result *t = &g->res[k];
                if (t->rendezvous || (t->done && t->ok) || cause_of(t) != (enum tg_cause)c) continue;
                in_c[t->dst]++;
                out_c[t->src]++;
            }
            for (size_t k = 0; k < g->n_res; k++) {
                const struct check_tcp_result *t = &g->res[k];
                size_t me = dir == 0 ? t->dst : t->src;
                size_t all = dir == 0 ? in[me] : out[me], bad = dir == 0 ? in_c[me] : out_c[me];
                pick[k] = !g->handled[k] && !t->rendezvous && !(t->done && t->ok) &&
                          cause_of(t) == (enum tg_cause)c && all >= 2 && bad == all;
                any |= pick[k];
            }
            if (any) tg_from_to(g, (enum tg_cause)c, pick, false, dir == 0);
        }
    }
    free(in);
    free(out);
    free(in_c);
    free(out_c);
    free(pick);
}

void check_tcp_group(const struct check_node_info *nodes, size_t n, const struct check_tcp_result *res,
                     size_t n_res, enum check_status *st, struct strbuf *msg)
{
    struct tg g = {.nodes = nodes, .n = n, .res = res, .n_res = n_res, .st = st, .msg = msg};
    if (!n) return;
    g.shown = xcalloc(n, sizeof *g.shown);
    g.more = xcalloc(n, sizeof *g.more);
    g.handled = xcalloc(n_res ? n_res : 1, sizeof *g.handled);
    tg_nodes(&g);
    tg_rest(&g);
    tg_rendezvous(&g);
    for (size_t i = 0; i < n; i++)
        if (g.more[i]) strbuf_addf(&msg[i], "; and %zu more (--json)", g.more[i]);
    free(g.shown);
    free(g.more);
    free(g.handled);
}
