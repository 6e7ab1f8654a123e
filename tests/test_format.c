/* Unit tests for tui/format.c: the short units the dashboard's columns show (durations, ages,
 * rates, losses, steps, step times, CPU), the rank state glyphs and their ASCII fallbacks,
 * display-width aware measuring and cutting of UTF-8 (wide CJK, combining marks, invalid
 * bytes) so that columns stay aligned, the runtime's step line in words and wrapping. */
#include <locale.h>
#include <math.h>
#include <string.h>

#include "format.h"
#include "tap.h"

static char b[64];

static void test_durations_and_ages(void)
{
    CHECK_STR(format_duration(b, sizeof b, 850), "850ms");
    CHECK_STR(format_duration(b, sizeof b, 0), "0ms");
    CHECK_STR(format_duration(b, sizeof b, 45000), "45s");
    CHECK_STR(format_duration(b, sizeof b, 187000), "3m07s");
    CHECK_STR(format_duration(b, sizeof b, 3720000), "1h02m");
    CHECK_STR(format_duration(b, sizeof b, 97200000LL + 3600000), "1d04h");
    CHECK_STR(format_duration(b, sizeof b, -1), "-");
    CHECK_STR(format_age(b, sizeof b, 999), "now");
    CHECK_STR(format_age(b, sizeof b, 45500), "45s");
    CHECK_STR(format_age(b, sizeof b, 190000), "3m");
    CHECK_STR(format_age(b, sizeof b, 7200000), "2h");
    CHECK_STR(format_age(b, sizeof b, 4 * 86400000LL), "4d");
    CHECK_STR(format_age(b, sizeof b, -5), "-");
}

static void test_numbers(void)
{
    CHECK_STR(format_si(b, sizeof b, 950), "950");
    CHECK_STR(format_si(b, sizeof b, 0), "0");
    CHECK_STR(format_si(b, sizeof b, 2.5), "2.5");
    CHECK_STR(format_si(b, sizeof b, 1234), "1.2k");
    CHECK_STR(format_si(b, sizeof b, 34500), "34.5k");
    CHECK_STR(format_si(b, sizeof b, 345000), "345k");
    CHECK_STR(format_si(b, sizeof b, 999.7), "1.0k");   /* rounds up a unit, never "1000" */
    CHECK_STR(format_si(b, sizeof b, 3.4e6), "3.4M");
    CHECK_STR(format_si(b, sizeof b, 12e9), "12.0G");
    CHECK_STR(format_si(b, sizeof b, -1500), "-1.5k");
    CHECK_STR(format_si(b, sizeof b, NAN), "-");
    CHECK_STR(format_si(b, sizeof b, INFINITY), "-");
    CHECK_STR(format_loss(b, sizeof b, 2.34567), "2.346");
    CHECK_STR(format_loss(b, sizeof b, 0.0123456), "0.01235");
    CHECK_STR(format_loss(b, sizeof b, 1.23e-5), "1.23e-05");
    CHECK_STR(format_loss(b, sizeof b, 123456.0), "1.23e+05");
    CHECK_STR(format_loss(b, sizeof b, 0), "0");
    CHECK_STR(format_loss(b, sizeof b, NAN), "-");
    CHECK_STR(format_step(b, sizeof b, 0), "0");
    CHECK_STR(format_step(b, sizeof b, 999999), "999999");
    CHECK_STR(format_step(b, sizeof b, 1234567), "1.23M");
    CHECK_STR(format_step(b, sizeof b, 45600000), "45.6M");
    CHECK_STR(format_step(b, sizeof b, -1), "-");
    CHECK_STR(format_step_ms(b, sizeof b, 85.2), "85ms");
    CHECK_STR(format_step_ms(b, sizeof b, 4.25), "4.2ms");
    CHECK_STR(format_step_ms(b, sizeof b, 1250), "1.25s");
    CHECK_STR(format_step_ms(b, sizeof b, 125000), "2m05s");
    CHECK_STR(format_step_ms(b, sizeof b, NAN), "-");
    CHECK_STR(format_pct(b, sizeof b, 97.4), "97%");
    CHECK_STR(format_pct(b, sizeof b, 4.54), "4.5%");
    CHECK_STR(format_pct(b, sizeof b, 1234), "1234%");
    CHECK_STR(format_pct(b, sizeof b, -1), "-");
    /* a short buffer is never overrun */
    char tiny[4];
    CHECK_STR(format_duration(tiny, sizeof tiny, 3720000), "1h0");
}

static void test_rank_glyphs(void)
{
    enum rank_state all[] = { RANK_PENDING, RANK_RUNNING, RANK_STALLED, RANK_EXITED,
                              RANK_FAILED, RANK_STOPPED, RANK_LOST };
    CHECK_STR(format_rank_glyph(RANK_RUNNING, false), "\u25cf");
    CHECK_STR(format_rank_glyph(RANK_FAILED, false), "\u2717");
    CHECK_STR(format_rank_glyph(RANK_EXITED, false), "\u2713");
    CHECK_STR(format_rank_glyph(RANK_LOST, false), "?");
    for (size_t i = 0; i < 7; i++) {
        const char *u = format_rank_glyph(all[i], false), *a = format_rank_glyph(all[i], true);
        CHECK_INT(format_width(u, strlen(u)), 1);   /* one column: the grid relies on it */
        CHECK_INT(strlen(a), 1);
        for (size_t k = i + 1; k < 7; k++) {   /* every state looks different */
            CHECK(strcmp(u, format_rank_glyph(all[k], false)) != 0);
            CHECK(strcmp(a, format_rank_glyph(all[k], true)) != 0);
        }
    }
}

static void test_width_and_truncation(void)
{
    const char *cjk = "\u4e2d\u6587ab";        /* two wide characters, two narrow */
    const char *comb = "e\u0301x";              /* e + combining acute: 2 columns */
    CHECK_INT(format_width("hello", 5), 5);
    CHECK_INT(format_width(cjk, strlen(cjk)), 6);
    CHECK_INT(format_width(comb, strlen(comb)), 2);
    CHECK_INT(format_width("a\xff\xfe" "b", 4), 4);   /* invalid bytes: one cell each */
    CHECK_INT(format_width("\xe4\xb8", 2), 2);        /* a cut character: two bad bytes */
    int cols;
    /* a wide character that would straddle the limit is left out entirely */
    CHECK_INT(format_fit(cjk, strlen(cjk), 3, &cols), 3);
    CHECK_INT(cols, 2);
    CHECK_STR(format_truncate(b, sizeof b, "gpu-node-0042", 8, false), "gpu-nod\u2026");
    CHECK_STR(format_truncate(b, sizeof b, "gpu-node-0042", 8, true), "gpu-nod~");
    CHECK_STR(format_truncate(b, sizeof b, "short", 8, false), "short");
    CHECK_STR(format_truncate(b, sizeof b, cjk, 4, false), "\u4e2d\u2026");
    CHECK_INT(format_width(b, strlen(b)), 2 + 1);
    CHECK_STR(format_truncate(b, sizeof b, "abc", 0, false), "");
    CHECK_STR(format_truncate(b, sizeof b, "abc", 1, false), "\u2026");
    /* the buffer, not the columns, is the limit: cut on a character boundary */
    char small[6];
    format_truncate(small, sizeof small, "\u4e2d\u6587\u4e2d", 20, false);
    CHECK_STR(small, "\u4e2d");
    CHECK_STR(format_pad(b, sizeof b, "ab", 5, false, false), "ab   ");
    CHECK_STR(format_pad(b, sizeof b, "ab", 5, true, false), "   ab");
    CHECK_STR(format_pad(b, sizeof b, cjk, 5, false, true), "\u4e2d\u6587~");
    CHECK_STR(format_pad(b, sizeof b, "\u4e2dx", 4, false, false), "\u4e2dx ");
}

/* Issue 12: the runtime's step line in words in the log pane. */
static void test_step_line(void)
{
    char w[128];
    struct metrics_sample m = { .has_step = true, .has_loss = true, .has_step_ms = true,
                                .has_tokens = true, .step = 12, .loss = 4.87, .step_ms = 100.0,
                                .tokens_per_s = 12345 };
    CHECK_STR(format_step_line(w, sizeof w, &m), "step 12  loss 4.87  100.0 ms/step  12.3k tok/s");
    m.has_tokens = false;
    m.loss = 2.34567;
    CHECK_STR(format_step_line(w, sizeof w, &m), "step 12  loss 2.346  100.0 ms/step");
    m.has_step_ms = false;
    m.loss = INFINITY;    /* JSON null: a diverged loss */
    CHECK_STR(format_step_line(w, sizeof w, &m), "step 12  loss non-finite");
    m = (struct metrics_sample){ .has_loss = true, .loss = 0.5, .step_ms = NAN };
    CHECK_STR(format_step_line(w, sizeof w, &m), "loss 0.5");
    char tiny[8];
    CHECK_STR(format_step_line(tiny, sizeof tiny, &(struct metrics_sample){ .has_step = true,
              .step = 123456789 }), "step 12");
}

/* Issue 12: long events wrap at spaces, or inside a word longer than the row. */
static void test_wrap(void)
{
    const char *s = "rank 3 on gpu-node-17 exited with code 1";
    CHECK_INT(format_wrap(s, strlen(s), 100), strlen(s));          /* fits */
    CHECK_INT(format_wrap(s, strlen(s), 12), 10);                  /* "rank 3 on " */
    CHECK_INT(format_wrap(s, strlen(s), 8), 7);                    /* "rank 3 " */
    CHECK_INT(format_wrap(s, strlen(s), 6), 7);                    /* "rank 3" and its space */
    CHECK_INT(format_wrap(s + 10, strlen(s) - 10, 5), 5);          /* "gpu-n": a long word */
    CHECK_INT(format_wrap("", 0, 5), 0);
    const char *cjk = "\u4e2d\u6587";
    CHECK_INT(format_wrap(cjk, strlen(cjk), 1), 3);                /* wider than the row: alone */
    CHECK_INT(format_wrap(cjk, strlen(cjk), 3), 3);
    /* every piece fits and the pieces give back the text */
    const char *t = "attempt 0: launching 2 ranks on 1 node (run tui, logs in "
                    "/tmp/ddptop-it.Qx81/logs/tui/attempt-0)";
    size_t off = 0, len = strlen(t);
    int rows = 0;
    while (off < len) {
        size_t n = format_wrap(t + off, len - off, 17);
        CHECK(n > 0);
        CHECK(format_width(t + off, n) <= 17 || (n && t[off + n - 1] == ' ' &&
                                                format_width(t + off, n - 1) <= 17));
        off += n;
        rows++;
    }
    CHECK_INT(off, len);
    CHECK(rows >= 6 && rows <= 9);
}

int main(void)
{
    /* widths of non-ASCII characters come from the locale, as on a user's terminal */
    if (!setlocale(LC_CTYPE, "C.UTF-8")) setlocale(LC_CTYPE, "");
    RUN(test_durations_and_ages);
    RUN(test_numbers);
    RUN(test_rank_glyphs);
    RUN(test_width_and_truncation);
    RUN(test_step_line);
    RUN(test_wrap);
    return tap_done();
}
