/* The loss chart's arithmetic (see chart.h): autoscaling with a little headroom, optional log
 * scale, aggregation of many points per dot column, lines joined across empty columns but
 * never across a NAN gap, and the min-max band. Output is dot masks only; drawing them is the
 * views' job, which keeps all of this testable without a terminal. */
#include "chart.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

/* Unicode braille: dots 1,2,3,7 down the left column, 4,5,6,8 down the right. */
static const uint8_t dot_bits[2][4] = { { 0x01, 0x02, 0x04, 0x40 }, { 0x08, 0x10, 0x20, 0x80 } };

uint8_t chart_dot_bit(int dx, int dy)
{
    if (dx < 0 || dx > 1 || dy < 0 || dy > 3) return 0;
    return dot_bits[dx][dy];
}

char *chart_braille_utf8(uint8_t mask, char buf[4])
{
    unsigned cp = CHART_BRAILLE_BASE + mask;
    buf[0] = (char)(0xe0 | (cp >> 12));
    buf[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    buf[2] = (char)(0x80 | (cp & 0x3f));
    buf[3] = '\0';
    return buf;
}

/* Per dot column: what the points that fell into it add up to. */
struct column {
    double sum, lo, hi;   /* transformed (log10 when log scale) */
    int count;
    int link;             /* the previous column the line joins to, or -1 (start or gap) */
};

struct scale {
    bool log;
    double floor_pos;     /* log scale: what values <= 0 are drawn as */
    double top, bot;      /* transformed values at the top and bottom edges */
    int dw, dh;           /* dots */
};

static double tf(const struct scale *s, double v, bool *clamped)
{
    if (!s->log) return v;
    if (v <= 0) {
        if (clamped) *clamped = true;
        v = s->floor_pos;
    }
    return log10(v);
}

static double untf(const struct scale *s, double t)
{
    return s->log ? pow(10.0, t) : t;
}

static int dot_row(const struct scale *s, double t)
{
    double f = (s->top - t) / (s->top - s->bot) * s->dh;
    int r = (int)floor(f);
    if (r < 0) r = 0;
    if (r >= s->dh) r = s->dh - 1;
    return r;
}

static void set_dot(uint8_t *mask, int w, int dx, int dy)
{
    mask[(dy / 4) * w + dx / 2] |= dot_bits[dx & 1][dy & 3];
}

/* Dots from row a to row b (either order) in column dx. */
static void vline(uint8_t *mask, int w, int dx, int a, int b)
{
    if (a > b) {
        int t = a;
        a = b;
        b = t;
    }
    for (int y = a; y <= b; y++) set_dot(mask, w, dx, y);
}

static double value_or(const double *arr, size_t i, double fallback)
{
    if (!arr || !isfinite(arr[i])) return fallback;
    return arr[i];
}

/* Finds the range of the finite values (and the smallest positive one for log scale). */
static bool data_range(const struct chart_in *in, double *lo, double *hi, double *min_pos,
                       double *xlo, double *xhi, size_t *used)
{
    bool any = false;
    *min_pos = INFINITY;
    *used = 0;
    for (size_t i = 0; i < in->n; i++) {
        double m = in->mean[i], x = in->x[i];
        if (!isfinite(m) || !isfinite(x)) continue;
        double vals[3] = { m, value_or(in->lo, i, m), value_or(in->hi, i, m) };
        for (int k = 0; k < 3; k++) {
            if (vals[k] > 0 && vals[k] < *min_pos) *min_pos = vals[k];
            if (!any || vals[k] < *lo) *lo = vals[k];
            if (!any || vals[k] > *hi) *hi = vals[k];
            if (!any || x < *xlo) *xlo = x;
            if (!any || x > *xhi) *xhi = x;
            any = true;
        }
        (*used)++;
    }
    return any;
}

static void make_scale(const struct chart_in *in, double lo, double hi, double min_pos,
                       struct scale *s, bool *clamped)
{
    s->log = in->log_scale;
    s->floor_pos = isfinite(min_pos) ? min_pos : 1.0;
    s->dw = in->w * 2;
    s->dh = in->h * 4;
    double tlo = tf(s, lo, clamped), thi = tf(s, hi, clamped);
    double range = thi - tlo;
    double pad;
    if (range <= fabs(thi) * 1e-12 || range == 0) {
        /* a constant series: put it in the middle with some room around it */
        pad = s->log ? 0.5 : (fabs(thi) > 0 ? fabs(thi) * 0.1 : 1.0);
    } else {
        pad = range * 0.04;
    }
    s->top = thi + pad;
    s->bot = tlo - pad;
}

/* Aggregates the points into dot columns and records which columns the line joins. */
static void aggregate(const struct chart_in *in, const struct scale *s, double xlo, double xhi,
                      struct column *cols, bool *clamped)
{
    for (int c = 0; c < s->dw; c++) cols[c] = (struct column){ 0, 0, 0, 0, -1 };
    int last = -1;
    bool gap = false;
    for (size_t i = 0; i < in->n; i++) {
        double x = in->x[i], m = in->mean[i];
        if (!isfinite(x)) continue;
        if (!isfinite(m)) {
            gap = true;
            continue;
        }
        int c = xhi > xlo ? (int)floor((x - xlo) / (xhi - xlo) * (s->dw - 1) + 0.5) : s->dw / 2;
        if (c < 0) c = 0;
        if (c >= s->dw) c = s->dw - 1;
        double tm = tf(s, m, clamped);
        double tl = tf(s, value_or(in->lo, i, m), clamped);
        double th = tf(s, value_or(in->hi, i, m), clamped);
        if (tl > th) {
            double t = tl;
            tl = th;
            th = t;
        }
        struct column *col = &cols[c];
        if (col->count == 0) {
            col->lo = tl;
            col->hi = th;
            if (c != last) col->link = (last >= 0 && !gap) ? last : -1;
        } else {
            if (tl < col->lo) col->lo = tl;
            if (th > col->hi) col->hi = th;
        }
        col->sum += tm;
        col->count++;
        last = c;
        gap = false;
    }
}

static void draw(const struct scale *s, const struct column *cols, struct chart_out *out, int w)
{
    for (int c = 0; c < s->dw; c++) {
        const struct column *col = &cols[c];
        if (col->count == 0) continue;
        double mean = col->sum / col->count;
        int r = dot_row(s, mean);
        set_dot(out->line, w, c, r);
        vline(out->band, w, c, dot_row(s, col->hi), dot_row(s, col->lo));
        if (col->link < 0) continue;
        /* join from the previous column, interpolating across empty ones */
        const struct column *p = &cols[col->link];
        double pmean = p->sum / p->count;
        int span = c - col->link, prev_r = dot_row(s, pmean);
        for (int k = col->link + 1; k <= c; k++) {
            double f = (double)(k - col->link) / span;
            int rk = dot_row(s, pmean + (mean - pmean) * f);
            vline(out->line, w, k, prev_r == rk ? rk : prev_r + (rk > prev_r ? 1 : -1), rk);
            prev_r = rk;
            if (k < c) {
                double lo = p->lo + (col->lo - p->lo) * f, hi = p->hi + (col->hi - p->hi) * f;
                vline(out->band, w, k, dot_row(s, hi), dot_row(s, lo));
            }
        }
    }
}

static void labels(struct chart_out *out, const struct scale *s)
{
    format_loss(out->y_top, sizeof out->y_top, out->y_max);
    format_loss(out->y_bottom, sizeof out->y_bottom, out->y_min);
    format_loss(out->y_mid, sizeof out->y_mid, untf(s, (s->top + s->bot) / 2));
    format_step(out->x_left, sizeof out->x_left, lround(out->x_min));
    format_step(out->x_right, sizeof out->x_right, lround(out->x_max));
}

int chart_compute(const struct chart_in *in, struct chart_out *out)
{
    if (!in || !out || in->w < 1 || in->h < 1 || !out->line || !out->band ||
        (in->n > 0 && (!in->x || !in->mean)))
        return -1;
    int w = in->w;
    size_t cells = (size_t)in->w * (size_t)in->h;
    memset(out->line, 0, cells);
    memset(out->band, 0, cells);
    out->log_scale = in->log_scale;
    out->clamped = false;
    out->empty = false;
    out->y_top[0] = out->y_mid[0] = out->y_bottom[0] = out->x_left[0] = out->x_right[0] = 0;

    double lo = 0, hi = 0, min_pos, xlo = 0, xhi = 0;
    if (!data_range(in, &lo, &hi, &min_pos, &xlo, &xhi, &out->points_used)) {
        out->empty = true;
        out->y_min = 0, out->y_max = 1, out->x_min = out->x_max = 0;
        return 0;
    }
    struct scale s;
    make_scale(in, lo, hi, min_pos, &s, &out->clamped);
    struct column *cols = malloc(sizeof *cols * (size_t)s.dw);
    if (!cols) return -1;
    aggregate(in, &s, xlo, xhi, cols, &out->clamped);
    draw(&s, cols, out, w);
    free(cols);

    out->y_max = untf(&s, s.top);
    out->y_min = untf(&s, s.bot);
    out->x_min = xlo;
    out->x_max = xhi;
    labels(out, &s);
    return 0;
}

double chart_row_value(const struct chart_out *out, int h, int row)
{
    if (h < 1) return NAN;
    bool lg = out->log_scale && out->y_min > 0;
    double top = lg ? log10(out->y_max) : out->y_max;
    double bot = lg ? log10(out->y_min) : out->y_min;
    double t = top - (row + 0.5) / h * (top - bot);
    return lg ? pow(10.0, t) : t;
}
