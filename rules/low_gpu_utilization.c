/*
 * low_gpu_utilization.c - LowGPUUtilization (RULES.md §3.1): flags each GPU
 * whose p95 over its newest `window` samples is below `threshold_p95`
 * (under-utilised) or whose p95 is above it while p5 is below
 * `threshold_p5` (fluctuating), once it has more than `patience` samples.
 *
 * How the reference's state is kept:
 *  - the window quantiles read the newest min(window, n) samples of the
 *    series from the host aggregator (request_window(GPU_UTIL, window));
 *    the aggregator is fed every delivered sample, boundary repeats
 *    included, exactly like the reference's list. window = 0 means the
 *    whole history (slice quirk) and uses the count map below.
 *  - gpu_max and the box plot over the whole history come from a count map
 *    of distinct values (rules/common/countmap.h), exact and
 *    order-independent.
 *  - n (samples since the last reset) is a counter.
 *
 * Semantics: no quirk of §3.1 has a fixed-mode text, so both semantics
 * give the same decisions and report:
 *  - same in both: whole-history statistics in the report (quirk 2),
 *    window 0 = whole history (3), Datapoints = length of the GPU visited
 *    last (5), strict comparisons (w95 == threshold_p95 is never a
 *    violation), Details[node][gpu] replaced on each violation,
 *    last_timestamp = the rule's clock at the scan (F under ProfilerReport
 *    in reference semantics: the host passes it as rule_clock_us);
 *  - reset at more than 1 000 000 samples of one GPU (quirk 1, "Fix (both
 *    modes)"): the current scan finishes on the data in hand, then every
 *    series is forgotten (counts, count maps, visiting order) and the next
 *    scan starts empty; the report keeps its Details;
 *  - integer samples are doubles (gpu_max prints as 90.0);
 *  - differ (fixed, phase-aware): samples of the initialization phase
 *    (before the job's first step, rules/common/job_phase.h) are not
 *    counted: idle GPUs while the job loads are MaxInitializationTime's
 *    concern. The window then holds post-init samples only (it reads the
 *    newest min(window, n) and n counts post-init samples), and
 *    `patience` counts from the first step. Before the first step event,
 *    samples within `init_grace` minutes of the job's start count as
 *    initialization; a job without the hook is evaluated after that.
 *    The finalization (after the last step, job_phase.h) is skipped too:
 *    its samples are not counted, and a scan whose end lies in it is
 *    not judged (the host's window it reads holds every sample).
 *  - also different: the count map is capped at 10 001 distinct values
 *    per GPU in `fixed` (then coarsened to 0.01 steps, see countmap.h; max
 *    and min stay exact, quantiles of a non-percentage stream become
 *    approximate) and uncapped in `reference`.
 *
 * Memory (fixed): per GPU ~100 bytes + the count map (<= 10 001 keys,
 * ~24-48 B/key + 16 B/key sorted view, about 0.5 MB worst case, ~5 KB for
 * integer utilisations) + the aggregator ring of `window` doubles
 * (8·window bytes, held by the host); one scratch array of `window` doubles
 * per rule; Details: ~120 bytes per violating GPU. Total for N nodes of G
 * GPUs: N·G·(8·W + 100 + countmap) + 8·W bytes. Reference: the same with
 * uncapped count maps (<= distinct values seen, never the raw history).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_phase.h"
#include "select.h"
#include "trainwatch/countmap.h"
#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"
#include "trainwatch/smap.h"

#define LOWGPU_MAX_DATAPOINTS 1000000u

enum { P_P95, P_P5, P_WINDOW, P_PATIENCE, P_INIT_GRACE, P_COUNT };

static const tw_param_spec params[P_COUNT] = {
    {"threshold_p95", TW_PARAM_DOUBLE, "70", 0, 100,
     "% - a GPU whose p95 over the window is below this is under-utilised"},
    {"threshold_p5", TW_PARAM_DOUBLE, "10", 0, 100,
     "% - with p95 above threshold_p95, a p5 below this is a fluctuation"},
    {"window", TW_PARAM_INT, "500", 0, 1000000,
     "newest samples per GPU used for the p95/p5 (0 = the whole history)"},
    {"patience", TW_PARAM_INT, "1000", 0, 1e15,
     "a GPU is evaluated only when it has more than this many samples"},
    {"init_grace", TW_PARAM_DOUBLE, "30", 0.0, 525600.0,
     "trainwatch extension, fixed semantics only: minutes from the job's "
     "first timestamp during which samples of a job that has shown no "
     "step event yet count as initialization (not evaluated)"},
};

/* One GPU series being tracked (since the last reset). */
typedef struct gpu_series {
    char *node;
    char *name;        /* NULL for a JSON null Name */
    uint32_t node_ord; /* index into lowgpu.nodes */
    uint64_t n;
    tw_countmap hist;
} gpu_series;

/* One GPU's entry in Details (survives resets). */
typedef struct gpu_detail {
    char *name;
    double gpu_max, gpu_95, gpu_5;
    tw_box box;
} gpu_detail;

typedef struct node_detail {
    char *node;
    gpu_detail *gpus;
    size_t ngpus;
} node_detail;

typedef struct lowgpu {
    const tw_host *host;
    tw_semantics sem;
    double p95, p5;
    int64_t window, patience;
    const char *param_text[P_COUNT];
    char params_text[512]; /* RuleParameters: the reference's parameters */

    gpu_series *gpus; /* first-appearance order */
    size_t ngpus, capgpus;
    char **nodes; /* node ids in first-GPU-sample order */
    size_t nnodes;
    uint32_t *by_series; /* series id -> gpus index + 1 (0 = unknown) */
    size_t nby;

    node_detail *det; /* Details nodes in first-violation order */
    size_t ndet;
    int64_t ts_pos; /* Details nodes written before last_timestamp; -1 */
    int64_t last_ts;

    int64_t triggered, violations, datapoints;
    double *scratch;    /* window values */
    tw_job_phase phase; /* fixed: the initialization to skip */
    int64_t grace_us;   /* fixed: init_grace */

    /* Indexes, so that a job's cost stays linear in its GPUs: */
    tw_smap node_ids; /* node -> nodes index + 1 */
    tw_smap gpu_ids; /* node -> {"\1" name, or "" for null -> gpus index + 1} */
    tw_smap det_ids; /* node -> det index + 1 */
    size_t *order;   /* scan: gpus indexes grouped by node */
    size_t *node_start;
    /* For the finding: end of the first and the last scan that found a
     * violating GPU (checkpointed as an optional trailer). */
    int64_t viol_first_us, viol_last_us;
} lowgpu;

static char *dup_str(const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

static int str_eq(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

static void forget_series(lowgpu *r)
{
    for (size_t i = 0; i < r->ngpus; i++) {
        free(r->gpus[i].node);
        free(r->gpus[i].name);
        tw_countmap_free(&r->gpus[i].hist);
    }
    r->ngpus = 0;
    for (size_t i = 0; i < r->nnodes; i++)
        free(r->nodes[i]);
    r->nnodes = 0;
    tw_smap_free(&r->node_ids);
    tw_smap_free(&r->gpu_ids);
    if (r->by_series != NULL)
        memset(r->by_series, 0, r->nby * sizeof(*r->by_series));
}

/* Frees the Details records and the series table (not the parameters). */
static void clear_all(lowgpu *r)
{
    forget_series(r);
    free(r->by_series);
    r->by_series = NULL;
    r->nby = 0;
    for (size_t i = 0; i < r->ndet; i++) {
        free(r->det[i].node);
        for (size_t g = 0; g < r->det[i].ngpus; g++)
            free(r->det[i].gpus[g].name);
        free(r->det[i].gpus);
    }
    free(r->det);
    r->det = NULL;
    r->ndet = 0;
    tw_smap_free(&r->det_ids);
}

static void destroy(void *state)
{
    lowgpu *r = state;
    if (r == NULL)
        return;
    clear_all(r);
    free(r->gpus);
    free(r->nodes);
    free(r->scratch);
    free(r->order);
    free(r->node_start);
    free(r);
}

static const char *parameters_text(void *state)
{
    return ((const lowgpu *)state)->params_text;
}

static int create(const tw_host *host, const tw_params *p, void **state,
                  char *err, size_t errlen)
{
    if (p->nvalues != P_COUNT) {
        snprintf(err, errlen, "LowGPUUtilization: expected %d parameters",
                 P_COUNT);
        return TW_ERR;
    }
    lowgpu *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "LowGPUUtilization: out of memory");
        return TW_ERR;
    }
    r->host = host;
    r->sem = p->semantics;
    r->p95 = p->values[P_P95].d;
    r->p5 = p->values[P_P5].d;
    r->window = p->values[P_WINDOW].i;
    r->patience = p->values[P_PATIENCE].i;
    r->grace_us = p->values[P_INIT_GRACE].is_none
                      ? 0
                      : (int64_t)(p->values[P_INIT_GRACE].d * 60e6);
    for (int i = 0; i < P_COUNT; i++)
        r->param_text[i] = p->values[i].text;
    if (tw_job_phase_params_text(params, p, P_INIT_GRACE, r->params_text,
                                 sizeof(r->params_text)) != TW_OK) {
        snprintf(err, errlen, "LowGPUUtilization: parameter values too long");
        free(r);
        return TW_ERR;
    }
    r->ts_pos = -1;
    if (r->window > 0) {
        r->scratch = malloc((size_t)r->window * sizeof(double));
        if (r->scratch == NULL ||
            host->request_window(host->ctx, TW_METRIC_GPU_UTIL,
                                 (uint32_t)r->window) != TW_OK) {
            snprintf(err, errlen,
                     "LowGPUUtilization: cannot keep a window of %lld samples",
                     (long long)r->window);
            destroy(r);
            return TW_ERR;
        }
    }
    *state = r;
    return TW_OK;
}

static size_t map_cap(const lowgpu *r)
{
    return r->sem == TW_SEMANTICS_FIXED ? TW_COUNTMAP_DEFAULT_CAP : 0;
}

static int node_ord(lowgpu *r, const char *node, uint32_t *out)
{
    tw_smap_entry *e = tw_smap_put(&r->node_ids, node);
    if (e == NULL)
        return TW_ERR;
    if (e->val > 0) {
        *out = (uint32_t)(e->val - 1);
        return TW_OK;
    }
    e->val = (int64_t)r->nnodes + 1;
    char **nn = realloc(r->nodes, (r->nnodes + 1) * sizeof(*nn));
    if (nn == NULL)
        return TW_ERR;
    r->nodes = nn;
    r->nodes[r->nnodes] = dup_str(node);
    if (r->nodes[r->nnodes] == NULL)
        return TW_ERR;
    *out = (uint32_t)r->nnodes++;
    return TW_OK;
}

/* The tracked GPU for (node, name), created at its first sample. */
/* The entry of (node, name) in a node -> name index (val = index + 1). */
static tw_smap_entry *name_entry(tw_smap *ids, const char *node,
                                 const char *name)
{
    tw_smap *names = tw_smap_sub(ids, node);
    if (names == NULL)
        return NULL;
    if (name == NULL)
        return tw_smap_put(names, "");
    size_t n = strlen(name);
    char *key = malloc(n + 2);
    if (key == NULL)
        return NULL;
    key[0] = '\1'; /* apart from the null name's "" */
    memcpy(key + 1, name, n + 1);
    tw_smap_entry *e = tw_smap_put(names, key);
    free(key);
    return e;
}

static gpu_series *find_gpu(lowgpu *r, const char *node, const char *name)
{
    tw_smap_entry *e = name_entry(&r->gpu_ids, node, name);
    if (e == NULL)
        return NULL;
    if (e->val > 0)
        return &r->gpus[e->val - 1];
    if (r->ngpus == r->capgpus) {
        size_t cap = r->capgpus ? 2 * r->capgpus : 8;
        gpu_series *g = realloc(r->gpus, cap * sizeof(*g));
        if (g == NULL)
            return NULL;
        r->gpus = g;
        r->capgpus = cap;
    }
    gpu_series *g = &r->gpus[r->ngpus];
    memset(g, 0, sizeof(*g));
    tw_countmap_init(&g->hist, map_cap(r));
    g->node = dup_str(node);
    g->name = dup_str(name);
    if (g->node == NULL || (name != NULL && g->name == NULL) ||
        node_ord(r, node, &g->node_ord) != TW_OK) {
        free(g->node);
        free(g->name);
        return NULL;
    }
    r->ngpus++;
    e->val = (int64_t)r->ngpus;
    return g;
}

static gpu_series *gpu_of_series(lowgpu *r, const tw_scan *scan, uint32_t id)
{
    if (id >= scan->nseries)
        return NULL;
    if (id >= r->nby) {
        size_t n = scan->nseries > id + 1 ? scan->nseries : id + 1;
        uint32_t *b = realloc(r->by_series, n * sizeof(*b));
        if (b == NULL)
            return NULL;
        memset(b + r->nby, 0, (n - r->nby) * sizeof(*b));
        r->by_series = b;
        r->nby = n;
    }
    if (r->by_series[id] != 0)
        return &r->gpus[r->by_series[id] - 1];
    const tw_series *s = &scan->series[id];
    const char *node = s->node < scan->nnodes ? scan->nodes[s->node] : "";
    gpu_series *g = find_gpu(r, node, s->name);
    if (g != NULL)
        r->by_series[id] = (uint32_t)(g - r->gpus) + 1;
    return g;
}

static gpu_detail *detail_slot(lowgpu *r, const char *node, const char *name)
{
    node_detail *nd = NULL;
    tw_smap_entry *e = tw_smap_put(&r->det_ids, node);
    if (e == NULL)
        return NULL;
    if (e->val > 0)
        nd = &r->det[e->val - 1];
    if (nd == NULL) {
        node_detail *d = realloc(r->det, (r->ndet + 1) * sizeof(*d));
        if (d == NULL)
            return NULL;
        r->det = d;
        nd = &r->det[r->ndet];
        memset(nd, 0, sizeof(*nd));
        nd->node = dup_str(node);
        if (nd->node == NULL)
            return NULL;
        r->ndet++;
        e->val = (int64_t)r->ndet;
    }
    for (size_t g = 0; g < nd->ngpus; g++)
        if (str_eq(nd->gpus[g].name, name))
            return &nd->gpus[g];
    gpu_detail *gd = realloc(nd->gpus, (nd->ngpus + 1) * sizeof(*gd));
    if (gd == NULL)
        return NULL;
    nd->gpus = gd;
    gpu_detail *slot = &nd->gpus[nd->ngpus];
    memset(slot, 0, sizeof(*slot));
    slot->name = dup_str(name);
    if (name != NULL && slot->name == NULL)
        return NULL;
    nd->ngpus++;
    return slot;
}

/* Q(v[-window:], q) for both quantiles. */
static int window_quantiles(lowgpu *r, const tw_scan *scan, uint32_t series,
                            gpu_series *g, double *w95, double *w5)
{
    if (r->window == 0) {
        if (tw_countmap_quantile(&g->hist, 0.95, w95) != TW_OK ||
            tw_countmap_quantile(&g->hist, 0.05, w5) != TW_OK)
            return TW_ERR;
        return TW_OK;
    }
    size_t want = (uint64_t)r->window < g->n ? (size_t)r->window : (size_t)g->n;
    size_t k = r->host->window_read(scan->windows, series, r->scratch, want);
    if (k != want)
        return TW_ERR;
    /* Selection, not a sort: this runs for every GPU at every scan. */
    *w95 = tw_select_quantile(r->scratch, k, 0.95);
    *w5 = tw_select_quantile(r->scratch, k, 0.05);
    return TW_OK;
}

static int scan(void *state, const tw_scan *sc, tw_scan_result *out, char *err,
                size_t errlen)
{
    lowgpu *r = state;
    int fixed = r->sem == TW_SEMANTICS_FIXED;
    if (fixed)
        tw_job_phase_note(&r->phase, sc);
    for (size_t i = 0; i < sc->nsamples; i++) {
        const tw_sample *s = &sc->samples[i];
        if (s->series >= sc->nseries ||
            sc->series[s->series].metric != TW_METRIC_GPU_UTIL)
            continue;
        if (fixed && tw_job_phase_outside(&r->phase, s->ts,
                                          sc->first_timestamp_us, r->grace_us))
            continue;
        gpu_series *g = gpu_of_series(r, sc, s->series);
        if (g == NULL || tw_countmap_add(&g->hist, s->value) != TW_OK) {
            snprintf(err, errlen, "LowGPUUtilization: out of memory");
            return TW_ERR;
        }
        g->n++;
    }

    /* A GPU's newest values are read through any series id mapped to it;
     * remember one per GPU. */
    uint32_t *series_of = NULL;
    if (r->ngpus > 0) {
        series_of = calloc(r->ngpus, sizeof(*series_of));
        if (series_of == NULL) {
            snprintf(err, errlen, "LowGPUUtilization: out of memory");
            return TW_ERR;
        }
        for (size_t id = r->nby; id-- > 0;)
            if (r->by_series[id] != 0)
                series_of[r->by_series[id] - 1] = (uint32_t)id;
    }

    /* Nodes in order, each node's GPUs in order: a counting sort of the
     * GPUs by node (not a pass over all GPUs per node). */
    size_t *order = NULL, *start = NULL;
    if (r->ngpus > 0) {
        order = realloc(r->order, r->ngpus * sizeof(*order));
        if (order != NULL)
            r->order = order;
        start = realloc(r->node_start, (r->nnodes + 1) * sizeof(*start));
        if (start != NULL)
            r->node_start = start;
        if (order == NULL || start == NULL) {
            free(series_of);
            snprintf(err, errlen, "LowGPUUtilization: out of memory");
            return TW_ERR;
        }
        memset(start, 0, (r->nnodes + 1) * sizeof(*start));
        for (size_t gi = 0; gi < r->ngpus; gi++)
            start[r->gpus[gi].node_ord + 1]++;
        for (size_t nd = 0; nd < r->nnodes; nd++)
            start[nd + 1] += start[nd];
        for (size_t gi = 0; gi < r->ngpus; gi++)
            order[start[r->gpus[gi].node_ord]++] = gi;
    }
    /* fixed: the host's window holds every sample, the finalization's
     * too, so a scan that reaches into it is not judged */
    int final = fixed && tw_job_phase_in_final(&r->phase, sc->end_us / 1e6);
    int reset = 0, rc = TW_OK;
    for (size_t k = 0; k < r->ngpus && rc == TW_OK; k++) {
        size_t gi = order[k];
        gpu_series *g = &r->gpus[gi];
        r->datapoints = (int64_t)g->n;
        if (g->n > LOWGPU_MAX_DATAPOINTS)
            reset = 1;
        if (g->n <= (uint64_t)r->patience || final)
            continue;
        double w95, w5;
        if (window_quantiles(r, sc, series_of[gi], g, &w95, &w5) != TW_OK) {
            snprintf(err, errlen,
                     "LowGPUUtilization: the aggregator lost the window "
                     "of %s/%s",
                     g->node, g->name != NULL ? g->name : "null");
            rc = TW_ERR;
            break;
        }
        int violation = w95 < r->p95 || (w95 > r->p95 && w5 < r->p5);
        if (!violation)
            continue;
        gpu_detail *d = detail_slot(r, g->node, g->name);
        if (d == NULL || tw_countmap_box(&g->hist, &d->box) != TW_OK) {
            snprintf(err, errlen, "LowGPUUtilization: out of memory");
            rc = TW_ERR;
            break;
        }
        d->gpu_max = tw_countmap_max(&g->hist);
        d->gpu_95 = w95;
        d->gpu_5 = w5;
        r->triggered++;
        r->violations++;
        r->datapoints = (int64_t)g->n;
        if (r->viol_first_us == 0)
            r->viol_first_us = sc->end_us;
        r->viol_last_us = sc->end_us;
        if (r->ts_pos < 0)
            r->ts_pos = (int64_t)r->ndet;
        r->last_ts = sc->rule_clock_us;
    }
    free(series_of);
    if (rc != TW_OK)
        return rc;
    if (reset)
        forget_series(r);
    out->condition_met = r->triggered > 0;
    out->rule_triggered = r->triggered;
    out->violations = r->violations;
    out->datapoints = r->datapoints;
    return TW_OK;
}

static void write_gpu(const tw_host *h, tw_json *j, const gpu_detail *d)
{
    h->json_key(j, d->name != NULL ? d->name : "null");
    h->json_object_begin(j);
    static const char *const keys[] = {"gpu_max", "gpu_95", "gpu_5",
                                       "p25",     "p50",    "p75",
                                       "p95",     "upper",  "lower"};
    const double vals[] = {d->gpu_max, d->gpu_95,    d->gpu_5,
                           d->box.p25, d->box.p50,   d->box.p75,
                           d->box.p95, d->box.upper, d->box.lower};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        h->json_key(j, keys[i]);
        h->json_double(j, vals[i]);
    }
    h->json_object_end(j);
}

static int details(void *state, tw_json *j)
{
    lowgpu *r = state;
    const tw_host *h = r->host;
    h->json_object_begin(j);
    for (size_t i = 0; i <= r->ndet; i++) {
        if ((int64_t)i == r->ts_pos) {
            h->json_key(j, "last_timestamp");
            h->json_int(j, r->last_ts);
        }
        if (i == r->ndet)
            break;
        h->json_key(j, r->det[i].node);
        h->json_object_begin(j);
        for (size_t g = 0; g < r->det[i].ngpus; g++)
            write_gpu(h, j, &r->det[i].gpus[g]);
        h->json_object_end(j);
    }
    h->json_object_end(j);
    return TW_OK;
}

#define LOWGPU_TAG 0x4c475055u /* "LGPU" */

static int save(void *state, tw_buf *out)
{
    lowgpu *r = state;
    tw_ser s;
    tw_ser_init(&s, r->host, out);
    tw_ser_u32(&s, LOWGPU_TAG);
    tw_ser_i64(&s, r->triggered);
    tw_ser_i64(&s, r->violations);
    tw_ser_i64(&s, r->datapoints);
    tw_ser_i64(&s, r->ts_pos);
    tw_ser_i64(&s, r->last_ts);
    tw_ser_u64(&s, r->ngpus);
    for (size_t i = 0; i < r->ngpus; i++) {
        tw_ser_str(&s, r->gpus[i].node);
        tw_ser_str(&s, r->gpus[i].name);
        tw_ser_u64(&s, r->gpus[i].n);
        tw_countmap_save(&r->gpus[i].hist, &s);
    }
    tw_ser_u64(&s, r->nby);
    for (size_t i = 0; i < r->nby; i++)
        tw_ser_u32(&s, r->by_series[i]);
    tw_ser_u64(&s, r->ndet);
    for (size_t i = 0; i < r->ndet; i++) {
        tw_ser_str(&s, r->det[i].node);
        tw_ser_u64(&s, r->det[i].ngpus);
        for (size_t g = 0; g < r->det[i].ngpus; g++) {
            const gpu_detail *d = &r->det[i].gpus[g];
            tw_ser_str(&s, d->name);
            const double v[] = {d->gpu_max, d->gpu_95,    d->gpu_5,
                                d->box.p25, d->box.p50,   d->box.p75,
                                d->box.p95, d->box.upper, d->box.lower};
            for (size_t k = 0; k < 9; k++)
                tw_ser_f64(&s, v[k]);
        }
    }
    tw_ser_i64(&s, r->viol_first_us);
    tw_ser_i64(&s, r->viol_last_us);
    tw_job_phase_save(&r->phase, &s);
    return tw_ser_ok(&s) ? TW_OK : TW_ERR;
}

/* The GPUs flagged, the lowest p95 first; under-used and fluctuating
 * GPUs get different advice. */
static int finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                   char *err, size_t errlen)
{
    lowgpu *r = state;
    (void)ctx, (void)err, (void)errlen;
    size_t low = 0, fluct = 0, total = 0;
    const gpu_detail *worst = NULL;
    const char *worst_node = NULL;
    for (size_t i = 0; i < r->ndet; i++)
        for (size_t g = 0; g < r->det[i].ngpus; g++) {
            const gpu_detail *d = &r->det[i].gpus[g];
            total++;
            if (d->gpu_95 < r->p95)
                low++;
            else
                fluct++;
            if (worst == NULL || d->gpu_95 < worst->gpu_95) {
                worst = d;
                worst_node = r->det[i].node;
            }
        }
    /* list by ascending p95 (selection over a small set) */
    double above = -INFINITY;
    for (size_t listed = 0;
         listed < total && f->nnames < TW_FINDING_MAX_NODES;) {
        const gpu_detail *best = NULL;
        const char *best_node = NULL;
        for (size_t i = 0; i < r->ndet; i++)
            for (size_t g = 0; g < r->det[i].ngpus; g++) {
                const gpu_detail *d = &r->det[i].gpus[g];
                if (d->gpu_95 > above &&
                    (best == NULL || d->gpu_95 < best->gpu_95)) {
                    best = d;
                    best_node = r->det[i].node;
                }
            }
        if (best == NULL)
            break;
        above = best->gpu_95;
        for (size_t i = 0; i < r->ndet; i++)
            for (size_t g = 0; g < r->det[i].ngpus; g++)
                if (r->det[i].gpus[g].gpu_95 == above) {
                    char name[TW_FINDING_NAME_LEN];
                    snprintf(name, sizeof(name), "%s/%s", r->det[i].node,
                             r->det[i].gpus[g].name != NULL
                                 ? r->det[i].gpus[g].name
                                 : "null");
                    tw_finding_add_name(f, name);
                    listed++;
                }
        (void)best_node;
    }
    if (total > f->ninvolved)
        f->ninvolved = total;
    f->first_us = r->viol_first_us;
    f->last_us = r->viol_last_us;
    if (worst == NULL)
        return TW_OK; /* generic text */
    f->value = worst->gpu_95;
    f->limit = r->p95;
    snprintf(f->unit, sizeof(f->unit), "%%");
    if (low > 0) {
        tw_finding_text(f->summary,
                        "%zu GPU(s) were under-used: 95 %% of their recent "
                        "samples stayed below %s %% utilisation.",
                        low, r->param_text[P_P95]);
        tw_finding_text(f->magnitude,
                        "p95 of the last %s samples %.1f %% on %s/%s (rule: "
                        "p95 < %s %%), peak %.1f %%, median over the job "
                        "%.1f %%; %zu under-used, %zu fluctuating",
                        r->param_text[P_WINDOW], worst->gpu_95, worst_node,
                        worst->name != NULL ? worst->name : "null",
                        r->param_text[P_P95], worst->gpu_max, worst->box.p50,
                        low, fluct);
        tw_finding_text(f->recommendation,
                        "Give each GPU more work per step: raise the batch "
                        "size (scale the learning rate with it), or move to "
                        "a smaller or fewer-GPU instance; if a CPU or I/O "
                        "rule also fired, fix that input bottleneck first.");
    } else {
        tw_finding_text(f->summary,
                        "%zu GPU(s) fluctuated: busy most of the time but "
                        "idle below %s %% in at least 5 %% of recent "
                        "samples.",
                        fluct, r->param_text[P_P5]);
        tw_finding_text(f->magnitude,
                        "on %s/%s p95 %.1f %% but p5 %.1f %% (rule: p5 < %s "
                        "%% while p95 > %s %%) over the last %s samples",
                        worst_node, worst->name != NULL ? worst->name : "null",
                        worst->gpu_95, worst->gpu_5, r->param_text[P_P5],
                        r->param_text[P_P95], r->param_text[P_WINDOW]);
        tw_finding_text(f->recommendation,
                        "The GPUs stall waiting for input: prefetch batches "
                        "(DataLoader prefetch_factor, tf.data prefetch), "
                        "use more data-loading workers and pinned memory, "
                        "and look for periodic pauses (checkpointing, "
                        "evaluation, logging) inside the training loop.");
    }
    tw_finding_text(f->parameters,
                    "threshold_p95 %s %%, threshold_p5 %s %%, window %s "
                    "samples, patience %s samples",
                    r->param_text[P_P95], r->param_text[P_P5],
                    r->param_text[P_WINDOW], r->param_text[P_PATIENCE]);
    return TW_OK;
}

static int restore(void *state, const void *data, size_t len, char *err,
                   size_t errlen)
{
    lowgpu *r = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    clear_all(r);
    if (tw_deser_u32(&d) != LOWGPU_TAG)
        tw_deser_fail(&d);
    r->triggered = tw_deser_i64(&d);
    r->violations = tw_deser_i64(&d);
    r->datapoints = tw_deser_i64(&d);
    r->ts_pos = tw_deser_i64(&d);
    r->last_ts = tw_deser_i64(&d);
    uint64_t ng = tw_deser_count(&d, 8);
    for (uint64_t i = 0; i < ng && tw_deser_ok(&d); i++) {
        char *node = tw_deser_str(&d);
        char *name = tw_deser_str(&d);
        gpu_series *g = node != NULL ? find_gpu(r, node, name) : NULL;
        free(node);
        free(name);
        if (g == NULL || g != &r->gpus[r->ngpus - 1]) {
            tw_deser_fail(&d);
            break;
        }
        g->n = tw_deser_u64(&d);
        tw_countmap_restore(&g->hist, &d);
    }
    uint64_t nby = tw_deser_count(&d, 4);
    if (tw_deser_ok(&d) && nby > 0) {
        r->by_series = calloc((size_t)nby, sizeof(*r->by_series));
        if (r->by_series == NULL)
            tw_deser_fail(&d);
        else
            r->nby = (size_t)nby;
    }
    for (size_t i = 0; i < r->nby && tw_deser_ok(&d); i++) {
        r->by_series[i] = tw_deser_u32(&d);
        if (r->by_series[i] > r->ngpus)
            tw_deser_fail(&d);
    }
    uint64_t ndet = tw_deser_count(&d, 12);
    for (uint64_t i = 0; i < ndet && tw_deser_ok(&d); i++) {
        char *node = tw_deser_str(&d);
        uint64_t ngd = tw_deser_count(&d, 76);
        for (uint64_t g = 0; g < ngd && node != NULL && tw_deser_ok(&d); g++) {
            char *name = tw_deser_str(&d);
            gpu_detail *gd = detail_slot(r, node, name);
            free(name);
            if (gd == NULL) {
                tw_deser_fail(&d);
                break;
            }
            double *v[] = {&gd->gpu_max, &gd->gpu_95,    &gd->gpu_5,
                           &gd->box.p25, &gd->box.p50,   &gd->box.p75,
                           &gd->box.p95, &gd->box.upper, &gd->box.lower};
            for (size_t k = 0; k < 9; k++)
                *v[k] = tw_deser_f64(&d);
        }
        if (node == NULL)
            tw_deser_fail(&d);
        free(node);
    }
    /* the finding's trailer; absent in checkpoints of older builds */
    r->viol_first_us = r->viol_last_us = 0;
    if (tw_deser_ok(&d) && d.left > 0) {
        r->viol_first_us = tw_deser_i64(&d);
        r->viol_last_us = tw_deser_i64(&d);
    }
    /* the phase's trailer; absent in checkpoints of older builds */
    memset(&r->phase, 0, sizeof(r->phase));
    if (tw_deser_ok(&d) && d.left > 0)
        tw_job_phase_load(&r->phase, &d);
    if (!tw_deser_done(&d) || r->ts_pos > (int64_t)r->ndet) {
        snprintf(err, errlen, "LowGPUUtilization: corrupt checkpoint");
        return TW_ERR;
    }
    return TW_OK;
}

static const tw_rule_descriptor descriptor = {
    TW_PLUGIN_ABI_VERSION,
    "LowGPUUtilization",
    "GPUs whose recent utilisation is low (p95 below threshold_p95) or "
    "fluctuating (p95 high but p5 below threshold_p5)",
    params,
    P_COUNT,
    create,
    scan,
    NULL, /* report: ABI 1 only */
    save,
    restore,
    destroy,
    0,
    finding,
    "A GPU is under-used (its recent p95 is low) or fluctuates (busy, but "
    "idle in at least 5 % of recent samples). Under-used: give it more work "
    "per step (larger batch) or use fewer/smaller GPUs. Fluctuating: the "
    "input pipeline stalls; prefetch, add loader workers, pin memory, and "
    "look for periodic pauses in the training loop.",
    details,
    parameters_text, /* RuleParameters: the reference's, not init_grace */
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_SYSTEM;
}
