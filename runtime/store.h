/* Rendezvous: a small key-value TCP store like PyTorch's c10d TCPStore. Rank 0 serves it on
 * MASTER_ADDR:MASTER_PORT (bound to that address only); every rank, rank 0 included, is a
 * client. A connection must present the job token when one is set. Wire format:
 * docs/metrics.md does not cover it; see the banner of store.c. */
#ifndef DDPTOP_STORE_H
#define DDPTOP_STORE_H

#include <stddef.h>
#include <stdint.h>

struct store_server;
struct store;

/* Starts serving in a background thread. Fails with a clear message when the port is in use
 * or the address is not one of this machine's. */
struct store_server *store_server_start(const char *addr, int port, const char *token,
                                        char *err, size_t errlen);
void store_server_stop(struct store_server *srv);
/* The port it listens on (useful when started with port 0: an ephemeral port, for tests). */
int store_server_port(const struct store_server *srv);

/* Connects, retrying with backoff until timeout_s; the error names the endpoint. A wrong
 * token is refused by the server and reported as such (no retry). */
struct store *store_connect(const char *addr, int port, const char *token, double timeout_s,
                            char *err, size_t errlen);
void store_close(struct store *st);

int store_set(struct store *st, const char *key, const void *val, size_t len);
/* Waits until key exists (up to timeout_s), then returns a malloc'd copy in *val. */
int store_get(struct store *st, const char *key, void **val, size_t *len, double timeout_s);
/* Atomically adds delta to the integer at key (0 if absent); returns the new value in *out. */
int store_add(struct store *st, const char *key, int64_t delta, int64_t *out);
/* Waits until every key exists, up to timeout_s. */
int store_wait(struct store *st, const char *const *keys, size_t n, double timeout_s);
/* The last error, for messages. */
const char *store_error(const struct store *st);

/* Every one of world_size ranks calls it with the same name (a name used once per job);
 * returns when all have arrived, or -1 after timeout_s. */
int store_barrier(struct store *st, const char *name, int world_size, double timeout_s);
/* The numeric local address of the connection to the store: the address this host uses to
 * reach rank 0, which is where peers can reach us too (the CPU ring listens there). */
int store_local_addr(const struct store *st, char *ip, size_t iplen);

#endif
