/* `ddptop check` orchestration: one poll() loop over every node's SSH connection, at most
 * --fanout of them connecting at once. Each node's agent then answers, in order: hello,
 * facts, CLOCK_SAMPLES clock round trips, listen. When every node has got that far (or
 * failed), the tcp phase asks each agent to connect to its peers' listeners and to the first
 * node's --master-port. The verdicts are computed by check_eval*.c. */
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

#include "check_eval.h"
#include "check_mesh.h"
#include "clock_est.h"
#include "wire/protocol.h"
#include "util/util.h"
#include "util/version.h"

#define CLOCK_SAMPLES 8
#define ID_FACTS 1
#define ID_CLOCK 10        /* 10 .. 10 + CLOCK_SAMPLES - 1 */
#define ID_LISTEN 30
#define ID_LISTEN_MASTER 31
#define ID_CONNECT 100000  /* + index into ctx->tcp */

enum node_phase { NP_QUEUED, NP_SSH, NP_HELLO, NP_FACTS, NP_CLOCK, NP_LISTEN, NP_TCP_WAIT, NP_TCP, NP_DONE };

static const char *const phase_what[] = {"", "", "hello", "facts", "clock", "listen", "", "connect", ""};

struct check_node {
    const struct host *h;
    struct ssh_conn *conn;
    enum node_phase phase;
    bool alive;                    /* the agent is usable */
    bool tested_tcp;
    int64_t wait_deadline;         /* for the request in flight; 0: none */
    cJSON *facts;
    struct clock_sample samples[CLOCK_SAMPLES];
    size_t n_samples;
    int64_t sent_wall, sent_mono;
    int listens_pending;
    int eph_port;
    char *listen_err, *master_err;
    size_t conns_pending;
    char *spec;                    /* NCCL_SOCKET_IFNAME in force */
    char *nonce, *master_nonce;
};

struct check_ctx {
    const struct check_opts *o;
    struct check_report *r;
    struct check_node *nodes;
    size_t n;
    struct check_tcp_result *tcp;
    size_t n_tcp;
    bool tcp_started;
    int64_t tcp_deadline;
    bool live, colour, progress;
    bool dirty;
    char last_progress[120];
};

void check_opts_init(struct check_opts *o)
{
    memset(o, 0, sizeof *o);
    o->fanout = 64;
    o->ssh.timeout_s = 10;
    o->max_skew_ms = 500;
    o->master_port = 29500;
}

void check_opts_done(struct check_opts *o)
{
    for (size_t i = 0; i < o->n_env; i++) {
        free(o->env[i].key);
        free(o->env[i].value);
    }
    free(o->env);
    free((char *)o->ssh.agent_local);
    memset(o, 0, sizeof *o);
}

static void logv(struct check_ctx *c, const char *host, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void logv(struct check_ctx *c, const char *host, const char *fmt, ...)
{
    va_list ap;
    if (!c->o->verbose) return;
    fprintf(stderr, "ddptop: %s: ", host);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void send_json(struct check_node *nd, cJSON *m)
{
    char *s = cJSON_PrintUnformatted(m);
    if (!s) util_fatal("out of memory (cJSON)");
    ssh_conn_send_line(nd->conn, s);
    free(s);
    cJSON_Delete(m);
}

static cJSON *request(const char *op, int id)
{
    cJSON *m = cJSON_CreateObject();
    if (!m) util_fatal("out of memory (cJSON)");
    cJSON_AddStringToObject(m, "op", op);
    cJSON_AddNumberToObject(m, "id", id);
    return m;
}

/* The agent stopped being usable: the ssh column says why; what it had not done is skipped. */
static void agent_lost(struct check_ctx *c, size_t i, const char *why)
{
    struct check_node *nd = &c->nodes[i];
    if (!nd->alive) return;
    check_result_setf(&c->r->rows[i].checks[CHECK_SSH], CHECK_FAIL,
                      "run ddptop-agent on the node by hand over ssh to see what it does",
                      "ddptop-agent on %s: %s", nd->h->name, why);
    logv(c, nd->h->name, "%s", why);
    nd->alive = false;
    nd->phase = NP_DONE;
    nd->wait_deadline = 0;
    ssh_conn_close(nd->conn);
    c->dirty = true;
}

static const char *env_value(const struct check_opts *o, const struct host *h, const char *key)
{
    const char *v = host_env_get(h, key);
    for (size_t i = 0; !v && i < o->n_env; i++)
        if (strcmp(o->env[i].key, key) == 0) v = o->env[i].value;
    return v;
}

static void send_facts(struct check_ctx *c, struct check_node *nd)
{
    cJSON *m = request("facts", ID_FACTS), *env;
    if (c->o->n_cmd) cJSON_AddStringToObject(m, "cmd", c->o->cmd[0]);
    else cJSON_AddNullToObject(m, "cmd");
    env = cJSON_AddObjectToObject(m, "env");
    /* hostfile keys win over --env */
    for (size_t k = 0; k < nd->h->n_env; k++) cJSON_AddStringToObject(env, nd->h->env[k].key, nd->h->env[k].value);
    for (size_t k = 0; k < c->o->n_env; k++)
        if (!host_env_get(nd->h, c->o->env[k].key) && !cJSON_GetObjectItemCaseSensitive(env, c->o->env[k].key))
            cJSON_AddStringToObject(env, c->o->env[k].key, c->o->env[k].value);
    send_json(nd, m);
    nd->phase = NP_FACTS;
    /* facts may import torch or run nvidia-smi: slower than a round trip */
    nd->wait_deadline = mono_ms() + (int64_t)c->o->ssh.timeout_s * 3000;
}

static void send_clock(struct check_ctx *c, struct check_node *nd)
{
    nd->phase = NP_CLOCK;
    nd->sent_wall = wall_ns();
    nd->sent_mono = mono_ns();
    send_json(nd, request("clock", ID_CLOCK + (int)nd->n_samples));
    nd->wait_deadline = mono_ms() + (int64_t)c->o->ssh.timeout_s * 1000;
}

static void send_listen(struct check_ctx *c, size_t i)
{
    struct check_node *nd = &c->nodes[i];
    cJSON *m = request("listen", ID_LISTEN);
    cJSON_AddNumberToObject(m, "port", 0);
    cJSON_AddStringToObject(m, "nonce", nd->nonce);
    send_json(nd, m);
    nd->listens_pending = 1;
    if (i == 0) {
        m = request("listen", ID_LISTEN_MASTER);
        cJSON_AddNumberToObject(m, "port", c->o->master_port);
        cJSON_AddStringToObject(m, "nonce", nd->master_nonce);
        send_json(nd, m);
        nd->listens_pending = 2;
    }
    nd->phase = NP_LISTEN;
    nd->wait_deadline = mono_ms() + (int64_t)c->o->ssh.timeout_s * 1000;
}

static void on_hello(struct check_ctx *c, size_t i, const cJSON *m)
{
    struct check_node *nd = &c->nodes[i];
    const cJSON *proto = cJSON_GetObjectItemCaseSensitive(m, "protocol");
    const char *ver = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "version"));
    const char *arch = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "arch"));
    if (!cJSON_IsNumber(proto) || proto->valueint != PROTOCOL_VERSION) {
        char why[160];
        snprintf(why, sizeof why, "speaks protocol %d, this ddptop speaks %d (remove the stale agent in --agent-dir)",
                 cJSON_IsNumber(proto) ? proto->valueint : -1, PROTOCOL_VERSION);
        agent_lost(c, i, why);
        return;
    }
    const char *how = ssh_conn_upload_method(nd->conn); /* NULL, "sftp" or "exec" */
    const char *note = !how ? "" : strcmp(how, "exec") == 0 ? " (uploaded over exec: no sftp subsystem)"
                                                            : " (uploaded)";
    check_result_setf(&c->r->rows[i].checks[CHECK_SSH], CHECK_PASS, NULL, "%s@%s:%d, agent %s %s%s",
                      ssh_conn_user(nd->conn), ssh_conn_address(nd->conn), ssh_conn_port(nd->conn),
                      ver ? ver : "?", arch ? arch : "?", note);
    cJSON *ssh_fields = check_result_fields(&c->r->rows[i].checks[CHECK_SSH]);
    cJSON_AddBoolToObject(ssh_fields, "agent_uploaded", ssh_conn_uploaded(nd->conn));
    if (how) cJSON_AddStringToObject(ssh_fields, "agent_upload", how);
    else cJSON_AddNullToObject(ssh_fields, "agent_upload");
    logv(c, nd->h->name, "agent ready%s", note);
    send_facts(c, nd);
}

static void on_facts(struct check_ctx *c, size_t i, cJSON *m)
{
    struct check_node *nd = &c->nodes[i];
    const char *spec = env_value(c->o, nd->h, "NCCL_SOCKET_IFNAME");
    if (!spec)
        spec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(m, "nccl_env"), "NCCL_SOCKET_IFNAME"));
    nd->spec = spec ? xstrdup(spec) : NULL;
    nd->facts = m;
    check_eval_gpu(&c->r->rows[i].checks[CHECK_GPU], m, nd->h->slots);
    send_clock(c, nd);
}

static void on_clock(struct check_ctx *c, size_t i, const char *line)
{
    struct check_node *nd = &c->nodes[i];
    int64_t recv_wall = wall_ns(), rtt = mono_ns() - nd->sent_mono;
    /* parsed from the text: a double cannot hold nanoseconds since 1970 exactly */
    const char *p = strstr(line, "\"wall_ns\":");
    if (!p) {
        agent_lost(c, i, "clock answer without wall_ns");
        return;
    }
    nd->samples[nd->n_samples++] = (struct clock_sample){
        .local_send_ns = nd->sent_wall, .local_recv_ns = recv_wall,
        .remote_ns = strtoll(p + 10, NULL, 10), .rtt_ns = rtt};
    if (nd->n_samples < CLOCK_SAMPLES) {
        send_clock(c, nd);
        return;
    }
    check_eval_clock(&c->r->rows[i].checks[CHECK_CLOCK], nd->samples, nd->n_samples, c->o->max_skew_ms);
    send_listen(c, i);
}

static void on_listen(struct check_ctx *c, size_t i, const cJSON *m, int id)
{
    struct check_node *nd = &c->nodes[i];
    bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "ok"));
    const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error"));
    const cJSON *port = cJSON_GetObjectItemCaseSensitive(m, "port");
    if (!ok) err = err ? err : "failed";
    if (id == ID_LISTEN_MASTER) {
        if (!ok) nd->master_err = xstrdup(err);
    } else if (ok && cJSON_IsNumber(port)) {
        nd->eph_port = port->valueint;
    } else {
        nd->listen_err = xstrdup(err ? err : "no port in the answer");
    }
    if (--nd->listens_pending > 0) return;
    nd->phase = NP_TCP_WAIT;
    nd->tested_tcp = true;
    nd->wait_deadline = 0;
}

static void on_connect(struct check_ctx *c, size_t i, const cJSON *m, int id)
{
    size_t k = (size_t)(id - ID_CONNECT);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(m, "ms");
    const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error"));
    struct check_tcp_result *t;
    if (k >= c->n_tcp || c->tcp[k].src != i || c->tcp[k].done) return;
    t = &c->tcp[k];
    t->done = true;
    t->ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "ok"));
    t->ms = cJSON_IsNumber(ms) ? ms->valuedouble : 0;
    t->error = xstrdup(err ? err : t->ok ? "" : "failed");
    if (--c->nodes[i].conns_pending == 0) c->nodes[i].phase = NP_DONE;
}

static void node_line(struct check_ctx *c, size_t i, const char *line)
{
    struct check_node *nd = &c->nodes[i];
    cJSON *m = cJSON_Parse(line);
    const char *ev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "ev"));
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(m, "id");
    int id = cJSON_IsNumber(idj) ? idj->valueint : -1;
    c->dirty = true;
    if (!m || !ev) {
        agent_lost(c, i, "sent a line that is not a protocol message");
    } else if (strcmp(ev, "error") == 0 && id >= ID_CONNECT) {
        on_connect(c, i, m, id);
    } else if (strcmp(ev, "error") == 0) {
        const char *e = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error"));
        char why[300];
        snprintf(why, sizeof why, "refused the %s request: %s", phase_what[nd->phase], e ? e : "?");
        agent_lost(c, i, why);
    } else if (nd->phase == NP_HELLO && strcmp(ev, "hello") == 0) {
        on_hello(c, i, m);
    } else if (nd->phase == NP_FACTS && strcmp(ev, "facts") == 0 && id == ID_FACTS) {
        on_facts(c, i, m);
        m = NULL; /* kept in nd->facts */
    } else if (nd->phase == NP_CLOCK && strcmp(ev, "clock") == 0 && id == ID_CLOCK + (int)nd->n_samples) {
        on_clock(c, i, line);
    } else if (nd->phase == NP_LISTEN && strcmp(ev, "listen") == 0) {
        on_listen(c, i, m, id);
    } else if (strcmp(ev, "connect") == 0 && id >= ID_CONNECT) {
        on_connect(c, i, m, id);
    } /* anything else (unprompted events of later protocol versions) is ignored */
    cJSON_Delete(m);
}

/* Moves one node along after its connection stepped. */
static void node_pump(struct check_ctx *c, size_t i)
{
    struct check_node *nd = &c->nodes[i];
    enum ssh_conn_state st;
    char *line;
    if (nd->phase == NP_QUEUED || (nd->phase == NP_DONE && !nd->alive)) return;
    st = ssh_conn_state(nd->conn);
    if (nd->phase == NP_SSH) {
        if (st == SSH_CONN_FAILED || st == SSH_CONN_CLOSED) {
            check_result_set(&c->r->rows[i].checks[CHECK_SSH], CHECK_FAIL,
                             ssh_conn_error(nd->conn) ? ssh_conn_error(nd->conn) : "connection closed",
                             ssh_conn_hint(nd->conn));
            logv(c, nd->h->name, "%s", ssh_conn_error(nd->conn));
            nd->phase = NP_DONE;
            c->dirty = true;
            return;
        }
        if (st != SSH_CONN_READY) return;
        nd->alive = true;
        nd->phase = NP_HELLO;
        nd->wait_deadline = mono_ms() + (int64_t)c->o->ssh.timeout_s * 1000;
    }
    while (nd->alive && (line = ssh_conn_next_line(nd->conn)) != NULL) {
        node_line(c, i, line);
        free(line);
    }
    if (!nd->alive) return;
    st = ssh_conn_state(nd->conn);
    if (st == SSH_CONN_FAILED || st == SSH_CONN_CLOSED) {
        agent_lost(c, i, ssh_conn_error(nd->conn) ? ssh_conn_error(nd->conn) : "connection closed");
    } else if (nd->wait_deadline && mono_ms() >= nd->wait_deadline) {
        char why[160];
        snprintf(why, sizeof why, "no answer to the %s request in time", phase_what[nd->phase]);
        agent_lost(c, i, why);
    }
}

static void tcp_add(struct check_ctx *c, size_t src, size_t dst, int port, bool rdv)
{
    c->tcp = xrealloc(c->tcp, (c->n_tcp + 1) * sizeof *c->tcp);
    c->tcp[c->n_tcp++] = (struct check_tcp_result){.src = src, .dst = dst, .port = port, .rendezvous = rdv};
}

static void tcp_begin(struct check_ctx *c)
{
    size_t *alive = xcalloc(c->n, sizeof *alive), na = 0, np;
    struct check_pair *pairs = NULL;
    uint64_t seed = (uint64_t)wall_ns() ^ ((uint64_t)getpid() << 32);
    int timeout_ms = c->o->ssh.timeout_s * 1000 < 3000 ? c->o->ssh.timeout_s * 1000 : 3000;
    c->tcp_started = true;
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].alive && c->nodes[i].phase == NP_TCP_WAIT && !c->nodes[i].listen_err) alive[na++] = i;
    np = check_mesh_pairs(na, seed, &pairs);
    for (size_t k = 0; k < np; k++)
        tcp_add(c, alive[pairs[k].src], alive[pairs[k].dst], c->nodes[alive[pairs[k].dst]].eph_port, false);
    if (na && alive[0] == 0 && !c->nodes[0].master_err)
        for (size_t k = 0; k < na; k++) tcp_add(c, alive[k], 0, c->o->master_port, true);
    for (size_t k = 0; k < c->n_tcp; k++) {
        struct check_tcp_result *t = &c->tcp[k];
        cJSON *m = request("connect", ID_CONNECT + (int)k);
        cJSON_AddStringToObject(m, "addr", ssh_conn_address(c->nodes[t->dst].conn));
        cJSON_AddNumberToObject(m, "port", t->port);
        cJSON_AddStringToObject(m, "nonce", t->rendezvous ? c->nodes[0].master_nonce : c->nodes[t->dst].nonce);
        cJSON_AddNumberToObject(m, "timeout_ms", timeout_ms);
        send_json(&c->nodes[t->src], m);
        c->nodes[t->src].conns_pending++;
    }
    for (size_t k = 0; k < na; k++) {
        struct check_node *nd = &c->nodes[alive[k]];
        nd->phase = nd->conns_pending ? NP_TCP : NP_DONE;
    }
    c->tcp_deadline = mono_ms() + timeout_ms + (int64_t)c->o->ssh.timeout_s * 1000;
    free(alive);
    free(pairs);
}

static bool is_loopback(const char *addr)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (strcmp(addr, "localhost") == 0) return true;
    if (inet_pton(AF_INET, addr, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, addr, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

static void evaluate_all(struct check_ctx *c)
{
    struct check_node_info *info = xcalloc(c->n, sizeof *info);
    bool *tested = xcalloc(c->n, sizeof *tested);
    const char **lerr = xcalloc(c->n, sizeof *lerr);
    for (size_t i = 0; i < c->n; i++) {
        struct check_node *nd = &c->nodes[i];
        info[i] = (struct check_node_info){.name = nd->h->name, .facts = nd->facts, .ifname_spec = nd->spec,
                                           .loopback = is_loopback(ssh_conn_address(nd->conn)),
                                           .slots = nd->h->slots};
        tested[i] = nd->tested_tcp;
        lerr[i] = nd->listen_err;
    }
    check_eval_env(c->r, info, c->n, c->o->n_cmd > 0);
    check_eval_nccl(c->r, info, c->n);
    check_eval_tcp(c->r, info, c->n, tested, lerr, c->nodes[0].master_err, c->o->master_port, c->tcp, c->n_tcp);
    for (size_t i = 0; i < c->n; i++) {
        bool ssh_failed = c->r->rows[i].checks[CHECK_SSH].status == CHECK_FAIL;
        for (int k = 0; k < CHECK_KINDS; k++) {
            struct check_result *res = &c->r->rows[i].checks[k];
            if (res->status == CHECK_PENDING)
                check_result_set(res, CHECK_SKIP, ssh_failed ? "not run: ssh failed" : "not run", NULL);
        }
    }
    free(info);
    free(tested);
    free(lerr);
}

static void progress(struct check_ctx *c, bool final)
{
    size_t done = 0;
    char line[120];
    bool changed = c->dirty || final;
    c->dirty = false;
    if (changed && c->o->on_progress) c->o->on_progress(c->o->progress_ctx, c->r);
    if (c->live) {
        if (changed) check_report_live(c->r, stdout, c->colour, final);
        return;
    }
    if (!c->progress) return;
    if (final) {
        if (c->last_progress[0]) fputs("\r\033[2K", stderr);
        fflush(stderr);
        return;
    }
    for (size_t i = 0; i < c->n; i++) done += c->nodes[i].phase >= NP_TCP_WAIT;
    snprintf(line, sizeof line, "ddptop check: %zu/%zu hosts ready%s", done, c->n,
             c->tcp_started ? ", testing TCP" : "");
    if (strcmp(line, c->last_progress) == 0) return;
    snprintf(c->last_progress, sizeof c->last_progress, "%s", line);
    fprintf(stderr, "\r\033[2K%s", line);
    fflush(stderr);
}

static bool all_done(struct check_ctx *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].phase != NP_DONE) return false;
    return true;
}

static size_t connecting_count(struct check_ctx *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].phase == NP_SSH && ssh_conn_connecting(c->nodes[i].conn)) k++;
    return k;
}

/* Starts queued hosts while fewer than --fanout are connecting. */
static void start_more(struct check_ctx *c, size_t *next)
{
    size_t busy = connecting_count(c), fanout = c->o->fanout > 0 ? (size_t)c->o->fanout : 1;
    while (*next < c->n && busy < fanout) {
        struct check_node *nd = &c->nodes[*next];
        struct check_row *row = &c->r->rows[*next];
        ssh_conn_start(nd->conn);
        check_row_set_host(row, nd->h->name, ssh_conn_address(nd->conn), ssh_conn_port(nd->conn));
        nd->phase = NP_SSH;
        logv(c, nd->h->name, "connecting to %s port %d", ssh_conn_address(nd->conn), ssh_conn_port(nd->conn));
        (*next)++;
        busy++;
        c->dirty = true;
    }
}

static void run_loop(struct check_ctx *c)
{
    struct pollfd *pfd = xcalloc(c->n ? c->n : 1, sizeof *pfd);
    size_t *owner = xcalloc(c->n ? c->n : 1, sizeof *owner), next = 0;
    for (;;) {
        size_t np = 0;
        int64_t now, wake;
        start_more(c, &next);
        for (size_t i = 0; i < c->n; i++) node_pump(c, i);
        if (!c->tcp_started) {
            bool ready = next == c->n;
            for (size_t i = 0; ready && i < c->n; i++)
                if (c->nodes[i].phase < NP_TCP_WAIT) ready = false;
            if (ready) tcp_begin(c);
        } else if (mono_ms() >= c->tcp_deadline) {
            for (size_t i = 0; i < c->n; i++)
                if (c->nodes[i].phase == NP_TCP) c->nodes[i].phase = NP_DONE; /* unanswered: "no answer" */
        }
        progress(c, false);
        if (next == c->n && all_done(c)) break;

        now = mono_ms();
        wake = now + 100; /* a tick even without events: deadlines, and libssh's buffered data */
        for (size_t i = 0; i < c->n; i++) {
            struct check_node *nd = &c->nodes[i];
            int64_t d;
            if (nd->phase == NP_QUEUED || (nd->phase == NP_DONE && !nd->alive)) continue;
            if (ssh_conn_pollfd(nd->conn, &pfd[np])) owner[np++] = i;
            d = ssh_conn_deadline_ms(nd->conn);
            if (d && d < wake) wake = d;
            if (nd->wait_deadline && nd->wait_deadline < wake) wake = nd->wait_deadline;
        }
        if (c->tcp_started && c->tcp_deadline < wake) wake = c->tcp_deadline;
        if (poll(pfd, np, wake > now ? (int)(wake - now) : 0) < 0 && errno != EINTR) break;
        for (size_t k = 0; k < np; k++)
            if (pfd[k].revents) ssh_conn_step(c->nodes[owner[k]].conn, pfd[k].revents);
        for (size_t i = 0; i < c->n; i++) {
            struct check_node *nd = &c->nodes[i];
            if (nd->phase != NP_QUEUED && nd->phase != NP_DONE) ssh_conn_step(nd->conn, 0);
        }
    }
    free(pfd);
    free(owner);
}

void check_collect(const struct check_opts *o, const struct hostlist *hl, struct check_report *report,
                   bool live, bool colour)
{
    struct check_ctx c = {.o = o, .r = report, .n = hl->n, .live = live, .colour = colour};
    unsigned char rnd[8] = {0};
    char run_nonce[17];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t x = (uint64_t)wall_ns() ^ (uint64_t)getpid();
        memcpy(rnd, &x, sizeof rnd);
    }
    for (int k = 0; k < 8; k++) snprintf(run_nonce + 2 * k, 3, "%02x", rnd[k]);
    /* -v prints log lines instead; both on one terminal would garble each other */
    c.progress = !live && !o->verbose && isatty(STDERR_FILENO);
    check_report_init(report, hl->n);
    c.nodes = xcalloc(hl->n ? hl->n : 1, sizeof *c.nodes);
    for (size_t i = 0; i < hl->n; i++) {
        struct check_node *nd = &c.nodes[i];
        nd->h = &hl->hosts[i];
        nd->conn = ssh_conn_new(nd->h, &o->ssh);
        nd->nonce = xasprintf("%s-%zu", run_nonce, i);
        nd->master_nonce = xasprintf("%s-m", run_nonce);
        check_row_set_host(&report->rows[i], nd->h->name, nd->h->name, nd->h->port ? nd->h->port : 22);
    }
    c.dirty = true;
    run_loop(&c);
    evaluate_all(&c);
    progress(&c, true);
    for (size_t i = 0; i < c.n; i++) {
        struct check_node *nd = &c.nodes[i];
        ssh_conn_free(nd->conn);
        cJSON_Delete(nd->facts);
        free(nd->listen_err);
        free(nd->master_err);
        free(nd->spec);
        free(nd->nonce);
        free(nd->master_nonce);
    }
    for (size_t k = 0; k < c.n_tcp; k++) free((char *)c.tcp[k].error);
    free(c.tcp);
    free(c.nodes);
}

static bool table_fits_terminal(size_t rows)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0) return false;
    return rows + 2 < ws.ws_row;
}

int check_run(const struct check_opts *o, const struct hostlist *hl)
{
    struct check_report r;
    bool tty = isatty(STDOUT_FILENO);
    const char *nc = getenv("NO_COLOR");
    bool colour = tty && !(nc && *nc);
    bool live = !o->json && tty && table_fits_terminal(hl->n);
    struct strbuf out;
    int rc;
    check_collect(o, hl, &r, live, colour);
    strbuf_init(&out);
    if (o->json) {
        cJSON *doc = check_report_json(&r);
        char *s = cJSON_Print(doc);
        if (!s) util_fatal("out of memory (cJSON)");
        strbuf_adds(&out, s);
        strbuf_adds(&out, "\n");
        free(s);
        cJSON_Delete(doc);
    } else {
        if (!live) check_report_table(&r, &out, colour);
        check_report_details(&r, &out, colour);
    }
    fwrite(out.buf, 1, out.len, stdout);
    fflush(stdout);
    strbuf_done(&out);
    rc = check_report_exit_code(&r);
    check_report_done(&r);
    return rc;
}
