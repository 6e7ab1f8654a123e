/* The rendezvous store's client: every rank, rank 0 included, talks to the store served by
 * rank 0 (store_server.c) through one of these.
 *
 * Thread-safety: a struct store is one TCP connection with one request in flight; use it from
 * one thread at a time (one client per thread). Different clients may be used concurrently.
 *
 * Wire format (all integers big-endian):
 *   client hello   "DDPS" u8 version(1) u16 token_len token[token_len]   (token "" when unset)
 *   server hello   "DDPS" u8 status       0 ok; 1 wrong token, 2 bad version: then it closes
 *   request        u8 op  u32 body_len  body
 *     SET  (1)     u32 key_len key value          value = the rest of the body
 *     GET  (2)     u32 timeout_ms key             key = the rest; waits until key exists
 *     ADD  (3)     i64 delta key                  the value is kept as decimal text
 *     WAIT (4)     u32 timeout_ms u32 n (u32 key_len key) x n
 *   reply          u8 status  u32 body_len  body
 *     OK (0)       GET: the value; ADD: i64 new value; SET, WAIT: empty
 *     TIMEOUT (1)  the first key still missing when timeout_ms passed (GET, WAIT)
 *     ERROR (2)    a message
 * The server answers a GET/WAIT when its keys exist or its timeout passes, so the client waits
 * on its socket a little longer than the timeout it sent. Keys are 1..4096 bytes, bodies at
 * most 16 MiB. A connection whose hello is wrong gets no other reply. */
#include "store.h"
#include "store_wire.h"
#include "net.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REPLY_GRACE_S 10.0   /* how much later than the server's own timeout we give up */

struct store {
    int fd;                  /* -1 once the connection is lost */
    double io_timeout_s;     /* for requests that do not wait for keys */
    char endpoint[300];
    char err[512];
};

static void set_err(struct store *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(struct store *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
}

static void sleep_ns(int64_t ns)
{
    if (ns <= 0) return;
    struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

enum attempt { ATTEMPT_OK, ATTEMPT_RETRY, ATTEMPT_FATAL };

/* One connection attempt to every address the name resolves to. */
static enum attempt try_connect(struct store *st, const char *addr, int port, const char *token,
                                int64_t deadline, char *why, size_t whylen)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gr = getaddrinfo(addr, ps, &hints, &res);
    if (gr != 0) {
        snprintf(why, whylen, "cannot resolve '%s' (%s)", addr, gai_strerror(gr));
        return ATTEMPT_RETRY;   /* name service may come up later on a booting cluster */
    }
    enum attempt result = ATTEMPT_RETRY;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            snprintf(why, whylen, "%s", strerror(errno));
            continue;
        }
        /* One attempt may not eat the whole budget on a black-holed address. */
        int64_t adl = net_now_ns() + 5000000000LL;
        if (adl > deadline) adl = deadline;
        if (net_connect(fd, ai->ai_addr, ai->ai_addrlen, adl) < 0) {
            snprintf(why, whylen, "%s", errno == ETIMEDOUT ? "connection timed out"
                     : errno == ECONNREFUSED ? "connection refused" : strerror(errno));
            close(fd);
            continue;
        }
        net_set_nodelay(fd);
        size_t tl = strlen(token);
        uint8_t hello[7 + STORE_MAX_TOKEN];
        memcpy(hello, STORE_MAGIC, 4);
        hello[4] = STORE_VERSION;
        hello[5] = (uint8_t)(tl >> 8);
        hello[6] = (uint8_t)tl;
        memcpy(hello + 7, token, tl);
        uint8_t r[5];
        /* The hello gets 10 s (a busy store answers well within that), or what is left of
         * the budget, but never less than 1 s. */
        int64_t now = net_now_ns(), hdl = now + 10000000000LL;
        if (hdl > deadline) hdl = deadline > now + 1000000000LL ? deadline : now + 1000000000LL;
        int rc = net_write_all(fd, hello, 7 + tl, hdl);
        if (rc == 0) rc = net_read_all(fd, r, 5, hdl);
        if (rc != 0) {
            snprintf(why, whylen, "%s", rc == NET_EOF ? "the store closed the connection "
                     "during the hello" : errno == ETIMEDOUT ? "no answer to our hello (is "
                     "another service on MASTER_PORT?)" : strerror(errno));
            close(fd);
            continue;
        }
        if (memcmp(r, STORE_MAGIC, 4) != 0) {
            snprintf(why, whylen, "answered with something that is not the ddptop store "
                     "protocol (another service on MASTER_PORT?)");
            close(fd);
            result = ATTEMPT_FATAL;
            break;
        }
        if (r[4] == STORE_HELLO_TOKEN) {
            snprintf(why, whylen, "refused our job token (is DDPTOP_JOB_TOKEN the same on "
                     "every rank?)");
            close(fd);
            result = ATTEMPT_FATAL;
            break;
        }
        if (r[4] != STORE_HELLO_OK) {
            snprintf(why, whylen, "refused our protocol version (is every node running the "
                     "same ddptop-train?)");
            close(fd);
            result = ATTEMPT_FATAL;
            break;
        }
        st->fd = fd;
        result = ATTEMPT_OK;
        break;
    }
    freeaddrinfo(res);
    return result;
}

struct store *store_connect(const char *addr, int port, const char *token, double timeout_s,
                            char *err, size_t errlen)
{
    if (!token) token = "";
    struct store *st = calloc(1, sizeof *st);
    if (!st) abort();
    st->fd = -1;
    st->io_timeout_s = timeout_s > 30 ? timeout_s : 30;
    net_endpoint(st->endpoint, sizeof st->endpoint, addr, port);
    if (strlen(token) > STORE_MAX_TOKEN) {
        snprintf(err, errlen, "the job token is longer than %d bytes", STORE_MAX_TOKEN);
        free(st);
        return NULL;
    }
    int64_t deadline = net_deadline(timeout_s);
    int64_t backoff = 50000000;   /* 50 ms, doubling to 2 s */
    char why[256] = "no attempt made";
    for (;;) {
        enum attempt a = try_connect(st, addr, port, token, deadline, why, sizeof why);
        if (a == ATTEMPT_OK) return st;
        if (a == ATTEMPT_FATAL) {
            snprintf(err, errlen, "rendezvous store at %s %s", st->endpoint, why);
            free(st);
            return NULL;
        }
        int64_t left = deadline - net_now_ns();
        if (left <= 0) break;
        sleep_ns(backoff < left ? backoff : left);
        backoff = backoff * 2 > 2000000000 ? 2000000000 : backoff * 2;
    }
    snprintf(err, errlen, "could not reach the rendezvous store at %s after %g s: %s",
             st->endpoint, timeout_s, why);
    free(st);
    return NULL;
}

void store_close(struct store *st)
{
    if (!st) return;
    if (st->fd >= 0) close(st->fd);
    free(st);
}

const char *store_error(const struct store *st)
{
    return st->err;
}

int store_local_addr(const struct store *st, char *ip, size_t iplen)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int port;
    if (st->fd < 0 || getsockname(st->fd, (struct sockaddr *)&ss, &sl) < 0) return -1;
    return net_sockaddr_ip((struct sockaddr *)&ss, ip, iplen, &port);
}

static void lost(struct store *st, int rc)
{
    set_err(st, "lost the connection to the rendezvous store at %s: %s (did rank 0 exit?)",
            st->endpoint, rc == NET_EOF ? "closed by the store" :
            errno == ETIMEDOUT ? "no answer in time" : strerror(errno));
    close(st->fd);
    st->fd = -1;
}

/* Sends one request (head then tail make the body) and reads the reply into a malloc'd body.
 * Returns the reply status, or -1 with st->err set. */
static int request(struct store *st, uint8_t op, const void *head, size_t hlen, const void *tail,
                   size_t tlen, double wait_s, uint8_t **body, uint32_t *blen)
{
    *body = NULL;
    *blen = 0;
    if (st->fd < 0) return -1;   /* st->err still says why */
    if (hlen + tlen > STORE_MAX_BODY) {
        set_err(st, "rendezvous store request of %zu bytes is over the %u-byte limit",
                hlen + tlen, STORE_MAX_BODY);
        return -1;
    }
    uint8_t h[5];
    h[0] = op;
    net_put_u32(h + 1, (uint32_t)(hlen + tlen));
    int64_t dl = net_deadline(st->io_timeout_s + wait_s);
    int rc = net_write_all(st->fd, h, 5, dl);
    if (rc == 0) rc = net_write_all(st->fd, head, hlen, dl);
    if (rc == 0 && tlen) rc = net_write_all(st->fd, tail, tlen, dl);
    dl = net_deadline(wait_s + (wait_s > 0 ? REPLY_GRACE_S : st->io_timeout_s));
    if (rc == 0) rc = net_read_all(st->fd, h, 5, dl);
    if (rc != 0) {
        lost(st, rc);
        return -1;
    }
    uint32_t n = net_get_u32(h + 1);
    if (n > STORE_MAX_BODY) {
        errno = EPROTO;
        lost(st, -1);
        return -1;
    }
    uint8_t *b = malloc((size_t)n + 1);
    if (!b) abort();
    if ((rc = net_read_all(st->fd, b, n, dl)) != 0) {
        free(b);
        lost(st, rc);
        return -1;
    }
    b[n] = '\0';
    *body = b;
    *blen = n;
    if (h[0] == STORE_ERROR) {
        set_err(st, "rendezvous store at %s: %s", st->endpoint, (char *)b);
        free(b);
        *body = NULL;
        return -1;
    }
    return h[0];
}

static int check_key(struct store *st, const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n > STORE_MAX_KEY) {
        set_err(st, "rendezvous store key of %zu bytes (1 to %d allowed)", n, STORE_MAX_KEY);
        return -1;
    }
    return 0;
}

static uint32_t timeout_ms(double s)
{
    if (s <= 0) return 0;
    if (s > 4e6) return 4000000000u;
    return (uint32_t)(s * 1000.0 + 0.5);
}

int store_set(struct store *st, const char *key, const void *val, size_t len)
{
    if (check_key(st, key) < 0) return -1;
    size_t kl = strlen(key);
    uint8_t *head = malloc(4 + kl);
    if (!head) abort();
    net_put_u32(head, (uint32_t)kl);
    memcpy(head + 4, key, kl);
    uint8_t *b;
    uint32_t bl;
    int r = request(st, STORE_OP_SET, head, 4 + kl, val, len, 0, &b, &bl);
    free(head);
    free(b);
    return r == STORE_OK ? 0 : -1;
}

static void timed_out(struct store *st, const uint8_t *key, uint32_t kl, double timeout_s)
{
    set_err(st, "timed out after %g s waiting for key '%.*s' in the rendezvous store at %s "
            "(has every rank started?)", timeout_s, (int)(kl > 200 ? 200 : kl),
            (const char *)key, st->endpoint);
}

int store_get(struct store *st, const char *key, void **val, size_t *len, double timeout_s)
{
    *val = NULL;
    *len = 0;
    if (check_key(st, key) < 0) return -1;
    uint8_t t[4];
    net_put_u32(t, timeout_ms(timeout_s));
    uint8_t *b;
    uint32_t bl;
    int r = request(st, STORE_OP_GET, t, 4, key, strlen(key), timeout_s, &b, &bl);
    if (r == STORE_OK) {
        *val = b;   /* NUL-terminated for convenience; len excludes it */
        *len = bl;
        return 0;
    }
    if (r == STORE_TIMEOUT) timed_out(st, b, bl, timeout_s);
    free(b);
    return -1;
}

int store_add(struct store *st, const char *key, int64_t delta, int64_t *out)
{
    if (check_key(st, key) < 0) return -1;
    uint8_t d[8];
    net_put_u64(d, (uint64_t)delta);
    uint8_t *b;
    uint32_t bl;
    int r = request(st, STORE_OP_ADD, d, 8, key, strlen(key), 0, &b, &bl);
    if (r == STORE_OK && bl == 8) {
        if (out) *out = (int64_t)net_get_u64(b);
        free(b);
        return 0;
    }
    if (r == STORE_OK) set_err(st, "rendezvous store at %s sent a malformed ADD reply",
                               st->endpoint);
    free(b);
    return -1;
}

int store_wait(struct store *st, const char *const *keys, size_t n, double timeout_s)
{
    size_t total = 8;
    for (size_t i = 0; i < n; i++) {
        if (check_key(st, keys[i]) < 0) return -1;
        total += 4 + strlen(keys[i]);
    }
    uint8_t *body = malloc(total);
    if (!body) abort();
    net_put_u32(body, timeout_ms(timeout_s));
    net_put_u32(body + 4, (uint32_t)n);
    size_t off = 8;
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(keys[i]);
        net_put_u32(body + off, (uint32_t)kl);
        memcpy(body + off + 4, keys[i], kl);
        off += 4 + kl;
    }
    uint8_t *b;
    uint32_t bl;
    int r = request(st, STORE_OP_WAIT, body, total, NULL, 0, timeout_s, &b, &bl);
    free(body);
    if (r == STORE_TIMEOUT) timed_out(st, b, bl, timeout_s);
    free(b);
    return r == STORE_OK ? 0 : -1;
}

int store_barrier(struct store *st, const char *name, int world_size, double timeout_s)
{
    char key[STORE_MAX_KEY + 16], done[STORE_MAX_KEY + 16];
    if (strlen(name) > STORE_MAX_KEY - 16) {
        set_err(st, "barrier name too long");
        return -1;
    }
    snprintf(key, sizeof key, "%s/count", name);
    snprintf(done, sizeof done, "%s/done", name);
    int64_t v;
    if (store_add(st, key, 1, &v) < 0) return -1;
    if (v == world_size && store_set(st, done, "1", 1) < 0) return -1;
    const char *keys[1] = { done };
    return store_wait(st, keys, 1, timeout_s);
}
