/* Unit tests for launcher/parity.c: grouping one fact's values across hosts and the one-line
 * description that names the odd hosts out against the majority. */
#include <stdio.h>
#include <stdlib.h>

#include "check/parity.h"
#include "tap.h"

static const char *names16[16] = {
    "gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7",
    "gpu8", "gpu9", "gpu10", "gpu11", "gpu12", "gpu13", "gpu14", "gpu15",
};

static void fill(const char **v, size_t n, const char *value)
{
    for (size_t i = 0; i < n; i++) v[i] = value;
}

static void expect_describe(const char *const *names, const char *const *values, size_t n,
                            const char *want)
{
    char *got = parity_describe(names, values, n);
    if (want) CHECK_STR(got, want);
    else CHECK(got == NULL);
    free(got);
}

static void test_all_agree(void)
{
    const char *v[16];
    fill(v, 16, "2.19.4");
    expect_describe(names16, v, 16, NULL);
    fill(v, 16, NULL);                                   /* unknown everywhere: no difference */
    expect_describe(names16, v, 16, NULL);
    expect_describe(names16, v, 0, NULL);
    expect_describe(names16, v, 1, NULL);
}

static void test_one_and_two_odd_hosts(void)
{
    const char *v[16];
    fill(v, 16, "2.19.4");
    v[3] = "2.18.1";
    expect_describe(names16, v, 16, "gpu3: 2.18.1; 15 others: 2.19.4");
    v[7] = "2.18.1";
    expect_describe(names16, v, 16, "gpu3, gpu7: 2.18.1; 14 others: 2.19.4");
    v[3] = NULL;
    v[7] = NULL;
    expect_describe(names16, v, 16, "gpu3, gpu7: unknown; 14 others: 2.19.4");
    v[3] = "";
    v[7] = "2.19.4";
    expect_describe(names16, v, 16, "gpu3: (empty); 15 others: 2.19.4");
}

static void test_many_odd_hosts_in_one_group(void)
{
    const char *v[16];
    fill(v, 16, "a");
    for (int i = 1; i <= 5; i++) v[i] = "b";
    expect_describe(names16, v, 16, "gpu1, gpu2, gpu3 +2 more: b; 11 others: a");
}

static void test_three_or_more_groups(void)
{
    const char *v[16];
    fill(v, 16, "2.19.4");
    v[3] = "2.18.1";
    v[5] = NULL;
    v[9] = NULL;
    /* largest minority first: unknown (2 hosts), then 2.18.1 */
    expect_describe(names16, v, 16, "gpu5, gpu9: unknown; gpu3: 2.18.1; 13 others: 2.19.4");

    /* Beyond four minority groups the rest are counted, not listed. */
    fill(v, 16, "x");
    v[1] = "a"; v[2] = "b"; v[3] = "c"; v[4] = "d"; v[5] = "e"; v[6] = "f"; v[7] = "f";
    expect_describe(names16, v, 16, "gpu6, gpu7: f; gpu1: a; gpu2: b; gpu3: c; "
                    "2 more hosts with 2 other values; 9 others: x");
}

static void test_tie_uses_first_host(void)
{
    const char *v[4] = { "old", "new", "old", "new" };
    expect_describe(names16, v, 4, "gpu1, gpu3: new; 2 others: old");
    const char *w[2] = { "a", "b" };
    expect_describe(names16, w, 2, "gpu1: b; 1 other: a");
}

static void test_groups_order_and_contents(void)
{
    const char *v[7] = { "b", NULL, "a", "b", "c", NULL, "b" };
    struct parity_group *g = NULL;
    size_t n = parity_group(v, 7, &g);
    CHECK_INT(n, 4);
    if (n != 4) { parity_groups_free(g, n); return; }
    CHECK_STR(g[0].value, "b");
    CHECK_INT(g[0].n, 3);
    CHECK_INT(g[0].hosts[0], 0);
    CHECK_INT(g[0].hosts[1], 3);
    CHECK_INT(g[0].hosts[2], 6);
    CHECK(g[1].value == NULL);                  /* 2 hosts, first host 1 */
    CHECK_INT(g[1].n, 2);
    CHECK_INT(g[1].hosts[0], 1);
    CHECK_INT(g[1].hosts[1], 5);
    CHECK_STR(g[2].value, "a");                 /* ties of 1: host 2 before host 4 */
    CHECK_INT(g[2].hosts[0], 2);
    CHECK_STR(g[3].value, "c");
    parity_groups_free(g, n);
    CHECK_INT(parity_group(v, 0, &g), 0);
    CHECK(g == NULL);
    parity_groups_free(g, 0);
}

static void test_remote_bytes_are_printable(void)
{
    const char *names[3] = { "n0", "n1", "n2" };
    const char *v[3] = { "ok", "ok", "bad\x1b[2J\n" };
    expect_describe(names, v, 3, "n2: bad?[2J?; 2 others: ok");
    char long_value[200];
    memset(long_value, 'z', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    v[2] = long_value;
    char *got = parity_describe(names, v, 3);
    CHECK(got && strlen(got) < 120);
    CHECK(got && strstr(got, "z...; 2 others: ok") != NULL);
    free(got);
    /* Without names the hosts are numbered. */
    v[2] = "x";
    expect_describe(NULL, v, 3, "host 2: x; 2 others: ok");
}

static void test_many_hosts_all_different(void)
{
    enum { N = 5000 };
    static char buf[N][16];
    static const char *v[N], *names[N];
    for (int i = 0; i < N; i++) {
        snprintf(buf[i], sizeof buf[i], "v%d", i);
        v[i] = buf[i];
        names[i] = buf[i];
    }
    struct parity_group *g;
    size_t n = parity_group(v, N, &g);
    CHECK_INT(n, N);
    if (n == N) CHECK_INT(g[N - 1].hosts[0], N - 1);      /* all size 1: host order */
    parity_groups_free(g, n);
    char *d = parity_describe(names, v, N);
    CHECK_STR(d, "v1: v1; v2: v2; v3: v3; v4: v4; 4995 more hosts with 4995 other values; "
              "1 other: v0");
    free(d);
}

int main(void)
{
    RUN(test_all_agree);
    RUN(test_one_and_two_odd_hosts);
    RUN(test_many_odd_hosts_in_one_group);
    RUN(test_three_or_more_groups);
    RUN(test_tie_uses_first_host);
    RUN(test_groups_order_and_contents);
    RUN(test_remote_bytes_are_printable);
    RUN(test_many_hosts_all_different);
    return tap_done();
}
