/* bench_listen / bench_unlisten: the receiving end of a link measurement (agent_bench.h has the
 * exchange). Everything runs in the agent's loop without blocking, since ranks' output may flow
 * meanwhile, and everything is bounded because anyone on the network can connect: a client must
 * send our nonce within BENCH_HELLO_MS or is closed (and counted), at most BENCH_CLIENTS_MAX are
 * served at once (the rest wait in the kernel's backlog), each for at most BENCH_CLIENT_MS and
 * BENCH_CLIENT_BYTES, and bulk bytes are read into one buffer shared by all and thrown away. */
#include "agent_bench.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"
#include "wire/protocol.h"

#define BENCH_CLIENTS_MAX 8
#define BENCH_HELLO_MS 2000
#define BENCH_CLIENT_MS 30000
#define BENCH_CLIENT_BYTES (16ull << 30)
/* After a cut-off (bytes or time) the count is sent and the client has this long to close. */
#define BENCH_DRAIN_MS 2000
/* A listener nobody asked to close goes this long after its last client. */
#define BENCH_IDLE_MS 120000
/* What one callback reads before the loop serves the others (a 100 Gb/s link fills it in a
 * third of a millisecond; the rank pipes must not wait behind it). */
#define BENCH_READ_SLICE (4u << 20)
/* More pings owed than any sender asks for: not ours. */
#define BENCH_ECHO_MAX 4096

struct bench_server {
    int refs;                 /* the listener's watch, and each client's */
    int closed;               /* the listener is gone: unlisten, idle, the agent's end */
    struct agent_watch *w;    /* the listener's watch, while !closed */
    cJSON *id;                /* the bench_listen request's, to find it by */
    int port;
    char nonce[BENCH_NONCE_MAX + 2];   /* with its '\n' */
    size_t hello_len;
    int active;               /* clients being served now */
    double served, refused;   /* counts for bench_unlisten's answer */
    struct bench_client *clients;
};

enum client_phase { PHASE_HELLO, PHASE_PING, PHASE_BULK, PHASE_COUNT, PHASE_DRAIN };

struct bench_client {
    struct bench_server *srv;
    struct agent_watch *w;
    struct bench_client *next;
    enum client_phase phase;
    size_t hello_got;
    unsigned echo_owed;       /* pings read but not echoed yet (the socket was full) */
    int eof;                  /* the sender shut its side: the count is the last word */
    uint64_t bulk;
    unsigned char count[BENCH_COUNT_BYTES];
    size_t count_sent;
    int64_t end_ms;           /* the client's whole time */
};

/* Bulk bytes land here and are forgotten: the loop is one thread, so one buffer serves all. */
static unsigned char sink[256 * 1024];

static void server_unref(struct bench_server *s)
{
    if (--s->refs > 0) return;
    cJSON_Delete(s->id);
    free(s);
}

static void server_free(void *ctx) /* the listener's watch is gone */
{
    struct bench_server *s = ctx;
    s->closed = 1;
    s->w = NULL;
    server_unref(s);
}

static void client_free(void *ctx)
{
    struct bench_client *c = ctx;
    struct bench_server *s = c->srv;
    for (struct bench_client **pp = &s->clients; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    s->active--;
    if (!s->closed) {
        s->w->events = POLLIN;   /* a slot is free: the backlog's next one */
        if (s->active == 0) s->w->deadline_ms = mono_ms() + BENCH_IDLE_MS;
    }
    server_unref(s);
    free(c);
}

static void client_close(struct agent *ag, struct bench_client *c, int refused)
{
    if (refused) c->srv->refused++;
    agent_watch_del(ag, c->w);
}

/* The count, little-endian; the rest goes when the socket takes it. */
static void client_count(struct agent *ag, struct bench_client *c)
{
    if (c->phase != PHASE_COUNT) {
        c->phase = PHASE_COUNT;
        for (int i = 0; i < BENCH_COUNT_BYTES; i++) c->count[i] = (unsigned char)(c->bulk >> (8 * i));
        c->w->events = POLLOUT;
    }
    while (c->count_sent < BENCH_COUNT_BYTES) {
        ssize_t n = send(c->w->fd, c->count + c->count_sent, BENCH_COUNT_BYTES - c->count_sent,
                         MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            client_close(ag, c, 0);
            return;
        }
        c->count_sent += (size_t)n;
    }
    if (c->eof) {
        client_close(ag, c, 0);
        return;
    }
    /* Cut off while the sender still writes: closing now would reset the connection and could
     * destroy the count before the sender reads it. It stops when it reads the count. */
    shutdown(c->w->fd, SHUT_WR);
    c->phase = PHASE_DRAIN;
    c->w->events = POLLIN;
    c->w->deadline_ms = mono_ms() + BENCH_DRAIN_MS;
}

static void client_hello(struct agent *ag, struct bench_client *c)
{
    struct bench_server *s = c->srv;
    char buf[BENCH_NONCE_MAX + 2];
    /* Only up to the line's end: the first ping may already follow it. */
    ssize_t n = recv(c->w->fd, buf, s->hello_len - c->hello_got, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0 || memcmp(buf, s->nonce + c->hello_got, (size_t)n) != 0) {
        client_close(ag, c, 1);
        return;
    }
    c->hello_got += (size_t)n;
    if (c->hello_got < s->hello_len) return;
    s->served++;
    c->phase = PHASE_PING;
    c->w->deadline_ms = c->end_ms;
}

static int echo_flush(struct agent *ag, struct bench_client *c)
{
    char pings[64];
    memset(pings, BENCH_PING, sizeof pings);
    while (c->echo_owed) {
        size_t k = c->echo_owed < sizeof pings ? c->echo_owed : sizeof pings;
        ssize_t n = send(c->w->fd, pings, k, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->w->events = POLLOUT;   /* read nothing more until the echoes are out */
            return 0;
        }
        if (n <= 0) {
            client_close(ag, c, 0);
            return -1;
        }
        c->echo_owed -= (unsigned)n;
    }
    c->w->events = POLLIN;
    return 0;
}

/* Ping, bulk and drain phases: read what is there, up to a slice. */
static void client_read(struct agent *ag, struct bench_client *c)
{
    size_t slice = 0;
    while (slice < BENCH_READ_SLICE) {
        ssize_t n = recv(c->w->fd, sink, sizeof sink, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0) {          /* reset: the sender gave up; nobody waits for a count */
            client_close(ag, c, 0);
            return;
        }
        if (n == 0) {
            c->eof = 1;
            if (c->phase == PHASE_DRAIN) client_close(ag, c, 0);
            else client_count(ag, c);   /* a sender that never sent its bulk byte gets 0 */
            return;
        }
        slice += (size_t)n;
        size_t i = 0;
        while (c->phase == PHASE_PING && i < (size_t)n) {
            unsigned char b = sink[i++];
            if (b == BENCH_BULK) c->phase = PHASE_BULK;
            else if (b == BENCH_PING && c->echo_owed < BENCH_ECHO_MAX) c->echo_owed++;
            else {
                client_close(ag, c, 0);
                return;
            }
        }
        if (c->phase == PHASE_BULK) c->bulk += (uint64_t)n - i;
        if (c->echo_owed) {
            if (echo_flush(ag, c) < 0 || c->echo_owed) return;
        }
        if (c->phase == PHASE_BULK && c->bulk >= BENCH_CLIENT_BYTES) {
            client_count(ag, c);
            return;
        }
    }
}

static void client_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct bench_client *c = w->ctx;
    if (!revents) {           /* its time is up */
        if (c->phase == PHASE_HELLO) client_close(ag, c, 1);
        else if (c->phase == PHASE_BULK) client_count(ag, c);   /* what came in 30 s */
        else client_close(ag, c, 0);
        return;
    }
    switch (c->phase) {
    case PHASE_HELLO: client_hello(ag, c); break;
    case PHASE_COUNT: client_count(ag, c); break;
    case PHASE_PING:
        if (c->echo_owed && (echo_flush(ag, c) < 0 || c->echo_owed)) break;
        client_read(ag, c);
        break;
    default: client_read(ag, c); break;
    }
}

static void server_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct bench_server *s = w->ctx;
    if (!revents) {
        if (s->active == 0) agent_watch_del(ag, w);   /* idle for BENCH_IDLE_MS */
        else w->deadline_ms = 0;
        return;
    }
    while (s->active < BENCH_CLIENTS_MAX) {
        int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
        if (fd < 0) break;    /* EAGAIN: all taken; EMFILE: the next pass tries again */
        int one = 1;
        /* an echo is one byte: it must go at once, whatever is unacknowledged */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct bench_client *c = xcalloc(1, sizeof *c);
        c->srv = s;
        c->end_ms = mono_ms() + BENCH_CLIENT_MS;
        c->next = s->clients;
        s->clients = c;
        s->refs++;
        s->active++;
        c->w = agent_watch_add(ag, fd, POLLIN, client_ready, c, client_free);
        c->w->deadline_ms = mono_ms() + BENCH_HELLO_MS;
    }
    w->deadline_ms = 0;
    if (s->active >= BENCH_CLIENTS_MAX) w->events = 0;   /* the others wait in the backlog */
}

int agent_bench_nonce_ok(const char *nonce)
{
    size_t n = nonce ? strlen(nonce) : 0;
    return n >= BENCH_NONCE_MIN && n <= BENCH_NONCE_MAX && strspn(nonce, "0123456789abcdefABCDEF") == n;
}

/* Every address of both families where the node has IPv6 (one dual-stack socket), else IPv4. */
static int listen_any(int *port, char *err, size_t errlen)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int off = 0;
        struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
        if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) < 0 ||
            bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            snprintf(err, errlen, "%s: %s", fd < 0 ? "socket" : "bind", strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (listen(fd, 128) < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        snprintf(err, errlen, "listen: %s", strerror(errno));
        close(fd);
        return -1;
    }
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

void agent_bench_listen_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const char *nonce = agent_req_str(req, "nonce");
    char err[160];
    int port = 0;
    if (!agent_bench_nonce_ok(nonce)) {
        agent_send_error(ag, id, "bench_listen: \"nonce\" must be %d to %d hex digits",
                         BENCH_NONCE_MIN, BENCH_NONCE_MAX);
        return;
    }
    cJSON *msg = agent_reply_new(WIRE_EV_BENCH_LISTENING, id);
    int fd = listen_any(&port, err, sizeof err);
    if (fd < 0) {
        cJSON_AddStringToObject(msg, "error", err);
        agent_send(ag, msg);
        return;
    }
    struct bench_server *s = xcalloc(1, sizeof *s);
    s->refs = 1;
    s->id = id ? cJSON_Duplicate(id, 1) : NULL;
    s->port = port;
    s->hello_len = (size_t)snprintf(s->nonce, sizeof s->nonce, "%s\n", nonce);
    s->w = agent_watch_add(ag, fd, POLLIN, server_ready, s, server_free);
    s->w->deadline_ms = mono_ms() + BENCH_IDLE_MS;
    cJSON_AddNumberToObject(msg, "port", port);
    agent_send(ag, msg);
}

struct server_key {
    int port;                 /* 0: by id */
    const cJSON *id;
};

static int server_is(const struct agent_watch *w, const void *arg)
{
    const struct bench_server *s = w->ctx;
    const struct server_key *k = arg;
    if (k->port) return s->port == k->port;
    return s->id && k->id && cJSON_Compare(s->id, k->id, 1);
}

/* By "port", else by the id of the bench_listen that opened it (the same "id" again). */
void agent_bench_unlisten_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    long port;
    if (agent_req_int(ag, req, id, "port", 1, 65535, 0, &port) < 0) return;
    struct server_key key = { (int)port, id };
    if (!port && !id) {
        agent_send_error(ag, id, "bench_unlisten: needs the bench_listen's \"id\" or its \"port\"");
        return;
    }
    struct agent_watch *w = agent_watch_find(ag, server_ready, server_is, &key);
    cJSON *msg = agent_reply_new(WIRE_EV_BENCH_UNLISTEN, id);
    if (!w) {
        cJSON_AddStringToObject(msg, "error", "no such bench listener (closed already?)");
        agent_send(ag, msg);
        return;
    }
    struct bench_server *s = w->ctx;
    cJSON_AddNumberToObject(msg, "port", s->port);
    cJSON_AddNumberToObject(msg, "served", s->served);
    cJSON_AddNumberToObject(msg, "refused", s->refused);
    /* its clients end with it: nobody will read their figures */
    while (s->clients) agent_watch_del(ag, s->clients->w);
    agent_watch_del(ag, w);
    agent_send(ag, msg);
}
