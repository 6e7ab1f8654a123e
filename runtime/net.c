/* TCP helpers for the rendezvous store and the CPU ring: see net.h. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t net_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t net_deadline(double seconds)
{
    if (seconds < 0) seconds = 0;
    if (seconds > 1e8) seconds = 1e8;
    return net_now_ns() + (int64_t)(seconds * 1e9);
}

int net_ms_left(int64_t deadline_ns, int cap_ms)
{
    int64_t left = deadline_ns - net_now_ns();
    if (left <= 0) return 0;
    int64_t ms = (left + 999999) / 1000000;
    return ms > cap_ms ? cap_ms : (int)ms;
}

static int wait_fd(int fd, short ev, int64_t deadline_ns)
{
    for (;;) {
        /* Polls at least once, so a socket that is ready at the deadline still counts. */
        struct pollfd p = { .fd = fd, .events = ev };
        int r = poll(&p, 1, net_ms_left(deadline_ns, 1000));
        if (r < 0 && errno != EINTR) return -1;
        if (r > 0) return 0;   /* ready, or an error the next call reports */
        if (net_now_ns() >= deadline_ns) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
}

int net_write_all(int fd, const void *buf, size_t len, int64_t deadline_ns)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (wait_fd(fd, POLLOUT, deadline_ns) < 0) return -1;
    }
    return 0;
}

int net_read_all(int fd, void *buf, size_t len, int64_t deadline_ns)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) return NET_EOF;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (wait_fd(fd, POLLIN, deadline_ns) < 0) return -1;
    }
    return 0;
}

int net_connect(int fd, const struct sockaddr *sa, socklen_t salen, int64_t deadline_ns)
{
    if (net_set_nonblock(fd) < 0) return -1;
    if (connect(fd, sa, salen) == 0) return 0;
    if (errno != EINPROGRESS && errno != EINTR) return -1;
    if (wait_fd(fd, POLLOUT, deadline_ns) < 0) return -1;
    int soerr = 0;
    socklen_t l = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l) < 0) return -1;
    if (soerr) {
        errno = soerr;
        return -1;
    }
    return 0;
}

int net_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void net_set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void net_endpoint(char *buf, size_t len, const char *host, int port)
{
    if (strchr(host, ':')) snprintf(buf, len, "[%s]:%d", host, port);
    else snprintf(buf, len, "%s:%d", host, port);
}

int net_sockaddr_ip(const struct sockaddr *sa, char *ip, size_t iplen, int *port)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
        if (!inet_ntop(AF_INET, &s4->sin_addr, ip, (socklen_t)iplen)) return -1;
        *port = ntohs(s4->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
        if (!inet_ntop(AF_INET6, &s6->sin6_addr, ip, (socklen_t)iplen)) return -1;
        *port = ntohs(s6->sin6_port);
        return 0;
    }
    return -1;
}

int net_token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Walks the longer string whole; a length difference alone makes it unequal. */
    size_t n = alen > blen ? alen : blen;
    unsigned diff = (unsigned)(alen ^ blen);
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        unsigned char y = i < blen ? (unsigned char)b[i] : 0;
        diff |= (unsigned)(x ^ y);
    }
    return diff == 0;
}

void net_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

uint32_t net_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void net_put_u64(uint8_t *p, uint64_t v)
{
    net_put_u32(p, (uint32_t)(v >> 32));
    net_put_u32(p + 4, (uint32_t)v);
}

uint64_t net_get_u64(const uint8_t *p)
{
    return (uint64_t)net_get_u32(p) << 32 | net_get_u32(p + 4);
}
