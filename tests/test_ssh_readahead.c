/* Unit tests for the SSH sockets' read-ahead (launcher/ssh/ssh_readahead.c): the recv() and
 * poll() that libssh calls. What libssh relies on: every byte comes out once and in order, in
 * the pieces it asks for; a socket whose bytes were read ahead still polls readable (or libssh
 * and the loop would wait for the network with the data already here); end of file comes
 * after the last byte; what it does not read ahead behaves as the kernel's calls do. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ssh/ssh_readahead.h"
#include "tap.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned char pat(size_t i)
{
    return (unsigned char)(i * 131u + i / 251u);
}

/* A connected pair with a's end non-blocking (as libssh's socket is). */
static void pair(int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) abort();
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
}

/* Writes up to n more pattern bytes from *sent on; returns how many the socket took. */
static size_t send_some(int fd, size_t *sent, size_t total)
{
    unsigned char buf[8192];
    size_t took = 0;
    while (*sent < total) {
        size_t k = total - *sent < sizeof buf ? total - *sent : sizeof buf;
        for (size_t i = 0; i < k; i++) buf[i] = pat(*sent + i);
        ssize_t w = write(fd, buf, k);
        if (w <= 0) break;
        *sent += (size_t)w;
        took += (size_t)w;
    }
    return took;
}

/* 3 MB through a socket as libssh reads it (4 KiB per recv, after a poll that says readable):
 * every byte once, in order; the kernel is read in 64 KiB pieces. */
static void t_bytes_in_order(void)
{
    int sv[2];
    pair(sv);
    CHECK_INT(ssh_readahead_add(sv[0]), sv[0]);
    const size_t total = 3u << 20;
    size_t sent = 0, got = 0, bad = 0, max_ahead = 0;
    int stalls = 0;
    while (got < total && stalls < 1000) {
        send_some(sv[1], &sent, total);
        struct pollfd p = { sv[0], POLLIN, 0 };
        if (poll(&p, 1, 1000) != 1 || !(p.revents & POLLIN)) {
            stalls++;
            continue;
        }
        unsigned char buf[4096];
        ssize_t n = recv(sv[0], buf, sizeof buf, 0);
        if (n <= 0) {
            stalls++;
            continue;
        }
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != pat(got + (size_t)i)) bad++;
        got += (size_t)n;
        size_t ahead = ssh_readahead_pending(sv[0]);
        if (ahead > max_ahead) max_ahead = ahead;
        CHECK(ahead <= SSH_READAHEAD_SIZE);
    }
    CHECK_INT(got, total);
    CHECK_INT(bad, 0);
    CHECK_INT(stalls, 0);
    CHECK(max_ahead >= 16384); /* it did read ahead, or this test tests nothing */
    ssh_readahead_del(sv[0]);
    close(sv[0]);
    close(sv[1]);
}

/* Bytes read ahead and a kernel socket with nothing in it: poll says readable at once, even
 * with a long timeout and another fd that has nothing; asked for writing as well, the
 * kernel's answer for that comes too. */
static void t_poll_sees_ahead(void)
{
    int sv[2], other[2];
    pair(sv);
    pair(other);
    ssh_readahead_add(sv[0]);
    size_t sent = 0;
    send_some(sv[1], &sent, 30000);
    char buf[4096];
    CHECK_INT(recv(sv[0], buf, 1000, 0), 1000);
    CHECK_INT(ssh_readahead_pending(sv[0]), 29000);

    struct pollfd p = { sv[0], POLLIN, 0 };
    int64_t t0 = now_ms();
    CHECK_INT(poll(&p, 1, 5000), 1);
    CHECK(p.revents & POLLIN);

    struct pollfd two[3] = { { other[0], POLLIN, 0 }, { -1, POLLIN, 0 }, { sv[0], POLLIN, 0 } };
    CHECK_INT(poll(two, 3, 3000), 1);
    CHECK_INT(two[0].revents, 0);
    CHECK(two[2].revents & POLLIN);

    struct pollfd rw = { sv[0], POLLIN | POLLOUT, 0 };
    CHECK_INT(poll(&rw, 1, 5000), 1);
    CHECK(rw.revents & POLLIN);
    CHECK(rw.revents & POLLOUT);
    CHECK(now_ms() - t0 < 1000);

    /* not asked to read: the bytes waiting change nothing */
    struct pollfd wo = { sv[0], POLLOUT, 0 };
    CHECK_INT(poll(&wo, 1, 0), 1);
    CHECK_INT(wo.revents, POLLOUT);

    /* once taken, the socket is as the kernel says: empty, not readable */
    size_t left = 29000;
    while (left) {
        ssize_t n = recv(sv[0], buf, sizeof buf, 0);
        if (n <= 0) break;
        left -= (size_t)n;
    }
    CHECK_INT(left, 0);
    CHECK_INT(poll(&p, 1, 0), 0);
    errno = 0;
    CHECK_INT(recv(sv[0], buf, sizeof buf, 0), -1);
    CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
    ssh_readahead_del(sv[0]);
    for (int i = 0; i < 2; i++) {
        close(sv[i]);
        close(other[i]);
    }
}

/* The peer closes after its last bytes: they all come, then end of file (0). */
static void t_eof_after_bytes(void)
{
    int sv[2];
    pair(sv);
    ssh_readahead_add(sv[0]);
    size_t sent = 0;
    send_some(sv[1], &sent, 10000);
    close(sv[1]);
    char buf[4096];
    size_t got = 0;
    ssize_t n;
    while ((n = recv(sv[0], buf, sizeof buf, 0)) > 0) got += (size_t)n;
    CHECK_INT(got, 10000);
    CHECK_INT(n, 0);
    ssh_readahead_del(sv[0]);
    close(sv[0]);
}

/* After del (the session's teardown) and for a socket never added: recv and poll are the
 * kernel's, a 4 KiB recv takes 4 KiB off the socket and no more. */
static void t_not_added(void)
{
    int sv[2];
    pair(sv);
    ssh_readahead_add(sv[0]);
    ssh_readahead_del(sv[0]);
    CHECK_INT(ssh_readahead_add(-1), -1);
    size_t sent = 0;
    send_some(sv[1], &sent, 20000);
    char buf[4096];
    CHECK_INT(recv(sv[0], buf, sizeof buf, 0), 4096);
    CHECK_INT(ssh_readahead_pending(sv[0]), 0);
    int q = 0;
    CHECK_INT(ioctl(sv[0], FIONREAD, &q), 0);
    CHECK_INT(q, 20000 - 4096);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    tap_run("ssh read-ahead: 3 MB in 4 KiB pieces, every byte once and in order", t_bytes_in_order);
    tap_run("ssh read-ahead: poll says readable while bytes wait here", t_poll_sees_ahead);
    tap_run("ssh read-ahead: end of file after the last byte", t_eof_after_bytes);
    tap_run("ssh read-ahead: a socket not added is read as the kernel reads it", t_not_added);
    return tap_done();
}
