/* Minimal TAP-style unit test support. Each test binary prints "ok N - name" or
 * "not ok N - name" per test, with the failing checks (file:line and expression) as
 * "# ..." comments; tests/run.sh counts those lines for the suite's one closing line. */
#ifndef DDPTOP_TAP_H
#define DDPTOP_TAP_H

#include <stdio.h>
#include <string.h>
#include <math.h>

static int tap_count, tap_failed_tests, tap_cur_failed;

#define CHECK(cond) do { if (!(cond)) { tap_cur_failed++; \
    printf("#   %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_INT(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); if (a_ != b_) { \
    tap_cur_failed++; printf("#   %s:%d: %s == %lld, expected %s == %lld\n", \
    __FILE__, __LINE__, #a, a_, #b, b_); } } while (0)
#define CHECK_STR(a, b) do { const char *a_ = (a), *b_ = (b); \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) { tap_cur_failed++; \
    printf("#   %s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
           a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); \
    if (!(fabs(a_ - b_) <= (tol))) { tap_cur_failed++; \
    printf("#   %s:%d: %s = %g, expected %g within %g\n", __FILE__, __LINE__, #a, a_, b_, \
           (double)(tol)); } } while (0)

static inline void tap_run(const char *name, void (*fn)(void))
{
    tap_cur_failed = 0;
    fn();
    tap_count++;
    if (tap_cur_failed) tap_failed_tests++;
    printf("%s %d - %s\n", tap_cur_failed ? "not ok" : "ok", tap_count, name);
    fflush(stdout);
}

static inline void tap_skip(const char *name, const char *why)
{
    tap_count++;
    printf("ok %d - %s # SKIP %s\n", tap_count, name, why);
    fflush(stdout);
}

#define RUN(fn) tap_run(#fn, fn)

static inline int tap_done(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed_tests ? 1 : 0;
}

#endif
