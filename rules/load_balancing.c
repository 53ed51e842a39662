/*
 * load_balancing.c - LoadBalancing (RULES.md §3.7).
 *
 * Publishes a 49-bin utilisation histogram per GPU ([0,2), [2,4), ...,
 * [96,98]; values below 0, above 98 and NaN are not counted) and, in
 * fixed semantics, flags GPU pairs of a node whose histograms differ by a
 * Jensen-Shannon distance above `threshold`.
 *
 * Semantics (quirk numbers of RULES.md §3.7):
 *  - different in the two modes:
 *    1. dead comparison loop: reference never compares two GPUs and never
 *       triggers; fixed compares every pair g1 < g2 (first-seen order) of
 *       a node whose g1 series has more than `patience` values, once per
 *       scan: distance = sqrt((KL(h1||m) + KL(h2||m)) / 2) with m =
 *       (h1 + h2) / 2 and each of h1, h2, m normalised to sum 1 (KL over
 *       p_i > 0); an all-zero histogram gives NaN (never above the
 *       threshold). A violation counts once per scan and pair and sets
 *       Details[node]["distances"][g1][g2].
 *    fixed, phase-aware: samples of the initialization (before the job's
 *    first step, rules/common/job_phase.h; before the first step event,
 *    those within `init_grace` minutes of the job's start) are not taken
 *    in: GPUs idle alike while the job loads say nothing of its balance;
 *    nor are those of the finalization (more than 10 s after the newest
 *    step's end, job_phase.h).
 *  - the same in both modes: 2 (>98 % invisible), 3 (Datapoints = length
 *    of the series of the last sample), the 1 000 000 reset (all series
 *    and histograms cleared, the sample that overflowed is lost; Details
 *    keeps the histograms last written for series not seen again).
 *
 * Memory, both modes: per GPU 49 live counters, the 49 counters last
 * written to Details and a length, i.e. about N*G*(2*49*8 + 64) bytes,
 * plus N*G*(G-1)/2 distances in fixed. Histograms are updated per sample
 * instead of being recomputed from the whole history.
 *
 * Cost: each node keeps its GPUs in a list (id order) and each GPU its
 * distances (written order), so a scan and a report cost O(series +
 * distances), not O(nodes x series): the report runs for every alert and
 * the results file, and a 6 000-node job made it the engine's bottleneck.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_phase.h"
#include "sysutil.h"
#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

#define LB_BINS 49
#define LB_MAX_DATAPOINTS 1000000u
#define LB_NOSEQ UINT32_MAX
/* LBL2 writes the counters as zigzag varints, Details' copy as its
 * difference from the live one (mostly 0): ~1-3 bytes a bin instead of 16;
 * LBL1 (fixed-width) is still read. */
#define LB_STATE_TAG 0x4c424c32u    /* "LBL2" */
#define LB_STATE_TAG_V1 0x4c424c31u /* "LBL1" */

enum { P_THRESHOLD = 0, P_PATIENCE, P_INIT_GRACE, P_COUNT };

static const tw_param_spec lb_params[P_COUNT] = {
    {"threshold", TW_PARAM_DOUBLE, "0.2", 0.0, 1.0,
     "Jensen-Shannon distance (0-1) between two GPUs' utilisation "
     "histograms above which a node counts as imbalanced"},
    {"patience", TW_PARAM_INT, "1000", 0.0, 1e9,
     "compare a GPU only when its series has more than this many samples"},
    {"init_grace", TW_PARAM_DOUBLE, "30", 0.0, 525600.0,
     "trainwatch extension, fixed semantics only: minutes from the job's "
     "first timestamp during which samples of a job that has shown no "
     "step event yet count as initialization (not evaluated)"},
};

typedef struct lb_gpu {
    int live;                 /* in the series map (not cleared)       */
    uint64_t n;               /* series length                          */
    int64_t hist[LB_BINS];    /* live histogram                         */
    int64_t written[LB_BINS]; /* Details[node]["workloads"][gpu]        */
    uint32_t det_seq;         /* order inside Details[node]["workloads"] */
    uint32_t next_in_node;    /* next GPU id of its node; LB_NOSEQ     */
    uint32_t dist_first, dist_last; /* its distances as g1; LB_NOSEQ    */
} lb_gpu;

/* Details[node]["distances"][g1][g2] */
typedef struct lb_dist {
    uint32_t g1, g2;
    double d;
    uint32_t next_same_g1; /* LB_NOSEQ at the end */
} lb_dist;

/* One node of the series table. */
typedef struct lb_node {
    uint32_t seq;                 /* order of Details[node]; LB_NOSEQ */
    uint32_t first_gpu, last_gpu; /* its GPU ids, in id order; LB_NOSEQ */
} lb_node;

typedef struct lb {
    const tw_host *host;
    tw_semantics sem;
    double threshold;
    int64_t patience;
    const char *ptext[P_COUNT];
    char params_text[512]; /* RuleParameters: the reference's parameters */

    tw_seriestab tab;
    lb_gpu *gpu;
    uint32_t gpu_cap;
    lb_node *node;
    uint32_t node_cap;
    lb_dist *dist; /* first-written order */
    uint32_t ndist, dist_cap;

    /* For the finding (an optional checkpoint trailer): the first and the
     * last scan window with an unbalanced pair. */
    int64_t viol_first_us, viol_last_us;
    tw_job_phase phase; /* fixed: the initialization to skip */
    int64_t grace_us;   /* fixed: init_grace */

    int64_t triggered, violations, datapoints;
    uint32_t next_seq;
    uint64_t *order; /* report scratch: (key << 32 | id), sorted */
    uint32_t order_cap;
} lb;

static int wants_util(const tw_series *s)
{
    return tw_sys_str_eq(s->dimension, "GPUUtilization");
}

static void lb_destroy(void *state)
{
    lb *r = state;
    if (r == NULL)
        return;
    free(r->gpu);
    free(r->node);
    free(r->dist);
    free(r->order);
    tw_seriestab_free(&r->tab);
    free(r);
}

static const char *lb_parameters_text(void *state)
{
    return ((const lb *)state)->params_text;
}

static int lb_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen, "LoadBalancing: expected %d parameters, got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    lb *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "LoadBalancing: out of memory");
        return TW_ERR;
    }
    r->host = host;
    r->sem = params->semantics;
    r->threshold = params->values[P_THRESHOLD].d;
    r->patience = params->values[P_PATIENCE].i;
    r->grace_us = params->values[P_INIT_GRACE].is_none
                      ? 0
                      : (int64_t)(params->values[P_INIT_GRACE].d * 60e6);
    for (int i = 0; i < P_COUNT; i++)
        r->ptext[i] = params->values[i].text;
    if (tw_job_phase_params_text(lb_params, params, P_INIT_GRACE,
                                 r->params_text,
                                 sizeof(r->params_text)) != TW_OK) {
        snprintf(err, errlen, "LoadBalancing: parameter values too long");
        free(r);
        return TW_ERR;
    }
    tw_seriestab_init(&r->tab);
    *state = r;
    return TW_OK;
}

static int lb_gpu_new(lb *r, uint32_t id)
{
    if (tw_sys_grow((void **)&r->gpu, sizeof(lb_gpu), &r->gpu_cap, id + 1) !=
        TW_OK)
        return TW_ERR;
    uint32_t old = r->node_cap;
    if (tw_sys_grow((void **)&r->node, sizeof(lb_node), &r->node_cap,
                    tw_seriestab_nnodes(&r->tab)) != TW_OK)
        return TW_ERR;
    for (uint32_t i = old; i < r->node_cap; i++)
        r->node[i] = (lb_node){LB_NOSEQ, LB_NOSEQ, LB_NOSEQ};
    lb_gpu *g = &r->gpu[id];
    memset(g, 0, sizeof(*g));
    g->det_seq = LB_NOSEQ;
    g->next_in_node = LB_NOSEQ;
    g->dist_first = g->dist_last = LB_NOSEQ;
    /* ids grow by one, so appending keeps each node's list in id order */
    lb_node *nd = &r->node[tw_seriestab_node(&r->tab, id)];
    if (nd->last_gpu == LB_NOSEQ)
        nd->first_gpu = id;
    else
        r->gpu[nd->last_gpu].next_in_node = id;
    nd->last_gpu = id;
    return TW_OK;
}

/* numpy.histogram(v, bins=[0, 2, ..., 98]): bin i holds [2i, 2i+2), the
 * last one [96, 98]; the edges are exact, so floor(x / 2) is exact too. */
static int lb_bin(double x)
{
    if (!(x >= 0.0 && x <= 98.0))
        return -1;
    int b = (int)floor(x / 2.0);
    return b >= LB_BINS ? LB_BINS - 1 : b;
}

static void lb_sample(lb *r, uint32_t id, double v)
{
    lb_gpu *g = &r->gpu[id];
    if (!g->live) {
        g->live = 1;
        g->n = 0;
        memset(g->hist, 0, sizeof(g->hist));
    }
    g->n++;
    r->datapoints = (int64_t)g->n;
    if (g->n > LB_MAX_DATAPOINTS) {
        /* the reference clears everything, losing this sample too */
        for (uint32_t i = 0; i < tw_seriestab_count(&r->tab); i++)
            r->gpu[i].live = 0;
        return;
    }
    int b = lb_bin(v);
    if (b >= 0)
        g->hist[b]++;
}

/* KL(p || q) with p = a / sa, q = b / sb over p_i > 0, summed like
 * numpy. */
static double lb_kl(const lb *r, const double *a, double sa, const double *b,
                    double sb)
{
    double terms[LB_BINS];
    size_t n = 0;
    for (int i = 0; i < LB_BINS; i++) {
        double p = a[i] / sa;
        if (p > 0.0)
            terms[n++] = p * log(p / (b[i] / sb));
    }
    return r->host->sum_pairwise(terms, n);
}

static double lb_distance(const lb *r, const lb_gpu *x, const lb_gpu *y)
{
    double h1[LB_BINS], h2[LB_BINS], m[LB_BINS];
    for (int i = 0; i < LB_BINS; i++) {
        h1[i] = (double)x->hist[i];
        h2[i] = (double)y->hist[i];
        m[i] = (h1[i] + h2[i]) / 2.0;
    }
    double s1 = r->host->sum_pairwise(h1, LB_BINS);
    double s2 = r->host->sum_pairwise(h2, LB_BINS);
    double sm = r->host->sum_pairwise(m, LB_BINS);
    if (s1 == 0.0 || s2 == 0.0)
        return NAN;
    return sqrt((lb_kl(r, h1, s1, m, sm) + lb_kl(r, h2, s2, m, sm)) / 2.0);
}

static int lb_set_distance(lb *r, uint32_t g1, uint32_t g2, double d)
{
    lb_gpu *a = &r->gpu[g1];
    for (uint32_t i = a->dist_first; i != LB_NOSEQ;
         i = r->dist[i].next_same_g1) {
        if (r->dist[i].g2 == g2) {
            r->dist[i].d = d;
            return TW_OK;
        }
    }
    if (tw_sys_grow((void **)&r->dist, sizeof(lb_dist), &r->dist_cap,
                    r->ndist + 1) != TW_OK)
        return TW_ERR;
    uint32_t i = r->ndist++;
    r->dist[i] = (lb_dist){g1, g2, d, LB_NOSEQ};
    if (a->dist_last == LB_NOSEQ)
        a->dist_first = i;
    else
        r->dist[a->dist_last].next_same_g1 = i;
    a->dist_last = i;
    return TW_OK;
}

static int lb_compare(lb *r)
{
    uint32_t n = tw_seriestab_count(&r->tab);
    for (uint32_t g1 = 0; g1 < n; g1++) {
        const lb_gpu *a = &r->gpu[g1];
        if (!a->live || (int64_t)a->n <= r->patience)
            continue;
        /* the node's later GPUs: its list is in id order */
        for (uint32_t g2 = a->next_in_node; g2 != LB_NOSEQ;
             g2 = r->gpu[g2].next_in_node) {
            if (!r->gpu[g2].live)
                continue;
            double d = lb_distance(r, a, &r->gpu[g2]);
            if (d > r->threshold) {
                r->violations++;
                r->triggered++;
                if (lb_set_distance(r, g1, g2, d) != TW_OK)
                    return TW_ERR;
            }
        }
    }
    return TW_OK;
}

static int lb_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    lb *r = state;
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
        if (tw_seriestab_resolve(&r->tab, scan, smp->series, wants_util, &id,
                                 &added) != TW_OK ||
            (added && lb_gpu_new(r, id) != TW_OK)) {
            snprintf(err, errlen, "LoadBalancing: out of memory");
            return TW_ERR;
        }
        if (id != TW_SERIES_NONE)
            lb_sample(r, id, smp->value);
    }
    /* Details[node]["workloads"][gpu] := histogram, for every live series
     * (nodes, then GPUs, in the series map's order) */
    for (uint32_t node = 0; node < tw_seriestab_nnodes(&r->tab); node++) {
        for (uint32_t id = r->node[node].first_gpu; id != LB_NOSEQ;
             id = r->gpu[id].next_in_node) {
            lb_gpu *g = &r->gpu[id];
            if (!g->live)
                continue;
            if (r->node[node].seq == LB_NOSEQ)
                r->node[node].seq = r->next_seq++;
            if (g->det_seq == LB_NOSEQ)
                g->det_seq = r->next_seq++;
            memcpy(g->written, g->hist, sizeof(g->hist));
        }
    }
    int64_t before = r->violations;
    if (r->sem == TW_SEMANTICS_FIXED && lb_compare(r) != TW_OK) {
        snprintf(err, errlen, "LoadBalancing: out of memory");
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

static const char *lb_name(const lb *r, uint32_t id)
{
    const char *name = tw_seriestab_name(&r->tab, id);
    return name != NULL ? name : "null";
}

static int lb_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The node's GPUs whose key(id) is not LB_NOSEQ, as (key << 32 | id) in
 * r->order sorted by key (keys are unique); their count, or -1 (out of
 * memory). */
static int64_t lb_sorted(lb *r, uint32_t node, int by_dist)
{
    uint32_t m = 0;
    for (uint32_t id = r->node[node].first_gpu; id != LB_NOSEQ;
         id = r->gpu[id].next_in_node) {
        const lb_gpu *g = &r->gpu[id];
        uint32_t key = by_dist ? g->dist_first : g->det_seq;
        if (key == LB_NOSEQ ||
            (!by_dist && key <= r->node[node].seq)) /* see lb_write_node */
            continue;
        if (tw_sys_grow((void **)&r->order, sizeof(uint64_t), &r->order_cap,
                        m + 1) != TW_OK)
            return -1;
        r->order[m++] = (uint64_t)key << 32 | id;
    }
    qsort(r->order, m, sizeof(uint64_t), lb_cmp_u64);
    return m;
}

/* Mean utilisation from the histogram (bin centres); -1 when empty. */
static double lb_hist_mean(const lb_gpu *g)
{
    double sum = 0, n = 0;
    for (int b = 0; b < LB_BINS; b++) {
        sum += (double)g->written[b] * (2.0 * b + 1.0);
        n += (double)g->written[b];
    }
    return n > 0 ? sum / n : -1;
}

static void lb_add_gpu(const lb *r, tw_finding *f, uint32_t id)
{
    char name[TW_FINDING_NAME_LEN];
    snprintf(name, sizeof(name), "%s/%s",
             tw_seriestab_node_name(&r->tab, tw_seriestab_node(&r->tab, id)),
             lb_name(r, id));
    tw_finding_add_name(f, name);
}

/* The GPUs of the most unbalanced pairs first. */
static int lb_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                      char *err, size_t errlen)
{
    lb *r = state;
    (void)ctx, (void)err, (void)errlen;
    const lb_dist *worst = NULL;
    uint32_t pairs = 0;
    for (uint32_t i = 0; i < r->ndist; i++) {
        if (!(r->dist[i].d > r->threshold))
            continue;
        pairs++;
        if (worst == NULL || r->dist[i].d > worst->d)
            worst = &r->dist[i];
    }
    f->first_us = r->viol_first_us;
    f->last_us = r->viol_last_us;
    if (worst == NULL)
        return TW_OK;
    lb_add_gpu(r, f, worst->g1);
    lb_add_gpu(r, f, worst->g2);
    for (uint32_t i = 0; i < r->ndist && f->nnames < TW_FINDING_MAX_NODES; i++)
        if (r->dist[i].d > r->threshold) {
            lb_add_gpu(r, f, r->dist[i].g1);
            lb_add_gpu(r, f, r->dist[i].g2);
        }
    f->value = worst->d;
    f->limit = r->threshold;
    snprintf(f->unit, sizeof(f->unit), "JS distance");
    double m1 = lb_hist_mean(&r->gpu[worst->g1]);
    double m2 = lb_hist_mean(&r->gpu[worst->g2]);
    tw_finding_text(f->summary,
                    "GPUs of the same node carry very different loads: %u "
                    "pair(s) have utilisation profiles far apart.",
                    pairs);
    tw_finding_text(f->magnitude,
                    "%s vs %s: Jensen-Shannon distance %.2f of their "
                    "utilisation histograms (rule: > %s), mean utilisation "
                    "about %.0f %% vs %.0f %%",
                    f->names[0], f->names[1], worst->d, r->ptext[P_THRESHOLD],
                    m1, m2);
    tw_finding_text(f->recommendation,
                    "Make every GPU do a share of the work: use distributed "
                    "data parallel (one process per GPU) rather than a "
                    "single-process DataParallel, and check that each rank "
                    "gets the same batch size and that no GPU is left out "
                    "of the device list.");
    tw_finding_text(f->parameters, "threshold %s, patience %s samples",
                    r->ptext[P_THRESHOLD], r->ptext[P_PATIENCE]);
    return TW_OK;
}

static int lb_write_node(lb *r, tw_json *j, uint32_t node)
{
    const tw_host *h = r->host;
    h->json_key(j, tw_seriestab_node_name(&r->tab, node));
    h->json_object_begin(j);
    h->json_key(j, "workloads");
    h->json_object_begin(j);
    /* in Details order: the node's GPUs written after the node itself */
    int64_t m = lb_sorted(r, node, 0);
    if (m < 0)
        return TW_ERR;
    for (int64_t k = 0; k < m; k++) {
        uint32_t id = (uint32_t)r->order[k];
        h->json_key(j, lb_name(r, id));
        h->json_array_begin(j);
        for (int b = 0; b < LB_BINS; b++)
            h->json_int(j, r->gpu[id].written[b]);
        h->json_array_end(j);
    }
    h->json_object_end(j);
    /* one object per g1 in the order of its first distance, holding its
     * g2 in written order */
    m = lb_sorted(r, node, 1);
    if (m < 0)
        return TW_ERR;
    if (m > 0) {
        h->json_key(j, "distances");
        h->json_object_begin(j);
    }
    for (int64_t k = 0; k < m; k++) {
        uint32_t g1 = (uint32_t)r->order[k];
        h->json_key(j, lb_name(r, g1));
        h->json_object_begin(j);
        for (uint32_t i = r->gpu[g1].dist_first; i != LB_NOSEQ;
             i = r->dist[i].next_same_g1) {
            h->json_key(j, lb_name(r, r->dist[i].g2));
            h->json_double(j, r->dist[i].d);
        }
        h->json_object_end(j);
    }
    if (m > 0)
        h->json_object_end(j);
    h->json_object_end(j);
    return TW_OK;
}

static int lb_details(void *state, tw_json *j)
{
    lb *r = state;
    const tw_host *h = r->host;
    /* nodes in Details order: seq -> node, each seq used at most once */
    uint32_t nn = tw_seriestab_nnodes(&r->tab);
    uint32_t *by_seq = NULL;
    if (r->next_seq > 0 &&
        (by_seq = malloc((size_t)r->next_seq * sizeof(*by_seq))) == NULL)
        return TW_ERR;
    for (uint32_t s = 0; s < r->next_seq; s++)
        by_seq[s] = LB_NOSEQ;
    for (uint32_t node = 0; node < nn; node++)
        if (r->node[node].seq != LB_NOSEQ)
            by_seq[r->node[node].seq] = node;
    h->json_object_begin(j);
    int rc = TW_OK;
    for (uint32_t s = 0; rc == TW_OK && s < r->next_seq; s++)
        if (by_seq[s] != LB_NOSEQ)
            rc = lb_write_node(r, j, by_seq[s]);
    free(by_seq);
    if (rc != TW_OK)
        return rc;
    h->json_object_end(j);
    return TW_OK;
}

static int lb_save(void *state, tw_buf *out)
{
    lb *r = state;
    tw_ser s;
    tw_ser_init(&s, r->host, out);
    tw_ser_u32(&s, LB_STATE_TAG);
    tw_ser_i64(&s, r->triggered);
    tw_ser_i64(&s, r->violations);
    tw_ser_i64(&s, r->datapoints);
    tw_ser_u32(&s, r->next_seq);
    tw_seriestab_save(&r->tab, &s);
    for (uint32_t n = 0; n < tw_seriestab_nnodes(&r->tab); n++)
        tw_ser_u32(&s, r->node[n].seq);
    for (uint32_t i = 0; i < tw_seriestab_count(&r->tab); i++) {
        const lb_gpu *g = &r->gpu[i];
        tw_ser_u8(&s, (uint8_t)g->live);
        tw_ser_u64(&s, g->n);
        tw_ser_u32(&s, g->det_seq);
        for (int b = 0; b < LB_BINS; b++) {
            /* both counts are >= 0: their difference fits */
            tw_ser_sv(&s, g->hist[b]);
            tw_ser_sv(&s, g->written[b] - g->hist[b]);
        }
    }
    tw_ser_u64(&s, r->ndist);
    for (uint32_t i = 0; i < r->ndist; i++) {
        tw_ser_u32(&s, r->dist[i].g1);
        tw_ser_u32(&s, r->dist[i].g2);
        tw_ser_f64(&s, r->dist[i].d);
    }
    tw_ser_i64(&s, r->viol_first_us);
    tw_ser_i64(&s, r->viol_last_us);
    tw_job_phase_save(&r->phase, &s);
    return tw_ser_ok(&s) ? TW_OK : TW_ERR;
}

static int lb_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    lb *r = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    uint32_t tag = tw_deser_u32(&d);
    if ((tag != LB_STATE_TAG && tag != LB_STATE_TAG_V1) ||
        tw_seriestab_count(&r->tab) != 0) {
        snprintf(err, errlen,
                 "LoadBalancing: not a LoadBalancing checkpoint, "
                 "or restore into a used instance");
        return TW_ERR;
    }
    r->triggered = tw_deser_i64(&d);
    r->violations = tw_deser_i64(&d);
    r->datapoints = tw_deser_i64(&d);
    r->next_seq = tw_deser_u32(&d);
    if (tw_seriestab_load(&r->tab, &d) != TW_OK)
        goto bad;
    uint32_t n = tw_seriestab_count(&r->tab);
    for (uint32_t i = 0; i < n; i++)
        if (lb_gpu_new(r, i) != TW_OK)
            goto bad;
    for (uint32_t k = 0; k < tw_seriestab_nnodes(&r->tab); k++)
        r->node[k].seq = tw_deser_u32(&d);
    for (uint32_t i = 0; i < n; i++) {
        lb_gpu *g = &r->gpu[i];
        g->live = tw_deser_u8(&d);
        g->n = tw_deser_u64(&d);
        g->det_seq = tw_deser_u32(&d);
        for (int b = 0; b < LB_BINS; b++) {
            if (tag == LB_STATE_TAG_V1) {
                /* counts: a negative one is corrupt (and would overflow
                 * the difference LBL2 saves) */
                int64_t h = tw_deser_i64(&d), w = tw_deser_i64(&d);
                if (h < 0 || w < 0) {
                    tw_deser_fail(&d);
                    break;
                }
                g->hist[b] = h;
                g->written[b] = w;
                continue;
            }
            int64_t h = tw_deser_sv(&d), diff = tw_deser_sv(&d);
            if (h < 0 || (diff < 0 ? h + diff < 0 : diff > INT64_MAX - h)) {
                tw_deser_fail(&d);
                break;
            }
            g->hist[b] = h;
            g->written[b] = h + diff;
        }
    }
    uint32_t nd = (uint32_t)tw_deser_count(&d, 16);
    for (uint32_t i = 0; i < nd && tw_deser_ok(&d); i++) {
        uint32_t g1 = tw_deser_u32(&d), g2 = tw_deser_u32(&d);
        double v = tw_deser_f64(&d);
        if (g1 >= n || g2 >= n || lb_set_distance(r, g1, g2, v) != TW_OK)
            goto bad;
    }
    /* the finding's trailer; absent in checkpoints of older builds */
    if (tw_deser_ok(&d) && d.left > 0) {
        r->viol_first_us = tw_deser_i64(&d);
        r->viol_last_us = tw_deser_i64(&d);
    }
    /* the phase's trailer; absent in checkpoints of older builds */
    memset(&r->phase, 0, sizeof(r->phase));
    if (tw_deser_ok(&d) && d.left > 0)
        tw_job_phase_load(&r->phase, &d);
    if (tw_deser_done(&d))
        return TW_OK;
bad:
    snprintf(err, errlen, "LoadBalancing: corrupt or truncated checkpoint");
    return TW_ERR;
}

static const tw_rule_descriptor lb_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "LoadBalancing",
    .description = "Compares the utilisation histograms of the GPUs of each "
                   "node (Jensen-Shannon distance).",
    .params = lb_params,
    .nparams = P_COUNT,
    .create = lb_create,
    .scan = lb_scan,
    .details = lb_details,
    .parameters_text = lb_parameters_text,
    .save = lb_save,
    .restore = lb_restore,
    .destroy = lb_destroy,
    .finding = lb_finding,
    .finding_help =
        "GPUs of the same node carry very different loads (their utilisation "
        "histograms are far apart). Give every GPU a share of the work: "
        "one process per GPU (distributed data parallel), equal batch sizes "
        "per rank, and no GPU missing from the device list.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &lb_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_SYSTEM;
}
