/* Connection pairs for the `tcp` check; see check_mesh.h. */
#include "check_mesh.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* splitmix64: small, and the same sequence on every machine for a given seed */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

const char *check_mesh_mode_name(enum check_mesh_mode m)
{
    return m == CHECK_MESH_MODE_FULL ? "full" : m == CHECK_MESH_MODE_SAMPLE ? "sample" : "auto";
}

int check_mesh_mode_parse(const char *s)
{
    if (!s) return -1;
    if (strcmp(s, "auto") == 0) return CHECK_MESH_AUTO;
    if (strcmp(s, "full") == 0) return CHECK_MESH_MODE_FULL;
    if (strcmp(s, "sample") == 0) return CHECK_MESH_MODE_SAMPLE;
    return -1;
}

enum check_mesh_mode check_mesh_resolve(enum check_mesh_mode m, size_t n)
{
    if (m != CHECK_MESH_AUTO) return m;
    return n <= CHECK_MESH_FULL_MAX ? CHECK_MESH_MODE_FULL : CHECK_MESH_MODE_SAMPLE;
}

/* Whether src already probes dst: its pairs are the last ones added (at most a handful). */
static bool has_pair(const struct check_pair *p, size_t k, size_t src, size_t dst)
{
    for (size_t i = k; i-- > 0;) {
        if (p[i].src != src) break;
        if (p[i].dst == dst) return true;
    }
    return false;
}

size_t check_mesh_pairs(size_t n, enum check_mesh_mode m, uint64_t seed, struct check_pair **out)
{
    struct check_pair *p;
    size_t k = 0, *succ, *perm;
    *out = NULL;
    if (n < 2) return 0;
    if (check_mesh_resolve(m, n) == CHECK_MESH_MODE_FULL) {
        p = xmalloc(n * (n - 1) * sizeof *p);
        for (size_t s = 0; s < n; s++)
            for (size_t d = 0; d < n; d++)
                if (s != d) p[k++] = (struct check_pair){s, d};
        *out = p;
        return k;
    }
    /* CHECK_MESH_SAMPLE random cycles through every node (a shuffled order, each node probing
     * the next): one more probe out and one more in per node and cycle, so nobody is probed
     * far more than the rest, as independent random picks would do. succ[c * n + s] is s's
     * peer in cycle c. */
    succ = xmalloc(CHECK_MESH_SAMPLE * n * sizeof *succ);
    perm = xmalloc(n * sizeof *perm);
    for (size_t c = 0; c < CHECK_MESH_SAMPLE; c++) {
        for (size_t i = 0; i < n; i++) perm[i] = i;
        for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
            size_t j = (size_t)(splitmix(&seed) % (i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (size_t i = 0; i < n; i++) succ[c * n + perm[i]] = perm[(i + 1) % n];
    }
    p = xmalloc(n * (2 + CHECK_MESH_SAMPLE) * sizeof *p);
    for (size_t s = 0; s < n; s++) {
        size_t first = k, cand[2 + CHECK_MESH_SAMPLE];
        cand[0] = (s + 1) % n;
        cand[1] = (s + n - 1) % n;
        for (size_t c = 0; c < CHECK_MESH_SAMPLE; c++) cand[2 + c] = succ[c * n + s];
        for (size_t c = 0; c < 2 + CHECK_MESH_SAMPLE; c++)
            if (cand[c] != s && !has_pair(p + first, k - first, s, cand[c])) p[k++] = (struct check_pair){s, cand[c]};
    }
    free(succ);
    free(perm);
    *out = p;
    return k;
}

size_t check_mesh_min_in(size_t n, const struct check_pair *p, size_t k)
{
    size_t *in, min;
    if (n < 2) return 0;
    in = xcalloc(n, sizeof *in);
    for (size_t i = 0; i < k; i++)
        if (p[i].dst < n) in[p[i].dst]++;
    min = in[0];
    for (size_t i = 1; i < n; i++)
        if (in[i] < min) min = in[i];
    free(in);
    return min;
}
