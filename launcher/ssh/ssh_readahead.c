/* Read-ahead for the SSH sessions' sockets: see ssh_readahead.h. */
#include "ssh_readahead.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/util.h"

/* fds past this are read as before: a table indexed by fd, its pages touched only where used */
#define RA_FD_MAX 65536

struct readahead {
    uint64_t key;                 /* the registration (session) these bytes belong to */
    size_t off, len;              /* buf[off..len) waits to be handed out */
    char buf[SSH_READAHEAD_SIZE];
};

/* Each slot is written by the loop's thread only (add, del) and read by whichever thread calls
 * recv or poll on that fd: the upload thread uses only its own session's socket, which is
 * registered only once the upload is over. */
static _Atomic(struct readahead *) slots[RA_FD_MAX];
/* How many registered sockets have bytes waiting: poll() looks no further while 0. */
static atomic_int waiting;
/* The last key given out: keys are never reused, so a stale ref never matches a new session. */
static uint64_t last_key;

static struct readahead *slot(int fd)
{
    return fd >= 0 && fd < RA_FD_MAX ? atomic_load_explicit(&slots[fd], memory_order_acquire) : NULL;
}

/* Hands out the k bytes at off: the last of them leaves nothing waiting here. */
static void take(struct readahead *r, size_t k)
{
    r->off += k;
    if (k && r->off == r->len) atomic_fetch_sub(&waiting, 1);
}

struct ssh_readahead_ref ssh_readahead_add(int fd)
{
    if (fd < 0 || fd >= RA_FD_MAX) return SSH_READAHEAD_NONE;
    struct readahead *r = slot(fd);
    if (r) {
        /* an earlier session's registration whose del never came: its bytes came from a
         * socket that is closed now, and must not be handed to this one */
        take(r, r->len - r->off);
        r->off = r->len = 0;
    } else {
        r = xmalloc(sizeof *r);
        r->off = r->len = 0;
    }
    r->key = ++last_key;
    atomic_store_explicit(&slots[fd], r, memory_order_release);
    return (struct ssh_readahead_ref){.fd = fd, .key = r->key};
}

void ssh_readahead_del(struct ssh_readahead_ref *ref)
{
    struct readahead *r = slot(ref->fd);
    /* a newer session that has the number now keeps its registration */
    if (r && r->key == ref->key) {
        atomic_store_explicit(&slots[ref->fd], NULL, memory_order_release);
        if (r->off < r->len) atomic_fetch_sub(&waiting, 1);
        free(r);
    }
    *ref = SSH_READAHEAD_NONE;
}

size_t ssh_readahead_pending(struct ssh_readahead_ref ref)
{
    struct readahead *r = slot(ref.fd);
    return r && r->key == ref.key ? r->len - r->off : 0;
}

/* A recv with flags on bytes waiting here, as the kernel would have served them from its own
 * buffer: MSG_PEEK copies without taking (and looks at the kernel's too, without waiting
 * unless asked to), MSG_TRUNC takes without copying, MSG_WAITALL takes them and waits for the
 * rest; anything else (MSG_DONTWAIT, ...) takes them like a plain recv. */
static ssize_t recv_flagged(int fd, struct readahead *r, char *buf, size_t n, int flags)
{
    size_t k = r->len - r->off < n ? r->len - r->off : n;
    if (!(flags & MSG_TRUNC)) memcpy(buf, r->buf + r->off, k);
    if (!(flags & MSG_PEEK)) take(r, k);
    if (k == n || (!(flags & MSG_WAITALL) && !(flags & MSG_PEEK))) return (ssize_t)k;
    int more_flags = flags & MSG_WAITALL ? flags : flags | MSG_DONTWAIT;
    ssize_t more = recvfrom(fd, flags & MSG_TRUNC ? buf : buf + k, n - k, more_flags, NULL, NULL);
    /* bytes already taken are the caller's whatever the kernel says now */
    return (ssize_t)k + (more > 0 ? more : 0);
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    struct readahead *r = slot(fd);
    /* out-of-band data and the error queue are not the stream read ahead */
    if (!r || (flags & (MSG_OOB | MSG_ERRQUEUE))) return recvfrom(fd, buf, n, flags, NULL, NULL);
    if (r->off == r->len) {
        /* nothing waits here: the kernel's answer is the right one, whatever the flags */
        if (flags || n >= SSH_READAHEAD_SIZE) return recvfrom(fd, buf, n, flags, NULL, NULL);
        ssize_t got = recvfrom(fd, r->buf, sizeof r->buf, 0, NULL, NULL);
        if (got <= 0) return got;  /* end of file, EAGAIN, an error: as the kernel said */
        r->off = 0;
        r->len = (size_t)got;
        atomic_fetch_add(&waiting, 1);
    }
    if (flags) return recv_flagged(fd, r, buf, n, flags);
    size_t k = r->len - r->off < n ? r->len - r->off : n;
    memcpy(buf, r->buf + r->off, k);
    take(r, k);
    return (ssize_t)k;
}

/* The kernel's poll, through ppoll (the only poll() in the binary is the one below). */
static int kernel_poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000L };
    return ppoll(fds, nfds, timeout < 0 ? NULL : &ts, NULL);
}

/* Whether fds[i] asks to read and has bytes waiting here. */
static int ready_here(const struct pollfd *p)
{
    struct readahead *r = (p->events & POLLIN) ? slot(p->fd) : NULL;
    return r && r->off < r->len;
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    if (!atomic_load_explicit(&waiting, memory_order_relaxed)) return kernel_poll(fds, nfds, timeout);
    nfds_t here = 0, only_read = 0, live = 0;
    for (nfds_t i = 0; i < nfds; i++) {
        if (fds[i].fd < 0) continue;
        live++;
        if (ready_here(&fds[i])) {
            here++;
            if (!(fds[i].events & ~(POLLIN | POLLRDNORM))) only_read++;
        }
    }
    if (!here) return kernel_poll(fds, nfds, timeout);
    int r;
    if (only_read == live) {
        /* nothing to ask the kernel that would change the answer now: it is asked on the
         * next call, once these bytes were taken */
        for (nfds_t i = 0; i < nfds; i++) fds[i].revents = 0;
        r = 0;
    } else {
        r = kernel_poll(fds, nfds, 0);
        if (r < 0 && errno != EINTR) return r;
        if (r < 0) {
            for (nfds_t i = 0; i < nfds; i++) fds[i].revents = 0;
            r = 0;
        }
    }
    for (nfds_t i = 0; i < nfds; i++) {
        if (fds[i].fd < 0 || !ready_here(&fds[i])) continue;
        if (!fds[i].revents) r++;
        fds[i].revents |= POLLIN;
    }
    return r;
}
