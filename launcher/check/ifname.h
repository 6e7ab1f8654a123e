/* NCCL_SOCKET_IFNAME semantics, as NCCL applies them: a comma-separated list of prefixes
 * ("eth,ib"); a leading '^' excludes instead ("^docker,lo"); a leading '=' (after any '^')
 * matches exact names ("=eth0", "^=docker0"). Without a value NCCL skips lo and docker*
 * and falls back to lo only when nothing else is up. */
#ifndef DDPTOP_IFNAME_H
#define DDPTOP_IFNAME_H

#include <stdbool.h>
#include <stddef.h>

struct iface {
    const char *name;
    bool up;
    bool has_ipv4;
    int mtu;                 /* 0: unknown */
};

bool ifname_match(const char *spec, const char *name);

/* Which of ifs[0..n) NCCL would use under spec (NULL: the default rule above): writes their
 * indexes to idx (room for n) and returns the count. Only interfaces that are up and have an
 * IPv4 address are usable. */
size_t ifname_select(const char *spec, const struct iface *ifs, size_t n, size_t *idx);

/* A spec that selects at least one usable interface on every node, preferring one name common
 * to all nodes ("=eth0" style when needed, else a shared prefix) and never lo/docker* when
 * anything else works. nodes[i] has counts[i] interfaces. Returns a malloc'd string or NULL. */
char *ifname_suggest(const struct iface *const *nodes, const size_t *counts, size_t n_nodes);

#endif
