/* The rendezvous store's server: one background thread in rank 0 serving the key-value store
 * over TCP (wire format in the banner of store.c).
 *
 * The thread owns everything it touches (the table, the connections); the trainer only starts
 * and stops it, so there are no locks and the trainer is never blocked by it. Every socket is
 * nonblocking and served from one poll() loop; a GET or WAIT for a key that is not there yet
 * parks its connection until a SET/ADD provides the key or the request's own timeout passes.
 * A connection that has not presented the right job token can send nothing but its hello. */
#include "store.h"
#include "store_wire.h"
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TABLE_SIZE      4096
#define HELLO_TIMEOUT_S 30     /* a connection that never says hello is dropped */
#define MAX_CONNS       65536

struct kv {
    struct kv *next;
    char *key;
    size_t klen;
    uint8_t *val;
    size_t vlen;
};

struct conn {
    int fd;
    int authed;
    int closing;               /* close once the output is flushed */
    int64_t hello_deadline;
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    uint8_t *pending;          /* a parked GET/WAIT frame (op + body), or NULL */
    uint32_t pending_len;
    int64_t pending_deadline;
};

struct store_server {
    pthread_t thread;
    int listen_fd;
    int wake[2];
    int port;
    char token[STORE_MAX_TOKEN + 1];
    struct kv *table[TABLE_SIZE];
    struct conn *conns;
    size_t nconns, cap_conns;
};

static uint32_t key_hash(const char *k, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)k[i]) * 16777619u;
    return h % TABLE_SIZE;
}

static struct kv *kv_find(struct store_server *s, const char *k, size_t n)
{
    for (struct kv *e = s->table[key_hash(k, n)]; e; e = e->next)
        if (e->klen == n && memcmp(e->key, k, n) == 0) return e;
    return NULL;
}

static struct kv *kv_put(struct store_server *s, const char *k, size_t n)
{
    struct kv *e = kv_find(s, k, n);
    if (e) return e;
    e = calloc(1, sizeof *e);
    if (!e || !(e->key = malloc(n + 1))) abort();
    memcpy(e->key, k, n);
    e->key[n] = '\0';
    e->klen = n;
    uint32_t h = key_hash(k, n);
    e->next = s->table[h];
    s->table[h] = e;
    return e;
}

static void out_add(struct conn *c, const void *p, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 256;
        while (cap < c->out_len + n) cap *= 2;
        if (!(c->out = realloc(c->out, cap))) abort();
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static void reply(struct conn *c, uint8_t status, const void *body, size_t n)
{
    uint8_t h[5];
    h[0] = status;
    net_put_u32(h + 1, (uint32_t)n);
    out_add(c, h, 5);
    if (n) out_add(c, body, n);
}

static void reply_error(struct conn *c, const char *msg)
{
    reply(c, STORE_ERROR, msg, strlen(msg));
}

/* Parses a key at *p (u32 length, bytes) inside [*p, end). 0 or -1. */
static int take_key(const uint8_t **p, const uint8_t *end, const char **k, size_t *n)
{
    if (end - *p < 4) return -1;
    uint32_t l = net_get_u32(*p);
    if (l == 0 || l > STORE_MAX_KEY || (size_t)(end - *p - 4) < l) return -1;
    *k = (const char *)*p + 4;
    *n = l;
    *p += 4 + l;
    return 0;
}

/* Tries a GET or WAIT frame: replies and returns 1 when every key is there, else returns 0
 * with the first missing key in *missing. -1 (after replying an error) for a bad frame. */
static int try_waiting_op(struct store_server *s, struct conn *c, const uint8_t *f, uint32_t len,
                          const char **missing, size_t *missing_len)
{
    const uint8_t *p = f + 1, *end = f + len;
    if (end - p < 4) goto bad;
    p += 4;   /* the timeout, already turned into pending_deadline */
    if (f[0] == STORE_OP_GET) {
        const char *k = (const char *)p;
        size_t n = (size_t)(end - p);
        if (n == 0 || n > STORE_MAX_KEY) goto bad;
        struct kv *e = kv_find(s, k, n);
        if (!e) {
            *missing = k;
            *missing_len = n;
            return 0;
        }
        reply(c, STORE_OK, e->val, e->vlen);
        return 1;
    }
    if (end - p < 4) goto bad;
    uint32_t nkeys = net_get_u32(p);
    p += 4;
    for (uint32_t i = 0; i < nkeys; i++) {
        const char *k;
        size_t n;
        if (take_key(&p, end, &k, &n) < 0) goto bad;
        if (!kv_find(s, k, n)) {
            *missing = k;
            *missing_len = n;
            return 0;
        }
    }
    reply(c, STORE_OK, NULL, 0);
    return 1;
bad:
    reply_error(c, "malformed GET/WAIT request");
    return -1;
}

static void handle_request(struct store_server *s, struct conn *c, const uint8_t *f, uint32_t len)
{
    const uint8_t *p = f + 1, *end = f + len;
    const char *k;
    size_t n;
    switch (f[0]) {
    case STORE_OP_SET: {
        if (take_key(&p, end, &k, &n) < 0) {
            reply_error(c, "malformed SET request");
            return;
        }
        struct kv *e = kv_put(s, k, n);
        size_t vlen = (size_t)(end - p);
        uint8_t *v = malloc(vlen ? vlen : 1);
        if (!v) abort();
        memcpy(v, p, vlen);
        free(e->val);
        e->val = v;
        e->vlen = vlen;
        reply(c, STORE_OK, NULL, 0);
        return;
    }
    case STORE_OP_ADD: {
        if (end - p < 9 || end - p - 8 > STORE_MAX_KEY) {
            reply_error(c, "malformed ADD request");
            return;
        }
        int64_t delta = (int64_t)net_get_u64(p);
        k = (const char *)p + 8;
        n = (size_t)(end - p - 8);
        struct kv *e = kv_find(s, k, n);
        long long cur = 0;
        if (e) {
            char buf[32];
            char *endp;
            if (e->vlen == 0 || e->vlen >= sizeof buf) goto not_int;
            memcpy(buf, e->val, e->vlen);
            buf[e->vlen] = '\0';
            cur = strtoll(buf, &endp, 10);
            if (*endp) goto not_int;
        } else {
            e = kv_put(s, k, n);
        }
        cur += delta;
        char num[32];
        int l = snprintf(num, sizeof num, "%lld", cur);
        free(e->val);
        if (!(e->val = malloc((size_t)l))) abort();
        memcpy(e->val, num, (size_t)l);
        e->vlen = (size_t)l;
        uint8_t b[8];
        net_put_u64(b, (uint64_t)cur);
        reply(c, STORE_OK, b, 8);
        return;
not_int:
        reply_error(c, "ADD on a key whose value is not an integer");
        return;
    }
    case STORE_OP_GET:
    case STORE_OP_WAIT: {
        const char *miss;
        size_t ml;
        if (len < 5) {
            reply_error(c, "malformed request");
            return;
        }
        if (try_waiting_op(s, c, f, len, &miss, &ml) != 0) return;
        /* Park it: the client sends nothing else until we answer. */
        if (!(c->pending = malloc(len))) abort();
        memcpy(c->pending, f, len);
        c->pending_len = len;
        c->pending_deadline = net_now_ns() + (int64_t)net_get_u32(f + 1) * 1000000;
        return;
    }
    default:
        reply_error(c, "unknown request");
        c->closing = 1;
    }
}

/* After a SET/ADD, or on a timer: answers the parked requests that can be answered. */
static void serve_pending(struct store_server *s)
{
    int64_t now = net_now_ns();
    for (size_t i = 0; i < s->nconns; i++) {
        struct conn *c = &s->conns[i];
        if (!c->pending) continue;
        const char *miss;
        size_t ml;
        int r = try_waiting_op(s, c, c->pending, c->pending_len, &miss, &ml);
        if (r == 0 && now >= c->pending_deadline) {
            reply(c, STORE_TIMEOUT, miss, ml);
            r = 1;
        }
        if (r != 0) {
            free(c->pending);
            c->pending = NULL;
        }
    }
}

/* Consumes whole frames from the input buffer. */
static void handle_input(struct store_server *s, struct conn *c)
{
    size_t off = 0;
    while (!c->closing && !c->pending) {
        uint8_t *p = c->in + off;
        size_t have = c->in_len - off;
        if (!c->authed) {
            if (have < 7) break;
            size_t tl = (size_t)p[5] << 8 | p[6];
            if (memcmp(p, STORE_MAGIC, 4) != 0 || tl > STORE_MAX_TOKEN) {
                c->closing = 1;   /* not one of ours: say nothing */
                break;
            }
            if (have < 7 + tl) break;
            uint8_t r[5];
            memcpy(r, STORE_MAGIC, 4);
            r[4] = STORE_HELLO_OK;
            if (p[4] != STORE_VERSION) r[4] = STORE_HELLO_VER;
            else if (s->token[0] && !net_token_equal((const char *)p + 7, tl, s->token,
                                                     strlen(s->token)))
                r[4] = STORE_HELLO_TOKEN;
            out_add(c, r, 5);
            if (r[4] != STORE_HELLO_OK) c->closing = 1;
            c->authed = 1;
            off += 7 + tl;
            continue;
        }
        if (have < 5) break;
        uint32_t blen = net_get_u32(p + 1);
        if (blen > STORE_MAX_BODY) {
            reply_error(c, "request too large");
            c->closing = 1;
            break;
        }
        if (have < 5 + (size_t)blen) break;
        /* Handlers see the op byte followed by the body: shift the body next to the op. */
        memmove(p + 1, p + 5, blen);
        handle_request(s, c, p, blen + 1);
        off += 5 + blen;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
}

static void conn_free(struct conn *c)
{
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c->pending);
}

static void accept_all(struct store_server *s)
{
    int fd;
    while ((fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        if (s->nconns >= MAX_CONNS) {
            close(fd);
            continue;
        }
        net_set_nodelay(fd);
        if (s->nconns == s->cap_conns) {
            s->cap_conns = s->cap_conns ? 2 * s->cap_conns : 16;
            if (!(s->conns = realloc(s->conns, s->cap_conns * sizeof *s->conns))) abort();
        }
        struct conn *c = &s->conns[s->nconns++];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->hello_deadline = net_now_ns() + (int64_t)HELLO_TIMEOUT_S * 1000000000;
    }
}

/* Reads what is there; returns -1 when the connection is gone. */
static int conn_read(struct conn *c)
{
    for (;;) {
        if (c->in_cap - c->in_len < 4096) {
            c->in_cap = c->in_cap ? 2 * c->in_cap : 8192;
            if (!(c->in = realloc(c->in, c->in_cap))) abort();
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            /* An unauthenticated peer cannot make us buffer more than a hello. */
            if (!c->authed && c->in_len > 7 + STORE_MAX_TOKEN) return -1;
            if (c->in_len > 2 * (size_t)STORE_MAX_BODY) return 0;
            continue;
        }
        if (n == 0) return -1;
        if (errno == EINTR) continue;
        return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    }
}

static int conn_flush(struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return -1;
    }
    c->out_off = c->out_len = 0;
    return 0;
}

static void *server_main(void *arg)
{
    struct store_server *s = arg;
    struct pollfd *pfd = NULL;
    size_t pfd_cap = 0;
    for (;;) {
        if (pfd_cap < s->nconns + 2) {
            pfd_cap = 2 * (s->nconns + 2);
            if (!(pfd = realloc(pfd, pfd_cap * sizeof *pfd))) abort();
        }
        int64_t now = net_now_ns(), next = now + 1000000000;
        pfd[0] = (struct pollfd){ .fd = s->wake[0], .events = POLLIN };
        pfd[1] = (struct pollfd){ .fd = s->listen_fd, .events = POLLIN };
        for (size_t i = 0; i < s->nconns; i++) {
            struct conn *c = &s->conns[i];
            short ev = 0;
            if (!c->closing && !c->pending) ev |= POLLIN;
            if (c->out_len > c->out_off) ev |= POLLOUT;
            pfd[i + 2] = (struct pollfd){ .fd = c->fd, .events = ev };
            if (c->pending && c->pending_deadline < next) next = c->pending_deadline;
            if (!c->authed && c->hello_deadline < next) next = c->hello_deadline;
        }
        int ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
        if (poll(pfd, s->nconns + 2, ms) < 0 && errno != EINTR) break;
        if (pfd[0].revents) break;   /* store_server_stop */

        now = net_now_ns();
        size_t n = s->nconns;
        for (size_t i = 0; i < n; i++) {
            struct conn *c = &s->conns[i];
            short re = pfd[i + 2].revents;
            int dead = 0;
            if (re & (POLLIN | POLLHUP | POLLERR)) {
                if (conn_read(c) < 0) dead = 1;
                else handle_input(s, c);
            }
            if (!c->authed && now >= c->hello_deadline) dead = 1;
            if (!dead && conn_flush(c) < 0) dead = 1;
            if (!dead && c->closing && c->out_off == c->out_len) dead = 1;
            c->fd = dead ? -c->fd - 1 : c->fd;   /* mark; removed below */
        }
        /* Drop the dead connections (compacting keeps the poll array in step). */
        size_t w = 0;
        for (size_t i = 0; i < s->nconns; i++) {
            struct conn *c = &s->conns[i];
            if (c->fd < 0) {
                c->fd = -c->fd - 1;
                conn_free(c);
            } else {
                s->conns[w++] = *c;
            }
        }
        s->nconns = w;
        if (pfd[1].revents & POLLIN) accept_all(s);
        serve_pending(s);
        for (size_t i = 0; i < s->nconns; i++) {
            struct conn *c = &s->conns[i];
            if (conn_flush(c) < 0) c->closing = 1;
            /* A parked request just answered: there may be more frames behind it. */
            if (!c->pending && c->in_len) handle_input(s, c);
        }
    }
    free(pfd);
    return NULL;
}

struct store_server *store_server_start(const char *addr, int port, const char *token,
                                        char *err, size_t errlen)
{
    char ep[300];
    net_endpoint(ep, sizeof ep, addr, port);
    if (token && strlen(token) > STORE_MAX_TOKEN) {
        snprintf(err, errlen, "the job token is longer than %d bytes", STORE_MAX_TOKEN);
        return NULL;
    }
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gr = getaddrinfo(addr, ps, &hints, &res);
    if (gr != 0) {
        snprintf(err, errlen, "cannot serve the rendezvous store on %s: cannot resolve '%s' "
                 "(%s); set MASTER_ADDR to rank 0's address", ep, addr, gai_strerror(gr));
        return NULL;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0) break;
        /* Prefer the error that says most: a busy port beats a missing address family. */
        if (e != EADDRINUSE) e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        if (e == EADDRINUSE)
            snprintf(err, errlen, "cannot serve the rendezvous store on %s: port is in use "
                     "(another job? pick another MASTER_PORT)", ep);
        else if (e == EADDRNOTAVAIL)
            snprintf(err, errlen, "cannot serve the rendezvous store on %s: %s is not an "
                     "address of this machine (MASTER_ADDR must be rank 0's own address)",
                     ep, addr);
        else if (e == EACCES)
            snprintf(err, errlen, "cannot serve the rendezvous store on %s: permission denied "
                     "(ports below 1024 need privileges; pick another MASTER_PORT)", ep);
        else
            snprintf(err, errlen, "cannot serve the rendezvous store on %s: %s", ep,
                     strerror(e));
        return NULL;
    }
    struct store_server *s = calloc(1, sizeof *s);
    if (!s) abort();
    s->listen_fd = fd;
    net_set_nonblock(fd);
    if (token) strcpy(s->token, token);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char ip[64];
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
        net_sockaddr_ip((struct sockaddr *)&ss, ip, sizeof ip, &s->port) < 0)
        s->port = port;
    if (pipe2(s->wake, O_CLOEXEC) < 0 || pthread_create(&s->thread, NULL, server_main, s) != 0) {
        snprintf(err, errlen, "cannot start the rendezvous store thread: %s", strerror(errno));
        close(fd);
        free(s);
        return NULL;
    }
    return s;
}

int store_server_port(const struct store_server *srv)
{
    return srv->port;
}

void store_server_stop(struct store_server *srv)
{
    if (!srv) return;
    char b = 1;
    while (write(srv->wake[1], &b, 1) < 0 && errno == EINTR) {}
    pthread_join(srv->thread, NULL);
    for (size_t i = 0; i < srv->nconns; i++) conn_free(&srv->conns[i]);
    free(srv->conns);
    for (size_t i = 0; i < TABLE_SIZE; i++) {
        for (struct kv *e = srv->table[i], *nx; e; e = nx) {
            nx = e->next;
            free(e->key);
            free(e->val);
            free(e);
        }
    }
    close(srv->listen_fd);
    close(srv->wake[0]);
    close(srv->wake[1]);
    free(srv);
}
