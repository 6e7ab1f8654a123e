/* Unit tests for wire/json_num.c: numbers from the wire become integers only when they are
 * whole and in range; NaN, infinities, fractions, 1e300 and the edges of long long are refused
 * without being converted (built with -fsanitize=float-cast-overflow by `make asan`, a
 * conversion of any of them would abort the test). */
#include <limits.h>
#include <math.h>

#include "wire/json_num.h"
#include "wire/step_line.h"
#include "tap.h"

static void test_whole_in(void)
{
    long long x = 7;
    CHECK(json_whole_in(0, 0, 10, &x) && x == 0);
    CHECK(json_whole_in(-0.0, 0, 10, &x) && x == 0);
    CHECK(json_whole_in(10, 0, 10, &x) && x == 10);
    x = 7;
    CHECK(!json_whole_in(11, 0, 10, &x) && x == 7);
    CHECK(!json_whole_in(-1, 0, 10, &x));
    CHECK(!json_whole_in(2.5, 0, 10, &x));
    CHECK(!json_whole_in(NAN, 0, 10, &x));
    CHECK(!json_whole_in(INFINITY, LLONG_MIN, LLONG_MAX, &x));
    CHECK(!json_whole_in(-INFINITY, LLONG_MIN, LLONG_MAX, &x));
    CHECK(!json_whole_in(1e300, LLONG_MIN, LLONG_MAX, &x));
    CHECK(!json_whole_in(-1e300, LLONG_MIN, LLONG_MAX, &x));
    CHECK(!json_whole_in(0x1p63, LLONG_MIN, LLONG_MAX, &x));          /* LLONG_MAX + 1 */
    CHECK(json_whole_in(-0x1p63, LLONG_MIN, LLONG_MAX, &x) && x == LLONG_MIN);
    CHECK(json_whole_in(0x1p62, 0, LLONG_MAX, &x) && x == (1LL << 62));
    /* hi = LONG_MAX: (double)LONG_MAX rounds up to 2^63, which must not pass */
    CHECK(!json_whole_in((double)LONG_MAX, 0, LONG_MAX, &x));
    CHECK(json_whole_in((double)JSON_EXACT_MAX, 0, JSON_EXACT_MAX, &x) && x == JSON_EXACT_MAX);
    CHECK(!json_whole_in(2 * (double)JSON_EXACT_MAX, 0, JSON_EXACT_MAX, &x));
}

static void test_items(void)
{
    cJSON *a = cJSON_Parse("[1, 2.5, 1e300, -1e300, 1e999, \"3\", null, -2147483649, 2147483647, 65536]");
    int i = -5;
    long long x;
    double d;
    char buf[32];
    CHECK(a != NULL);
    CHECK(json_int_in_i(cJSON_GetArrayItem(a, 0), 0, 5, &i) && i == 1);
    i = -5;
    for (int k = 1; k <= 7; k++) CHECK(!json_int_in_i(cJSON_GetArrayItem(a, k), INT_MIN, INT_MAX, &i));
    CHECK(i == -5);
    CHECK(!json_int_in_i(cJSON_GetArrayItem(a, 7), INT_MIN, INT_MAX, &i));   /* below INT_MIN */
    CHECK(json_int_in_i(cJSON_GetArrayItem(a, 8), 0, INT_MAX, &i) && i == INT_MAX);
    CHECK(!json_int_in_i(cJSON_GetArrayItem(a, 9), 1, 65535, &i));          /* a port */
    CHECK(json_int_in(cJSON_GetArrayItem(a, 7), LLONG_MIN, 0, &x) && x == -2147483649LL);
    CHECK(!json_int_in(NULL, 0, 1, &x));
    CHECK(json_real_in(cJSON_GetArrayItem(a, 1), 0, 100, &d) && d == 2.5);
    CHECK(!json_real_in(cJSON_GetArrayItem(a, 2), 0, 1e6, &d));
    CHECK(!json_real_in(cJSON_GetArrayItem(a, 4), 0, INFINITY, &d));        /* 1e999 reads as inf */
    CHECK_STR(json_num_text(cJSON_GetArrayItem(a, 2), buf, sizeof buf), "1e+300");
    CHECK_STR(json_num_text(cJSON_GetArrayItem(a, 5), buf, sizeof buf), "not a number");
    cJSON_Delete(a);
}

/* The runtime's step line comes from the training program: a step of 1e300 is no step. */
static void test_step_line(void)
{
    static const char *const bad[] = {
        "{\"event\":\"step\",\"step\":1e300,\"loss\":1.5}",
        "{\"event\":\"step\",\"step\":-1e300,\"loss\":1.5}",
        "{\"event\":\"step\",\"step\":2.5,\"loss\":1.5}",
        "{\"event\":\"step\",\"step\":1e300,\"loss\":1.5,\"x\":[1]}",   /* through cJSON */
    };
    struct step_line sl;
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        CHECK(step_line_parse(bad[k], strlen(bad[k]), &sl));   /* the loss is still taken */
        CHECK(!sl.has_step && sl.step == 0);
        CHECK_NEAR(sl.loss, 1.5, 1e-12);
    }
    const char *ok = "{\"event\":\"step\",\"step\":42,\"loss\":1.5}";
    CHECK(step_line_parse(ok, strlen(ok), &sl) && sl.has_step && sl.step == 42);
}

int main(void)
{
    RUN(test_whole_in);
    RUN(test_items);
    RUN(test_step_line);
    return tap_done();
}
