/* The preflight (preflight.h): per node, hello -> {CLOCK_SAMPLES clock round trips, facts,
 * listen (and the master port on node 0)} at once -> wait for the others -> connects to peers ->
 * done. The three questions overlap (issue 22): the first clock request, facts and listen go
 * together at the greeting and the clock's round trips follow while the agent works on facts
 * (the sample with the shortest round trip is the one used, so one that waited is no loss).
 * The controller owns the connections and the agent client; this file owns what is asked and
 * what the answers mean. Every request has a deadline; a node that misses one is marked in the
 * ssh column and skipped for the rest, and the others go on. */
#include "preflight.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "check_bench.h"
#include "check_eval.h"
#include "check_mesh.h"
#include "clock_est.h"
#include "hosts/hostfile.h"
#include "ssh/agent_kit.h"
#include "util/util.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

#define CLOCK_SAMPLES 8

/* The preflight's request tags (wire/client.h); a connect's tag adds its index in p->tcp. */
enum {
    TAG_FACTS = WIRE_TAG_CHECK,
    TAG_CLOCK,
    TAG_LISTEN,
    TAG_LISTEN_MASTER,
    TAG_UNLISTEN,
    TAG_CONNECT = WIRE_TAG_CHECK + 100,
};

/* NP_ASKING: facts, clock and listen in flight, in any order of completion */
enum node_phase { NP_CONNECTING, NP_ASKING, NP_TCP_WAIT, NP_TCP, NP_DONE };

struct pf_node {
    const struct host *h;
    enum node_phase phase;
    bool alive;                    /* the agent greeted and answers */
    bool tested_tcp;
    int64_t wait_deadline;         /* for the request in flight; 0: none */
    char *address;
    cJSON *facts;
    struct clock_sample samples[CLOCK_SAMPLES];
    size_t n_samples, clocks_out;  /* answered; asked and not yet answered */
    int64_t sent_wall[CLOCK_SAMPLES], sent_mono[CLOCK_SAMPLES];
    bool facts_wait;               /* facts asked, not answered */
    int listens_pending;
    int eph_port;
    char *listen_err, *master_err;
    size_t conns_pending;
    char *spec;                    /* NCCL_SOCKET_IFNAME in force */
    char *machine;                 /* the hello's boot_id: nodes with one are one machine */
    char *nonce;
};

struct preflight {
    const struct node_opts *o;
    struct preflight_io io;
    struct check_report r;
    struct pf_node *nodes;
    size_t n;
    char *master_nonce;
    struct check_tcp_result *tcp;
    size_t n_tcp;
    bool tcp_started, evaluated, dirty;
    int64_t tcp_deadline;
    struct check_bench *bench;     /* --bench, once the tcp phase is over (check_bench.h) */
    const char **bench_addr;
};

static void logv(struct preflight *p, const char *host, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void logv(struct preflight *p, const char *host, const char *fmt, ...)
{
    va_list ap;
    if (!p->o->verbose) return;
    fprintf(stderr, "ddptop: %s: ", host);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* What a node is waiting for, for "no answer to the ... request in time": the first of the
 * questions still open, in the order they were asked of old. */
static const char *node_waits_for(const struct pf_node *nd)
{
    if (nd->phase == NP_CONNECTING) return "hello";
    if (nd->phase == NP_TCP) return "connect";
    if (nd->facts_wait) return "facts";
    if (nd->n_samples < CLOCK_SAMPLES) return "clock";
    if (nd->listens_pending) return "listen";
    return "";
}

static int64_t stage_ms(const struct preflight *p)
{
    return (int64_t)p->o->ssh.timeout_s * 1000;
}

static cJSON *request(struct preflight *p, size_t i, const char *op, int tag)
{
    return p->io.request(p->io.ctx, i, op, tag);
}

static void send_msg(struct preflight *p, size_t i, cJSON *m)
{
    p->io.send(p->io.ctx, i, m);
}

/* ---- nodes ------------------------------------------------------------------------------ */

static void node_lost(struct preflight *p, size_t i, const char *why)
{
    struct pf_node *nd = &p->nodes[i];
    if (!nd->alive) return;
    check_result_setf(&p->r.rows[i].checks[CHECK_SSH], CHECK_FAIL,
                      "run ddptop-agent on the node by hand over ssh to see what it does",
                      "ddptop-agent on %s: %s", nd->h->name, why);
    logv(p, nd->h->name, "%s", why);
    nd->alive = false;
    nd->phase = NP_DONE;
    nd->wait_deadline = 0;
    if (p->bench) check_bench_node_lost(p->bench, i, why);
    p->dirty = true;
}

void preflight_node_connecting(struct preflight *p, size_t i, const char *address, int port)
{
    struct pf_node *nd = &p->nodes[i];
    free(nd->address);
    nd->address = xstrdup(address);
    check_row_set_host(&p->r.rows[i], nd->h->name, address, port);
    logv(p, nd->h->name, "connecting to %s port %d", address, port);
    p->dirty = true;
}

void preflight_node_down(struct preflight *p, size_t i, const char *error, const char *hint)
{
    struct pf_node *nd = &p->nodes[i];
    /* done with its checks, but the bench may still be asking it */
    if (nd->phase == NP_DONE && !(p->bench && nd->alive && !p->evaluated)) return;
    if (nd->alive) {
        node_lost(p, i, error ? error : "connection closed");
        return;
    }
    check_result_set(&p->r.rows[i].checks[CHECK_SSH], CHECK_FAIL, error ? error : "connection closed", hint);
    logv(p, nd->h->name, "%s", error ? error : "connection closed");
    nd->phase = NP_DONE;
    p->dirty = true;
}

static const char *env_value(const struct node_opts *o, const struct host *h, const char *key)
{
    const char *v = host_env_get(h, key);
    for (size_t i = 0; !v && i < o->n_env; i++)
        if (strcmp(o->env[i].key, key) == 0) v = o->env[i].value;
    return v;
}

static void send_facts(struct preflight *p, size_t i)
{
    struct pf_node *nd = &p->nodes[i];
    cJSON *m = request(p, i, WIRE_OP_FACTS, TAG_FACTS), *env;
    if (p->o->n_cmd) cJSON_AddStringToObject(m, "cmd", p->o->cmd[0]);
    else cJSON_AddNullToObject(m, "cmd");
    env = cJSON_AddObjectToObject(m, "env");
    /* hostfile keys win over --env */
    for (size_t k = 0; k < nd->h->n_env; k++) cJSON_AddStringToObject(env, nd->h->env[k].key, nd->h->env[k].value);
    for (size_t k = 0; k < p->o->n_env; k++)
        if (!host_env_get(nd->h, p->o->env[k].key) && !cJSON_GetObjectItemCaseSensitive(env, p->o->env[k].key))
            cJSON_AddStringToObject(env, p->o->env[k].key, p->o->env[k].value);
    send_msg(p, i, m);
    nd->facts_wait = true;
}

static void send_clock(struct preflight *p, size_t i)
{
    struct pf_node *nd = &p->nodes[i];
    size_t k = nd->n_samples + nd->clocks_out++;
    nd->sent_wall[k] = wall_ns();
    nd->sent_mono[k] = mono_ns();
    send_msg(p, i, request(p, i, WIRE_OP_CLOCK, TAG_CLOCK));
}

/* Every question answered: the node waits for the others before the connects. */
static void node_asked(struct preflight *p, size_t i)
{
    struct pf_node *nd = &p->nodes[i];
    if (nd->phase != NP_ASKING || nd->facts_wait || nd->n_samples < CLOCK_SAMPLES || nd->listens_pending) return;
    nd->phase = NP_TCP_WAIT;
    nd->tested_tcp = true;
    nd->wait_deadline = 0;
}

/* The deadline while questions are open: facts may import torch or run nvidia-smi, slower
 * than a round trip. */
static void ask_deadline(struct preflight *p, size_t i)
{
    struct pf_node *nd = &p->nodes[i];
    nd->wait_deadline = mono_ms() + (nd->facts_wait ? 3 : 1) * stage_ms(p);
}

static void send_listen(struct preflight *p, size_t i)
{
    struct pf_node *nd = &p->nodes[i];
    cJSON *m = request(p, i, WIRE_OP_LISTEN, TAG_LISTEN);
    cJSON_AddNumberToObject(m, "port", 0);
    cJSON_AddStringToObject(m, "nonce", nd->nonce);
    send_msg(p, i, m);
    nd->listens_pending = 1;
    nd->eph_port = 0;
    if (i == 0) {
        m = request(p, i, WIRE_OP_LISTEN, TAG_LISTEN_MASTER);
        cJSON_AddNumberToObject(m, "port", p->o->master_port);
        cJSON_AddStringToObject(m, "nonce", p->master_nonce);
        send_msg(p, i, m);
        nd->listens_pending = 2;
    }
}

/* Which agent the node runs and why (docs/check.md, "Which nodes"): where the kind of
 * transport probes the node (over SSH), the one of its `uname -m` among the kit's; through srun
 * or pbs_tmrsh this machine's own.
 * " (ddptop-agent-aarch64 for its uname -m; needs glibc 2.27, has 2.31)" into out, the same
 * as JSON into f's "agent". */
static void agent_words(const struct preflight *p, const char *arch, const char *glibc, struct strbuf *out,
                        cJSON *f)
{
    const struct agent_kit *k = agent_kit_get(p->o->ssh.agent_local);
    bool probes = p->o->transport.kind->probes;
    const struct agent_kit_entry *e = probes ? agent_kit_find(k, arch) : NULL;
    const char *file = e ? strrchr(e->path, '/') : k->native ? strrchr(k->native, '/') : NULL;
    const char *need = e ? e->glibc : NULL;
    cJSON *a = cJSON_AddObjectToObject(f, "agent");
    file = file ? file + 1 : e ? e->path : k->native;
    strbuf_addf(out, " (%s%s", file ? file : "ddptop-agent", probes ? " for its uname -m" : " of this machine");
    if (need && *need) strbuf_addf(out, "; needs glibc %s", need);
    if (glibc) strbuf_addf(out, "%shas %s", need && *need ? ", " : "; glibc ", glibc);
    strbuf_adds(out, ")");
    cJSON_AddStringToObject(a, "arch", arch ? arch : "");
    if (file) cJSON_AddStringToObject(a, "file", file);
    else cJSON_AddNullToObject(a, "file");
    cJSON_AddStringToObject(a, "chosen_by", probes ? "uname -m" : "this machine's architecture");
    if (need && *need) cJSON_AddStringToObject(a, "glibc_needed", need);
    else cJSON_AddNullToObject(a, "glibc_needed");
    if (glibc) cJSON_AddStringToObject(a, "glibc", glibc);
    else cJSON_AddNullToObject(a, "glibc");
}

/* The ssh column: who we are on the node, the agent, and how long its login shell took. */
static void ssh_verdict(struct preflight *p, size_t i, const struct preflight_link *l, const cJSON *hello)
{
    struct check_result *res = &p->r.rows[i].checks[CHECK_SSH];
    const char *ver = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hello, "version"));
    const char *arch = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hello, "arch"));
    const char *glibc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hello, "glibc"));
    const char *host = p->nodes[i].h->name, *through = p->o->transport.kind->through;
    char login[64] = "";
    bool slow = l->login_ms > PREFLIGHT_SLOW_LOGIN_MS;
    const char *how = l->upload_method;
    const char *note = !l->uploaded ? "" : how && strcmp(how, "exec") == 0 ? " (uploaded over exec: no sftp subsystem)"
                                                                            : " (uploaded)";
    struct strbuf which;
    cJSON *f = check_result_fields(res);
    strbuf_init(&which);
    agent_words(p, arch, glibc && strlen(glibc) < 16 ? glibc : NULL, &which, f);
    if (l->login_ms >= 0) snprintf(login, sizeof login, ", login shell %.1f s", (double)l->login_ms / 1000);
    if (through)
        check_result_setf(res, CHECK_PASS, NULL, "%s@%s through %s, agent %s %s%s", l->user, l->address, through,
                          ver ? ver : "?", arch ? arch : "?", which.buf);
    else if (slow)
        check_result_setf(res, CHECK_WARN,
                          "a slow ~/.bashrc, ~/.profile or /etc/profile (conda, pyenv, environment modules) delays "
                          "every login: time `ssh HOST true` and make it faster for non-interactive shells",
                          "%s@%s:%d: the login shell took %.1f s to start the agent (above %d s)", l->user,
                          l->address, l->port, (double)l->login_ms / 1000, PREFLIGHT_SLOW_LOGIN_MS / 1000);
    else
        check_result_setf(res, CHECK_PASS, NULL, "%s@%s:%d, agent %s %s%s%s%s", l->user, l->address, l->port,
                          ver ? ver : "?", arch ? arch : "?", which.buf, note, login);
    strbuf_done(&which);
    cJSON_AddBoolToObject(f, "agent_uploaded", l->uploaded);
    if (l->uploaded && how) cJSON_AddStringToObject(f, "agent_upload", how);
    else cJSON_AddNullToObject(f, "agent_upload");
    if (l->login_ms >= 0) cJSON_AddNumberToObject(f, "login_shell_ms", (double)l->login_ms);
    else cJSON_AddNullToObject(f, "login_shell_ms");
    logv(p, host, "agent ready%s%s", note, login);
}

void preflight_node_up(struct preflight *p, size_t i, const struct preflight_link *l, const cJSON *hello)
{
    struct pf_node *nd = &p->nodes[i];
    if (nd->phase != NP_CONNECTING) return;
    free(nd->address);
    nd->address = xstrdup(l->address);
    nd->alive = true;
    const char *boot = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hello, "boot_id"));
    free(nd->machine);
    nd->machine = boot && strlen(boot) < 64 ? xstrdup(boot) : NULL; /* older agents: none */
    if (p->o->transport.kind->through) check_row_set_host(&p->r.rows[i], nd->h->name, l->address, 0);
    ssh_verdict(p, i, l, hello);
    /* The agent serves them in this order: the first clock sample before facts keeps its round
     * trip short. Where the nodes share one step (srun), every request reaches every node's
     * stdin over srun's TCP connections, where Nagle's algorithm and delayed ACKs hold a small
     * write back up to 40 ms whenever the previous one is unacknowledged: there all
     * CLOCK_SAMPLES go at once (the first answer is a round trip of its own; the shortest is
     * used), not one per round trip. */
    nd->phase = NP_ASKING;
    send_clock(p, i);
    send_facts(p, i);
    if (transport_kind_shares_step(p->o->transport.kind))
        while (nd->n_samples + nd->clocks_out < CLOCK_SAMPLES) send_clock(p, i);
    send_listen(p, i);
    ask_deadline(p, i);
    p->dirty = true;
}

/* The node's basics for --json's "node": what decides which agent and binaries run there. */
static void node_basics(struct check_row *row, const cJSON *facts)
{
    static const char *const keys[][2] = {{"arch", "arch"}, {"libc", "glibc"}, {"kernel", "kernel"}, {"os", "os"}};
    cJSON_Delete(row->node);
    row->node = cJSON_CreateObject();
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(facts, keys[k][0]));
        if (v) cJSON_AddStringToObject(row->node, keys[k][1], v);
        else cJSON_AddNullToObject(row->node, keys[k][1]);
    }
}

static void on_facts(struct preflight *p, size_t i, const cJSON *m)
{
    struct pf_node *nd = &p->nodes[i];
    const char *spec = env_value(p->o, nd->h, "NCCL_SOCKET_IFNAME");
    if (!spec)
        spec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(m, "nccl_env"), "NCCL_SOCKET_IFNAME"));
    nd->spec = spec ? xstrdup(spec) : NULL;
    nd->facts = cJSON_Duplicate(m, true);
    nd->facts_wait = false;
    node_basics(&p->r.rows[i], m);
    check_eval_gpu(&p->r.rows[i].checks[CHECK_GPU], m, nd->h->slots);
    ask_deadline(p, i);
}

static void on_clock(struct preflight *p, size_t i, const char *line)
{
    struct pf_node *nd = &p->nodes[i];
    size_t k = nd->n_samples;
    int64_t recv_wall = wall_ns(), rtt = mono_ns() - nd->sent_mono[k];
    /* parsed from the text: a double cannot hold nanoseconds since 1970 exactly. Digits only,
     * in range (no sign, no exponent): clock_est subtracts our time from it. */
    const char *s = strstr(line, "\"wall_ns\":");
    char *end = NULL;
    long long remote = -1;
    if (s && s[10] >= '0' && s[10] <= '9') {
        errno = 0;
        remote = strtoll(s + 10, &end, 10);
        if (errno || (*end != ',' && *end != '}' && *end != ' ')) remote = -1;
    }
    if (remote < 0) {
        char why[80];
        snprintf(why, sizeof why, "clock answer without a usable wall_ns (%.24s)", s ? s + 10 : "none");
        node_lost(p, i, why);
        return;
    }
    nd->clocks_out--;
    nd->samples[nd->n_samples++] = (struct clock_sample){
        .local_send_ns = nd->sent_wall[k], .local_recv_ns = recv_wall, .remote_ns = remote, .rtt_ns = rtt};
    if (nd->n_samples + nd->clocks_out < CLOCK_SAMPLES) send_clock(p, i);
    if (nd->n_samples == CLOCK_SAMPLES)
        check_eval_clock(&p->r.rows[i].checks[CHECK_CLOCK], nd->samples, nd->n_samples, p->o->max_skew_ms);
    ask_deadline(p, i);
}

static void on_listen(struct preflight *p, size_t i, const cJSON *m, int tag)
{
    struct pf_node *nd = &p->nodes[i];
    bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "ok"));
    const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error"));
    const cJSON *port = cJSON_GetObjectItemCaseSensitive(m, "port");
    if (!ok) err = err ? err : "failed";
    if (tag == TAG_LISTEN_MASTER) {
        if (!ok) nd->master_err = xstrdup(err);
    } else if (ok && json_int_in_i(port, 1, 65535, &nd->eph_port)) {
        /* the ephemeral port the peers will connect to */
    } else if (ok && port) {
        char text[32];
        nd->listen_err = xasprintf("the agent answered port %s, not a port; ignored", json_num_text(port, text, sizeof text));
    } else {
        nd->listen_err = xstrdup(err ? err : "no port in the answer");
    }
    --nd->listens_pending;
}

static void on_connect(struct preflight *p, size_t i, const cJSON *m, int tag)
{
    size_t k = (size_t)(tag - TAG_CONNECT);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(m, "ms");
    const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error"));
    struct check_tcp_result *t;
    if (k >= p->n_tcp || p->tcp[k].src != i || p->tcp[k].done) return;
    t = &p->tcp[k];
    t->done = true;
    t->ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "ok"));
    /* a handshake time: finite and under the connect's longest timeout (600 s) */
    if (!json_real_in(ms, 0, 600000, &t->ms)) t->ms = 0;
    t->error = xstrdup(err ? err : t->ok ? "" : "failed");
    if (--p->nodes[i].conns_pending == 0) p->nodes[i].phase = NP_DONE;
}

void preflight_node_message(struct preflight *p, size_t i, const struct wire_msg *m, const char *line)
{
    struct pf_node *nd = &p->nodes[i];
    if (!nd->alive || p->evaluated) return;
    p->dirty = true;
    if (m->tag >= CHECK_BENCH_TAG) {
        if (p->bench) {
            char before[64];
            snprintf(before, sizeof before, "%s", check_bench_phase(p->bench));
            check_bench_message(p->bench, i, m); /* its errors too: they end a transfer */
            if (strcmp(before, check_bench_phase(p->bench)) != 0) logv(p, "check", "%s", check_bench_phase(p->bench));
        }
        return;
    }
    if (m->tag >= TAG_CONNECT) {
        on_connect(p, i, m->json, m->tag); /* an "error" answer is a failed connect too */
    } else if (strcmp(m->ev, WIRE_EV_ERROR) == 0) {
        const char *e = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m->json, "error"));
        const char *what = m->tag == TAG_FACTS ? "facts" : m->tag == TAG_CLOCK ? "clock"
                           : m->tag == TAG_LISTEN || m->tag == TAG_LISTEN_MASTER ? "listen" : node_waits_for(nd);
        char why[300];
        snprintf(why, sizeof why, "refused the %s request: %s", what, e ? e : "?");
        node_lost(p, i, why);
    } else if (nd->phase != NP_ASKING) {
        /* a late answer of a node past its questions: nothing to do */
    } else if (nd->facts_wait && m->tag == TAG_FACTS && strcmp(m->ev, WIRE_EV_FACTS) == 0) {
        on_facts(p, i, m->json);
    } else if (nd->clocks_out && m->tag == TAG_CLOCK && strcmp(m->ev, WIRE_EV_CLOCK) == 0) {
        on_clock(p, i, line);
    } else if (nd->listens_pending && (m->tag == TAG_LISTEN || m->tag == TAG_LISTEN_MASTER) &&
               strcmp(m->ev, WIRE_EV_LISTEN) == 0) {
        on_listen(p, i, m->json, m->tag);
    }
    if (nd->alive) node_asked(p, i);
}

/* ---- the tcp phase ------------------------------------------------------------------------ */

static void tcp_add(struct preflight *p, size_t src, size_t dst, int port, bool rdv)
{
    /* doubling: a full mesh of 1,024 nodes is a million pairs */
    if ((p->n_tcp & (p->n_tcp - 1)) == 0) p->tcp = xrealloc(p->tcp, (p->n_tcp ? 2 * p->n_tcp : 1) * sizeof *p->tcp);
    p->tcp[p->n_tcp++] = (struct check_tcp_result){.src = src, .dst = dst, .port = port, .rendezvous = rdv};
}

/* A seed that fits a JSON number exactly and --mesh-seed's range. */
static long new_seed(void)
{
    uint32_t x;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) x = (uint32_t)(wall_ns() ^ (int64_t)getpid());
    return (long)(x & 0x7fffffff);
}

static void tcp_begin(struct preflight *p)
{
    size_t *alive = xcalloc(p->n ? p->n : 1, sizeof *alive), na = 0, np;
    struct check_pair *pairs = NULL;
    struct check_report_mesh *mesh = &p->r.mesh;
    int timeout_ms = stage_ms(p) < 3000 ? (int)stage_ms(p) : 3000;
    p->tcp_started = true;
    p->dirty = true;
    for (size_t i = 0; i < p->n; i++)
        if (p->nodes[i].alive && p->nodes[i].phase == NP_TCP_WAIT && !p->nodes[i].listen_err) alive[na++] = i;
    /* The plan is over the nodes that got here, in hostfile order: with every node alive, the
     * same hostfile and seed give the same pairs (--mesh-seed). */
    mesh->seed = p->o->mesh_seed >= 0 ? p->o->mesh_seed : new_seed();
    mesh->requested = check_mesh_mode_name(p->o->mesh);
    mesh->mode = check_mesh_mode_name(check_mesh_resolve(p->o->mesh, na));
    np = check_mesh_pairs(na, p->o->mesh, (uint64_t)mesh->seed, &pairs);
    mesh->nodes = na;
    mesh->pairs = np;
    mesh->pairs_all = na * (na ? na - 1 : 0);
    mesh->min_probed_by = check_mesh_min_in(na, pairs, np);
    for (size_t k = 0; k < np; k++)
        tcp_add(p, alive[pairs[k].src], alive[pairs[k].dst], p->nodes[alive[pairs[k].dst]].eph_port, false);
    if (na && alive[0] == 0 && !p->nodes[0].master_err)
        for (size_t k = 0; k < na; k++) tcp_add(p, alive[k], 0, p->o->master_port, true);
    mesh->rendezvous = p->n_tcp - np;
    logv(p, "tcp", "%s mesh of %zu nodes: %zu pairs, %zu to the rendezvous port (seed %ld)", mesh->mode, na, np,
         mesh->rendezvous, mesh->seed);
    for (size_t k = 0; k < p->n_tcp; k++) {
        struct check_tcp_result *t = &p->tcp[k];
        cJSON *m = request(p, t->src, WIRE_OP_CONNECT, TAG_CONNECT + (int)k);
        cJSON_AddStringToObject(m, "addr", p->nodes[t->dst].address);
        cJSON_AddNumberToObject(m, "port", t->port);
        cJSON_AddStringToObject(m, "nonce", t->rendezvous ? p->master_nonce : p->nodes[t->dst].nonce);
        cJSON_AddNumberToObject(m, "timeout_ms", timeout_ms);
        send_msg(p, t->src, m);
        p->nodes[t->src].conns_pending++;
    }
    /* nodes that never got here (listen failed, not alive) are done as they are */
    for (size_t i = 0; i < p->n; i++) {
        struct pf_node *nd = &p->nodes[i];
        if (nd->phase == NP_TCP_WAIT) nd->phase = nd->conns_pending ? NP_TCP : NP_DONE;
    }
    p->tcp_deadline = mono_ms() + timeout_ms + stage_ms(p);
    free(alive);
    free(pairs);
}

void preflight_step(struct preflight *p, int64_t now)
{
    bool ready = true;
    for (size_t i = 0; i < p->n; i++) {
        struct pf_node *nd = &p->nodes[i];
        if (nd->alive && nd->wait_deadline && now >= nd->wait_deadline) {
            char why[160];
            snprintf(why, sizeof why, "no answer to the %s request in time", node_waits_for(nd));
            node_lost(p, i, why);
        }
        if (nd->phase < NP_TCP_WAIT) ready = false;
    }
    if (!p->tcp_started && ready) {
        tcp_begin(p);
    } else if (p->tcp_started && now >= p->tcp_deadline) {
        for (size_t i = 0; i < p->n; i++)
            if (p->nodes[i].phase == NP_TCP) p->nodes[i].phase = NP_DONE; /* unanswered: "no answer" */
    }
    if (p->bench) {
        const char *was = check_bench_phase(p->bench);
        char before[64];
        snprintf(before, sizeof before, "%s", was);
        check_bench_step(p->bench, now);
        if (strcmp(before, check_bench_phase(p->bench)) != 0) logv(p, "check", "%s", check_bench_phase(p->bench));
    }
}

int64_t preflight_deadline_ms(const struct preflight *p)
{
    int64_t d = p->tcp_started && !p->evaluated ? p->tcp_deadline : 0;
    int64_t bd = p->bench && !p->evaluated ? check_bench_deadline_ms(p->bench) : 0;
    if (bd && (!d || bd < d)) d = bd;
    for (size_t i = 0; i < p->n; i++) {
        int64_t w = p->nodes[i].alive ? p->nodes[i].wait_deadline : 0;
        if (w && (!d || w < d)) d = w;
    }
    return d;
}

/* ---- the verdicts ------------------------------------------------------------------------- */

static bool is_loopback(const char *addr)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (!addr) return false;
    if (strcmp(addr, "localhost") == 0) return true;
    if (inet_pton(AF_INET, addr, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, addr, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

static void evaluate_all(struct preflight *p)
{
    struct check_node_info *info = xcalloc(p->n ? p->n : 1, sizeof *info);
    bool *tested = xcalloc(p->n ? p->n : 1, sizeof *tested);
    const char **lerr = xcalloc(p->n ? p->n : 1, sizeof *lerr);
    for (size_t i = 0; i < p->n; i++) {
        struct pf_node *nd = &p->nodes[i];
        info[i] = (struct check_node_info){.name = nd->h->name, .facts = nd->facts, .ifname_spec = nd->spec,
                                           .loopback = is_loopback(nd->address), .slots = nd->h->slots};
        tested[i] = nd->tested_tcp;
        lerr[i] = nd->listen_err;
    }
    check_eval_env(&p->r, info, p->n, p->o->n_cmd > 0);
    check_eval_nccl(&p->r, info, p->n);
    check_eval_tcp(&p->r, info, p->n, tested, lerr, p->n ? p->nodes[0].master_err : NULL, p->o->master_port,
                   p->tcp, p->n_tcp);
    if (p->bench) {
        const char **names = xcalloc(p->n ? p->n : 1, sizeof *names);
        for (size_t i = 0; i < p->n; i++) names[i] = p->nodes[i].h->name;
        check_bench_evaluate(p->bench, &p->r, names);
        free(names);
    }
    for (size_t i = 0; i < p->n; i++) {
        bool ssh_failed = p->r.rows[i].checks[CHECK_SSH].status == CHECK_FAIL;
        for (int k = 0; k < CHECK_KINDS; k++) {
            struct check_result *res = &p->r.rows[i].checks[k];
            if (res->status == CHECK_PENDING)
                check_result_set(res, CHECK_SKIP, ssh_failed ? "not run: ssh failed" : "not run", NULL);
        }
    }
    free(info);
    free(tested);
    free(lerr);
    p->evaluated = true;
    p->dirty = true;
}

/* The agents stay for the run: the check's listeners must go, or the rendezvous store could
 * not bind --master-port on node 0. Requests are served in order, so they are gone before any
 * spawn request that follows on the same connection. */
static void unlisten_all(struct preflight *p)
{
    for (size_t i = 0; i < p->n; i++) {
        struct pf_node *nd = &p->nodes[i];
        cJSON *m;
        if (!nd->alive || !nd->tested_tcp) continue;
        if (nd->eph_port > 0) {
            m = request(p, i, WIRE_OP_UNLISTEN, TAG_UNLISTEN);
            cJSON_AddNumberToObject(m, "port", nd->eph_port);
            send_msg(p, i, m);
        }
        if (i == 0 && !nd->master_err) {
            m = request(p, i, WIRE_OP_UNLISTEN, TAG_UNLISTEN);
            cJSON_AddNumberToObject(m, "port", p->o->master_port);
            send_msg(p, i, m);
        }
    }
}

/* --bench: the measured preflight over the nodes that passed the checks so far. */
static void bench_begin(struct preflight *p)
{
    bool *alive = xcalloc(p->n ? p->n : 1, sizeof *alive);
    const char **machines = xcalloc(p->n ? p->n : 1, sizeof *machines);
    p->bench_addr = xcalloc(p->n ? p->n : 1, sizeof *p->bench_addr);
    for (size_t i = 0; i < p->n; i++) {
        alive[i] = p->nodes[i].alive && p->nodes[i].address;
        p->bench_addr[i] = p->nodes[i].address;
        machines[i] = p->nodes[i].machine;
    }
    struct check_bench_io io = {.ctx = p->io.ctx, .request = p->io.request, .send = p->io.send};
    p->bench = check_bench_new(p->o, p->n, alive, p->bench_addr,
                               (uint64_t)(p->r.mesh.seed >= 0 ? p->r.mesh.seed : 0), &io);
    check_bench_set_machines(p->bench, machines);
    free(machines);
    p->r.bench = true; /* the column shows while it runs */
    p->dirty = true;
    free(alive);
    check_bench_start(p->bench, mono_ms());
    logv(p, "check", "%s", check_bench_phase(p->bench));
}

bool preflight_done(struct preflight *p)
{
    if (p->evaluated) return true;
    for (size_t i = 0; i < p->n; i++)
        if (p->nodes[i].phase != NP_DONE) return false;
    if (p->o->bench) {
        if (!p->bench) bench_begin(p);
        if (!check_bench_done(p->bench)) return false;
    }
    unlisten_all(p);
    evaluate_all(p);
    return true;
}

const struct check_report *preflight_report(const struct preflight *p)
{
    return &p->r;
}

bool preflight_take_dirty(struct preflight *p)
{
    bool d = p->dirty;
    p->dirty = false;
    return d;
}

int preflight_gpu_count(const struct preflight *p, size_t i)
{
    const cJSON *f = i < p->n ? p->r.rows[i].checks[CHECK_GPU].fields : NULL;
    const cJSON *cnt = f ? cJSON_GetObjectItemCaseSensitive(f, "count") : NULL;
    int n;
    return json_int_in_i(cnt, 0, CHECK_GPUS_MAX, &n) ? n : -1;
}

void preflight_nccl_expect(const struct preflight *p, size_t i, char *ifaces, size_t cap, int *ib_ports)
{
    const cJSON *f = i < p->n ? p->r.rows[i].checks[CHECK_NCCL].fields : NULL;
    const cJSON *sel = f ? cJSON_GetObjectItemCaseSensitive(f, "selected") : NULL;
    const cJSON *ib = f ? cJSON_GetObjectItemCaseSensitive(f, "ib") : NULL, *e;
    size_t k = 0;
    ifaces[0] = '\0';
    *ib_ports = -1;
    cJSON_ArrayForEach(e, sel) {
        if (!cJSON_IsString(e)) continue;
        int w = snprintf(ifaces + k, cap - k, "%s%s", k ? "," : "", e->valuestring);
        if (w < 0 || (size_t)w >= cap - k) break;
        k += (size_t)w;
    }
    if (!cJSON_IsArray(ib)) return;
    *ib_ports = 0;
    cJSON_ArrayForEach(e, ib) {   /* the agent's "state" is sysfs's word: "ACTIVE" */
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "state");
        if (cJSON_IsString(st) && strcmp(st->valuestring, "ACTIVE") == 0) (*ib_ports)++;
    }
}

/* ---- life --------------------------------------------------------------------------------- */

struct preflight *preflight_new(const struct node_opts *o, const struct host *hosts, size_t n,
                                const struct preflight_io *io)
{
    struct preflight *p = xcalloc(1, sizeof *p);
    unsigned char rnd[8] = {0};
    char run_nonce[17];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t x = (uint64_t)wall_ns() ^ (uint64_t)getpid();
        memcpy(rnd, &x, sizeof rnd);
    }
    for (int k = 0; k < 8; k++) snprintf(run_nonce + 2 * k, 3, "%02x", rnd[k]);
    p->o = o;
    p->io = *io;
    p->n = n;
    p->master_nonce = xasprintf("%s-m", run_nonce);
    check_report_init(&p->r, n);
    p->r.transport = o->transport.kind->name;
    p->nodes = xcalloc(n ? n : 1, sizeof *p->nodes);
    for (size_t i = 0; i < n; i++) {
        struct pf_node *nd = &p->nodes[i];
        nd->h = &hosts[i];
        nd->nonce = xasprintf("%s-%zu", run_nonce, i);
        check_row_set_host(&p->r.rows[i], nd->h->name, nd->h->name,
                           o->transport.kind->through ? 0 : nd->h->port ? nd->h->port : 22);
    }
    p->dirty = true;
    return p;
}

void preflight_free(struct preflight *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        struct pf_node *nd = &p->nodes[i];
        cJSON_Delete(nd->facts);
        free(nd->address);
        free(nd->listen_err);
        free(nd->master_err);
        free(nd->spec);
        free(nd->machine);
        free(nd->nonce);
    }
    for (size_t k = 0; k < p->n_tcp; k++) free((char *)p->tcp[k].error);
    free(p->tcp);
    check_bench_free(p->bench);
    free(p->bench_addr);
    free(p->nodes);
    free(p->master_nonce);
    check_report_done(&p->r);
    free(p);
}
