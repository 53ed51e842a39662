/*
 * report_svg.c - inline SVG charts for the HTML report (report_svg.h).
 * Fixed pixel sizes with a viewBox, so they scale on screen and in print.
 */
#include <math.h>
#include <stdio.h>

#include "report_svg.h"

/* Colour-blind-safe categorical palette (Okabe-Ito). */
static const char *const palette[] = {"#0072B2", "#E69F00", "#009E73",
                                      "#CC79A7", "#56B4E9", "#D55E00",
                                      "#F0E442", "#000000", "#999999"};
#define NPALETTE (sizeof(palette) / sizeof(palette[0]))

void tw_html_escape(FILE *out, const char *s)
{
    for (; s != NULL && *s != '\0'; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        default:
            fputc(*s, out);
        }
    }
}

static double clean(double v)
{
    return isfinite(v) && v > 0 ? v : 0;
}

static void none(FILE *out, const char *title)
{
    fputs("<p class=\"nochart\">", out);
    tw_html_escape(out, title);
    fputs(": no data for this chart.</p>\n", out);
}

static void open_svg(FILE *out, const char *title, int w, int h)
{
    fprintf(out,
            "<figure><svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
            "viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
            "aria-label=\"",
            w, h, w, h);
    tw_html_escape(out, title);
    fputs("\">", out);
}

static void close_svg(FILE *out, const char *title)
{
    fputs("</svg><figcaption>", out);
    tw_html_escape(out, title);
    fputs("</figcaption></figure>\n", out);
}

void tw_svg_pie(FILE *out, const char *title, const char *const *labels,
                const double *values, size_t n)
{
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += clean(values[i]);
    if (total <= 0) {
        none(out, title);
        return;
    }
    int h = 170 > 20 + 18 * (int)n ? 170 : 20 + 18 * (int)n;
    open_svg(out, title, 600, h);
    const double cx = 80, cy = 80, r = 70;
    double a = -M_PI / 2;
    for (size_t i = 0; i < n; i++) {
        double f = clean(values[i]) / total;
        const char *c = palette[i % NPALETTE];
        if (f >= 0.9999) {
            fprintf(out, "<circle cx=\"%g\" cy=\"%g\" r=\"%g\" fill=\"%s\"/>",
                    cx, cy, r, c);
        } else if (f > 0) {
            double b = a + f * 2 * M_PI;
            fprintf(out,
                    "<path d=\"M%g %g L%.2f %.2f A%g %g 0 %d 1 %.2f %.2f Z\" "
                    "fill=\"%s\"/>",
                    cx, cy, cx + r * cos(a), cy + r * sin(a), r, r,
                    f > 0.5 ? 1 : 0, cx + r * cos(b), cy + r * sin(b), c);
            a = b;
        }
        fprintf(out,
                "<rect x=\"170\" y=\"%d\" width=\"12\" height=\"12\" "
                "fill=\"%s\"/><text x=\"188\" y=\"%d\">",
                10 + 18 * (int)i, c, 21 + 18 * (int)i);
        tw_html_escape(out, labels[i]);
        fprintf(out, " (%.1f %%)</text>", 100 * f);
    }
    close_svg(out, title);
}

void tw_svg_bars(FILE *out, const char *title, const double *values, size_t n,
                 const char *first, const char *last)
{
    double max = 0;
    for (size_t i = 0; i < n; i++)
        if (clean(values[i]) > max)
            max = clean(values[i]);
    if (n == 0 || max <= 0) {
        none(out, title);
        return;
    }
    const int w = 460, h = 180, left = 40, plot_w = w - left - 10, top = 10,
              plot_h = 140;
    open_svg(out, title, w, h);
    fprintf(out,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>"
            "<text x=\"2\" y=\"%d\">%g</text>",
            left, top + plot_h, left + plot_w, top + plot_h, top + 10, max);
    double bw = (double)plot_w / (double)n;
    for (size_t i = 0; i < n; i++) {
        double bh = clean(values[i]) / max * plot_h;
        fprintf(out,
                "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                "fill=\"%s\"><title>%g</title></rect>",
                left + bw * (double)i, top + plot_h - bh,
                bw > 1.5 ? bw - 0.5 : bw, bh, palette[0], values[i]);
    }
    fprintf(out, "<text x=\"%d\" y=\"%d\">", left, h - 8);
    tw_html_escape(out, first);
    fprintf(out, "</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">",
            left + plot_w, h - 8);
    tw_html_escape(out, last);
    fputs("</text>", out);
    close_svg(out, title);
}

void tw_svg_boxes(FILE *out, const char *title, const tw_svg_box *b, size_t n,
                  const char *unit)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(b[i].min) && b[i].min < lo)
            lo = b[i].min;
        if (isfinite(b[i].max) && b[i].max > hi)
            hi = b[i].max;
    }
    if (n == 0 || !isfinite(lo) || !isfinite(hi)) {
        none(out, title);
        return;
    }
    if (hi <= lo)
        hi = lo + 1;
    const int left = 160, plot_w = 330, row = 20;
    int h = 30 + row * (int)n;
    open_svg(out, title, 500, h);
#define X(v) (left + ((v)-lo) / (hi - lo) * plot_w)
    for (size_t i = 0; i < n; i++) {
        int y = 5 + row * (int)i;
        fprintf(out, "<text x=\"2\" y=\"%d\">", y + 13);
        tw_html_escape(out, b[i].label);
        fprintf(out,
                "</text><line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" "
                "stroke=\"#444\"/>",
                X(b[i].min), y + 9, X(b[i].max), y + 9);
        double q1 = isfinite(b[i].p25) ? b[i].p25 : b[i].p50;
        double q3 = isfinite(b[i].p75) ? b[i].p75 : b[i].p50;
        fprintf(out,
                "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"14\" "
                "fill=\"%s\" stroke=\"#444\"/><line x1=\"%.2f\" y1=\"%d\" "
                "x2=\"%.2f\" y2=\"%d\" stroke=\"#000\" stroke-width=\"2\"/>",
                X(q1), y + 2, X(q3) - X(q1) + 1, palette[4], X(b[i].p50), y + 2,
                X(b[i].p50), y + 16);
    }
    fprintf(out, "<text x=\"%d\" y=\"%d\">%g</text>", left, h - 4, lo);
    fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%g ",
            left + plot_w, h - 4, hi);
    tw_html_escape(out, unit);
    fputs("</text>", out);
#undef X
    close_svg(out, title);
}

void tw_svg_ranges(FILE *out, const char *title, const tw_svg_range *r,
                   size_t n, int64_t start_us, int64_t end_us)
{
    if (n == 0 || end_us <= start_us) {
        none(out, title);
        return;
    }
    const int left = 160, plot_w = 450, row = 20;
    int h = 30 + row * (int)n;
    open_svg(out, title, 620, h);
    double span = (double)(end_us - start_us);
    fprintf(
        out,
        "<rect x=\"%d\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f3f3f3\"/>",
        left, plot_w, row * (int)n + 5);
    for (size_t i = 0; i < n; i++) {
        int y = 5 + row * (int)i;
        double x0 = left + (double)(r[i].first_us - start_us) / span * plot_w;
        double x1 = left + (double)(r[i].last_us - start_us) / span * plot_w;
        if (x0 < left)
            x0 = left;
        if (x1 > left + plot_w)
            x1 = left + plot_w;
        fprintf(out, "<text x=\"2\" y=\"%d\">", y + 13);
        tw_html_escape(out, r[i].label);
        fprintf(out,
                "</text><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"14\" "
                "fill=\"%s\"/>",
                x0, y + 2, x1 - x0 > 2 ? x1 - x0 : 2, palette[5]);
    }
    fprintf(out,
            "<text x=\"%d\" y=\"%d\">job start</text><text x=\"%d\" y=\"%d\" "
            "text-anchor=\"end\">+%.0f s</text>",
            left, h - 4, left + plot_w, h - 4, span / 1e6);
    close_svg(out, title);
}

/* Eleven shades from white (0 %) to the palette's blue (100 %). */
static int shade_of(double v)
{
    if (!isfinite(v))
        return -1;
    int level = (int)lround(v / 10.0);
    return level < 0 ? 0 : level > 10 ? 10 : level;
}

static void shade_fill(FILE *out, int level)
{
    /* from #ffffff to #0072B2 in ten steps */
    int r = 255 - (255 - 0x00) * level / 10;
    int g = 255 - (255 - 0x72) * level / 10;
    int b = 255 - (255 - 0xB2) * level / 10;
    fprintf(out, "#%02x%02x%02x", r, g, b);
}

void tw_svg_heatmap(FILE *out, const char *title, const char *const *rows,
                    const double *values, size_t nrows, size_t ncols,
                    double span_s)
{
    if (nrows == 0 || ncols == 0) {
        none(out, title);
        return;
    }
    const int left = 160, plot_w = 480, row_h = 12, top = 4;
    int h = top + row_h * (int)nrows + 44;
    open_svg(out, title, left + plot_w + 20, h);
    double cell_w = (double)plot_w / (double)ncols;
    fprintf(out,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
            "fill=\"none\" stroke=\"#999\"/>",
            left, top, plot_w, row_h * (int)nrows);
    for (size_t r = 0; r < nrows; r++) {
        int y = top + row_h * (int)r;
        fprintf(out, "<text x=\"2\" y=\"%d\" font-size=\"10\">", y + 10);
        tw_html_escape(out, rows[r]);
        fputs("</text>", out);
        size_t c = 0;
        while (c < ncols) {
            int level = shade_of(values[r * ncols + c]);
            size_t end = c + 1;
            while (end < ncols && shade_of(values[r * ncols + end]) == level)
                end++;
            if (level >= 0) {
                fprintf(out,
                        "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
                        "height=\"%d\" fill=\"",
                        left + cell_w * (double)c, y,
                        cell_w * (double)(end - c), row_h);
                shade_fill(out, level);
                fputs("\"/>", out);
            }
            c = end;
        }
    }
    int ly = top + row_h * (int)nrows;
    fprintf(out,
            "<text x=\"%d\" y=\"%d\">job start</text><text x=\"%d\" "
            "y=\"%d\" text-anchor=\"end\">+%.0f s</text>",
            left, ly + 14, left + plot_w, ly + 14, span_s);
    /* the legend: the eleven shades, 0 % to 100 % */
    for (int l = 0; l <= 10; l++) {
        fprintf(out,
                "<rect x=\"%d\" y=\"%d\" width=\"20\" height=\"10\" "
                "fill=\"",
                left + 20 * l, ly + 22);
        shade_fill(out, l);
        fputs("\" stroke=\"#ccc\"/>", out);
    }
    fprintf(out,
            "<text x=\"%d\" y=\"%d\">0 %%</text><text x=\"%d\" "
            "y=\"%d\">100 %% GPU utilization (mean per cell)</text>",
            left - 30, ly + 31, left + 20 * 11 + 4, ly + 31);
    close_svg(out, title);
}
