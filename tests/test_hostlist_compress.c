/* Unit tests for hostlist_compress (names -> "n[001-255,257],gpu[1-4]", launcher/hosts/
 * hostlist_compress.c) and hostlist_expand_list: the forms a report shows, zero padding kept,
 * and the round trip on random sets (the same set of names back, whatever the padding). */
#include <stdbool.h>
#include <stdlib.h>

#include "hosts/hostlist.h"
#include "util/util.h"
#include "tap.h"

static void check_compress(const char *const *names, size_t n, const char *want)
{
    char *got = hostlist_compress(names, n);
    CHECK_STR(got, want);
    free(got);
}

#define COMPRESS(want, ...) do { const char *v_[] = {__VA_ARGS__}; \
    check_compress(v_, sizeof v_ / sizeof *v_, want); } while (0)

static void test_compress_forms(void)
{
    check_compress(NULL, 0, "");
    COMPRESS("n1", "n1");
    COMPRESS("n[1-3]", "n1", "n2", "n3");
    COMPRESS("n[1-3]", "n3", "n1", "n2", "n2");                /* any order, duplicates once */
    COMPRESS("n[001-003,007]", "n001", "n002", "n003", "n007");
    COMPRESS("n[8-11]", "n8", "n9", "n10", "n11");            /* unpadded runs across widths */
    COMPRESS("n[098-102]", "n098", "n099", "n100", "n101", "n102");
    COMPRESS("n[1,01]", "n1", "n01");                         /* two names, both kept */
    COMPRESS("n[01-02],gpu[1-4]", "n01", "gpu1", "n02", "gpu2", "gpu3", "gpu4");
    COMPRESS("n[1-2]-ib,n3", "n1-ib", "n2-ib", "n3");          /* text after the number */
    COMPRESS("login,n[1-2]", "login", "n1", "n2", "login");
    COMPRESS("10.0.0.[1-3]", "10.0.0.2", "10.0.0.1", "10.0.0.3");
    COMPRESS("r1n[1-2],r2n1", "r1n1", "r1n2", "r2n1");
    COMPRESS("n1234567890,n[1-2]", "n1234567890", "n1", "n2"); /* too long for a range */
}

static void test_compress_255_of_256(void)
{
    char *names[256];
    for (int i = 0; i < 256; i++) names[i] = xasprintf("n%03d", i + 1);
    char *got = hostlist_compress((const char *const *)names, 256);
    CHECK_STR(got, "n[001-256]");
    free(got);
    /* n256 the odd one out: the others are "n[001-255]" */
    got = hostlist_compress((const char *const *)names, 255);
    CHECK_STR(got, "n[001-255]");
    free(got);
    free(names[1]);
    names[1] = xstrdup("n257");
    got = hostlist_compress((const char *const *)names, 256);
    CHECK_STR(got, "n[001,003-257]");
    free(got);
    for (int i = 0; i < 256; i++) free(names[i]);
}

static void test_expand_list(void)
{
    char **names, err[256];
    int n = hostlist_expand_list("n[1-2],gpu[01-02],login", &names, err, sizeof err);
    CHECK_INT(n, 5);
    if (n == 5) {
        CHECK_STR(names[0], "n1");
        CHECK_STR(names[1], "n2");
        CHECK_STR(names[2], "gpu01");
        CHECK_STR(names[3], "gpu02");
        CHECK_STR(names[4], "login");
        hostlist_names_free(names, n);
    }
    CHECK_INT(hostlist_expand_list("n[1-2", &names, err, sizeof err), -1);
    CHECK(strstr(err, "unterminated bracket") != NULL);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, duplicates removed, in place: the set. */
static size_t as_set(char **v, size_t n)
{
    size_t k = 0;
    qsort(v, n, sizeof *v, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (k && strcmp(v[k - 1], v[i]) == 0) free(v[i]);
        else v[k++] = v[i];
    }
    return k;
}

/* Random names from a few prefixes and suffixes, numbers padded or not, some duplicates and
 * some without a number: compress then expand gives the same set. */
static void test_round_trip_random(void)
{
    static const char *const pre[] = {"n", "gpu", "a1b", "node-", "x"};
    static const char *const suf[] = {"", "-ib", ".local", "z"};
    unsigned seed = 12345;
    int bad = 0;
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rand_r(&seed) % 200) + 1;
        char **in = xcalloc(n, sizeof *in), **copy = xcalloc(n, sizeof *copy), **out;
        for (size_t i = 0; i < n; i++) {
            int p = rand_r(&seed) % 5, s = rand_r(&seed) % 4, style = rand_r(&seed) % 6;
            unsigned v = (unsigned)(rand_r(&seed) % (style == 5 ? 100000 : 300));
            if (style == 0) in[i] = xasprintf("%s%s", pre[p], suf[s]);        /* no number */
            else if (style <= 2) in[i] = xasprintf("%s%u%s", pre[p], v, suf[s]);
            else in[i] = xasprintf("%s%0*u%s", pre[p], style, v, suf[s]);    /* padded 3, 4, 5 */
            copy[i] = xstrdup(in[i]);
        }
        char *list = hostlist_compress((const char *const *)in, n), err[256] = "";
        int k = hostlist_expand_list(list, &out, err, sizeof err);
        size_t ns = as_set(copy, n), ks = k > 0 ? as_set(out, (size_t)k) : 0;
        bool same = k > 0 && ns == ks;
        for (size_t i = 0; same && i < ns; i++) same = strcmp(copy[i], out[i]) == 0;
        if (!same && bad++ < 3) printf("#   round %d: %s -> %d names (%zu expected) %s\n", round, list, k, ns, err);
        CHECK(same);
        free(list);
        for (size_t i = 0; i < n; i++) free(in[i]);
        for (size_t i = 0; i < ns; i++) free(copy[i]);
        if (k > 0) hostlist_names_free(out, (int)ks);
        free(in);
        free(copy);
    }
}

int main(void)
{
    RUN(test_compress_forms);
    RUN(test_compress_255_of_256);
    RUN(test_expand_list);
    RUN(test_round_trip_random);
    return tap_done();
}
