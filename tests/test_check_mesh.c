/* Unit tests for the tcp check's pair selection (check_mesh.c): a full mesh up to 64 nodes, a
 * ring plus random cycles above (O(N): 1,024 nodes under 8 N probes, every node probed by >= 2
 * peers), the same pairs for the same seed, --mesh overriding the threshold; never a node to
 * itself, no duplicate, every node both connects and listens. And the grouping of failures
 * (check_tcp_group.c): a partition of 64 nodes in two halves is one finding, not 64 lines of
 * 32 pairs; a refused node is one finding naming the set that tried. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check_eval.h"
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
    CHECK_INT(check_mesh_pairs(0, CHECK_MESH_AUTO, 1, &p), 0);
    CHECK_INT(check_mesh_pairs(1, CHECK_MESH_AUTO, 1, &p), 0);
    CHECK_INT(check_mesh_pairs(2, CHECK_MESH_AUTO, 1, &p), 2);
    check_pairs(2, p, 2);
    free(p);
}

static void test_full_mesh_up_to_64(void)
{
    size_t sizes[] = {3, 16, 64};
    for (size_t s = 0; s < 3; s++) {
        struct check_pair *p;
        size_t n = sizes[s], k = check_mesh_pairs(n, CHECK_MESH_AUTO, 42, &p);
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
        size_t n = sizes[s], k = check_mesh_pairs(n, CHECK_MESH_AUTO, 7 + s, &p);
        CHECK(k <= n * (2 + CHECK_MESH_SAMPLE));
        CHECK(k >= n * 2); /* at least the ring, both directions */
        check_pairs(n, p, k);
        CHECK(check_mesh_min_in(n, p, k) >= 2);
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
    size_t ka = check_mesh_pairs(100, CHECK_MESH_AUTO, 1, &a), kb = check_mesh_pairs(100, CHECK_MESH_AUTO, 2, &b);
    size_t same = ka == kb;
    for (size_t i = 0; same && i < ka; i++)
        if (a[i].src != b[i].src || a[i].dst != b[i].dst) same = 0;
    CHECK(!same);
    free(a);
    free(b);
}

/* 1,024 nodes: O(N) probes (under 8 N, rendezvous included), every node probed by >= 2. */
static void test_sample_is_linear(void)
{
    size_t sizes[] = {65, 256, 1024, 4096};
    for (size_t s = 0; s < 4; s++) {
        struct check_pair *p;
        size_t n = sizes[s], k = check_mesh_pairs(n, CHECK_MESH_AUTO, 12345 + s, &p), min_in;
        size_t *out = calloc(n, sizeof *out), max_out = 0;
        for (size_t i = 0; i < k; i++) out[p[i].src]++;
        for (size_t i = 0; i < n; i++)
            if (out[i] > max_out) max_out = out[i];
        min_in = check_mesh_min_in(n, p, k);
        CHECK(k + n < 8 * n); /* + n: every node's probe of the rendezvous port */
        CHECK(max_out <= 2 + CHECK_MESH_SAMPLE);
        CHECK(min_in >= 2);
        if (s == 2) printf("# 1024 nodes: %zu pairs (%.2f per node), every node probed by >= %zu\n", k,
                           (double)k / (double)n, min_in);
        check_pairs(n, p, k);
        free(out);
        free(p);
    }
}

/* The same node count, mode and seed: the same pairs in the same order (--mesh-seed). */
static void test_same_seed_same_pairs(void)
{
    struct check_pair *a, *b;
    size_t ka = check_mesh_pairs(500, CHECK_MESH_MODE_SAMPLE, 99, &a), kb = check_mesh_pairs(500, CHECK_MESH_MODE_SAMPLE, 99, &b);
    CHECK_INT(ka, kb);
    CHECK(ka == kb && memcmp(a, b, ka * sizeof *a) == 0);
    free(a);
    free(b);
}

/* --mesh full above 64 probes every pair; --mesh sample at 16 samples; auto switches at 64. */
static void test_mode_overrides(void)
{
    struct check_pair *p;
    size_t k = check_mesh_pairs(100, CHECK_MESH_MODE_FULL, 1, &p);
    CHECK_INT(k, 100 * 99);
    free(p);
    k = check_mesh_pairs(16, CHECK_MESH_MODE_SAMPLE, 1, &p);
    CHECK(k <= 16 * (2 + CHECK_MESH_SAMPLE) && k >= 32);
    check_pairs(16, p, k);
    free(p);
    CHECK_INT(check_mesh_resolve(CHECK_MESH_AUTO, 64), CHECK_MESH_MODE_FULL);
    CHECK_INT(check_mesh_resolve(CHECK_MESH_AUTO, 65), CHECK_MESH_MODE_SAMPLE);
    CHECK_INT(check_mesh_resolve(CHECK_MESH_MODE_FULL, 1000), CHECK_MESH_MODE_FULL);
    CHECK_INT(check_mesh_mode_parse("sample"), CHECK_MESH_MODE_SAMPLE);
    CHECK_INT(check_mesh_mode_parse("full"), CHECK_MESH_MODE_FULL);
    CHECK_INT(check_mesh_mode_parse("auto"), CHECK_MESH_AUTO);
    CHECK_INT(check_mesh_mode_parse("most"), -1);
    /* a sample of 3 nodes is the ring: every pair */
    k = check_mesh_pairs(3, CHECK_MESH_MODE_SAMPLE, 5, &p);
    CHECK_INT(k, 6);
    free(p);
}

/* ---- grouping -------------------------------------------------------------------------- */

struct mesh_case {
    size_t n;
    char **names;
    struct check_node_info *info;
    bool *tested;
    const char **lerr;
    struct check_tcp_result *t;
    size_t nt;
    struct check_report r;
};

static void case_init(struct mesh_case *c, size_t n, enum check_mesh_mode m)
{
    struct check_pair *p;
    size_t k = check_mesh_pairs(n, m, 3, &p);
    c->n = n;
    c->names = calloc(n, sizeof *c->names);
    c->info = calloc(n, sizeof *c->info);
    c->tested = calloc(n, sizeof *c->tested);
    c->lerr = calloc(n, sizeof *c->lerr);
    c->t = calloc(k + n, sizeof *c->t);
    for (size_t i = 0; i < n; i++) {
        c->names[i] = malloc(32);
        snprintf(c->names[i], 32, "n%03zu", i + 1);
        c->info[i].name = c->names[i];
        c->tested[i] = true;
    }
    for (size_t i = 0; i < k; i++)
        c->t[i] = (struct check_tcp_result){.src = p[i].src, .dst = p[i].dst, .port = 40000 + (int)p[i].dst,
                                            .done = true, .ok = true, .error = ""};
    for (size_t i = 0; i < n; i++)
        c->t[k + i] = (struct check_tcp_result){.src = i, .dst = 0, .port = 29500, .rendezvous = true,
                                                .done = true, .ok = true, .error = ""};
    c->nt = k + n;
    free(p);
}

static void case_eval(struct mesh_case *c)
{
    check_report_init(&c->r, c->n);
    check_eval_tcp(&c->r, c->info, c->n, c->tested, c->lerr, NULL, 29500, c->t, c->nt);
}

/* Distinct tcp detail texts over the nodes that do not pass (a folded report prints one line
 * per text and status). */
static size_t case_distinct(const struct mesh_case *c, size_t *not_pass)
{
    size_t d = 0;
    *not_pass = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct check_result *x = &c->r.rows[i].checks[CHECK_TCP];
        bool seen = false;
        if (x->status == CHECK_PASS) continue;
        (*not_pass)++;
        for (size_t j = 0; j < i && !seen; j++) {
            const struct check_result *y = &c->r.rows[j].checks[CHECK_TCP];
            seen = y->status != CHECK_PASS && strcmp(y->detail, x->detail) == 0;
        }
        d += !seen;
    }
    return d;
}

static void case_done(struct mesh_case *c)
{
    check_report_done(&c->r);
    for (size_t i = 0; i < c->n; i++) free(c->names[i]);
    free(c->names);
    free(c->info);
    free(c->tested);
    free(c->lerr);
    free(c->t);
}

static void test_partition_is_one_finding(void)
{
    struct mesh_case c;
    size_t not_pass, distinct;
    const char *d;
    case_init(&c, 64, CHECK_MESH_AUTO);
    for (size_t k = 0; k < c.nt; k++)
        if ((c.t[k].src < 32) != (c.t[k].dst < 32)) c.t[k] = (struct check_tcp_result){
            .src = c.t[k].src, .dst = c.t[k].dst, .port = c.t[k].port, .rendezvous = c.t[k].rendezvous,
            .done = true, .ok = false, .error = "timed out after 3000 ms"};
    case_eval(&c);
    distinct = case_distinct(&c, &not_pass);
    d = c.r.rows[40].checks[CHECK_TCP].detail;
    printf("# n040: %s\n", d);
    CHECK_INT(not_pass, 64);
    CHECK(distinct <= 2);
    CHECK(strstr(d, "no answer between n[001-032] and n[033-064] (a partition") != NULL);
    /* the other half cannot reach the rendezvous port on n001 either: one more finding */
    CHECK(strstr(d, "no answer from n[033-064] to n001:29500 (the rendezvous port)") != NULL);
    CHECK(strlen(d) < 300);
    CHECK_INT(c.r.rows[3].checks[CHECK_TCP].status, CHECK_FAIL);
    CHECK_INT(c.r.rows[40].checks[CHECK_TCP].status, CHECK_FAIL);
    case_done(&c);
}

/* n017 refuses every connection (nothing listens): one finding naming who tried; sampled at
 * 1,024 nodes the same (the set is whoever the plan made probe it). */
static void test_refused_node(void)
{
    size_t sizes[] = {64, 1024};
    for (int s = 0; s < 2; s++) {
        struct mesh_case c;
        size_t not_pass, distinct;
        const char *d;
        case_init(&c, sizes[s], CHECK_MESH_AUTO);
        for (size_t k = 0; k < c.nt; k++)
            if (c.t[k].dst == 16) c.t[k].ok = false, c.t[k].error = "connection refused";
        case_eval(&c);
        distinct = case_distinct(&c, &not_pass);
        d = c.r.rows[16].checks[CHECK_TCP].detail;
        printf("# n017 of %zu: %s\n", c.n, d);
        CHECK_INT(c.r.rows[16].checks[CHECK_TCP].status, CHECK_FAIL);
        CHECK(distinct == 1);
        if (s == 0) CHECK(strstr(d, "connection refused from n[001-016,018-064] to n017:40016") != NULL);
        else CHECK(strstr(d, "connection refused from ") != NULL && strstr(d, " to n017:40016") != NULL);
        for (size_t i = 0; i < c.n; i++)
            if (i != 16 && c.r.rows[i].checks[CHECK_TCP].status != CHECK_PASS)
                CHECK_INT(c.r.rows[i].checks[CHECK_TCP].status, CHECK_WARN);
        case_done(&c);
    }
}

/* n005's /etc/hosts lacks the others: unknown host from n005 to everyone it probes. */
static void test_unknown_host_source(void)
{
    struct mesh_case c;
    size_t not_pass, distinct;
    case_init(&c, 128, CHECK_MESH_AUTO);
    for (size_t k = 0; k < c.nt; k++)
        if (c.t[k].src == 4 && !c.t[k].rendezvous) c.t[k].ok = false, c.t[k].error = "unknown host x";
    case_eval(&c);
    distinct = case_distinct(&c, &not_pass);
    printf("# n005: %s\n", c.r.rows[4].checks[CHECK_TCP].detail);
    CHECK_INT(c.r.rows[4].checks[CHECK_TCP].status, CHECK_FAIL);
    CHECK(strncmp(c.r.rows[4].checks[CHECK_TCP].detail, "unknown host from n005 to ", 26) == 0);
    CHECK_INT(distinct, 1);
    case_done(&c);
}

/* one pair fails now and then: named as a pair, both ends otherwise fine */
static void test_scattered_pair(void)
{
    struct mesh_case c;
    case_init(&c, 8, CHECK_MESH_AUTO);
    for (size_t k = 0; k < c.nt; k++)
        if (c.t[k].src == 2 && c.t[k].dst == 5) c.t[k].ok = false, c.t[k].error = "no route to host";
    case_eval(&c);
    CHECK(strstr(c.r.rows[2].checks[CHECK_TCP].detail, "no route to host on 1 pair: n003 -> n006:40005") != NULL);
    CHECK(strcmp(c.r.rows[2].checks[CHECK_TCP].detail, c.r.rows[5].checks[CHECK_TCP].detail) == 0);
    CHECK_INT(c.r.rows[0].checks[CHECK_TCP].status, CHECK_PASS);
    case_done(&c);
}

int main(void)
{
    RUN(test_small);
    RUN(test_full_mesh_up_to_64);
    RUN(test_ring_and_sample_above_64);
    RUN(test_sample_depends_on_seed);
    RUN(test_sample_is_linear);
    RUN(test_same_seed_same_pairs);
    RUN(test_mode_overrides);
    RUN(test_partition_is_one_finding);
    RUN(test_refused_node);
    RUN(test_unknown_host_source);
    RUN(test_scattered_pair);
    return tap_done();
}
