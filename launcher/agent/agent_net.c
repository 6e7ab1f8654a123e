/* listen / connect / unlisten for the agent: see agent_net.h. The greeting proves that the
 * controller's own listener answered, not whatever else owns the port on that node. */
#include "agent_net.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"
#include "wire/protocol.h"

#define GREETING "ddptop "
#define NONCE_MAX 128
#define CONNECT_TIMEOUT_DEFAULT_MS 3000
/* How long, and for how many connections at once, a listener waits for peers to close first. */
#define GREETED_WAIT_MS 5000
#define GREETED_MAX 512

struct listener {
    int port;
    char *nonce;
};

struct conn {
    cJSON *id;          /* the request's id, for the late answer */
    char *nonce;
    int port;
    int connected;
    int timeout_ms;
    int64_t t0_ns;
    double ms;          /* TCP handshake time */
    char buf[NONCE_MAX + 64];
    size_t len;
};

static int nonce_ok(const char *nonce)
{
    size_t n = nonce ? strlen(nonce) : 0;
    if (n == 0 || n > NONCE_MAX) return 0;
    for (const char *p = nonce; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p > 0x7e) return 0;
    return 1;
}

/* ---- listen / unlisten ---- */

static void listener_free(void *ctx)
{
    struct listener *l = ctx;
    free(l->nonce);
    free(l);
}

/* A greeted connection waits for its peer to close first. Whoever closes first keeps the
 * TIME_WAIT entry for a minute; on the listened port (the rendezvous port!) that would make a
 * store started right after `ddptop check` fail to bind unless it sets SO_REUSEADDR. */
static int greeted_open;

static void greeted_free(void *ctx) /* ctx: the counter, so that the agent calls this */
{
    (*(int *)ctx)--;
}

static void greeted_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    char buf[512];
    if (revents) {
        ssize_t n = recv(w->fd, buf, sizeof buf, 0);
        if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN))) return; /* not closed yet */
    }
    agent_watch_del(ag, w); /* peer closed, reset, or out of patience */
}

static void listener_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct listener *l = w->ctx;
    if (!revents) return;
    for (;;) {
        int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
        if (fd < 0) break; /* EAGAIN: all taken; EMFILE: the next poll retries */
        char line[sizeof GREETING + NONCE_MAX + 2];
        int n = snprintf(line, sizeof line, GREETING "%s\n", l->nonce);
        /* A fresh socket's send buffer is empty: the short line always fits. */
        if (send(fd, line, (size_t)n, MSG_NOSIGNAL) < 0 || greeted_open >= GREETED_MAX) {
            close(fd); /* peer gone, or a flood: do not hold descriptors for it */
            continue;
        }
        struct agent_watch *g = agent_watch_add(ag, fd, POLLIN, greeted_ready, &greeted_open,
                                                greeted_free);
        g->deadline_ms = mono_ms() + GREETED_WAIT_MS;
        greeted_open++;
    }
}

static int listener_port_is(const struct agent_watch *w, const void *arg)
{
    return ((const struct listener *)w->ctx)->port == *(const int *)arg;
}

static void reply_ok(struct agent *ag, const char *ev, const cJSON *id, int port)
{
    cJSON *msg = agent_reply_new(ev, id);
    cJSON_AddBoolToObject(msg, "ok", 1);
    if (port > 0) cJSON_AddNumberToObject(msg, "port", port);
    agent_send(ag, msg);
}

static cJSON *fail_msg(const char *ev, const cJSON *id, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
static cJSON *fail_msg(const char *ev, const cJSON *id, const char *fmt, va_list ap)
{
    char *text = xvasprintf(fmt, ap);
    cJSON *msg = agent_reply_new(ev, id);
    cJSON_AddBoolToObject(msg, "ok", 0);
    cJSON_AddStringToObject(msg, "error", text);
    free(text);
    return msg;
}

static void reply_fail(struct agent *ag, const char *ev, const cJSON *id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_fail(struct agent *ag, const char *ev, const cJSON *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cJSON *msg = fail_msg(ev, id, fmt, ap);
    va_end(ap);
    agent_send(ag, msg);
}

void agent_net_listen_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long port;
    const char *nonce = agent_req_str(req, "nonce");
    if (agent_req_int(ag, req, id, "port", 0, 65535, 0, &port) < 0) return;
    if (!nonce_ok(nonce)) {
        agent_send_error(ag, id, "listen: \"nonce\" must be 1-%d printable characters, no spaces",
                         NONCE_MAX);
        return;
    }
    int p = (int)port;
    if (p && agent_watch_find(ag, listener_ready, listener_port_is, &p)) {
        reply_fail(ag, WIRE_EV_LISTEN, id, "port %d is in use (by an earlier listen request)", p);
        return;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        reply_fail(ag, WIRE_EV_LISTEN, id, "socket: %s", strerror(errno));
        return;
    }
    int one = 1;
    /* SO_REUSEADDR: a port whose last user left TIME_WAIT connections behind is free for us,
     * as it will be for the rendezvous store. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p),
                              .sin_addr.s_addr = htonl(INADDR_ANY) };
    socklen_t salen = sizeof sa;
    /* SOMAXCONN (the kernel's net.core.somaxconn, 4096 on Debian 12): at 1,024 nodes every
     * other node connects to the rendezvous port at once; a backlog of 128 dropped their SYNs,
     * and the retries (1 s, 3 s, 7 s) ran past the probe's time limit on a loaded node */
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE) reply_fail(ag, WIRE_EV_LISTEN, id, "port %d is in use", p);
        else if (e == EACCES) reply_fail(ag, WIRE_EV_LISTEN, id, "port %d: permission denied (ports below 1024 need root)", p);
        else reply_fail(ag, WIRE_EV_LISTEN, id, "port %d: %s", p, strerror(e));
        return;
    }
    if (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0) p = ntohs(sa.sin_port);
    struct listener *l = xcalloc(1, sizeof *l);
    l->port = p;
    l->nonce = xstrdup(nonce);
    agent_watch_add(ag, fd, POLLIN, listener_ready, l, listener_free);
    reply_ok(ag, WIRE_EV_LISTEN, id, p);
}

void agent_net_unlisten_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long port;
    if (agent_req_int(ag, req, id, "port", 1, 65535, 0, &port) < 0) return;
    if (!port) {
        agent_send_error(ag, id, "unlisten: \"port\" is required");
        return;
    }
    int p = (int)port;
    struct agent_watch *w = agent_watch_find(ag, listener_ready, listener_port_is, &p);
    if (!w) {
        reply_fail(ag, WIRE_EV_UNLISTEN, id, "not listening on port %d", p);
        return;
    }
    agent_watch_del(ag, w);
    reply_ok(ag, WIRE_EV_UNLISTEN, id, 0);
}

/* ---- connect ---- */

/* The answers of connects asked together go out together, when the last of them ends: through
 * srun every write of a node's agent travels on a TCP connection where Nagle's algorithm holds
 * a small write back until the previous one is acknowledged (up to 40 ms of delayed ACK), so
 * a preflight node's three to six connect answers written one by one cost 40 ms each. */
static struct {
    cJSON **msgs;
    size_t n;
    int inflight;
    struct agent_watch *timer; /* the flush, armed when the last one ended */
} held;

/* A connect on loopback can end before the agent has read the next request of its batch:
 * the answers wait this much more for the batch's next connects. */
#define HELD_GRACE_MS 2

static void held_flush(struct agent *ag, struct agent_watch *w, short revents)
{
    (void)revents;
    for (size_t i = 0; i < held.n; i++) agent_send(ag, held.msgs[i]);
    held.n = 0;
    held.timer = NULL;
    agent_watch_del(ag, w);
}

static void conn_answer(struct agent *ag, cJSON *msg)
{
    held.msgs = xrealloc(held.msgs, (held.n + 1) * sizeof *held.msgs);
    held.msgs[held.n++] = msg;
    if (--held.inflight > 0) return;
    held.inflight = 0;
    if (!held.timer) held.timer = agent_watch_add(ag, -1, 0, held_flush, NULL, NULL);
    held.timer->deadline_ms = mono_ms() + HELD_GRACE_MS;
}

static void conn_fail(struct agent *ag, const cJSON *id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void conn_fail(struct agent *ag, const cJSON *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cJSON *msg = fail_msg(WIRE_EV_CONNECT, id, fmt, ap);
    va_end(ap);
    conn_answer(ag, msg);
}

static void conn_free(void *ctx)
{
    struct conn *c = ctx;
    cJSON_Delete(c->id);
    free(c->nonce);
    free(c);
}

const char *agent_net_connect_error(int e)
{
    switch (e) {
    case ECONNREFUSED: return "connection refused";
    case ETIMEDOUT: return "timed out";
    case EHOSTUNREACH:
    case ENETUNREACH: return "no route to host";
    default: return NULL;
    }
}

static void conn_fail_errno(struct agent *ag, const cJSON *id, int e)
{
    const char *m = agent_net_connect_error(e);
    if (m) conn_fail(ag, id, "%s", m);
    else conn_fail(ag, id, "%s", strerror(e));
}

/* Answers and ends the connect: the greeting line (without '\n') decides. */
static void conn_finish(struct agent *ag, struct agent_watch *w, const char *line)
{
    struct conn *c = w->ctx;
    if (line && strncmp(line, GREETING, strlen(GREETING)) == 0 &&
        strcmp(line + strlen(GREETING), c->nonce) == 0) {
        cJSON *msg = agent_reply_new(WIRE_EV_CONNECT, c->id);
        cJSON_AddBoolToObject(msg, "ok", 1);
        cJSON_AddNumberToObject(msg, "ms", round(c->ms * 1000.0) / 1000.0);
        conn_answer(ag, msg);
    } else {
        /* Say what answered instead (printable ASCII only): "SSH-2.0-OpenSSH_9.2" tells the
         * user at once who owns the port. */
        char said[64] = "";
        size_t n = 0;
        for (const char *p = line ? line : ""; *p && n < sizeof said - 4; p++)
            said[n++] = (*p >= 0x20 && *p <= 0x7e && *p != '"') ? *p : '?';
        said[n] = '\0';
        if (n) conn_fail(ag, c->id, "wrong service on port %d (it said \"%s\")", c->port, said);
        else conn_fail(ag, c->id, "wrong service on port %d", c->port);
    }
    agent_watch_del(ag, w);
}

static void conn_read(struct agent *ag, struct agent_watch *w)
{
    struct conn *c = w->ctx;
    for (;;) {
        ssize_t n = recv(w->fd, c->buf + c->len, sizeof c->buf - 1 - c->len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) { /* closed (or reset) before a whole greeting line */
            c->buf[c->len] = '\0';
            conn_finish(ag, w, c->buf);
            return;
        }
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl || c->len == sizeof c->buf - 1) {
            if (nl) *nl = '\0';
            if (nl && nl > c->buf && nl[-1] == '\r') nl[-1] = '\0';
            conn_finish(ag, w, c->buf);
            return;
        }
    }
}

static void conn_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct conn *c = w->ctx;
    if (!revents) {
        if (c->connected)
            conn_fail(ag, c->id, "timed out waiting for the ddptop greeting on port %d", c->port);
        else
            conn_fail(ag, c->id, "timed out after %d ms", c->timeout_ms);
        agent_watch_del(ag, w);
        return;
    }
    if (!c->connected) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        if (err == EINPROGRESS) return;
        if (err) {
            conn_fail_errno(ag, c->id, err);
            agent_watch_del(ag, w);
            return;
        }
        c->connected = 1;
        c->ms = (double)(mono_ns() - c->t0_ns) / 1e6;
        w->events = POLLIN;
        return; /* the greeting comes with the next POLLIN */
    }
    conn_read(ag, w);
}

/* Numeric addresses first (never blocks); a name goes through getaddrinfo, which may block on
 * DNS: acceptable because hostfiles for check mostly carry addresses, and documented. Names
 * prefer IPv4 because the listeners bind IPv4 only. */
static struct addrinfo *resolve(const char *host, int port)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%d", port);
    if (getaddrinfo(host, portstr, &hints, &res) == 0) return res;
    hints.ai_flags = AI_NUMERICSERV;
    hints.ai_family = AF_INET;
    if (getaddrinfo(host, portstr, &hints, &res) == 0) return res;
    hints.ai_family = AF_UNSPEC;
    if (getaddrinfo(host, portstr, &hints, &res) == 0) return res;
    return NULL;
}

char *agent_net_host(const char *addr)
{
    size_t n = strlen(addr);
    /* "[::1]" as hostfiles write IPv6 */
    return n >= 2 && addr[0] == '[' && addr[n - 1] == ']' ? xstrndup(addr + 1, n - 2) : xstrdup(addr);
}

struct addrinfo *agent_net_resolve(const char *addr, int port)
{
    char *host = agent_net_host(addr);
    struct addrinfo *ai = resolve(host, port);
    free(host);
    return ai;
}

void agent_net_connect_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long port, timeout;
    const char *addr = agent_req_str(req, "addr");
    const char *nonce = agent_req_str(req, "nonce");
    if (agent_req_int(ag, req, id, "port", 1, 65535, 0, &port) < 0) return;
    if (agent_req_int(ag, req, id, "timeout_ms", 1, 600000, CONNECT_TIMEOUT_DEFAULT_MS, &timeout) < 0)
        return;
    if (!addr || !addr[0] || !port) {
        agent_send_error(ag, id, "connect: \"addr\" and \"port\" are required");
        return;
    }
    if (!nonce_ok(nonce)) {
        agent_send_error(ag, id, "connect: \"nonce\" must be 1-%d printable characters, no spaces",
                         NONCE_MAX);
        return;
    }
    struct addrinfo *ai = agent_net_resolve(addr, (int)port);
    if (!ai) {
        char *host = agent_net_host(addr);
        reply_fail(ag, WIRE_EV_CONNECT, id, "unknown host %s", host);
        free(host);
        return;
    }
    int64_t t0 = mono_ns();
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        reply_fail(ag, WIRE_EV_CONNECT, id, "socket: %s", strerror(errno));
        freeaddrinfo(ai);
        return;
    }
    int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
    int e = errno;
    freeaddrinfo(ai);
    held.inflight++; /* answered through conn_answer from here on */
    if (held.timer) held.timer->deadline_ms = 0; /* the batch goes on: its end flushes */
    if (r < 0 && e != EINPROGRESS) {
        close(fd);
        conn_fail_errno(ag, id, e);
        return;
    }
    struct conn *c = xcalloc(1, sizeof *c);
    c->id = id ? cJSON_Duplicate(id, 1) : NULL;
    c->nonce = xstrdup(nonce);
    c->port = (int)port;
    c->timeout_ms = (int)timeout;
    c->t0_ns = t0;
    if (r == 0) {
        c->connected = 1;
        c->ms = (double)(mono_ns() - t0) / 1e6;
    }
    struct agent_watch *w = agent_watch_add(ag, fd, r == 0 ? POLLIN : POLLOUT, conn_ready, c, conn_free);
    w->deadline_ms = mono_ms() + timeout;
}
