/* The CPU backend of comm.h: a bandwidth-optimal ring all-reduce over TCP.
 *
 * Every rank sends to the next rank and receives from the previous one, over two TCP
 * connections set up through the rendezvous store (comm_ring_setup.c). A buffer of n floats is
 * cut into W chunks; W-1 reduce-scatter steps leave chunk (r+1) mod W fully summed on rank r,
 * which multiplies it by 1/W once, and W-1 all-gather steps hand those bytes round. Every
 * element is therefore summed in one fixed order (from its chunk's first rank round the ring)
 * and scaled by its owner alone: the result is bitwise the same on every rank and from run to
 * run for the same world size, whatever the timing.
 *
 * The steps are pipelined: the two sockets are nonblocking and one loop sends and receives at
 * once, and the bytes a step sends go out as soon as the previous step's receive has produced
 * them (in pieces of DDPTOP_RING_CHUNK bytes), so the ring never waits for whole chunks and
 * can never deadlock on full socket buffers: receiving never depends on sending.
 *
 * Asynchrony: allreduce_avg_start queues the buffer for the comm's own thread (FIFO, so every
 * rank runs buckets in the same order) and returns. wait_all waits for the queue to drain.
 * comm_ms is the wall time the comm thread spent inside collectives; it includes the time that
 * overlapped the trainer's compute (it is not the exposed time; measure wait_all for that),
 * and it is brought up to date by wait_all, the only place the trainer's thread writes it.
 * After a failure the comm stays failed: later starts and waits return -1 with the message. */
#include "comm.h"
#include "comm_ring.h"
#include "net.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct ring_job {
    float *data;
    size_t n;
};

/* One rank's view of one step of the ring: which chunk goes out, which comes in. */
static void chunk_span(size_t n, int w, int idx, size_t *off, size_t *len)
{
    size_t base = n / (size_t)w, rem = n % (size_t)w, i = (size_t)idx;
    *off = i * base + (i < rem ? i : rem);
    *len = base + (i < rem ? 1 : 0);
}

static int mod(int a, int w)
{
    return ((a % w) + w) % w;
}

/* dst = src + dst, and for the last reduce-scatter step times 1/W. Blocks of 8 with restrict
 * let -O2 use SIMD (it will not vectorise a loop of unknown length); element by element, so
 * the result is the same bits however the loop is cut. */
static void reduce_add(float *restrict dst, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) dst[i + k] = src[i + k] + dst[i + k];
    for (; i < n; i++) dst[i] = src[i] + dst[i];
}

static void reduce_add_scale(float *restrict dst, const float *restrict src, size_t n, float s)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) dst[i + k] = (src[i + k] + dst[i + k]) * s;
    for (; i < n; i++) dst[i] = (src[i] + dst[i]) * s;
}

static void ring_fail(struct ring *r, const char *fmt, const char *who, double secs)
{
    snprintf(r->thread_err, sizeof r->thread_err, fmt, who, secs);
}

/* Something arrived on the connection to the next rank, which never sends: it is an EOF, a
 * reset, or a protocol error. Returns -1 with the error set, or 0 when it was spurious. */
static int check_next(struct ring *r)
{
    char b;
    ssize_t k = recv(r->next_fd, &b, 1, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (k > 0) ring_fail(r, "%s sent unexpected data during all-reduce (a protocol error)",
                         r->next_desc, 0);
    else ring_fail(r, "%s closed the connection during all-reduce", r->next_desc, 0);
    return -1;
}

/* The all-reduce itself, on the comm thread. 0, or -1 with r->thread_err set. */
static int ring_allreduce(struct ring *r, float *data, size_t n)
{
    const int w = r->c.world_size, rank = r->c.rank, steps = 2 * (w - 1);
    const float inv = 1.0f / (float)w;
    int st = 0, rt = 0;             /* the send and the receive step */
    size_t so = 0;                  /* bytes sent in step st */
    size_t ro = 0, rdone = 0;       /* bytes received, and received+reduced, in step rt */
    size_t tfill = 0;               /* bytes in r->tmp (reduce-scatter receive) */
    size_t s_off, s_len, r_off, r_len;
    int64_t now = net_now_ns(), last_recv = now, last_send = now;
    const int64_t tmo = (int64_t)(r->timeout_s * 1e9);

#define SEND_CHUNK(t) mod((t) < w - 1 ? rank - (t) : rank + 1 - ((t) - (w - 1)), w)
#define RECV_CHUNK(t) mod((t) < w - 1 ? rank - (t) - 1 : rank - ((t) - (w - 1)), w)
    chunk_span(n, w, SEND_CHUNK(0), &s_off, &s_len);
    chunk_span(n, w, RECV_CHUNK(0), &r_off, &r_len);
    s_len *= sizeof(float);
    r_len *= sizeof(float);

    while (st < steps || rt < steps) {
        int progress = 0;
        /* Steps done (or empty: n < W) move on; their successors use the same chunk sizes. */
        while (st < steps && so == s_len) {
            if (++st < steps) {
                chunk_span(n, w, SEND_CHUNK(st), &s_off, &s_len);
                s_len *= sizeof(float);
            }
            so = 0;
        }
        while (rt < steps && rdone == r_len) {
            if (++rt < steps) {
                chunk_span(n, w, RECV_CHUNK(rt), &r_off, &r_len);
                r_len *= sizeof(float);
            }
            ro = rdone = 0;
        }
        if (st >= steps && rt >= steps) break;

        /* What the current send step may send: all of it at step 0, else what the receive of
         * the previous step (the same chunk) has finished. */
        size_t ready = 0;
        if (st < steps) {
            if (st == 0 || rt > st - 1) ready = s_len;
            else if (rt == st - 1) ready = rdone;
        }
        size_t want = ready - so;
        /* Small pieces wait for more unless they end the step: fewer, larger sends. */
        int can_send = want > 0 && (want >= r->min_send || ready == s_len);
        if (can_send) {
            ssize_t k = send(r->next_fd, (char *)data + s_off * sizeof(float) + so, want,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0) {
                so += (size_t)k;
                progress = 1;
                last_send = net_now_ns();
            } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                ring_fail(r, "%s closed the connection during all-reduce", r->next_desc, 0);
                return -1;
            }
        }
        if (rt < steps && ro < r_len) {
            ssize_t k;
            if (rt < w - 1) {   /* reduce-scatter: into tmp, then reduce into data */
                size_t room = r->tmp_cap - tfill, left = r_len - ro;
                k = recv(r->prev_fd, (char *)r->tmp + tfill, room < left ? room : left,
                         MSG_DONTWAIT);
                if (k > 0) {
                    ro += (size_t)k;
                    tfill += (size_t)k;
                    size_t nf = tfill / sizeof(float);
                    float *dst = data + r_off + rdone / sizeof(float);
                    if (rt == w - 2) reduce_add_scale(dst, r->tmp, nf, inv);
                    else reduce_add(dst, r->tmp, nf);
                    rdone += nf * sizeof(float);
                    tfill -= nf * sizeof(float);
                    memmove(r->tmp, (char *)r->tmp + nf * sizeof(float), tfill);
                }
            } else {            /* all-gather: straight into place */
                k = recv(r->prev_fd, (char *)data + r_off * sizeof(float) + ro, r_len - ro,
                         MSG_DONTWAIT);
                if (k > 0) rdone = ro += (size_t)k;
            }
            if (k > 0) {
                progress = 1;
                last_recv = net_now_ns();
            } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                ring_fail(r, "%s closed the connection during all-reduce", r->prev_desc, 0);
                return -1;
            }
        }
        if (progress) continue;

        /* Nothing moved: sleep until a socket is ready, a peer goes away, or a timeout. */
        now = net_now_ns();
        /* Only POLLOUT when we mean to send (else a writable socket spins the loop), and only
         * then is a stall the next rank's fault. */
        int waiting_send = st < steps && can_send;
        if (!waiting_send) last_send = now;
        if (rt < steps && now - last_recv >= tmo) {
            ring_fail(r, "%s sent nothing for %g s during all-reduce (it, or a rank before it "
                      "in the ring, is stuck)", r->prev_desc, r->timeout_s);
            return -1;
        }
        if (waiting_send && now - last_send >= tmo) {
            ring_fail(r, "%s took no data for %g s during all-reduce (it is stuck)",
                      r->next_desc, r->timeout_s);
            return -1;
        }
        /* The next rank never sends; readable means it closed. That is only a failure while
         * we still owe it data: once our sends are done it may well have finished. */
        short next_ev = st < steps ? POLLIN : 0;
        struct pollfd p[3] = {
            { .fd = r->next_fd, .events = (short)(next_ev | (waiting_send ? POLLOUT : 0)) },
            { .fd = r->prev_fd, .events = rt < steps ? POLLIN : 0 },
            { .fd = r->wake[0], .events = POLLIN },
        };
        int64_t first = rt < steps ? last_recv + tmo : now + tmo;
        if (waiting_send && last_send + tmo < first) first = last_send + tmo;
        if (poll(p, 3, net_ms_left(first, 1000)) < 0 && errno != EINTR) {
            ring_fail(r, "poll failed during all-reduce with %s", r->next_desc, 0);
            return -1;
        }
        if (p[2].revents) {
            ring_fail(r, "the all-reduce was abandoned (comm freed while %s was pending)",
                      "a collective", 0);
            return -1;
        }
        if (st < steps && (p[0].revents & (POLLIN | POLLERR | POLLHUP)) && check_next(r) < 0)
            return -1;
    }
#undef SEND_CHUNK
#undef RECV_CHUNK
    return 0;
}

static void *ring_thread(void *arg)
{
    struct ring *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->qlen == 0) pthread_cond_wait(&r->cv, &r->mu);
        if (r->stop) break;
        struct ring_job job = r->q[r->qhead];
        r->qhead = (r->qhead + 1) % r->qcap;
        r->qlen--;
        int failed = r->failed;
        r->busy = 1;
        pthread_mutex_unlock(&r->mu);

        int rc = 0;
        int64_t t0 = net_now_ns();
        if (!failed && job.n > 0) rc = ring_allreduce(r, job.data, job.n);
        double ms = (double)(net_now_ns() - t0) / 1e6;

        pthread_mutex_lock(&r->mu);
        r->busy = 0;
        if (!failed) r->ms_acc += ms;
        if (rc < 0) r->failed = 1;   /* thread_err was written before; readers take the lock */
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static int ring_start(struct comm *c, float *data, size_t n)
{
    struct ring *r = (struct ring *)c;
    pthread_mutex_lock(&r->mu);
    if (r->failed) {
        snprintf(c->err, sizeof c->err, "%s", r->thread_err);
        pthread_mutex_unlock(&r->mu);
        return -1;
    }
    if (r->qlen == r->qcap) {
        size_t cap = r->qcap ? 2 * r->qcap : 16;
        struct ring_job *q = malloc(cap * sizeof *q);
        if (!q) abort();
        for (size_t i = 0; i < r->qlen; i++) q[i] = r->q[(r->qhead + i) % r->qcap];
        free(r->q);
        r->q = q;
        r->qhead = 0;
        r->qcap = cap;
    }
    r->q[(r->qhead + r->qlen) % r->qcap] = (struct ring_job){ data, n };
    r->qlen++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static int ring_wait_all(struct comm *c)
{
    struct ring *r = (struct ring *)c;
    pthread_mutex_lock(&r->mu);
    while ((r->qlen > 0 || r->busy) && !r->failed) pthread_cond_wait(&r->cv, &r->mu);
    c->comm_ms += r->ms_acc;
    r->ms_acc = 0;
    int rc = 0;
    if (r->failed) {
        snprintf(c->err, sizeof c->err, "%s", r->thread_err);
        rc = -1;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static void ring_free(struct comm *c)
{
    struct ring *r = (struct ring *)c;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    char b = 1;
    while (write(r->wake[1], &b, 1) < 0 && errno == EINTR) {}
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    ring_close(r);
}

const struct comm_ops comm_ring_ops = {
    .name = "cpu-ring",
    .allreduce_avg_start = ring_start,
    .wait_all = ring_wait_all,
    .free = ring_free,
};

/* A world of one: nothing to average, no thread, no sockets. */
static int solo_start(struct comm *c, float *data, size_t n)
{
    (void)c; (void)data; (void)n;
    return 0;
}

static int solo_wait_all(struct comm *c)
{
    (void)c;
    return 0;
}

static void solo_free(struct comm *c)
{
    free(c);
}

const struct comm_ops comm_solo_ops = {
    .name = "solo",
    .allreduce_avg_start = solo_start,
    .wait_all = solo_wait_all,
    .free = solo_free,
};

int comm_ring_start_thread(struct ring *r)
{
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    return pthread_create(&r->thread, NULL, ring_thread, r) == 0 ? 0 : -1;
}
