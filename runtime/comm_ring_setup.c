/* Connecting the CPU ring (comm_ring_new): peers find each other through the rendezvous store.
 *
 * Each rank listens on an ephemeral port of the local address it uses to reach the store (the
 * address its peers can reach it on too), publishes "ring/<gen>/<rank>" = "ip:port", connects
 * to rank+1 and accepts rank-1. <gen> counts the rings this rank has made on this store, so a
 * second ring in the same job uses fresh keys; every rank makes its rings in the same order.
 * The listener is up before the key is published, so connecting never races the accept.
 *
 * Ring hello (big-endian): "DDPR" u8 version(1) u32 gen u32 rank u32 world u16 token_len token
 * from the connecting rank; the accepting rank answers "DDPR" u8 status (0 ok, 1 wrong token,
 * 2 wrong rank/generation/world) and closes the connection unless it was ok. A stray or wrong
 * connection is refused and the accept goes on until the right peer or the timeout. */
#include "comm.h"
#include "comm_ring.h"
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RING_MAGIC   "DDPR"
#define RING_VERSION 1
#define RING_OK      0
#define RING_TOKEN   1
#define RING_WRONG   2

static size_t env_size(const char *name, size_t dflt, size_t lo, size_t hi)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K') v <<= 10, end++;
    else if (*end == 'm' || *end == 'M') v <<= 20, end++;
    if (*end || v < lo || v > hi) return dflt;
    return (size_t)v;
}

/* Socket buffers: by default the kernel's autotuning, which measured faster on loopback than
 * fixed 4 or 16 MiB buffers (fixing a size turns autotuning off); DDPTOP_RING_SOCKBUF sets one. */
static void set_bufs(int fd)
{
    int sz = (int)env_size("DDPTOP_RING_SOCKBUF", 0, 0, 256u << 20);
    if (sz == 0) return;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
}

static int listen_on(const char *ip, char *addr_out, size_t outlen, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }, *res;
    if (getaddrinfo(ip, "0", &hints, &res) != 0) {
        snprintf(err, errlen, "cannot listen for ring peers on %s: not a numeric address", ip);
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) set_bufs(fd);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        snprintf(err, errlen, "cannot listen for ring peers on %s: %s", ip, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int port;
    char buf[64];
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
        net_sockaddr_ip((struct sockaddr *)&ss, buf, sizeof buf, &port) < 0) {
        snprintf(err, errlen, "cannot listen for ring peers on %s: %s", ip, strerror(errno));
        close(fd);
        return -1;
    }
    net_endpoint(addr_out, outlen, buf, port);
    net_set_nonblock(fd);
    return fd;
}

/* Connects to "ip:port" or "[ip6]:port". */
static int connect_to(const char *ep, int64_t deadline)
{
    char host[128];
    const char *colon = strrchr(ep, ':');
    if (!colon || (size_t)(colon - ep) >= sizeof host) return -1;
    const char *h = ep;
    size_t hl = (size_t)(colon - ep);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }, *res;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) set_bufs(fd);
    if (fd < 0 || net_connect(fd, res->ai_addr, res->ai_addrlen, deadline) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        errno = e;
        return -1;
    }
    freeaddrinfo(res);
    return fd;
}

static size_t make_hello(uint8_t *b, int gen, int rank, int world, const char *token)
{
    size_t tl = strlen(token);
    memcpy(b, RING_MAGIC, 4);
    b[4] = RING_VERSION;
    net_put_u32(b + 5, (uint32_t)gen);
    net_put_u32(b + 9, (uint32_t)rank);
    net_put_u32(b + 13, (uint32_t)world);
    b[17] = (uint8_t)(tl >> 8);
    b[18] = (uint8_t)tl;
    memcpy(b + 19, token, tl);
    return 19 + tl;
}

/* Reads one hello from a fresh connection and answers it. Returns 1 when it is our previous
 * rank, 0 when it was refused (fd closed by the caller), -1 when it said nothing usable. */
static int check_hello(int fd, int gen, int want_rank, int world, const char *token)
{
    uint8_t h[19], tok[256];
    int64_t dl = net_deadline(5);
    if (net_read_all(fd, h, 19, dl) != 0 || memcmp(h, RING_MAGIC, 4) != 0) return -1;
    size_t tl = (size_t)h[17] << 8 | h[18];
    if (tl > sizeof tok || net_read_all(fd, tok, tl, dl) != 0) return -1;
    uint8_t reply[5];
    memcpy(reply, RING_MAGIC, 4);
    if (!net_token_equal((const char *)tok, tl, token, strlen(token))) reply[4] = RING_TOKEN;
    else if (h[4] != RING_VERSION || net_get_u32(h + 5) != (uint32_t)gen ||
             net_get_u32(h + 9) != (uint32_t)want_rank || net_get_u32(h + 13) != (uint32_t)world)
        reply[4] = RING_WRONG;
    else reply[4] = RING_OK;
    if (net_write_all(fd, reply, 5, dl) != 0) return -1;
    return reply[4] == RING_OK;
}

static void describe(char *buf, size_t len, int rank, int fd, const char *fallback,
                     const char *role)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char ip[64], ep[100];
    int port;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        net_sockaddr_ip((struct sockaddr *)&ss, ip, sizeof ip, &port) == 0)
        net_endpoint(ep, sizeof ep, ip, port);
    else snprintf(ep, sizeof ep, "%s", fallback);
    snprintf(buf, len, "rank %d (%s, the %s rank in the ring)", rank, ep, role);
}

void ring_close(struct ring *r)
{
    if (r->next_fd >= 0) close(r->next_fd);
    if (r->prev_fd >= 0) close(r->prev_fd);
    if (r->wake[0] >= 0) close(r->wake[0]);
    if (r->wake[1] >= 0) close(r->wake[1]);
    free(r->tmp);
    free(r->q);
    free(r);
}

struct comm *comm_ring_new(const struct dist_env *env, struct store *st, double timeout_s,
                           char *err, size_t errlen)
{
    if (env->world_size <= 1) {
        struct comm *c = calloc(1, sizeof *c);
        if (!c) abort();
        c->ops = &comm_solo_ops;
        c->rank = env->rank;
        c->world_size = 1;
        return c;
    }
    const int rank = env->rank, w = env->world_size;
    const int next = (rank + 1) % w, prev = (rank + w - 1) % w;
    int64_t deadline = net_deadline(timeout_s);
    int lfd = -1;
    struct ring *r = calloc(1, sizeof *r);
    if (!r) abort();
    r->c.ops = &comm_ring_ops;
    r->c.rank = rank;
    r->c.world_size = w;
    r->next_fd = r->prev_fd = r->wake[0] = r->wake[1] = -1;
    r->timeout_s = timeout_s;
    r->tmp_cap = env_size("DDPTOP_RING_CHUNK", 1u << 20, 4096, 64u << 20) & ~(size_t)3;
    r->min_send = env_size("DDPTOP_RING_MIN_SEND", r->tmp_cap / 4, 1, 64u << 20);
    if (!(r->tmp = malloc(r->tmp_cap))) abort();

    char key[64], ip[64], mine[100], theirs_ep[100];
    int64_t gen;
    snprintf(key, sizeof key, "ring/gen/%d", rank);
    if (store_add(st, key, 1, &gen) < 0 || store_local_addr(st, ip, sizeof ip) < 0) {
        snprintf(err, errlen, "rank %d: cannot set up the CPU ring: %s", rank, store_error(st));
        goto fail;
    }
    if ((lfd = listen_on(ip, mine, sizeof mine, err, errlen)) < 0) goto fail;
    snprintf(key, sizeof key, "ring/%lld/%d", (long long)gen, rank);
    if (store_set(st, key, mine, strlen(mine)) < 0) {
        snprintf(err, errlen, "rank %d: cannot publish its ring address: %s", rank,
                 store_error(st));
        goto fail;
    }
    snprintf(key, sizeof key, "ring/%lld/%d", (long long)gen, next);
    void *val;
    size_t vlen;
    if (store_get(st, key, &val, &vlen, (double)(deadline - net_now_ns()) / 1e9) < 0) {
        snprintf(err, errlen, "rank %d: cannot find rank %d's ring address: %s", rank, next,
                 store_error(st));
        goto fail;
    }
    snprintf(theirs_ep, sizeof theirs_ep, "%.*s", (int)vlen, (char *)val);
    free(val);

    uint8_t hello[19 + 256];
    size_t hl = make_hello(hello, (int)gen, rank, w, env->token);
    if ((r->next_fd = connect_to(theirs_ep, deadline)) < 0 ||
        net_write_all(r->next_fd, hello, hl, deadline) != 0) {
        snprintf(err, errlen, "rank %d: cannot connect to rank %d (the next rank in the ring) "
                 "at %s: %s", rank, next, theirs_ep, strerror(errno));
        goto fail;
    }
    /* Accept until the previous rank says hello; refuse anything else. */
    while (r->prev_fd < 0) {
        struct pollfd p = { .fd = lfd, .events = POLLIN };
        int ms = net_ms_left(deadline, 1000);
        if (ms == 0) {
            snprintf(err, errlen, "rank %d: rank %d (the previous rank in the ring) did not "
                     "connect within %g s", rank, prev, timeout_s);
            goto fail;
        }
        if (poll(&p, 1, ms) <= 0) continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        if (check_hello(fd, (int)gen, prev, w, env->token) == 1) r->prev_fd = fd;
        else close(fd);
    }
    close(lfd);
    lfd = -1;

    uint8_t reply[5];
    int rc = net_read_all(r->next_fd, reply, 5, deadline);
    if (rc != 0 || memcmp(reply, RING_MAGIC, 4) != 0 || reply[4] != RING_OK) {
        snprintf(err, errlen, "rank %d: rank %d (the next rank in the ring, %s) %s", rank, next,
                 theirs_ep, rc != 0 ? "closed the connection during the ring hello" :
                 reply[4] == RING_TOKEN ? "refused our job token (is DDPTOP_JOB_TOKEN the "
                 "same on every rank?)" : "refused our ring hello (a rank from another job "
                 "or attempt?)");
        goto fail;
    }
    net_set_nonblock(r->next_fd);
    net_set_nonblock(r->prev_fd);
    net_set_nodelay(r->next_fd);
    net_set_nodelay(r->prev_fd);
    describe(r->next_desc, sizeof r->next_desc, next, r->next_fd, theirs_ep, "next");
    describe(r->prev_desc, sizeof r->prev_desc, prev, r->prev_fd, "?", "previous");
    if (pipe2(r->wake, O_CLOEXEC) < 0 || comm_ring_start_thread(r) < 0) {
        snprintf(err, errlen, "rank %d: cannot start the comm thread: %s", rank,
                 strerror(errno));
        goto fail;
    }
    return &r->c;
fail:
    if (lfd >= 0) close(lfd);
    ring_close(r);
    return NULL;
}
