/*
 * batch_size.c - BatchSize (RULES.md §3.5).
 *
 * Suggests a larger batch size when a node's CPU (average over cores), a
 * GPU's utilisation and its memory are all under-used: windowed p95s below
 * their thresholds.
 *
 * Semantics (quirk numbers of RULES.md §3.5):
 *  - different in the two modes:
 *    1. memory box plot: reference computes the memory whiskers with
 *       iqr = memory p75 - *utilisation* p25; fixed uses the memory IQR.
 *  - fixed, phase-aware: samples of the initialization phase (before the
 *    job's first step, rules/common/job_phase.h) are not taken in: idle,
 *    empty GPUs while the job loads are no batch-size problem. Before
 *    the first step event, samples within `init_grace` minutes of the
 *    job's start count as initialization; a job without the hook is
 *    evaluated after that. The finalization (more than 10 s after the
 *    newest step's end, job_phase.h) is skipped the same way: idle GPUs
 *    while the model is saved are no batch-size problem either. EVAL
 *    steps are judged with the TRAIN ones (docs/rules.md "Phases").
 *  - the same in both modes: 2 (Details["last_timestamp"] is the rule's
 *    clock, scan->rule_clock_us), 3 (a node without GPU series, or a GPU
 *    without a memory series, is skipped instead of crashing), 4 (CPU
 *    divisor = union of core names over all nodes as of the scan's end),
 *    5 (CPU points grouped by exact timestamp per scan; a boundary
 *    timestamp yields a point in both scans), 6 (no reset), 7 (one CPU
 *    decision gates all GPUs; each violating GPU counts once per scan).
 *  - window = 0 means the whole history (Python slice), answered from the
 *    count maps.
 *
 * Memory: per node a ring of W CPU averages (W = window) and a count map
 * of the distinct averages; per GPU two rings of W values (utilisation,
 * memory) and two count maps; the set of core names; and, during a scan
 * only, the scan's (timestamp -> CPU sum) map. In fixed the count maps
 * feed only Details' box plots when window > 0 (the verdict reads the
 * rings), so they are capped at TW_SYS_REPORT_CAP (256) keys (beyond it
 * each box value is within max(R/255, 0.005), see sysutil.h); with
 * window = 0 the verdict's p95 reads them, so they keep
 * TW_COUNTMAP_DEFAULT_CAP (exact for two-decimal percentages). fixed
 * holds at most about N*(8W + 10 KB) + N*G*(16W + 20 KB) + O(C) bytes
 * (W > 0). The CPU ring is saved as averages of hundredths over |cores|
 * (sysutil.h, tw_dring_save_avg): ~3 bytes a point instead of 8.
 * reference leaves the count maps uncapped (one entry per distinct value:
 * exact box plots for any data, e.g. CPU averages of many cores).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_phase.h"
#include "select.h"
#include "sysutil.h"
#include "trainwatch/countmap.h"
#include "trainwatch/dmap.h"
#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

#define BS_NOSEQ UINT32_MAX
#define BS_STATE_TAG 0x42535a31u /* "BSZ1" */

enum { P_CPU = 0, P_GPU, P_MEM, P_PATIENCE, P_WINDOW, P_INIT_GRACE, P_COUNT };

static const tw_param_spec bs_params[P_COUNT] = {
    {"cpu_threshold_p95", TW_PARAM_DOUBLE, "70", 0.0, 100.0,
     "%: the windowed p95 of the node's average CPU utilisation must be "
     "below this"},
    {"gpu_threshold_p95", TW_PARAM_DOUBLE, "70", 0.0, 100.0,
     "%: the windowed p95 of the GPU's utilisation must be below this"},
    {"gpu_memory_threshold_p95", TW_PARAM_DOUBLE, "70", 0.0, 100.0,
     "%: the windowed p95 of the GPU's memory utilisation must be below this"},
    {"patience", TW_PARAM_INT, "1000", 0.0, 1e9,
     "evaluate a node only when it has more than this many CPU points"},
    {"window", TW_PARAM_INT, "500", 0.0, 100000.0,
     "number of most recent points for the p95s (0 = whole history)"},
    {"init_grace", TW_PARAM_DOUBLE, "30", 0.0, 525600.0,
     "trainwatch extension, fixed semantics only: minutes from the job's "
     "first timestamp during which samples of a job that has shown no "
     "step event yet count as initialization (not evaluated)"},
};

/* A history: newest W values, whole-history multiset, length. */
typedef struct bs_hist {
    tw_dring ring;
    tw_countmap all;
    uint64_t n;
} bs_hist;

typedef struct bs_cpu_node {
    bs_hist h;
    tw_dmap scan_sums; /* this scan: timestamp -> CPU sum (double bits) */
    size_t last;       /* scan_sums' entry of the last sample (a cache) */
    uint32_t det_seq;  /* order of Details[node]; BS_NOSEQ             */
    tw_box box;        /* Details[node]["cpu"]                          */
} bs_cpu_node;

typedef struct bs_gpu {
    bs_hist h;
    uint32_t det_seq; /* order of Details[node][gpu] */
    tw_box box, mem_box;
} bs_gpu;

typedef struct bs {
    const tw_host *host;
    tw_semantics sem;
    double cpu_thr, gpu_thr, mem_thr;
    int64_t patience;
    uint32_t window;
    const char *ptext[P_COUNT];
    char params_text[512]; /* RuleParameters: the reference's parameters */

    tw_namemap cpu_nodes; /* nodes with CPU data, first-seen order */
    bs_cpu_node *cpu;
    uint32_t cpu_cap;
    tw_namemap cores; /* union of CPU series names              */
    tw_seriestab util_tab, mem_tab;
    bs_gpu *util;
    uint32_t util_cap;
    bs_hist *mem;
    uint32_t mem_cap;
    uint32_t
        *cpu_cache; /* host series id -> cpu node + 1; UINT32_MAX = not CPU */
    uint32_t cpu_cache_cap;
    double *scratch; /* W values for sorting */

    int64_t triggered, violations, datapoints;
    uint32_t next_seq, lt_seq;
    int64_t last_timestamp;

    /* For the finding (an optional checkpoint trailer): the first and last
     * scan windows with a violation, and the p95s of the latest one. */
    int64_t viol_first_us, viol_last_us;
    double last_cpu95, last_gpu95, last_mem95;
    tw_job_phase phase; /* fixed: the initialization to skip */
    int64_t grace_us;   /* fixed: init_grace */
} bs;

static int wants_util(const tw_series *s)
{
    return tw_sys_str_eq(s->dimension, "GPUUtilization");
}

static int wants_mem(const tw_series *s)
{
    return tw_sys_str_eq(s->dimension, "GPUMemoryUtilization");
}

static int bs_hist_init(bs *r, bs_hist *h)
{
    memset(h, 0, sizeof(*h));
    /* with a window the map feeds only Details' box plots: a small cap;
     * window = 0 reads the verdict's p95 from it: the exact-hundredths cap */
    size_t cap = r->window > 0 ? TW_SYS_REPORT_CAP : TW_COUNTMAP_DEFAULT_CAP;
    tw_countmap_init(&h->all, r->sem == TW_SEMANTICS_FIXED ? cap : 0);
    return tw_dring_init(&h->ring, r->window);
}

static void bs_hist_free(bs_hist *h)
{
    tw_dring_free(&h->ring);
    tw_countmap_free(&h->all);
}

static int bs_hist_push(bs_hist *h, double v)
{
    tw_dring_push(&h->ring, v);
    h->n++;
    return tw_countmap_add(&h->all, v);
}

/* Q(h[-window:], .95). */
static int bs_p95(bs *r, bs_hist *h, double *out)
{
    if (r->window == 0)
        return tw_countmap_quantile(&h->all, 0.95, out);
    size_t n = tw_dring_copy(&h->ring, 0, r->window, r->scratch);
    if (n == 0)
        return TW_ERR;
    /* selection, not a sort, at every scan: the same order statistics, so
     * the same value; a NaN takes numpy's sorted path */
    for (size_t i = 0; i < n; i++) {
        if (isnan(r->scratch[i])) {
            r->host->sort_doubles(r->scratch, n);
            *out = r->host->quantile_sorted(r->scratch, n, 0.95);
            return TW_OK;
        }
    }
    *out = tw_select_quantile(r->scratch, n, 0.95);
    return TW_OK;
}

static void bs_destroy(void *state)
{
    bs *r = state;
    if (r == NULL)
        return;
    /* every slot up to the capacity is zeroed or initialised */
    for (uint32_t i = 0; i < r->cpu_cap; i++) {
        bs_hist_free(&r->cpu[i].h);
        tw_dmap_free(&r->cpu[i].scan_sums);
    }
    for (uint32_t i = 0; i < r->util_cap; i++)
        bs_hist_free(&r->util[i].h);
    for (uint32_t i = 0; i < r->mem_cap; i++)
        bs_hist_free(&r->mem[i]);
    free(r->cpu);
    free(r->util);
    free(r->mem);
    free(r->cpu_cache);
    free(r->scratch);
    tw_namemap_free(&r->cpu_nodes);
    tw_namemap_free(&r->cores);
    tw_seriestab_free(&r->util_tab);
    tw_seriestab_free(&r->mem_tab);
    free(r);
}

static const char *bs_parameters_text(void *state)
{
    return ((const bs *)state)->params_text;
}

static int bs_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen, "BatchSize: expected %d parameters, got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    bs *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "BatchSize: out of memory");
        return TW_ERR;
    }
    r->host = host;
    r->sem = params->semantics;
    r->cpu_thr = params->values[P_CPU].d;
    r->gpu_thr = params->values[P_GPU].d;
    r->mem_thr = params->values[P_MEM].d;
    r->patience = params->values[P_PATIENCE].i;
    r->window = (uint32_t)params->values[P_WINDOW].i;
    r->grace_us = params->values[P_INIT_GRACE].is_none
                      ? 0
                      : (int64_t)(params->values[P_INIT_GRACE].d * 60e6);
    for (int i = 0; i < P_COUNT; i++)
        r->ptext[i] = params->values[i].text;
    if (tw_job_phase_params_text(bs_params, params, P_INIT_GRACE,
                                 r->params_text,
                                 sizeof(r->params_text)) != TW_OK) {
        snprintf(err, errlen, "BatchSize: parameter values too long");
        free(r);
        return TW_ERR;
    }
    r->lt_seq = BS_NOSEQ;
    tw_namemap_init(&r->cpu_nodes);
    tw_namemap_init(&r->cores);
    tw_seriestab_init(&r->util_tab);
    tw_seriestab_init(&r->mem_tab);
    r->scratch = malloc(((size_t)r->window + 1) * sizeof(double));
    if (r->scratch == NULL) {
        bs_destroy(r);
        snprintf(err, errlen, "BatchSize: out of memory");
        return TW_ERR;
    }
    *state = r;
    return TW_OK;
}

static int bs_cpu_node_add(bs *r, const char *node, uint32_t *idx)
{
    int added;
    if (tw_sys_grow((void **)&r->cpu, sizeof(bs_cpu_node), &r->cpu_cap,
                    r->cpu_nodes.count + 1) != TW_OK ||
        tw_namemap_add(&r->cpu_nodes, node, idx, &added) != TW_OK)
        return TW_ERR;
    if (!added)
        return TW_OK;
    bs_cpu_node *c = &r->cpu[*idx];
    c->det_seq = BS_NOSEQ;
    tw_dmap_init(&c->scan_sums);
    c->last = 0;
    return bs_hist_init(r, &c->h);
}

static int bs_util_new(bs *r, uint32_t id)
{
    if (tw_sys_grow((void **)&r->util, sizeof(bs_gpu), &r->util_cap, id + 1) !=
        TW_OK)
        return TW_ERR;
    r->util[id].det_seq = BS_NOSEQ;
    return bs_hist_init(r, &r->util[id].h);
}

static int bs_mem_new(bs *r, uint32_t id)
{
    if (tw_sys_grow((void **)&r->mem, sizeof(bs_hist), &r->mem_cap, id + 1) !=
        TW_OK)
        return TW_ERR;
    return bs_hist_init(r, &r->mem[id]);
}

/* CPU node of a CPUUtilization sample (adding it), or UINT32_MAX. */
static int bs_cpu_resolve(bs *r, const tw_scan *scan, uint32_t sid,
                          uint32_t *idx)
{
    *idx = UINT32_MAX;
    if (sid >= scan->nseries)
        return TW_OK;
    if (tw_sys_grow((void **)&r->cpu_cache, sizeof(uint32_t), &r->cpu_cache_cap,
                    (uint32_t)scan->nseries) != TW_OK)
        return TW_ERR;
    uint32_t c = r->cpu_cache[sid];
    if (c == UINT32_MAX)
        return TW_OK;
    if (c != 0) {
        *idx = c - 1;
        return TW_OK;
    }
    const tw_series *s = &scan->series[sid];
    if (!tw_sys_str_eq(s->dimension, "CPUUtilization")) {
        r->cpu_cache[sid] = UINT32_MAX;
        return TW_OK;
    }
    const char *node = s->node < scan->nnodes ? scan->nodes[s->node] : "";
    if (bs_cpu_node_add(r, node, idx) != TW_OK)
        return TW_ERR;
    r->cpu_cache[sid] = *idx + 1;
    return TW_OK;
}

static int bs_ingest(bs *r, const tw_scan *scan)
{
    int fixed = r->sem == TW_SEMANTICS_FIXED;
    if (fixed)
        tw_job_phase_note(&r->phase, scan);
    for (size_t i = 0; i < scan->nsamples; i++) {
        const tw_sample *smp = &scan->samples[i];
        if (fixed &&
            tw_job_phase_outside(&r->phase, smp->ts, scan->first_timestamp_us,
                                 r->grace_us))
            continue;
        uint32_t id;
        int added;
        if (tw_seriestab_resolve(&r->mem_tab, scan, smp->series, wants_mem, &id,
                                 &added) != TW_OK ||
            (added && bs_mem_new(r, id) != TW_OK))
            return TW_ERR;
        if (id != TW_SERIES_NONE) {
            if (bs_hist_push(&r->mem[id], smp->value) != TW_OK)
                return TW_ERR;
            continue;
        }
        if (tw_seriestab_resolve(&r->util_tab, scan, smp->series, wants_util,
                                 &id, &added) != TW_OK ||
            (added && bs_util_new(r, id) != TW_OK))
            return TW_ERR;
        if (id != TW_SERIES_NONE) {
            if (bs_hist_push(&r->util[id].h, smp->value) != TW_OK)
                return TW_ERR;
            continue;
        }
        uint32_t cn;
        if (bs_cpu_resolve(r, scan, smp->series, &cn) != TW_OK)
            return TW_ERR;
        if (cn == UINT32_MAX)
            continue;
        uint32_t core;
        if (tw_namemap_add(&r->cores, scan->series[smp->series].name, &core,
                           NULL) != TW_OK)
            return TW_ERR;
        /* a sample's cores come together, at one timestamp */
        tw_dmap *sums = &r->cpu[cn].scan_sums;
        uint64_t *slot;
        if (r->cpu[cn].last < sums->n &&
            sums->ent[r->cpu[cn].last].key == smp->ts) {
            slot = &sums->ent[r->cpu[cn].last].val; /* what put would find */
        } else {
            slot = tw_dmap_put(sums, smp->ts, 0, NULL);
            if (slot == NULL)
                return TW_ERR;
            r->cpu[cn].last =
                (size_t)((const char *)slot - (const char *)sums->ent) /
                sizeof(tw_dmap_entry);
        }
        double sum;
        memcpy(&sum, slot, sizeof(sum));
        sum += smp->value;
        memcpy(slot, &sum, sizeof(sum));
    }
    /* each scan timestamp becomes one CPU point: sum / |cores| */
    double ncores = (double)r->cores.count;
    for (uint32_t n = 0; n < r->cpu_nodes.count; n++) {
        tw_dmap *t = &r->cpu[n].scan_sums;
        for (size_t k = 0; k < t->n; k++) {
            double sum;
            memcpy(&sum, &t->ent[k].val, sizeof(sum));
            if (bs_hist_push(&r->cpu[n].h, sum / ncores) != TW_OK)
                return TW_ERR;
        }
        tw_dmap_clear(t);
    }
    return TW_OK;
}

static uint32_t bs_seq(bs *r, uint32_t *seq)
{
    if (*seq == BS_NOSEQ)
        *seq = r->next_seq++;
    return *seq;
}

static int bs_violation(bs *r, uint32_t cn, uint32_t gid, uint32_t mid,
                        int64_t clock)
{
    bs_cpu_node *c = &r->cpu[cn];
    bs_gpu *g = &r->util[gid];
    bs_hist *m = &r->mem[mid];
    if (tw_countmap_box(&c->h.all, &c->box) != TW_OK ||
        tw_countmap_box(&g->h.all, &g->box) != TW_OK ||
        tw_countmap_box(&m->all, &g->mem_box) != TW_OK)
        return TW_ERR;
    if (r->sem == TW_SEMANTICS_REFERENCE) {
        /* quirk 1: memory p75 minus the utilisation p25 */
        tw_box *b = &g->mem_box;
        double iqr = b->p75 - g->box.p25;
        double up = b->p75 + 1.5 * iqr, lo = b->p25 - 1.5 * iqr;
        double mx = tw_countmap_max(&m->all), mn = tw_countmap_min(&m->all);
        b->upper = mx < up ? mx : up;
        b->lower = mn > lo ? mn : lo;
    }
    bs_seq(r, &c->det_seq);
    bs_seq(r, &g->det_seq);
    r->last_timestamp = clock;
    bs_seq(r, &r->lt_seq);
    r->triggered++;
    r->violations++;
    return TW_OK;
}

static int bs_evaluate(bs *r, int64_t clock)
{
    for (uint32_t cn = 0; cn < r->cpu_nodes.count; cn++) {
        bs_cpu_node *c = &r->cpu[cn];
        r->datapoints = (int64_t)c->h.n;
        if (c->h.n <= r->window || (int64_t)c->h.n <= r->patience)
            continue;
        double cpu95;
        if (bs_p95(r, &c->h, &cpu95) != TW_OK)
            return TW_ERR;
        if (!(cpu95 < r->cpu_thr))
            continue;
        const char *node = tw_namemap_key(&r->cpu_nodes, cn);
        uint32_t un = tw_namemap_find(&r->util_tab.nodes, node);
        if (un == UINT32_MAX)
            continue; /* quirk 3: no GPU data for this node */
        for (uint32_t gid = 0; gid < tw_seriestab_count(&r->util_tab); gid++) {
            if (tw_seriestab_node(&r->util_tab, gid) != un)
                continue;
            bs_gpu *g = &r->util[gid];
            if (g->h.n <= r->window)
                continue;
            uint32_t mid = tw_seriestab_find(
                &r->mem_tab, node, tw_seriestab_name(&r->util_tab, gid));
            if (mid == TW_SERIES_NONE)
                continue; /* quirk 3: utilisation without memory */
            double g95, m95;
            if (bs_p95(r, &g->h, &g95) != TW_OK ||
                bs_p95(r, &r->mem[mid], &m95) != TW_OK)
                return TW_ERR;
            if (g95 < r->gpu_thr && m95 < r->mem_thr) {
                if (bs_violation(r, cn, gid, mid, clock) != TW_OK)
                    return TW_ERR;
                r->last_cpu95 = cpu95;
                r->last_gpu95 = g95;
                r->last_mem95 = m95;
            }
        }
    }
    return TW_OK;
}

static int bs_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    bs *r = state;
    int64_t before = r->violations;
    if (bs_ingest(r, scan) != TW_OK ||
        bs_evaluate(r, scan->rule_clock_us) != TW_OK) {
        snprintf(err, errlen, "BatchSize: out of memory");
        return TW_ERR;
    }
    if (r->violations > before) {
        if (r->viol_first_us == 0)
            r->viol_first_us = scan->start_us;
        r->viol_last_us = scan->end_us;
    }
    out->condition_met = r->triggered > 0;
    out->rule_triggered = r->triggered;
    out->violations = r->violations;
    out->datapoints = r->datapoints;
    return TW_OK;
}

static void bs_write_box(const tw_host *h, tw_json *j, const tw_box *b)
{
    h->json_object_begin(j);
    h->json_key(j, "p25");
    h->json_double(j, b->p25);
    h->json_key(j, "p50");
    h->json_double(j, b->p50);
    h->json_key(j, "p75");
    h->json_double(j, b->p75);
    h->json_key(j, "p95");
    h->json_double(j, b->p95);
    h->json_key(j, "upper");
    h->json_double(j, b->upper);
    h->json_key(j, "lower");
    h->json_double(j, b->lower);
    h->json_object_end(j);
}

static void bs_write_node(bs *r, tw_json *j, uint32_t cn)
{
    const tw_host *h = r->host;
    const char *node = tw_namemap_key(&r->cpu_nodes, cn);
    uint32_t un = tw_namemap_find(&r->util_tab.nodes, node);
    h->json_key(j, node);
    h->json_object_begin(j);
    h->json_key(j, "cpu");
    bs_write_box(h, j, &r->cpu[cn].box);
    uint32_t nser = tw_seriestab_count(&r->util_tab);
    for (uint32_t seq = r->cpu[cn].det_seq + 1; seq < r->next_seq; seq++) {
        for (uint32_t gid = 0; gid < nser; gid++) {
            const bs_gpu *g = &r->util[gid];
            if (g->det_seq != seq || tw_seriestab_node(&r->util_tab, gid) != un)
                continue;
            const char *name = tw_seriestab_name(&r->util_tab, gid);
            if (name == NULL)
                name = "None"; /* Python: None + "_memory" cannot happen */
            h->json_key(j, name);
            bs_write_box(h, j, &g->box);
            size_t len = strlen(name) + sizeof("_memory");
            char *mkey = malloc(len);
            if (mkey == NULL)
                continue;
            snprintf(mkey, len, "%s_memory", name);
            h->json_key(j, mkey);
            free(mkey);
            bs_write_box(h, j, &g->mem_box);
        }
    }
    h->json_object_end(j);
}

static int bs_details(void *state, tw_json *j)
{
    bs *r = state;
    const tw_host *h = r->host;
    h->json_object_begin(j);
    for (uint32_t seq = 0; seq < r->next_seq; seq++) {
        if (seq == r->lt_seq) {
            h->json_key(j, "last_timestamp");
            h->json_int(j, r->last_timestamp);
            continue;
        }
        for (uint32_t cn = 0; cn < r->cpu_nodes.count; cn++)
            if (r->cpu[cn].det_seq == seq)
                bs_write_node(r, j, cn);
    }
    h->json_object_end(j);
    return TW_OK;
}

static void bs_save_box(tw_ser *s, const tw_box *b)
{
    tw_ser_f64(s, b->p25);
    tw_ser_f64(s, b->p50);
    tw_ser_f64(s, b->p75);
    tw_ser_f64(s, b->p95);
    tw_ser_f64(s, b->upper);
    tw_ser_f64(s, b->lower);
}

static void bs_load_box(tw_deser *d, tw_box *b)
{
    b->p25 = tw_deser_f64(d);
    b->p50 = tw_deser_f64(d);
    b->p75 = tw_deser_f64(d);
    b->p95 = tw_deser_f64(d);
    b->upper = tw_deser_f64(d);
    b->lower = tw_deser_f64(d);
}

/* divisor: the CPU points' |cores| (averages: a compact ring), else 1 */
static void bs_save_hist(tw_ser *s, const bs_hist *h, uint32_t divisor)
{
    tw_ser_u64(s, h->n);
    tw_dring_save_avg(&h->ring, s, divisor);
    tw_countmap_save(&h->all, s);
}

static int bs_load_hist(tw_deser *d, bs_hist *h)
{
    h->n = tw_deser_u64(d);
    if (tw_dring_load(&h->ring, d) != TW_OK ||
        tw_countmap_restore(&h->all, d) != TW_OK)
        return TW_ERR;
    return TW_OK;
}

static int bs_save(void *state, tw_buf *out)
{
    bs *r = state;
    tw_ser s;
    tw_ser_init(&s, r->host, out);
    tw_ser_u32(&s, BS_STATE_TAG);
    tw_ser_i64(&s, r->triggered);
    tw_ser_i64(&s, r->violations);
    tw_ser_i64(&s, r->datapoints);
    tw_ser_u32(&s, r->next_seq);
    tw_ser_u32(&s, r->lt_seq);
    tw_ser_i64(&s, r->last_timestamp);
    tw_namemap_save(&r->cores, &s);
    tw_namemap_save(&r->cpu_nodes, &s);
    for (uint32_t i = 0; i < r->cpu_nodes.count; i++) {
        tw_ser_u32(&s, r->cpu[i].det_seq);
        bs_save_box(&s, &r->cpu[i].box);
        bs_save_hist(&s, &r->cpu[i].h, r->cores.count);
    }
    tw_seriestab_save(&r->util_tab, &s);
    for (uint32_t i = 0; i < tw_seriestab_count(&r->util_tab); i++) {
        tw_ser_u32(&s, r->util[i].det_seq);
        bs_save_box(&s, &r->util[i].box);
        bs_save_box(&s, &r->util[i].mem_box);
        bs_save_hist(&s, &r->util[i].h, 1);
    }
    tw_seriestab_save(&r->mem_tab, &s);
    for (uint32_t i = 0; i < tw_seriestab_count(&r->mem_tab); i++)
        bs_save_hist(&s, &r->mem[i], 1);
    tw_ser_i64(&s, r->viol_first_us);
    tw_ser_i64(&s, r->viol_last_us);
    tw_ser_f64(&s, r->last_cpu95);
    tw_ser_f64(&s, r->last_gpu95);
    tw_ser_f64(&s, r->last_mem95);
    tw_job_phase_save(&r->phase, &s);
    return tw_ser_ok(&s) ? TW_OK : TW_ERR;
}

static int bs_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    bs *r = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    if (tw_deser_u32(&d) != BS_STATE_TAG || r->cpu_nodes.count != 0 ||
        tw_seriestab_count(&r->util_tab) != 0) {
        snprintf(err, errlen,
                 "BatchSize: not a BatchSize checkpoint, or "
                 "restore into a used instance");
        return TW_ERR;
    }
    r->triggered = tw_deser_i64(&d);
    r->violations = tw_deser_i64(&d);
    r->datapoints = tw_deser_i64(&d);
    r->next_seq = tw_deser_u32(&d);
    r->lt_seq = tw_deser_u32(&d);
    r->last_timestamp = tw_deser_i64(&d);
    tw_namemap nodes;
    tw_namemap_init(&nodes);
    if (tw_namemap_load(&r->cores, &d) != TW_OK ||
        tw_namemap_load(&nodes, &d) != TW_OK) {
        tw_namemap_free(&nodes);
        goto bad;
    }
    for (uint32_t i = 0; i < nodes.count; i++) {
        uint32_t idx;
        if (bs_cpu_node_add(r, tw_namemap_key(&nodes, i), &idx) != TW_OK ||
            idx != i) {
            tw_namemap_free(&nodes);
            goto bad;
        }
        r->cpu[i].det_seq = tw_deser_u32(&d);
        bs_load_box(&d, &r->cpu[i].box);
        if (bs_load_hist(&d, &r->cpu[i].h) != TW_OK) {
            tw_namemap_free(&nodes);
            goto bad;
        }
    }
    tw_namemap_free(&nodes);
    if (tw_seriestab_load(&r->util_tab, &d) != TW_OK)
        goto bad;
    for (uint32_t i = 0; i < tw_seriestab_count(&r->util_tab); i++) {
        if (bs_util_new(r, i) != TW_OK)
            goto bad;
        r->util[i].det_seq = tw_deser_u32(&d);
        bs_load_box(&d, &r->util[i].box);
        bs_load_box(&d, &r->util[i].mem_box);
        if (bs_load_hist(&d, &r->util[i].h) != TW_OK)
            goto bad;
    }
    if (tw_seriestab_load(&r->mem_tab, &d) != TW_OK)
        goto bad;
    for (uint32_t i = 0; i < tw_seriestab_count(&r->mem_tab); i++)
        if (bs_mem_new(r, i) != TW_OK || bs_load_hist(&d, &r->mem[i]) != TW_OK)
            goto bad;
    /* the finding's trailer; absent in checkpoints of older builds */
    if (tw_deser_ok(&d) && d.left > 0) {
        r->viol_first_us = tw_deser_i64(&d);
        r->viol_last_us = tw_deser_i64(&d);
        r->last_cpu95 = tw_deser_f64(&d);
        r->last_gpu95 = tw_deser_f64(&d);
        r->last_mem95 = tw_deser_f64(&d);
    }
    /* the phase's trailer; absent in checkpoints of older builds */
    memset(&r->phase, 0, sizeof(r->phase));
    if (tw_deser_ok(&d) && d.left > 0)
        tw_job_phase_load(&r->phase, &d);
    if (tw_deser_done(&d))
        return TW_OK;
bad:
    snprintf(err, errlen, "BatchSize: corrupt or truncated checkpoint");
    return TW_ERR;
}

/* The GPUs judged under-used in all three respects, in report order. */
static int bs_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                      char *err, size_t errlen)
{
    bs *r = state;
    (void)ctx, (void)err, (void)errlen;
    uint32_t flagged = 0;
    for (uint32_t seq = 0; seq < r->next_seq; seq++)
        for (uint32_t gid = 0; gid < tw_seriestab_count(&r->util_tab); gid++) {
            if (r->util[gid].det_seq != seq)
                continue;
            char name[TW_FINDING_NAME_LEN];
            const char *g = tw_seriestab_name(&r->util_tab, gid);
            snprintf(name, sizeof(name), "%s/%s",
                     tw_seriestab_node_name(
                         &r->util_tab, tw_seriestab_node(&r->util_tab, gid)),
                     g != NULL ? g : "null");
            tw_finding_add_name(f, name);
            flagged++;
        }
    if (flagged > f->ninvolved)
        f->ninvolved = flagged;
    f->first_us = r->viol_first_us;
    f->last_us = r->viol_last_us;
    f->value = r->last_gpu95;
    f->limit = r->gpu_thr;
    snprintf(f->unit, sizeof(f->unit), "%%");
    tw_finding_text(f->summary,
                    "%u GPU(s) and their hosts had capacity to spare: the "
                    "batch is probably too small for the hardware.",
                    flagged);
    tw_finding_text(f->magnitude,
                    "p95 over the last %s samples: GPU %.1f %% (< %s), GPU "
                    "memory %.1f %% (< %s), node CPU %.1f %% (< %s); %lld "
                    "GPU-scan(s) flagged",
                    r->ptext[P_WINDOW], r->last_gpu95, r->ptext[P_GPU],
                    r->last_mem95, r->ptext[P_MEM], r->last_cpu95,
                    r->ptext[P_CPU], (long long)r->violations);
    tw_finding_text(f->recommendation,
                    "Raise the batch size (and the learning rate with it) "
                    "until GPU memory is well used, or train on a smaller "
                    "instance type with fewer or smaller GPUs.");
    tw_finding_text(f->parameters,
                    "cpu_threshold_p95 %s %%, gpu_threshold_p95 %s %%, "
                    "gpu_memory_threshold_p95 %s %%, window %s, patience %s",
                    r->ptext[P_CPU], r->ptext[P_GPU], r->ptext[P_MEM],
                    r->ptext[P_WINDOW], r->ptext[P_PATIENCE]);
    return TW_OK;
}

static const tw_rule_descriptor bs_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "BatchSize",
    .description = "Suggests a larger batch size when CPU, GPU and GPU "
                   "memory are all under-used.",
    .params = bs_params,
    .nparams = P_COUNT,
    .create = bs_create,
    .scan = bs_scan,
    .details = bs_details,
    .parameters_text = bs_parameters_text,
    .save = bs_save,
    .restore = bs_restore,
    .destroy = bs_destroy,
    .finding = bs_finding,
    .finding_help =
        "A GPU, its memory and its node's CPUs were all under-used: the batch "
        "is probably too small for the hardware. Raise the batch size (and "
        "the learning rate with it), or use a smaller instance.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &bs_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_SYSTEM;
}
