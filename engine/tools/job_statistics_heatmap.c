/*
 * job_statistics_heatmap.c - the GPU utilization heat map of `trainwatch
 * stats` (and the report's heat-map section): the mean GPUUtilization of
 * every (node, GPU) in at most TW_STATS_HEAT_MAX_COLUMNS columns of equal
 * width over the selected samples' time span. The width is a whole number
 * of seconds, at least one, so a column never splits one sampling instant
 * and short jobs get one column per second. Means are numpy's over the
 * column's sorted values (tw_mean), as for the utilization table.
 *
 * Ownership: the rows and their arrays belong to the tw_statistics.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job_statistics_ctx.h"
#include "numeric.h"
#include "trainwatch/plugin.h"
#include "tw_assert.h"

typedef struct row_order {
    const char *node, *gpu;
    uint32_t key;
} row_order;

static int cmp_row(const void *a, const void *b)
{
    const row_order *x = a, *y = b;
    int r = strcmp(x->node, y->node);
    return r != 0 ? r : strcmp(x->gpu, y->gpu);
}

/* Column width for a span of `span_us`: whole seconds, at least one. */
static int64_t column_width(int64_t span_us)
{
    const int64_t sec = 1000000;
    int64_t per_col = span_us / TW_STATS_HEAT_MAX_COLUMNS + 1;
    int64_t w = (per_col + sec - 1) / sec * sec;
    return w < sec ? sec : w;
}

static char *dup_str(const char *s, int *oom)
{
    char *d = strdup(s);
    if (d == NULL)
        *oom = 1;
    return d;
}

int tw_stats_heatmap(const stats_ctx *c, tw_statistics *s)
{
    if (c->nheat == 0 || c->nheat_keys == 0)
        return TW_OK;
    int64_t lo = c->heat[0].ts_us, hi = c->heat[0].ts_us;
    for (size_t i = 1; i < c->nheat; i++) {
        lo = c->heat[i].ts_us < lo ? c->heat[i].ts_us : lo;
        hi = c->heat[i].ts_us > hi ? c->heat[i].ts_us : hi;
    }
    int64_t width = column_width(hi - lo);
    size_t ncols = (size_t)((hi - lo) / width) + 1;
    TW_ASSERT(ncols <= TW_STATS_HEAT_MAX_COLUMNS);
    size_t ncells = c->nheat_keys * ncols;
    int rc = TW_ERR, oom = 0;
    size_t *count = calloc(ncells + 1, sizeof(size_t));
    size_t *first = calloc(ncells + 1, sizeof(size_t));
    double *vals = malloc(c->nheat * sizeof(double));
    row_order *order = malloc(c->nheat_keys * sizeof(*order));
    s->heat = calloc(c->nheat_keys, sizeof(*s->heat));
    if (count == NULL || first == NULL || vals == NULL || order == NULL ||
        s->heat == NULL)
        goto out;
    for (size_t i = 0; i < c->nheat; i++) {
        size_t col = (size_t)((c->heat[i].ts_us - lo) / width);
        count[c->heat[i].key * ncols + col]++;
    }
    size_t at = 0;
    for (size_t g = 0; g < ncells; g++) {
        first[g] = at;
        at += count[g];
        count[g] = 0;
    }
    for (size_t i = 0; i < c->nheat; i++) {
        size_t col = (size_t)((c->heat[i].ts_us - lo) / width);
        size_t g = c->heat[i].key * ncols + col;
        vals[first[g] + count[g]++] = c->heat[i].value;
    }
    for (size_t k = 0; k < c->nheat_keys; k++)
        order[k] = (row_order){c->str.str[c->heat_keys[k].node],
                               c->str.str[c->heat_keys[k].gpu], (uint32_t)k};
    qsort(order, c->nheat_keys, sizeof(*order), cmp_row);
    for (size_t r = 0; r < c->nheat_keys; r++) {
        tw_heat_row *row = &s->heat[s->nheat++];
        row->node = dup_str(order[r].node, &oom);
        row->gpu = dup_str(order[r].gpu, &oom);
        row->mean = malloc(ncols * sizeof(double));
        if (oom || row->mean == NULL)
            goto out;
        for (size_t col = 0; col < ncols; col++) {
            size_t g = order[r].key * ncols + col;
            if (count[g] == 0) {
                row->mean[col] = NAN;
                continue;
            }
            tw_sort_doubles(vals + first[g], count[g]);
            row->mean[col] = tw_mean(vals + first[g], count[g]);
        }
    }
    s->heat_start_us = lo;
    s->heat_bucket_us = width;
    s->heat_columns = ncols;
    rc = TW_OK;
out:
    free(count);
    free(first);
    free(vals);
    free(order);
    return rc;
}
