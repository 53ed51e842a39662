/*
 * overall_system_usage.c - OverallSystemUsage (RULES.md §3.10).
 *
 * Summarises per node the max, p99, p95, p50 and min of the
 * per-timestamp sums of six metrics (Network, GPU, CPU, CPU memory, GPU
 * memory, I/O), divided by global name counts; never triggers.
 *
 * Semantics (quirk numbers of RULES.md §3.10):
 *  - the same in both modes: 1 (global divisors |gpu_ids|, |core_ids|),
 *    2 (a statistic that is not > 0 is written as the integer 0),
 *    4 (a divisor of 0 gives Infinity), the reset when the first CPU
 *    node passes 1 000 000 timestamps (six maps cleared, name sets kept).
 *  - different in the two modes:
 *    3. boundary timestamps: reference keeps the reference's maps
 *       (timestamp -> running sum, per metric and node), so a sample
 *       delivered to two scans is summed twice into its timestamp, as in
 *       the reference. fixed counts every sample once: it skips the
 *       samples the host flags TW_SAMPLE_REPEAT (those already delivered
 *       to the previous scan). This is what makes bounded state exact in
 *       fixed: a timestamp's samples then all arrive in one scan, so its
 *       sum is final at the end of that scan and goes into a count map;
 *       nothing of a closed scan has to be revised later. Keeping the
 *       double sum instead would need a per-timestamp map or a count map
 *       with removal, and the doubled value is wrong anyway (a CPU
 *       average of 2x for that instant). Consequence: wherever a sample
 *       sits exactly on a scan boundary, fixed's sums differ from the
 *       reference (single instead of double), elsewhere they are equal.
 *       A timestamp whose samples are not contiguous within one scan is
 *       still one key in both modes (the scan's map is keyed by exact
 *       timestamp).
 *    5. memory: reference keeps every timestamp of every node and metric
 *       (as the reference, O(6*N*H)); fixed keeps per (metric, node) a
 *       count map of the distinct per-timestamp sums, capped at
 *       TW_SYS_REPORT_CAP (256) keys (exact up to 256 distinct sums,
 *       beyond that the quantiles are within max(R/255, 0.005) of the
 *       sums' exact ones, R their range, see sysutil.h; max, min and
 *       Datapoints stay exact; the rule only reports, so no verdict can
 *       flip), plus, during a scan only, that scan's timestamp -> sum map.
 *       Bound in fixed: about 6*N*(256 * 40 bytes) + O(G + C) names in
 *       memory, < 1 KB a map saved.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sysutil.h"
#include "trainwatch/countmap.h"
#include "trainwatch/dmap.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

#define OSU_MAX_DATAPOINTS 1000000u
#define OSU_STATE_TAG 0x4f535531u /* "OSU1" */

/* In the order the report records them. */
enum { M_NET = 0, M_GPU, M_CPU, M_CPUMEM, M_GPUMEM, M_IO, M_COUNT };
static const char *const osu_metric_names[M_COUNT] = {
    "Network", "GPU", "CPU", "CPU memory", "GPU memory", "I/O"};
enum { DIV_ONE, DIV_GPUS, DIV_CORES };
static const int osu_divisor[M_COUNT] = {DIV_ONE, DIV_GPUS, DIV_CORES,
                                         DIV_ONE, DIV_GPUS, DIV_CORES};

/* Set in osu.mask once a series' GPU/core name is in gpu_ids/core_ids. */
#define OSU_IDS_NOTED 0x80u

/* One node of one metric map. */
typedef struct osu_cell {
    tw_dmap ts;       /* timestamp -> running sum (double bits): the whole
                         history in reference, the current scan in fixed */
    tw_countmap sums; /* fixed: the final per-timestamp sums            */
    size_t last;      /* ts entry the previous sample went to (a hint,
                         checked before use: the cores of one sampling
                         round come one after the other, same timestamp) */
} osu_cell;

typedef struct osu_metric {
    tw_namemap nodes; /* first-seen order */
    osu_cell *cells;
    uint32_t cap;
    /* this scan's last node string and its index in nodes (the scan's
     * node strings stay put while it lasts; reset at each scan) */
    const char *memo_node;
    uint32_t memo_idx;
} osu_metric;

typedef struct osu {
    const tw_host *host;
    tw_semantics sem;
    osu_metric m[M_COUNT];
    tw_namemap gpu_ids, core_ids;
    uint8_t *mask; /* host series id -> 1 + metric bits (+ OSU_IDS_NOTED);
                      0 = unknown */
    uint32_t mask_cap;
    int64_t datapoints;
    int scanned;
} osu;

static void osu_metric_free(osu_metric *m)
{
    for (uint32_t i = 0; i < m->cap; i++) {
        tw_dmap_free(&m->cells[i].ts);
        tw_countmap_free(&m->cells[i].sums);
    }
    free(m->cells);
    tw_namemap_free(&m->nodes);
    memset(m, 0, sizeof(*m));
}

static void osu_destroy(void *state)
{
    osu *r = state;
    if (r == NULL)
        return;
    for (int k = 0; k < M_COUNT; k++)
        osu_metric_free(&r->m[k]);
    tw_namemap_free(&r->gpu_ids);
    tw_namemap_free(&r->core_ids);
    free(r->mask);
    free(r);
}

static int osu_create(const tw_host *host, const tw_params *params,
                      void **state, char *err, size_t errlen)
{
    osu *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "OverallSystemUsage: out of memory");
        return TW_ERR;
    }
    r->host = host;
    r->sem = params->semantics;
    for (int k = 0; k < M_COUNT; k++)
        tw_namemap_init(&r->m[k].nodes);
    tw_namemap_init(&r->gpu_ids);
    tw_namemap_init(&r->core_ids);
    *state = r;
    return TW_OK;
}

static int osu_cell_of(osu *r, int metric, const char *node, osu_cell **out)
{
    osu_metric *m = &r->m[metric];
    /* (a NULL node, e.g. from a hostile checkpoint, is never the memo:
     * memo_node starts NULL and cells may not exist yet) */
    if (node != NULL && node == m->memo_node) {
        *out = &m->cells[m->memo_idx];
        return TW_OK;
    }
    uint32_t idx;
    int added;
    if (tw_sys_grow((void **)&m->cells, sizeof(osu_cell), &m->cap,
                    m->nodes.count + 1) != TW_OK ||
        tw_namemap_add(&m->nodes, node, &idx, &added) != TW_OK)
        return TW_ERR;
    if (added) {
        tw_dmap_init(&m->cells[idx].ts);
        m->cells[idx].last = 0;
        tw_countmap_init(&m->cells[idx].sums,
                         r->sem == TW_SEMANTICS_FIXED ? TW_SYS_REPORT_CAP : 0);
    }
    m->memo_node = node;
    m->memo_idx = idx;
    *out = &m->cells[idx];
    return TW_OK;
}

static unsigned osu_classify(const tw_series *s)
{
    unsigned bits = 0;
    if (tw_sys_str_eq(s->dimension, "GPUMemoryUtilization"))
        bits |= 1u << M_GPUMEM;
    if (tw_sys_str_eq(s->dimension, "GPUUtilization"))
        bits |= 1u << M_GPU;
    if (tw_sys_str_eq(s->name, "MemoryUsedPercent"))
        bits |= 1u << M_CPUMEM;
    if (tw_sys_str_eq(s->dimension, "CPUUtilization"))
        bits |= 1u << M_CPU;
    if (tw_sys_str_eq(s->dimension, "Algorithm"))
        bits |= 1u << M_NET;
    if (tw_sys_str_eq(s->dimension, "I/OWaitPercentage"))
        bits |= 1u << M_IO;
    return bits;
}

static int osu_add(osu *r, int metric, const char *node, double ts, double v)
{
    osu_cell *c;
    if (osu_cell_of(r, metric, node, &c) != TW_OK)
        return TW_ERR;
    uint64_t *slot;
    if (c->last < c->ts.n && c->ts.ent[c->last].key == ts) {
        slot = &c->ts.ent[c->last].val; /* the entry put would find */
    } else {
        slot = tw_dmap_put(&c->ts, ts, 0, NULL);
        if (slot == NULL)
            return TW_ERR;
        c->last = (size_t)((const char *)slot - (const char *)c->ts.ent) /
                  sizeof(tw_dmap_entry);
    }
    double sum;
    memcpy(&sum, slot, sizeof(sum));
    sum += v;
    memcpy(slot, &sum, sizeof(sum));
    return TW_OK;
}

/* Number of timestamps a cell holds. */
static uint64_t osu_cell_count(const osu *r, const osu_cell *c)
{
    return r->sem == TW_SEMANTICS_FIXED ? tw_countmap_count(&c->sums)
                                        : (uint64_t)c->ts.n;
}

static int osu_ingest(osu *r, const tw_scan *scan)
{
    if (tw_sys_grow((void **)&r->mask, 1, &r->mask_cap,
                    (uint32_t)scan->nseries) != TW_OK)
        return TW_ERR;
    for (int k = 0; k < M_COUNT; k++)
        r->m[k].memo_node = NULL;
    for (size_t i = 0; i < scan->nsamples; i++) {
        const tw_sample *smp = &scan->samples[i];
        if (smp->series >= scan->nseries)
            continue;
        const tw_series *s = &scan->series[smp->series];
        if (r->mask[smp->series] == 0)
            r->mask[smp->series] = (uint8_t)(1u + osu_classify(s));
        unsigned bits = (r->mask[smp->series] & ~OSU_IDS_NOTED) - 1u;
        if (bits == 0)
            continue;
        uint32_t idx;
        if (!(r->mask[smp->series] & OSU_IDS_NOTED)) {
            /* once per series: the id maps only grow (and are saved) */
            if ((bits & (1u << M_GPU)) &&
                tw_namemap_add(&r->gpu_ids, s->name, &idx, NULL) != TW_OK)
                return TW_ERR;
            if ((bits & (1u << M_CPU)) &&
                tw_namemap_add(&r->core_ids, s->name, &idx, NULL) != TW_OK)
                return TW_ERR;
            r->mask[smp->series] |= OSU_IDS_NOTED;
        }
        if (r->sem == TW_SEMANTICS_FIXED && (smp->flags & TW_SAMPLE_REPEAT))
            continue; /* quirk 3 corrected: counted in the previous scan */
        const char *node = s->node < scan->nnodes ? scan->nodes[s->node] : "";
        for (int k = 0; k < M_COUNT; k++)
            if ((bits & (1u << k)) &&
                osu_add(r, k, node, smp->ts, smp->value) != TW_OK)
                return TW_ERR;
    }
    if (r->sem == TW_SEMANTICS_FIXED) {
        /* every timestamp of this scan is complete: fold it in */
        for (int k = 0; k < M_COUNT; k++) {
            osu_metric *m = &r->m[k];
            for (uint32_t n = 0; n < m->nodes.count; n++) {
                osu_cell *c = &m->cells[n];
                for (size_t e = 0; e < c->ts.n; e++) {
                    double sum;
                    memcpy(&sum, &c->ts.ent[e].val, sizeof(sum));
                    if (tw_countmap_add(&c->sums, sum) != TW_OK)
                        return TW_ERR;
                }
                tw_dmap_clear(&c->ts);
            }
        }
    }
    return TW_OK;
}

static int osu_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                    char *err, size_t errlen)
{
    osu *r = state;
    if (osu_ingest(r, scan) != TW_OK) {
        snprintf(err, errlen, "OverallSystemUsage: out of memory");
        return TW_ERR;
    }
    r->scanned = 1;
    osu_metric *cpu = &r->m[M_CPU];
    if (cpu->nodes.count > 0) {
        uint64_t n = osu_cell_count(r, &cpu->cells[0]);
        r->datapoints = (int64_t)n;
        if (n > OSU_MAX_DATAPOINTS) {
            for (int k = 0; k < M_COUNT; k++) {
                osu_metric_free(&r->m[k]);
                tw_namemap_init(&r->m[k].nodes);
            }
        }
    }
    out->condition_met = 0;
    out->rule_triggered = 0;
    out->violations = 0;
    out->datapoints = r->datapoints;
    return TW_OK;
}

/* max, p99, p95, p50, min of a cell's per-timestamp sums. */
static int osu_stats(osu *r, osu_cell *c, double st[5])
{
    static const double qs[3] = {0.99, 0.95, 0.5};
    if (r->sem == TW_SEMANTICS_FIXED) {
        st[0] = tw_countmap_max(&c->sums);
        st[4] = tw_countmap_min(&c->sums);
        for (int i = 0; i < 3; i++)
            if (tw_countmap_quantile(&c->sums, qs[i], &st[1 + i]) != TW_OK)
                return TW_ERR;
        return TW_OK;
    }
    size_t n = c->ts.n;
    double *v = malloc(n * sizeof(double));
    if (v == NULL)
        return TW_ERR;
    for (size_t i = 0; i < n; i++)
        memcpy(&v[i], &c->ts.ent[i].val, sizeof(double));
    r->host->sort_doubles(v, n);
    if (isnan(v[n - 1])) { /* numpy propagates NaN; sorted last */
        for (int i = 0; i < 5; i++)
            st[i] = NAN;
    } else {
        st[0] = v[n - 1];
        st[4] = v[0];
        for (int i = 0; i < 3; i++)
            st[1 + i] = r->host->quantile_sorted(v, n, qs[i]);
    }
    free(v);
    return TW_OK;
}

static int osu_write_metric(osu *r, tw_json *j, int k)
{
    static const char *const keys[5] = {"max", "p99", "p95", "p50", "min"};
    const tw_host *h = r->host;
    osu_metric *m = &r->m[k];
    double div = 1.0;
    if (osu_divisor[k] == DIV_GPUS)
        div = (double)r->gpu_ids.count;
    else if (osu_divisor[k] == DIV_CORES)
        div = (double)r->core_ids.count;
    h->json_key(j, osu_metric_names[k]);
    h->json_object_begin(j);
    for (uint32_t n = 0; n < m->nodes.count; n++) {
        osu_cell *c = &m->cells[n];
        if (osu_cell_count(r, c) == 0)
            continue;
        double st[5];
        if (osu_stats(r, c, st) != TW_OK)
            return TW_ERR;
        h->json_key(j, tw_namemap_key(&m->nodes, n));
        h->json_object_begin(j);
        for (int i = 0; i < 5; i++) {
            double x = st[i] / div;
            h->json_key(j, keys[i]);
            if (x > 0)
                h->json_double(j, h->round2(x));
            else
                h->json_int(j, 0); /* quirk 2: integer 0 (also for NaN) */
        }
        h->json_object_end(j);
    }
    h->json_object_end(j);
    return TW_OK;
}

static int osu_details(void *state, tw_json *j)
{
    osu *r = state;
    const tw_host *h = r->host;
    int rc = TW_OK;
    h->json_object_begin(j);
    for (int k = 0; r->scanned && k < M_COUNT && rc == TW_OK; k++)
        rc = osu_write_metric(r, j, k);
    h->json_object_end(j);
    return rc;
}

static int osu_save(void *state, tw_buf *out)
{
    osu *r = state;
    tw_ser s;
    tw_ser_init(&s, r->host, out);
    tw_ser_u32(&s, OSU_STATE_TAG);
    tw_ser_i64(&s, r->datapoints);
    tw_ser_u8(&s, (uint8_t)r->scanned);
    tw_namemap_save(&r->gpu_ids, &s);
    tw_namemap_save(&r->core_ids, &s);
    for (int k = 0; k < M_COUNT; k++) {
        const osu_metric *m = &r->m[k];
        tw_namemap_save(&m->nodes, &s);
        for (uint32_t n = 0; n < m->nodes.count; n++) {
            const osu_cell *c = &m->cells[n];
            tw_ser_u64(&s, c->ts.n);
            for (size_t e = 0; e < c->ts.n; e++) {
                tw_ser_f64(&s, c->ts.ent[e].key);
                tw_ser_u64(&s, c->ts.ent[e].val);
            }
            tw_countmap_save(&c->sums, &s);
        }
    }
    return tw_ser_ok(&s) ? TW_OK : TW_ERR;
}

static int osu_restore(void *state, const void *data, size_t len, char *err,
                       size_t errlen)
{
    osu *r = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    if (tw_deser_u32(&d) != OSU_STATE_TAG || r->scanned) {
        snprintf(err, errlen,
                 "OverallSystemUsage: not an OverallSystemUsage "
                 "checkpoint, or restore into a used instance");
        return TW_ERR;
    }
    r->datapoints = tw_deser_i64(&d);
    r->scanned = tw_deser_u8(&d);
    if (tw_namemap_load(&r->gpu_ids, &d) != TW_OK ||
        tw_namemap_load(&r->core_ids, &d) != TW_OK)
        goto bad;
    for (int k = 0; k < M_COUNT; k++) {
        tw_namemap nodes;
        tw_namemap_init(&nodes);
        if (tw_namemap_load(&nodes, &d) != TW_OK) {
            tw_namemap_free(&nodes);
            goto bad;
        }
        for (uint32_t n = 0; n < nodes.count; n++) {
            osu_cell *c;
            if (osu_cell_of(r, k, tw_namemap_key(&nodes, n), &c) != TW_OK) {
                tw_namemap_free(&nodes);
                goto bad;
            }
            uint64_t ne = tw_deser_count(&d, 16);
            for (uint64_t e = 0; e < ne && tw_deser_ok(&d); e++) {
                double key = tw_deser_f64(&d);
                uint64_t val = tw_deser_u64(&d);
                uint64_t *slot = tw_dmap_put(&c->ts, key, val, NULL);
                if (slot == NULL) {
                    tw_namemap_free(&nodes);
                    goto bad;
                }
            }
            if (tw_countmap_restore(&c->sums, &d) != TW_OK) {
                tw_namemap_free(&nodes);
                goto bad;
            }
        }
        tw_namemap_free(&nodes);
        r->m[k].memo_node = NULL; /* it pointed into `nodes` */
    }
    if (tw_deser_done(&d))
        return TW_OK;
bad:
    snprintf(err, errlen,
             "OverallSystemUsage: corrupt or truncated checkpoint");
    return TW_ERR;
}

static const tw_rule_descriptor osu_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "OverallSystemUsage",
    .description = "Summarises per-node utilisation of CPU, GPU, memory, "
                   "network and I/O wait; never triggers.",
    .params = NULL,
    .nparams = 0,
    .create = osu_create,
    .scan = osu_scan,
    .details = osu_details,
    .save = osu_save,
    .restore = osu_restore,
    .destroy = osu_destroy,
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &osu_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_SYSTEM;
}
