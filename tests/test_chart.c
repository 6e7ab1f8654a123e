/* Unit tests for tui/chart.c: the loss chart's scaling (lowest and highest values on the
 * bottom and top rows, headroom), a constant series, NAN gaps that the line does not bridge,
 * log scale with values <= 0, aggregation of many points per column, and the min-max band. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "tap.h"

#define W 20
#define H 5

static uint8_t line[W * H], band[W * H];

static struct chart_out out_new(void)
{
    struct chart_out o;
    memset(&o, 0, sizeof o);
    o.line = line;
    o.band = band;
    return o;
}

/* Topmost / bottommost cell row with any dot of mask in cell column col (-1 none). */
static int top_row(const uint8_t *mask, int w, int h, int col)
{
    for (int r = 0; r < h; r++)
        if (mask[r * w + col]) return r;
    return -1;
}

static int bottom_row(const uint8_t *mask, int w, int h, int col)
{
    for (int r = h - 1; r >= 0; r--)
        if (mask[r * w + col]) return r;
    return -1;
}

static int dots_in_column(const uint8_t *mask, int w, int h, int col)
{
    int n = 0;
    for (int r = 0; r < h; r++) n += __builtin_popcount(mask[r * w + col]);
    return n;
}

static void test_braille_bits(void)
{
    char buf[4];
    CHECK_STR(chart_braille_utf8(0, buf), "\u2800");
    CHECK_STR(chart_braille_utf8(0xff, buf), "\u28ff");
    CHECK_INT(chart_dot_bit(0, 3), 0x40);   /* dot 7 */
    CHECK_INT(chart_dot_bit(1, 3), 0x80);   /* dot 8 */
    CHECK_INT(chart_dot_bit(1, 0), 0x08);   /* dot 4 */
    CHECK_INT(chart_dot_bit(2, 0), 0);
}

static void test_falling_loss_scales_to_edges(void)
{
    double x[10], m[10];
    for (int i = 0; i < 10; i++) x[i] = i * 10, m[i] = 10.0 - i;   /* 10 .. 1 */
    struct chart_in in = { .x = x, .mean = m, .n = 10, .w = W, .h = H };
    struct chart_out o = out_new();
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK(!o.empty);
    CHECK_INT(o.points_used, 10);
    /* the first (highest) point is in the top row at the left edge, the last (lowest) in the
     * bottom row at the right edge */
    CHECK_INT(top_row(line, W, H, 0), 0);
    CHECK(line[0 * W + 0] & chart_dot_bit(0, 0));
    CHECK_INT(bottom_row(line, W, H, W - 1), H - 1);
    CHECK(line[(H - 1) * W + W - 1] & chart_dot_bit(1, 3));
    /* headroom: the axis goes a little beyond the data, not a lot */
    CHECK(o.y_max > 10 && o.y_max < 10.9);
    CHECK(o.y_min < 1 && o.y_min > 0.1);
    CHECK_NEAR(o.x_min, 0, 0);
    CHECK_NEAR(o.x_max, 90, 0);
    CHECK_STR(o.x_right, "90");
    /* a continuous line: every dot column has a dot */
    for (int c = 0; c < W; c++) CHECK(dots_in_column(line, W, H, c) >= 2);
    /* row values decrease downwards */
    CHECK(chart_row_value(&o, H, 0) > chart_row_value(&o, H, H - 1));
}

static void test_constant_series_in_middle(void)
{
    double x[3] = { 1, 2, 3 }, m[3] = { 2.5, 2.5, 2.5 };
    struct chart_in in = { .x = x, .mean = m, .n = 3, .w = W, .h = H };
    struct chart_out o = out_new();
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK_INT(top_row(line, W, H, 0), H / 2);
    CHECK_INT(top_row(line, W, H, W - 1), H / 2);
    CHECK(o.y_min < 2.5 && o.y_max > 2.5);
    CHECK(isfinite(o.y_min) && isfinite(o.y_max));
    /* zero constant too (no division by a zero range) */
    double z[3] = { 0, 0, 0 };
    in.mean = z;
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK_INT(top_row(line, W, H, W / 2), H / 2);
}

static void test_nan_gap_not_bridged(void)
{
    /* points 0..19 with a gap in 8..11: the line jumps there, no dots in the gap columns */
    double x[20], m[20];
    for (int i = 0; i < 20; i++) x[i] = i, m[i] = (i >= 8 && i <= 11) ? NAN : 5.0 + (i % 2);
    struct chart_in in = { .x = x, .mean = m, .n = 20, .w = 10, .h = 4 };
    uint8_t l2[40], b2[40];
    struct chart_out o = { .line = l2, .band = b2 };
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK_INT(o.points_used, 16);
    /* 20 dot columns over x 0..19: one point per dot column; x 9,10 are cells 4 and 5 */
    int gap_dots = 0;
    for (int r = 0; r < 4; r++)
        for (int dx = 9; dx <= 10; dx++)
            for (int dy = 0; dy < 4; dy++)
                if (l2[r * 10 + dx / 2] & chart_dot_bit(dx & 1, dy)) gap_dots++;
    CHECK_INT(gap_dots, 0);
    CHECK(dots_in_column(l2, 10, 4, 3) > 0);
    CHECK(dots_in_column(l2, 10, 4, 6) > 0);
}

static void test_sparse_points_joined(void)
{
    /* two points far apart: interpolated, a dot in every column between them */
    double x[2] = { 0, 100 }, m[2] = { 1, 2 };
    struct chart_in in = { .x = x, .mean = m, .n = 2, .w = W, .h = H };
    struct chart_out o = out_new();
    CHECK_INT(chart_compute(&in, &o), 0);
    for (int c = 0; c < W; c++) CHECK(dots_in_column(line, W, H, c) >= 1);
}

static void test_log_scale(void)
{
    double x[4] = { 0, 1, 2, 3 }, m[4] = { 1000, 100, 10, 1 };
    struct chart_in in = { .x = x, .mean = m, .n = 4, .w = 4, .h = 3, .log_scale = true };
    uint8_t l2[12], b2[12];
    struct chart_out o = { .line = l2, .band = b2 };
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK(o.log_scale);
    CHECK(!o.clamped);
    CHECK(o.y_max > 1000 && o.y_max < 1600);
    CHECK(o.y_min < 1 && o.y_min > 0.6);
    /* evenly spaced decades: dot rows 0, ~4, ~7, 11 of 12 — the middle values in the middle
     * cell row, which a linear scale would squash into the bottom row */
    CHECK_INT(top_row(l2, 4, 3, 0), 0);
    CHECK_INT(bottom_row(l2, 4, 3, 3), 2);
    int mid_cells = 0;
    for (int c = 0; c < 4; c++) mid_cells += l2[1 * 4 + c] != 0;
    CHECK(mid_cells >= 2);
    CHECK_NEAR(chart_row_value(&o, 3, 1), 31.6, 10);
    in.log_scale = false;
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK(l2[1 * 4 + 2] == 0 && l2[1 * 4 + 3] == 0);

    /* values <= 0 are clamped to the smallest positive one, and it says so */
    double m2[4] = { 2, 0, -1, 0.5 };
    in.mean = m2;
    in.log_scale = true;
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK(o.clamped);
    CHECK(isfinite(o.y_min) && o.y_min > 0 && o.y_min < 0.5);
    CHECK_INT(bottom_row(l2, 4, 3, 1), 2);
    /* nothing positive at all: still finite, still drawn */
    double m3[2] = { 0, -3 };
    in.mean = m3;
    in.n = 2;
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK(o.clamped && isfinite(o.y_min) && isfinite(o.y_max));
}

static void test_aggregation_many_points(void)
{
    /* 10000 points over 20 cells (40 dot columns): each column aggregates 250 points; a spike
     * of 100 at one point raises the band (max of maxes), while the mean line stays low */
    size_t n = 10000;
    double *x = malloc(n * sizeof *x), *m = malloc(n * sizeof *m);
    double *lo = malloc(n * sizeof *lo), *hi = malloc(n * sizeof *hi);
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)i;
        m[i] = 1.0;
        lo[i] = 0.5;
        hi[i] = i == 5000 ? 100.0 : 1.5;
    }
    struct chart_in in = { .x = x, .mean = m, .lo = lo, .hi = hi, .n = n, .w = W, .h = H };
    struct chart_out o = out_new();
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK_INT(o.points_used, n);
    CHECK(o.y_max >= 100);
    int spike_col = (int)(5000.0 / 9999 * 39 + 0.5) / 2;
    CHECK_INT(top_row(band, W, H, spike_col), 0);
    CHECK(top_row(band, W, H, 0) > 0);
    /* mean line: one flat row near the bottom everywhere */
    for (int c = 0; c < W; c++) CHECK_INT(top_row(line, W, H, c), H - 1);
    free(x), free(m), free(lo), free(hi);
}

static void test_band_covers_min_max(void)
{
    double x[5] = { 0, 1, 2, 3, 4 }, m[5] = { 5, 5, 5, 5, 5 };
    double lo[5] = { 1, 1, 1, 1, 1 }, hi[5] = { 9, 9, 9, 9, 9 };
    struct chart_in in = { .x = x, .mean = m, .lo = lo, .hi = hi, .n = 5, .w = 5, .h = 4 };
    uint8_t l2[20], b2[20];
    struct chart_out o = { .line = l2, .band = b2 };
    CHECK_INT(chart_compute(&in, &o), 0);
    for (int c = 0; c < 5; c++) {
        CHECK_INT(top_row(b2, 5, 4, c), 0);
        CHECK_INT(bottom_row(b2, 5, 4, c), 3);
    }
    /* the mean is inside the band, near the middle */
    CHECK(top_row(l2, 5, 4, 2) == 1 || top_row(l2, 5, 4, 2) == 2);
    /* NULL lo/hi: the band is just the line */
    in.lo = in.hi = NULL;
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK(memcmp(l2, b2, 20) == 0);
}

static void test_empty_and_invalid(void)
{
    double x[2] = { 0, 1 }, m[2] = { NAN, NAN };
    struct chart_in in = { .x = x, .mean = m, .n = 2, .w = W, .h = H };
    struct chart_out o = out_new();
    memset(line, 0xff, sizeof line);
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK(o.empty);
    for (int i = 0; i < W * H; i++) CHECK_INT(line[i], 0);
    in.n = 0;
    CHECK_INT(chart_compute(&in, &o), 0);
    CHECK(o.empty);
    in.w = 0;
    CHECK_INT(chart_compute(&in, &o), -1);
    in.w = 1, in.h = 1, in.n = 2;
    CHECK_INT(chart_compute(&in, &o), 0);   /* tiny chart still works */
    CHECK_INT(chart_compute(NULL, &o), -1);
}

int main(void)
{
    RUN(test_braille_bits);
    RUN(test_falling_loss_scales_to_edges);
    RUN(test_constant_series_in_middle);
    RUN(test_nan_gap_not_bridged);
    RUN(test_sparse_points_joined);
    RUN(test_log_scale);
    RUN(test_aggregation_many_points);
    RUN(test_band_covers_min_max);
    RUN(test_empty_and_invalid);
    return tap_done();
}
