/* Read-ahead for the SSH sessions' sockets: see ssh_readahead.h. */
#include "ssh_readahead.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/util.h"

/* fds past this are read as before: a table indexed by fd, its pages touched only where used */
#define RA_FD_MAX 65536

struct readahead {
    size_t off, len;              /* buf[off..len) waits to be handed out */
    char buf[SSH_READAHEAD_SIZE];
};

/* Each slot is written by the loop's thread only (add, del) and read by whichever thread calls
 * recv or poll on that fd: the upload thread uses only its own session's socket, which is
 * registered only once the upload is over. */
static _Atomic(struct readahead *) slots[RA_FD_MAX];
/* How many registered sockets have bytes waiting: poll() looks no further while 0. */
static atomic_int waiting;

static struct readahead *slot(int fd)
{
    return fd >= 0 && fd < RA_FD_MAX ? atomic_load_explicit(&slots[fd], memory_order_acquire) : NULL;
}

int ssh_readahead_add(int fd)
{
    if (fd < 0 || fd >= RA_FD_MAX) return -1;
    if (slot(fd)) return fd;
    struct readahead *r = xmalloc(sizeof *r);
    r->off = r->len = 0;
    atomic_store_explicit(&slots[fd], r, memory_order_release);
    return fd;
}

void ssh_readahead_del(int fd)
{
    struct readahead *r = slot(fd);
    if (!r) return;
    atomic_store_explicit(&slots[fd], NULL, memory_order_release);
    if (r->off < r->len) atomic_fetch_sub(&waiting, 1);
    free(r);
}

size_t ssh_readahead_pending(int fd)
{
    struct readahead *r = slot(fd);
    return r ? r->len - r->off : 0;
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    struct readahead *r = slot(fd);
    if (!r || flags) return recvfrom(fd, buf, n, flags, NULL, NULL);
    if (r->off == r->len) {
        if (n >= SSH_READAHEAD_SIZE) return recvfrom(fd, buf, n, 0, NULL, NULL);
        ssize_t got = recvfrom(fd, r->buf, sizeof r->buf, 0, NULL, NULL);
        if (got <= 0) return got;  /* end of file, EAGAIN, an error: as the kernel said */
        r->off = 0;
        r->len = (size_t)got;
        atomic_fetch_add(&waiting, 1);
    }
    size_t k = r->len - r->off < n ? r->len - r->off : n;
    memcpy(buf, r->buf + r->off, k);
    r->off += k;
    if (r->off == r->len) atomic_fetch_sub(&waiting, 1);
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
