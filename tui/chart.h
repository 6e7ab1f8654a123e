/* The loss chart as a pure function: points (step, mean, min, max across ranks) in, braille
 * dot masks for a w x h cell grid out, plus the axes. Each cell is 2 dots wide and 4 tall, so
 * the grid has 2w x 4h dots. The mean line and the min-max band come out as separate masks
 * so the panes can colour them apart (a cell with both: draw line | band in the line's
 * colour). More points than dot columns are aggregated per column (min of mins, max of maxes,
 * mean of means); a NAN mean is a gap the line does not bridge. No curses here. */
#ifndef DDPTOP_CHART_H
#define DDPTOP_CHART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHART_BRAILLE_BASE 0x2800u   /* U+2800 + dot mask = the braille cell */

struct chart_in {
    const double *x;      /* step of each point, ascending; required */
    const double *mean;   /* NAN: a gap */
    const double *lo;     /* min across ranks; NULL or NAN: the mean */
    const double *hi;     /* max across ranks; NULL or NAN: the mean */
    size_t n;
    int w, h;             /* cells; both >= 1 */
    bool log_scale;
};

struct chart_out {
    /* Caller-provided arrays of w*h cells, row-major, row 0 at the top. Filled completely. */
    uint8_t *line;        /* dot mask of the mean line */
    uint8_t *band;        /* dot mask of the min-max band */
    /* Axes (filled by chart_compute). */
    double y_min, y_max;  /* values at the bottom edge of the lowest dot and the top edge of
                           * the highest (data units, not log) */
    double x_min, x_max;  /* steps of the leftmost and rightmost dot columns */
    bool log_scale;       /* log scale was used */
    bool clamped;         /* log scale: values <= 0 were drawn at the smallest positive one */
    bool empty;           /* no finite point: nothing drawn */
    size_t points_used;   /* finite points drawn */
    char y_top[16], y_mid[16], y_bottom[16];   /* formatted labels (format_loss) */
    char x_left[16], x_right[16];              /* formatted steps (format_step) */
};

/* Computes the chart. Returns 0, or -1 when w/h/arrays are invalid (masks untouched). */
int chart_compute(const struct chart_in *in, struct chart_out *out);

/* The braille dot bit for dot column dx (0 left, 1 right) and dot row dy (0 top .. 3 bottom),
 * Unicode order: dots 1-2-3-7 left, 4-5-6-8 right. */
uint8_t chart_dot_bit(int dx, int dy);
/* UTF-8 of the braille cell for mask (3 bytes + NUL); returns buf. */
char *chart_braille_utf8(uint8_t mask, char buf[4]);

/* The y value (data units) at the middle of cell row `row` of out (0 top). */
double chart_row_value(const struct chart_out *out, int h, int row);

#endif
