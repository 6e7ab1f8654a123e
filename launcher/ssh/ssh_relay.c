/* An SSH session's TCP socket relayed to libssh's end of a socket pair: see ssh_relay.h. */
#include "ssh_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"

/* Bytes on their way: buf[off..len) waits to be written. */
struct relay_buf {
    size_t off, len;
    char buf[SSH_RELAY_SIZE];
};

struct ssh_relay {
    int net;                /* the TCP socket */
    int mine;               /* our end of the pair */
    int err;                /* what ended net (0: nothing, or its end of file) */
    bool net_eof;           /* net said end of file or failed: no more reads of it */
    bool lib_eof;           /* libssh closed its end: nothing more comes up */
    bool shut_down;         /* libssh was told the end (its end reads end of file) */
    struct relay_buf down;  /* net -> libssh */
    struct relay_buf up;    /* libssh -> net */
};

struct ssh_relay *ssh_relay_new(int net, int *lib)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return NULL;
    /* ours never blocks the loop. libssh's own end: libssh makes it blocking when it takes
     * it, and ssh_conn sets it back once the handshake is over (ssh_conn.c handshake_done) */
    if (fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        errno = e;
        return NULL;
    }
    struct ssh_relay *r = xmalloc(sizeof *r);
    r->net = net;
    r->mine = sv[0];
    r->err = 0;
    r->net_eof = r->lib_eof = r->shut_down = false;
    r->down.off = r->down.len = r->up.off = r->up.len = 0;
    *lib = sv[1];
    return r;
}

int ssh_relay_pollfds(const struct ssh_relay *r, struct pollfd *p)
{
    /* a TCP socket that ended is polled no more: it would say POLLHUP on every pass until
     * libssh has read its way to the end */
    p[0].fd = r->net_eof ? -1 : r->net;
    /* read only into an empty buffer (ssh_relay_pump): a full pair stops the reads of it */
    p[0].events = (short)((r->down.off == r->down.len ? POLLIN : 0) | (r->up.off < r->up.len ? POLLOUT : 0));
    p[1].fd = r->mine;
    p[1].events = (short)((!r->lib_eof && !r->err && r->up.len < SSH_RELAY_SIZE ? POLLIN : 0) |
                          (r->down.off < r->down.len ? POLLOUT : 0));
    p[0].revents = p[1].revents = 0;
    return SSH_RELAY_POLLFDS;
}

/* Writes what waits in b to fd; false on an error other than a full socket. */
static bool drain(int fd, struct relay_buf *b)
{
    while (b->off < b->len) {
        ssize_t n = send(fd, b->buf + b->off, b->len - b->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        b->off += (size_t)n;
    }
    b->off = b->len = 0;
    return true;
}

/* One read of fd into the room left in b: >0 bytes, 0 end of file, -1 nothing now, -2 error
 * (errno set). */
static ssize_t fill(int fd, struct relay_buf *b)
{
    if (b->off == b->len) b->off = b->len = 0;
    if (b->len == sizeof b->buf) return -1;
    ssize_t n = recv(fd, b->buf + b->len, sizeof b->buf - b->len, MSG_DONTWAIT);
    if (n > 0) b->len += (size_t)n;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
    return n;
}

static void net_failed(struct ssh_relay *r, int err)
{
    r->net_eof = true;
    if (!r->err) r->err = err;
    r->up.off = r->up.len = 0; /* nowhere to go */
}

void ssh_relay_flush_up(struct ssh_relay *r)
{
    while (!r->lib_eof && !r->err) {
        ssize_t n = fill(r->mine, &r->up);
        if (n == 0) r->lib_eof = true; /* libssh closed its end: the session is over */
        if (!drain(r->net, &r->up)) net_failed(r, errno);
        if (n <= 0 || r->up.off < r->up.len) break; /* empty, or the node takes no more now */
    }
}

void ssh_relay_pump(struct ssh_relay *r, short revents)
{
    bool may_read = revents & (POLLIN | POLLHUP | POLLERR);
    if (may_read) ssh_relay_flush_up(r);
    else if (r->up.off < r->up.len && !r->err && !drain(r->net, &r->up)) net_failed(r, errno);
    if (may_read && !r->net_eof && r->down.off == r->down.len) {
        /* one gulp a pass: libssh takes it before the next (ssh_stream.c reads its end dry) */
        ssize_t n = fill(r->net, &r->down);
        if (n == 0) r->net_eof = true;
        if (n == -2) net_failed(r, errno);
    }
    /* libssh's end fails only once libssh closed it: then nobody reads what is left */
    if (r->down.off < r->down.len && !drain(r->mine, &r->down)) r->down.off = r->down.len = 0;
    if (r->net_eof && r->down.off == r->down.len && !r->shut_down) {
        shutdown(r->mine, SHUT_WR); /* every byte before it is in the pair: libssh sees the end */
        r->shut_down = true;
    }
}

int ssh_relay_error(const struct ssh_relay *r)
{
    return r->err;
}

void ssh_relay_free(struct ssh_relay *r)
{
    if (!r) return;
    /* libssh's end is closed by now (ssh_free): what it wrote before is in the pair, up to
     * its end of file */
    ssh_relay_flush_up(r);
    close(r->mine);
    close(r->net);
    free(r);
}
