/* Unit tests for the tcp check's pair selection: a full mesh up to 64 nodes, a ring plus a
 * sample above, never a node to itself, no duplicate, every node both connects and listens. */
#include <stdbool.h>
#include <stdlib.h>

#include "check/check_mesh.h"
#include "tap.h"

static void check_pairs(size_t n, const struct check_pair *p, size_t k)
{
    bool *out = calloc(n, 1), *in = calloc(n, 1);
    bool *seen = calloc(n * n, 1);
    int self = 0, dup = 0, range = 0;
    for (size_t i = 0; i < k; i++) {
        if (p[i].src >= n || p[i].dst >= n) {
            range++;
            continue;
        }
        if (p[i].src == p[i].dst) self++;
        if (seen[p[i].src * n + p[i].dst]) dup++;
        seen[p[i].src * n + p[i].dst] = true;
        out[p[i].src] = in[p[i].dst] = true;
    }
    CHECK_INT(range, 0);
    CHECK_INT(self, 0);
    CHECK_INT(dup, 0);
    size_t no_out = 0, no_in = 0;
    for (size_t i = 0; i < n; i++) {
        no_out += !out[i];
        no_in += !in[i];
    }
    CHECK_INT(no_out, 0);
    CHECK_INT(no_in, 0);
    free(out);
    free(in);
    free(seen);
}

static void test_small(void)
{
    struct check_pair *p = (struct check_pair *)1;
    CHECK_INT(check_mesh_pairs(0, 1, &p), 0);
    CHECK_INT(check_mesh_pairs(1, 1, &p), 0);
    CHECK_INT(check_mesh_pairs(2, 1, &p), 2);
    check_pairs(2, p, 2);
    free(p);
}

static void test_full_mesh_up_to_64(void)
{
    size_t sizes[] = {3, 16, 64};
    for (size_t s = 0; s < 3; s++) {
        struct check_pair *p;
        size_t n = sizes[s], k = check_mesh_pairs(n, 42, &p);
        CHECK_INT(k, n * (n - 1)); /* with no duplicate and no self pair: every ordered pair */
        check_pairs(n, p, k);
        free(p);
    }
}

static void test_ring_and_sample_above_64(void)
{
    size_t sizes[] = {65, 200, 1000};
    for (size_t s = 0; s < 3; s++) {
        struct check_pair *p;
        size_t n = sizes[s], k = check_mesh_pairs(n, 7 + s, &p);
        CHECK(k <= n * (2 + CHECK_MESH_SAMPLE));
        CHECK(k >= n * 2); /* at least the ring, both directions */
        check_pairs(n, p, k);
        /* the ring is there: i -> i+1 for every i */
        size_t ring = 0;
        for (size_t i = 0; i < k; i++)
            if (p[i].dst == (p[i].src + 1) % n) ring++;
        CHECK_INT(ring, n);
        free(p);
    }
}

static void test_sample_depends_on_seed(void)
{
    struct check_pair *a, *b;
    size_t ka = check_mesh_pairs(100, 1, &a), kb = check_mesh_pairs(100, 2, &b);
    size_t same = ka == kb;
    for (size_t i = 0; same && i < ka; i++)
        if (a[i].src != b[i].src || a[i].dst != b[i].dst) same = 0;
    CHECK(!same);
    free(a);
    free(b);
}

int main(void)
{
    RUN(test_small);
    RUN(test_full_mesh_up_to_64);
    RUN(test_ring_and_sample_above_64);
    RUN(test_sample_depends_on_seed);
    return tap_done();
}
