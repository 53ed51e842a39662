/*
 * job_statistics.c - computes `trainwatch stats` (job_statistics.h).
 *
 * Pass 1 reads the framework files and keeps every step event
 * (Step:ModeKeys.*): they map a step range to time, give events without a
 * step_num their step, and make the training-phase intervals. Pass 2 reads
 * every file, keeps the selected samples' values and folds the selected
 * events into per-(group, step) intervals. The statistics are made from
 * that in job_statistics_summary.c.
 */
#include "job_statistics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folder_pass.h"
#include "grow.h"
#include "job_statistics_ctx.h"
#include "numeric.h"
#include "strmap.h"
#include "tw_assert.h"

/* The index of s in `in`, added when new. */
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

/* The heat-map row of a node's GPU; UINT32_MAX for any other series. */
static int heat_key_of(stats_ctx *c, const tw_batch_series *bs,
                       const char *node, uint32_t *out)
{
    *out = UINT32_MAX;
    if (bs->type == NULL || strcmp(bs->type, "gpu") != 0 ||
        bs->dimension == NULL || strcmp(bs->dimension, "GPUUtilization") != 0)
        return TW_OK;
    const char *gpu = bs->name ? bs->name : "";
    char buf[768];
    int len = snprintf(buf, sizeof(buf), "%s\x1f%s", node, gpu);
    if (len < 0 || (size_t)len >= sizeof(buf))
        len = (int)sizeof(buf) - 1;
    if (tw_strmap_get(&c->heat_map, buf, (size_t)len, out))
        return TW_OK;
    if (tw_grow((void **)&c->heat_keys, &c->cap_heat_keys, c->nheat_keys + 1,
                sizeof(*c->heat_keys), 16) != TW_OK ||
        tw_strmap_put(&c->heat_map, buf, (size_t)len,
                      (uint32_t)c->nheat_keys) != TW_OK)
        return TW_ERR;
    heat_key *k = &c->heat_keys[c->nheat_keys];
    if (intern(&c->str, node, &k->node) != TW_OK ||
        intern(&c->str, gpu, &k->gpu) != TW_OK)
        return TW_ERR;
    *out = (uint32_t)c->nheat_keys++;
    return TW_OK;
}

static int add_samples(stats_ctx *c, const tw_batch *b)
{
    uint32_t *key = malloc((2 * b->nseries + 1) * sizeof(*key));
    if (key == NULL)
        return TW_ERR;
    uint32_t *heat = key + b->nseries;
    for (size_t i = 0; i < b->nseries; i++) {
        const tw_batch_series *s = &b->series[i];
        if (series_key_of(c, s->type ? s->type : "", s->name,
                          s->dimension ? s->dimension : "",
                          b->node ? b->node : "", &key[i]) != TW_OK ||
            heat_key_of(c, s, b->node ? b->node : "", &heat[i]) != TW_OK) {
            free(key);
            return TW_ERR;
        }
    }
    for (size_t i = 0; i < b->nsamples; i++) {
        const tw_sample *s = &b->samples[i];
        int64_t ts = llround(s->ts * 1e6);
        if (!tw_stats_in_selection(c, ts, ts) || s->series >= b->nseries)
            continue;
        if (tw_grow((void **)&c->samples, &c->cap_samples, c->nsamples + 1,
                    sizeof(*c->samples), 4096) != TW_OK) {
            free(key);
            return TW_ERR;
        }
        c->samples[c->nsamples++] = (sample_rec){ts, s->value, key[s->series]};
        if (heat[s->series] == UINT32_MAX)
            continue;
        if (tw_grow((void **)&c->heat, &c->cap_heat, c->nheat + 1,
                    sizeof(*c->heat), 1024) != TW_OK) {
            free(key);
            return TW_ERR;
        }
        c->heat[c->nheat++] = (sample_rec){ts, s->value, heat[s->series]};
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
        if (!tw_stats_in_selection(c, ev->start_us, ev->end_us))
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
        if (!e->train || !tw_stats_in_selection(c, e->start_us, e->end_us))
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
    free(c->heat_keys);
    tw_strmap_free(&c->heat_map);
    free(c->heat);
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
    tw_strmap_init(&c.heat_map);
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
    if (tw_stats_phase_intervals(&c, s) != TW_OK ||
        tw_stats_step_statistics(&c, s) != TW_OK ||
        tw_stats_utilization(&c, s, o->per_phase) != TW_OK ||
        tw_stats_usage_buckets(&c, s) != TW_OK ||
        tw_stats_heatmap(&c, s) != TW_OK) {
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
    for (size_t i = 0; i < s->nheat; i++) {
        free(s->heat[i].node);
        free(s->heat[i].gpu);
        free(s->heat[i].mean);
    }
    free(s->heat);
    free(s);
}
