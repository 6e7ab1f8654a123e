/* Unit tests for launcher/ifname.c: NCCL_SOCKET_IFNAME read the way NCCL reads it (prefixes,
 * '^' to exclude, '=' for exact names, the default order ib / ^docker,lo,virbr / docker / lo),
 * and suggestions that select a usable interface on every node. */
#include <stdlib.h>
#include <string.h>

#include "check/ifname.h"
#include "tap.h"

#define UP4(n)   { n, true, true, 1500 }
#define DOWN(n)  { n, false, true, 1500 }
#define NOIP(n)  { n, true, false, 1500 }
#define N(a)     (sizeof(a) / sizeof((a)[0]))

static void test_match_prefix_and_lists(void)
{
    CHECK(ifname_match("eth", "eth0"));
    CHECK(ifname_match("eth", "eth10"));
    CHECK(!ifname_match("eth", "ens5"));
    CHECK(!ifname_match("eth0", "eth"));                  /* the name must be at least as long */
    CHECK(ifname_match("eth,ib", "ib0"));
    CHECK(ifname_match(",,eth,", "eth3"));                /* empty items are skipped */
    CHECK(ifname_match("eth0:1234", "eth0"));             /* a :port suffix is ignored */
    CHECK(!ifname_match("eth0:1234", "eth1"));
    CHECK(!ifname_match("Eth", "eth0"));                  /* case matters, as in NCCL */
}

static void test_match_exclude_and_exact(void)
{
    CHECK(!ifname_match("^docker,lo", "docker0"));
    CHECK(!ifname_match("^docker,lo", "lo"));
    CHECK(ifname_match("^docker,lo", "eth0"));
    CHECK(ifname_match("=eth0", "eth0"));
    CHECK(!ifname_match("=eth0", "eth01"));
    CHECK(!ifname_match("=eth", "eth0"));
    CHECK(!ifname_match("^=docker0", "docker0"));
    CHECK(ifname_match("^=docker0", "docker01"));
    CHECK(ifname_match("=^eth", "^eth"));                 /* '^' only counts first */
    CHECK(!ifname_match("=^eth", "eth0"));
    CHECK(!ifname_match("^=", "eth0"));                   /* excludes an empty list: all */
    CHECK(ifname_match("==eth0", "=eth0"));
}

static void test_match_unset_and_short(void)
{
    /* NCCL ignores values of one character: they behave as unset (the default rule). */
    CHECK(ifname_match(NULL, "eth0"));
    CHECK(!ifname_match(NULL, "lo"));
    CHECK(!ifname_match(NULL, "docker0"));
    CHECK(!ifname_match(NULL, "virbr0"));
    CHECK(ifname_match("", "eth0"));
    CHECK(ifname_match("l", "eth0"));
    CHECK(!ifname_match("l", "lo"));
    CHECK(ifname_match("^", "eth0"));
    CHECK(!ifname_match("eth", NULL));
}

static void test_match_only_sixteen_items(void)
{
    const char *spec = "a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,eth";
    CHECK(ifname_match(spec, "a16"));
    CHECK(!ifname_match(spec, "eth0"));                   /* NCCL's MAX_IFS is 16 */
}

static size_t sel(const char *spec, const struct iface *ifs, size_t n, const char **names)
{
    size_t idx[16];
    size_t k = ifname_select(spec, ifs, n, idx);
    for (size_t i = 0; i < k; i++) names[i] = ifs[idx[i]].name;
    return k;
}

static void test_select_default_rule(void)
{
    const char *got[16];
    struct iface mixed[] = { UP4("lo"), UP4("docker0"), UP4("eth0"), DOWN("eth1"), NOIP("ib0"),
                             UP4("ens5"), UP4("virbr0") };
    CHECK_INT(sel(NULL, mixed, N(mixed), got), 2);
    CHECK_STR(got[0], "eth0");
    CHECK_STR(got[1], "ens5");

    mixed[4].has_ipv4 = true;                             /* IPoIB up: NCCL takes ib only */
    CHECK_INT(sel(NULL, mixed, N(mixed), got), 1);
    CHECK_STR(got[0], "ib0");

    struct iface local[] = { UP4("lo"), UP4("docker0"), DOWN("eth0") };
    CHECK_INT(sel(NULL, local, N(local), got), 1);
    CHECK_STR(got[0], "docker0");                         /* docker before lo */
    CHECK_INT(sel(NULL, local, 1, got), 1);
    CHECK_STR(got[0], "lo");                              /* lo only when nothing else */
    struct iface virt[] = { UP4("virbr0"), DOWN("lo") };
    CHECK_INT(sel(NULL, virt, N(virt), got), 1);
    CHECK_STR(got[0], "virbr0");
    struct iface none[] = { DOWN("eth0"), NOIP("eth1") };
    CHECK_INT(sel(NULL, none, N(none), got), 0);
    CHECK_INT(sel("e", mixed, N(mixed), got), 1);          /* one character: as unset */
}

static void test_select_with_spec(void)
{
    const char *got[16];
    struct iface ifs[] = { UP4("lo"), UP4("eth0"), DOWN("eth1"), UP4("eth10"), NOIP("ib0"),
                           UP4("docker0") };
    CHECK_INT(sel("eth", ifs, N(ifs), got), 2);           /* eth1 is down */
    CHECK_STR(got[0], "eth0");
    CHECK_STR(got[1], "eth10");
    CHECK_INT(sel("=eth1", ifs, N(ifs), got), 0);         /* exists but down: nothing */
    CHECK_INT(sel("ib", ifs, N(ifs), got), 0);            /* no IPv4: not usable */
    CHECK_INT(sel("=eth", ifs, N(ifs), got), 0);
    CHECK_INT(sel("lo", ifs, N(ifs), got), 1);            /* asked for: no fallback logic */
    CHECK_INT(sel("^eth,lo", ifs, N(ifs), got), 1);
    CHECK_STR(got[0], "docker0");
    CHECK_INT(sel("^=eth0", ifs, N(ifs), got), 3);        /* lo, eth10, docker0 */
}

/* A suggestion must select a usable interface on every node and, when every node has a
 * real interface, never lo or docker*. */
static void check_suggestion_works(const struct iface *const *nodes, const size_t *counts,
                                   size_t n, const char *s)
{
    for (size_t j = 0; s && j < n; j++) {
        size_t idx[16];
        size_t k = ifname_select(s, nodes[j], counts[j], idx);
        CHECK(k > 0);
        for (size_t i = 0; i < k; i++)
            CHECK(strncmp(nodes[j][idx[i]].name, "lo", 2) != 0 &&
                  strncmp(nodes[j][idx[i]].name, "docker", 6) != 0);
    }
}

static void expect_suggest(const struct iface *const *nodes, const size_t *counts, size_t n,
                           const char *want)
{
    char *s = ifname_suggest(nodes, counts, n);
    if (want) {
        CHECK_STR(s, want);
        if (strcmp(want, "lo") != 0) check_suggestion_works(nodes, counts, n, s);
    } else {
        CHECK(s == NULL);
    }
    free(s);
}

static void test_suggest(void)
{
    struct iface a[] = { UP4("lo"), UP4("docker0"), UP4("eth0") };
    struct iface b[] = { UP4("lo"), UP4("eth0"), UP4("eth1") };
    const struct iface *common[] = { a, b };
    size_t c_common[] = { N(a), N(b) };
    expect_suggest(common, c_common, 2, "eth0");

    struct iface c[] = { UP4("eth1"), UP4("eth10") };
    struct iface d[] = { UP4("eth1"), UP4("lo") };
    const struct iface *exact[] = { d, c };
    size_t c_exact[] = { N(d), N(c) };
    expect_suggest(exact, c_exact, 2, "=eth1");           /* eth1 alone would take eth10 */

    struct iface e[] = { UP4("lo"), UP4("eth0") };
    struct iface f[] = { UP4("lo"), UP4("eth1"), DOWN("eth0") };
    const struct iface *prefix[] = { e, f };
    size_t c_prefix[] = { N(e), N(f) };
    expect_suggest(prefix, c_prefix, 2, "eth");

    struct iface g[] = { UP4("enp1s0") };
    struct iface h[] = { UP4("enp2s0") };
    const struct iface *pfx2[] = { g, h };
    size_t c_pfx2[] = { 1, 1 };
    expect_suggest(pfx2, c_pfx2, 2, "enp");

    struct iface i[] = { UP4("eth0"), UP4("ib0") };
    struct iface k[] = { UP4("ib0"), UP4("eth0") };
    const struct iface *ib[] = { i, k };
    size_t c_ib[] = { 2, 2 };
    expect_suggest(ib, c_ib, 2, "ib0");                   /* ib first, as NCCL prefers it */

    struct iface l[] = { UP4("eth0") };
    struct iface m[] = { UP4("ib0") };
    const struct iface *list[] = { l, m, l };
    size_t c_list[] = { 1, 1, 1 };
    expect_suggest(list, c_list, 3, "eth0,ib0");

    /* A prefix that would also take docker0 somewhere is not offered. */
    struct iface o[] = { UP4("dock1"), UP4("docker0") };
    struct iface p[] = { UP4("dock2") };
    const struct iface *dock[] = { o, p };
    size_t c_dock[] = { 2, 1 };
    expect_suggest(dock, c_dock, 2, "dock1,dock2");

    struct iface lo[] = { UP4("lo"), DOWN("eth0") };
    const struct iface *only_lo[] = { lo, lo };
    size_t c_lo[] = { 2, 2 };
    expect_suggest(only_lo, c_lo, 2, "lo");

    struct iface dead[] = { DOWN("eth0"), NOIP("eth1") };
    const struct iface *broken[] = { a, dead };
    size_t c_broken[] = { N(a), N(dead) };
    expect_suggest(broken, c_broken, 2, NULL);
    expect_suggest(common, c_common, 0, NULL);
}

int main(void)
{
    RUN(test_match_prefix_and_lists);
    RUN(test_match_exclude_and_exact);
    RUN(test_match_unset_and_short);
    RUN(test_match_only_sixteen_items);
    RUN(test_select_default_rule);
    RUN(test_select_with_spec);
    RUN(test_suggest);
    return tap_done();
}
