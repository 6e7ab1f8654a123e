/* Small TCP helpers shared by the rendezvous store (store.c, store_server.c) and the CPU ring
 * (comm_ring.c): deadlines on the monotonic clock, whole-buffer reads and writes that give up
 * at a deadline, endpoint formatting, big-endian integers and a constant-time token compare.
 * Internal to runtime/; the contracts are store.h and comm.h. */
#ifndef DDPTOP_NET_H
#define DDPTOP_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Returned by net_read_all when the peer closed the connection (errno is meaningless then). */
#define NET_EOF (-2)

int64_t net_now_ns(void);
/* now + seconds, as a deadline for the functions below. */
int64_t net_deadline(double seconds);
/* Milliseconds left until deadline for poll(), at least 0 and at most cap_ms. */
int net_ms_left(int64_t deadline_ns, int cap_ms);

/* Writes/reads exactly len bytes on a nonblocking or blocking socket, waiting with poll().
 * 0 on success; -1 with errno (ETIMEDOUT past the deadline, EPIPE/ECONNRESET...); NET_EOF. */
int net_write_all(int fd, const void *buf, size_t len, int64_t deadline_ns);
int net_read_all(int fd, void *buf, size_t len, int64_t deadline_ns);

/* A connect() that gives up at the deadline; returns 0 or -1 with errno. fd is nonblocking. */
int net_connect(int fd, const struct sockaddr *sa, socklen_t salen, int64_t deadline_ns);

int net_set_nonblock(int fd);
void net_set_nodelay(int fd);

/* "host:port", or "[v6]:port" when host has a colon. */
void net_endpoint(char *buf, size_t len, const char *host, int port);
/* The numeric address and port of a socket address. 0 or -1. */
int net_sockaddr_ip(const struct sockaddr *sa, char *ip, size_t iplen, int *port);

/* Equal strings, in time that depends only on their lengths (tokens never leak by timing). */
int net_token_equal(const char *a, size_t alen, const char *b, size_t blen);

void net_put_u32(uint8_t *p, uint32_t v);
uint32_t net_get_u32(const uint8_t *p);
void net_put_u64(uint8_t *p, uint64_t v);
uint64_t net_get_u64(const uint8_t *p);

#endif
