/*
 * straggler.c - Straggler (trainwatch rule, fixed semantics; no reference
 * counterpart): finds the node that is consistently slower than the others
 * in a multi-node job, from its TRAIN step events, or without them from
 * system metrics.
 *
 * Step events: per step number, the TRAIN steps of that number that
 * arrive in one scan from two or more nodes are compared: each node's
 * duration against the fastest of them (relative score, as straggler
 * detectors of distributed training do) and against the node's own
 * fastest step so far (individual score: near 1 for a node that has
 * always been slow, high for one that slowed down). A node whose newest
 * `window` compared steps have more than `min_fraction` of relative
 * scores above `factor` is a straggler, once it has `patience` compared
 * steps.
 *
 * System metrics: in synchronous training the nodes that wait for a slow
 * one idle their GPUs while it computes. Per scan, each node's mean GPU
 * utilisation is compared with the median of the other nodes' (relative
 * score); a scan is slow for a node whose score is above `factor` with
 * its GPUs at least `sys_min_busy` % busy. A node with more than
 * `min_fraction` slow scans among its newest `sys_window` is a straggler,
 * once it has `sys_patience` compared scans. (A slow node whose own GPUs
 * are the low ones is LowGPUUtilization's finding, not this one's.)
 *
 * Both: once any step has been compared across nodes, step events decide
 * and the finding says whether system metrics confirm it (the node's
 * GPUs busy while the others idle); before that, and in a job without the
 * framework hook, system metrics decide. Each (scan, straggler) of the
 * deciding source counts once in RuleTriggered and Violations.
 * Datapoints: step events compared plus (node, scan) GPU means compared.
 *
 * Limits: only steps of the same number within one scan are compared (a
 * step whose nodes' events fall into different scans is not); a step event
 * already seen in an earlier scan (one that overlaps a boundary) is
 * skipped by its start time per node; a system sample on a scan boundary
 * counts in the first scan only.
 *
 * Memory: per step node a ring of `window` relative scores and one of
 * individual scores (16 bytes x window) plus its id; per system node three
 * rings of `sys_window` doubles; per scan, one entry per TRAIN step event
 * of the scan and three values per node (kept for the next scan).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sysutil.h"
#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

enum {
    P_FACTOR = 0,
    P_WINDOW,
    P_PATIENCE,
    P_MIN_FRACTION,
    P_SYS_WINDOW,
    P_SYS_PATIENCE,
    P_SYS_MIN_BUSY,
    P_COUNT
};

static const tw_param_spec sg_params[P_COUNT] = {
    {"factor", TW_PARAM_DOUBLE, "1.5", 1.0, 1e6,
     "a node's step is slow when it takes more than factor x the fastest "
     "node's step of the same number"},
    {"window", TW_PARAM_INT, "50", 1.0, 100000.0,
     "newest compared steps per node that decide"},
    {"patience", TW_PARAM_INT, "20", 1.0, 1e9,
     "compared steps a node needs before it is judged"},
    {"min_fraction", TW_PARAM_DOUBLE, "0.5", 0.0, 1.0,
     "a node is a straggler when more than this fraction of its window's "
     "steps (or scans) are slow"},
    {"sys_window", TW_PARAM_INT, "10", 1.0, 100000.0,
     "system metrics: newest compared scans per node that decide"},
    {"sys_patience", TW_PARAM_INT, "3", 1.0, 1e9,
     "system metrics: compared scans a node needs before it is judged"},
    {"sys_min_busy", TW_PARAM_DOUBLE, "50", 0.0, 100.0,
     "system metrics: a node's GPUs must be busy at least this much (mean "
     "%, in the scan) to be the one the others wait for"},
};

#define SG_MAGIC 0x53544732u /* "STG2" */
/* the layout before the system-metrics part: still restored */
#define SG_MAGIC_V1 0x53544731u /* "STG1" */

typedef struct sg_node {
    tw_dring rel;     /* relative scores, newest `window` */
    tw_dring ind;     /* individual scores, parallel to rel */
    double best;      /* own fastest step (s); 0 = none yet */
    int64_t seen_us;  /* newest step start taken in (previous scans) */
    int64_t compared; /* steps compared, whole job */
    int straggler;    /* at the last evaluation */
    double rel_mean;  /* window means at the last evaluation */
    double ind_mean;
    double slow_share; /* share of slow steps in the window */
} sg_node;

/* A system node's GPU busy share against the other nodes', per scan. */
typedef struct sg_sysnode {
    tw_dring rel;     /* own mean GPU use / the others' median, per scan */
    tw_dring busy;    /* own mean GPU use (%), parallel to rel */
    tw_dring others;  /* the other nodes' median (%), parallel to rel */
    int64_t compared; /* scans compared, whole job */
    int straggler;    /* at the last evaluation */
    double rel_mean;  /* window means at the last evaluation */
    double busy_mean;
    double others_mean;
    double slow_share; /* share of slow scans in the window */
} sg_sysnode;

/* One TRAIN step event of the current scan. */
typedef struct sg_entry {
    const char *step; /* step_num text, owned by the scan */
    uint32_t node;
    double dur;
    int64_t start_us;
} sg_entry;

typedef struct sg_state {
    const tw_host *host;
    double factor, min_fraction, sys_min_busy;
    uint32_t window, sys_window;
    int64_t patience, sys_patience;
    char *params_text;

    tw_namemap names; /* node ids, first-seen order */
    sg_node *nodes;
    uint32_t cap;

    sg_entry *ent; /* scratch for one scan */
    size_t ecap;
    double *scratch; /* window values */
    double *scratch2;

    tw_namemap snames; /* system node ids, first-seen order */
    sg_sysnode *snodes;
    uint32_t scap;
    double *ssum; /* per scan node: GPU utilisation sum and count */
    int64_t *scount;
    double *smean; /* the scan's node means, sorted */
    uint32_t sacc_cap;
    int by_system; /* the last verdict came from system metrics */

    int64_t triggered, violations, datapoints;
    int64_t first_us, last_us; /* scans with a straggler, for the finding */
} sg_state;

static void sg_destroy(void *state)
{
    sg_state *s = state;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->names.count; i++) {
        tw_dring_free(&s->nodes[i].rel);
        tw_dring_free(&s->nodes[i].ind);
    }
    tw_namemap_free(&s->names);
    free(s->nodes);
    for (uint32_t i = 0; i < s->snames.count; i++) {
        tw_dring_free(&s->snodes[i].rel);
        tw_dring_free(&s->snodes[i].busy);
        tw_dring_free(&s->snodes[i].others);
    }
    tw_namemap_free(&s->snames);
    free(s->snodes);
    free(s->ssum);
    free(s->scount);
    free(s->smean);
    free(s->ent);
    free(s->scratch);
    free(s->scratch2);
    free(s->params_text);
    free(s);
}

static int sg_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen, "Straggler: expected %d parameters, got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    const tw_param_value *v = params->values;
    sg_state *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "Straggler: out of memory");
        return TW_ERR;
    }
    s->host = host;
    s->factor = v[P_FACTOR].is_none ? 1.5 : v[P_FACTOR].d;
    s->window = v[P_WINDOW].is_none ? 50u : (uint32_t)v[P_WINDOW].i;
    s->patience = v[P_PATIENCE].is_none ? 20 : v[P_PATIENCE].i;
    s->min_fraction = v[P_MIN_FRACTION].is_none ? 0.5 : v[P_MIN_FRACTION].d;
    s->sys_window = v[P_SYS_WINDOW].is_none ? 10u : (uint32_t)v[P_SYS_WINDOW].i;
    s->sys_patience = v[P_SYS_PATIENCE].is_none ? 3 : v[P_SYS_PATIENCE].i;
    s->sys_min_busy = v[P_SYS_MIN_BUSY].is_none ? 50.0 : v[P_SYS_MIN_BUSY].d;
    tw_namemap_init(&s->names);
    tw_namemap_init(&s->snames);
    uint32_t longest = s->window > s->sys_window ? s->window : s->sys_window;
    s->scratch = malloc(longest * sizeof(double));
    s->scratch2 = malloc(longest * sizeof(double));
    s->params_text = malloc(256);
    if (!s->scratch || !s->scratch2 || !s->params_text) {
        sg_destroy(s);
        snprintf(err, errlen, "Straggler: out of memory");
        return TW_ERR;
    }
    snprintf(s->params_text, 256,
             "factor:%g\nwindow:%u\npatience:%lld\nmin_fraction:%g\n"
             "sys_window:%u\nsys_patience:%lld\nsys_min_busy:%g",
             s->factor, s->window, (long long)s->patience, s->min_fraction,
             s->sys_window, (long long)s->sys_patience, s->sys_min_busy);
    *state = s;
    return TW_OK;
}

/* The index of node `id`, added with empty rings when new. */
static int sg_node_of(sg_state *s, const char *id, uint32_t *idx)
{
    int added = 0;
    if (tw_namemap_add(&s->names, id, idx, &added) != TW_OK)
        return TW_ERR;
    if (!added)
        return TW_OK;
    if (tw_sys_grow((void **)&s->nodes, sizeof(*s->nodes), &s->cap,
                    s->names.count) != TW_OK)
        return TW_ERR;
    sg_node *n = &s->nodes[*idx];
    memset(n, 0, sizeof(*n));
    if (tw_dring_init(&n->rel, s->window) != TW_OK ||
        tw_dring_init(&n->ind, s->window) != TW_OK)
        return TW_ERR;
    return TW_OK;
}

static const char *step_num(const tw_fw_event *e)
{
    for (uint32_t i = 0; e->args && i < e->nargs; i++)
        if (e->args[i].key && strcmp(e->args[i].key, "step_num") == 0 &&
            (e->args[i].kind == TW_ARG_STRING ||
             e->args[i].kind == TW_ARG_NUMBER))
            return e->args[i].value;
    return NULL;
}

static int entry_cmp(const void *a, const void *b)
{
    const sg_entry *x = a, *y = b;
    int c = strcmp(x->step, y->step);
    if (c != 0)
        return c;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* Collects the scan's TRAIN steps not taken in before. */
static int sg_collect(sg_state *s, const tw_scan *scan, size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        const char *num = step_num(e);
        if (e->mode != TW_MODE_TRAIN || !num || e->end_us <= e->start_us)
            continue;
        uint32_t idx;
        if (sg_node_of(s, e->node ? e->node : "", &idx) != TW_OK)
            return TW_ERR;
        if (e->start_us <= s->nodes[idx].seen_us)
            continue; /* seen in an earlier scan (it overlaps a boundary) */
        if (*n == s->ecap) {
            size_t cap = s->ecap ? s->ecap * 2 : 256;
            sg_entry *p = realloc(s->ent, cap * sizeof(*p));
            if (!p)
                return TW_ERR;
            s->ent = p;
            s->ecap = cap;
        }
        s->ent[(*n)++] = (sg_entry){
            num, idx, (double)(e->end_us - e->start_us) / 1e6, e->start_us};
    }
    return TW_OK;
}

/* Scores every step number that two or more nodes reported. */
static void sg_compare(sg_state *s, size_t n)
{
    if (n == 0)
        return; /* s->ent may still be NULL: qsort must not see it */
    qsort(s->ent, n, sizeof(*s->ent), entry_cmp);
    for (size_t a = 0; a < n;) {
        size_t b = a + 1;
        while (b < n && strcmp(s->ent[b].step, s->ent[a].step) == 0)
            b++;
        int nodes = 1;
        double fastest = s->ent[a].dur;
        for (size_t k = a + 1; k < b; k++) {
            nodes += s->ent[k].node != s->ent[k - 1].node;
            if (s->ent[k].dur < fastest)
                fastest = s->ent[k].dur;
        }
        for (size_t k = a; nodes >= 2 && k < b; k++) {
            sg_node *nd = &s->nodes[s->ent[k].node];
            if (nd->best == 0 || s->ent[k].dur < nd->best)
                nd->best = s->ent[k].dur;
            tw_dring_push(&nd->rel, s->ent[k].dur / fastest);
            tw_dring_push(&nd->ind, s->ent[k].dur / nd->best);
            nd->compared++;
            s->datapoints++;
        }
        a = b;
    }
    for (size_t k = 0; k < n; k++) {
        sg_node *nd = &s->nodes[s->ent[k].node];
        if (s->ent[k].start_us > nd->seen_us)
            nd->seen_us = s->ent[k].start_us;
    }
}

static double ring_mean(sg_state *s, const tw_dring *r, size_t *len)
{
    *len = tw_dring_copy(r, 0, r->len, s->scratch);
    return *len ? s->host->mean(s->scratch, *len) : 0.0;
}

/* The index of system node `id`, added with empty rings when new. */
static int sg_sysnode_of(sg_state *s, const char *id, uint32_t *idx)
{
    int added = 0;
    if (tw_namemap_add(&s->snames, id, idx, &added) != TW_OK)
        return TW_ERR;
    if (!added)
        return TW_OK;
    if (tw_sys_grow((void **)&s->snodes, sizeof(*s->snodes), &s->scap,
                    s->snames.count) != TW_OK)
        return TW_ERR;
    sg_sysnode *n = &s->snodes[*idx];
    memset(n, 0, sizeof(*n));
    if (tw_dring_init(&n->rel, s->sys_window) != TW_OK ||
        tw_dring_init(&n->busy, s->sys_window) != TW_OK ||
        tw_dring_init(&n->others, s->sys_window) != TW_OK)
        return TW_ERR;
    return TW_OK;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of sorted v[0..m-1] without the element at index `skip`. */
static double median_without(const double *v, size_t m, size_t skip)
{
    size_t k = m - 1;
    size_t lo = (k - 1) / 2, hi = k / 2;
    double a = v[lo < skip ? lo : lo + 1], b = v[hi < skip ? hi : hi + 1];
    return (a + b) / 2.0;
}

/* System metrics: each node's mean GPU utilisation in this scan against
 * the median of the other nodes'. In synchronous training the nodes that
 * wait for a slow one idle their GPUs while it computes, so the slow node
 * is the one busy well above the others. */
static int sg_system(sg_state *s, const tw_scan *scan)
{
    if (scan->nnodes == 0)
        return TW_OK;
    if (scan->nnodes > s->sacc_cap) {
        uint32_t cap = (uint32_t)scan->nnodes;
        double *sum = realloc(s->ssum, cap * sizeof(*sum));
        if (!sum)
            return TW_ERR;
        s->ssum = sum;
        int64_t *cnt = realloc(s->scount, cap * sizeof(*cnt));
        if (!cnt)
            return TW_ERR;
        s->scount = cnt;
        double *mean = realloc(s->smean, cap * sizeof(*mean));
        if (!mean)
            return TW_ERR;
        s->smean = mean;
        s->sacc_cap = cap;
    }
    memset(s->ssum, 0, scan->nnodes * sizeof(*s->ssum));
    memset(s->scount, 0, scan->nnodes * sizeof(*s->scount));
    for (size_t i = 0; i < scan->nsamples; i++) {
        const tw_sample *x = &scan->samples[i];
        if (x->series >= scan->nseries || (x->flags & TW_SAMPLE_REPEAT) ||
            !isfinite(x->value))
            continue; /* a boundary sample counts in one scan only */
        const tw_series *se = &scan->series[x->series];
        if (se->metric != TW_METRIC_GPU_UTIL || se->node >= scan->nnodes)
            continue;
        s->ssum[se->node] += x->value;
        s->scount[se->node]++;
    }
    size_t m = 0;
    for (size_t n = 0; n < scan->nnodes; n++)
        if (s->scount[n] > 0)
            s->smean[m++] = s->ssum[n] / (double)s->scount[n];
    if (m < 2)
        return TW_OK;
    qsort(s->smean, m, sizeof(*s->smean), dbl_cmp);
    for (size_t n = 0; n < scan->nnodes; n++) {
        if (s->scount[n] == 0)
            continue;
        double own = s->ssum[n] / (double)s->scount[n];
        size_t at = 0;
        while (at + 1 < m && s->smean[at] != own)
            at++;
        double others = median_without(s->smean, m, at);
        uint32_t idx;
        if (sg_sysnode_of(s, scan->nodes[n], &idx) != TW_OK)
            return TW_ERR;
        sg_sysnode *nd = &s->snodes[idx];
        /* 1 % floor: a node busy while the others are at 0 is "very" */
        tw_dring_push(&nd->rel, own / (others > 1.0 ? others : 1.0));
        tw_dring_push(&nd->busy, own);
        tw_dring_push(&nd->others, others);
        nd->compared++;
        s->datapoints++;
    }
    return TW_OK;
}

/* Judges every system node on its window of scans. */
static int64_t sg_judge_system(sg_state *s)
{
    int64_t found = 0;
    for (uint32_t i = 0; i < s->snames.count; i++) {
        sg_sysnode *nd = &s->snodes[i];
        size_t len;
        nd->busy_mean = ring_mean(s, &nd->busy, &len);
        memcpy(s->scratch2, s->scratch, len * sizeof(double));
        nd->others_mean = ring_mean(s, &nd->others, &len);
        nd->rel_mean = ring_mean(s, &nd->rel, &len);
        size_t slow = 0;
        for (size_t k = 0; k < len; k++)
            slow +=
                s->scratch[k] > s->factor && s->scratch2[k] >= s->sys_min_busy;
        nd->slow_share = len ? (double)slow / (double)len : 0.0;
        nd->straggler =
            nd->compared >= s->sys_patience && nd->slow_share > s->min_fraction;
        found += nd->straggler;
    }
    return found;
}

/* Judges every node on its window; returns the stragglers found. */
static int64_t sg_judge(sg_state *s)
{
    int64_t found = 0;
    for (uint32_t i = 0; i < s->names.count; i++) {
        sg_node *nd = &s->nodes[i];
        size_t len;
        nd->ind_mean = ring_mean(s, &nd->ind, &len);
        nd->rel_mean = ring_mean(s, &nd->rel, &len);
        size_t slow = 0;
        for (size_t k = 0; k < len; k++)
            slow += s->scratch[k] > s->factor;
        nd->slow_share = len ? (double)slow / (double)len : 0.0;
        nd->straggler =
            nd->compared >= s->patience && nd->slow_share > s->min_fraction;
        found += nd->straggler;
    }
    return found;
}

/* Whether any step of the job has been compared across nodes: then step
 * events decide and system metrics only confirm. */
static int sg_have_steps(const sg_state *s)
{
    for (uint32_t i = 0; i < s->names.count; i++)
        if (s->nodes[i].compared > 0)
            return 1;
    return 0;
}

static int sg_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    sg_state *s = state;
    size_t n;
    if (sg_collect(s, scan, &n) != TW_OK || sg_system(s, scan) != TW_OK) {
        snprintf(err, errlen, "Straggler: out of memory");
        return TW_ERR;
    }
    sg_compare(s, n);
    int64_t by_steps = sg_judge(s);
    int64_t by_system = sg_judge_system(s);
    s->by_system = !sg_have_steps(s);
    int64_t found = s->by_system ? by_system : by_steps;
    if (found > 0) {
        s->triggered += found;
        s->violations += found;
        if (s->first_us == 0)
            s->first_us = scan->start_us;
        s->last_us = scan->end_us;
    }
    out->condition_met = found > 0;
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;
}

static const char *sg_parameters_text(void *state)
{
    return ((const sg_state *)state)->params_text;
}

/* Details only: the host writes the envelope around them. */
static int sg_details(void *state, tw_json *j)
{
    sg_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    for (uint32_t i = 0; i < s->names.count; i++) {
        const sg_node *nd = &s->nodes[i];
        h->json_key(j, tw_namemap_key(&s->names, i));
        h->json_object_begin(j);
        h->json_key(j, "straggler");
        h->json_int(j, nd->straggler);
        h->json_key(j, "relative");
        h->json_double(j, nd->rel_mean);
        h->json_key(j, "individual");
        h->json_double(j, nd->ind_mean);
        h->json_key(j, "slow_share");
        h->json_double(j, nd->slow_share);
        h->json_key(j, "compared");
        h->json_int(j, nd->compared);
        h->json_object_end(j);
    }
    if (s->snames.count > 0) {
        /* node ids hold no spaces: this key cannot be one */
        h->json_key(j, "system metrics");
        h->json_object_begin(j);
        for (uint32_t i = 0; i < s->snames.count; i++) {
            const sg_sysnode *nd = &s->snodes[i];
            h->json_key(j, tw_namemap_key(&s->snames, i));
            h->json_object_begin(j);
            h->json_key(j, "straggler");
            h->json_int(j, nd->straggler);
            h->json_key(j, "gpu_busy");
            h->json_double(j, nd->busy_mean);
            h->json_key(j, "others_gpu_busy");
            h->json_double(j, nd->others_mean);
            h->json_key(j, "relative");
            h->json_double(j, nd->rel_mean);
            h->json_key(j, "slow_share");
            h->json_double(j, nd->slow_share);
            h->json_key(j, "compared");
            h->json_int(j, nd->compared);
            h->json_object_end(j);
        }
        h->json_object_end(j);
        h->json_key(j, "decided_by");
        h->json_string(j, s->by_system ? "system metrics" : "step events");
    }
    h->json_object_end(j);
    return TW_OK;
}

static int sg_save(void *state, tw_buf *out)
{
    sg_state *s = state;
    tw_ser w;
    tw_ser_init(&w, s->host, out);
    tw_ser_u32(&w, SG_MAGIC);
    tw_ser_i64(&w, s->triggered);
    tw_ser_i64(&w, s->violations);
    tw_ser_i64(&w, s->datapoints);
    tw_ser_i64(&w, s->first_us);
    tw_ser_i64(&w, s->last_us);
    tw_namemap_save(&s->names, &w);
    for (uint32_t i = 0; i < s->names.count; i++) {
        const sg_node *nd = &s->nodes[i];
        tw_dring_save(&nd->rel, &w);
        tw_dring_save(&nd->ind, &w);
        tw_ser_f64(&w, nd->best);
        tw_ser_i64(&w, nd->seen_us);
        tw_ser_i64(&w, nd->compared);
        tw_ser_u8(&w, (uint8_t)nd->straggler);
        tw_ser_f64(&w, nd->rel_mean);
        tw_ser_f64(&w, nd->ind_mean);
        tw_ser_f64(&w, nd->slow_share);
    }
    tw_ser_u8(&w, (uint8_t)s->by_system);
    tw_namemap_save(&s->snames, &w);
    for (uint32_t i = 0; i < s->snames.count; i++) {
        const sg_sysnode *nd = &s->snodes[i];
        tw_dring_save(&nd->rel, &w);
        tw_dring_save(&nd->busy, &w);
        tw_dring_save(&nd->others, &w);
        tw_ser_i64(&w, nd->compared);
        tw_ser_u8(&w, (uint8_t)nd->straggler);
        tw_ser_f64(&w, nd->rel_mean);
        tw_ser_f64(&w, nd->busy_mean);
        tw_ser_f64(&w, nd->others_mean);
        tw_ser_f64(&w, nd->slow_share);
    }
    return tw_ser_ok(&w) ? TW_OK : TW_ERR;
}

static int sg_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    sg_state *s = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    uint32_t magic = tw_deser_u32(&d);
    if (magic != SG_MAGIC && magic != SG_MAGIC_V1)
        tw_deser_fail(&d);
    s->triggered = tw_deser_i64(&d);
    s->violations = tw_deser_i64(&d);
    s->datapoints = tw_deser_i64(&d);
    s->first_us = tw_deser_i64(&d);
    s->last_us = tw_deser_i64(&d);
    tw_namemap names;
    tw_namemap_init(&names);
    if (tw_deser_ok(&d) && tw_namemap_load(&names, &d) != TW_OK)
        tw_deser_fail(&d);
    for (uint32_t i = 0; i < names.count && tw_deser_ok(&d); i++) {
        uint32_t idx;
        if (sg_node_of(s, tw_namemap_key(&names, i), &idx) != TW_OK ||
            idx != i) {
            tw_deser_fail(&d);
            break;
        }
        sg_node *nd = &s->nodes[i];
        if (tw_dring_load(&nd->rel, &d) != TW_OK ||
            tw_dring_load(&nd->ind, &d) != TW_OK) {
            tw_deser_fail(&d);
            break;
        }
        nd->best = tw_deser_f64(&d);
        nd->seen_us = tw_deser_i64(&d);
        nd->compared = tw_deser_i64(&d);
        nd->straggler = tw_deser_u8(&d) != 0;
        nd->rel_mean = tw_deser_f64(&d);
        nd->ind_mean = tw_deser_f64(&d);
        nd->slow_share = tw_deser_f64(&d);
    }
    tw_namemap_free(&names);
    tw_namemap snames;
    tw_namemap_init(&snames);
    if (magic == SG_MAGIC) {
        s->by_system = tw_deser_u8(&d) != 0;
        if (tw_deser_ok(&d) && tw_namemap_load(&snames, &d) != TW_OK)
            tw_deser_fail(&d);
    }
    for (uint32_t i = 0; i < snames.count && tw_deser_ok(&d); i++) {
        uint32_t idx;
        if (sg_sysnode_of(s, tw_namemap_key(&snames, i), &idx) != TW_OK ||
            idx != i) {
            tw_deser_fail(&d);
            break;
        }
        sg_sysnode *nd = &s->snodes[i];
        if (tw_dring_load(&nd->rel, &d) != TW_OK ||
            tw_dring_load(&nd->busy, &d) != TW_OK ||
            tw_dring_load(&nd->others, &d) != TW_OK) {
            tw_deser_fail(&d);
            break;
        }
        nd->compared = tw_deser_i64(&d);
        nd->straggler = tw_deser_u8(&d) != 0;
        nd->rel_mean = tw_deser_f64(&d);
        nd->busy_mean = tw_deser_f64(&d);
        nd->others_mean = tw_deser_f64(&d);
        nd->slow_share = tw_deser_f64(&d);
    }
    tw_namemap_free(&snames);
    if (!tw_deser_done(&d)) {
        snprintf(err, errlen,
                 "Straggler: checkpoint is truncated, corrupt or not from "
                 "this rule");
        return TW_ERR;
    }
    return TW_OK;
}

/* The system node a framework node id belongs to ("algo-2" for
 * "algo-2-1": the agent appends "-<rank>"), or NULL. */
static const sg_sysnode *sg_sys_of(const sg_state *s, const char *fw_id,
                                   const char **id)
{
    for (uint32_t i = 0; i < s->snames.count; i++) {
        const char *k = tw_namemap_key(&s->snames, i);
        size_t len = k ? strlen(k) : 0;
        if (k && strncmp(fw_id, k, len) == 0 &&
            (fw_id[len] == '\0' || fw_id[len] == '-')) {
            *id = k;
            return &s->snodes[i];
        }
    }
    return NULL;
}

/* Node i of one source (system metrics or step events): flagged, score. */
static int sg_flag(const sg_state *s, int sys, uint32_t i)
{
    return sys ? s->snodes[i].straggler : s->nodes[i].straggler;
}

static double sg_rel(const sg_state *s, int sys, uint32_t i)
{
    return sys ? s->snodes[i].rel_mean : s->nodes[i].rel_mean;
}

/* Names the flagged nodes of one source, the highest relative score
 * first; returns the first's index (-1: none) and counts them. */
static int64_t sg_name_flagged(const sg_state *s, int sys, tw_finding *f,
                               size_t *flagged)
{
    const tw_namemap *names = sys ? &s->snames : &s->names;
    int64_t worst = -1;
    double above = INFINITY;
    *flagged = 0;
    for (uint32_t i = 0; i < names->count; i++)
        *flagged += sg_flag(s, sys, i) != 0;
    while (f->nnames < TW_FINDING_MAX_NODES) {
        int64_t pick = -1;
        for (uint32_t i = 0; i < names->count; i++) {
            double r = sg_rel(s, sys, i);
            if (sg_flag(s, sys, i) && r < above &&
                (pick < 0 || r > sg_rel(s, sys, (uint32_t)pick)))
                pick = i;
        }
        if (pick < 0)
            break;
        above = sg_rel(s, sys, (uint32_t)pick);
        if (worst < 0)
            worst = pick;
        tw_finding_add_name(f, tw_namemap_key(names, (uint32_t)pick));
    }
    return worst;
}

static void sg_finding_system(sg_state *s, tw_finding *f)
{
    size_t flagged;
    int64_t w = sg_name_flagged(s, 1, f, &flagged);
    if (flagged > f->ninvolved)
        f->ninvolved = flagged;
    if (w < 0)
        return;
    const sg_sysnode *nd = &s->snodes[w];
    const char *id = tw_namemap_key(&s->snames, (uint32_t)w);
    f->value = nd->rel_mean;
    f->limit = s->factor;
    snprintf(f->unit, sizeof(f->unit), "x others' GPU");
    tw_finding_text(f->summary,
                    "%zu of %u nodes keep their GPUs busy while the others "
                    "idle: the whole job waits for %s (from system metrics; "
                    "no step events to compare).",
                    flagged, s->snames.count, id);
    tw_finding_text(f->magnitude,
                    "%s: its GPUs %.0f %% busy on average, the other nodes' "
                    "%.0f %% (median), %.2fx; %.0f %% of its newest %u "
                    "compared scans above %gx",
                    id, nd->busy_mean, nd->others_mean, nd->rel_mean,
                    100.0 * nd->slow_share, s->sys_window, s->factor);
}

static void sg_finding_steps(sg_state *s, tw_finding *f)
{
    size_t flagged;
    int64_t w = sg_name_flagged(s, 0, f, &flagged);
    if (flagged > f->ninvolved)
        f->ninvolved = flagged;
    if (w < 0)
        return;
    const sg_node *worst = &s->nodes[w];
    const char *worst_id = tw_namemap_key(&s->names, (uint32_t)w);
    f->value = worst->rel_mean;
    f->limit = s->factor;
    snprintf(f->unit, sizeof(f->unit), "x fastest");
    tw_finding_text(f->summary,
                    "%zu of %u nodes are consistently slower than the others: "
                    "the whole job waits for %s at every step.",
                    flagged, s->names.count, worst_id);
    const char *sys_id = NULL;
    const sg_sysnode *sys = sg_sys_of(s, worst_id, &sys_id);
    char confirm[160] = "";
    if (sys && sys->compared > 0)
        snprintf(confirm, sizeof(confirm),
                 "; system metrics %s: %s's GPUs %.0f %% busy, the other "
                 "nodes' %.0f %%",
                 sys->straggler ? "confirm it" : "do not show it", sys_id,
                 sys->busy_mean, sys->others_mean);
    tw_finding_text(f->magnitude,
                    "%s: its TRAIN steps take %.2fx the fastest node's on "
                    "average; %.0f %% of its newest %u compared steps above "
                    "%gx; against its own best step %.2fx (%s)%s",
                    worst_id, worst->rel_mean, 100.0 * worst->slow_share,
                    s->window, s->factor, worst->ind_mean,
                    worst->ind_mean > s->factor ? "it slowed down"
                                                : "it has always been slow",
                    confirm);
}

/* The stragglers of the source that decides, the slowest first. */
static int sg_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                      char *err, size_t errlen)
{
    sg_state *s = state;
    (void)ctx, (void)err, (void)errlen;
    if (s->by_system) {
        sg_finding_system(s, f);
    } else {
        sg_finding_steps(s, f);
    }
    f->first_us = s->first_us;
    f->last_us = s->last_us;
    if (f->nnames == 0)
        return TW_OK;
    tw_finding_text(f->recommendation,
                    "Look at that node: its hardware (a throttled or "
                    "degraded GPU, a slow disk or network link), other "
                    "processes on it, or a larger share of the data; the "
                    "other nodes' idle GPUs are waiting for it.");
    tw_finding_text(f->parameters,
                    "factor %g, window %u, patience %lld, min_fraction %g, "
                    "sys_window %u, sys_patience %lld, sys_min_busy %g",
                    s->factor, s->window, (long long)s->patience,
                    s->min_fraction, s->sys_window, (long long)s->sys_patience,
                    s->sys_min_busy);
    return TW_OK;
}

static const tw_rule_descriptor sg_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "Straggler",
    .description = "Finds the node whose TRAIN steps are consistently slower "
                   "than the fastest node's of the same step number, or "
                   "without step events the node whose GPUs stay busy "
                   "while the other nodes' idle.",
    .params = sg_params,
    .nparams = P_COUNT,
    .create = sg_create,
    .scan = sg_scan,
    .details = sg_details,
    .parameters_text = sg_parameters_text,
    .save = sg_save,
    .restore = sg_restore,
    .destroy = sg_destroy,
    .finding = sg_finding,
    .finding_help =
        "One node's steps take longer than the others' (more than factor x "
        "the fastest node's step of the same number, in most of its recent "
        "steps; without step events: its GPUs busy while the other nodes' "
        "idle, waiting for it): the job runs at that node's pace. Look at its "
        "hardware, "
        "the processes beside the training, and its share of the data.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &sg_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_FRAMEWORK | TW_INPUT_SYSTEM;
}
