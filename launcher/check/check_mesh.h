/* Which node connects to which in the `tcp` check (docs/check.md, "The TCP mesh").
 * full: every ordered pair (NCCL connects back on random ports, both ways): n(n-1) probes.
 * sample: the ring both ways (i -> i+1, i -> i-1) plus CHECK_MESH_SAMPLE random cycles over
 * the nodes, so every node probes at most 2 + CHECK_MESH_SAMPLE peers and is probed by as many
 * (fewer only where a random cycle repeats a pair): probes grow as O(n), and every node is
 * probed by at least 2 others (the ring) whatever the seed. auto: full up to
 * CHECK_MESH_FULL_MAX nodes, sample above. The rendezvous probes (every node to node 0's
 * --master-port) are the preflight's, on top of these. */
#ifndef DDPTOP_CHECK_MESH_H
#define DDPTOP_CHECK_MESH_H

#include <stddef.h>
#include <stdint.h>

#define CHECK_MESH_FULL_MAX 64  /* auto: a full mesh up to this many nodes */
#define CHECK_MESH_SAMPLE 3     /* random peers per node in a sampled mesh, besides the ring */

enum check_mesh_mode { CHECK_MESH_AUTO = 0, CHECK_MESH_MODE_FULL, CHECK_MESH_MODE_SAMPLE };

struct check_pair {
    size_t src;   /* connects */
    size_t dst;   /* listens */
};

/* "auto", "full", "sample"; parse returns -1 for anything else. */
const char *check_mesh_mode_name(enum check_mesh_mode m);
int check_mesh_mode_parse(const char *s);
/* The mode used for n nodes: full or sample (auto resolved). */
enum check_mesh_mode check_mesh_resolve(enum check_mesh_mode m, size_t n);

/* Pairs for n nodes (indexes 0..n-1) in mode m, never src == dst, no duplicates; every node
 * both connects and is connected to when n >= 2. The same (n, m, seed) gives the same pairs in
 * the same order: a rerun with the seed of --json probes the same pairs. *out is malloc'd
 * (NULL when none); returns the count. */
size_t check_mesh_pairs(size_t n, enum check_mesh_mode m, uint64_t seed, struct check_pair **out);

/* The fewest probes any node receives in pairs[0..k) over n nodes (0 when n < 2). */
size_t check_mesh_min_in(size_t n, const struct check_pair *p, size_t k);

#endif
