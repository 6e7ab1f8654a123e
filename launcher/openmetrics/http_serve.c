/* The HTTP server of `--metrics` (http_serve.h): a listening socket and at most
 * HTTP_SERVE_CONNS connections, each a small state machine on the loop (read the request,
 * write the answer, linger), swept for their deadlines by one timer while any is open. The
 * answer always closes the connection: a scrape a connection, which keeps every state here
 * short-lived and bounded (Prometheus connects again for its next scrape). What a request
 * asks is judged by http_request.c from its bytes alone. */
#include "http_serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "http_request.h"
#include "util/evloop.h"

#define SWEEP_MS 250
#define ACCEPTS_PER_TURN 64   /* a flood of connections is taken a turn at a time */

enum phase { PH_READ, PH_WRITE, PH_LINGER };

/* A rendered body, shared by the connections that send it. */
struct body {
    int refs;
    int64_t made_ms;
    size_t len;
    char *data;
};

struct conn {
    struct http_serve *s;
    int fd;
    struct evloop_watch *w;
    enum phase phase;
    int64_t deadline_ms;
    char *req;                 /* HTTP_SERVE_REQUEST_MAX bytes */
    size_t n, scanned;         /* bytes read; where the search for the headers' end goes on */
    char head[512];            /* status line, headers, and an error's one-line body */
    size_t head_len;
    struct body *body;         /* a 200's, or NULL */
    size_t sent;               /* of head, then body */
};

struct http_serve {
    struct evloop *el;
    struct http_serve_opts o;
    int lfd;
    struct evloop_watch *lw;
    int64_t listen_again_ms;   /* out of descriptors: listening paused until then; 0 not */
    struct conn *conns[HTTP_SERVE_CONNS];
    int n_conns;
    uint64_t timer;
    struct body *fresh;
    struct http_serve_stats st;
    bool loopback;
    char url[128];
};

/* ---- bodies ------------------------------------------------------------------------------ */

static void body_drop(struct body *b)
{
    if (b && --b->refs == 0) {
        free(b->data);
        free(b);
    }
}

/* The body to send now: the one made within HTTP_SERVE_FRESH_MS, or a new one. */
static struct body *body_get(struct http_serve *s)
{
    int64_t now = mono_ms();
    if (!s->fresh || now - s->fresh->made_ms >= HTTP_SERVE_FRESH_MS) {
        struct strbuf sb;
        body_drop(s->fresh);
        strbuf_init(&sb);
        s->o.render(s->o.ctx, &sb);
        s->st.renders++;
        s->fresh = xcalloc(1, sizeof *s->fresh);
        s->fresh->refs = 1;
        s->fresh->made_ms = now;
        s->fresh->len = sb.len;
        s->fresh->data = sb.buf ? sb.buf : xstrdup("");
    }
    s->fresh->refs++;
    return s->fresh;
}

/* ---- connections ------------------------------------------------------------------------- */

static void on_conn(struct evloop *el, struct evloop_watch *w, short revents, void *ctx);

static void conn_close(struct conn *c)
{
    struct http_serve *s = c->s;
    for (int i = 0; i < s->n_conns; i++)
        if (s->conns[i] == c) {
            s->conns[i] = s->conns[--s->n_conns];
            break;
        }
    evloop_unwatch(s->el, c->w);
    close(c->fd);
    body_drop(c->body);
    free(c->req);
    free(c);
}

/* Writes what the socket takes; true when the whole answer went. */
static bool conn_write(struct conn *c, bool *failed)
{
    *failed = false;
    for (;;) {
        struct iovec iov[2];
        int k = 0;
        size_t body_len = c->body ? c->body->len : 0;
        if (c->sent < c->head_len) iov[k++] = (struct iovec){c->head + c->sent, c->head_len - c->sent};
        size_t body_at = c->sent > c->head_len ? c->sent - c->head_len : 0;
        if (body_at < body_len) iov[k++] = (struct iovec){c->body->data + body_at, body_len - body_at};
        if (k == 0) return true;
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)k};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) *failed = true;
            return false;
        }
        c->sent += (size_t)w;
    }
}

/* The answer is out: no more to send; what the client still sends is read and dropped for a
 * moment, so that closing does not reset the connection under an answer it has not read. */
static void conn_linger(struct conn *c)
{
    shutdown(c->fd, SHUT_WR);
    c->phase = PH_LINGER;
    c->deadline_ms = mono_ms() + HTTP_SERVE_LINGER_MS;
    evloop_watch_set_events(c->w, POLLIN);
}

static void conn_send(struct conn *c)
{
    bool failed;
    if (conn_write(c, &failed)) conn_linger(c);
    else if (failed) conn_close(c);
}

static void conn_answer(struct conn *c, struct body *b, int code, const char *reason, const char *extra_header,
                        const char *text)
{
    struct http_serve *s = c->s;
    if (b) {
        c->head_len = (size_t)snprintf(c->head, sizeof c->head,
                                       "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                                       "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                                       s->o.content_type, b->len);
        s->st.ok++;
    } else {
        c->head_len = (size_t)snprintf(c->head, sizeof c->head,
                                       "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                       "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s\n",
                                       code, reason, strlen(text) + 1, extra_header ? extra_header : "", text);
        if (code == 408) s->st.timed_out++;
        else s->st.bad++;
    }
    if (c->head_len >= sizeof c->head) c->head_len = sizeof c->head - 1;
    c->body = b;
    c->sent = 0;
    c->phase = PH_WRITE;
    c->deadline_ms = mono_ms() + HTTP_SERVE_SEND_MS;
    evloop_watch_set_events(c->w, POLLOUT);
    conn_send(c);
}

static void conn_refuse(struct conn *c, int status)
{
    conn_answer(c, NULL, status, http_status_reason(status), status == 405 ? "Allow: GET\r\n" : NULL,
                http_status_text(status));
}

static void conn_read(struct conn *c)
{
    ssize_t k = recv(c->fd, c->req + c->n, HTTP_SERVE_REQUEST_MAX - c->n, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (k <= 0) {   /* gone before it asked: nothing to answer */
        conn_close(c);
        return;
    }
    c->n += (size_t)k;
    int st = http_request_judge(c->req, c->n, HTTP_SERVE_REQUEST_MAX, c->s->o.path, &c->scanned);
    if (st == 200) conn_answer(c, body_get(c->s), 200, "OK", NULL, NULL);
    else if (st) conn_refuse(c, st);
}

static void conn_linger_read(struct conn *c)
{
    char scratch[16384];
    ssize_t k = recv(c->fd, scratch, sizeof scratch, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (k <= 0) conn_close(c);
}

static void on_conn(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    struct conn *c = ctx;
    (void)el;
    (void)w;
    if (c->phase == PH_READ) conn_read(c);
    else if (c->phase == PH_WRITE) conn_send(c);
    else if (revents & (POLLIN | POLLHUP | POLLERR)) conn_linger_read(c);
}

/* ---- the listening socket and the sweep -------------------------------------------------- */

static void on_timer(struct evloop *el, void *ctx);

static void sweep_arm(struct http_serve *s)
{
    if (!s->timer && (s->n_conns > 0 || s->listen_again_ms || s->fresh))
        s->timer = evloop_timer_add(s->el, mono_ms() + SWEEP_MS, on_timer, s);
}

static void on_timer(struct evloop *el, void *ctx)
{
    struct http_serve *s = ctx;
    int64_t now = mono_ms();
    (void)el;
    s->timer = 0;
    for (int i = s->n_conns - 1; i >= 0; i--) {
        struct conn *c = s->conns[i];
        if (now < c->deadline_ms) continue;
        if (c->phase == PH_READ) {
            conn_refuse(c, 408);
        } else {
            if (c->phase == PH_WRITE) s->st.timed_out++;
            conn_close(c);
        }
    }
    /* a body nobody sends any more is let go (10 MB at 8,192 ranks) */
    if (s->fresh && s->fresh->refs == 1 && now - s->fresh->made_ms >= HTTP_SERVE_FRESH_MS) {
        body_drop(s->fresh);
        s->fresh = NULL;
    }
    if (s->listen_again_ms && now >= s->listen_again_ms) {
        s->listen_again_ms = 0;
        evloop_watch_pause(s->lw, false);
    }
    sweep_arm(s);
}

/* Every connection in use: this one is told so and closed (what it sent is read first, so
 * that the close does not reset the connection under the answer). */
static void refuse(struct http_serve *s, int fd)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                               "Content-Length: 28\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
                               "too many connections: retry\n";
    char scratch[4096];
    (void)!recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
    (void)!send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    close(fd);
    s->st.refused++;
}

static void on_listen(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    struct http_serve *s = ctx;
    (void)w;
    (void)revents;
    for (int k = 0; k < ACCEPTS_PER_TURN; k++) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: the pending connection would wake every turn; listen
                 * again once the sweep came round */
                evloop_watch_pause(s->lw, true);
                s->listen_again_ms = mono_ms() + SWEEP_MS;
                sweep_arm(s);
            }
            return;
        }
        if (s->n_conns == HTTP_SERVE_CONNS) {
            refuse(s, fd);
            continue;
        }
        struct conn *c = xcalloc(1, sizeof *c);
        c->s = s;
        c->fd = fd;
        c->req = xmalloc(HTTP_SERVE_REQUEST_MAX);
        c->phase = PH_READ;
        c->deadline_ms = mono_ms() + HTTP_SERVE_REQUEST_MS;
        c->w = evloop_watch(el, fd, POLLIN, on_conn, c);
        s->conns[s->n_conns++] = c;
        sweep_arm(s);
    }
}

int http_serve_parse_addr(const char *spec, char *host, size_t hostlen, int *port, char *err, size_t errlen)
{
    const char *p = spec ? strrchr(spec, ':') : NULL, *ps = p ? p + 1 : spec;
    size_t hl = p ? (size_t)(p - spec) : 0;
    char *end;
    if (!spec || !*ps || strspn(ps, "0123456789") != strlen(ps) || strlen(ps) > 5) goto bad;
    long v = strtol(ps, &end, 10);
    if (v > 65535) goto bad;
    if (!p) {
        snprintf(host, hostlen, "127.0.0.1");
    } else {
        if (spec[0] == '[') {   /* [IPv6]:PORT */
            if (hl < 3 || spec[hl - 1] != ']') goto bad;
            spec++;
            hl -= 2;
        } else if (memchr(spec, ':', hl)) {
            goto bad;   /* an IPv6 address without brackets */
        }
        if (hl == 0 || hl >= hostlen) goto bad;
        memcpy(host, spec, hl);
        host[hl] = '\0';
    }
    *port = (int)v;
    return 0;
bad:
    snprintf(err, errlen, "--metrics wants [ADDR:]PORT (9400, 127.0.0.1:9400, 0.0.0.0:9400 for every interface, "
             "[::1]:9400), not '%s'", spec ? spec : "");
    return -1;
}

static void make_url(struct http_serve *s)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char a[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getsockname(s->lfd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
            port = ntohs(in->sin_port);
            s->loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        } else if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof a);
            port = ntohs(in6->sin6_port);
            s->loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
                          (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127);
        }
    }
    snprintf(s->url, sizeof s->url, ss.ss_family == AF_INET6 ? "http://[%s]:%d%s" : "http://%s:%d%s", a, port,
             s->o.path);
}

struct http_serve *http_serve_open(struct evloop *el, const char *spec, const struct http_serve_opts *o,
                                   char *err, size_t errlen)
{
    char host[256], port_s[8];
    int port, e, fd = -1, one = 1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res = NULL;
    if (http_serve_parse_addr(spec, host, sizeof host, &port, err, errlen) < 0) return NULL;
    snprintf(port_s, sizeof port_s, "%d", port);
    /* at start, before the loop runs: a name here may be looked up */
    if ((e = getaddrinfo(host, port_s, &hints, &res)) != 0) {
        snprintf(err, errlen, "--metrics %s: %s", spec, gai_strerror(e));
        return NULL;
    }
    e = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "--metrics %s: cannot listen there: %s%s", spec, strerror(e),
                 e == EADDRINUSE ? " (another program has the port: choose another)" : "");
        return NULL;
    }
    struct http_serve *s = xcalloc(1, sizeof *s);
    s->el = el;
    s->o = *o;
    s->lfd = fd;
    s->lw = evloop_watch(el, fd, POLLIN, on_listen, s);
    make_url(s);
    return s;
}

void http_serve_free(struct http_serve *s)
{
    if (!s) return;
    while (s->n_conns) conn_close(s->conns[s->n_conns - 1]);
    if (s->timer) evloop_timer_cancel(s->el, s->timer);
    evloop_unwatch(s->el, s->lw);
    close(s->lfd);
    body_drop(s->fresh);
    free(s);
}

const char *http_serve_url(const struct http_serve *s)
{
    return s->url;
}

bool http_serve_loopback(const struct http_serve *s)
{
    return s->loopback;
}

const struct http_serve_stats *http_serve_stats(const struct http_serve *s)
{
    return &s->st;
}

int http_serve_conns(const struct http_serve *s)
{
    return s->n_conns;
}
