/* NCCL's debug lines (nccl.h): which lines are NCCL's, and what each rank's lines say. The
 * formats are NCCL's own (NVIDIA/nccl, tags v2.18.3-1 .. v2.26.2-1; docs/nccl.md lists them):
 * a line NCCL does not print the way we read it is left alone, never guessed at. */
#include "nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "util/util.h"

/* ---- the model's life -------------------------------------------------------------------- */

static void warn_group_free(struct nccl_warn_group *g)
{
    free(g->nodes);
    free(g->ranks);
    memset(g, 0, sizeof *g);
}

static void account_clear(struct nccl_job *n)
{
    for (size_t i = 0; i < n->n_warn; i++) warn_group_free(&n->warn[i]);
    n->n_warn = 0;
    n->warn_dropped = 0;
    memset(n->r, 0, (n->n_ranks ? n->n_ranks : 1) * sizeof *n->r);
    for (size_t i = 0; i < n->n_ranks; i++) n->r[i].init_total_s = -1;
    n->first_net_ms = 0;
    n->decided = n->late = false;
    n->n_said = 0;
    n->dirty = false;
}

struct nccl_job *nccl_get(struct job *j)
{
    struct nccl_job *n = j->nccl;
    if (!n) {
        n = j->nccl = xcalloc(1, sizeof *n);
        j->nccl_free = nccl_free;
        n->attempt = j->attempt;
    }
    if (n->n_nodes != j->n_nodes) {   /* the nodes are fixed for a job; made once */
        n->expect_ifs = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *n->expect_ifs);
        n->expect_ib = xcalloc(j->n_nodes ? j->n_nodes : 1, sizeof *n->expect_ib);
        for (size_t i = 0; i < j->n_nodes; i++) n->expect_ib[i] = -1;
        n->n_nodes = j->n_nodes;
    }
    if (n->n_ranks != j->n_ranks || !n->r) {   /* --nnodes changed the world: a new attempt */
        for (size_t i = 0; i < n->n_warn; i++) warn_group_free(&n->warn[i]);
        n->n_warn = 0;
        free(n->r);
        n->n_ranks = j->n_ranks;
        n->r = xcalloc(n->n_ranks ? n->n_ranks : 1, sizeof *n->r);
        account_clear(n);
    }
    if (n->attempt != j->attempt) {
        account_clear(n);
        n->attempt = j->attempt;
    }
    return n;
}

void nccl_free(struct nccl_job *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->n_warn; i++) warn_group_free(&n->warn[i]);
    for (size_t i = 0; i < n->n_nodes; i++) free(n->expect_ifs[i]);
    free(n->expect_ifs);
    free(n->expect_ib);
    free(n->r);
    free(n);
}

void nccl_expect(struct job *j, size_t node, const char *ifaces, int ib_ports)
{
    struct nccl_job *n = nccl_get(j);
    if (node >= n->n_nodes) return;
    free(n->expect_ifs[node]);
    n->expect_ifs[node] = ifaces && *ifaces ? xstrndup(ifaces, strnlen(ifaces, 256)) : NULL;
    n->expect_ib[node] = ib_ports;
}

/* ---- reading one line -------------------------------------------------------------------- */

/* dst = src[0..len) cut to the room and stripped of control bytes (a node's bytes never reach
 * a terminal raw). */
static void put(char *dst, size_t cap, const char *src, size_t len)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < cap; i++)
        dst[k++] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? '?' : src[i];
    dst[k] = '\0';
}

static bool starts(const char *m, size_t len, const char *lit)
{
    size_t l = strlen(lit);
    return len >= l && memcmp(m, lit, l) == 0;
}

static bool ends(const char *m, size_t len, const char *lit)
{
    size_t l = strlen(lit);
    return len >= l && memcmp(m + len - l, lit, l) == 0;
}

/* The word at m (up to a space), its length. */
static size_t word(const char *m, size_t len)
{
    size_t i = 0;
    while (i < len && m[i] != ' ') i++;
    return i;
}

/* "NCCL version 2.18.3+cuda12.2" (init.cc, VERSION_STRING, printed by showVersion). */
static void on_version(struct nccl_rank *r, const char *m, size_t len)
{
    m += 13, len -= 13;
    put(r->version, sizeof r->version, m, word(m, len));
}

/* "Bootstrap : Using eth0:10.0.0.1<0>" (bootstrap.cc, bootstrapNetInit: " %s:" then
 * ncclSocketToString's "%s<%s>"; 2.26+ writes "Bootstrap: Using"). The first one counts. */
static void on_bootstrap(struct nccl_rank *r, const char *m, size_t len)
{
    const char *u = memmem(m, len, "Using", 5);
    if (!u || r->boot_if[0]) return;
    len -= (size_t)(u + 5 - m), m = u + 5;
    while (len && *m == ' ') m++, len--;
    const char *colon = memchr(m, ':', word(m, len));
    if (!colon) return;
    put(r->boot_if, sizeof r->boot_if, m, (size_t)(colon - m));
    len -= (size_t)(colon + 1 - m), m = colon + 1;
    put(r->boot_addr, sizeof r->boot_addr, m, word(m, len));
}

/* The network in use and its devices: NCCL's "Using network" when it said it, else IB when
 * NET/IB found devices (NCCL tries it first), else Socket. */
static void net_settle(struct nccl_rank *r)
{
    if (!r->net_said) {
        if (r->ib_devs[0]) snprintf(r->net, sizeof r->net, "%s", r->ib_roce ? "RoCE" : "IB");
        else if (r->sock_devs[0]) snprintf(r->net, sizeof r->net, "Socket");
    } else if (strcmp(r->net, "IB") == 0 && r->ib_roce) {
        snprintf(r->net, sizeof r->net, "RoCE");
    }
    const char *d = strcmp(r->net, "Socket") == 0 ? r->sock_devs
                    : strcmp(r->net, "IB") == 0 || strcmp(r->net, "RoCE") == 0 ? r->ib_devs : "";
    snprintf(r->net_devs, sizeof r->net_devs, "%s", d);
}

/* The device list after "Using": " [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE" (net_ib.cc) or
 * " [0]enp41s0f1:10.1.1.1<0>" (net_socket.cc), up to end (exclusive): "[N]" prefixes dropped. */
static void put_devs(char *dst, size_t cap, const char *m, const char *end)
{
    char out[160];
    size_t k = 0;
    while (m < end) {
        while (m < end && *m == ' ') m++;
        if (m < end && *m == '[') {
            const char *rb = memchr(m, ']', (size_t)(end - m));
            if (!rb) break;
            if (rb - m > 1 && rb[-1] == 'O' && rb[-2] == 'R') { m = rb + 1; continue; }   /* "[RO]" */
            m = rb + 1;
        }
        size_t w = word(m, (size_t)(end - m));
        if (!w) break;
        if (k && k + 1 < sizeof out) out[k++] = ' ';
        for (size_t i = 0; i < w && k + 1 < sizeof out; i++) out[k++] = m[i];
        m += w;
    }
    out[k] = '\0';
    put(dst, cap, out, k);
}

/* "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>" (net_ib.cc,
 * ncclIbInit: "NET/IB : Using%s %s; OOB %s:%s"). */
static void on_net_ib(struct nccl_rank *r, const char *m, size_t len)
{
    const char *end = m + len, *semi = memchr(m, ';', len);
    const char *devs = m + 14;
    put_devs(r->ib_devs, sizeof r->ib_devs, devs, semi ? semi : end);
    r->ib_roce = strstr(r->ib_devs, "/RoCE") && !strstr(r->ib_devs, "/IB");
    if (semi) {
        const char *o = memmem(semi, (size_t)(end - semi), "OOB ", 4);
        if (o) put(r->oob, sizeof r->oob, o + 4, word(o + 4, (size_t)(end - o - 4)));
    }
    net_settle(r);
}

/* "NET/Socket : Using [0]enp41s0f1:10.1.1.1<0> [1]..." (net_socket.cc, ncclNetSocketInit). */
static void on_net_socket(struct nccl_rank *r, const char *m, size_t len)
{
    put_devs(r->sock_devs, sizeof r->sock_devs, m + 18, m + len);
    net_settle(r);
}

/* "Using network IB" (init.cc, "Using network %s", comm->ncclNet->name): the word that decides. */
static void on_using_network(struct nccl_rank *r, const char *m, size_t len)
{
    put(r->net, sizeof r->net, m + 14, len - 14);
    r->net_said = true;
    net_settle(r);
}

/* "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
 * "Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0" (transport/p2p.cc, shm.cc, net.cc). */
static void on_channel(struct nccl_rank *r, const char *m, size_t len)
{
    const char *v = memmem(m, len, " via ", 5);
    if (!v) return;
    size_t rest = len - (size_t)(v + 5 - m);
    v += 5;
    r->channels++;
    if (starts(v, rest, "P2P/")) r->transports |= NCCL_TR_P2P;
    else if (starts(v, rest, "SHM/")) r->transports |= NCCL_TR_SHM;
    else if (starts(v, rest, "NET/")) r->transports |= NCCL_TR_NET;
    else if (starts(v, rest, "CollNet")) r->transports |= NCCL_TR_COLLNET;
}

/* "[ncclCommInitRank ]comm 0x55d8 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 1000 commId 0x7a
 * - Init START" / "- Init COMPLETE" (init.cc, ncclCommInitRankFunc; the function's name comes
 * first since 2.21). The first communicator is timed (the world's, in PyTorch). */
static void on_init(struct nccl_rank *r, const char *m, size_t len, bool complete, int64_t wall)
{
    const char *c = memmem(m, len, "comm 0x", 7);
    if (!c) return;
    char comm[sizeof r->comm];
    put(comm, sizeof comm, c + 5, word(c + 5, len - (size_t)(c + 5 - m)));
    const char *nr = memmem(m, len, " nranks ", 8);
    if (!complete) {
        r->comms++;
        if (r->comm[0]) return;
        memcpy(r->comm, comm, sizeof comm);
        r->init_start_ns = wall;
        if (nr) r->nranks = atoi(nr + 8) > 0 ? atoi(nr + 8) : 0;
        return;
    }
    if (r->init_complete || (r->comm[0] && strcmp(r->comm, comm) != 0)) return;
    if (!r->comm[0]) memcpy(r->comm, comm, sizeof comm);   /* its START was cut off */
    r->init_complete = true;
    r->init_done_ns = wall;
}

/* "Init timings: rank 0 nranks 8 total 0.45 (kernels ...)" (2.22, init.cc) and
 * "Init timings - ncclCommInitRank: rank 0 nranks 8 total 1.23 (...)" (2.23+); seconds. */
static void on_init_timings(struct nccl_rank *r, const char *m, size_t len)
{
    const char *t = memmem(m, len, " total ", 7);
    if (!t || r->init_total_s >= 0) return;
    char num[24];
    put(num, sizeof num, t + 7, word(t + 7, len - (size_t)(t + 7 - m)));
    char *e;
    double v = strtod(num, &e);
    if (e != num && v >= 0 && v < 1e6) r->init_total_s = v;
}

/* "NET/Plugin: Loaded net plugin NAME (v6)" (net.cc). */
static void on_plugin(struct nccl_rank *r, const char *m, size_t len)
{
    const char *p = memmem(m, len, "Loaded net plugin ", 18);
    if (!p) return;
    p += 18;
    const char *end = m + len, *paren = memmem(p, (size_t)(end - p), " (v", 3);
    put(r->plugin, sizeof r->plugin, p, (size_t)((paren ? paren : end) - p));
}

static void on_info(struct nccl_rank *r, const char *m, size_t len, int64_t wall)
{
    if (starts(m, len, "NCCL version ")) on_version(r, m, len);
    else if (starts(m, len, "Bootstrap : Using") || starts(m, len, "Bootstrap: Using")) on_bootstrap(r, m, len);
    else if (starts(m, len, "NET/IB : Using")) on_net_ib(r, m, len);
    else if (starts(m, len, "NET/Socket : Using")) on_net_socket(r, m, len);
    else if (starts(m, len, "Using network ")) on_using_network(r, m, len);
    else if (starts(m, len, "Channel ")) on_channel(r, m, len);
    else if (starts(m, len, "Init timings")) on_init_timings(r, m, len);
    else if (starts(m, len, "NET/Plugin")) on_plugin(r, m, len);
    else if (ends(m, len, " - Init START")) on_init(r, m, len, false, wall);
    else if (ends(m, len, " - Init COMPLETE")) on_init(r, m, len, true, wall);
}

void nccl_feed_line(struct job *j, int rank, const char *text, size_t len, int64_t wall_ns, int64_t now_ms)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    while (len && (text[len - 1] == '\r' || text[len - 1] == '\n')) len--;
    if (nccl_version_line_is(text, len)) {
        struct nccl_job *n = nccl_get(j);
        n->r[rank].seen = n->dirty = true;
        on_version(&n->r[rank], text, len);
        j->generation++;
        return;
    }
    if (!nccl_line_is(text, len)) return;
    if (len > NCCL_LINE_MAX) len = NCCL_LINE_MAX;
    const char *info = memmem(text, len, " NCCL INFO ", 11), *warn = memmem(text, len, " NCCL WARN ", 11);
    if (!info && !warn) return;
    struct nccl_job *n = nccl_get(j);
    struct nccl_rank *r = &n->r[rank];
    r->seen = true;
    n->dirty = true;
    bool is_warn = warn && (!info || warn < info);
    const char *m = (is_warn ? warn : info) + 11;
    size_t mlen = len - (size_t)(m - text);
    if (is_warn) {
        r->warns++;
        memmove(r->warn_last[0], r->warn_last[1], sizeof r->warn_last[0] * (NCCL_WARN_KEEP - 1));
        put(r->warn_last[NCCL_WARN_KEEP - 1], sizeof r->warn_last[0], m, mlen);
        nccl_warn_take(j, n, rank, m, mlen, now_ms);
        return;
    }
    bool had_net = r->net[0] || r->init_complete;
    on_info(r, m, mlen, wall_ns);
    if (!had_net && (r->net[0] || r->init_complete)) {
        if (!n->first_net_ms) n->first_net_ms = now_ms ? now_ms : 1;
        if (n->decided) n->late = true;
    }
    j->generation++;
}

/* ---- sums for the tables ----------------------------------------------------------------- */

const char *nccl_transports_str(unsigned bits, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s%s", bits & NCCL_TR_P2P ? "P2P " : "", bits & NCCL_TR_SHM ? "SHM " : "",
             bits & NCCL_TR_NET ? "NET " : "", bits & NCCL_TR_COLLNET ? "CollNet " : "");
    size_t l = strlen(buf);
    if (l && buf[l - 1] == ' ') buf[l - 1] = '\0';
    return buf;
}

double nccl_rank_init_s(const struct nccl_rank *r)
{
    if (r->init_complete && r->init_start_ns && r->init_done_ns >= r->init_start_ns)
        return (double)(r->init_done_ns - r->init_start_ns) / 1e9;
    return r->init_total_s;
}

/* dst gets v when empty, stays when the same, becomes "dst|v" when v is new (bounded). */
static void agree(char *dst, size_t cap, const char *v)
{
    if (!v[0]) return;
    if (!dst[0]) { snprintf(dst, cap, "%s", v); return; }
    size_t l = strlen(v);
    for (const char *p = dst; (p = strstr(p, v)) != NULL; p++)
        if ((p == dst || p[-1] == '|') && (p[l] == '\0' || p[l] == '|')) return;
    size_t d = strlen(dst);
    if (d + 1 + l < cap) snprintf(dst + d, cap - d, "|%s", v);
}

void nccl_node_sum(const struct job *j, size_t node, struct nccl_node_sum *s)
{
    memset(s, 0, sizeof *s);
    s->init_s = -1;
    const struct nccl_job *n = j->nccl;
    if (!n || node >= j->n_nodes || !n->r || n->attempt != j->attempt) return;
    const struct node_info *ni = &j->nodes[node];
    unsigned bits = 0;
    for (int k = 0; k < ni->n_ranks; k++) {
        size_t rk = (size_t)(ni->first_rank + k);
        if (rk >= n->n_ranks || !n->r[rk].seen) continue;
        const struct nccl_rank *r = &n->r[rk];
        char b[sizeof s->boot];
        s->ranks_seen++;
        agree(s->version, sizeof s->version, r->version);
        snprintf(b, sizeof b, "%s%s%s", r->boot_if, r->boot_if[0] ? ":" : "", r->boot_addr);
        agree(s->boot, sizeof s->boot, b);
        agree(s->net, sizeof s->net, r->net);
        agree(s->devs, sizeof s->devs, r->net_devs);
        bits |= r->transports;
        double t = nccl_rank_init_s(r);
        if (t > s->init_s) s->init_s = t;
        s->warns += r->warns;
    }
    nccl_transports_str(bits, s->transports, sizeof s->transports);
}
