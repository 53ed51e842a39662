/*
 * job_statistics.c - computes `trainwatch stats` (job_statistics.h).
 *
 * Pass 1 reads the framework files and keeps every step event
 * (Step:ModeKeys.*): they map a step range to time, give events without a
 * step_num their step, and make the training-phase intervals. Pass 2 reads
 * every file, keeps the selected samples' values and folds the selected
 * events into per-(group, step) intervals.
 */
/* qsort_r, asprintf: _GNU_SOURCE comes from the build */
#include "job_statistics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folder_pass.h"
#include "grow.h"
#include "job_statistics_internal.h"
#include "numeric.h"
#include "strmap.h"
#include "tw_assert.h"

/* Strings interned to small indexes; the map owns the copies. */
typedef struct interned {
    tw_strmap map;
    const char **str;
    size_t n, cap;
} interned;

static int intern(interned *in, const char *s, uint32_t *idx)
{
    size_t len = strlen(s);
    if (tw_strmap_get(&in->map, s, len, idx))
        return TW_OK;
    if (tw_grow((void **)&in->str, &in->cap, in->n + 1, sizeof(*in->str), 64) !=
            TW_OK ||
        tw_strmap_put(&in->map, s, len, (uint32_t)in->n) != TW_OK)
        return TW_ERR;
    in->str[in->n] = tw_strmap_key(&in->map, s, len);
    *idx = (uint32_t)in->n++;
    return TW_OK;
}

typedef struct step_event {
    int64_t start_us, end_us, step;
    uint32_t name, node;
    int has_step;
    int train; /* TRAIN or GLOBAL */
} step_event;

/* The (type, metric, node, device name) of a series. */
typedef struct series_key {
    uint32_t type, metric, node;
    int usage; /* CPUUtilization or GPUUtilization: counted in buckets */
} series_key;

typedef struct sample_rec {
    int64_t ts_us;
    double value;
    uint32_t key; /* index into keys */
} sample_rec;

/* An event group's span within one step. */
typedef struct group_step {
    uint32_t group;
    int64_t start_us, end_us;
} group_step;

typedef struct stats_ctx {
    const tw_stats_opts *o;
    interned str;
    step_event *steps;
    size_t nsteps, cap_steps;
    /* per node (index = node string), TRAIN/GLOBAL steps with a step
     * number sorted by start: offsets into train_sorted */
    step_event *train_sorted;
    size_t ntrain;
    size_t *node_first, *node_count;
    size_t nnode_slots;

    int has_sel;
    int64_t from_us, to_us;

    series_key *keys;
    size_t nkeys, cap_keys;
    tw_strmap key_map; /* "type\x1fmetric\x1fnode" -> keys index */
    sample_rec *samples;
    size_t nsamples, cap_samples;

    tw_strmap gs_map; /* "group\x1fstep" -> gsteps index */
    group_step *gsteps;
    size_t ngsteps, cap_gsteps;

    int has_ev;
    int64_t ev_min_us, ev_max_us;
    uint64_t selected_events;
    int oom;
} stats_ctx;

const char *tw_stats_by_name(tw_stats_by by)
{
    switch (by) {
    case TW_STATS_BY_METRIC:
        return "framework_metric";
    case TW_STATS_BY_PROCESS:
        return "process";
    default:
        return "training_phase";
    }
}

static int step_number(const tw_fw_event *ev, int64_t *step)
{
    for (uint32_t i = 0; i < ev->nargs; i++) {
        if (strcmp(ev->args[i].key, "step_num") != 0)
            continue;
        const char *v = ev->args[i].value;
        char *end;
        long long x = strtoll(v, &end, 10);
        if (end == v || *end != '\0')
            return 0;
        *step = x;
        return 1;
    }
    return 0;
}

static int in_selection(const stats_ctx *c, int64_t from, int64_t to)
{
    return !c->has_sel || (from >= c->from_us && to <= c->to_us);
}

/* ---- pass 1: step events ---------------------------------------------- */

static int sink_steps(void *ud, tw_batch *b)
{
    stats_ctx *c = ud;
    for (size_t i = 0; i < b->nevents && !c->oom; i++) {
        const tw_fw_event *ev = &b->events[i];
        if (ev->mode == TW_MODE_NONE)
            continue;
        if (tw_grow((void **)&c->steps, &c->cap_steps, c->nsteps + 1,
                    sizeof(*c->steps), 256) != TW_OK) {
            c->oom = 1;
            break;
        }
        step_event *s = &c->steps[c->nsteps];
        memset(s, 0, sizeof(*s));
        s->start_us = ev->start_us;
        s->end_us = ev->end_us;
        s->has_step = step_number(ev, &s->step);
        s->train = ev->mode == TW_MODE_TRAIN || ev->mode == TW_MODE_GLOBAL;
        if (intern(&c->str, ev->name, &s->name) != TW_OK ||
            intern(&c->str, ev->node ? ev->node : "", &s->node) != TW_OK) {
            c->oom = 1;
            break;
        }
        c->nsteps++;
    }
    tw_batch_free(b);
    return c->oom ? TW_ERR : TW_OK;
}

static int cmp_node_start(const void *a, const void *b)
{
    const step_event *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    if (x->start_us != y->start_us)
        return x->start_us < y->start_us ? -1 : 1;
    return (x->step > y->step) - (x->step < y->step);
}

/* The TRAIN/GLOBAL steps of each node by start, for step_of(). */
static int index_train_steps(stats_ctx *c)
{
    c->train_sorted = malloc((c->nsteps + 1) * sizeof(*c->train_sorted));
    c->nnode_slots = c->str.n;
    c->node_first = calloc(c->nnode_slots + 1, sizeof(size_t));
    c->node_count = calloc(c->nnode_slots + 1, sizeof(size_t));
    if (c->train_sorted == NULL || c->node_first == NULL ||
        c->node_count == NULL)
        return TW_ERR;
    for (size_t i = 0; i < c->nsteps; i++)
        if (c->steps[i].train && c->steps[i].has_step)
            c->train_sorted[c->ntrain++] = c->steps[i];
    qsort(c->train_sorted, c->ntrain, sizeof(*c->train_sorted), cmp_node_start);
    for (size_t i = c->ntrain; i-- > 0;) {
        uint32_t n = c->train_sorted[i].node;
        c->node_first[n] = i;
        c->node_count[n]++;
    }
    return TW_OK;
}

/* An event without step_num belongs to the latest TRAIN/GLOBAL step of
 * its node that started at or before it, if it starts before that step
 * ends. */
static int step_of(const stats_ctx *c, const char *node, int64_t start,
                   int64_t *step)
{
    uint32_t n;
    if (!tw_strmap_get(&c->str.map, node, strlen(node), &n) ||
        n >= c->nnode_slots || c->node_count[n] == 0)
        return 0;
    const step_event *v = c->train_sorted + c->node_first[n];
    size_t lo = 0, hi = c->node_count[n]; /* first with start > t */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].start_us <= start)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || start > v[lo - 1].end_us)
        return 0;
    *step = v[lo - 1].step;
    return 1;
}

/* ---- pass 2: samples and events ----------------------------------------- */

static int series_key_of(stats_ctx *c, const char *type, const char *name,
                         const char *dim, const char *node, uint32_t *out)
{
    /* cpu and gpu samples are one metric per dimension across the cores
     * or GPUs; other types (memory, i/o, network) one per name */
    int per_dim = strcmp(type, "cpu") == 0 || strcmp(type, "gpu") == 0;
    const char *metric = per_dim ? dim : (name ? name : "");
    char buf[768];
    int len = snprintf(buf, sizeof(buf), "%s\x1f%s\x1f%s", type, metric, node);
    if (len < 0 || (size_t)len >= sizeof(buf))
        len = (int)sizeof(buf) - 1;
    if (tw_strmap_get(&c->key_map, buf, (size_t)len, out))
        return TW_OK;
    if (tw_grow((void **)&c->keys, &c->cap_keys, c->nkeys + 1, sizeof(*c->keys),
                64) != TW_OK ||
        tw_strmap_put(&c->key_map, buf, (size_t)len, (uint32_t)c->nkeys) !=
            TW_OK)
        return TW_ERR;
    series_key *k = &c->keys[c->nkeys];
    if (intern(&c->str, type, &k->type) != TW_OK ||
        intern(&c->str, metric, &k->metric) != TW_OK ||
        intern(&c->str, node, &k->node) != TW_OK)
        return TW_ERR;
    k->usage = strcmp(metric, "CPUUtilization") == 0 ||
               strcmp(metric, "GPUUtilization") == 0;
    *out = (uint32_t)c->nkeys++;
    return TW_OK;
}

static int add_samples(stats_ctx *c, const tw_batch *b)
{
    uint32_t *key = malloc((b->nseries + 1) * sizeof(*key));
    if (key == NULL)
        return TW_ERR;
    for (size_t i = 0; i < b->nseries; i++) {
        const tw_batch_series *s = &b->series[i];
        if (series_key_of(c, s->type ? s->type : "", s->name,
                          s->dimension ? s->dimension : "",
                          b->node ? b->node : "", &key[i]) != TW_OK) {
            free(key);
            return TW_ERR;
        }
    }
    for (size_t i = 0; i < b->nsamples; i++) {
        const tw_sample *s = &b->samples[i];
        int64_t ts = llround(s->ts * 1e6);
        if (!in_selection(c, ts, ts) || s->series >= b->nseries)
            continue;
        if (tw_grow((void **)&c->samples, &c->cap_samples, c->nsamples + 1,
                    sizeof(*c->samples), 4096) != TW_OK) {
            free(key);
            return TW_ERR;
        }
        c->samples[c->nsamples++] = (sample_rec){ts, s->value, key[s->series]};
    }
    free(key);
    return TW_OK;
}

/* by training_phase each step event is one duration; otherwise the
 * events of one (group, node, step) make one span [first start, last end]. */
static int add_group_step(stats_ctx *c, const char *group, const char *node,
                          int64_t step, const tw_fw_event *ev)
{
    uint32_t g;
    if (intern(&c->str, group, &g) != TW_OK)
        return TW_ERR;
    uint32_t i;
    char buf[600];
    int len = 0;
    if (c->o->by != TW_STATS_BY_PHASE) {
        len = snprintf(buf, sizeof(buf), "%u\x1f%lld\x1f%s", g, (long long)step,
                       node);
        if (len < 0 || (size_t)len >= sizeof(buf))
            len = (int)sizeof(buf) - 1;
        if (tw_strmap_get(&c->gs_map, buf, (size_t)len, &i)) {
            group_step *x = &c->gsteps[i];
            if (ev->start_us < x->start_us)
                x->start_us = ev->start_us;
            if (ev->end_us > x->end_us)
                x->end_us = ev->end_us;
            return TW_OK;
        }
    }
    if (tw_grow((void **)&c->gsteps, &c->cap_gsteps, c->ngsteps + 1,
                sizeof(*c->gsteps), 256) != TW_OK ||
        (c->o->by != TW_STATS_BY_PHASE &&
         tw_strmap_put(&c->gs_map, buf, (size_t)len, (uint32_t)c->ngsteps) !=
             TW_OK))
        return TW_ERR;
    c->gsteps[c->ngsteps++] = (group_step){g, ev->start_us, ev->end_us};
    return TW_OK;
}

static int add_events(stats_ctx *c, const tw_batch *b)
{
    for (size_t i = 0; i < b->nevents; i++) {
        const tw_fw_event *ev = &b->events[i];
        if (!in_selection(c, ev->start_us, ev->end_us))
            continue;
        c->selected_events++;
        if (!c->has_ev || ev->start_us < c->ev_min_us)
            c->ev_min_us = ev->start_us;
        if (!c->has_ev || ev->end_us > c->ev_max_us)
            c->ev_max_us = ev->end_us;
        c->has_ev = 1;
        if (c->o->by == TW_STATS_BY_PHASE && ev->mode == TW_MODE_NONE)
            continue;
        int64_t step = 0;
        if (c->o->by != TW_STATS_BY_PHASE && !step_number(ev, &step) &&
            (ev->mode != TW_MODE_NONE ||
             !step_of(c, ev->node ? ev->node : "", ev->start_us, &step)))
            continue;
        const char *group =
            c->o->by == TW_STATS_BY_PROCESS ? ev->phase : ev->name;
        if (add_group_step(c, group ? group : "", ev->node ? ev->node : "",
                           step, ev) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

static int sink_all(void *ud, tw_batch *b)
{
    stats_ctx *c = ud;
    if (add_samples(c, b) != TW_OK || add_events(c, b) != TW_OK)
        c->oom = 1;
    tw_batch_free(b);
    return c->oom ? TW_ERR : TW_OK;
}

/* ---- summaries ------------------------------------------------------------
 */

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

static int step_statistics(const stats_ctx *c, tw_statistics *s)
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
static int phase_intervals(stats_ctx *c, tw_statistics *s)
{
    step_event *v = malloc((c->nsteps + 1) * sizeof(*v));
    if (v == NULL)
        return TW_ERR;
    size_t n = 0;
    for (size_t i = 0; i < c->nsteps; i++)
        if (in_selection(c, c->steps[i].start_us, c->steps[i].end_us))
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
static int utilization(const stats_ctx *c, tw_statistics *s, int per_phase)
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
static int usage_buckets(const stats_ctx *c, tw_statistics *s)
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

/* ---- the whole computation ---------------------------------------------- */

static int select_range(stats_ctx *c, tw_statistics *s, char *err,
                        size_t errlen)
{
    const tw_stats_opts *o = c->o;
    if (o->has_time) {
        c->has_sel = 1;
        c->from_us = o->from_us;
        c->to_us = o->to_us;
    }
    if (o->has_steps) {
        int found = 0;
        int64_t from = 0, to = 0;
        for (size_t i = 0; i < c->nsteps; i++) {
            const step_event *e = &c->steps[i];
            if (!e->train || !e->has_step || e->step < o->step_a ||
                e->step > o->step_b)
                continue;
            if (!found || e->start_us < from)
                from = e->start_us;
            if (!found || e->end_us > to)
                to = e->end_us;
            found = 1;
        }
        if (!found) {
            snprintf(err, errlen,
                     "no TRAIN or GLOBAL step event with a step number in "
                     "%lld:%lld",
                     (long long)o->step_a, (long long)o->step_b);
            return TW_ERR;
        }
        /* with --time as well: the intersection */
        if (!c->has_sel || from > c->from_us)
            c->from_us = from;
        if (!c->has_sel || to < c->to_us)
            c->to_us = to;
        c->has_sel = 1;
    }
    s->has_selection = c->has_sel;
    s->sel_from_us = c->from_us;
    s->sel_to_us = c->to_us;
    return TW_OK;
}

static void job_times(const stats_ctx *c, tw_statistics *s)
{
    if (c->nsamples > 0) {
        s->has_job = 1;
        s->start_us = s->end_us = c->samples[0].ts_us;
        for (size_t i = 1; i < c->nsamples; i++) {
            if (c->samples[i].ts_us < s->start_us)
                s->start_us = c->samples[i].ts_us;
            if (c->samples[i].ts_us > s->end_us)
                s->end_us = c->samples[i].ts_us;
        }
    } else if (c->has_ev) {
        s->has_job = 1;
        s->start_us = c->ev_min_us;
        s->end_us = c->ev_max_us;
    }
    for (size_t i = 0; i < c->nsteps; i++) {
        const step_event *e = &c->steps[i];
        if (!e->train || !in_selection(c, e->start_us, e->end_us))
            continue;
        if (!s->has_loop || e->start_us < s->loop_start_us)
            s->loop_start_us = e->start_us;
        s->has_loop = 1;
    }
    s->loop_end_us = c->ev_max_us;
}

static void ctx_free(stats_ctx *c)
{
    tw_strmap_free(&c->str.map);
    free(c->str.str);
    free(c->steps);
    free(c->train_sorted);
    free(c->node_first);
    free(c->node_count);
    free(c->keys);
    tw_strmap_free(&c->key_map);
    free(c->samples);
    tw_strmap_free(&c->gs_map);
    free(c->gsteps);
}

int tw_statistics_compute(const char *dir, const tw_stats_opts *o,
                          tw_statistics **out, char *err, size_t errlen)
{
    *out = NULL;
    tw_folder *folder = NULL;
    if (tw_folder_list(dir, &folder, err, errlen) != TW_OK)
        return TW_ERR;
    for (size_t i = 0; i < folder->nproblems; i++)
        fprintf(stderr, "stats: WARN folder not read: %s: %s\n",
                folder->problems[i].path, folder->problems[i].reason);
    stats_ctx c;
    memset(&c, 0, sizeof(c));
    c.o = o;
    tw_strmap_init(&c.str.map);
    tw_strmap_init(&c.key_map);
    tw_strmap_init(&c.gs_map);
    tw_statistics *s = calloc(1, sizeof(*s));
    tw_reader_stats rs;
    memset(&rs, 0, sizeof(rs));
    int rc = TW_ERR;
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    s->by = o->by;
    if (o->nranges > 0) {
        memcpy(s->ranges, o->ranges, o->nranges * sizeof(*o->ranges));
        s->nranges = o->nranges;
    } else {
        s->ranges[0] = (tw_stats_range){90, 100};
        s->ranges[1] = (tw_stats_range){10, 90};
        s->ranges[2] = (tw_stats_range){0, 10};
        s->nranges = 3;
    }
    if (tw_folder_pass(folder, TW_PASS_FRAMEWORK, "stats", 1, sink_steps, &c,
                       NULL, err, errlen) != TW_OK ||
        index_train_steps(&c) != TW_OK) {
        if (c.oom || err[0] == '\0')
            snprintf(err, errlen, "out of memory reading step events");
        goto out;
    }
    if (select_range(&c, s, err, errlen) != TW_OK)
        goto out;
    if (tw_folder_pass(folder, TW_PASS_SYSTEM | TW_PASS_FRAMEWORK, "stats",
                       o->quiet, sink_all, &c, &rs, err, errlen) != TW_OK)
        goto out;
    s->files = rs.files;
    s->bad_lines = rs.bad_lines;
    s->samples = rs.samples;
    s->events = rs.events;
    s->selected_samples = c.nsamples;
    s->selected_events = c.selected_events;
    job_times(&c, s);
    if (phase_intervals(&c, s) != TW_OK || step_statistics(&c, s) != TW_OK ||
        utilization(&c, s, o->per_phase) != TW_OK ||
        usage_buckets(&c, s) != TW_OK) {
        snprintf(err, errlen, "out of memory computing the statistics");
        goto out;
    }
    *out = s;
    s = NULL;
    rc = TW_OK;
out:
    tw_statistics_free(s);
    ctx_free(&c);
    tw_folder_free(folder);
    return rc;
}

void tw_statistics_free(tw_statistics *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nphases; i++) {
        free(s->phases[i].node);
        free(s->phases[i].phase);
    }
    free(s->phases);
    for (size_t i = 0; i < s->nsteps; i++)
        free(s->steps[i].group);
    free(s->steps);
    for (size_t i = 0; i < s->nutil; i++) {
        free(s->util[i].resource);
        free(s->util[i].metric);
        free(s->util[i].node);
        free(s->util[i].phase);
    }
    free(s->util);
    for (size_t i = 0; i < s->nusage; i++) {
        free(s->usage[i].metric);
        free(s->usage[i].node);
    }
    free(s->usage);
    free(s);
}
