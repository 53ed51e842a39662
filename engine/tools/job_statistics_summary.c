/*
 * job_statistics_summary.c - from what `trainwatch stats` read (the
 * context, job_statistics_ctx.h) to the statistics: training-phase
 * intervals, step-duration summaries, utilization per metric and node
 * (and phase), device usage buckets. README.md ("Job statistics") defines
 * each.
 */
/* qsort_r, asprintf: _GNU_SOURCE comes from the build */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "job_statistics_ctx.h"
#include "numeric.h"
#include "trainwatch/plugin.h"
#include "tw_assert.h"

/* Sorts v (n > 0) and summarizes it; the mean is taken over the sorted
 * values, so it does not depend on the order the files were read in. */
static void summarize(double *v, size_t n, tw_stat_summary *s)
{
    TW_ASSERT(n > 0);
    tw_sort_doubles(v, n);
    s->count = n;
    s->mean = tw_mean(v, n);
    s->min = v[0];
    s->max = v[n - 1];
    s->p50 = tw_quantile_sorted(v, n, 0.5);
    s->p95 = tw_quantile_sorted(v, n, 0.95);
    s->p99 = tw_quantile_sorted(v, n, 0.99);
}

static char *dup_or_oom(const char *s, int *oom)
{
    char *d = strdup(s);
    if (d == NULL)
        *oom = 1;
    return d;
}

static int cmp_group_idx(const void *a, const void *b, void *ud)
{
    const interned *str = ud;
    const group_step *x = a, *y = b;
    return strcmp(str->str[x->group], str->str[y->group]);
}

int tw_stats_step_statistics(const stats_ctx *c, tw_statistics *s)
{
    if (c->ngsteps > 1) /* gsteps is NULL when there is none */
        qsort_r(c->gsteps, c->ngsteps, sizeof(*c->gsteps), cmp_group_idx,
                (void *)&c->str);
    double *v = malloc((c->ngsteps + 1) * sizeof(*v));
    s->steps = calloc(c->ngsteps + 1, sizeof(*s->steps));
    if (v == NULL || s->steps == NULL) {
        free(v);
        return TW_ERR;
    }
    int oom = 0;
    for (size_t i = 0; i < c->ngsteps;) {
        size_t j = i;
        for (; j < c->ngsteps && c->gsteps[j].group == c->gsteps[i].group; j++)
            v[j - i] = (double)(c->gsteps[j].end_us - c->gsteps[j].start_us);
        tw_step_group *g = &s->steps[s->nsteps++];
        g->group = dup_or_oom(c->str.str[c->gsteps[i].group], &oom);
        summarize(v, j - i, &g->s);
        i = j;
    }
    free(v);
    return oom ? TW_ERR : TW_OK;
}

static int cmp_node_time(const void *a, const void *b, void *ud)
{
    const interned *str = ud;
    const step_event *x = a, *y = b;
    int r = strcmp(str->str[x->node], str->str[y->node]);
    if (r != 0)
        return r;
    if (x->start_us != y->start_us)
        return x->start_us < y->start_us ? -1 : 1;
    if (x->end_us != y->end_us)
        return x->end_us < y->end_us ? -1 : 1;
    return strcmp(str->str[x->name], str->str[y->name]);
}

/* Appends the interval [from, to] of node named by the format; an empty
 * one (to < from: runs that overlap) is left out. */
static int add_phase(tw_statistics *s, size_t *cap, const char *node,
                     int64_t from, int64_t to, const char *fmt, const char *a,
                     const char *b)
{
    if (to < from)
        return TW_OK;
    if (tw_grow((void **)&s->phases, cap, s->nphases + 1, sizeof(*s->phases),
                8) != TW_OK)
        return TW_ERR;
    char *name, *nd = strdup(node);
    if (nd == NULL || asprintf(&name, fmt, a, b) < 0) {
        free(nd);
        return TW_ERR;
    }
    s->phases[s->nphases++] = (tw_phase_interval){nd, name, from, to};
    return TW_OK;
}

/* Per framework node, its selected step events by start time; each run of
 * one event name is an interval [first start, latest end]; the gaps
 * between runs and the job's ends before and after them are named after
 * their neighbours. */
int tw_stats_phase_intervals(stats_ctx *c, tw_statistics *s)
{
    step_event *v = malloc((c->nsteps + 1) * sizeof(*v));
    if (v == NULL)
        return TW_ERR;
    size_t n = 0;
    for (size_t i = 0; i < c->nsteps; i++)
        if (tw_stats_in_selection(c, c->steps[i].start_us, c->steps[i].end_us))
            v[n++] = c->steps[i];
    qsort_r(v, n, sizeof(*v), cmp_node_time, &c->str);
    size_t cap = 0;
    int rc = TW_OK;
    for (size_t k = 0; k < n && rc == TW_OK;) {
        const char *node = c->str.str[v[k].node];
        const char *prev = NULL;
        int64_t prev_end = 0;
        size_t i = k;
        for (; i < n && v[i].node == v[k].node && rc == TW_OK;) {
            size_t j = i;
            int64_t end = v[i].end_us;
            for (; j < n && v[j].node == v[k].node && v[j].name == v[i].name;
                 j++)
                if (v[j].end_us > end)
                    end = v[j].end_us;
            const char *name = c->str.str[v[i].name];
            if (prev == NULL && s->has_job)
                rc = add_phase(s, &cap, node, s->start_us, v[i].start_us - 1,
                               "Before %s%s", name, "");
            else if (prev != NULL) /* names in byte order */
                rc = add_phase(s, &cap, node, prev_end + 1, v[i].start_us - 1,
                               "Between %s and %s",
                               strcmp(prev, name) <= 0 ? prev : name,
                               strcmp(prev, name) <= 0 ? name : prev);
            if (rc == TW_OK)
                rc = add_phase(s, &cap, node, v[i].start_us, end, "%s%s", name,
                               "");
            prev = name;
            prev_end = end;
            i = j;
        }
        if (rc == TW_OK && prev != NULL && s->has_job)
            rc = add_phase(s, &cap, node, prev_end + 1, s->end_us, "After %s%s",
                           prev, "");
        k = i;
    }
    free(v);
    return rc;
}

/* The first interval (in time order) of phases[0, n) holding t, or -1;
 * max_end[k] = the latest end among phases[0..k]. */
static long phase_of(const tw_phase_interval *ph, const int64_t *max_end,
                     size_t n, int64_t t)
{
    size_t lo = 0, hi = n; /* first with start > t */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ph[mid].start_us <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    long found = -1;
    for (size_t k = lo; k-- > 0 && max_end[k] >= t;)
        if (ph[k].end_us >= t)
            found = (long)k;
    return found;
}

/* The phases of the system node `node`: those of the first framework node
 * (in byte order) named `node` or `node-<anything>` (a rank on that host:
 * the trace reader names them `algo-1-0`): *first and *count index
 * s->phases, which is sorted by node. */
static void phases_of_node(const tw_statistics *s, const char *node,
                           size_t *first, size_t *count)
{
    size_t len = strlen(node);
    *first = *count = 0;
    for (size_t i = 0; i < s->nphases;) {
        size_t j = i;
        while (j < s->nphases &&
               strcmp(s->phases[j].node, s->phases[i].node) == 0)
            j++;
        const char *f = s->phases[i].node;
        if (strncmp(f, node, len) == 0 && (f[len] == '\0' || f[len] == '-')) {
            *first = i;
            *count = j - i;
            return;
        }
        i = j;
    }
}

static int cmp_util(const void *a, const void *b)
{
    const tw_util_row *x = a, *y = b;
    int r = strcmp(x->resource, y->resource);
    if (r == 0)
        r = strcmp(x->metric, y->metric);
    if (r == 0)
        r = strcmp(x->node, y->node);
    if (r == 0)
        r = (x->phase != NULL) - (y->phase != NULL);
    if (r == 0 && x->phase != NULL)
        r = strcmp(x->phase, y->phase);
    return r;
}

/* Groups the samples by (key, slot): slot 0 = the whole selection, slot
 * 1 + p = the p-th distinct phase name (its node's interval holding the
 * sample); summarizes each group. */
int tw_stats_utilization(const stats_ctx *c, tw_statistics *s, int per_phase)
{
    tw_strmap names;
    tw_strmap_init(&names);
    const char **name_of = calloc(s->nphases + 1, sizeof(*name_of));
    uint32_t *slot_of_phase = calloc(s->nphases + 1, sizeof(uint32_t));
    size_t nnames = 0;
    int rc = TW_ERR;
    size_t *count = NULL, *first = NULL, *kfirst = NULL, *kcount = NULL;
    int64_t *max_end = malloc((s->nphases + 1) * sizeof(int64_t));
    double *vals = NULL;
    uint32_t *slot_of = NULL;
    if (name_of == NULL || slot_of_phase == NULL || max_end == NULL)
        goto out;
    for (size_t p = 0; p < s->nphases && per_phase; p++) {
        const char *nm = s->phases[p].phase;
        uint32_t slot;
        if (!tw_strmap_get(&names, nm, strlen(nm), &slot)) {
            slot = (uint32_t)nnames;
            if (tw_strmap_put(&names, nm, strlen(nm), slot) != TW_OK)
                goto out;
            name_of[nnames++] = nm;
        }
        slot_of_phase[p] = slot;
        max_end[p] =
            p == 0 || strcmp(s->phases[p].node, s->phases[p - 1].node) != 0 ||
                    s->phases[p].end_us > max_end[p - 1]
                ? s->phases[p].end_us
                : max_end[p - 1];
    }
    size_t slots = 1 + nnames;
    size_t ngroups = c->nkeys * slots;
    count = calloc(ngroups + 1, sizeof(size_t));
    first = calloc(ngroups + 1, sizeof(size_t));
    kfirst = calloc(c->nkeys + 1, sizeof(size_t));
    kcount = calloc(c->nkeys + 1, sizeof(size_t));
    vals = malloc((c->nsamples * (per_phase ? 2 : 1) + 1) * sizeof(double));
    slot_of = malloc((c->nsamples + 1) * sizeof(uint32_t));
    if (count == NULL || first == NULL || kfirst == NULL || kcount == NULL ||
        vals == NULL || slot_of == NULL)
        goto out;
    for (size_t k = 0; k < c->nkeys && per_phase; k++)
        phases_of_node(s, c->str.str[c->keys[k].node], &kfirst[k], &kcount[k]);
    for (size_t i = 0; i < c->nsamples; i++) {
        const sample_rec *r = &c->samples[i];
        count[r->key * slots]++;
        slot_of[i] = 0;
        if (per_phase && kcount[r->key] > 0) {
            size_t f = kfirst[r->key];
            long p =
                phase_of(s->phases + f, max_end + f, kcount[r->key], r->ts_us);
            if (p >= 0) {
                slot_of[i] = 1 + slot_of_phase[f + (size_t)p];
                count[r->key * slots + slot_of[i]]++;
            }
        }
    }
    size_t at = 0;
    for (size_t g = 0; g < ngroups; g++) {
        first[g] = at;
        at += count[g];
        count[g] = 0;
    }
    for (size_t i = 0; i < c->nsamples; i++) {
        const sample_rec *r = &c->samples[i];
        size_t g = r->key * slots;
        vals[first[g] + count[g]++] = r->value;
        if (slot_of[i] > 0) {
            g += slot_of[i];
            vals[first[g] + count[g]++] = r->value;
        }
    }
    s->util = calloc(ngroups + 1, sizeof(*s->util));
    if (s->util == NULL)
        goto out;
    int oom = 0;
    for (size_t g = 0; g < ngroups; g++) {
        if (count[g] == 0)
            continue;
        const series_key *k = &c->keys[g / slots];
        size_t slot = g % slots;
        tw_util_row *u = &s->util[s->nutil++];
        u->resource = dup_or_oom(c->str.str[k->type], &oom);
        u->metric = dup_or_oom(c->str.str[k->metric], &oom);
        u->node = dup_or_oom(c->str.str[k->node], &oom);
        u->phase = slot == 0 ? NULL : dup_or_oom(name_of[slot - 1], &oom);
        summarize(vals + first[g], count[g], &u->s);
    }
    if (!oom)
        qsort(s->util, s->nutil, sizeof(*s->util), cmp_util);
    rc = oom ? TW_ERR : TW_OK;
out:
    tw_strmap_free(&names);
    free(name_of);
    free(slot_of_phase);
    free(count);
    free(first);
    free(kfirst);
    free(kcount);
    free(max_end);
    free(vals);
    free(slot_of);
    return rc;
}

static int cmp_usage(const void *a, const void *b)
{
    const tw_usage_row *x = a, *y = b;
    int r = strcmp(x->metric, y->metric);
    return r != 0 ? r : strcmp(x->node, y->node);
}

/* Samples of CPUUtilization / GPUUtilization per (metric, node) counted in
 * the first range (in the order given) that holds them. */
int tw_stats_usage_buckets(const stats_ctx *c, tw_statistics *s)
{
    long *row_of = malloc((c->nkeys + 1) * sizeof(long));
    s->usage = calloc(c->nkeys + 1, sizeof(*s->usage));
    if (row_of == NULL || s->usage == NULL) {
        free(row_of);
        return TW_ERR;
    }
    int oom = 0;
    for (size_t k = 0; k < c->nkeys; k++) {
        row_of[k] = -1;
        if (!c->keys[k].usage)
            continue;
        row_of[k] = (long)s->nusage;
        tw_usage_row *u = &s->usage[s->nusage++];
        u->metric = dup_or_oom(c->str.str[c->keys[k].metric], &oom);
        u->node = dup_or_oom(c->str.str[c->keys[k].node], &oom);
    }
    for (size_t i = 0; i < c->nsamples; i++) {
        const sample_rec *r = &c->samples[i];
        if (row_of[r->key] < 0)
            continue;
        tw_usage_row *u = &s->usage[row_of[r->key]];
        u->total++;
        for (size_t q = 0; q < s->nranges; q++) {
            if (r->value >= s->ranges[q].from && r->value <= s->ranges[q].to) {
                u->counts[q]++;
                break;
            }
        }
    }
    free(row_of);
    if (!oom)
        qsort(s->usage, s->nusage, sizeof(*s->usage), cmp_usage);
    return oom ? TW_ERR : TW_OK;
}
