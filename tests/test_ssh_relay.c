/* Unit tests for the relay between an SSH session's TCP socket and libssh's end of a socket
 * pair (launcher/ssh/ssh_relay.c). What libssh and the loop rely on: every byte comes through
 * once and in order, both ways, read as libssh reads (4 KiB after a poll); the TCP socket's end
 * of file reaches libssh after the last byte before it, and its error is kept for the message;
 * a libssh that does not read stops the relay's reads of the TCP socket (the SSH window then
 * holds the node back); an idle relay asks for nothing; what libssh wrote last, before its end
 * was closed, still goes out when the relay is freed. A real TCP connection on loopback plays
 * the node's side. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ssh/ssh_relay.h"
#include "tap.h"

static unsigned char pat(size_t i)
{
    return (unsigned char)(i * 131u + i / 251u);
}

/* A TCP connection on loopback: *ours non-blocking (as ssh_conn_net.c connects it), *node the
 * other side (blocking unless asked). */
static void tcp_pair(int *ours, int *node)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) < 0)
        abort();
    *ours = socket(AF_INET, SOCK_STREAM, 0);
    if (*ours < 0 || connect(*ours, (struct sockaddr *)&a, sizeof a) < 0) abort();
    *node = accept(l, NULL, NULL);
    if (*node < 0) abort();
    close(l);
    fcntl(*ours, F_SETFL, fcntl(*ours, F_GETFL) | O_NONBLOCK);
}

/* One pass of the loop: polls the relay's fds (and lib's, when asked, for reading) for up to
 * ms, then pumps the relay with what the poll said. */
static void pass(struct ssh_relay *r, int lib, int ms)
{
    struct pollfd p[SSH_RELAY_POLLFDS + 1];
    int n = ssh_relay_pollfds(r, p);
    p[n].fd = lib;
    p[n].events = POLLIN;
    p[n].revents = 0;
    poll(p, (nfds_t)n + (lib >= 0), ms);
    short rev = 0;
    for (int i = 0; i <= n; i++) rev |= p[i].revents;
    ssh_relay_pump(r, rev);
}

/* libssh's way to read: a poll that says readable, then one recv of 4 KiB. */
static ssize_t lib_read(int lib, unsigned char *buf)
{
    struct pollfd p = { lib, POLLIN, 0 };
    if (poll(&p, 1, 0) != 1) return -1;
    return recv(lib, buf, 4096, 0);
}

/* 3 MB from the node: libssh reads every byte once, in order, and then the end of file the
 * node's close made; no error is kept. */
static void t_down_in_order_then_eof(void)
{
    int net, node, lib = -1;
    tcp_pair(&net, &node);
    struct ssh_relay *r = ssh_relay_new(net, &lib);
    CHECK(r != NULL);
    const size_t total = 3u << 20;
    fcntl(node, F_SETFL, fcntl(node, F_GETFL) | O_NONBLOCK);
    size_t sent = 0, got = 0, bad = 0;
    bool eof = false;
    for (int rounds = 0; rounds < 200000 && !eof; rounds++) {
        unsigned char buf[8192];
        while (sent < total) {
            size_t k = total - sent < sizeof buf ? total - sent : sizeof buf;
            for (size_t i = 0; i < k; i++) buf[i] = pat(sent + i);
            ssize_t w = send(node, buf, k, MSG_DONTWAIT);
            if (w <= 0) break;
            sent += (size_t)w;
        }
        if (sent == total && node >= 0) {
            close(node);
            node = -1;
        }
        pass(r, lib, 10);
        for (;;) {
            ssize_t n = lib_read(lib, buf);
            if (n == 0) eof = true;
            if (n <= 0) break;
            for (ssize_t i = 0; i < n; i++) bad += buf[i] != pat(got + (size_t)i);
            got += (size_t)n;
        }
    }
    CHECK_INT(got, total);
    CHECK_INT(bad, 0);
    CHECK(eof);
    CHECK_INT(ssh_relay_error(r), 0);
    ssh_relay_free(r);
    close(lib);
}

/* 1 MB written by libssh (its end non-blocking, as ssh_conn sets it after the handshake)
 * reaches the node whole and in order, with no poll of the relay asked in between: what
 * ssh_relay_flush_up takes right after libssh wrote. */
static void t_up_in_order(void)
{
    int net, node, lib = -1;
    tcp_pair(&net, &node);
    struct ssh_relay *r = ssh_relay_new(net, &lib);
    fcntl(lib, F_SETFL, fcntl(lib, F_GETFL) | O_NONBLOCK);
    fcntl(node, F_SETFL, fcntl(node, F_GETFL) | O_NONBLOCK);
    const size_t total = 1u << 20;
    size_t sent = 0, got = 0, bad = 0;
    for (int rounds = 0; rounds < 200000 && got < total; rounds++) {
        unsigned char buf[16384];
        if (sent < total) {
            size_t k = total - sent < sizeof buf ? total - sent : sizeof buf;
            for (size_t i = 0; i < k; i++) buf[i] = pat(sent + i);
            ssize_t w = send(lib, buf, k, MSG_DONTWAIT);
            if (w > 0) sent += (size_t)w;
        }
        if (rounds % 2) ssh_relay_flush_up(r);
        else pass(r, -1, 1);
        ssize_t n;
        while ((n = recv(node, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
            for (ssize_t i = 0; i < n; i++) bad += buf[i] != pat(got + (size_t)i);
            got += (size_t)n;
        }
    }
    CHECK_INT(got, total);
    CHECK_INT(bad, 0);
    ssh_relay_free(r);
    close(lib);
    close(node);
}

/* A libssh that reads nothing (the backlog is full): the relay fills the pair, then stops
 * asking to read the TCP socket; the node's bytes wait in the kernel's buffers, not in ours. */
static void t_backpressure(void)
{
    int net, node, lib = -1;
    tcp_pair(&net, &node);
    struct ssh_relay *r = ssh_relay_new(net, &lib);
    fcntl(node, F_SETFL, fcntl(node, F_GETFL) | O_NONBLOCK);
    unsigned char buf[65536];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 400; i++) {
        while (send(node, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
        pass(r, -1, 1);
    }
    struct pollfd p[SSH_RELAY_POLLFDS];
    ssh_relay_pollfds(r, p);
    CHECK_INT(p[0].fd, net);
    CHECK(!(p[0].events & POLLIN));  /* the TCP socket is not read */
    CHECK(p[1].events & POLLOUT);    /* waiting for room in the pair */
    /* libssh reads again: the relay asks for the node's bytes again once the pair took its own */
    ssize_t n;
    for (int i = 0; i < 200; i++) {
        while ((n = recv(lib, buf, sizeof buf, MSG_DONTWAIT)) > 0) {}
        pass(r, -1, 1);
        ssh_relay_pollfds(r, p);
        if (p[0].events & POLLIN) break;
    }
    CHECK(p[0].events & POLLIN);
    ssh_relay_free(r);
    close(lib);
    close(node);
}

/* The node resets the connection: libssh's end says end of file (after what came before),
 * the relay keeps the reset for the message, and the TCP socket is polled no more. */
static void t_reset(void)
{
    int net, node, lib = -1;
    tcp_pair(&net, &node);
    struct ssh_relay *r = ssh_relay_new(net, &lib);
    CHECK(send(node, "last words\n", 11, 0) == 11);
    struct linger lg = { 1, 0 };
    setsockopt(node, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    /* the bytes reach our socket before the reset does */
    struct pollfd w = { net, POLLIN, 0 };
    poll(&w, 1, 1000);
    unsigned char buf[4096];
    size_t got = 0;
    bool eof = false;
    for (int i = 0; i < 100 && !eof; i++) {
        pass(r, lib, 10);
        ssize_t n;
        while ((n = lib_read(lib, buf)) > 0) got += (size_t)n;
        if (n == 0) eof = true;
        if (i == 0) close(node); /* the reset, after the first pass took the bytes */
    }
    CHECK_INT(got, 11);
    CHECK(eof);
    CHECK_INT(ssh_relay_error(r), ECONNRESET);
    struct pollfd p[SSH_RELAY_POLLFDS];
    ssh_relay_pollfds(r, p);
    CHECK_INT(p[0].fd, -1);
    ssh_relay_free(r);
    close(lib);
}

/* Idle, a relay asks only to read (no writes wait), and a pump with no revents reads nothing
 * (the loop's timer ticks cost no system call). */
static void t_idle(void)
{
    int net, node, lib = -1;
    tcp_pair(&net, &node);
    struct ssh_relay *r = ssh_relay_new(net, &lib);
    CHECK(send(node, "x", 1, 0) == 1);
    struct pollfd w = { net, POLLIN, 0 };
    poll(&w, 1, 1000);
    ssh_relay_pump(r, 0);
    struct pollfd l = { lib, POLLIN, 0 };
    CHECK_INT(poll(&l, 1, 0), 0); /* not taken on a tick */
    struct pollfd p[SSH_RELAY_POLLFDS];
    CHECK_INT(ssh_relay_pollfds(r, p), SSH_RELAY_POLLFDS);
    CHECK_INT(p[0].events, POLLIN);
    CHECK_INT(p[1].events, POLLIN);
    ssh_relay_pump(r, POLLIN);
    CHECK_INT(poll(&l, 1, 0), 1);
    ssh_relay_free(r);
    close(lib);
    close(node);
}

/* libssh's last words (a disconnect, the agent's exit request), written just before its end
 * was closed, reach the node when the relay is freed, then the end of file. */
static void t_free_flushes(void)
{
    int net, node, lib = -1;
    tcp_pair(&net, &node);
    struct ssh_relay *r = ssh_relay_new(net, &lib);
    CHECK(send(lib, "bye\n", 4, 0) == 4);
    close(lib);
    ssh_relay_free(r);
    char buf[16];
    ssize_t n = recv(node, buf, sizeof buf, MSG_WAITALL);
    CHECK_INT(n, 4);
    CHECK(n == 4 && memcmp(buf, "bye\n", 4) == 0);
    close(node);
}

int main(void)
{
    RUN(t_down_in_order_then_eof);
    RUN(t_up_in_order);
    RUN(t_backpressure);
    RUN(t_reset);
    RUN(t_idle);
    RUN(t_free_flushes);
    return tap_done();
}
