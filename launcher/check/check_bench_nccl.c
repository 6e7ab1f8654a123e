/* The measured preflight's NCCL part (check_bench_nccl.h): after each node's GPUs, NCCL's own
 * all-reduce, first of the whole world (every node with GPUs and NCCL, one rank per GPU), then
 * of node pairs, the pairs of the transfers' sampled mesh, round by round (the pairs of a round
 * share no node, so each runs alone on its nodes). Each communicator: its first node's agent
 * makes the unique id (bench_nccl without "uid": NCCL's bootstrap root lives in the process
 * that made it) and says it in a partial answer; the others get it in their bench_nccl. A node
 * that fails for itself has the others stopped (bench_nccl_stop) rather than left to wait for it
 * until their deadline; a node that does not answer in time is gone for the rest. */
#include "check_bench_nccl.h"
#include "check_bench_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "wire/json_num.h"
#include "wire/nccl_env.h"
#include "wire/protocol.h"

/* nccl-tests' all_reduce_perf runs 5 warm-up and 20 timed iterations; fewer here, since a
 * node pair of a slow link at 256 MiB takes seconds an iteration. */
#define NCCL_WARMUP 2
#define NCCL_ITERS 10
/* The agents' deadlines (init and iterations, in their process) and ours beyond them. At least
 * these; more where the network is slow: see nccl_seconds. */
#define WORLD_SECONDS 30
#define PAIR_SECONDS 20
#define NCCL_SECONDS_MAX 300
#define SLACK_MS 10000

struct check_bench_nccl *check_bench_nccl_new(size_t n, const struct check_bench_io *io, const char *const *addr,
                                              const struct node_opts *o, int64_t stage_ms)
{
    struct check_bench_nccl *nc = xcalloc(1, sizeof *nc);
    nc->n = n;
    nc->io = *io;
    nc->addr = addr;
    nc->o = o;
    nc->bytes = (double)o->bench_nccl_mib * 1048576.0;
    nc->stage_ms = stage_ms;
    nc->in = xcalloc(n ? n : 1, sizeof *nc->in);
    nc->gone = xcalloc(n ? n : 1, sizeof *nc->gone);
    nc->gpus = xcalloc(n ? n : 1, sizeof *nc->gpus);
    nc->note = xcalloc(n ? n : 1, sizeof *nc->note);
    return nc;
}

static void comm_free(struct nccl_comm *c)
{
    for (size_t j = 0; j < c->nn; j++) free(c->error[j]);
    free(c->node);
    free(c->rank0);
    free(c->answered);
    free(c->busbw);
    free(c->algbw);
    free(c->error);
    free(c->own);
    free(c->uid);
}

void check_bench_nccl_free(struct check_bench_nccl *nc)
{
    if (!nc) return;
    for (size_t k = 0; k < nc->nc; k++) comm_free(&nc->c[k]);
    for (size_t i = 0; i < nc->n; i++) free(nc->note[i]);
    free(nc->c);
    free(nc->in);
    free(nc->gone);
    free(nc->gpus);
    free(nc->note);
    free(nc->skipped);
    free(nc);
}

static struct nccl_comm *comm_add(struct check_bench_nccl *nc, const size_t *nodes, size_t nn, int round)
{
    nc->c = xrealloc(nc->c, (nc->nc + 1) * sizeof *nc->c);
    struct nccl_comm *c = &nc->c[nc->nc++];
    memset(c, 0, sizeof *c);
    c->nn = nn;
    c->round = round;
    c->node = xcalloc(nn, sizeof *c->node);
    c->rank0 = xcalloc(nn, sizeof *c->rank0);
    c->answered = xcalloc(nn, sizeof *c->answered);
    c->busbw = xcalloc(nn, sizeof *c->busbw);
    c->algbw = xcalloc(nn, sizeof *c->algbw);
    c->error = xcalloc(nn, sizeof *c->error);
    c->own = xcalloc(nn, sizeof *c->own);
    c->busbw_gbs = c->algbw_gbs = -1;
    for (size_t j = 0; j < nn; j++) {
        c->node[j] = nodes[j];
        c->rank0[j] = c->ranks;
        c->ranks += nc->gpus[nodes[j]];
        c->busbw[j] = c->algbw[j] = -1;
    }
    return c;
}

/* The member's answer, once: an error (own: its own failure, not a peer's) or its figures. */
static void member_end(struct nccl_comm *c, size_t j, const char *error, bool own)
{
    if (c->answered[j]) return;
    c->answered[j] = true;
    if (error) {
        c->error[j] = xstrdup(error);
        c->own[j] = own;
    }
}

static bool comm_over(struct nccl_comm *c)
{
    for (size_t j = 0; j < c->nn; j++)
        if (!c->answered[j]) return false;
    return true;
}

/* The communicator's figure: its slowest node's (every node waits for the slowest anyway). */
static void comm_close(struct nccl_comm *c)
{
    c->done = true;
    for (size_t j = 0; j < c->nn; j++) {
        if (c->error[j] || c->busbw[j] < 0) {
            c->busbw_gbs = c->algbw_gbs = -1;
            return;
        }
        if (c->busbw_gbs < 0 || c->busbw[j] < c->busbw_gbs) c->busbw_gbs = c->busbw[j];
        if (c->algbw_gbs < 0 || c->algbw[j] < c->algbw_gbs) c->algbw_gbs = c->algbw[j];
    }
}

/* The agents' deadline for a communicator: its floor, or 3x what its iterations would take at the
 * TCP transfers' median (each rank sends 2(n-1)/n of the bytes an iteration; NCCL is rarely
 * slower than TCP between the same nodes), so that 256 MiB on a 1 Gb/s network is measured, not
 * cut off; at most NCCL_SECONDS_MAX. */
static int nccl_seconds(const struct check_bench_nccl *nc, int floor_s)
{
    if (nc->tcp_gbps <= 0) return floor_s;
    double s = 3.0 * (NCCL_WARMUP + NCCL_ITERS) * 2.0 * nc->bytes * 8 / (nc->tcp_gbps * 1e9) + 10;
    return s < floor_s ? floor_s : s > NCCL_SECONDS_MAX ? NCCL_SECONDS_MAX : (int)s;
}

static void ask(struct check_bench_nccl *nc, struct nccl_comm *c, size_t j)
{
    size_t i = c->node[j];
    cJSON *m = nc->io.request(nc->io.ctx, i, WIRE_OP_BENCH_NCCL, CHECK_BENCH_NCCL_TAG + (int)(c - nc->c));
    cJSON_AddNumberToObject(m, "ranks", c->ranks);
    cJSON_AddNumberToObject(m, "rank0", c->rank0[j]);
    cJSON_AddNumberToObject(m, "gpus", nc->gpus[i]);
    cJSON_AddNumberToObject(m, "bytes", nc->bytes);
    cJSON_AddNumberToObject(m, "warmup", NCCL_WARMUP);
    cJSON_AddNumberToObject(m, "iters", NCCL_ITERS);
    cJSON_AddNumberToObject(m, "seconds", nccl_seconds(nc, c->round < 0 ? WORLD_SECONDS : PAIR_SECONDS));
    if (c->uid) cJSON_AddStringToObject(m, "uid", c->uid);
    /* NCCL's variables of --env (NCCL_SOCKET_IFNAME, NCCL_IB_HCA ...): measured as it will run */
    cJSON *env = NULL;
    for (size_t k = 0; k < nc->o->n_env; k++) {
        if (!wire_nccl_env_is_nccl(nc->o->env[k].key)) continue;
        if (!env) env = cJSON_AddObjectToObject(m, "env");
        if (!cJSON_GetObjectItemCaseSensitive(env, nc->o->env[k].key))
            cJSON_AddStringToObject(env, nc->o->env[k].key, nc->o->env[k].value);
    }
    nc->io.send(nc->io.ctx, i, m);
}

static void comm_start(struct check_bench_nccl *nc, struct nccl_comm *c)
{
    c->started = true;
    for (size_t j = 0; j < c->nn; j++)
        if (nc->gone[c->node[j]]) {
            for (size_t k = 0; k < c->nn; k++)
                member_end(c, k, k == j ? "it stopped answering" : "not started: a peer stopped answering", k == j);
            comm_close(c);
            return;
        }
    ask(nc, c, 0);   /* the first makes the id; the others are asked when it comes */
}

/* A member failed for itself: the others will never complete; they are stopped now. */
static void comm_stop_others(struct check_bench_nccl *nc, struct nccl_comm *c, size_t failed)
{
    for (size_t j = 0; j < c->nn; j++) {
        if (j == failed || c->answered[j]) continue;
        if (j == 0 || c->uid) {   /* asked: the first at the start, the others with the id */
            char *why = xasprintf("NCCL failed on %s", nc->addr[c->node[failed]]);
            cJSON *m = nc->io.request(nc->io.ctx, c->node[j], WIRE_OP_BENCH_NCCL_STOP, CHECK_BENCH_NCCL_STOP_TAG);
            cJSON_AddStringToObject(m, "reason", why);
            nc->io.send(nc->io.ctx, c->node[j], m);
            free(why);
        } else {
            member_end(c, j, "not started: the first node could not start NCCL", false);
        }
    }
}

/* ---- the phases ---------------------------------------------------------------------------- */

static void set_phase(struct check_bench_nccl *nc, int64_t now, const char *text, int seconds)
{
    nc->deadline = now + seconds * 1000 + SLACK_MS + nc->stage_ms;
    snprintf(nc->phase_text, sizeof nc->phase_text, "%s", text);
}

static void pairs_plan(struct check_bench_nccl *nc, const struct check_bench_xfer *x, size_t nx)
{
    for (size_t k = 0; k < nx; k++) {
        size_t a = x[k].src < x[k].dst ? x[k].src : x[k].dst, b = x[k].src ^ x[k].dst ^ a, pair[2] = {a, b};
        bool dup = false;
        if (!nc->in[a] || !nc->in[b] || nc->gone[a] || nc->gone[b]) continue;
        for (size_t q = 1; q < nc->nc && !dup; q++) dup = nc->c[q].node[0] == a && nc->c[q].node[1] == b;
        if (!dup) comm_add(nc, pair, 2, x[k].round);
        if (!dup && x[k].round + 1 > nc->rounds) nc->rounds = x[k].round + 1;
    }
}

static void round_begin(struct check_bench_nccl *nc, int64_t now)
{
    for (; nc->round < nc->rounds; nc->round++) {
        bool any = false;
        for (size_t k = 1; k < nc->nc; k++)
            if (nc->c[k].round == nc->round) {
                comm_start(nc, &nc->c[k]);
                any = any || !nc->c[k].done;
            }
        if (any) {
            char text[64];
            snprintf(text, sizeof text, "bench: NCCL all-reduce of node pairs, round %d of %d", nc->round + 1,
                     nc->rounds);
            set_phase(nc, now, text, nccl_seconds(nc, PAIR_SECONDS));
            return;
        }
    }
    nc->phase = NC_DONE;
    nc->deadline = 0;
}

static bool round_over(const struct check_bench_nccl *nc)
{
    for (size_t k = 1; k < nc->nc; k++)
        if (nc->c[k].round == nc->round && !nc->c[k].done) return false;
    return true;
}

static void advance(struct check_bench_nccl *nc, int64_t now)
{
    for (size_t k = 0; k < nc->nc; k++)
        if (nc->c[k].started && !nc->c[k].done && comm_over(&nc->c[k])) comm_close(&nc->c[k]);
    if (nc->phase == NC_WORLD && nc->c[0].done) {
        /* a node that failed for itself in the world fails each pair alike: it is named once */
        for (size_t j = 0; j < nc->c[0].nn; j++)
            if (nc->c[0].own[j]) nc->gone[nc->c[0].node[j]] = true;
        nc->phase = NC_PAIRS;
        pairs_plan(nc, nc->x, nc->nx);
        nc->round = 0;
        round_begin(nc, now);
    } else if (nc->phase == NC_PAIRS && round_over(nc)) {
        nc->round++;
        round_begin(nc, now);
    }
}

bool check_bench_nccl_begin(struct check_bench_nccl *nc, const bool *alive, const struct check_bench_host *host,
                            const struct check_bench_xfer *x, size_t nx, double tcp_gbps, int64_t now)
{
    bool any_gpu = false, any_nccl = false;
    size_t *world = xcalloc(nc->n ? nc->n : 1, sizeof *world), nw = 0;
    int ranks = 0;
    nc->x = x;
    nc->nx = nx;
    nc->tcp_gbps = tcp_gbps;
    for (size_t i = 0; i < nc->n; i++) {
        int g = host[i].gpus ? cJSON_GetArraySize(host[i].gpus) : 0;
        nc->gpus[i] = g > 64 ? 64 : g;
        any_gpu = any_gpu || (alive[i] && g > 0);
        any_nccl = any_nccl || (alive[i] && g > 0 && host[i].nccl);
    }
    if (nc->o->bench_nccl_mib <= 0) {   /* turned off: no node is left out of anything */
        if (any_gpu) nc->skipped = xstrdup("off (--bench-nccl-mib 0)");
        free(world);
        nc->phase = NC_DONE;
        return false;
    }
    for (size_t i = 0; i < nc->n; i++) {
        /* a node that is another's machine has that one's GPUs: in the all-reduce once */
        if (!alive[i] || host[i].same_as >= 0 || host[i].error) continue;
        if (nc->gpus[i] > 0 && host[i].nccl) {
            nc->in[i] = true;
            world[nw++] = i;
            ranks += nc->gpus[i];
        } else if (nc->gpus[i] > 0 && any_nccl) {
            nc->note[i] = xstrdup("no NCCL here (libnccl.so.2 not found) while other nodes have it: left out of "
                                  "the NCCL all-reduce");
        } else if (any_nccl) {
            nc->note[i] = xstrdup("no GPU here: left out of the NCCL all-reduce");
        }
    }
    if (!any_gpu || ranks < 2) {
        if (any_gpu)
            nc->skipped = xstrdup(any_nccl ? "one GPU with NCCL in all: no all-reduce to measure"
                                           : "no node has NCCL (libnccl.so.2 not found)");
        free(world);
        nc->phase = NC_DONE;
        return false;
    }
    struct nccl_comm *w = comm_add(nc, world, nw, -1);
    free(world);
    char text[64];
    snprintf(text, sizeof text, "bench: NCCL all-reduce of the world (%zu nodes, %d ranks)", w->nn, w->ranks);
    set_phase(nc, now, text, nccl_seconds(nc, WORLD_SECONDS));
    nc->phase = NC_WORLD;
    comm_start(nc, w);
    advance(nc, now);
    return true;
}

/* Its own failure, or what a peer's did to it (a timeout, a stop, NCCL's remote error): the
 * agent's "cause" says which (docs/protocol.md). An error without one is the answer's own
 * (the controller's "no figure in the answer", say). */
static bool own_failure(const cJSON *answer)
{
    const char *cause = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(answer, "cause"));
    return !cause || strcmp(cause, "own") == 0;
}

void check_bench_nccl_message(struct check_bench_nccl *nc, size_t i, const struct wire_msg *m, int64_t now)
{
    size_t k = (size_t)(m->tag - CHECK_BENCH_NCCL_TAG), j;
    if (m->tag < CHECK_BENCH_NCCL_TAG || k >= nc->nc || !nc->c[k].started || nc->c[k].done) return;
    struct nccl_comm *c = &nc->c[k];
    for (j = 0; j < c->nn && c->node[j] != i; j++) {}
    if (j == c->nn || c->answered[j]) return;
    const char *ev = m->ev;
    if (strcmp(ev, WIRE_EV_BENCH_NCCL_ID) == 0) {
        const char *uid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m->json, "uid"));
        if (j != 0 || c->uid || !uid || strlen(uid) != 256 || strspn(uid, "0123456789abcdef") != 256) return;
        c->uid = xstrdup(uid);
        for (size_t q = 1; q < c->nn; q++) ask(nc, c, q);
        return;
    }
    char *err = check_bench_agent_text(cJSON_GetObjectItemCaseSensitive(m->json, "error"));
    double bus = -1, alg = -1;
    if (!err && (!json_real_in(cJSON_GetObjectItemCaseSensitive(m->json, "busbw_gbs"), 0, 1e6, &bus) ||
                 !json_real_in(cJSON_GetObjectItemCaseSensitive(m->json, "algbw_gbs"), 0, 1e6, &alg)))
        err = xstrdup("no figure in the answer");
    c->busbw[j] = bus;
    c->algbw[j] = alg;
    member_end(c, j, err, err && own_failure(m->json));
    if (err && c->own[j]) comm_stop_others(nc, c, j);
    free(err);
    advance(nc, now);
}

void check_bench_nccl_node_lost(struct check_bench_nccl *nc, size_t i, const char *why, int64_t now)
{
    if (i >= nc->n) return;
    nc->gone[i] = true;
    for (size_t k = 0; k < nc->nc; k++) {
        struct nccl_comm *c = &nc->c[k];
        if (!c->started || c->done) continue;
        for (size_t j = 0; j < c->nn; j++)
            if (c->node[j] == i && !c->answered[j]) {
                member_end(c, j, why, true);
                comm_stop_others(nc, c, j);
            }
    }
    if (nc->phase != NC_IDLE && nc->phase != NC_DONE) advance(nc, now);
}

bool check_bench_nccl_done(const struct check_bench_nccl *nc)
{
    return nc->phase == NC_DONE;
}

int64_t check_bench_nccl_deadline(const struct check_bench_nccl *nc)
{
    return nc->phase == NC_DONE ? 0 : nc->deadline;
}

const char *check_bench_nccl_phase(const struct check_bench_nccl *nc)
{
    return nc->phase_text;
}

void check_bench_nccl_step(struct check_bench_nccl *nc, int64_t now)
{
    if (nc->phase == NC_IDLE || nc->phase == NC_DONE || !nc->deadline || now < nc->deadline) return;
    for (size_t k = 0; k < nc->nc; k++) {
        struct nccl_comm *c = &nc->c[k];
        if (!c->started || c->done) continue;
        /* the agents' own deadline is ours less the slack: no answer is a node that stopped */
        for (size_t j = 0; j < c->nn; j++)
            if (!c->answered[j]) {
                member_end(c, j, "no answer to bench_nccl in time", true);
                nc->gone[c->node[j]] = true;
            }
    }
    advance(nc, now);
}
