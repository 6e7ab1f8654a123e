/* The odd ones out among the ranks' NCCL accounts (nccl.h; docs/nccl.md "Odd ones out"), as
 * lines for people: NCCL versions that differ, networks that differ (IB on some nodes, Socket
 * on others), a bootstrap interface other than the rest's or than the preflight expected, IB
 * ports on a node whose NCCL is on Socket, and the WARN groups (nccl_warn.c; an IB completion
 * error names the pair of nodes). Nodes are folded into hostlists (n[1-3]), ranks into ranges.
 * Pure: it finds and words them; nccl_tick.c says them as events, nccl_json.c writes them into
 * nccl.json, ddptop logs --nccl prints them. */
#include "nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "hosts/hostlist.h"
#include "util/util.h"

/* ---- folding ----------------------------------------------------------------------------- */

/* "n[1-3]" for the nodes whose flag is set. */
static char *fold_nodes(const struct job *j, const bool *on)
{
    const char **names = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *names);
    size_t k = 0;
    for (size_t i = 0; i < j->n_nodes; i++)
        if (on[i]) names[k++] = j->nodes[i].name;
    char *s = hostlist_compress(names, k);
    free(names);
    return s;
}

/* "0-5,8" for the ranks whose flag is set, bounded. */
static void fold_ranks(const bool *on, size_t n, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!on[i]) continue;
        size_t e = i;
        while (e + 1 < n && on[e + 1]) e++;
        int w = e > i ? snprintf(buf + k, cap - k, "%s%zu-%zu", k ? "," : "", i, e)
                      : snprintf(buf + k, cap - k, "%s%zu", k ? "," : "", i);
        if (w < 0 || (size_t)w >= cap - k) {
            if (cap > 4) snprintf(buf + (k < cap - 4 ? k : cap - 4), 4, "...");
            return;
        }
        k += (size_t)w;
        i = e;
    }
}

/* ---- what differs ------------------------------------------------------------------------ */

/* The value a rank has for one fact ("" unknown). */
typedef const char *(*fact_fn)(const struct job *j, size_t rank);

static const char *fact_version(const struct job *j, size_t r) { return j->nccl->r[r].version; }
static const char *fact_net(const struct job *j, size_t r) { return j->nccl->r[r].net; }
static const char *fact_boot(const struct job *j, size_t r) { return j->nccl->r[r].boot_if; }

#define VALUES_MAX 8

/* FNV-1a: a finding's key, so that each is said once however its ranks grow. */
static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Groups the ranks by fact: up to VALUES_MAX distinct values (the rest ignored), each with the
 * ranks that have it and their nodes; "V on NODES (ranks R)" joined by ", " into out. Returns
 * the count of distinct values; *key: the set of values (whatever their order); node_odd[i]:
 * node i has a value other than the commonest. */
static size_t fact_groups(const struct job *j, fact_fn f, char *out, size_t cap, uint32_t *key, bool *node_odd)
{
    const char *vals[VALUES_MAX];
    size_t nv = 0, count[VALUES_MAX] = {0};
    size_t nr = j->n_ranks;
    bool *ranks = xcalloc(nr ? nr : 1, sizeof *ranks), *nodes = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *nodes);
    for (size_t r = 0; r < nr; r++) {
        const char *v = f(j, r);
        if (!v[0]) continue;
        size_t k = 0;
        while (k < nv && strcmp(vals[k], v) != 0) k++;
        if (k == nv && nv < VALUES_MAX) vals[nv++] = v;
        if (k < nv) count[k]++;
    }
    size_t best = 0;
    *key = 0;
    for (size_t k = 0; k < nv; k++) {
        if (count[k] > count[best]) best = k;
        *key += fnv(vals[k]);
    }
    out[0] = '\0';
    size_t used = 0;
    for (size_t k = 0; k < nv && nv > 1; k++) {
        memset(ranks, 0, (nr ? nr : 1) * sizeof *ranks);
        memset(nodes, 0, (j->n_nodes ? j->n_nodes : 1) * sizeof *nodes);
        for (size_t r = 0; r < nr; r++) {
            if (strcmp(f(j, r), vals[k]) != 0) continue;
            ranks[r] = true;
            int nd = j->ranks[r].node;
            if (nd >= 0 && (size_t)nd < j->n_nodes && !nodes[nd]) {
                nodes[nd] = true;
                if (k != best) node_odd[nd] = true;
            }
        }
        char rl[96];
        fold_ranks(ranks, nr, rl, sizeof rl);
        char *hl = fold_nodes(j, nodes);
        int w = snprintf(out + used, cap - used, "%s%s on %s (rank%s %s)", k ? ", " : "", vals[k], hl,
                         strpbrk(rl, ",-") ? "s" : "", rl);
        free(hl);
        if (w > 0) used = (size_t)w < cap - used ? used + (size_t)w : cap - 1;
    }
    free(ranks);
    free(nodes);
    return nv;
}

/* A finding goes to out(ctx, node, key, line) (nccl_finding_fn in nccl.h). */
typedef nccl_finding_fn out_fn;

static int single(const struct job *j, const bool *odd)
{
    int one = -1;
    for (size_t i = 0; i < j->n_nodes; i++) {
        if (!odd[i]) continue;
        if (one >= 0) return -1;
        one = (int)i;
    }
    return one;
}

static size_t differ(const struct job *j, fact_fn f, const char *what, out_fn out, void *ctx)
{
    char buf[900];
    bool *odd = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *odd);
    uint32_t key;
    size_t nv = fact_groups(j, f, buf, sizeof buf, &key, odd);
    size_t said = 0;
    if (nv > 1) {
        char *line = xasprintf("%s differ: %s", what, buf);
        out(ctx, single(j, odd), fnv(what) ^ key, line);
        free(line);
        said = 1;
    }
    free(odd);
    return said;
}

/* Does the comma list hold name? */
static bool in_list(const char *list, const char *name)
{
    size_t l = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == l && memcmp(p, name, l) == 0) return true;
        p = c ? c + 1 : NULL;
    }
    return false;
}

/* The rank of node i that said anything first, or NULL. */
static const struct nccl_rank *node_rank(const struct job *j, size_t i)
{
    const struct nccl_job *n = j->nccl;
    const struct node_info *ni = &j->nodes[i];
    for (int k = 0; k < ni->n_ranks; k++) {
        size_t rk = (size_t)(ni->first_rank + k);
        if (rk < n->n_ranks && n->r[rk].seen) return &n->r[rk];
    }
    return NULL;
}

/* The preflight's expectations against what NCCL chose, node by node, said once per kind and
 * value (a thousand nodes on the wrong interface are one line, folded): key(i) gives node i's
 * key (false: nothing to say of it), words() the line for a key and its nodes. */
typedef bool (*key_fn)(const struct job *j, size_t i, char *key, size_t cap);
typedef void (*words_fn)(const char *key, const char *nodes, char *line, size_t cap);

static bool key_iface(const struct job *j, size_t i, char *key, size_t cap)
{
    const struct nccl_rank *r = node_rank(j, i);
    const char *want = j->nccl->expect_ifs[i];
    if (!r || !r->boot_if[0] || !want || in_list(want, r->boot_if)) return false;
    snprintf(key, cap, "%s\t%s", r->boot_if, want);
    return true;
}

static void words_iface(const char *key, const char *nodes, char *line, size_t cap)
{
    const char *tab = strchr(key, '\t');   /* there: the interface is at most 31 bytes */
    if (!tab) tab = key + strlen(key);
    snprintf(line, cap, "NCCL bootstraps over %.*s on %s, not what the preflight expected there (%s): "
             "check NCCL_SOCKET_IFNAME", (int)(tab - key), key, nodes, *tab ? tab + 1 : "?");
}

static bool key_ib(const struct job *j, size_t i, char *key, size_t cap)
{
    const struct nccl_rank *r = node_rank(j, i);
    if (!r || strcmp(r->net, "Socket") != 0 || j->nccl->expect_ib[i] <= 0) return false;
    snprintf(key, cap, "ib");
    return true;
}

static void words_ib(const char *key, const char *nodes, char *line, size_t cap)
{
    (void)key;
    snprintf(line, cap, "NCCL uses Socket on %s though the preflight saw active IB ports there: check "
             "NCCL_IB_DISABLE, NCCL_IB_HCA and the IB libraries (libibverbs)", nodes);
}

static size_t against(const struct job *j, const char *kind, key_fn key, words_fn words, out_fn out, void *ctx)
{
    size_t nn = j->n_nodes < j->nccl->n_nodes ? j->n_nodes : j->nccl->n_nodes;
    char keys[VALUES_MAX][160];
    size_t nk = 0, said = 0;
    for (size_t i = 0; i < nn; i++) {
        char k[160];
        if (!key(j, i, k, sizeof k)) continue;
        size_t at = 0;
        while (at < nk && strcmp(keys[at], k) != 0) at++;
        if (at == nk && nk < VALUES_MAX) memcpy(keys[nk++], k, sizeof k);
    }
    bool *on = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *on);
    for (size_t v = 0; v < nk; v++) {
        for (size_t i = 0; i < nn; i++) {
            char k[160];
            on[i] = key(j, i, k, sizeof k) && strcmp(k, keys[v]) == 0;
        }
        char *hl = fold_nodes(j, on), line[600];
        words(keys[v], hl, line, sizeof line);
        out(ctx, single(j, on), fnv(kind) ^ fnv(keys[v]), line);
        free(hl);
        said++;
    }
    free(on);
    return said;
}

/* ---- WARN groups (nccl_warn.c gathers them) ------------------------------------------------ */

/* The node whose address addr ("10.0.0.2<44455>" or "10.0.0.2") is: a rank's bootstrap or
 * NET address seen this attempt, or a node's hostfile name; -1 unknown. */
static int node_of_addr(const struct job *j, const char *addr, size_t len)
{
    const char *lt = memchr(addr, '<', len);
    char a[64];
    size_t al = lt ? (size_t)(lt - addr) : len;
    if (!al || al >= sizeof a) return -1;
    memcpy(a, addr, al);
    a[al] = '\0';
    const struct nccl_job *n = j->nccl;
    for (size_t r = 0; r < n->n_ranks && r < j->n_ranks; r++) {
        const char *cands[3] = { n->r[r].boot_addr, n->r[r].oob, n->r[r].net_devs };
        for (int c = 0; c < 3; c++) {
            for (const char *q = cands[c]; (q = strstr(q, a)) != NULL; q++)
                if ((q[al] == '<' || q[al] == '\0' || q[al] == ' ') &&
                    (q == cands[c] || q[-1] == ':' || q[-1] == ' '))
                    return j->ranks[r].node;
        }
    }
    for (size_t i = 0; i < j->n_nodes; i++)
        if (j->nodes[i].name && strcmp(j->nodes[i].name, a) == 0) return (int)i;
    return -1;
}

void nccl_warn_line(const struct job *j, const struct nccl_warn_group *g, out_fn out, void *ctx)
{
    char rl[96];
    fold_ranks(g->ranks, j->n_ranks, rl, sizeof rl);
    char *hl = fold_nodes(j, g->nodes);
    bool any_peer = false, *peers = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *peers);
    for (size_t k = 0; k < sizeof g->peers / sizeof *g->peers && g->peers[k][0]; k++) {
        int nd = node_of_addr(j, g->peers[k], strlen(g->peers[k]));
        if (nd >= 0) any_peer = peers[nd] = true;
    }
    char *pl = any_peer ? fold_nodes(j, peers) : NULL;
    free(peers);
    char *line = xasprintf("NCCL WARN %u time%s on %s (rank%s %s)%s%s: %s", g->count, g->count == 1 ? "" : "s",
                           hl, strpbrk(rl, ",-") ? "s" : "", rl, pl ? ", with peer " : "", pl ? pl : "", g->example);
    out(ctx, single(j, g->nodes), 0, line);
    free(line);
    free(hl);
    free(pl);
}

/* ---- saying them ------------------------------------------------------------------------- */

size_t nccl_odd_ones(const struct job *j, out_fn out, void *ctx)
{
    size_t n = differ(j, fact_version, "NCCL versions", out, ctx);
    n += differ(j, fact_net, "NCCL networks", out, ctx);
    n += differ(j, fact_boot, "NCCL bootstrap interfaces", out, ctx);
    n += against(j, "iface", key_iface, words_iface, out, ctx);
    n += against(j, "ib", key_ib, words_ib, out, ctx);
    return n;
}

struct findings_out {
    void (*out)(void *ctx, int node, const char *line);
    void *ctx;
};

static void findings_one(void *ctx, int node, uint32_t key, const char *line)
{
    struct findings_out *f = ctx;
    (void)key;
    f->out(f->ctx, node, line);
}

size_t nccl_findings(const struct job *j, void (*out)(void *ctx, int node, const char *line), void *ctx)
{
    if (!j->nccl || !j->nccl->r || j->nccl->attempt != j->attempt) return 0;
    struct findings_out f = { out, ctx };
    size_t n = nccl_odd_ones(j, findings_one, &f);
    for (size_t i = 0; i < j->nccl->n_warn; i++, n++) nccl_warn_line(j, &j->nccl->warn[i], findings_one, &f);
    return n;
}
