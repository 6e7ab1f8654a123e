/* Unit tests for the SSH sockets' read-ahead (launcher/ssh/ssh_readahead.c): the recv() and
 * poll() that libssh calls. What libssh relies on: every byte comes out once and in order, in
 * the pieces it asks for; a socket whose bytes were read ahead still polls readable (or libssh
 * and the loop would wait for the network with the data already here); end of file comes
 * after the last byte; what it does not read ahead behaves as the kernel's calls do; a recv with
 * flags sees the stream as it is, read-ahead bytes first; a registration belongs to one session
 * (issue 28, finding 6): a new session on a reused fd number never gets the old socket's bytes,
 * and the old session's del leaves the new one's registration alone. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
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
    struct ssh_readahead_ref ra = ssh_readahead_add(sv[0]);
    CHECK_INT(ra.fd, sv[0]);
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
        size_t ahead = ssh_readahead_pending(ra);
        if (ahead > max_ahead) max_ahead = ahead;
        CHECK(ahead <= SSH_READAHEAD_SIZE);
    }
    CHECK_INT(got, total);
    CHECK_INT(bad, 0);
    CHECK_INT(stalls, 0);
    CHECK(max_ahead >= 16384); /* it did read ahead, or this test tests nothing */
    ssh_readahead_del(&ra);
    CHECK_INT(ra.fd, -1);
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
    struct ssh_readahead_ref ra = ssh_readahead_add(sv[0]);
    size_t sent = 0;
    send_some(sv[1], &sent, 30000);
    char buf[4096];
    CHECK_INT(recv(sv[0], buf, 1000, 0), 1000);
    CHECK_INT(ssh_readahead_pending(ra), 29000);

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
    ssh_readahead_del(&ra);
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
    struct ssh_readahead_ref ra = ssh_readahead_add(sv[0]);
    size_t sent = 0;
    send_some(sv[1], &sent, 10000);
    close(sv[1]);
    char buf[4096];
    size_t got = 0;
    ssize_t n;
    while ((n = recv(sv[0], buf, sizeof buf, 0)) > 0) got += (size_t)n;
    CHECK_INT(got, 10000);
    CHECK_INT(n, 0);
    ssh_readahead_del(&ra);
    close(sv[0]);
}

/* After del (the session's teardown) and for a socket never added: recv and poll are the
 * kernel's, a 4 KiB recv takes 4 KiB off the socket and no more. */
static void t_not_added(void)
{
    int sv[2];
    pair(sv);
    struct ssh_readahead_ref ra = ssh_readahead_add(sv[0]);
    ssh_readahead_del(&ra);
    CHECK_INT(ssh_readahead_add(-1).fd, -1);
    size_t sent = 0;
    send_some(sv[1], &sent, 20000);
    char buf[4096];
    CHECK_INT(recv(sv[0], buf, sizeof buf, 0), 4096);
    CHECK_INT(ssh_readahead_pending(ra), 0);
    int q = 0;
    CHECK_INT(ioctl(sv[0], FIONREAD, &q), 0);
    CHECK_INT(q, 20000 - 4096);
    close(sv[0]);
    close(sv[1]);
}

/* Whether buf holds the pattern's bytes from..from+n. */
static bool is_pat(const unsigned char *buf, size_t from, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pat(from + i)) return false;
    return true;
}

/* A recv with flags while bytes wait here gets the stream in order, those bytes first: a peek
 * sees them (and what the kernel holds after them) without taking them; MSG_DONTWAIT takes
 * them; MSG_TRUNC drops them; MSG_WAITALL takes them and the kernel's rest. Before issue 28
 * every flagged recv went to the kernel and skipped what waited here. */
static void t_flags(void)
{
    int sv[2];
    pair(sv);
    struct ssh_readahead_ref ra = ssh_readahead_add(sv[0]);
    size_t sent = 0;
    send_some(sv[1], &sent, 30000);
    static unsigned char big[40000];
    CHECK_INT(recv(sv[0], big, 1000, 0), 1000);
    CHECK_INT(ssh_readahead_pending(ra), 29000); /* the kernel holds nothing now */

    CHECK_INT(recv(sv[0], big, 100, MSG_PEEK), 100);
    CHECK(is_pat(big, 1000, 100));
    CHECK_INT(ssh_readahead_pending(ra), 29000);
    send_some(sv[1], &sent, 35000);              /* 5000 more in the kernel */
    memset(big, 0, sizeof big);
    CHECK_INT(recv(sv[0], big, sizeof big, MSG_PEEK), 34000);
    CHECK(is_pat(big, 1000, 34000));
    CHECK_INT(ssh_readahead_pending(ra), 29000);

    CHECK_INT(recv(sv[0], big, 500, MSG_DONTWAIT), 500);
    CHECK(is_pat(big, 1000, 500));
    CHECK_INT(recv(sv[0], big, 500, MSG_TRUNC), 500);   /* bytes 1500..1999 dropped */
    CHECK_INT(ssh_readahead_pending(ra), 28000);

    memset(big, 0, sizeof big);
    CHECK_INT(recv(sv[0], big, 33000, MSG_WAITALL), 33000);
    CHECK(is_pat(big, 2000, 33000));
    CHECK_INT(ssh_readahead_pending(ra), 0);
    errno = 0;
    CHECK_INT(recv(sv[0], big, 100, MSG_DONTWAIT), -1);
    CHECK(errno == EAGAIN || errno == EWOULDBLOCK);

    /* nothing waits here: a peek is the kernel's, and reads nothing ahead */
    send_some(sv[1], &sent, 35010);
    CHECK_INT(recv(sv[0], big, 100, MSG_PEEK), 10);
    CHECK(is_pat(big, 35000, 10));
    CHECK_INT(ssh_readahead_pending(ra), 0);
    CHECK_INT(recv(sv[0], big, 100, 0), 10);
    CHECK(is_pat(big, 35000, 10));
    /* every byte read ahead was handed out: poll goes to the kernel again */
    struct pollfd p = { sv[0], POLLIN, 0 };
    CHECK_INT(poll(&p, 1, 0), 0);
    ssh_readahead_del(&ra);
    close(sv[0]);
    close(sv[1]);
}

/* A session whose socket was closed without its del (a teardown that went wrong), and a new
 * session whose socket got the same fd number: the new one starts empty, never handed the old
 * socket's bytes, and poll does not call it readable for them. */
static void t_add_starts_empty(void)
{
    int sv[2];
    pair(sv);
    struct ssh_readahead_ref old = ssh_readahead_add(sv[0]);
    size_t sent = 0;
    send_some(sv[1], &sent, 30000);
    unsigned char buf[4096];
    CHECK_INT(recv(sv[0], buf, 1000, 0), 1000);
    CHECK_INT(ssh_readahead_pending(old), 29000);
    int num = sv[0];
    close(sv[1]);

    int nv[2];
    pair(nv);
    CHECK_INT(dup2(nv[0], num), num);            /* the old socket goes, the number is reused */
    close(nv[0]);
    struct ssh_readahead_ref ra = ssh_readahead_add(num);
    CHECK_INT(ra.fd, num);
    CHECK(ra.key != old.key);
    CHECK_INT(ssh_readahead_pending(ra), 0);
    CHECK_INT(ssh_readahead_pending(old), 0);
    struct pollfd p = { num, POLLIN, 0 };
    CHECK_INT(poll(&p, 1, 0), 0);                /* the new socket has nothing yet */
    CHECK_INT(write(nv[1], "new session", 11), 11);
    memset(buf, 0, sizeof buf);
    CHECK_INT(recv(num, buf, sizeof buf, 0), 11);
    CHECK(memcmp(buf, "new session", 11) == 0);
    ssh_readahead_del(&ra);
    close(num);
    close(nv[1]);
}

/* The old session's del after the number went to a new session (its teardown late, on the
 * number it remembers) leaves the new session's registration: still read ahead. */
static void t_del_checks_session(void)
{
    int sv[2];
    pair(sv);
    struct ssh_readahead_ref old = ssh_readahead_add(sv[0]);
    struct ssh_readahead_ref ra = ssh_readahead_add(sv[0]);  /* the number's new session */
    ssh_readahead_del(&old);
    CHECK_INT(old.fd, -1);
    size_t sent = 0;
    send_some(sv[1], &sent, 30000);
    unsigned char buf[4096];
    CHECK_INT(recv(sv[0], buf, 1000, 0), 1000);
    CHECK_INT(ssh_readahead_pending(ra), 29000); /* still read ahead: 30000 came in one gulp */
    ssh_readahead_del(&ra);
    CHECK_INT(ssh_readahead_pending(ra), 0);
    /* and deleted for good: the rest is the kernel's again (the read-ahead bytes went with it) */
    int q = -1;
    CHECK_INT(ioctl(sv[0], FIONREAD, &q), 0);
    CHECK_INT(q, 0);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    tap_run("ssh read-ahead: 3 MB in 4 KiB pieces, every byte once and in order", t_bytes_in_order);
    tap_run("ssh read-ahead: poll says readable while bytes wait here", t_poll_sees_ahead);
    tap_run("ssh read-ahead: end of file after the last byte", t_eof_after_bytes);
    tap_run("ssh read-ahead: a socket not added is read as the kernel reads it", t_not_added);
    tap_run("ssh read-ahead: recv with flags (MSG_PEEK, MSG_DONTWAIT, MSG_TRUNC, MSG_WAITALL) sees "
            "the read-ahead bytes first", t_flags);
    tap_run("ssh read-ahead: a new session on a reused fd number starts empty", t_add_starts_empty);
    tap_run("ssh read-ahead: an old session's del leaves the new session's registration", t_del_checks_session);
    return tap_done();
}
