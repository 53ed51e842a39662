/*
 * gpu_memory_increase.c - GPUMemoryIncrease (RULES.md §3.4).
 *
 * Flags sharp increases of a GPU's memory footprint: per sample, the mean
 * of the newest `window` values is compared with the mean of older ones.
 *
 * Semantics (quirk numbers of RULES.md §3.4):
 *  - different in the two modes:
 *    1. overlapping windows: reference prev = mean(v[-window-1:-2]) and
 *       evaluates once len(v) > window + 1; fixed prev =
 *       mean(v[-2*window:-window]) and evaluates once both windows are full
 *       (len(v) >= 2*window; window 0 never evaluates).
 *    6. first-allocation false positive: reference counts `patience` from
 *       the series' first sample; fixed makes a sample eligible only when
 *       its timestamp is at or after the start of the job's first step
 *       event (a framework event with a Step:ModeKeys mode, seen in this or
 *       an earlier scan); while the job has shown no framework event at
 *       all, `patience` counts from the series' first non-zero value
 *       instead; framework events but no step yet => not eligible. A
 *       sample of the finalization (more than 10 s after the newest
 *       step's end, job_phase.h) is not eligible either: loading or
 *       freeing while the model is saved is no leak.
 *  - the same in both modes: 2 (per-sample counting), 3 (reset at
 *    1 000 000 values: both modes clear every series and continue with the
 *    current sample as the first of a new series, Details kept; Datapoints
 *    is then 1), 4 (`p05` key), 5 (an empty "prev" is NaN: no trigger;
 *    reference window <= 1).
 *  - Details["last_timestamp"] is the scan start (µs) in both modes.
 *
 * Memory: per series (G GPUs on N nodes) a ring of 2*W+1 doubles (W =
 * window) for the moving averages, exact for both modes, and a count map
 * of the distinct values for the whole-history max/p05/box plot: in fixed
 * it is capped at TW_COUNTMAP_DEFAULT_CAP keys (exact for percentages with
 * two decimals), so fixed holds about N*G*(8*(2W+1) + 0.7 MB) bytes at
 * most; reference keeps the count map uncapped (exact for any values, one
 * entry per distinct value). Means go through host->mean over exactly the
 * values numpy would see, so diffs are bit-identical.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_phase.h"
#include "sysutil.h"
#include "trainwatch/countmap.h"
#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

#define GMI_MAX_DATAPOINTS 1000000u
#define GMI_NOSEQ UINT32_MAX
#define GMI_STATE_TAG 0x474d4931u /* "GMI1" */

enum { P_INCREASE = 0, P_PATIENCE, P_WINDOW, P_COUNT };

static const tw_param_spec gmi_params[P_COUNT] = {
    {"increase", TW_PARAM_DOUBLE, "5", 0.0, 100.0,
     "percentage points: trigger when the moving average of GPU memory "
     "utilisation rises by more than this"},
    {"patience", TW_PARAM_INT, "1000", 0.0, 1e9,
     "evaluate a GPU only when its series has more than this many samples"},
    {"window", TW_PARAM_INT, "10", 0.0, 100000.0,
     "moving-average length in samples"},
};

/* Details record: increase, gpu_max, p05, p25, p50, p75, p95, upper, lower */
enum {
    R_INCREASE = 0,
    R_MAX,
    R_P05,
    R_P25,
    R_P50,
    R_P75,
    R_P95,
    R_UPPER,
    R_LOWER,
    R_COUNT
};
static const char *const gmi_rec_keys[R_COUNT] = {
    "increase", "gpu_max", "p05", "p25", "p50", "p75", "p95", "upper", "lower"};

typedef struct gmi_series {
    tw_dring ring;      /* newest 2W+1 values                         */
    uint64_t n;         /* len(v) since the start or the last reset   */
    uint64_t n_nonzero; /* values since the first non-zero one        */
    tw_countmap hist;   /* whole-history multiset                     */
    uint32_t det_seq;   /* order of Details[node][gpu]; GMI_NOSEQ     */
    double rec[R_COUNT];
} gmi_series;

typedef struct gmi {
    const tw_host *host;
    tw_semantics sem;
    double increase;
    int64_t patience;
    uint32_t window;
    const char *ptext[P_COUNT];

    tw_seriestab tab;
    gmi_series *series;
    uint32_t series_cap;
    uint32_t *node_seq; /* per table node: order of Details[node]      */
    uint32_t node_cap;
    double *scratch; /* window values for host->mean                */

    int64_t triggered, violations, datapoints;
    uint32_t next_seq;
    uint32_t lt_seq; /* order of Details["last_timestamp"]     */
    int64_t last_timestamp;
    tw_job_phase phase; /* the first step start (fixed) */

    /* For the finding (an optional checkpoint trailer): sample times of
     * the first and the last increase, and the largest increase. */
    int64_t viol_first_us, viol_last_us;
    double max_increase;
} gmi;

static int wants_gpu_mem(const tw_series *s)
{
    return tw_sys_str_eq(s->dimension, "GPUMemoryUtilization");
}

static void gmi_destroy(void *state)
{
    gmi *r = state;
    if (r == NULL)
        return;
    /* every slot up to the capacity is zeroed or initialised */
    for (uint32_t i = 0; i < r->series_cap; i++) {
        tw_dring_free(&r->series[i].ring);
        tw_countmap_free(&r->series[i].hist);
    }
    free(r->series);
    free(r->node_seq);
    free(r->scratch);
    tw_seriestab_free(&r->tab);
    free(r);
}

static int gmi_create(const tw_host *host, const tw_params *params,
                      void **state, char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen,
                 "GPUMemoryIncrease: expected %d parameters, got %zu", P_COUNT,
                 params->nvalues);
        return TW_ERR;
    }
    gmi *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "GPUMemoryIncrease: out of memory");
        return TW_ERR;
    }
    r->host = host;
    r->sem = params->semantics;
    r->increase = params->values[P_INCREASE].d;
    r->patience = params->values[P_PATIENCE].i;
    r->window = (uint32_t)params->values[P_WINDOW].i;
    for (int i = 0; i < P_COUNT; i++)
        r->ptext[i] = params->values[i].text;
    r->lt_seq = GMI_NOSEQ;
    tw_seriestab_init(&r->tab);
    r->scratch = malloc(((size_t)r->window + 1) * sizeof(double));
    if (r->scratch == NULL) {
        gmi_destroy(r);
        snprintf(err, errlen, "GPUMemoryIncrease: out of memory");
        return TW_ERR;
    }
    *state = r;
    return TW_OK;
}

/* Storage for a series that the table has just added. */
static int gmi_series_new(gmi *r, uint32_t id)
{
    if (tw_sys_grow((void **)&r->series, sizeof(gmi_series), &r->series_cap,
                    id + 1) != TW_OK)
        return TW_ERR;
    uint32_t nnodes = tw_seriestab_nnodes(&r->tab);
    uint32_t old = r->node_cap;
    if (tw_sys_grow((void **)&r->node_seq, sizeof(uint32_t), &r->node_cap,
                    nnodes) != TW_OK)
        return TW_ERR;
    for (uint32_t i = old; i < r->node_cap; i++)
        r->node_seq[i] = GMI_NOSEQ;
    gmi_series *s = &r->series[id];
    memset(s, 0, sizeof(*s));
    s->det_seq = GMI_NOSEQ;
    tw_countmap_init(
        &s->hist, r->sem == TW_SEMANTICS_FIXED ? TW_COUNTMAP_DEFAULT_CAP : 0);
    return tw_dring_init(&s->ring, 2 * r->window + 1);
}

static void gmi_reset_all(gmi *r)
{
    for (uint32_t i = 0; i < tw_seriestab_count(&r->tab); i++) {
        gmi_series *s = &r->series[i];
        tw_dring_clear(&s->ring);
        tw_countmap_clear(&s->hist);
        s->n = 0;
        s->n_nonzero = 0;
    }
}

/* mean of `n` values, skipping the `skip` newest; NaN when empty. */
static double gmi_mean(gmi *r, const gmi_series *s, size_t skip, size_t n)
{
    size_t got = tw_dring_copy(&s->ring, skip, n, r->scratch);
    return got == 0 ? NAN : r->host->mean(r->scratch, got);
}

static int gmi_eligible(const gmi *r, const gmi_series *s, double ts)
{
    if (r->sem == TW_SEMANTICS_REFERENCE)
        return (int64_t)s->n > r->patience;
    if (r->phase.step_seen)
        return (int64_t)s->n > r->patience &&
               ts * 1e6 >= (double)r->phase.first_step_us &&
               !tw_job_phase_in_final(&r->phase, ts);
    if (!r->phase.fw_seen)
        return (int64_t)s->n_nonzero > r->patience;
    return 0;
}

static int gmi_record(gmi *r, uint32_t id, double diff, double ts,
                      int64_t clock)
{
    gmi_series *s = &r->series[id];
    tw_box box;
    double p05;
    if (tw_countmap_quantile(&s->hist, 0.05, &p05) != TW_OK ||
        tw_countmap_box(&s->hist, &box) != TW_OK)
        return TW_ERR;
    s->rec[R_INCREASE] = diff;
    s->rec[R_MAX] = tw_countmap_max(&s->hist);
    s->rec[R_P05] = p05;
    s->rec[R_P25] = box.p25;
    s->rec[R_P50] = box.p50;
    s->rec[R_P75] = box.p75;
    s->rec[R_P95] = box.p95;
    s->rec[R_UPPER] = box.upper;
    s->rec[R_LOWER] = box.lower;
    uint32_t node = tw_seriestab_node(&r->tab, id);
    if (r->node_seq[node] == GMI_NOSEQ)
        r->node_seq[node] = r->next_seq++;
    if (s->det_seq == GMI_NOSEQ)
        s->det_seq = r->next_seq++;
    r->last_timestamp = clock;
    if (r->lt_seq == GMI_NOSEQ)
        r->lt_seq = r->next_seq++;
    r->triggered++;
    r->violations++;
    int64_t t = (int64_t)(ts * 1e6);
    if (r->viol_first_us == 0)
        r->viol_first_us = t;
    r->viol_last_us = t;
    if (diff > r->max_increase)
        r->max_increase = diff;
    return TW_OK;
}

static int gmi_sample(gmi *r, uint32_t id, double ts, double v, int64_t clock)
{
    gmi_series *s = &r->series[id];
    if (s->n >= GMI_MAX_DATAPOINTS)
        gmi_reset_all(r);
    tw_dring_push(&s->ring, v);
    s->n++;
    if (s->n_nonzero > 0 || v != 0.0)
        s->n_nonzero++;
    if (tw_countmap_add(&s->hist, v) != TW_OK)
        return TW_ERR;
    r->datapoints = (int64_t)s->n;

    size_t w = r->window;
    double cur, prev;
    if (r->sem == TW_SEMANTICS_REFERENCE) {
        if (s->n <= w + 1 || w <= 1)
            return TW_OK; /* w <= 1: "prev" is empty, NaN never compares */
        cur = gmi_mean(r, s, 0, w);
        prev = gmi_mean(r, s, 2, w - 1);
    } else {
        if (w == 0 || s->n < 2 * w)
            return TW_OK;
        cur = gmi_mean(r, s, 0, w);
        prev = gmi_mean(r, s, w, w);
    }
    double diff = cur - prev;
    if (diff > r->increase && gmi_eligible(r, s, ts))
        return gmi_record(r, id, diff, ts, clock);
    return TW_OK;
}

static int gmi_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                    char *err, size_t errlen)
{
    gmi *r = state;
    if (r->sem == TW_SEMANTICS_FIXED)
        tw_job_phase_note(&r->phase, scan);
    for (size_t i = 0; i < scan->nsamples; i++) {
        const tw_sample *smp = &scan->samples[i];
        uint32_t id;
        int added;
        if (tw_seriestab_resolve(&r->tab, scan, smp->series, wants_gpu_mem, &id,
                                 &added) != TW_OK ||
            (added && gmi_series_new(r, id) != TW_OK)) {
            snprintf(err, errlen, "GPUMemoryIncrease: out of memory");
            return TW_ERR;
        }
        if (id == TW_SERIES_NONE)
            continue;
        if (gmi_sample(r, id, smp->ts, smp->value, scan->start_us) != TW_OK) {
            snprintf(err, errlen, "GPUMemoryIncrease: out of memory");
            return TW_ERR;
        }
    }
    out->condition_met = r->triggered > 0;
    out->rule_triggered = r->triggered;
    out->violations = r->violations;
    out->datapoints = r->datapoints;
    return TW_OK;
}

/* Details keys in insertion order: nodes and "last_timestamp" by seq. */
static void gmi_write_details(gmi *r, tw_json *j)
{
    const tw_host *h = r->host;
    uint32_t nnodes = tw_seriestab_nnodes(&r->tab);
    uint32_t nser = tw_seriestab_count(&r->tab);
    h->json_object_begin(j);
    for (uint32_t seq = 0; seq < r->next_seq; seq++) {
        if (seq == r->lt_seq) {
            h->json_key(j, "last_timestamp");
            h->json_int(j, r->last_timestamp);
            continue;
        }
        for (uint32_t n = 0; n < nnodes; n++) {
            if (r->node_seq[n] != seq)
                continue;
            h->json_key(j, tw_seriestab_node_name(&r->tab, n));
            h->json_object_begin(j);
            for (uint32_t gs = seq + 1; gs < r->next_seq; gs++) {
                for (uint32_t id = 0; id < nser; id++) {
                    const gmi_series *s = &r->series[id];
                    if (s->det_seq != gs || tw_seriestab_node(&r->tab, id) != n)
                        continue;
                    const char *name = tw_seriestab_name(&r->tab, id);
                    h->json_key(j, name != NULL ? name : "null");
                    h->json_object_begin(j);
                    for (int k = 0; k < R_COUNT; k++) {
                        h->json_key(j, gmi_rec_keys[k]);
                        h->json_double(j, s->rec[k]);
                    }
                    h->json_object_end(j);
                }
            }
            h->json_object_end(j);
        }
    }
    h->json_object_end(j);
}

static int gmi_details(void *state, tw_json *j)
{
    gmi_write_details(state, j);
    return TW_OK;
}

static int gmi_save(void *state, tw_buf *out)
{
    gmi *r = state;
    tw_ser s;
    tw_ser_init(&s, r->host, out);
    tw_ser_u32(&s, GMI_STATE_TAG);
    tw_ser_i64(&s, r->triggered);
    tw_ser_i64(&s, r->violations);
    tw_ser_i64(&s, r->datapoints);
    tw_ser_u32(&s, r->next_seq);
    tw_ser_u32(&s, r->lt_seq);
    tw_ser_i64(&s, r->last_timestamp);
    tw_job_phase_save(&r->phase, &s);
    tw_seriestab_save(&r->tab, &s);
    for (uint32_t n = 0; n < tw_seriestab_nnodes(&r->tab); n++)
        tw_ser_u32(&s, r->node_seq[n]);
    for (uint32_t i = 0; i < tw_seriestab_count(&r->tab); i++) {
        const gmi_series *x = &r->series[i];
        tw_ser_u64(&s, x->n);
        tw_ser_u64(&s, x->n_nonzero);
        tw_ser_u32(&s, x->det_seq);
        for (int k = 0; k < R_COUNT; k++)
            tw_ser_f64(&s, x->rec[k]);
        tw_dring_save(&x->ring, &s);
        tw_countmap_save(&x->hist, &s);
    }
    tw_ser_i64(&s, r->viol_first_us);
    tw_ser_i64(&s, r->viol_last_us);
    tw_ser_f64(&s, r->max_increase);
    return tw_ser_ok(&s) ? TW_OK : TW_ERR;
}

static int gmi_restore(void *state, const void *data, size_t len, char *err,
                       size_t errlen)
{
    gmi *r = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    if (tw_deser_u32(&d) != GMI_STATE_TAG || tw_seriestab_count(&r->tab) != 0) {
        snprintf(err, errlen,
                 "GPUMemoryIncrease: not a GPUMemoryIncrease checkpoint, or "
                 "restore into a used instance");
        return TW_ERR;
    }
    r->triggered = tw_deser_i64(&d);
    r->violations = tw_deser_i64(&d);
    r->datapoints = tw_deser_i64(&d);
    r->next_seq = tw_deser_u32(&d);
    r->lt_seq = tw_deser_u32(&d);
    r->last_timestamp = tw_deser_i64(&d);
    tw_job_phase_load(&r->phase, &d);
    if (tw_seriestab_load(&r->tab, &d) != TW_OK)
        goto bad;
    for (uint32_t i = 0; i < tw_seriestab_count(&r->tab); i++)
        if (gmi_series_new(r, i) != TW_OK)
            goto bad;
    for (uint32_t n = 0; n < tw_seriestab_nnodes(&r->tab); n++)
        r->node_seq[n] = tw_deser_u32(&d);
    for (uint32_t i = 0; i < tw_seriestab_count(&r->tab); i++) {
        gmi_series *x = &r->series[i];
        x->n = tw_deser_u64(&d);
        x->n_nonzero = tw_deser_u64(&d);
        x->det_seq = tw_deser_u32(&d);
        for (int k = 0; k < R_COUNT; k++)
            x->rec[k] = tw_deser_f64(&d);
        if (tw_dring_load(&x->ring, &d) != TW_OK ||
            tw_countmap_restore(&x->hist, &d) != TW_OK)
            goto bad;
    }
    /* the finding's trailer; absent in checkpoints of older builds */
    if (tw_deser_ok(&d) && d.left > 0) {
        r->viol_first_us = tw_deser_i64(&d);
        r->viol_last_us = tw_deser_i64(&d);
        r->max_increase = tw_deser_f64(&d);
    }
    if (tw_deser_done(&d))
        return TW_OK;
bad:
    snprintf(err, errlen, "GPUMemoryIncrease: corrupt or truncated checkpoint");
    return TW_ERR;
}

/* The GPUs whose memory jumped, the largest latest jump first. */
static int gmi_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                       char *err, size_t errlen)
{
    gmi *r = state;
    (void)ctx, (void)err, (void)errlen;
    uint32_t nser = tw_seriestab_count(&r->tab);
    uint32_t flagged = 0, worst = UINT32_MAX;
    for (uint32_t id = 0; id < nser; id++) {
        if (r->series[id].det_seq == GMI_NOSEQ)
            continue;
        flagged++;
        if (worst == UINT32_MAX ||
            r->series[id].rec[R_INCREASE] > r->series[worst].rec[R_INCREASE])
            worst = id;
    }
    double above = INFINITY;
    while (f->nnames < TW_FINDING_MAX_NODES) {
        uint32_t best = UINT32_MAX;
        for (uint32_t id = 0; id < nser; id++) {
            const gmi_series *x = &r->series[id];
            if (x->det_seq != GMI_NOSEQ && x->rec[R_INCREASE] < above &&
                (best == UINT32_MAX ||
                 x->rec[R_INCREASE] > r->series[best].rec[R_INCREASE]))
                best = id;
        }
        if (best == UINT32_MAX)
            break;
        above = r->series[best].rec[R_INCREASE];
        for (uint32_t id = 0; id < nser; id++) {
            if (r->series[id].det_seq == GMI_NOSEQ ||
                r->series[id].rec[R_INCREASE] != above)
                continue;
            char name[TW_FINDING_NAME_LEN];
            const char *g = tw_seriestab_name(&r->tab, id);
            snprintf(
                name, sizeof(name), "%s/%s",
                tw_seriestab_node_name(&r->tab, tw_seriestab_node(&r->tab, id)),
                g != NULL ? g : "null");
            tw_finding_add_name(f, name);
        }
    }
    if (flagged > f->ninvolved)
        f->ninvolved = flagged;
    f->first_us = r->viol_first_us;
    f->last_us = r->viol_last_us;
    f->value = r->max_increase;
    f->limit = r->increase;
    snprintf(f->unit, sizeof(f->unit), "points");
    if (worst == UINT32_MAX)
        return TW_OK;
    const gmi_series *w = &r->series[worst];
    tw_finding_text(f->summary,
                    "GPU memory use jumped %lld time(s) on %u GPU(s): the "
                    "job may run out of GPU memory if it keeps growing.",
                    (long long)r->violations, flagged);
    tw_finding_text(f->magnitude,
                    "the mean of the newest %s samples rose by up to %.1f "
                    "points over the window before it (rule: > %s); on %s "
                    "memory now peaks at %.1f %%, median %.1f %%",
                    r->ptext[P_WINDOW], r->max_increase, r->ptext[P_INCREASE],
                    f->names[0], w->rec[R_MAX], w->rec[R_P50]);
    tw_finding_text(f->recommendation,
                    "Look for tensors kept across steps (losses or outputs "
                    "stored with their graph, growing caches or lists); if "
                    "the growth is expected, leave headroom by lowering the "
                    "batch size or using mixed precision.");
    tw_finding_text(f->parameters,
                    "increase %s points, window %s samples, patience %s "
                    "samples",
                    r->ptext[P_INCREASE], r->ptext[P_WINDOW],
                    r->ptext[P_PATIENCE]);
    return TW_OK;
}

static const tw_rule_descriptor gmi_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "GPUMemoryIncrease",
    .description = "Flags sharp increases of a GPU's memory utilisation "
                   "(moving average of the newest samples against older ones).",
    .params = gmi_params,
    .nparams = P_COUNT,
    .create = gmi_create,
    .scan = gmi_scan,
    .details = gmi_details,
    .save = gmi_save,
    .restore = gmi_restore,
    .destroy = gmi_destroy,
    .finding = gmi_finding,
    .finding_help =
        "A GPU's memory use jumped: the mean of its newest samples rose "
        "sharply over the window before. If it keeps growing the job runs "
        "out of memory: look for tensors kept across steps (outputs or "
        "losses stored with their graph, growing caches); otherwise leave "
        "headroom (smaller batch, mixed precision).",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &gmi_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_SYSTEM;
}
