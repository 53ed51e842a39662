/*
 * report_svg.h - the charts of `trainwatch report`, written as inline SVG
 * (no script, no external resource: the page opens from disk and prints).
 * Each function writes one <svg class="chart"> element; labels are
 * HTML-escaped here. A chart with nothing to draw writes a short
 * paragraph saying so instead, never an empty <svg>.
 *
 * Ownership: nothing is kept; the caller owns every argument.
 */
#ifndef TW_REPORT_SVG_H
#define TW_REPORT_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Writes s with &, <, >, " escaped. */
void tw_html_escape(FILE *out, const char *s);

/* A pie of values (negative and non-finite values count as 0). */
void tw_svg_pie(FILE *out, const char *title, const char *const *labels,
                const double *values, size_t n);

/* Vertical bars, one per value; labels may be NULL (then none are drawn
 * under the bars; first/last name the axis ends). */
void tw_svg_bars(FILE *out, const char *title, const double *values, size_t n,
                 const char *first, const char *last);

typedef struct tw_svg_box {
    const char *label;
    double min, p25, p50, p75, max; /* p25/p75 NaN: drawn as a bar */
} tw_svg_box;

/* Horizontal box plots on one shared axis, in `unit`. */
void tw_svg_boxes(FILE *out, const char *title, const tw_svg_box *b, size_t n,
                  const char *unit);

typedef struct tw_svg_range {
    const char *label;
    int64_t first_us, last_us;
} tw_svg_range;

/* One row per range between start_us and end_us (a Gantt strip). */
void tw_svg_ranges(FILE *out, const char *title, const tw_svg_range *r,
                   size_t n, int64_t start_us, int64_t end_us);

/* A heat map: nrows rows of ncols cells, values[r * ncols + c] in 0..100
 * (NAN: no data, left blank), darker for higher; span_s labels the time
 * axis. Adjacent cells of one shade are drawn as one rectangle. */
void tw_svg_heatmap(FILE *out, const char *title, const char *const *rows,
                    const double *values, size_t nrows, size_t ncols,
                    double span_s);

#endif /* TW_REPORT_SVG_H */
