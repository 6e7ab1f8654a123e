/* The measured preflight's plan and its run (check_bench.h): one listener per node, the
 * transfers round by round, then each node's host figures. Every request has a deadline; a
 * node that misses one, or goes, leaves errors in what it had in flight, and the rest go on. */
#include "check_bench.h"
#include "check_bench_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "check_eval.h"
#include "util/util.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

enum { TAG_LISTEN = CHECK_BENCH_TAG, TAG_HOST, TAG_UNLISTEN, TAG_DCGMI = CHECK_BENCH_TAG + 4,
       TAG_XFER = CHECK_BENCH_TAG + 16 };

/* Seconds the agent may take beyond a transfer's own: connecting (3 s) and the receiver's
 * count (5 s), as the protocol bounds them. */
#define XFER_SLACK_MS 8000
/* The host figures' bound (the GPUs: docs/check.md), and what the agent may take beyond it. */
#define HOST_GPU_SECONDS 20
#define HOST_SLACK_MS 10000

enum phase { PH_IDLE, PH_LISTEN, PH_ROUNDS, PH_HOST, PH_NCCL, PH_DCGMI, PH_DONE };

struct check_bench {
    const struct node_opts *o;
    struct check_bench_io io;
    size_t n;
    bool *took;                /* node i takes part (its verdict comes from the bench) */
    bool *alive;               /* and still answers */
    const char *const *addr;
    char **machine;            /* boot ids (check_bench_set_machines); NULL: unknown */
    char **nonce;
    int *port;                 /* the node's listener; 0: none yet; -1: failed */
    char **listen_err;
    struct check_bench_xfer *x;
    size_t nx;
    int rounds, round;
    struct check_bench_host *host;
    struct check_bench_nccl *nccl;
    struct check_bench_dcgmi *dcgmi;   /* --bench-dcgmi's answers */
    enum phase phase;
    int64_t deadline;
    uint64_t seed;
    char phase_text[64];
};

/* ---- the plan ------------------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static bool has_xfer(const struct check_bench_xfer *x, size_t k, size_t src, size_t dst)
{
    for (size_t i = 0; i < k; i++)
        if (x[i].src == src && x[i].dst == dst) return true;
    return false;
}

static void add_xfer(struct check_bench_xfer *x, size_t *k, size_t src, size_t dst)
{
    if (src == dst || has_xfer(x, *k, src, dst)) return;
    x[(*k)++] = (struct check_bench_xfer){.src = src, .dst = dst, .gbps = -1, .seconds = -1, .rtt_us = -1};
}

size_t check_bench_plan(size_t na, uint64_t seed, struct check_bench_xfer **out, int *rounds)
{
    struct check_bench_xfer *x;
    size_t k = 0, *perm;
    uint32_t *used;
    *out = NULL;
    *rounds = 0;
    if (na < 2) return 0;
    x = xcalloc(3 * na, sizeof *x);
    /* the ring both ways: every node sends to two neighbours and hears from both */
    for (size_t i = 0; i < na; i++) {
        add_xfer(x, &k, i, (i + 1) % na);
        add_xfer(x, &k, i, (i + na - 1) % na);
    }
    /* one random cycle: a peer beyond the ring, so a bad link is not a bad node */
    perm = xcalloc(na, sizeof *perm);
    for (size_t i = 0; i < na; i++) perm[i] = i;
    for (size_t i = na - 1; i > 0; i--) {
        size_t j = (size_t)(splitmix(&seed) % (i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < na; i++) add_xfer(x, &k, perm[i], perm[(i + 1) % na]);
    free(perm);
    /* rounds: the first where neither end is busy (greedy; the degree is at most 6, so at most
     * 11 rounds, 3 to 7 in practice) */
    used = xcalloc(na, sizeof *used);
    for (size_t i = 0; i < k; i++) {
        int r = 0;
        while (r < 31 && ((used[x[i].src] | used[x[i].dst]) & (1u << r))) r++;
        x[i].round = r;
        used[x[i].src] |= 1u << r;
        used[x[i].dst] |= 1u << r;
        if (r + 1 > *rounds) *rounds = r + 1;
    }
    free(used);
    *out = x;
    return k;
}

/* ---- life ---------------------------------------------------------------------------------- */

struct check_bench *check_bench_new(const struct node_opts *o, size_t n, const bool *alive,
                                    const char *const *addresses, uint64_t seed, const struct check_bench_io *io)
{
    struct check_bench *b = xcalloc(1, sizeof *b);
    size_t na = 0, *idx = xcalloc(n ? n : 1, sizeof *idx);
    struct check_bench_xfer *plan = NULL;
    b->o = o;
    b->io = *io;
    b->n = n;
    b->addr = addresses;
    b->seed = seed;
    b->alive = xcalloc(n ? n : 1, sizeof *b->alive);
    b->took = xcalloc(n ? n : 1, sizeof *b->took);
    b->nonce = xcalloc(n ? n : 1, sizeof *b->nonce);
    b->machine = xcalloc(n ? n : 1, sizeof *b->machine);
    b->port = xcalloc(n ? n : 1, sizeof *b->port);
    b->listen_err = xcalloc(n ? n : 1, sizeof *b->listen_err);
    b->host = xcalloc(n ? n : 1, sizeof *b->host);
    b->dcgmi = check_bench_dcgmi_new(n);
    b->nccl = check_bench_nccl_new(n, io, addresses, o, (int64_t)o->ssh.timeout_s * 1000);
    for (size_t i = 0; i < n; i++) {
        unsigned char rnd[16];
        char hex[33];
        b->alive[i] = b->took[i] = alive[i];
        b->host[i].cpu_mem_gbs = -1;
        b->host[i].same_as = -1;
        util_random(rnd, sizeof rnd);
        util_hex(rnd, sizeof rnd, hex);
        b->nonce[i] = xstrdup(hex);
        if (alive[i]) idx[na++] = i;
    }
    /* the plan is over the nodes that take part, in hostfile order */
    b->nx = check_bench_plan(na, seed, &plan, &b->rounds);
    for (size_t k = 0; k < b->nx; k++) {
        plan[k].src = idx[plan[k].src];
        plan[k].dst = idx[plan[k].dst];
    }
    b->x = plan;
    free(idx);
    return b;
}

void check_bench_set_machines(struct check_bench *b, const char *const *machines)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->machine[i]);
        b->machine[i] = machines[i] ? xstrdup(machines[i]) : NULL;
    }
}

void check_bench_free(struct check_bench *b)
{
    if (!b) return;
    for (size_t i = 0; i < b->n; i++) {
        free(b->nonce[i]);
        free(b->machine[i]);
        free(b->listen_err[i]);
        cJSON_Delete(b->host[i].gpus);
        free(b->host[i].gpu_error);
        free(b->host[i].nccl);
        free(b->host[i].error);
    }
    for (size_t k = 0; k < b->nx; k++) free(b->x[k].error);
    free(b->x);
    free(b->nonce);
    free(b->machine);
    free(b->port);
    free(b->listen_err);
    free(b->host);
    check_bench_dcgmi_free(b->dcgmi);
    check_bench_nccl_free(b->nccl);
    free(b->alive);
    free(b->took);
    free(b);
}

static int64_t stage_ms(const struct check_bench *b)
{
    return (int64_t)b->o->ssh.timeout_s * 1000;
}

static double xfer_seconds(const struct check_bench *b)
{
    return b->o->bench_seconds > 0 ? b->o->bench_seconds : 1.0;
}

/* ---- the phases ---------------------------------------------------------------------------- */

static void xfer_fail(struct check_bench_xfer *x, const char *why)
{
    if (x->done) return;
    x->done = true;
    free(x->error);
    x->error = xstrdup(why);
}

static void host_phase(struct check_bench *b, int64_t now);

static void round_begin(struct check_bench *b, int64_t now)
{
    for (; b->round < b->rounds; b->round++) {
        size_t sent = 0;
        for (size_t k = 0; k < b->nx; k++) {
            struct check_bench_xfer *x = &b->x[k];
            if (x->round != b->round || x->done) continue;
            if (!b->alive[x->src] || !b->alive[x->dst]) {
                xfer_fail(x, "its node is gone");
                continue;
            }
            if (b->port[x->dst] <= 0) {
                char *why = xasprintf("no listener on %s: %s", b->addr[x->dst],
                                      b->listen_err[x->dst] ? b->listen_err[x->dst] : "no answer");
                xfer_fail(x, why);
                free(why);
                continue;
            }
            cJSON *m = b->io.request(b->io.ctx, x->src, WIRE_OP_BENCH_SEND, TAG_XFER + (int)k);
            cJSON_AddStringToObject(m, "address", b->addr[x->dst]);
            cJSON_AddNumberToObject(m, "port", b->port[x->dst]);
            cJSON_AddStringToObject(m, "nonce", b->nonce[x->dst]);
            cJSON_AddNumberToObject(m, "seconds", xfer_seconds(b));
            cJSON_AddNumberToObject(m, "pings", 5);
            b->io.send(b->io.ctx, x->src, m);
            x->sent = true;
            sent++;
        }
        if (sent) {
            b->deadline = now + (int64_t)(xfer_seconds(b) * 1000) + XFER_SLACK_MS + stage_ms(b);
            snprintf(b->phase_text, sizeof b->phase_text, "bench: transfers, round %d of %d", b->round + 1,
                     b->rounds);
            return;
        }
    }
    host_phase(b, now);
}

static bool round_over(const struct check_bench *b)
{
    for (size_t k = 0; k < b->nx; k++)
        if (b->x[k].round == b->round && b->x[k].sent && !b->x[k].done) return false;
    return true;
}

/* Whether nodes i and j are one machine: the same boot id. */
static bool same_machine(const struct check_bench *b, size_t i, size_t j)
{
    return b->machine[i] && b->machine[j] && strcmp(b->machine[i], b->machine[j]) == 0;
}

static void host_phase(struct check_bench *b, int64_t now)
{
    /* the listeners go first: nothing of the bench stays open while the GPUs are measured */
    for (size_t i = 0; i < b->n; i++) {
        if (!b->alive[i] || b->port[i] <= 0) continue;
        cJSON *m = b->io.request(b->io.ctx, i, WIRE_OP_BENCH_UNLISTEN, TAG_UNLISTEN);
        cJSON_AddNumberToObject(m, "port", b->port[i]);
        b->io.send(b->io.ctx, i, m);
    }
    for (size_t i = 0; i < b->n; i++) {
        if (!b->alive[i]) continue;
        /* nodes at one address are one machine (simulated nodes, a host listed twice): it is
         * measured once, not by all of them at once against each other */
        for (size_t j = 0; j < i && b->host[i].same_as < 0; j++)
            if (b->alive[j] && b->host[j].same_as < 0 && same_machine(b, i, j))
                b->host[i].same_as = (long)j;
        if (b->host[i].same_as >= 0) continue;
        cJSON *m = b->io.request(b->io.ctx, i, WIRE_OP_BENCH_HOST, TAG_HOST);
        cJSON_AddNumberToObject(m, "gpu_seconds", HOST_GPU_SECONDS);
        b->io.send(b->io.ctx, i, m);
        b->host[i].asked = true;
    }
    b->phase = PH_HOST;
    b->deadline = now + HOST_GPU_SECONDS * 1000 + HOST_SLACK_MS + stage_ms(b);
    snprintf(b->phase_text, sizeof b->phase_text, "bench: each node's memory and GPUs");
}

/* The figures of node j for every node measured on it. */
static void host_share(struct check_bench *b, size_t j)
{
    for (size_t i = 0; i < b->n; i++) {
        struct check_bench_host *h = &b->host[i], *src = &b->host[j];
        if (h->same_as != (long)j) continue;
        h->cpu_mem_gbs = src->cpu_mem_gbs;
        h->gpus = src->gpus ? cJSON_Duplicate(src->gpus, 1) : NULL;
        h->gpu_error = src->gpu_error ? xstrdup(src->gpu_error) : NULL;
        h->nccl = src->nccl ? xstrdup(src->nccl) : NULL;
        h->error = src->error ? xstrdup(src->error) : NULL;
        h->asked = h->done = true;
    }
}

static bool hosts_over(const struct check_bench *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->host[i].asked && !b->host[i].done) return false;
    return true;
}

static bool listens_over(const struct check_bench *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->alive[i] && b->port[i] == 0) return false;
    return true;
}

/* The transfers' median Gb/s (0: none went through), as the verdicts take it. */
static double tcp_median(const struct check_bench *b)
{
    double *v = xcalloc(b->nx ? b->nx : 1, sizeof *v), med = 0;
    size_t m = 0;
    for (size_t k = 0; k < b->nx; k++)
        if (!b->x[k].error && b->x[k].gbps > 0) v[m++] = b->x[k].gbps;
    if (m) med = check_bench_median(v, m);
    free(v);
    return med;
}

static void advance(struct check_bench *b, int64_t now)
{
    if (b->phase == PH_LISTEN && listens_over(b)) {
        b->phase = PH_ROUNDS;
        b->round = 0;
        round_begin(b, now);
    } else if (b->phase == PH_ROUNDS && round_over(b)) {
        b->round++;
        round_begin(b, now);
    }
    if (b->phase == PH_HOST && hosts_over(b)) {
        for (size_t j = 0; j < b->n; j++)
            if (b->host[j].same_as < 0 && b->host[j].asked) host_share(b, j);
        /* NCCL last: it needs each node's GPUs counted, and nothing else running beside it */
        b->phase = PH_NCCL;
        check_bench_nccl_begin(b->nccl, b->alive, b->host, b->x, b->nx, tcp_median(b), now);
    }
    if (b->phase == PH_NCCL && check_bench_nccl_done(b->nccl)) b->phase = PH_DCGMI;
    if (b->phase == PH_DCGMI && check_bench_dcgmi_over(b->dcgmi)) {
        b->phase = PH_DONE;
        b->deadline = 0;
        snprintf(b->phase_text, sizeof b->phase_text, "bench: done");
    }
}

void check_bench_start(struct check_bench *b, int64_t now)
{
    for (size_t i = 0; i < b->n; i++) {
        if (!b->alive[i]) continue;
        cJSON *m = b->io.request(b->io.ctx, i, WIRE_OP_BENCH_LISTEN, TAG_LISTEN);
        cJSON_AddStringToObject(m, "nonce", b->nonce[i]);
        b->io.send(b->io.ctx, i, m);
    }
    /* dcgmi diag -r 1 runs beside the measurements, all nodes at once */
    if (b->o->bench_dcgmi)
        check_bench_dcgmi_start(b->dcgmi, &b->io, TAG_DCGMI, b->alive, now + HOST_SLACK_MS + stage_ms(b));
    b->phase = PH_LISTEN;
    b->deadline = now + stage_ms(b);
    snprintf(b->phase_text, sizeof b->phase_text, "bench: listeners");
    advance(b, now); /* no node: straight to the end */
}

static void on_sent(struct check_bench *b, size_t i, size_t k, const cJSON *m)
{
    struct check_bench_xfer *x;
    if (k >= b->nx || b->x[k].src != i || b->x[k].done) return;
    x = &b->x[k];
    x->done = true;
    /* figures in the ranges a TCP transfer can have: anything else is no figure */
    if (!json_real_in(cJSON_GetObjectItemCaseSensitive(m, "gbps"), 0, 1e6, &x->gbps)) x->gbps = -1;
    if (!json_real_in(cJSON_GetObjectItemCaseSensitive(m, "seconds"), 0, 600, &x->seconds)) x->seconds = -1;
    if (!json_real_in(cJSON_GetObjectItemCaseSensitive(m, "rtt_us"), 0, 6e8, &x->rtt_us)) x->rtt_us = -1;
    if (!json_real_in(cJSON_GetObjectItemCaseSensitive(m, "bytes"), 0, 1e15, &x->bytes)) x->bytes = -1;
    x->error = check_bench_agent_text(cJSON_GetObjectItemCaseSensitive(m, "error"));
    if (!x->error && x->gbps < 0) x->error = xstrdup("no figure in the answer");
}

static void on_host(struct check_bench *b, size_t i, const cJSON *m)
{
    struct check_bench_host *h = &b->host[i];
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(m, "gpus");
    if (!h->asked || h->done) return;
    h->done = true;
    if (!json_real_in(cJSON_GetObjectItemCaseSensitive(m, "cpu_mem_gbs"), 0, 1e6, &h->cpu_mem_gbs)) h->cpu_mem_gbs = -1;
    /* at most CHECK_GPUS_MAX GPUs are looked at: the list is remote and bounded like the facts' */
    if (cJSON_IsArray(g) && cJSON_GetArraySize(g) <= CHECK_GPUS_MAX) h->gpus = cJSON_Duplicate(g, 1);
    h->gpu_error = check_bench_agent_text(cJSON_GetObjectItemCaseSensitive(m, "gpu_error"));
    h->nccl = check_bench_agent_text(cJSON_GetObjectItemCaseSensitive(m, "nccl"));
    h->error = check_bench_agent_text(cJSON_GetObjectItemCaseSensitive(m, "error"));
}

void check_bench_message(struct check_bench *b, size_t i, const struct wire_msg *m)
{
    if (i >= b->n) return;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(m->json, "error");
    if (m->tag >= CHECK_BENCH_NCCL_TAG) {
        check_bench_nccl_message(b->nccl, i, m, mono_ms());
    } else if (m->tag == CHECK_BENCH_NCCL_STOP_TAG) {
        /* the stopped measurement answers for itself */
    } else if (m->tag == TAG_DCGMI) {
        check_bench_dcgmi_message(b->dcgmi, i, m);
    } else if (m->tag >= TAG_XFER) {
        on_sent(b, i, (size_t)(m->tag - TAG_XFER), m->json);
    } else if (m->tag == TAG_LISTEN && b->phase == PH_LISTEN && b->port[i] == 0) {
        int port;
        if (!err && json_int_in_i(cJSON_GetObjectItemCaseSensitive(m->json, "port"), 1, 65535, &port)) {
            b->port[i] = port;
        } else {
            b->port[i] = -1;
            b->listen_err[i] = err ? check_bench_agent_text(err) : xstrdup("no port in the answer");
        }
    } else if (m->tag == TAG_HOST) {
        if (strcmp(m->ev, WIRE_EV_ERROR) == 0 && !b->host[i].done) {
            b->host[i].done = true;
            b->host[i].error = check_bench_agent_text(err);
            if (!b->host[i].error) b->host[i].error = xstrdup("refused");
        } else {
            on_host(b, i, m->json);
        }
    }
    advance(b, mono_ms());
}

void check_bench_node_lost(struct check_bench *b, size_t i, const char *why)
{
    if (i >= b->n || !b->alive[i]) return;
    b->alive[i] = false;
    if (b->port[i] == 0) b->port[i] = -1;
    for (size_t k = 0; k < b->nx; k++)
        if (b->x[k].sent && (b->x[k].src == i || b->x[k].dst == i)) xfer_fail(&b->x[k], why);
    if (b->host[i].asked && !b->host[i].done) {
        b->host[i].done = true;
        b->host[i].error = xstrdup(why);
    }
    check_bench_dcgmi_fail(b->dcgmi, i, why);
    check_bench_nccl_node_lost(b->nccl, i, why, mono_ms());
    advance(b, mono_ms());
}

void check_bench_step(struct check_bench *b, int64_t now)
{
    check_bench_dcgmi_step(b->dcgmi, now);
    if (b->phase == PH_NCCL) {
        check_bench_nccl_step(b->nccl, now);
        advance(b, now);
        return;
    }
    if (b->phase == PH_DCGMI) {
        advance(b, now);
        return;
    }
    if (!b->deadline || now < b->deadline) return;
    if (b->phase == PH_LISTEN) {
        for (size_t i = 0; i < b->n; i++)
            if (b->alive[i] && b->port[i] == 0) {
                b->port[i] = -1;
                b->listen_err[i] = xstrdup("no answer to bench_listen in time");
            }
    } else if (b->phase == PH_ROUNDS) {
        /* the sender did not answer in time (its own bounds are seconds + 8 s): it is taken as
         * gone for the rest of the bench, so a stopped node costs one round's wait, not one a
         * round */
        for (size_t k = 0; k < b->nx; k++)
            if (b->x[k].round == b->round && b->x[k].sent && !b->x[k].done) {
                xfer_fail(&b->x[k], "no answer in time");
                b->alive[b->x[k].src] = false;
            }
    } else if (b->phase == PH_HOST) {
        for (size_t i = 0; i < b->n; i++)
            if (b->host[i].asked && !b->host[i].done) {
                b->host[i].done = true;
                b->host[i].error = xstrdup("no answer to bench_host in time");
            }
    }
    advance(b, now);
}

int64_t check_bench_deadline_ms(const struct check_bench *b)
{
    if (b->phase == PH_DONE) return 0;
    if (b->phase == PH_NCCL) return check_bench_nccl_deadline(b->nccl);
    if (b->phase == PH_DCGMI) return check_bench_dcgmi_deadline(b->dcgmi);
    return b->deadline;
}

bool check_bench_done(const struct check_bench *b)
{
    return b->phase == PH_DONE;
}

const char *check_bench_phase(const struct check_bench *b)
{
    if (b->phase == PH_NCCL) return check_bench_nccl_phase(b->nccl);
    if (b->phase == PH_DCGMI) return "bench: dcgmi diag -r 1";
    return b->phase_text;
}

const struct check_bench_nccl *check_bench_nccl_part(const struct check_bench *b)
{
    return b->nccl;
}

const cJSON *check_bench_dcgmi(const struct check_bench *b, size_t i)
{
    return check_bench_dcgmi_answer(b->dcgmi, i);
}

const struct check_bench_xfer *check_bench_xfers(const struct check_bench *b, size_t *n, int *rounds)
{
    *n = b->nx;
    *rounds = b->rounds;
    return b->x;
}

const struct check_bench_host *check_bench_hosts(const struct check_bench *b)
{
    return b->host;
}

const bool *check_bench_took_part(const struct check_bench *b)
{
    return b->took;
}

const struct node_opts *check_bench_opts(const struct check_bench *b)
{
    return b->o;
}

size_t check_bench_nodes(const struct check_bench *b)
{
    return b->n;
}
