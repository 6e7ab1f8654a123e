/* Connection pairs for the `tcp` check; see check_mesh.h. */
#include "check_mesh.h"

#include <stdbool.h>
#include <stdlib.h>

#include "util/util.h"

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static bool has_pair(const struct check_pair *p, size_t n, size_t src, size_t dst)
{
    /* only the pairs of this src are near the end; n is small per node */
    for (size_t i = n; i-- > 0;) {
        if (p[i].src != src) break;
        if (p[i].dst == dst) return true;
    }
    return false;
}

size_t check_mesh_pairs(size_t n, uint64_t seed, struct check_pair **out)
{
    struct check_pair *p;
    size_t k = 0;
    if (n < 2) {
        *out = NULL;
        return 0;
    }
    if (n <= CHECK_MESH_FULL) {
        p = xmalloc(n * (n - 1) * sizeof *p);
        for (size_t s = 0; s < n; s++)
            for (size_t d = 0; d < n; d++)
                if (s != d) p[k++] = (struct check_pair){s, d};
        *out = p;
        return k;
    }
    /* per node: next and previous on the ring, then CHECK_MESH_SAMPLE random others */
    p = xmalloc(n * (2 + CHECK_MESH_SAMPLE) * sizeof *p);
    for (size_t s = 0; s < n; s++) {
        size_t first = k, want = 2 + CHECK_MESH_SAMPLE;
        p[k++] = (struct check_pair){s, (s + 1) % n};
        if (!has_pair(p + first, k - first, s, (s + n - 1) % n))
            p[k++] = (struct check_pair){s, (s + n - 1) % n};
        for (int tries = 0; k - first < want && tries < 64; tries++) {
            size_t d = (size_t)(splitmix(&seed) % n);
            if (d == s || has_pair(p + first, k - first, s, d)) continue;
            p[k++] = (struct check_pair){s, d};
        }
    }
    *out = p;
    return k;
}
