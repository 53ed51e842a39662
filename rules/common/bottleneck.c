/* bottleneck.c - CPUBottleneck / IOBottleneck shared logic (see
 * bottleneck.h, RULES.md §3.2-§3.3). */
#include "bottleneck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwagg.h"
#include "job_phase.h"
#include "trainwatch/dmap.h"
#include "trainwatch/finding.h"
#include "trainwatch/ser.h"

#define BNECK_MAX_DATAPOINTS 1000000u
#define BNECK_SNAPSHOT_S 0.02

/* Rule-owned Details keys (ids below TW_FWKEY_FIRST). */
enum { K_BOTTLENECKS = 0, K_LOW_GPU = 1 };

typedef struct bneck_entry {
    double anchor;
    uint32_t gpus, cpus;
} bneck_entry;

typedef struct bneck {
    const tw_bneck_kind *kind;
    const tw_host *host;
    tw_semantics sem;
    double threshold, gpu_threshold, high_threshold;
    int64_t patience;
    const char *param_text[TW_BNECK_P_COUNT];

    double anchor;
    uint64_t datapoints;
    uint64_t low_gpu;
    uint64_t nb; /* len(bottlenecks) since the last reset        */
    int64_t triggered;
    uint64_t low_gpu_reported; /* Details["low_gpu_utilization"]          */

    /* Report entries in insertion order: entry of sequence number s
     * (0-based since the last reset) lives at ring[s % ring_cap] while
     * s >= total - ring_cap. Reference: ring_cap grows without bound. */
    bneck_entry *ring;
    size_t ring_cap;
    size_t ring_max; /* fixed: max_report_entries; reference: 0 */
    uint64_t total;  /* entries ever inserted since the last reset */

    tw_dmap index;       /* anchor -> seq (reference: all; fixed: recent) */
    double *prev_anchor; /* fixed: the previous scan's bottleneck anchors */
    uint64_t *prev_seq;
    size_t nprev, capprev;

    tw_dmap g, c; /* scan-local: anchor -> low GPU / high counts    */

    /* For the finding (never for decisions): samples that made a
     * bottleneck snapshot, per node (index into tw_scan.nodes), and the
     * first and last bottleneck anchors ever (the report ring forgets). */
    uint64_t *node_hits;
    size_t nnode_hits;
    double first_anchor, last_anchor;
    uint64_t high_peak_pct; /* highest "high" sample in a bottleneck, % */
    tw_fwagg agg;
    tw_keyorder order;
    char params_text[512]; /* RuleParameters, the reference's order */
    tw_job_phase phase;    /* fixed: the initialization to skip */
    int64_t grace_us;      /* fixed: init_grace */
} bneck;

void tw_bneck_destroy(void *state)
{
    bneck *b = state;
    if (b == NULL)
        return;
    free(b->ring);
    tw_dmap_free(&b->index);
    free(b->prev_anchor);
    free(b->prev_seq);
    free(b->node_hits);
    tw_dmap_free(&b->g);
    tw_dmap_free(&b->c);
    tw_fwagg_free(&b->agg);
    free(b);
}

int tw_bneck_create(const tw_bneck_kind *kind, const tw_host *host,
                    const tw_params *p, void **state, char *err, size_t errlen)
{
    if (p->nvalues != TW_BNECK_P_COUNT) {
        snprintf(err, errlen, "%s: expected %d parameters", kind->rule_name,
                 TW_BNECK_P_COUNT);
        return TW_ERR;
    }
    bneck *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        snprintf(err, errlen, "%s: out of memory", kind->rule_name);
        return TW_ERR;
    }
    b->kind = kind;
    b->host = host;
    b->sem = p->semantics;
    b->threshold = p->values[TW_BNECK_P_THRESHOLD].d;
    b->gpu_threshold = p->values[TW_BNECK_P_GPU].d;
    b->high_threshold = p->values[TW_BNECK_P_HIGH].d;
    b->patience = p->values[TW_BNECK_P_PATIENCE].i;
    b->grace_us = p->values[TW_BNECK_P_INIT_GRACE].is_none
                      ? 0
                      : (int64_t)(p->values[TW_BNECK_P_INIT_GRACE].d * 60e6);
    for (int i = 0; i < TW_BNECK_P_COUNT; i++)
        b->param_text[i] = p->values[i].text;
    snprintf(b->params_text, sizeof(b->params_text),
             "threshold:%s\n%s:%s\ngpu_threshold:%s\npatience:%s",
             b->param_text[TW_BNECK_P_THRESHOLD], b->kind->high_label,
             b->param_text[TW_BNECK_P_HIGH], b->param_text[TW_BNECK_P_GPU],
             b->param_text[TW_BNECK_P_PATIENCE]);
    b->ring_max = b->sem == TW_SEMANTICS_FIXED
                      ? (size_t)p->values[TW_BNECK_P_MAX_REPORT].i
                      : 0;
    tw_dmap_init(&b->index);
    tw_dmap_init(&b->g);
    tw_dmap_init(&b->c);
    tw_fwagg_init(&b->agg, b->sem);
    tw_keyorder_init(&b->order);
    *state = b;
    return TW_OK;
}

static int fixed(const bneck *b)
{
    return b->ring_max > 0;
}

/* fixed: a sample of the initialization or finalization makes no
 * snapshot. */
static int outside_training(const bneck *b, const tw_scan *sc,
                            const tw_sample *s)
{
    return fixed(b) &&
           tw_job_phase_outside(&b->phase, s->ts, sc->first_timestamp_us,
                                b->grace_us);
}

static void reset_map(bneck *b)
{
    b->nb = 0;
    b->total = 0;
    b->nprev = 0;
    tw_dmap_clear(&b->index);
}

static bneck_entry *entry_of(bneck *b, uint64_t seq)
{
    if (b->ring_cap == 0)
        return NULL;
    if (fixed(b)) {
        if (seq + b->ring_cap < b->total)
            return NULL; /* evicted from the report */
        return &b->ring[seq % b->ring_cap];
    }
    return seq < b->total ? &b->ring[seq] : NULL;
}

/* Appends a new entry; returns its sequence number (or UINT64_MAX). */
static uint64_t append_entry(bneck *b, double anchor, uint32_t g, uint32_t c)
{
    if (fixed(b)) {
        if (b->ring_cap < b->ring_max && b->total >= b->ring_cap) {
            /* grow up to the cap; entries are still in seq order */
            size_t cap = b->ring_cap ? 2 * b->ring_cap : 64;
            if (cap > b->ring_max)
                cap = b->ring_max;
            bneck_entry *r = realloc(b->ring, cap * sizeof(*r));
            if (r == NULL)
                return UINT64_MAX;
            b->ring = r;
            b->ring_cap = cap;
        }
    } else if (b->total == b->ring_cap) {
        size_t cap = b->ring_cap ? 2 * b->ring_cap : 64;
        bneck_entry *r = realloc(b->ring, cap * sizeof(*r));
        if (r == NULL)
            return UINT64_MAX;
        b->ring = r;
        b->ring_cap = cap;
    }
    uint64_t seq = b->total++;
    bneck_entry *e = &b->ring[fixed(b) ? seq % b->ring_cap : seq];
    e->anchor = anchor;
    e->gpus = g;
    e->cpus = c;
    return seq;
}

static int remember_prev(bneck *b, double anchor, uint64_t seq)
{
    if (b->nprev == b->capprev) {
        size_t cap = b->capprev ? 2 * b->capprev : 16;
        double *a = realloc(b->prev_anchor, cap * sizeof(*a));
        if (a == NULL)
            return TW_ERR;
        b->prev_anchor = a;
        uint64_t *s = realloc(b->prev_seq, cap * sizeof(*s));
        if (s == NULL)
            return TW_ERR;
        b->prev_seq = s;
        b->capprev = cap;
    }
    b->prev_anchor[b->nprev] = anchor;
    b->prev_seq[b->nprev] = seq;
    b->nprev++;
    return TW_OK;
}

static uint32_t clamp32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Replays the scan's snapshot anchors from `anchor` and credits each
 * node whose low-GPU or high sample lies in one of this scan's bottleneck
 * snapshots (those in the index; the previous scan's are there too, which
 * only matters for a snapshot straddling the boundary). */
static int note_nodes(bneck *b, const tw_scan *sc, double anchor)
{
    if (sc->nnodes > b->nnode_hits) {
        uint64_t *n = realloc(b->node_hits, sc->nnodes * sizeof(*n));
        if (n == NULL)
            return TW_ERR;
        memset(n + b->nnode_hits, 0, (sc->nnodes - b->nnode_hits) * sizeof(*n));
        b->node_hits = n;
        b->nnode_hits = sc->nnodes;
    }
    for (size_t i = 0; i < sc->nsamples; i++) {
        const tw_sample *s = &sc->samples[i];
        if (outside_training(b, sc, s))
            continue;
        if (fabs(anchor - s->ts) > BNECK_SNAPSHOT_S)
            anchor = s->ts;
        if (s->series >= sc->nseries)
            continue;
        const tw_series *se = &sc->series[s->series];
        int low =
            se->metric == TW_METRIC_GPU_UTIL && s->value < b->gpu_threshold;
        int high = !low && se->metric == b->kind->high_metric &&
                   s->value > b->high_threshold;
        if ((!low && !high) || tw_dmap_get(&b->index, anchor) == NULL)
            continue;
        if (se->node < b->nnode_hits)
            b->node_hits[se->node]++;
        if (b->first_anchor == 0 || anchor < b->first_anchor)
            b->first_anchor = anchor;
        if (anchor > b->last_anchor)
            b->last_anchor = anchor;
        if (high && s->value > (double)b->high_peak_pct)
            b->high_peak_pct = (uint64_t)s->value;
    }
    return TW_OK;
}

int tw_bneck_scan(void *state, const tw_scan *sc, tw_scan_result *out,
                  char *err, size_t errlen)
{
    bneck *b = state;
    const char *name = b->kind->rule_name;

    if (b->nb > BNECK_MAX_DATAPOINTS)
        reset_map(b);

    /* fixed: the index holds the previous scan's anchors only */
    if (fixed(b)) {
        tw_dmap_clear(&b->index);
        for (size_t i = 0; i < b->nprev; i++) {
            uint64_t *v =
                tw_dmap_put(&b->index, b->prev_anchor[i], b->prev_seq[i], NULL);
            if (v == NULL)
                goto oom;
            *v = b->prev_seq[i];
        }
        b->nprev = 0;
    }

    tw_dmap_clear(&b->g);
    tw_dmap_clear(&b->c);
    if (fixed(b))
        tw_job_phase_note(&b->phase, sc);
    double anchor0 = b->anchor;
    for (size_t i = 0; i < sc->nsamples; i++) {
        const tw_sample *s = &sc->samples[i];
        if (outside_training(b, sc, s))
            continue;
        if (fabs(b->anchor - s->ts) > BNECK_SNAPSHOT_S) {
            b->anchor = s->ts;
            b->datapoints++;
        }
        tw_metric m = s->series < sc->nseries ? sc->series[s->series].metric
                                              : TW_METRIC_OTHER;
        if (m == TW_METRIC_GPU_UTIL && s->value < b->gpu_threshold) {
            int inserted = 0;
            uint64_t *v = tw_dmap_put(&b->g, b->anchor, 0, &inserted);
            if (v == NULL)
                goto oom;
            if (inserted)
                b->low_gpu++;
            (*v)++;
        } else if (m == b->kind->high_metric && s->value > b->high_threshold) {
            uint64_t *v = tw_dmap_put(&b->c, b->anchor, 0, NULL);
            if (v == NULL)
                goto oom;
            (*v)++;
        }
    }

    /* This scan's bottlenecks T, in C's insertion order; entries reuse the
     * map C: its value becomes the report sequence number. */
    size_t nt = 0;
    for (size_t i = 0; i < b->c.n; i++) {
        double a = b->c.ent[i].key;
        uint64_t *gl = tw_dmap_get(&b->g, a);
        if (gl == NULL)
            continue;
        uint32_t ng = clamp32(*gl), nc = clamp32(b->c.ent[i].val);
        uint64_t *seqp = tw_dmap_get(&b->index, a);
        uint64_t seq;
        if (seqp != NULL) {
            seq = *seqp;
            bneck_entry *e = entry_of(b, seq);
            if (e != NULL) {
                e->gpus = ng;
                e->cpus = nc;
            }
        } else {
            seq = append_entry(b, a, ng, nc);
            if (seq == UINT64_MAX)
                goto oom;
            if (tw_dmap_put(&b->index, a, seq, NULL) == NULL)
                goto oom;
            b->nb++;
        }
        if (fixed(b) && remember_prev(b, a, seq) != TW_OK)
            goto oom;
        /* compact T into the front of c.ent (keys only are used below) */
        b->c.ent[nt].key = a;
        nt++;
    }

    if (nt > 0 && note_nodes(b, sc, anchor0) != TW_OK)
        goto oom;

    int fire = 0;
    if (b->datapoints > (uint64_t)b->patience) {
        double ratio = (double)b->nb / (double)b->datapoints * 100.0;
        fire = ratio > b->threshold;
    }
    if (fire) {
        b->triggered++;
        tw_keyorder_note(&b->order, K_BOTTLENECKS);
        if (b->nb > 0) {
            tw_keyorder_note(&b->order, K_LOW_GPU);
            b->low_gpu_reported = b->low_gpu;
        }
        if (nt > 0) {
            double *begins = malloc(nt * sizeof(double));
            if (begins == NULL)
                goto oom;
            for (size_t i = 0; i < nt; i++)
                begins[i] = b->c.ent[i].key * 1000 * 1000;
            int arc = tw_fwagg_instants(&b->agg, sc->events, sc->nevents,
                                        begins, nt, &b->order);
            free(begins);
            if (arc != TW_OK)
                goto oom;
        }
    } else {
        tw_keyorder_note(&b->order, K_LOW_GPU);
        b->low_gpu_reported = b->low_gpu;
        tw_keyorder_note(&b->order, K_BOTTLENECKS);
    }
    /* c's keys were overwritten by the compaction; drop it for reuse */
    tw_dmap_clear(&b->c);

    out->condition_met = fire;
    out->rule_triggered = b->triggered;
    out->violations = (int64_t)b->nb;
    out->datapoints = (int64_t)b->datapoints;
    return TW_OK;
oom:
    snprintf(err, errlen, "%s: out of memory", name);
    return TW_ERR;
}

static void write_own(void *ctx, unsigned id, tw_json *j)
{
    bneck *b = ctx;
    const tw_host *h = b->host;
    if (id == K_LOW_GPU) {
        h->json_key(j, "low_gpu_utilization");
        h->json_int(j, (int64_t)b->low_gpu_reported);
        return;
    }
    h->json_key(j, "bottlenecks");
    h->json_object_begin(j);
    uint64_t first = 0;
    if (fixed(b) && b->total > b->ring_cap)
        first = b->total - b->ring_cap;
    for (uint64_t s = first; s < b->total; s++) {
        const bneck_entry *e = entry_of(b, s);
        h->json_key_double(j, e->anchor);
        h->json_object_begin(j);
        h->json_key(j, "GPUs");
        h->json_int(j, e->gpus);
        h->json_key(j, "CPUs");
        h->json_int(j, e->cpus);
        h->json_object_end(j);
    }
    h->json_object_end(j);
}

const char *tw_bneck_parameters_text(void *state)
{
    const bneck *b = state;
    return b->params_text;
}

int tw_bneck_details(void *state, tw_json *j)
{
    bneck *b = state;
    const tw_host *h = b->host;
    h->json_object_begin(j);
    tw_fwagg_write_details(&b->agg, &b->order, h, j, write_own, b);
    h->json_object_end(j);
    return TW_OK;
}

int tw_bneck_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                     char *err, size_t errlen)
{
    bneck *b = state;
    (void)err, (void)errlen;
    int io = b->kind->high_metric == TW_METRIC_CPU_IOWAIT;
    const char *what = io ? "I/O wait" : "CPU utilisation";
    /* nodes, most bottleneck samples first */
    uint64_t listed_upto = UINT64_MAX;
    for (;;) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < b->nnode_hits; i++)
            if (b->node_hits[i] > 0 && b->node_hits[i] < listed_upto &&
                (best == SIZE_MAX || b->node_hits[i] > b->node_hits[best]))
                best = i;
        if (best == SIZE_MAX)
            break;
        listed_upto = b->node_hits[best];
        for (size_t i = 0; i < b->nnode_hits; i++)
            if (b->node_hits[i] == listed_upto)
                tw_finding_add_name(f, i < ctx->nnodes ? ctx->nodes[i] : "?");
    }
    if (b->first_anchor > 0) {
        f->first_us = (int64_t)(b->first_anchor * 1e6);
        f->last_us = (int64_t)(b->last_anchor * 1e6);
    }
    double ratio =
        b->datapoints > 0 ? (double)b->nb / (double)b->datapoints * 100.0 : 0.0;
    f->value = ratio;
    f->limit = b->threshold;
    snprintf(f->unit, sizeof(f->unit), "%%");
    tw_finding_text(f->summary, "%s",
                    io ? "The GPUs sat idle while the CPU cores waited on "
                         "I/O: training is held back by reading data."
                       : "The GPUs sat idle while CPU cores were saturated: "
                         "training is held back by work on the CPU.");
    tw_finding_text(
        f->magnitude,
        "GPU below %s %% while a core's %s was above %s %% (up "
        "to %llu %%) in %.1f %% of %llu snapshots (%llu bottlenecks); the "
        "rule fires above %s %%",
        b->param_text[TW_BNECK_P_GPU], what, b->param_text[TW_BNECK_P_HIGH],
        (unsigned long long)b->high_peak_pct, ratio,
        (unsigned long long)b->datapoints, (unsigned long long)b->nb,
        b->param_text[TW_BNECK_P_THRESHOLD]);
    tw_finding_text(
        f->recommendation, "%s",
        io ? "Feed the GPUs faster from storage: copy the data set to local "
             "NVMe or memory, read it as a few large sequential shards "
             "(TFRecord, WebDataset, RecordIO) instead of many small files, "
             "and read ahead with more parallel reads or prefetching."
           : "Take work off the CPU: raise the DataLoader's num_workers if "
             "cores are free, move decoding and augmentation to the GPU "
             "(e.g. DALI) or do them once offline, or pick an instance with "
             "more CPU cores per GPU.");
    tw_finding_text(f->parameters,
                    "threshold %s %% of snapshots, gpu_threshold %s %%, %s "
                    "%s %%, patience %s snapshots",
                    b->param_text[TW_BNECK_P_THRESHOLD],
                    b->param_text[TW_BNECK_P_GPU], b->kind->high_label,
                    b->param_text[TW_BNECK_P_HIGH],
                    b->param_text[TW_BNECK_P_PATIENCE]);
    return TW_OK;
}

size_t tw_bneck_memory(const void *state)
{
    const bneck *b = state;
    return sizeof(*b) + b->ring_cap * sizeof(*b->ring) +
           tw_dmap_memory(&b->index) +
           b->capprev * (sizeof(*b->prev_anchor) + sizeof(*b->prev_seq)) +
           tw_dmap_memory(&b->g) + tw_dmap_memory(&b->c) +
           tw_fwagg_memory(&b->agg) - sizeof(b->agg);
}

#define BNECK_TAG 0x424e434bu    /* "BNCK": no finding facts (older) */
#define BNECK_TAG_V2 0x424e4332u /* "BNC2": finding facts at the end  */

int tw_bneck_save(void *state, tw_buf *out)
{
    bneck *b = state;
    tw_ser s;
    tw_ser_init(&s, b->host, out);
    tw_ser_u32(&s, BNECK_TAG_V2);
    tw_ser_f64(&s, b->anchor);
    tw_ser_u64(&s, b->datapoints);
    tw_ser_u64(&s, b->low_gpu);
    tw_ser_u64(&s, b->nb);
    tw_ser_i64(&s, b->triggered);
    tw_ser_u64(&s, b->low_gpu_reported);
    /* report entries still held, oldest first, with their seq numbers */
    uint64_t first = 0;
    if (fixed(b) && b->total > b->ring_cap)
        first = b->total - b->ring_cap;
    tw_ser_u64(&s, b->total);
    tw_ser_u64(&s, first);
    for (uint64_t q = first; q < b->total; q++) {
        const bneck_entry *e = entry_of(b, q);
        tw_ser_f64(&s, e->anchor);
        tw_ser_u32(&s, e->gpus);
        tw_ser_u32(&s, e->cpus);
    }
    /* fixed: the previous scan's anchors (the index is rebuilt from them;
     * reference: the index is rebuilt from the entries) */
    tw_ser_u64(&s, b->nprev);
    for (size_t i = 0; i < b->nprev; i++) {
        tw_ser_f64(&s, b->prev_anchor[i]);
        tw_ser_u64(&s, b->prev_seq[i]);
    }
    tw_keyorder_save(&b->order, &s);
    tw_fwagg_save(&b->agg, &s);
    tw_ser_f64(&s, b->first_anchor);
    tw_ser_f64(&s, b->last_anchor);
    tw_ser_u64(&s, b->high_peak_pct);
    tw_ser_u64(&s, b->nnode_hits);
    for (size_t i = 0; i < b->nnode_hits; i++)
        tw_ser_u64(&s, b->node_hits[i]);
    tw_job_phase_save(&b->phase, &s);
    return tw_ser_ok(&s) ? TW_OK : TW_ERR;
}

int tw_bneck_restore(void *state, const void *data, size_t len, char *err,
                     size_t errlen)
{
    bneck *b = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    reset_map(b);
    uint32_t tag = tw_deser_u32(&d);
    if (tag != BNECK_TAG && tag != BNECK_TAG_V2)
        tw_deser_fail(&d);
    b->anchor = tw_deser_f64(&d);
    b->datapoints = tw_deser_u64(&d);
    b->low_gpu = tw_deser_u64(&d);
    b->nb = tw_deser_u64(&d);
    b->triggered = tw_deser_i64(&d);
    b->low_gpu_reported = tw_deser_u64(&d);
    uint64_t total = tw_deser_u64(&d);
    uint64_t first = tw_deser_u64(&d);
    if (first > total || (total - first) > d.left / 16 ||
        (fixed(b) && total - first > b->ring_max) || (!fixed(b) && first != 0))
        tw_deser_fail(&d);
    free(b->ring);
    b->ring = NULL;
    b->ring_cap = 0;
    if (tw_deser_ok(&d) && total > first) {
        size_t held = (size_t)(total - first);
        size_t cap = fixed(b) ? b->ring_max : held;
        b->ring = malloc(cap * sizeof(*b->ring));
        if (b->ring == NULL)
            tw_deser_fail(&d);
        else
            b->ring_cap = cap;
    }
    /* in fixed mode, keep seq % ring_cap consistent with the saved seqs */
    b->total = first;
    for (uint64_t q = first; q < total && tw_deser_ok(&d); q++) {
        bneck_entry *e = &b->ring[fixed(b) ? q % b->ring_cap : q];
        e->anchor = tw_deser_f64(&d);
        e->gpus = tw_deser_u32(&d);
        e->cpus = tw_deser_u32(&d);
        b->total = q + 1;
        if (!fixed(b) && tw_dmap_put(&b->index, e->anchor, q, NULL) == NULL)
            tw_deser_fail(&d);
    }
    uint64_t np = tw_deser_count(&d, 16);
    for (uint64_t i = 0; i < np && tw_deser_ok(&d); i++) {
        double a = tw_deser_f64(&d);
        uint64_t q = tw_deser_u64(&d);
        if (remember_prev(b, a, q) != TW_OK)
            tw_deser_fail(&d);
    }
    if (tw_deser_ok(&d))
        tw_keyorder_restore(&b->order, &d);
    if (tw_deser_ok(&d))
        tw_fwagg_restore(&b->agg, &d);
    free(b->node_hits);
    b->node_hits = NULL;
    b->nnode_hits = 0;
    if (tag == BNECK_TAG_V2 && tw_deser_ok(&d)) {
        b->first_anchor = tw_deser_f64(&d);
        b->last_anchor = tw_deser_f64(&d);
        b->high_peak_pct = tw_deser_u64(&d);
        uint64_t nn = tw_deser_count(&d, 8);
        if (tw_deser_ok(&d) && nn > 0) {
            b->node_hits = calloc((size_t)nn, sizeof(*b->node_hits));
            if (b->node_hits == NULL)
                tw_deser_fail(&d);
            else
                b->nnode_hits = (size_t)nn;
        }
        for (size_t i = 0; i < b->nnode_hits && tw_deser_ok(&d); i++)
            b->node_hits[i] = tw_deser_u64(&d);
    }
    /* the phase's trailer; absent in checkpoints of older builds */
    memset(&b->phase, 0, sizeof(b->phase));
    if (tw_deser_ok(&d) && d.left > 0)
        tw_job_phase_load(&b->phase, &d);
    if (!tw_deser_done(&d)) {
        snprintf(err, errlen, "%s: corrupt checkpoint", b->kind->rule_name);
        return TW_ERR;
    }
    return TW_OK;
}
