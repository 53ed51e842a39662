/*
 * step_outlier.c - StepOutlier (RULES.md §3.6).
 *
 * Per node and step-event name, flags step durations above
 * mean + stddev * std of all durations seen so far, reports statistics and
 * a histogram of the normal steps, and correlates the outlier steps of the
 * current scan with the framework events of the scan (RULES.md §4, through
 * rules/common/fwagg.h).
 *
 * Semantics:
 *  - differ: quirk 1, `mode`. `reference`: step events ("Step:ModeKeys" in
 *    the name) are always accepted and `mode` only adds events whose name
 *    equals it. `fixed`: when `mode` is set, only events named `mode` or
 *    `Step:<mode>` are accepted (e.g. mode "ModeKeys.EVAL" keeps only EVAL
 *    steps). Also the memory bound below (`fixed` only).
 *  - differ (fixed: steady real runs raise nothing): a step is an outlier
 *    only when it also exceeds min_factor (3) x the (node, name)'s median
 *    step: a steady run's std is tiny (mean + 3 std ~ 1.3x the mean), so
 *    jitter and each epoch's slower first step counted; and a (node,
 *    name) triggers only when its outliers are also more than
 *    min_outlier_fraction (0.5 %) of its steps, so a long run does not
 *    trigger from n_outliers rare spikes gathered over its whole history.
 *    Periodic slow steps (e.g. every 15th step 6x) still trigger.
 *  - same (reproduced in both): Violations re-count the outliers of the
 *    whole history at every triggering scan (quirk 2); one report slot per
 *    node, the last name evaluated wins (quirk 3); step intervals keyed by
 *    step number only, first event of the scan wins (quirk 4); a step event
 *    overlapping two scans is counted in both (quirk 5); only outlier steps
 *    whose events are in the current scan are correlated (quirk 7); step
 *    numbers are all printed as strings when any of the (node, name) list
 *    is a string (numpy's array conversion), and a converted number then no
 *    longer matches its interval key, as in the reference.
 *  - crash fix (both, quirk 6): a step event without args or without
 *    step_num is skipped entirely (not counted). Deviation: a step_num
 *    that is JSON null, a boolean or an object/array is skipped the same
 *    way (numpy would build an object array; never written by the hooks).
 *
 * Memory:
 *  - `reference`: every duration (8 bytes), its start time (8 bytes, for
 *    the finding's time range) and step number (12 bytes + its text) per
 *    (node, name) since the start, as the reference does;
 *    the per-node report keeps the outliers' step numbers; the §4 buffer is
 *    bounded by the vocabulary (fwagg.h); intervals hold one scan's steps.
 *  - `fixed`: per (node, name) the exact history up to `max_exact_steps`
 *    (default 2 000) steps, statistics identical to `reference`. Past
 *    that, the (node, name) switches to summary mode, bounded whatever the
 *    job's length (~8 KB saved at the defaults, ~4 bytes a windowed step):
 *    the newest max_exact_steps/2 .. 1.125x that steps keep their step
 *    number, duration and start time (the window); the whole history
 *    keeps the exact count, mean/std (running, Welford: they differ from
 *    numpy's pairwise sums in the last bits), min and max, the SO_TOP_K
 *    (256) largest durations exactly and every duration in a
 *    relative-error histogram (rel_hist.h, alpha 0.5 %). Evaluations read
 *    the multiset "top-K exact, the others as their bucket's value clamped
 *    below the smallest top-K one" (approx_build), so:
 *      - the outlier count is exact for the threshold used whenever at
 *        most 256 steps exceed it; with more, only steps within 0.5 % of
 *        the threshold may be miscounted (then n_outliers, default 10, is
 *        passed anyway; the min_outlier_fraction test is the one that
 *        reads such a count);
 *      - p50/p95/p99 are within 0.5 % (exact where the rank falls in the
 *        top 256), so the min_factor x median threshold is within 0.5 %
 *        and steps within 0.5 % of it may be classed differently;
 *      - the normal-steps histogram bins those values (each within 0.5 %);
 *      - `step_numbers` lists only outliers among the window's steps.
 *    Per node the report's step numbers are bounded by the same window.
 *  - both, outside summary mode: a sorted copy of the durations (8 bytes
 *    a step, not saved; rebuilt from them after a restore), merged with
 *    each scan's new steps, gives the order statistics and the outlier
 *    count without a pass over the whole history per scan.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_hist.h"
#include "fw_strmap.h"
#include "fwagg.h"
#include "ptr_memo.h"
#include "rel_hist.h"
#include "select.h"
#include "sorted_history.h"
#include "trainwatch/bitpack.h"
#include "trainwatch/countmap.h"
#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

enum {
    P_STDDEV = 0,
    P_MODE,
    P_N_OUTLIERS,
    P_MAX_EXACT,
    P_MIN_FACTOR,
    P_MIN_FRACTION,
    P_COUNT
};

static const tw_param_spec so_params[P_COUNT] = {
    {"stddev", TW_PARAM_DOUBLE, "3", 0.0, 1e6,
     "a step is an outlier when its duration exceeds mean + stddev * std"},
    {"mode", TW_PARAM_STRING, NULL, 0.0, 0.0,
     "reference: an extra event name to accept; fixed: accept only events "
     "named <mode> or Step:<mode> (e.g. ModeKeys.TRAIN)"},
    {"n_outliers", TW_PARAM_INT, "10", 0.0, 1e12,
     "trigger only when a (node, step kind) has more outliers than this"},
    {"max_exact_steps", TW_PARAM_INT, "2000", 1000.0, 1e9,
     "trainwatch extension, fixed semantics only: steps per (node, step "
     "kind) kept exactly before switching to bounded summaries"},
    {"min_factor", TW_PARAM_DOUBLE, "3", 1.0, 1e6,
     "trainwatch extension, fixed semantics only: a step is an outlier only "
     "when it also takes more than min_factor x the median step"},
    {"min_outlier_fraction", TW_PARAM_DOUBLE, "0.005", 0.0, 1.0,
     "trainwatch extension, fixed semantics only: trigger only when the "
     "outliers are also more than this fraction of the (node, step kind)'s "
     "steps"},
};

#define SO_MIN_STEPS 100      /* evaluate above this many durations */
#define SO_SUMMARY_KEYS 4096u /* count-map cap of SO01/SO02 summaries */
#define SO_TOP_K 256          /* summary: the largest durations kept exactly */
#define SO_ALPHA 0.005        /* summary: relative error of the others */
#define SO_OWNKEY_STEP_DETAILS 0u /* Details key id of "step_details" */

/* A step number: its text (in an arena) and whether it was a JSON string. */
typedef struct so_step {
    uint32_t off;
    uint32_t len;
    uint8_t is_str;
} so_step;

/* Growable list of step numbers with their texts. */
typedef struct so_steps {
    so_step *v;
    size_t n, cap;
    char *arena;
    size_t alen, acap;
} so_steps;

typedef struct so_series {
    double *d;  /* durations (s), arrival order (window in summary) */
    int64_t *t; /* start times (µs), parallel to d: for the finding only */
    size_t dcap;
    so_steps steps; /* step numbers, parallel to d */
    uint64_t total; /* durations ever appended */
    int any_string;
    int summary;    /* fixed only: past max_exact_steps */
    tw_rel_hist rh; /* summary: every duration, within SO_ALPHA */
    double *top;    /* summary: min-heap of the SO_TOP_K largest, exact */
    size_t ntop;
    double w_mean, w_m2;
    /* not summary: d sorted, merged up to date at each evaluation (not
     * saved; rebuilt after a restore); unordered: a NaN came (restored
     * state only), evaluations then select on a copy */
    tw_sorted_history sorted;
    int unordered;
} so_series;

typedef struct so_detail {
    int set;
    double mean, max, p99, p95, p50, min, stddev;
    int64_t n_out;
    uint64_t nsteps; /* the series' steps at this evaluation (fixed's
                        fraction test; 0: restored from an older build) */
    char *phase;
    int64_t probs[100];
    double edges[101];
    so_steps steps; /* the outliers' step numbers */
    int steps_str;
    int64_t out_first_us, out_last_us; /* the outliers' starts, this
                                          evaluation (not saved) */
} so_detail;

typedef struct so_node {
    fwsm names;     /* event name -> ptrs: so_series* */
    fwsm intervals; /* step key -> index into istart/iend (this scan) */
    int64_t *istart, *iend;
    size_t icap;
    so_detail det;
} so_node;

typedef struct so_state {
    const tw_host *host;
    tw_semantics semantics;
    double stddev;
    char *mode;      /* NULL = None */
    char *step_mode; /* fixed: "Step:<mode>" */
    int64_t n_outliers;
    size_t max_exact;
    double min_factor;   /* fixed: outliers lie above min_factor x median */
    double min_fraction; /* fixed: and are more than this share of steps */
    char *params_text;

    int64_t triggered;
    int64_t violations;
    int64_t datapoints;

    fwsm nodes;        /* node id -> ptrs: so_node* */
    size_t *det_order; /* node indices in step_details order */
    size_t ndet;

    tw_fwagg agg;
    tw_keyorder ko;
    double *scratch; /* sorted copy / normal values */
    size_t scratch_cap;
    tw_countmap approx; /* summary evaluations: the multiset they read */

    /* For the finding: start times of the first and last outlier steps
     * of the evaluations that found violations (µs; 0 = none); with the
     * per-step start times, an optional trailer of the checkpoint. */
    int64_t out_first_us, out_last_us;

    tw_ptr_memo accepts; /* this scan's name pointers -> so_accepts */
} so_state;

/* ---- step-number lists ------------------------------------------------- */

static void steps_free(so_steps *s)
{
    free(s->v);
    free(s->arena);
    memset(s, 0, sizeof(*s));
}

static int steps_push(so_steps *s, const char *text, size_t len, int is_str)
{
    /* Texts are stored NUL-terminated so they can be written directly. */
    if (len >= UINT32_MAX || s->alen + len + 1 > UINT32_MAX)
        return TW_ERR;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 128;
        so_step *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return TW_ERR;
        s->v = v;
        s->cap = cap;
    }
    if (s->alen + len + 1 > s->acap) {
        size_t cap = s->acap ? s->acap * 2 : 1024;
        while (cap < s->alen + len + 1)
            cap *= 2;
        char *a = realloc(s->arena, cap);
        if (!a)
            return TW_ERR;
        s->arena = a;
        s->acap = cap;
    }
    memcpy(s->arena + s->alen, text, len);
    s->arena[s->alen + len] = '\0';
    s->v[s->n].off = (uint32_t)s->alen;
    s->v[s->n].len = (uint32_t)len;
    s->v[s->n].is_str = (uint8_t)(is_str != 0);
    s->n++;
    s->alen += len + 1;
    return TW_OK;
}

static int steps_push_from(so_steps *dst, const so_steps *src, size_t i)
{
    const so_step *st = &src->v[i];
    return steps_push(dst, src->arena + st->off, st->len, st->is_str);
}

/* "s:<text>" for strings, "n:<%.17g>" for numbers: equal for values
 * Python's dict considers equal (50 == 50.0, "50" != 50). */
static void step_key(const char *text, size_t len, int is_str, char *buf,
                     size_t cap)
{
    if (is_str) {
        snprintf(buf, cap, "s:%.*s", (int)len, text);
    } else {
        char num[64];
        size_t n = len < sizeof(num) - 1 ? len : sizeof(num) - 1;
        memcpy(num, text, n);
        num[n] = '\0';
        snprintf(buf, cap, "n:%.17g", strtod(num, NULL));
    }
}

static int is_int_literal(const char *s, size_t len)
{
    size_t i = 0;
    if (i < len && s[i] == '-')
        i++;
    if (i == len)
        return 0;
    for (; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* ---- lifecycle ------------------------------------------------------------
 */

static void series_free(so_series *s)
{
    if (!s)
        return;
    free(s->d);
    free(s->t);
    tw_sorted_history_free(&s->sorted);
    steps_free(&s->steps);
    tw_rel_hist_free(&s->rh);
    free(s->top);
    free(s);
}

static void detail_clear(so_detail *d)
{
    free(d->phase);
    steps_free(&d->steps);
    memset(d, 0, sizeof(*d));
}

static void node_free(so_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->names.n; i++)
        series_free(n->names.ptrs[i]);
    fwsm_free(&n->names);
    fwsm_free(&n->intervals);
    free(n->istart);
    free(n->iend);
    detail_clear(&n->det);
    free(n);
}

static void so_clear_nodes(so_state *s)
{
    for (size_t i = 0; i < s->nodes.n; i++)
        node_free(s->nodes.ptrs[i]);
    fwsm_free(&s->nodes);
    free(s->det_order);
    s->det_order = NULL;
    s->ndet = 0;
}

static void so_destroy(void *state)
{
    so_state *s = state;
    if (!s)
        return;
    so_clear_nodes(s);
    tw_fwagg_free(&s->agg);
    free(s->scratch);
    tw_countmap_free(&s->approx);
    free(s->mode);
    free(s->step_mode);
    free(s->params_text);
    free(s);
}

static int so_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen, "StepOutlier: expected %d parameters, got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    const tw_param_value *v = params->values;
    if (v[P_STDDEV].is_none || !isfinite(v[P_STDDEV].d) || v[P_STDDEV].d < 0) {
        snprintf(err, errlen, "StepOutlier: stddev must be a number >= 0");
        return TW_ERR;
    }
    if (v[P_N_OUTLIERS].is_none || v[P_N_OUTLIERS].i < 0) {
        snprintf(err, errlen,
                 "StepOutlier: n_outliers must be an integer >= 0");
        return TW_ERR;
    }
    if (!v[P_MODE].is_none && v[P_MODE].s && v[P_MODE].s[0] == '\0') {
        snprintf(err, errlen,
                 "StepOutlier: mode must be None or a non-empty event name");
        return TW_ERR;
    }
    so_state *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "StepOutlier: out of memory");
        return TW_ERR;
    }
    s->host = host;
    s->semantics = params->semantics;
    s->stddev = v[P_STDDEV].d;
    s->n_outliers = v[P_N_OUTLIERS].i;
    s->max_exact = v[P_MAX_EXACT].is_none ? 1000000u : (size_t)v[P_MAX_EXACT].i;
    s->min_factor = v[P_MIN_FACTOR].is_none ? 3.0 : v[P_MIN_FACTOR].d;
    s->min_fraction = v[P_MIN_FRACTION].is_none ? 0.005 : v[P_MIN_FRACTION].d;
    fwsm_init(&s->nodes);
    tw_fwagg_init(&s->agg, s->semantics);
    tw_countmap_init(&s->approx, 0);
    tw_keyorder_init(&s->ko);
    tw_keyorder_note(&s->ko, SO_OWNKEY_STEP_DETAILS);

    int ok = 1;
    if (!v[P_MODE].is_none && v[P_MODE].s) {
        s->mode = strdup(v[P_MODE].s);
        size_t len = strlen(v[P_MODE].s) + 6;
        s->step_mode = malloc(len);
        ok = s->mode && s->step_mode;
        if (ok)
            snprintf(s->step_mode, len, "Step:%s", v[P_MODE].s);
    }
    const char *sd = v[P_STDDEV].text ? v[P_STDDEV].text : "None";
    const char *md = v[P_MODE].text ? v[P_MODE].text : "None";
    const char *no = v[P_N_OUTLIERS].text ? v[P_N_OUTLIERS].text : "None";
    size_t len = 2 * strlen(sd) + strlen(md) + strlen(no) + 64;
    s->params_text = ok ? malloc(len) : NULL;
    if (!s->params_text) {
        so_destroy(s);
        snprintf(err, errlen, "StepOutlier: out of memory");
        return TW_ERR;
    }
    snprintf(s->params_text, len,
             "threshold:%s\nmode:%s\nn_outliers:%s\nstddev:%s", sd, md, no, sd);
    *state = s;
    return TW_OK;
}

/* ---- intake ------------------------------------------------------------ */

static int so_accepts(const so_state *s, const char *name)
{
    if (s->semantics == TW_SEMANTICS_FIXED && s->mode)
        return strcmp(name, s->mode) == 0 || strcmp(name, s->step_mode) == 0;
    return strstr(name, "Step:ModeKeys") != NULL ||
           (s->mode && strcmp(name, s->mode) == 0);
}

static const tw_arg *step_num_arg(const tw_fw_event *e)
{
    if (!e->args)
        return NULL;
    for (uint32_t i = 0; i < e->nargs; i++)
        if (e->args[i].key && strcmp(e->args[i].key, "step_num") == 0)
            return &e->args[i];
    return NULL;
}

static so_node *node_get(so_state *s, const char *id)
{
    long at = fwsm_intern(&s->nodes, id);
    if (at < 0)
        return NULL;
    if (!s->nodes.ptrs[at]) {
        so_node *n = calloc(1, sizeof(*n));
        if (!n)
            return NULL;
        fwsm_init(&n->names);
        fwsm_init(&n->intervals);
        s->nodes.ptrs[at] = n;
    }
    return s->nodes.ptrs[at];
}

static so_series *series_get(so_node *n, const char *name)
{
    long at = fwsm_intern(&n->names, name);
    if (at < 0)
        return NULL;
    if (!n->names.ptrs[at]) {
        so_series *ser = calloc(1, sizeof(*ser));
        if (!ser)
            return NULL;
        tw_rel_hist_init(&ser->rh, SO_ALPHA);
        n->names.ptrs[at] = ser;
    }
    return n->names.ptrs[at];
}

static int interval_put(so_node *n, const char *key, int64_t start, int64_t end)
{
    if (fwsm_find(&n->intervals, key) >= 0)
        return TW_OK; /* the first event of the scan wins */
    long at = fwsm_intern(&n->intervals, key);
    if (at < 0)
        return TW_ERR;
    if ((size_t)at >= n->icap) {
        size_t cap = n->icap ? n->icap * 2 : 64;
        int64_t *a = realloc(n->istart, cap * sizeof(*a));
        if (!a)
            return TW_ERR;
        n->istart = a;
        int64_t *b = realloc(n->iend, cap * sizeof(*b));
        if (!b)
            return TW_ERR;
        n->iend = b;
        n->icap = cap;
    }
    n->istart[at] = start;
    n->iend[at] = end;
    return TW_OK;
}

/* How many steps summary mode keeps with their numbers and start times
 * (the newest window .. 1.125 x window): half of max_exact_steps, so a
 * summary saves less than the exact history it replaced. */
static size_t so_window(const so_state *s)
{
    return s->max_exact / 2;
}

/* Summary mode: drop the oldest window steps once the list reaches the
 * upper mark. */
static int series_compact(so_state *s, so_series *ser)
{
    size_t keep = so_window(s);
    size_t drop = ser->steps.n - keep;
    so_steps fresh;
    memset(&fresh, 0, sizeof(fresh));
    for (size_t i = drop; i < ser->steps.n; i++)
        if (steps_push_from(&fresh, &ser->steps, i) != TW_OK) {
            steps_free(&fresh);
            return TW_ERR;
        }
    memmove(ser->d, ser->d + drop, keep * sizeof(double));
    memmove(ser->t, ser->t + drop, keep * sizeof(int64_t));
    steps_free(&ser->steps);
    ser->steps = fresh;
    return TW_OK;
}

/* max, min, p99, p95, p50 of buf (reordered). Every scan asks for them
 * over all of the job's steps so far: selection (O(n)) instead of a sort
 * (O(n log n)) gives the same two order statistics to the same
 * interpolation, so bit-identical values. A NaN (only from a restored
 * state) takes numpy's sorted path. */
static void order_stats(const tw_host *h, double *buf, size_t cnt, so_detail *d)
{
    double lo = buf[0], hi = buf[0];
    for (size_t i = 0; i < cnt; i++) {
        if (isnan(buf[i])) {
            h->sort_doubles(buf, cnt);
            d->max = buf[cnt - 1];
            d->min = buf[0];
            d->p99 = h->quantile_sorted(buf, cnt, 0.99);
            d->p95 = h->quantile_sorted(buf, cnt, 0.95);
            d->p50 = h->quantile_sorted(buf, cnt, 0.50);
            return;
        }
        lo = buf[i] < lo ? buf[i] : lo;
        hi = buf[i] > hi ? buf[i] : hi;
    }
    d->max = hi;
    d->min = lo;
    d->p99 = tw_select_quantile(buf, cnt, 0.99);
    d->p95 = tw_select_quantile(buf, cnt, 0.95);
    d->p50 = tw_select_quantile(buf, cnt, 0.50);
}

/* The SO_TOP_K largest durations, a min-heap in ser->top (allocated on
 * entering summary mode). NaN (restored state only) has no rank: skipped. */
static void top_sift_down(double *v, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && v[l] < v[m])
            m = l;
        if (l + 1 < n && v[l + 1] < v[m])
            m = l + 1;
        if (m == i)
            return;
        double t = v[i];
        v[i] = v[m];
        v[m] = t;
        i = m;
    }
}

static void top_push(so_series *ser, double x)
{
    if (isnan(x))
        return;
    if (ser->ntop < SO_TOP_K) {
        size_t i = ser->ntop++;
        ser->top[i] = x;
        while (i > 0 && ser->top[(i - 1) / 2] > ser->top[i]) {
            double t = ser->top[i];
            ser->top[i] = ser->top[(i - 1) / 2];
            ser->top[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    } else if (x > ser->top[0]) {
        ser->top[0] = x;
        top_sift_down(ser->top, ser->ntop, 0);
    }
}

/* A duration into the summary: histogram, top-K and running moments. */
static int summary_add(so_series *ser, double x, uint64_t count)
{
    double delta = x - ser->w_mean;
    ser->w_mean += delta / (double)count;
    ser->w_m2 += delta * (x - ser->w_mean);
    top_push(ser, x);
    return tw_rel_hist_add_n(&ser->rh, x, 1);
}

static int series_append(so_state *s, so_series *ser, double dur,
                         int64_t start_us, const char *text, size_t len,
                         int is_str)
{
    if (ser->steps.n == ser->dcap) {
        size_t cap = ser->dcap ? ser->dcap * 2 : 128;
        double *d = realloc(ser->d, cap * sizeof(*d));
        if (!d)
            return TW_ERR;
        ser->d = d;
        int64_t *t = realloc(ser->t, cap * sizeof(*t));
        if (!t)
            return TW_ERR;
        ser->t = t;
        ser->dcap = cap;
    }
    if (steps_push(&ser->steps, text, len, is_str) != TW_OK)
        return TW_ERR;
    ser->d[ser->steps.n - 1] = dur;
    ser->t[ser->steps.n - 1] = start_us;
    ser->total++;
    if (is_str)
        ser->any_string = 1;
    if (s->semantics != TW_SEMANTICS_FIXED)
        return TW_OK;

    if (!ser->summary && ser->total > s->max_exact) {
        /* Switch to summary mode: the whole history so far seeds the
         * histogram, the top-K and the running mean/variance. */
        ser->top = malloc(SO_TOP_K * sizeof(double));
        if (!ser->top)
            return TW_ERR;
        ser->summary = 1;
        ser->ntop = 0;
        tw_sorted_history_free(&ser->sorted); /* summary reads rh, top */
        ser->w_mean = 0.0;
        ser->w_m2 = 0.0;
        for (size_t i = 0; i < ser->steps.n; i++)
            if (summary_add(ser, ser->d[i], i + 1) != TW_OK)
                return TW_ERR;
        return series_compact(s, ser);
    }
    if (ser->summary) {
        if (summary_add(ser, dur, ser->total) != TW_OK)
            return TW_ERR;
        if (ser->steps.n >= so_window(s) + so_window(s) / 8)
            return series_compact(s, ser);
    }
    return TW_OK;
}

/* so_accepts once per name pointer and scan (ptr_memo.h). */
static int so_accepts_memo(so_state *s, const char *name)
{
    int yes;
    if (!tw_ptr_memo_get(&s->accepts, name, &yes)) {
        yes = so_accepts(s, name);
        tw_ptr_memo_put(&s->accepts, name, yes);
    }
    return yes;
}

static int so_intake(so_state *s, const tw_fw_event *e)
{
    if (!e->name || !so_accepts_memo(s, e->name))
        return TW_OK;
    const tw_arg *a = step_num_arg(e);
    if (!a || (a->kind != TW_ARG_STRING && a->kind != TW_ARG_NUMBER) ||
        !a->value)
        return TW_OK; /* skipped entirely (quirk 6 fix) */
    s->datapoints++;
    so_node *n = node_get(s, e->node ? e->node : "");
    if (!n)
        return TW_ERR;
    so_series *ser = series_get(n, e->name);
    if (!ser)
        return TW_ERR;
    int is_str = a->kind == TW_ARG_STRING;
    double dur = (double)(e->end_us - e->start_us) / 1000000.0;
    if (series_append(s, ser, dur, e->start_us, a->value, strlen(a->value),
                      is_str) != TW_OK)
        return TW_ERR;
    char key[512];
    step_key(a->value, strlen(a->value), is_str, key, sizeof(key));
    return interval_put(n, key, e->start_us, e->end_us);
}

/* ---- evaluation -----------------------------------------------------------
 */

static double *scratch(so_state *s, size_t n)
{
    if (n == 0)
        n = 1;
    if (n > s->scratch_cap) {
        double *p = realloc(s->scratch, n * sizeof(*p));
        if (!p)
            return NULL;
        s->scratch = p;
        s->scratch_cap = n;
    }
    return s->scratch;
}

static void note_detail(so_state *s, size_t node_index)
{
    for (size_t i = 0; i < s->ndet; i++)
        if (s->det_order[i] == node_index)
            return;
    s->det_order[s->ndet++] = node_index;
}

/* The outlier cut-off. fixed also requires min_factor x the median: on a
 * steady run std is tiny, so mean + 3 std sits near 1.3x the mean and
 * ordinary jitter (or each epoch's slower first step) would count. */
static double so_threshold(const so_state *s, double mean, double std,
                           double p50)
{
    double thr = mean + std * s->stddev;
    if (s->semantics == TW_SEMANTICS_FIXED && s->min_factor * p50 > thr)
        thr = s->min_factor * p50;
    return thr;
}

/* Whether a node's report slot meets the trigger condition. fixed also
 * requires the outliers to be more than min_fraction of the steps, so a
 * long healthy run does not trigger from n_outliers rare spikes gathered
 * over its whole history. */
static int so_flagged(const so_state *s, const so_detail *d)
{
    if (!d->set || d->n_out <= s->n_outliers)
        return 0;
    if (s->semantics == TW_SEMANTICS_FIXED && d->nsteps > 0 &&
        (double)d->n_out <= s->min_fraction * (double)d->nsteps)
        return 0;
    return 1;
}

/* The multiset a summary's evaluation reads: the top-K durations exactly,
 * every other one as its histogram bucket's representative clamped to
 * [min, smallest top-K value] (so it stays within SO_ALPHA of the value,
 * and no value outside the top-K rises above one inside it), and the
 * exact minimum. Then the count of values above a cut-off is exact
 * whenever the cut-off is at least the smallest top-K value. */
typedef struct approx_fill {
    tw_countmap *m;
    const tw_rel_hist *rh;
    const double *top; /* ascending */
    size_t ntop, at;
    double lo, hi;
    int min_placed;
    int err;
} approx_fill;

static int approx_bucket(void *ctx, int64_t key, double rep, uint64_t count)
{
    approx_fill *f = ctx;
    /* the top-K values of this bucket are added exactly, later (a value
     * with no bucket can only come from a corrupt checkpoint: skipped) */
    while (f->at < f->ntop && tw_rel_hist_key(f->rh, f->top[f->at]) < key)
        f->at++;
    while (f->at < f->ntop && count > 0 &&
           tw_rel_hist_key(f->rh, f->top[f->at]) == key) {
        count--;
        f->at++;
    }
    if (count == 0)
        return 0;
    if (!f->min_placed) {
        f->min_placed = 1;
        if (tw_countmap_add(f->m, f->lo) != TW_OK) {
            f->err = 1;
            return 1;
        }
        count--;
    }
    double r = rep < f->lo ? f->lo : rep > f->hi ? f->hi : rep;
    if (count > 0 && tw_countmap_add_n(f->m, r, count) != TW_OK) {
        f->err = 1;
        return 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int approx_build(so_state *s, const so_series *ser)
{
    double top[SO_TOP_K];
    memcpy(top, ser->top, ser->ntop * sizeof(double));
    qsort(top, ser->ntop, sizeof(double), cmp_double);
    tw_countmap_clear(&s->approx);
    approx_fill f = {&s->approx,
                     &ser->rh,
                     top,
                     ser->ntop,
                     0,
                     ser->rh.min,
                     ser->ntop == SO_TOP_K ? top[0] : ser->rh.max,
                     0,
                     0};
    if (f.hi < f.lo)
        f.hi = f.lo; /* corrupt checkpoint only */
    tw_rel_hist_each(&ser->rh, approx_bucket, &f);
    for (size_t i = 0; i < ser->ntop && !f.err; i++)
        if (tw_countmap_add(&s->approx, top[i]) != TW_OK)
            f.err = 1;
    if (f.err)
        return TW_ERR;
    return tw_countmap_count(&s->approx) > 0 ? TW_OK : 1;
}

/* Fills the node's report slot from one (node, name) series. */
static int so_evaluate(so_state *s, so_node *n, size_t node_index,
                       const char *name, so_series *ser)
{
    const tw_host *h = s->host;
    so_detail *d = &n->det;
    double mean, std;
    size_t cnt = ser->steps.n;
    if (!ser->summary) {
        mean = h->mean(ser->d, cnt);
        std = h->std(ser->d, cnt);
    } else {
        mean = ser->w_mean;
        std = sqrt(ser->w_m2 / (double)ser->total);
    }
    double thr = 0.0; /* after the median, below */

    char *phase = strdup(name);
    if (!phase)
        return TW_ERR;
    detail_clear(d);
    d->phase = phase;
    d->set = 1;
    d->mean = mean;
    d->stddev = h->round2(std);
    d->steps_str = ser->any_string;
    d->nsteps = ser->total;

    int rc = ser->summary || ser->unordered
                 ? 1
                 : tw_sorted_history_sync(&ser->sorted, ser->d, cnt);
    if (rc == TW_ERR)
        return TW_ERR;
    if (!ser->summary && rc == TW_OK) {
        /* the sorted history gives the order statistics and the values
         * below the cut-off (the histogram's, in any order) directly */
        const double *v = ser->sorted.v;
        d->min = v[0];
        d->max = v[cnt - 1];
        d->p99 = h->quantile_sorted(v, cnt, 0.99);
        d->p95 = h->quantile_sorted(v, cnt, 0.95);
        d->p50 = h->quantile_sorted(v, cnt, 0.50);
        thr = so_threshold(s, mean, std, d->p50);
        d->n_out = (int64_t)tw_sorted_history_above(&ser->sorted, thr);
        h->hist100(v, tw_sorted_history_below(&ser->sorted, thr), d->probs,
                   d->edges);
    } else if (!ser->summary) {
        ser->unordered = 1;
        double *buf = scratch(s, cnt);
        if (!buf)
            return TW_ERR;
        memcpy(buf, ser->d, cnt * sizeof(double));
        order_stats(h, buf, cnt, d);
        thr = so_threshold(s, mean, std, d->p50);
        size_t nn = 0;
        int64_t nout = 0;
        for (size_t i = 0; i < cnt; i++) {
            if (ser->d[i] > thr)
                nout++;
            else if (ser->d[i] < thr)
                buf[nn++] = ser->d[i];
        }
        d->n_out = nout;
        h->hist100(buf, nn, d->probs, d->edges);
    } else {
        tw_countmap *m = &s->approx;
        rc = approx_build(s, ser);
        if (rc == TW_ERR)
            return TW_ERR;
        if (rc == TW_OK) {
            d->max = tw_countmap_max(m);
            d->min = tw_countmap_min(m);
            if (tw_countmap_quantile(m, 0.99, &d->p99) != TW_OK ||
                tw_countmap_quantile(m, 0.95, &d->p95) != TW_OK ||
                tw_countmap_quantile(m, 0.50, &d->p50) != TW_OK)
                return TW_ERR;
        } else { /* only NaNs (a corrupt checkpoint) */
            d->max = d->min = d->p99 = d->p95 = d->p50 = NAN;
        }
        thr = so_threshold(s, mean, std, d->p50);
        d->n_out = (int64_t)fw_countmap_above(m, thr);
        fw_hist100_countmap(m, h, 1, thr, d->probs, d->edges);
    }
    d->out_first_us = d->out_last_us = 0;
    /* (outside summary mode n_out counts exactly these values) */
    for (size_t i = 0; (ser->summary || d->n_out > 0) && i < cnt; i++) {
        if (!(ser->d[i] > thr))
            continue;
        if (steps_push_from(&d->steps, &ser->steps, i) != TW_OK)
            return TW_ERR;
        int64_t t = ser->t[i]; /* 0: restored from an older checkpoint */
        if (t != 0 && (d->out_first_us == 0 || t < d->out_first_us))
            d->out_first_us = t;
        if (t > d->out_last_us)
            d->out_last_us = t;
    }
    note_detail(s, node_index);
    return TW_OK;
}

static int so_correlate(so_state *s, so_node *n, const tw_scan *scan)
{
    const so_detail *d = &n->det;
    for (size_t i = 0; i < d->steps.n; i++) {
        const so_step *st = &d->steps.v[i];
        char key[512];
        /* After numpy's conversion every step number is a string when any
         * was one; the lookup then uses the string. */
        step_key(d->steps.arena + st->off, st->len, d->steps_str || st->is_str,
                 key, sizeof(key));
        long at = fwsm_find(&n->intervals, key);
        if (at < 0)
            continue;

        if (tw_fwagg_interval(&s->agg, scan->events, scan->nevents,
                              n->istart[at], n->iend[at], &s->ko) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

static int so_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    so_state *s = state;
    for (size_t i = 0; i < s->nodes.n; i++)
        fwsm_clear(&((so_node *)s->nodes.ptrs[i])->intervals);
    tw_ptr_memo_clear(&s->accepts);

    for (size_t i = 0; i < scan->nevents; i++)
        if (so_intake(s, &scan->events[i]) != TW_OK)
            goto oom;

    if (s->nodes.n > 0) {
        size_t *order = realloc(s->det_order, s->nodes.n * sizeof(*order));
        if (!order)
            goto oom;
        s->det_order = order;
    }
    for (size_t ni = 0; ni < s->nodes.n; ni++) {
        so_node *n = s->nodes.ptrs[ni];
        for (size_t k = 0; k < n->names.n; k++) {
            so_series *ser = n->names.ptrs[k];
            if (ser->total <= SO_MIN_STEPS)
                continue;
            if (so_evaluate(s, n, ni, n->names.keys[k], ser) != TW_OK)
                goto oom;
            if (so_flagged(s, &n->det)) {
                s->violations += n->det.n_out;
                s->triggered++;
                const so_detail *dd = &n->det;
                if (dd->out_first_us != 0 &&
                    (s->out_first_us == 0 ||
                     dd->out_first_us < s->out_first_us))
                    s->out_first_us = dd->out_first_us;
                if (dd->out_last_us > s->out_last_us)
                    s->out_last_us = dd->out_last_us;
                if (so_correlate(s, n, scan) != TW_OK)
                    goto oom;
            }
        }
    }
    out->condition_met = s->triggered > 0;
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;
oom:
    snprintf(err, errlen, "StepOutlier: out of memory");
    return TW_ERR;
}

/* ---- report ---------------------------------------------------------------
 */

static void write_step(const tw_host *h, tw_json *j, const so_steps *st,
                       size_t i, int as_str)
{
    const so_step *x = &st->v[i];
    const char *text = st->arena + x->off; /* NUL-terminated */
    if (as_str || x->is_str)
        h->json_string(j, text);
    else if (is_int_literal(text, x->len))
        h->json_raw(j, text);
    else
        h->json_double(j, strtod(text, NULL));
}

static void write_detail(const tw_host *h, tw_json *j, const so_detail *d)
{
    h->json_object_begin(j);
    h->json_key(j, "step_stats");
    h->json_object_begin(j);
    h->json_key(j, "mean");
    h->json_double(j, d->mean);
    h->json_key(j, "max");
    h->json_double(j, d->max);
    h->json_key(j, "p99");
    h->json_double(j, d->p99);
    h->json_key(j, "p95");
    h->json_double(j, d->p95);
    h->json_key(j, "p50");
    h->json_double(j, d->p50);
    h->json_key(j, "min");
    h->json_double(j, d->min);
    h->json_object_end(j);
    h->json_key(j, "number_of_outliers");
    h->json_int(j, d->n_out);
    h->json_key(j, "phase");
    h->json_string(j, d->phase);
    h->json_key(j, "stddev");
    h->json_double(j, d->stddev);
    h->json_key(j, "probs");
    h->json_array_begin(j);
    for (int i = 0; i < 100; i++)
        h->json_int(j, d->probs[i]);
    h->json_array_end(j);
    h->json_key(j, "binedges");
    h->json_array_begin(j);
    for (int i = 0; i < 101; i++)
        h->json_double(j, d->edges[i]);
    h->json_array_end(j);
    h->json_key(j, "step_numbers");
    h->json_array_begin(j);
    for (size_t i = 0; i < d->steps.n; i++)
        write_step(h, j, &d->steps, i, d->steps_str);
    h->json_array_end(j);
    h->json_object_end(j);
}

static void so_write_own(void *ctx, unsigned id, tw_json *j)
{
    const so_state *s = ctx;
    const tw_host *h = s->host;
    if (id != SO_OWNKEY_STEP_DETAILS)
        return;
    h->json_key(j, "step_details");
    h->json_object_begin(j);
    for (size_t i = 0; i < s->ndet; i++) {
        const so_node *n = s->nodes.ptrs[s->det_order[i]];
        h->json_key(j, s->nodes.keys[s->det_order[i]]);
        write_detail(h, j, &n->det);
    }
    h->json_object_end(j);
}

/* The reference lists its stddev a second time, as threshold. */
static const char *so_parameters_text(void *state)
{
    return ((const so_state *)state)->params_text;
}

static int so_details(void *state, tw_json *j)
{
    so_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    tw_fwagg_write_details(&s->agg, &s->ko, h, j, so_write_own, s);
    h->json_object_end(j);
    return TW_OK;
}

/* ---- checkpoint -----------------------------------------------------------
 */

#define SO_MAGIC 0x534f3031u /* "SO01": fixed-width (read only) */
/* "SO02": the same layout, with the per-step columns compact (lossless):
 * a step number that is the previous one + 1 (both canonical unsigned
 * decimals, not strings) is one byte, durations that are whole µs are
 * varints, start times varint deltas. ~7 bytes a step instead of ~26. */
#define SO_MAGIC_2 0x534f3032u
/* "SO03": SO02 with a summary's count map replaced by the bounded summary
 * (rel_hist and the top-K durations); nothing for a series outside
 * summary mode. SO01/SO02 summaries convert on restore. */
#define SO_MAGIC_3 0x534f3033u
/* "SO04": SO03 with durations that are whole µs bit-packed against the
 * smallest (trainwatch/bitpack.h) where that is smaller than varints
 * (~2 bytes a step instead of 3), the report's 100 counts as varints and
 * its 101 edges as one flag when hist100 of the first and last edge
 * gives them back bit for bit (they are numpy's linspace of the two),
 * saving ~1.5 KB a node. */
#define SO_MAGIC_4 0x534f3034u

/* The value of a canonical unsigned decimal ("0" or no leading zero, at
 * most 19 digits), or -1. */
static int64_t step_canonical(const char *text, size_t len)
{
    if (len == 0 || len > 18 || (len > 1 && text[0] == '0'))
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        v = v * 10 + (text[i] - '0');
    }
    return v;
}

/* SO02 step: uv 0 = the previous canonical number + 1 (not a string);
 * else uv len + 1, u8 is_str, the text. SO03 (written): a canonical
 * decimal above the previous one (a step of one kind interleaved with
 * another's, sharing a counter, included) as uv 4k = the previous + 1 +
 * k, or 4k + 2 for the same as a JSON string (the hooks write step_num
 * as a string); any other as uv 2 len + 1, u8 is_str, the text. */
#define SO_STEP_MAX 999999999999999999LL /* 18 digits: step_canonical */

static void put_steps(tw_ser *w, const so_steps *st)
{
    tw_ser_uv(w, st->n);
    int64_t prev = -1;
    for (size_t i = 0; i < st->n; i++) {
        const char *text = st->arena + st->v[i].off;
        int64_t v = step_canonical(text, st->v[i].len);
        if (prev >= 0 && v > prev) {
            tw_ser_uv(w, 4 * (uint64_t)(v - prev - 1) +
                             (st->v[i].is_str ? 2u : 0u));
        } else {
            tw_ser_uv(w, 2 * (uint64_t)st->v[i].len + 1);
            tw_ser_u8(w, st->v[i].is_str);
            tw_ser_bytes(w, text, st->v[i].len);
        }
        prev = v;
    }
}

static int get_steps(tw_deser *d, so_steps *st, int ver)
{
    int v2 = ver >= 2;
    uint64_t n;
    if (v2) {
        n = tw_deser_uv(d);
        if (n > d->left) /* at least one byte a step */
            tw_deser_fail(d);
    } else {
        n = tw_deser_count(d, 5);
    }
    int64_t prev = -1;
    for (uint64_t i = 0; i < n && tw_deser_ok(d); i++) {
        char num[24];
        const char *text;
        uint64_t len;
        uint8_t is_str;
        uint64_t tag = v2 ? tw_deser_uv(d) : 1;
        /* SO02: 0 = +1; SO03: even = +1 + tag / 4, a string if tag % 4 */
        if (v2 && (ver == 2 ? tag == 0 : tag % 2 == 0)) {
            uint64_t k = tag / 4;
            if (prev < 0 || k > (uint64_t)(SO_STEP_MAX - prev - 1)) {
                tw_deser_fail(d);
                break;
            }
            len = (uint64_t)snprintf(num, sizeof(num), "%lld",
                                     (long long)(prev + 1 + (int64_t)k));
            text = num;
            is_str = ver >= 3 && tag % 4 == 2;
        } else {
            len = !v2 ? tw_deser_u32(d) : ver == 2 ? tag - 1 : tag / 2;
            is_str = tw_deser_u8(d);
            if (!tw_deser_ok(d) || len > d->left || len > UINT32_MAX) {
                tw_deser_fail(d);
                break;
            }
            /* The bytes are read in place: steps_push copies them. */
            text = (const char *)d->p;
            d->p += len;
            d->left -= len;
        }
        if (steps_push(st, text, (size_t)len, is_str) != TW_OK)
            tw_deser_fail(d);
        /* SO02 chains numbers only; SO03 strings too */
        prev = is_str && ver < 3 ? -1 : step_canonical(text, (size_t)len);
    }
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

/* SO02 durations: u8 1 and sv whole µs each when every duration is
 * exactly (double)µs / 1e6, else u8 0 and the f64 bits. */
static int durations_whole_us(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = v[i] * 1e6;
        if (!(fabs(x) < 9007199254740992.0))
            return 0;
        double back = (double)llrint(x) / 1e6;
        if (memcmp(&back, &v[i], sizeof(back)) != 0)
            return 0;
    }
    return 1;
}

/* Durations' forms: u8 DUR_F64 and the f64 bits; u8 DUR_US and sv whole
 * µs each; u8 DUR_PACKED (SO04), sv the smallest µs, u8 width and the
 * block of µs - smallest. */
#define DUR_F64 0u
#define DUR_US 1u
#define DUR_PACKED 2u

static void put_durations(tw_ser *w, const double *v, size_t n)
{
    unsigned form = durations_whole_us(v, n) ? DUR_US : DUR_F64;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    size_t varints = 0;
    for (size_t i = 0; i < n && form == DUR_US; i++) {
        int64_t us = (int64_t)llrint(v[i] * 1e6);
        varints += tw_ser_sv_len(us);
        lo = us < lo ? us : lo;
        hi = us > hi ? us : hi;
    }
    unsigned width = 0;
    if (form == DUR_US && n > 0) {
        /* |us| < 2^53: hi - lo fits */
        width = tw_bitpack_width((uint64_t)(hi - lo));
        if (width <= TW_BITPACK_MAX_WIDTH &&
            tw_ser_sv_len(lo) + 1 + tw_bitpack_bytes(n, width) < varints)
            form = DUR_PACKED;
    }
    tw_ser_u8(w, (uint8_t)form);
    if (form == DUR_PACKED) {
        tw_ser_sv(w, lo);
        tw_ser_u8(w, (uint8_t)width);
        tw_bitpack_writer bw = {0, 0};
        uint8_t out[8];
        for (size_t i = 0; i < n; i++) {
            uint64_t off = (uint64_t)((int64_t)llrint(v[i] * 1e6) - lo);
            tw_ser_bytes(w, out, tw_bitpack_put(&bw, off, width, out));
        }
        tw_ser_bytes(w, out, tw_bitpack_flush(&bw, out));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (form == DUR_US)
            tw_ser_sv(w, (int64_t)llrint(v[i] * 1e6));
        else
            tw_ser_f64(w, v[i]);
    }
}

/* ver: the checkpoint's SO version (1: f64 only, no form byte). */
static void get_durations(tw_deser *d, double *v, size_t n, int ver)
{
    unsigned form = ver >= 2 ? tw_deser_u8(d) : DUR_F64;
    if (form > (ver >= 4 ? DUR_PACKED : DUR_US))
        tw_deser_fail(d);
    if (form == DUR_PACKED && tw_deser_ok(d)) {
        int64_t lo = tw_deser_sv(d);
        unsigned width = tw_deser_u8(d);
        const uint8_t *block = NULL;
        if (tw_deser_ok(d) && width <= TW_BITPACK_MAX_WIDTH &&
            lo > -9007199254740992ll && lo < 9007199254740992ll) /* 2^53 */
            block = tw_deser_view(d, tw_bitpack_bytes(n, width));
        if (block == NULL) {
            tw_deser_fail(d);
            return;
        }
        tw_bitpack_reader br;
        tw_bitpack_reader_init(&br, block, tw_bitpack_bytes(n, width));
        for (size_t i = 0; i < n; i++) /* lo + off < 2^57 */
            v[i] = (double)(lo + (int64_t)tw_bitpack_get(&br, width)) / 1e6;
        return;
    }
    for (size_t i = 0; i < n && tw_deser_ok(d); i++)
        v[i] = form == DUR_US ? (double)tw_deser_sv(d) / 1e6 : tw_deser_f64(d);
}

/* The report's edges from hist100 of its first and last (numpy's
 * linspace of the two); 1 when they equal `edges` bit for bit. */
static int edges_from_ends(const tw_host *h, const double edges[101],
                           double out[101])
{
    double ends[2] = {edges[0], edges[100]};
    int64_t probs[100];
    h->hist100(ends, 2, probs, out);
    return memcmp(out, edges, 101 * sizeof(double)) == 0;
}

/* A duration in whole µs for the SO03 start-time deltas; 0 when it is
 * not finite or out of range (any value works: both sides use it). */
static uint64_t dur_us_or_0(double dur)
{
    double us = dur * 1e6;
    if (!(fabs(us) < 9007199254740992.0))
        return 0;
    return (uint64_t)llrint(us);
}

static int so_save(void *state, tw_buf *out)
{
    so_state *s = state;
    tw_ser w;
    tw_ser_init(&w, s->host, out);
    tw_ser_u32(&w, SO_MAGIC_4);
    tw_ser_i64(&w, s->triggered);
    tw_ser_i64(&w, s->violations);
    tw_ser_i64(&w, s->datapoints);
    tw_ser_u64(&w, s->nodes.n);
    for (size_t i = 0; i < s->nodes.n; i++) {
        const so_node *n = s->nodes.ptrs[i];
        tw_ser_str(&w, s->nodes.keys[i]);
        tw_ser_u64(&w, n->names.n);
        for (size_t k = 0; k < n->names.n; k++) {
            const so_series *ser = n->names.ptrs[k];
            tw_ser_str(&w, n->names.keys[k]);
            put_steps(&w, &ser->steps);
            put_durations(&w, ser->d, ser->steps.n);
            tw_ser_u64(&w, ser->total);
            tw_ser_u8(&w, (uint8_t)ser->any_string);
            tw_ser_u8(&w, (uint8_t)ser->summary);
            tw_ser_f64(&w, ser->w_mean);
            tw_ser_f64(&w, ser->w_m2);
            if (ser->summary) {
                tw_rel_hist_save(&ser->rh, &w);
                tw_ser_uv(&w, ser->ntop);
                put_durations(&w, ser->top, ser->ntop);
            }
        }
        const so_detail *d = &n->det;
        tw_ser_u8(&w, (uint8_t)d->set);
        if (d->set) {
            tw_ser_f64(&w, d->mean);
            tw_ser_f64(&w, d->max);
            tw_ser_f64(&w, d->p99);
            tw_ser_f64(&w, d->p95);
            tw_ser_f64(&w, d->p50);
            tw_ser_f64(&w, d->min);
            tw_ser_f64(&w, d->stddev);
            tw_ser_i64(&w, d->n_out);
            tw_ser_str(&w, d->phase);
            for (int b = 0; b < 100; b++)
                tw_ser_sv(&w, d->probs[b]);
            double again[101];
            int derived = edges_from_ends(s->host, d->edges, again);
            tw_ser_u8(&w, (uint8_t)derived);
            for (int b = derived ? 101 : 0; b < 101; b++)
                tw_ser_f64(&w, d->edges[b]);
            if (derived) {
                tw_ser_f64(&w, d->edges[0]);
                tw_ser_f64(&w, d->edges[100]);
            }
            put_steps(&w, &d->steps);
            tw_ser_u8(&w, (uint8_t)d->steps_str);
        }
    }
    tw_ser_u64(&w, s->ndet);
    for (size_t i = 0; i < s->ndet; i++)
        tw_ser_u64(&w, s->det_order[i]);
    tw_fwagg_save(&s->agg, &w);
    tw_keyorder_save(&s->ko, &w);
    tw_ser_i64(&w, s->out_first_us);
    tw_ser_i64(&w, s->out_last_us);
    for (size_t i = 0; i < s->nodes.n; i++) {
        const so_node *n = s->nodes.ptrs[i];
        for (size_t k = 0; k < n->names.n; k++) {
            const so_series *ser = n->names.ptrs[k];
            /* SO03: a start against the previous step's end, ~0 for
             * back-to-back steps (µs times of one job: no overflow) */
            uint64_t prev = 0;
            for (size_t t = 0; t < ser->steps.n; t++) {
                tw_ser_sv(&w, (int64_t)((uint64_t)ser->t[t] - prev));
                prev = (uint64_t)ser->t[t] + dur_us_or_0(ser->d[t]);
            }
        }
    }
    /* second trailer: the slots' step counts (fixed's fraction test) */
    for (size_t i = 0; i < s->nodes.n; i++)
        tw_ser_u64(&w, ((const so_node *)s->nodes.ptrs[i])->det.nsteps);
    return tw_ser_ok(&w) ? TW_OK : TW_ERR;
}

/* An SO01/SO02 summary's count map (durations, coarsened past 4096
 * distinct values) becomes the histogram and top-K; its exact min and max
 * are kept. */
static int summary_from_countmap(so_series *ser, const tw_countmap *cm)
{
    for (size_t i = 0; i < cm->map.n; i++) {
        double x = cm->map.ent[i].key;
        uint64_t c = cm->map.ent[i].val;
        if (tw_rel_hist_add_n(&ser->rh, x, c) != TW_OK)
            return TW_ERR;
        for (uint64_t k = 0; k < c && k < SO_TOP_K; k++)
            top_push(ser, x);
    }
    if (ser->rh.n > 0) {
        ser->rh.min = tw_countmap_min(cm);
        ser->rh.max = tw_countmap_max(cm);
    }
    return TW_OK;
}

/* The summary of an SO03 series: a valid min-heap of at most SO_TOP_K. */
static int restore_summary(so_series *ser, tw_deser *d, int ver)
{
    if (!ser->summary)
        return TW_OK;
    ser->top = malloc(SO_TOP_K * sizeof(double));
    if (!ser->top)
        return TW_ERR;
    if (ver < 3) {
        tw_countmap cm;
        tw_countmap_init(&cm, SO_SUMMARY_KEYS);
        int rc = tw_countmap_restore(&cm, d);
        if (rc == TW_OK)
            rc = summary_from_countmap(ser, &cm);
        tw_countmap_free(&cm);
        return rc;
    }
    if (tw_rel_hist_restore(&ser->rh, d) != TW_OK)
        return TW_ERR;
    uint64_t nt = tw_deser_uv(d);
    if (!tw_deser_ok(d) || nt > SO_TOP_K)
        return TW_ERR;
    ser->ntop = (size_t)nt;
    get_durations(d, ser->top, ser->ntop, ver);
    for (size_t i = 1; i < ser->ntop; i++)
        if (!(ser->top[(i - 1) / 2] <= ser->top[i]))
            return TW_ERR;
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

static int restore_node(so_state *s, tw_deser *d, int ver)
{
    char *id = tw_deser_str(d);
    if (!id) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    if (fwsm_find(&s->nodes, id) >= 0) {
        free(id);
        tw_deser_fail(d);
        return TW_ERR;
    }
    so_node *n = node_get(s, id);
    free(id);
    if (!n)
        return TW_ERR;
    uint64_t nn = tw_deser_count(d, 8);
    for (uint64_t k = 0; k < nn && tw_deser_ok(d); k++) {
        char *name = tw_deser_str(d);
        if (!name || fwsm_find(&n->names, name) >= 0) {
            free(name);
            tw_deser_fail(d);
            return TW_ERR;
        }
        so_series *ser = series_get(n, name);
        free(name);
        if (!ser || get_steps(d, &ser->steps, ver) != TW_OK)
            return TW_ERR;
        ser->dcap = ser->steps.n ? ser->steps.n : 1;
        ser->d = malloc(ser->dcap * sizeof(double));
        ser->t = calloc(ser->dcap, sizeof(int64_t));
        if (!ser->d || !ser->t)
            return TW_ERR;
        get_durations(d, ser->d, ser->steps.n, ver);
        ser->total = tw_deser_u64(d);
        ser->any_string = tw_deser_u8(d) != 0;
        ser->summary = tw_deser_u8(d) != 0;
        ser->w_mean = tw_deser_f64(d);
        ser->w_m2 = tw_deser_f64(d);
        if (ver < 3 && tw_deser_ok(d) && !ser->summary) {
            /* an empty count map outside summary mode */
            tw_countmap cm;
            tw_countmap_init(&cm, SO_SUMMARY_KEYS);
            if (tw_countmap_restore(&cm, d) != TW_OK)
                tw_deser_fail(d);
            tw_countmap_free(&cm);
        }
        if (tw_deser_ok(d) && restore_summary(ser, d, ver) != TW_OK)
            tw_deser_fail(d);
    }
    so_detail *det = &n->det;
    det->set = tw_deser_u8(d) != 0;
    if (det->set) {
        det->mean = tw_deser_f64(d);
        det->max = tw_deser_f64(d);
        det->p99 = tw_deser_f64(d);
        det->p95 = tw_deser_f64(d);
        det->p50 = tw_deser_f64(d);
        det->min = tw_deser_f64(d);
        det->stddev = tw_deser_f64(d);
        det->n_out = tw_deser_i64(d);
        det->phase = tw_deser_str(d);
        if (!det->phase)
            tw_deser_fail(d);
        for (int b = 0; b < 100; b++)
            det->probs[b] = ver >= 4 ? tw_deser_sv(d) : tw_deser_i64(d);
        uint8_t derived = ver >= 4 ? tw_deser_u8(d) : 0;
        if (derived > 1)
            tw_deser_fail(d);
        if (derived) {
            double ends[101];
            ends[0] = tw_deser_f64(d);
            ends[100] = tw_deser_f64(d);
            edges_from_ends(s->host, ends, det->edges);
        } else {
            for (int b = 0; b < 101; b++)
                det->edges[b] = tw_deser_f64(d);
        }
        if (get_steps(d, &det->steps, ver) != TW_OK)
            return TW_ERR;
        det->steps_str = tw_deser_u8(d) != 0;
    }
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

static int so_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    so_state *s = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    uint32_t magic = tw_deser_u32(&d);
    int ver = magic == SO_MAGIC_4   ? 4
              : magic == SO_MAGIC_3 ? 3
              : magic == SO_MAGIC_2 ? 2
                                    : 1;
    int v2 = ver >= 2;
    if (magic != SO_MAGIC && magic != SO_MAGIC_2 && magic != SO_MAGIC_3 &&
        magic != SO_MAGIC_4)
        tw_deser_fail(&d);
    s->triggered = tw_deser_i64(&d);
    s->violations = tw_deser_i64(&d);
    s->datapoints = tw_deser_i64(&d);
    uint64_t nn = tw_deser_count(&d, 8);
    for (uint64_t i = 0; i < nn && tw_deser_ok(&d); i++)
        if (restore_node(s, &d, ver) != TW_OK)
            tw_deser_fail(&d);
    uint64_t ndet = tw_deser_count(&d, 8);
    if (tw_deser_ok(&d) && ndet > s->nodes.n)
        tw_deser_fail(&d);
    if (tw_deser_ok(&d) && s->nodes.n > 0) {
        s->det_order = malloc(s->nodes.n * sizeof(*s->det_order));
        if (!s->det_order)
            tw_deser_fail(&d);
    }
    for (uint64_t i = 0; i < ndet && tw_deser_ok(&d); i++) {
        uint64_t at = tw_deser_u64(&d);
        if (at >= s->nodes.n || !((so_node *)s->nodes.ptrs[at])->det.set)
            tw_deser_fail(&d);
        else
            s->det_order[s->ndet++] = (size_t)at;
    }
    if (tw_deser_ok(&d) && tw_fwagg_restore(&s->agg, &d) != TW_OK)
        tw_deser_fail(&d);
    if (tw_deser_ok(&d) && tw_keyorder_restore(&s->ko, &d) != TW_OK)
        tw_deser_fail(&d);
    /* the finding's trailer; absent in checkpoints of older builds */
    s->out_first_us = s->out_last_us = 0;
    if (tw_deser_ok(&d) && d.left > 0) {
        s->out_first_us = tw_deser_i64(&d);
        s->out_last_us = tw_deser_i64(&d);
        for (size_t i = 0; i < s->nodes.n && tw_deser_ok(&d); i++) {
            so_node *n = s->nodes.ptrs[i];
            for (size_t k = 0; k < n->names.n; k++) {
                so_series *ser = n->names.ptrs[k];
                uint64_t prev = 0;
                for (size_t t = 0; t < ser->steps.n; t++) {
                    if (v2)
                        prev += (uint64_t)tw_deser_sv(&d);
                    else
                        prev = (uint64_t)tw_deser_i64(&d);
                    ser->t[t] = (int64_t)prev;
                    if (ver >= 3)
                        prev += dur_us_or_0(ser->d[t]);
                }
            }
        }
    }
    /* absent in checkpoints of older builds: 0 skips the fraction test */
    if (tw_deser_ok(&d) && d.left > 0)
        for (size_t i = 0; i < s->nodes.n && tw_deser_ok(&d); i++)
            ((so_node *)s->nodes.ptrs[i])->det.nsteps = tw_deser_u64(&d);
    if (!tw_deser_done(&d)) {
        so_clear_nodes(s);
        fwsm_init(&s->nodes);
        snprintf(err, errlen,
                 "StepOutlier: checkpoint is truncated, corrupt or not from "
                 "this rule");
        return TW_ERR;
    }
    return TW_OK;
}

/* Nodes with the most outlier steps first; magnitude against the
 * median step of the worst node. */
static int so_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                      char *err, size_t errlen)
{
    so_state *s = state;
    (void)ctx, (void)err, (void)errlen;
    const so_detail *worst = NULL;
    const char *worst_node = NULL;
    int64_t total_out = 0;
    size_t flagged = 0;
    for (size_t i = 0; i < s->ndet; i++) {
        const so_detail *d =
            &((const so_node *)s->nodes.ptrs[s->det_order[i]])->det;
        if (!so_flagged(s, d))
            continue;
        flagged++;
        total_out += d->n_out;
        if (worst == NULL || d->n_out > worst->n_out) {
            worst = d;
            worst_node = s->nodes.keys[s->det_order[i]];
        }
    }
    int64_t above = INT64_MAX;
    while (f->nnames < TW_FINDING_MAX_NODES) {
        int64_t best = -1;
        for (size_t i = 0; i < s->ndet; i++) {
            const so_detail *d =
                &((const so_node *)s->nodes.ptrs[s->det_order[i]])->det;
            if (so_flagged(s, d) && d->n_out < above && d->n_out > best)
                best = d->n_out;
        }
        if (best < 0)
            break;
        above = best;
        for (size_t i = 0; i < s->ndet; i++) {
            const so_detail *d =
                &((const so_node *)s->nodes.ptrs[s->det_order[i]])->det;
            if (so_flagged(s, d) && d->n_out == best)
                tw_finding_add_name(f, s->nodes.keys[s->det_order[i]]);
        }
    }
    if (flagged > f->ninvolved)
        f->ninvolved = flagged;
    f->first_us = s->out_first_us;
    f->last_us = s->out_last_us;
    if (worst == NULL)
        return TW_OK;
    /* the slowest 1 % against the median: what a slow step costs, without
     * letting one warm-up step speak for all of them */
    double ratio = worst->p50 > 0 ? worst->p99 / worst->p50 : 0.0;
    double thr = so_threshold(s, worst->mean, worst->stddev, worst->p50);
    f->value = ratio;
    f->limit = worst->p50 > 0 ? thr / worst->p50 : 0.0;
    snprintf(f->unit, sizeof(f->unit), "x median");
    tw_finding_text(f->summary,
                    "Some training steps took far longer than the others: "
                    "%lld outlier step(s) of '%s' on %zu node(s).",
                    (long long)total_out, worst->phase ? worst->phase : "?",
                    flagged);
    char floor[64] = "";
    if (s->semantics == TW_SEMANTICS_FIXED)
        snprintf(floor, sizeof(floor), ", at least %g x the median",
                 s->min_factor);
    tw_finding_text(f->magnitude,
                    "on %s: %lld steps above %.3f s (mean %.3f s + %g x std "
                    "%.3f s%s); the slowest 1 %% take %.3f s, %.1fx the "
                    "median %.3f s (longest %.3f s)",
                    worst_node, (long long)worst->n_out, thr, worst->mean,
                    s->stddev, worst->stddev, floor, worst->p99, ratio,
                    worst->p50, worst->max);
    tw_finding_text(f->recommendation,
                    "Look at what runs at the slow steps (the report's "
                    "framework metrics): periodic checkpoints, evaluation or "
                    "logging belong outside the step or on a schedule; data "
                    "stalls call for more loader workers and prefetching; a "
                    "single slow node points at its hardware.");
    if (s->semantics == TW_SEMANTICS_FIXED)
        tw_finding_text(f->parameters,
                        "stddev %g, n_outliers %lld, mode %s, min_factor %g, "
                        "min_outlier_fraction %g",
                        s->stddev, (long long)s->n_outliers,
                        s->mode ? s->mode : "None", s->min_factor,
                        s->min_fraction);
    else
        tw_finding_text(f->parameters, "stddev %g, n_outliers %lld, mode %s",
                        s->stddev, (long long)s->n_outliers,
                        s->mode ? s->mode : "None");
    return TW_OK;
}

static const tw_rule_descriptor so_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "StepOutlier",
    .description = "Flags step durations above mean + stddev * std per node "
                   "and step kind, and correlates outlier steps with "
                   "framework metrics.",
    .params = so_params,
    .nparams = P_COUNT,
    .create = so_create,
    .scan = so_scan,
    .details = so_details,
    .parameters_text = so_parameters_text,
    .save = so_save,
    .restore = so_restore,
    .destroy = so_destroy,
    .finding = so_finding,
    .finding_help =
        "Some steps take far longer than the others (above mean + stddev x "
        "std of a node's step durations). Look at what runs during the slow "
        "steps: checkpointing, evaluation or logging inside the step, data "
        "stalls, or a slow node; the report's framework metrics name the "
        "operators seen in them.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &so_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_FRAMEWORK;
}
