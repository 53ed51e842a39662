/*
 * dataloader.c - Dataloader (RULES.md §3.9).
 *
 * Compares the median number of PyTorch data-loader processes running in
 * parallel (distinct pids per second of event start) with the number of
 * CPU cores, and reports the loader settings and data-loading times.
 *
 * Semantics:
 *  - differ: only the bound on the data-loading times (the reference keeps
 *    every duration). Both semantics keep them in a count map (exact
 *    multiset; quantiles and histogram equal numpy's over the list).
 *    `reference` leaves it uncapped; `fixed` caps it at `max_distinct_times`
 *    distinct durations (default 100000), after which durations are
 *    rounded to 0.01 s, then 0.02 s, ... (tw_countmap coarsening): p25/p50/
 *    p95 and the histogram become approximate (order statistics within
 *    half a quantum; the histogram's extremes stay exact), decisions are
 *    unaffected (they use only the per-second counts).
 *  - same (reproduced in both): RuleTriggered set to 1, Violations +1 per
 *    scan and direction (quirk 1); seconds counted per scan, a second that
 *    straddles a scan boundary yields two points (quirk 2); any loader
 *    event hides `prefetch` until a later Prefetch event (quirk 3); `cores`
 *    frozen after the first scan with CPU events (quirk 5); `parallel`
 *    cleared when longer than 1000 at an event of a later scan.
 *  - crash fix (both): events without args are treated as having empty
 *    args (quirk 4).
 *  - no CPU data (cores unknown, 0): `fixed` makes no comparison (the
 *    reference's "median > 200 % of 0 cores" flags every job whose system
 *    files are missing); `reference` compares as the reference does.
 *
 * Memory: `parallel` <= 1000 + (distinct start seconds of loader events in
 * one scan) int64s; the scan-local per-second pid sets are freed after the
 * scan; times: reference O(distinct durations), fixed
 * <= max_distinct_times keys (~48-64 bytes each, ~6 MB at the default);
 * plus O(1) settings.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_hist.h"
#include "fw_strmap.h"
#include "ptr_memo.h"
#include "trainwatch/countmap.h"
#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

enum { P_MIN = 0, P_MAX, P_PATIENCE, P_MAX_DISTINCT, P_COUNT };

static const tw_param_spec dl_params[P_COUNT] = {
    {"min_threshold", TW_PARAM_DOUBLE, "70", 0.0, 1e6,
     "% of the CPU cores: fewer parallel data-loader processes than this "
     "(median) is a violation"},
    {"max_threshold", TW_PARAM_DOUBLE, "200", 0.0, 1e6,
     "% of the CPU cores: more parallel data-loader processes than this "
     "(median) is a violation"},
    {"patience", TW_PARAM_INT, "10", 0.0, 1e9,
     "evaluate only when more than this many per-second points exist"},
    {"max_distinct_times", TW_PARAM_INT, "100000", 1000.0, 1e8,
     "trainwatch extension, fixed semantics only: distinct data-loading "
     "durations kept exactly before they are rounded (bounds memory)"},
};

/* A JSON value copied from an event's args (pin_memory, num_workers). */
typedef struct dl_value {
    int set;
    tw_arg_kind kind;
    char *text;
} dl_value;

/* Details keys, in the order the reference assigns them in one scan. */
enum {
    D_PIN_MEMORY = 0,
    D_NUM_WORKERS,
    D_PREFETCH,
    D_CORES,
    D_DATALOADERS,
    D_TIMES,
    D_COUNT
};

enum { PREFETCH_FALSE = 0, PREFETCH_TRUE = 1, PREFETCH_UNSET = 2 };

typedef struct dl_state {
    const tw_host *host;
    tw_semantics semantics;
    double min_threshold;
    double max_threshold;
    int64_t patience;
    char *params_text;

    int64_t triggered;
    int64_t violations;
    int64_t datapoints;

    int64_t cores; /* |cores|; frozen once non-zero */

    int64_t *parallel;
    size_t nparallel;
    size_t capparallel;

    tw_countmap times;

    dl_value pin_memory; /* current settings */
    dl_value num_workers;
    int prefetch;

    /* Details as last written by a scan with loader events. */
    dl_value det_pin_memory;
    dl_value det_num_workers;
    int det_prefetch;
    int64_t det_cores;
    int64_t det_dataloaders;
    unsigned char order[D_COUNT];
    size_t norder;

    /* For the finding (an optional checkpoint trailer): violations by
     * direction and the ends of the first and last violating scans. */
    int64_t n_low, n_high;
    int64_t viol_first_us, viol_last_us;

    /* this scan's phase pointers -> dl_phase, name pointers -> 1 when
     * the name holds "Prefetch" (ptr_memo.h) */
    tw_ptr_memo phase_kind, prefetch_name;
} dl_state;

/* ---- values ---------------------------------------------------------------
 */

static void value_clear(dl_value *v)
{
    free(v->text);
    memset(v, 0, sizeof(*v));
}

static int value_copy(dl_value *dst, const dl_value *src)
{
    char *t = NULL;
    if (src->set) {
        t = strdup(src->text ? src->text : "");
        if (!t)
            return TW_ERR;
    }
    value_clear(dst);
    dst->set = src->set;
    dst->kind = src->kind;
    dst->text = t;
    return TW_OK;
}

/* Assigning an arg: a JSON null is Python None, i.e. "not set". */
static int value_from_arg(dl_value *dst, const tw_arg *a)
{
    dl_value v = {0, a->kind, NULL};
    if (a->kind != TW_ARG_NULL) {
        v.set = 1;
        v.text = (char *)(a->value ? a->value : "");
    }
    return value_copy(dst, &v);
}

static int is_int_literal(const char *s)
{
    if (*s == '-')
        s++;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static void value_write(const tw_host *h, tw_json *j, const dl_value *v)
{
    switch (v->kind) {
    case TW_ARG_STRING:
        h->json_string(j, v->text);
        break;
    case TW_ARG_NUMBER:
        if (is_int_literal(v->text))
            h->json_raw(j, v->text);
        else
            h->json_double(j, strtod(v->text, NULL));
        break;
    case TW_ARG_BOOL:
        h->json_bool(j, strcmp(v->text, "true") == 0);
        break;
    case TW_ARG_JSON:
        h->json_raw(j, v->text);
        break;
    default:
        h->json_null(j);
        break;
    }
}

static const tw_arg *find_arg(const tw_fw_event *e, const char *key)
{
    if (!e->args) /* no args: treated as {} (quirk 4 fix) */
        return NULL;
    for (uint32_t i = 0; i < e->nargs; i++)
        if (e->args[i].key && strcmp(e->args[i].key, key) == 0)
            return &e->args[i];
    return NULL;
}

/* The text "%.17g" gives for the integral double v, |v| < 1e15 (every
 * such value is exact and printed without an exponent), written without
 * printf: the per-event keys below are the rule's hottest path. */
static void integral_text(double v, char *buf)
{
    char digits[24];
    size_t n = 0;
    uint64_t u = (uint64_t)fabs(v);
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (signbit(v)) /* -0.0 prints as "-0" too */
        *buf++ = '-';
    while (n > 0)
        *buf++ = digits[--n];
    *buf = '\0';
}

/* 1 when text is an integer as JSON writes it ("-"? then digits, no
 * leading zero) short enough that "%.17g" of its value is itself. */
static int plain_integer(const char *text)
{
    const char *d = text[0] == '-' ? text + 1 : text;
    size_t n = strspn(d, "0123456789");
    return n > 0 && n <= 15 && d[n] == '\0' && (d[0] != '0' || n == 1);
}

/* A dict key equal for values Python considers equal (11 == 11.0 ==
 * True-as-1 for the pid counts). */
static void pid_key(const tw_arg *a, char *buf, size_t len)
{
    switch (a->kind) {
    case TW_ARG_NUMBER:
        if (plain_integer(a->value) && strlen(a->value) + 3 <= len) {
            buf[0] = 'n';
            buf[1] = ':';
            memcpy(buf + 2, a->value, strlen(a->value) + 1);
        } else
            snprintf(buf, len, "n:%.17g", strtod(a->value, NULL));
        break;
    case TW_ARG_BOOL:
        snprintf(buf, len, "n:%d", strcmp(a->value, "true") == 0);
        break;
    case TW_ARG_NULL:
        snprintf(buf, len, "z:");
        break;
    case TW_ARG_STRING:
        snprintf(buf, len, "s:%s", a->value);
        break;
    default:
        snprintf(buf, len, "j:%s", a->value);
        break;
    }
}

/* ---- lifecycle ------------------------------------------------------------
 */

static void dl_destroy(void *state)
{
    dl_state *s = state;
    if (!s)
        return;
    free(s->params_text);
    free(s->parallel);
    tw_countmap_free(&s->times);
    value_clear(&s->pin_memory);
    value_clear(&s->num_workers);
    value_clear(&s->det_pin_memory);
    value_clear(&s->det_num_workers);
    free(s);
}

static int dl_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen, "Dataloader: expected %d parameters, got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    const tw_param_value *v = params->values;
    for (int i = 0; i < P_COUNT; i++) {
        if (v[i].is_none || !isfinite(v[i].d) || v[i].d < 0) {
            snprintf(err, errlen, "Dataloader: %s must be a number >= 0",
                     dl_params[i].name);
            return TW_ERR;
        }
    }
    dl_state *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "Dataloader: out of memory");
        return TW_ERR;
    }
    s->host = host;
    s->semantics = params->semantics;
    s->min_threshold = v[P_MIN].d;
    s->max_threshold = v[P_MAX].d;
    s->patience = v[P_PATIENCE].i;
    s->prefetch = PREFETCH_FALSE;
    tw_countmap_init(&s->times, s->semantics == TW_SEMANTICS_REFERENCE
                                    ? 0
                                    : (size_t)v[P_MAX_DISTINCT].i);
    const char *mn = v[P_MIN].text ? v[P_MIN].text : "None";
    const char *mx = v[P_MAX].text ? v[P_MAX].text : "None";
    size_t len = strlen(mn) + strlen(mx) + 64;
    s->params_text = malloc(len);
    if (!s->params_text) {
        dl_destroy(s);
        snprintf(err, errlen, "Dataloader: out of memory");
        return TW_ERR;
    }
    snprintf(s->params_text, len, "min_threshold:%s\nmax_threshold:%s", mn, mx);
    *state = s;
    return TW_OK;
}

/* ---- scan ---------------------------------------------------------------- */

static int count_cores(dl_state *s, const tw_scan *scan)
{
    fwsm names;
    fwsm_init(&names);
    for (size_t i = 0; i < scan->nsamples; i++) {
        uint32_t id = scan->samples[i].series;
        if (id >= scan->nseries ||
            scan->series[id].metric != TW_METRIC_CPU_UTIL)
            continue;
        /* A JSON null name is Python's None: one more distinct key. */
        const char *name = scan->series[id].name;
        if (fwsm_intern(&names, name ? name : "\x01None") < 0) {
            fwsm_free(&names);
            return TW_ERR;
        }
    }
    s->cores = (int64_t)names.n;
    fwsm_free(&names);
    return TW_OK;
}

static int parallel_push(dl_state *s, int64_t v)
{
    if (s->nparallel == s->capparallel) {
        size_t cap = s->capparallel ? s->capparallel * 2 : 64;
        int64_t *p = realloc(s->parallel, cap * sizeof(*p));
        if (!p)
            return TW_ERR;
        s->parallel = p;
        s->capparallel = cap;
    }
    s->parallel[s->nparallel++] = v;
    return TW_OK;
}

static void free_seconds(fwsm *secs)
{
    for (size_t i = 0; i < secs->n; i++) {
        fwsm *pids = secs->ptrs[i];
        if (pids) {
            fwsm_free(pids);
            free(pids);
        }
    }
    fwsm_free(secs);
}

/* One DataLoaderWorker/DataLoaderIter event into `secs` (second -> pids). */
static int record_event(dl_state *s, fwsm *secs, const tw_fw_event *e)
{
    if (tw_countmap_add(&s->times,
                        (double)(e->end_us - e->start_us) / 1000000.0) != TW_OK)
        return TW_ERR;
    /* Python: int(start_time / 1000000), truncation toward zero. */
    double sec = trunc((double)e->start_us / 1000000.0);
    char key[64];
    if (fabs(sec) < 1e15)
        integral_text(sec, key);
    else
        snprintf(key, sizeof(key), "%.17g", sec);
    long at = fwsm_intern(secs, key);
    if (at < 0)
        return TW_ERR;
    if (!secs->ptrs[at]) {
        fwsm *pids = malloc(sizeof(*pids));
        if (!pids)
            return TW_ERR;
        fwsm_init(pids);
        secs->ptrs[at] = pids;
    }
    const tw_arg *pid = find_arg(e, "pid");
    if (pid) {
        char pk[512];
        pid_key(pid, pk, sizeof(pk));
        long p = fwsm_intern(secs->ptrs[at], pk);
        if (p < 0)
            return TW_ERR;
        ((fwsm *)secs->ptrs[at])->vals[p]++;
    }
    return TW_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t median_trunc(const int64_t *v, size_t n, int *ok)
{
    int64_t *c = malloc(n * sizeof(*c));
    if (!c) {
        *ok = 0;
        return 0;
    }
    memcpy(c, v, n * sizeof(*c));
    qsort(c, n, sizeof(*c), cmp_i64);
    double m = n % 2 ? (double)c[n / 2]
                     : ((double)c[n / 2 - 1] + (double)c[n / 2]) / 2.0;
    free(c);
    *ok = 1;
    return (int64_t)trunc(m);
}

static void note_key(dl_state *s, int k)
{
    for (size_t i = 0; i < s->norder; i++)
        if (s->order[i] == k)
            return;
    s->order[s->norder++] = (unsigned char)k;
}

/* What an event's phase makes it for this rule. */
typedef enum dl_phase {
    PH_OTHER = 0,
    PH_INIT,  /* DataLoaderIterInitialize: the loader's settings */
    PH_LOADER /* DataLoaderWorker or DataLoaderIter: one loading */
} dl_phase;

static dl_phase phase_kind(dl_state *s, const char *phase)
{
    int k;
    if (tw_ptr_memo_get(&s->phase_kind, phase, &k))
        return (dl_phase)k;
    k = PH_OTHER;
    if (strcmp(phase, "DataLoaderIterInitialize") == 0)
        k = PH_INIT;
    else if (strcmp(phase, "DataLoaderWorker") == 0 ||
             strcmp(phase, "DataLoaderIter") == 0)
        k = PH_LOADER;
    tw_ptr_memo_put(&s->phase_kind, phase, k);
    return (dl_phase)k;
}

static int prefetch_name(dl_state *s, const char *name)
{
    int yes;
    if (!tw_ptr_memo_get(&s->prefetch_name, name, &yes)) {
        yes = strstr(name, "Prefetch") != NULL;
        tw_ptr_memo_put(&s->prefetch_name, name, yes);
    }
    return yes;
}

static int dl_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    dl_state *s = state;
    if (s->cores == 0 && count_cores(s, scan) != TW_OK)
        goto oom;

    fwsm secs;
    fwsm_init(&secs);
    tw_ptr_memo_clear(&s->phase_kind);
    tw_ptr_memo_clear(&s->prefetch_name);
    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        dl_phase kind = phase_kind(s, e->phase ? e->phase : "");
        if (s->nparallel > 1000)
            s->nparallel = 0;
        if (kind == PH_INIT) {
            const tw_arg *a = find_arg(e, "pin_memory");
            if (a && value_from_arg(&s->pin_memory, a) != TW_OK)
                goto oom_secs;
            a = find_arg(e, "num_workers");
            if (a && value_from_arg(&s->num_workers, a) != TW_OK)
                goto oom_secs;
        }
        if (kind == PH_LOADER) {
            s->datapoints++;
            if (record_event(s, &secs, e) != TW_OK)
                goto oom_secs;
            s->prefetch = PREFETCH_UNSET;
        }
        if (e->name && prefetch_name(s, e->name))
            s->prefetch = PREFETCH_TRUE;
    }

    if (secs.n > 0) {
        for (size_t i = 0; i < secs.n; i++) {
            const fwsm *pids = secs.ptrs[i];
            if (parallel_push(s, pids ? (int64_t)pids->n : 0) != TW_OK)
                goto oom_secs;
        }
        int ok;
        int64_t med = median_trunc(s->parallel, s->nparallel, &ok);
        if (!ok)
            goto oom_secs;
        /* fixed: without CPU data the core count is unknown (0), and "more
         * loaders than 200 % of 0 cores" would be a finding about missing
         * data, not about the loader; the reference compares anyway. */
        int enough = (int64_t)s->nparallel > s->patience &&
                     (s->cores > 0 || s->semantics == TW_SEMANTICS_REFERENCE);
        int64_t before = s->violations;
        if (enough &&
            (double)med < (double)s->cores * (s->min_threshold / 100)) {
            s->violations++;
            s->n_low++;
        }
        if (enough &&
            (double)med > (double)s->cores * (s->max_threshold / 100)) {
            s->violations++;
            s->n_high++;
        }
        if (s->violations > before) {
            if (s->viol_first_us == 0)
                s->viol_first_us = scan->start_us;
            s->viol_last_us = scan->end_us;
        }
        if (s->pin_memory.set) {
            if (value_copy(&s->det_pin_memory, &s->pin_memory) != TW_OK)
                goto oom_secs;
            note_key(s, D_PIN_MEMORY);
        }
        if (s->num_workers.set) {
            if (value_copy(&s->det_num_workers, &s->num_workers) != TW_OK)
                goto oom_secs;
            note_key(s, D_NUM_WORKERS);
        }
        if (s->prefetch != PREFETCH_UNSET) {
            s->det_prefetch = s->prefetch;
            note_key(s, D_PREFETCH);
        }
        s->det_cores = s->cores;
        note_key(s, D_CORES);
        s->det_dataloaders = med;
        note_key(s, D_DATALOADERS);
        if (tw_countmap_count(&s->times) > 0)
            note_key(s, D_TIMES);
    }
    free_seconds(&secs);

    int met = 0;
    if (s->violations > 0) {
        s->triggered = 1;
        met = 1;
    }
    out->condition_met = met;
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;

oom_secs:
    free_seconds(&secs);
oom:
    snprintf(err, errlen, "Dataloader: out of memory");
    return TW_ERR;
}

/* ---- report ---------------------------------------------------------------
 */

static int write_times(dl_state *s, tw_json *j)
{
    const tw_host *h = s->host;
    double q[3];
    static const double levels[3] = {0.25, 0.50, 0.95};
    static const char *const names[3] = {"p25", "p50", "p95"};
    for (int i = 0; i < 3; i++)
        if (tw_countmap_quantile(&s->times, levels[i], &q[i]) != TW_OK)
            return TW_ERR;
    int64_t probs[100];
    double edges[101];
    fw_hist100_countmap(&s->times, h, 0, 0.0, probs, edges);
    h->json_object_begin(j);
    for (int i = 0; i < 3; i++) {
        h->json_key(j, names[i]);
        h->json_double(j, q[i]);
    }
    h->json_key(j, "probs");
    h->json_array_begin(j);
    for (int i = 0; i < 100; i++)
        h->json_int(j, probs[i]);
    h->json_array_end(j);
    h->json_key(j, "binedges");
    h->json_array_begin(j);
    for (int i = 0; i < 101; i++)
        h->json_double(j, edges[i]);
    h->json_array_end(j);
    h->json_object_end(j);
    return TW_OK;
}

/* The reference lists the two thresholds only. */
static const char *dl_parameters_text(void *state)
{
    return ((const dl_state *)state)->params_text;
}

static int dl_details(void *state, tw_json *j)
{
    dl_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    for (size_t i = 0; i < s->norder; i++) {
        switch (s->order[i]) {
        case D_PIN_MEMORY:
            h->json_key(j, "pin_memory");
            value_write(h, j, &s->det_pin_memory);
            break;
        case D_NUM_WORKERS:
            h->json_key(j, "num_workers");
            value_write(h, j, &s->det_num_workers);
            break;
        case D_PREFETCH:
            h->json_key(j, "prefetch");
            h->json_bool(j, s->det_prefetch == PREFETCH_TRUE);
            break;
        case D_CORES:
            h->json_key(j, "cores");
            h->json_int(j, s->det_cores);
            break;
        case D_DATALOADERS:
            h->json_key(j, "dataloaders");
            h->json_int(j, s->det_dataloaders);
            break;
        case D_TIMES:
            h->json_key(j, "dataloading_time");
            if (write_times(s, j) != TW_OK)
                return TW_ERR;
            break;
        default:
            return TW_ERR;
        }
    }
    h->json_object_end(j);
    return TW_OK;
}

/* ---- checkpoint -----------------------------------------------------------
 */

#define DL_MAGIC 0x444c3031u /* "DL01" */
/* "DL02": DL01 with `parallel` (up to ~1000 counts of pids, a few each)
 * as a varint count and zigzag varints: ~1 byte each instead of 8. */
#define DL_MAGIC_2 0x444c3032u

static void put_value(tw_ser *w, const dl_value *v)
{
    tw_ser_u8(w, (uint8_t)v->set);
    tw_ser_u8(w, (uint8_t)v->kind);
    tw_ser_str(w, v->set ? v->text : NULL);
}

static void get_value(tw_deser *d, dl_value *v)
{
    value_clear(v);
    v->set = tw_deser_u8(d) != 0;
    uint8_t kind = tw_deser_u8(d);
    v->kind = kind <= TW_ARG_JSON ? (tw_arg_kind)kind : TW_ARG_NULL;
    v->text = tw_deser_str(d);
    if (v->set && !v->text)
        tw_deser_fail(d);
}

static int dl_save(void *state, tw_buf *out)
{
    dl_state *s = state;
    tw_ser w;
    tw_ser_init(&w, s->host, out);
    tw_ser_u32(&w, DL_MAGIC_2);
    tw_ser_i64(&w, s->triggered);
    tw_ser_i64(&w, s->violations);
    tw_ser_i64(&w, s->datapoints);
    tw_ser_i64(&w, s->cores);
    tw_ser_uv(&w, s->nparallel);
    for (size_t i = 0; i < s->nparallel; i++)
        tw_ser_sv(&w, s->parallel[i]);
    tw_countmap_save(&s->times, &w);
    put_value(&w, &s->pin_memory);
    put_value(&w, &s->num_workers);
    tw_ser_u8(&w, (uint8_t)s->prefetch);
    put_value(&w, &s->det_pin_memory);
    put_value(&w, &s->det_num_workers);
    tw_ser_u8(&w, (uint8_t)s->det_prefetch);
    tw_ser_i64(&w, s->det_cores);
    tw_ser_i64(&w, s->det_dataloaders);
    tw_ser_u8(&w, (uint8_t)s->norder);
    tw_ser_bytes(&w, s->order, s->norder);
    tw_ser_i64(&w, s->n_low);
    tw_ser_i64(&w, s->n_high);
    tw_ser_i64(&w, s->viol_first_us);
    tw_ser_i64(&w, s->viol_last_us);
    return tw_ser_ok(&w) ? TW_OK : TW_ERR;
}

static int dl_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    dl_state *s = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    uint32_t magic = tw_deser_u32(&d);
    int v2 = magic == DL_MAGIC_2;
    if (magic != DL_MAGIC && !v2)
        tw_deser_fail(&d);
    s->triggered = tw_deser_i64(&d);
    s->violations = tw_deser_i64(&d);
    s->datapoints = tw_deser_i64(&d);
    s->cores = tw_deser_i64(&d);
    uint64_t n = v2 ? tw_deser_uv(&d) : tw_deser_count(&d, 8);
    if (v2 && n > d.left) /* at least a byte each */
        tw_deser_fail(&d);
    s->nparallel = 0;
    for (uint64_t i = 0; i < n && tw_deser_ok(&d); i++)
        if (parallel_push(s, v2 ? tw_deser_sv(&d) : tw_deser_i64(&d)) != TW_OK)
            tw_deser_fail(&d);
    if (tw_deser_ok(&d) && tw_countmap_restore(&s->times, &d) != TW_OK)
        tw_deser_fail(&d);
    get_value(&d, &s->pin_memory);
    get_value(&d, &s->num_workers);
    s->prefetch = tw_deser_u8(&d);
    get_value(&d, &s->det_pin_memory);
    get_value(&d, &s->det_num_workers);
    s->det_prefetch = tw_deser_u8(&d);
    s->det_cores = tw_deser_i64(&d);
    s->det_dataloaders = tw_deser_i64(&d);
    s->norder = tw_deser_u8(&d);
    if (s->norder > D_COUNT || s->prefetch > PREFETCH_UNSET ||
        s->det_prefetch > PREFETCH_UNSET)
        tw_deser_fail(&d);
    else
        tw_deser_bytes(&d, s->order, s->norder);
    for (size_t i = 0; tw_deser_ok(&d) && i < s->norder; i++)
        if (s->order[i] >= D_COUNT)
            tw_deser_fail(&d);
    /* the finding's trailer; absent in checkpoints of older builds */
    s->n_low = s->n_high = s->viol_first_us = s->viol_last_us = 0;
    if (tw_deser_ok(&d) && d.left > 0) {
        s->n_low = tw_deser_i64(&d);
        s->n_high = tw_deser_i64(&d);
        s->viol_first_us = tw_deser_i64(&d);
        s->viol_last_us = tw_deser_i64(&d);
    }
    if (!tw_deser_done(&d)) {
        s->norder = 0;
        snprintf(err, errlen,
                 "Dataloader: checkpoint is truncated, corrupt or not from "
                 "this rule");
        return TW_ERR;
    }
    return TW_OK;
}

/* The comparison is job-wide (loader processes against the job's
 * cores), so every system node is involved. */
static int dl_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                      char *err, size_t errlen)
{
    dl_state *s = state;
    (void)err, (void)errlen;
    for (size_t i = 0; i < ctx->nnodes; i++)
        tw_finding_add_name(f, ctx->nodes[i]);
    f->first_us = s->viol_first_us;
    f->last_us = s->viol_last_us;
    int low = s->n_low >= s->n_high;
    double bound = (double)s->det_cores *
                   (low ? s->min_threshold : s->max_threshold) / 100;
    f->value = (double)s->det_dataloaders;
    f->limit = bound;
    snprintf(f->unit, sizeof(f->unit), "processes");
    const char *pin = s->det_pin_memory.set && s->det_pin_memory.text
                          ? s->det_pin_memory.text
                          : "unknown";
    const char *workers = s->det_num_workers.set && s->det_num_workers.text
                              ? s->det_num_workers.text
                              : "unknown";
    if (low) {
        tw_finding_text(f->summary,
                        "Too few processes load data: a median of %lld "
                        "loader process(es) at a time for %lld CPU cores.",
                        (long long)s->det_dataloaders, (long long)s->det_cores);
        tw_finding_text(f->recommendation,
                        "Raise the DataLoader's num_workers (now %s) towards "
                        "the number of cores per GPU, set pin_memory=True "
                        "(now %s) and a prefetch_factor of 2-4, so batches "
                        "are ready before the GPU asks.",
                        workers, pin);
    } else {
        tw_finding_text(f->summary,
                        "Too many processes load data: a median of %lld "
                        "loader processes at a time for %lld CPU cores.",
                        (long long)s->det_dataloaders, (long long)s->det_cores);
        tw_finding_text(f->recommendation,
                        "Lower the DataLoader's num_workers (now %s) to at "
                        "most the cores per GPU: oversubscribed cores slow "
                        "every worker and the training process itself.",
                        workers);
    }
    tw_finding_text(f->magnitude,
                    "median %lld parallel loader process(es) vs %lld cores: "
                    "the rule wants %g-%g %% of the cores (%.1f-%.1f); "
                    "%lld scan(s) below, %lld above; num_workers %s, "
                    "pin_memory %s",
                    (long long)s->det_dataloaders, (long long)s->det_cores,
                    s->min_threshold, s->max_threshold,
                    (double)s->det_cores * s->min_threshold / 100,
                    (double)s->det_cores * s->max_threshold / 100,
                    (long long)s->n_low, (long long)s->n_high, workers, pin);
    tw_finding_text(f->parameters,
                    "min_threshold %g %%, max_threshold %g %% of cores, "
                    "patience %lld seconds with loader events",
                    s->min_threshold, s->max_threshold, (long long)s->patience);
    return TW_OK;
}

static const tw_rule_descriptor dl_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "Dataloader",
    .description = "Compares the number of parallel data-loader processes "
                   "with the CPU cores; reports loader settings and times.",
    .params = dl_params,
    .nparams = P_COUNT,
    .create = dl_create,
    .scan = dl_scan,
    .details = dl_details,
    .parameters_text = dl_parameters_text,
    .save = dl_save,
    .restore = dl_restore,
    .destroy = dl_destroy,
    .finding = dl_finding,
    .finding_help =
        "Fewer (or more) data-loader processes run at once than the rule "
        "wants for the machine's cores. Too few: raise num_workers, set "
        "pin_memory and a prefetch factor. Too many: lower num_workers to "
        "the cores per GPU, oversubscribed cores slow everything.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &dl_descriptor;
}

/* Decisions come from loader events; the core count alone judges nothing. */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_FRAMEWORK;
}
