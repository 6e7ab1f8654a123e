/* Which node connects to which in the `tcp` check: every ordered pair up to CHECK_MESH_FULL
 * nodes (NCCL connects back on random ports, both ways); above that a ring in both directions
 * plus a random sample of peers per node, so the number of connections stays linear. */
#ifndef DDPTOP_CHECK_MESH_H
#define DDPTOP_CHECK_MESH_H

#include <stddef.h>
#include <stdint.h>

#define CHECK_MESH_FULL 64
#define CHECK_MESH_SAMPLE 3   /* extra random peers per node above CHECK_MESH_FULL */

struct check_pair {
    size_t src;   /* connects */
    size_t dst;   /* listens */
};

/* Pairs for n nodes (indexes 0..n-1), never src == dst, no duplicates; every node both
 * connects and is connected to when n >= 2. seed makes the sample reproducible.
 * *out is malloc'd; returns the count. */
size_t check_mesh_pairs(size_t n, uint64_t seed, struct check_pair **out);

#endif
