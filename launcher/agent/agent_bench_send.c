/* bench_send: the sending end of a link measurement (agent_bench.h has the exchange). One
 * non-blocking connection in the agent's loop per request, several at once: connect (3 s),
 * the nonce line, `pings` one-byte round trips (the least is the link's round trip), then
 * zeros for `seconds`, the write side shut, and the receiver's count of what arrived. The
 * figure is the receiver's count over the time from the bulk byte to the count's arrival, so
 * bytes still queued in socket buffers when the time is up are counted with the time they
 * took. Every step has a deadline, so a peer that stops reading (a stopped agent, a dead link)
 * ends in an error with the figures so far, never in a hang. */
#include "agent_bench.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_net.h"
#include "util/util.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

#define SEND_CONNECT_MS 3000
#define SEND_ECHO_MS 3000       /* one ping's echo */
/* Stalled: in the last SEND_STALL_MS the socket took less than SEND_STALL_BYTES, or less than a
 * SEND_STALL_RATIO-th of the most it took in any such time before. Not "no byte at all": a
 * stopped receiver's kernel keeps taking a trickle into its buffer as it grows the window it
 * offers (0.1 to 0.5 MB/s seen, below the point where poll says writable, for as long as the
 * buffer lasts: tcp_rmem up to 32 MB), which would look like progress to the end. The cost: a
 * link slower than about 3 Mb/s, or one whose rate falls fifty-fold for 3 s, reads as stalled. */
#define SEND_STALL_MS 3000
#define SEND_STALL_BYTES (1u << 20)
#define SEND_STALL_RATIO 50
#define SEND_SAMPLE_MS 500      /* how often the bytes taken are sampled for that */
#define SEND_SAMPLES (SEND_STALL_MS / SEND_SAMPLE_MS + 1)
#define SEND_COUNT_MS 5000      /* the count, after the write side is shut */
#define SEND_SECONDS_MAX 10.0
#define SEND_PINGS_MAX 1000
/* What one callback writes before the loop serves the others. */
#define SEND_SLICE (16u << 20)

enum send_phase { SEND_CONNECT, SEND_PING, SEND_BULK, SEND_COUNT };

struct bench_send {
    cJSON *id;
    enum send_phase phase;
    char nonce[BENCH_NONCE_MAX + 2];
    int pings, pings_done;
    int64_t ping_ns;          /* when the ping in flight left */
    double rtt_us;            /* the least round trip; < 0: none yet */
    double seconds;
    int64_t bulk_ns;          /* when the bulk byte left */
    int64_t end_ns;           /* when the bulk data ends */
    struct { int64_t ns; uint64_t sent; } samples[SEND_SAMPLES];   /* a ring, the last 3 s */
    int nsamples, sample_at;  /* how many, and the oldest (the next to be replaced) */
    uint64_t best;            /* the most taken in SEND_STALL_MS so far */
    uint64_t sent;
    unsigned char count[BENCH_COUNT_BYTES];
    size_t count_got;
};

/* The bulk data: zeros, read-only, one buffer for every sender. */
static const unsigned char zeros[256 * 1024];

static void send_free(void *ctx)
{
    struct bench_send *b = ctx;
    cJSON_Delete(b->id);
    free(b);
}

static double round_to(double v, double unit)
{
    return round(v / unit) * unit;
}

/* The answer, with error NULL (success) or the error text; figures as far as they go. */
static void send_finish(struct agent *ag, struct agent_watch *w, const char *error)
{
    struct bench_send *b = w->ctx;
    cJSON *msg = agent_reply_new(WIRE_EV_BENCH_SENT, b->id);
    if (b->count_got == BENCH_COUNT_BYTES) {
        uint64_t n = 0;
        for (int i = BENCH_COUNT_BYTES - 1; i >= 0; i--) n = (n << 8) | b->count[i];
        double s = (double)(mono_ns() - b->bulk_ns) / 1e9;
        cJSON_AddNumberToObject(msg, "bytes", (double)n);
        cJSON_AddNumberToObject(msg, "seconds", round_to(s, 1e-6));
        cJSON_AddNumberToObject(msg, "gbps", s > 0 ? round_to((double)n * 8 / s / 1e9, 1e-6) : 0);
    } else if (b->phase >= SEND_BULK) {
        cJSON_AddNumberToObject(msg, "seconds", round_to((double)(mono_ns() - b->bulk_ns) / 1e9, 1e-6));
    }
    /* what our socket took, not what arrived: named apart from "bytes" */
    if (b->phase >= SEND_BULK) cJSON_AddNumberToObject(msg, "sent", (double)b->sent);
    if (b->rtt_us >= 0) cJSON_AddNumberToObject(msg, "rtt_us", round_to(b->rtt_us, 0.1));
    else cJSON_AddNullToObject(msg, "rtt_us");
    if (error) cJSON_AddStringToObject(msg, "error", error);
    agent_send(ag, msg);
    agent_watch_del(ag, w);
}

static void send_fail_errno(struct agent *ag, struct agent_watch *w, int e)
{
    const char *m = e == ETIMEDOUT ? "no answer" : agent_net_connect_error(e);
    send_finish(ag, w, m ? m : strerror(e));
}

/* Samples the bytes taken; true when the last SEND_STALL_MS says stalled (above). */
static int bulk_stalled(struct bench_send *b, int64_t now)
{
    int full = b->nsamples == SEND_SAMPLES;
    int newest = (b->sample_at + SEND_SAMPLES - 1) % SEND_SAMPLES;
    if (b->nsamples && now - b->samples[newest].ns < (int64_t)SEND_SAMPLE_MS * 1000000)
        return 0;
    if (b->nsamples) {
        uint64_t taken = b->sent - b->samples[full ? b->sample_at : 0].sent;
        uint64_t least = b->best / SEND_STALL_RATIO;
        if (full && taken < (least > SEND_STALL_BYTES ? least : SEND_STALL_BYTES)) return 1;
        if (taken > b->best) b->best = taken;
    }
    b->samples[b->sample_at].ns = now;
    b->samples[b->sample_at].sent = b->sent;
    b->sample_at = (b->sample_at + 1) % SEND_SAMPLES;
    if (!full) b->nsamples++;
    return 0;
}

/* The bulk phase wakes up at its end and at each sample. */
static void bulk_deadline(struct agent_watch *w)
{
    struct bench_send *b = w->ctx;
    int newest = (b->sample_at + SEND_SAMPLES - 1) % SEND_SAMPLES;
    int64_t sample_ns = b->samples[newest].ns + (int64_t)SEND_SAMPLE_MS * 1000000;
    w->deadline_ms = (b->end_ns < sample_ns ? b->end_ns : sample_ns) / 1000000 + 1;
}

static void bulk_start(struct agent *ag, struct agent_watch *w)
{
    struct bench_send *b = w->ctx;
    const char byte = BENCH_BULK;
    b->phase = SEND_BULK;
    b->bulk_ns = mono_ns();
    b->end_ns = b->bulk_ns + (int64_t)(b->seconds * 1e9);
    bulk_stalled(b, b->bulk_ns);   /* the first sample: nothing taken yet */
    /* One byte into a socket the receiver has drained of our pings: it always fits. */
    if (send(w->fd, &byte, 1, MSG_NOSIGNAL) != 1) {
        send_fail_errno(ag, w, errno);
        return;
    }
    w->events = POLLOUT | POLLIN;
    bulk_deadline(w);
}

static void ping_next(struct agent *ag, struct agent_watch *w)
{
    struct bench_send *b = w->ctx;
    if (b->pings_done >= b->pings) {
        bulk_start(ag, w);
        return;
    }
    const char byte = BENCH_PING;
    b->ping_ns = mono_ns();
    if (send(w->fd, &byte, 1, MSG_NOSIGNAL) != 1) {
        send_fail_errno(ag, w, errno);
        return;
    }
    w->events = POLLIN;
    w->deadline_ms = mono_ms() + SEND_ECHO_MS;
}

static void on_connected(struct agent *ag, struct agent_watch *w)
{
    struct bench_send *b = w->ctx;
    int one = 1;
    /* A ping is one byte: it must not wait for the nonce line's acknowledgement (Nagle). */
    setsockopt(w->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t len = strlen(b->nonce);
    /* A fresh socket's send buffer is empty: the short line always fits. */
    if (send(w->fd, b->nonce, len, MSG_NOSIGNAL) != (ssize_t)len) {
        send_fail_errno(ag, w, errno);
        return;
    }
    b->phase = SEND_PING;
    ping_next(ag, w);
}

static void on_echo(struct agent *ag, struct agent_watch *w)
{
    struct bench_send *b = w->ctx;
    unsigned char byte;
    ssize_t n = recv(w->fd, &byte, 1, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0 || byte != BENCH_PING) {
        /* closed (our nonce refused), reset, or a byte of another protocol */
        send_finish(ag, w, "wrong service");
        return;
    }
    double us = (double)(mono_ns() - b->ping_ns) / 1e3;
    if (b->rtt_us < 0 || us < b->rtt_us) b->rtt_us = us;
    b->pings_done++;
    ping_next(ag, w);
}

/* The count (early, when the receiver cut the transfer off, or after our end). */
static void read_count(struct agent *ag, struct agent_watch *w)
{
    struct bench_send *b = w->ctx;
    for (;;) {
        ssize_t n = recv(w->fd, b->count + b->count_got, BENCH_COUNT_BYTES - b->count_got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n == 0) {
            send_finish(ag, w, "the receiver closed the connection without its count");
            return;
        }
        if (n < 0) {
            send_fail_errno(ag, w, errno);
            return;
        }
        b->count_got += (size_t)n;
        if (b->count_got == BENCH_COUNT_BYTES) {
            send_finish(ag, w, NULL);
            return;
        }
    }
}

static void bulk_write(struct agent *ag, struct agent_watch *w)
{
    struct bench_send *b = w->ctx;
    size_t slice = 0;
    while (slice < SEND_SLICE && mono_ns() < b->end_ns) {
        ssize_t n = send(w->fd, zeros, sizeof zeros, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0) {
            send_fail_errno(ag, w, errno);
            return;
        }
        slice += (size_t)n;
        b->sent += (uint64_t)n;
    }
    int64_t now = mono_ns();
    if (now >= b->end_ns) {
        shutdown(w->fd, SHUT_WR);
        b->phase = SEND_COUNT;
        w->events = POLLIN;
        w->deadline_ms = now / 1000000 + SEND_COUNT_MS;
    } else if (bulk_stalled(b, now)) {
        send_finish(ag, w, "stalled");
    } else {
        bulk_deadline(w);
    }
}

static void send_ready(struct agent *ag, struct agent_watch *w, short revents)
{
    struct bench_send *b = w->ctx;
    if (b->phase == SEND_CONNECT) {
        if (!revents) {
            send_finish(ag, w, "no answer");
            return;
        }
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        if (err == EINPROGRESS) return;
        if (err) send_fail_errno(ag, w, err);
        else on_connected(ag, w);
        return;
    }
    if (b->phase == SEND_PING) {
        if (revents) on_echo(ag, w);
        else send_finish(ag, w, "no answer");
        return;
    }
    if (b->phase == SEND_COUNT) {
        if (revents) {
            read_count(ag, w);
            return;
        }
        /* Our bytes still queued: the receiver stopped reading. Else it never answered. */
        int queued = 0;
        if (ioctl(w->fd, TIOCOUTQ, &queued) < 0) queued = 0;
        send_finish(ag, w, queued > 0 ? "stalled" : "no answer");
        return;
    }
    if (revents & (POLLIN | POLLERR | POLLHUP)) {   /* the receiver spoke: its count, or an end */
        read_count(ag, w);
        return;
    }
    bulk_write(ag, w);   /* writable, or its time is up: it decides */
}

void agent_bench_send_op(struct agent *ag, const cJSON *req, const cJSON *id)
{
    const char *addr = agent_req_str(req, "address");
    const char *nonce = agent_req_str(req, "nonce");
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(req, "seconds");
    double seconds = 1.0;
    long port, pings;
    if (agent_req_int(ag, req, id, "port", 1, 65535, 0, &port) < 0) return;
    if (agent_req_int(ag, req, id, "pings", 0, SEND_PINGS_MAX, 5, &pings) < 0) return;
    if (sv && (!json_real_in(sv, 0.001, SEND_SECONDS_MAX, &seconds))) {
        agent_send_error(ag, id, "bench_send: \"seconds\" must be a number from 0.001 to %g",
                         SEND_SECONDS_MAX);
        return;
    }
    if (!addr || !addr[0] || !port) {
        agent_send_error(ag, id, "bench_send: \"address\" and \"port\" are required");
        return;
    }
    if (!agent_bench_nonce_ok(nonce)) {
        agent_send_error(ag, id, "bench_send: \"nonce\" must be %d to %d hex digits",
                         BENCH_NONCE_MIN, BENCH_NONCE_MAX);
        return;
    }
    cJSON *msg = agent_reply_new(WIRE_EV_BENCH_SENT, id);
    cJSON_AddNullToObject(msg, "rtt_us");
    struct addrinfo *ai = agent_net_resolve(addr, (int)port);
    if (!ai) {
        cJSON_AddStringToObject(msg, "error", "unknown host");
        agent_send(ag, msg);
        return;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int r = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen);
    int e = errno;
    freeaddrinfo(ai);
    if (r < 0 && e != EINPROGRESS) {
        const char *m = agent_net_connect_error(e);
        if (fd >= 0) close(fd);
        cJSON_AddStringToObject(msg, "error", e == ETIMEDOUT ? "no answer" : m ? m : strerror(e));
        agent_send(ag, msg);
        return;
    }
    cJSON_Delete(msg);
    struct bench_send *b = xcalloc(1, sizeof *b);
    b->id = id ? cJSON_Duplicate(id, 1) : NULL;
    snprintf(b->nonce, sizeof b->nonce, "%s\n", nonce);
    b->pings = (int)pings;
    b->rtt_us = -1;
    b->seconds = seconds;
    struct agent_watch *w = agent_watch_add(ag, fd, POLLOUT, send_ready, b, send_free);
    w->deadline_ms = mono_ms() + SEND_CONNECT_MS;
    if (r == 0) on_connected(ag, w);   /* loopback may connect at once */
}
