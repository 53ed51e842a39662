/*
 * overall_framework_metrics.c - OverallFrameworkMetrics (RULES.md §3.11).
 *
 * Breaks framework time down by step phase, CPU/GPU operator, forward/
 * backward pass, generic annotated phase and Horovod operation. Never
 * triggers; Datapoints stays 0 (quirk 4, both semantics).
 *
 * This is the rule's own copy of the aggregation (§3.11 differs from the
 * shared §4 code in rules/common/fwagg.*: "others" and gpu_counts in the
 * Step rule, and a correctly paired GPU-first `ratio`), so it keeps its own
 * buffers here.
 *
 * Semantics:
 *  - differ: quirk 1, the "others" step phase. `reference`: after every
 *    step-phase event, others = (end - start) - S / gpu_counts, where start
 *    is the first step start ever, end the end of the last step event of
 *    this scan that had a step_num, S Python's left-to-right sum of all
 *    step-phase values including the previous "others", and gpu_counts the
 *    number of GPU phases (initially 1); it can be negative. `fixed`:
 *    others = max(0, (latest step end - earliest step start) - sum of the
 *    step-phase totals), over every step event with a step_num seen so far.
 *  - same: quirk 2 fix (a step-phase event without args/step_num, or
 *    before any step_num event of the scan, still adds its duration but
 *    does not update "others"), quirk 3 (events overlapping several scans
 *    are counted once per scan), quirk 4 (Datapoints 0). A zero total where
 *    the reference would divide by zero (and crash) leaves that Details key
 *    out (RULES.md §4).
 *
 * Memory (both semantics): bounded by the vocabulary, not by time:
 * O(P_cpu*O_cpu + P_gpu*O_gpu + P_step + F + B + P_gen + H) map entries
 * (~48 bytes + key bytes each) for the distinct phases P, operator names O,
 * forward/backward names F/B and Horovod names H seen.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_strmap.h"
#include "ptr_memo.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

/* Details keys in the order one scan of the reference assigns them; a key
 * is placed in the report where it first appeared (dict insertion order). */
enum {
    K_RATIO = 0,
    K_CPU,
    K_CPU_TOTAL,
    K_GPU,
    K_GPU_TOTAL,
    K_PHASE,
    K_PHASE_TIME,
    K_GENERAL,
    K_FORWARD_BACKWARD,
    K_HOROVOD,
    K_COUNT
};

static const char *const ofm_key_names[K_COUNT] = {
    "ratio",      "CPU",       "CPU_total",
    "GPU",        "GPU_total", "phase",
    "phase_time", "general",   "forward_backward",
    "horovod",
};

typedef struct ofm_state {
    const tw_host *host;
    tw_semantics semantics;

    fwsm cpu_ops;     /* phase -> ptrs[i]: fwsm* of name -> µs */
    fwsm gpu_ops;     /* same for GPU phases */
    fwsm step_phases; /* phase -> µs (without "others") */
    int have_others;
    size_t others_pos; /* number of step phases inserted before "others" */
    double others;
    fwsm forward;
    fwsm backward;
    fwsm general;
    fwsm horovod;
    int64_t gpu_counts;
    int have_start;
    int64_t start_us; /* reference: first step start; fixed: earliest */
    int have_end;
    int64_t end_us; /* fixed: latest step end seen */

    unsigned char order[K_COUNT]; /* Details keys, first-appearance order */
    size_t norder;

    tw_ptr_memo phase_class; /* this scan's phase pointers -> ofm_class */
} ofm_state;

/* ---- small helpers ------------------------------------------------------ */

static int contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               (char)(hay[i] >= 'A' && hay[i] <= 'Z' ? hay[i] + 32 : hay[i]) ==
                   needle[i])
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

static int has_arg(const tw_fw_event *e, const char *key)
{
    if (!e->args)
        return 0;
    for (uint32_t i = 0; i < e->nargs; i++)
        if (e->args[i].key && strcmp(e->args[i].key, key) == 0)
            return 1;
    return 0;
}

static void nested_free(fwsm *m)
{
    for (size_t i = 0; i < m->n; i++) {
        fwsm *child = m->ptrs[i];
        if (child) {
            fwsm_free(child);
            free(child);
        }
    }
    fwsm_free(m);
}

/* m[outer][inner] += v */
static int nested_add(fwsm *m, const char *outer, const char *inner, int64_t v)
{
    long i = fwsm_intern(m, outer);
    if (i < 0)
        return TW_ERR;
    fwsm *child = m->ptrs[i];
    if (!child) {
        child = malloc(sizeof(*child));
        if (!child)
            return TW_ERR;
        fwsm_init(child);
        m->ptrs[i] = child;
    }
    long j = fwsm_intern(child, inner);
    if (j < 0)
        return TW_ERR;
    child->vals[j] += v;
    return TW_OK;
}

static int flat_add(fwsm *m, const char *key, int64_t v)
{
    long i = fwsm_intern(m, key);
    if (i < 0)
        return TW_ERR;
    m->vals[i] += v;
    return TW_OK;
}

static int64_t flat_sum(const fwsm *m)
{
    int64_t t = 0;
    for (size_t i = 0; i < m->n; i++)
        t += m->vals[i];
    return t;
}

static int64_t nested_sum(const fwsm *child)
{
    return child ? flat_sum(child) : 0;
}

/* Python's sum() over step_phases.values() in insertion order: integers
 * add exactly until the float "others" is met, then doubles. Returns the
 * sum as a double and whether it was still an integer. */
static double step_sum(const ofm_state *s, int *is_int)
{
    int fl = 0;
    int64_t ia = 0;
    double fa = 0.0;
    for (size_t i = 0; i <= s->step_phases.n; i++) {
        if (s->have_others && i == s->others_pos) {
            if (!fl) {
                fa = (double)ia;
                fl = 1;
            }
            fa += s->others;
        }
        if (i == s->step_phases.n)
            break;
        if (fl)
            fa += (double)s->step_phases.vals[i];
        else
            ia += s->step_phases.vals[i];
    }
    if (is_int)
        *is_int = !fl;
    return fl ? fa : (double)ia;
}

/* ---- lifecycle ------------------------------------------------------------
 */

static void ofm_reset(ofm_state *s)
{
    nested_free(&s->cpu_ops);
    nested_free(&s->gpu_ops);
    fwsm_free(&s->step_phases);
    fwsm_free(&s->forward);
    fwsm_free(&s->backward);
    fwsm_free(&s->general);
    fwsm_free(&s->horovod);
    s->have_others = 0;
    s->others_pos = 0;
    s->others = 0.0;
    s->gpu_counts = 1;
    s->have_start = 0;
    s->start_us = 0;
    s->have_end = 0;
    s->end_us = 0;
    s->norder = 0;
}

static int ofm_create(const tw_host *host, const tw_params *params,
                      void **state, char *err, size_t errlen)
{
    if (params->nvalues != 0) {
        snprintf(err, errlen,
                 "OverallFrameworkMetrics takes no parameters, got %zu",
                 params->nvalues);
        return TW_ERR;
    }
    ofm_state *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "OverallFrameworkMetrics: out of memory");
        return TW_ERR;
    }
    s->host = host;
    s->semantics = params->semantics;
    s->gpu_counts = 1;
    *state = s;
    return TW_OK;
}

static void ofm_destroy(void *state)
{
    ofm_state *s = state;
    if (!s)
        return;
    ofm_reset(s);
    free(s);
}

/* ---- accumulation ------------------------------------------------------- */

static int ofm_step_event(ofm_state *s, const tw_fw_event *e, int64_t dur,
                          int *scan_have_end, int64_t *scan_end)
{
    int with_step = has_arg(e, "step_num");
    if (with_step) {
        if (s->semantics == TW_SEMANTICS_REFERENCE) {
            if (!s->have_start) {
                s->start_us = e->start_us;
                s->have_start = 1;
            }
            *scan_end = e->end_us;
            *scan_have_end = 1;
        } else {
            if (!s->have_start || e->start_us < s->start_us)
                s->start_us = e->start_us;
            if (!s->have_end || e->end_us > s->end_us)
                s->end_us = e->end_us;
            s->have_start = s->have_end = 1;
        }
    }
    if (flat_add(&s->step_phases, e->phase, dur) != TW_OK)
        return TW_ERR;

    double others;
    if (s->semantics == TW_SEMANTICS_REFERENCE) {
        /* The reference crashes here when no step_num event of this scan
         * defined `end`; skip the update instead (quirk 2). */
        if (!*scan_have_end)
            return TW_OK;
        int is_int;
        double sum = step_sum(s, &is_int);
        others =
            (double)(*scan_end - s->start_us) - sum / (double)s->gpu_counts;
    } else {
        if (!s->have_start)
            return TW_OK;
        double wall = (double)(s->end_us - s->start_us);
        double busy = (double)flat_sum(&s->step_phases);
        others = wall - busy > 0 ? wall - busy : 0.0;
    }
    if (!s->have_others) {
        s->have_others = 1;
        s->others_pos = s->step_phases.n;
    }
    s->others = others;
    return TW_OK;
}

/* Where an event's phase sends it, tested in this order. */
typedef enum ofm_class {
    C_CPU = 0,   /* "cpu" in any case */
    C_GPU,       /* "gpu" in any case */
    C_STEP,      /* "Step" */
    C_FORWARD,   /* == Forward-SubModuleInternal */
    C_BACKWARD,  /* == Backward-SubModuleInternal */
    C_GENERAL,   /* none of these, nor ":CPU"/":GPU" */
    C_DEVICE_TAG /* ":CPU"/":GPU" without the above (general skips it) */
} ofm_class;

static ofm_class phase_class(const char *phase)
{
    if (contains_ci(phase, "cpu"))
        return C_CPU;
    if (contains_ci(phase, "gpu"))
        return C_GPU;
    if (strstr(phase, "Step"))
        return C_STEP;
    if (strcmp(phase, "Forward-SubModuleInternal") == 0)
        return C_FORWARD;
    if (strcmp(phase, "Backward-SubModuleInternal") == 0)
        return C_BACKWARD;
    if (!strstr(phase, ":CPU") && !strstr(phase, ":GPU"))
        return C_GENERAL;
    return C_DEVICE_TAG;
}

/* phase_class once per phase pointer of the scan (ptr_memo.h). */
static ofm_class event_class(ofm_state *s, const char *phase)
{
    int c;
    if (tw_ptr_memo_get(&s->phase_class, phase, &c))
        return (ofm_class)c;
    c = (int)phase_class(phase);
    tw_ptr_memo_put(&s->phase_class, phase, c);
    return (ofm_class)c;
}

static int ofm_event(ofm_state *s, const tw_fw_event *e, int *scan_have_end,
                     int64_t *scan_end)
{
    const char *phase = e->phase ? e->phase : "";
    const char *name = e->name ? e->name : "";
    int64_t dur = e->end_us - e->start_us;

    switch (event_class(s, phase)) {
    case C_CPU:
        return nested_add(&s->cpu_ops, phase, name, dur);
    case C_GPU:
        if (nested_add(&s->gpu_ops, phase, name, dur) != TW_OK)
            return TW_ERR;
        s->gpu_counts = (int64_t)s->gpu_ops.n;
        return TW_OK;
    case C_STEP:
        return ofm_step_event(s, e, dur, scan_have_end, scan_end);
    case C_FORWARD:
        return flat_add(&s->forward, name, dur);
    case C_BACKWARD:
        return flat_add(&s->backward, name, dur);
    case C_GENERAL:
        if (e->source != TW_SOURCE_HOROVOD)
            return flat_add(&s->general, phase, dur);
        break;
    case C_DEVICE_TAG:
        break;
    }
    if (e->source == TW_SOURCE_HOROVOD)
        return flat_add(&s->horovod, name, dur);
    return TW_OK;
}

/* ---- derived Details ----------------------------------------------------- */

static int64_t ops_total(const fwsm *ops)
{
    int64_t t = 0;
    for (size_t i = 0; i < ops->n; i++)
        t += nested_sum(ops->ptrs[i]);
    return t;
}

static int horovod_divides_by_zero(const fwsm *h)
{
    if (flat_sum(h) != 0)
        return 0;
    for (size_t i = 0; i < h->n; i++)
        if (h->vals[i] > 0)
            return 1;
    return 0;
}

/* Would the reference write key k after this scan (without crashing)? */
static int ofm_present(const ofm_state *s, int k)
{
    switch (k) {
    case K_RATIO:
        return (s->cpu_ops.n + s->gpu_ops.n) == 0 ||
               ops_total(&s->cpu_ops) + ops_total(&s->gpu_ops) != 0;
    case K_CPU:
    case K_CPU_TOTAL:
        return s->cpu_ops.n > 0 && ops_total(&s->cpu_ops) != 0;
    case K_GPU:
    case K_GPU_TOTAL:
        return s->gpu_ops.n > 0 && ops_total(&s->gpu_ops) != 0;
    case K_PHASE:
        return s->step_phases.n == 0 || step_sum(s, NULL) != 0.0;
    case K_PHASE_TIME:
        return 1;
    case K_GENERAL:
        return s->general.n > 0 && flat_sum(&s->general) != 0;
    case K_FORWARD_BACKWARD:
        return s->forward.n > 0 && s->backward.n > 0 &&
               flat_sum(&s->forward) + flat_sum(&s->backward) != 0;
    case K_HOROVOD:
        return s->horovod.n > 0 && !horovod_divides_by_zero(&s->horovod);
    default:
        return 0;
    }
}

static void ofm_note_keys(ofm_state *s)
{
    for (int k = 0; k < K_COUNT; k++) {
        if (!ofm_present(s, k))
            continue;
        int seen = 0;
        for (size_t i = 0; i < s->norder; i++)
            if (s->order[i] == k)
                seen = 1;
        if (!seen)
            s->order[s->norder++] = (unsigned char)k;
    }
}

typedef struct share_entry {
    const char *key;
    int64_t val;
} share_entry;

/* Largest share first, then by name: an order that does not depend on
 * which batch brought a name first (a live stream groups events into
 * batches unlike the agent's files, so first-seen order differed between
 * run and eval; the sums are exact integers, so equal in both). */
static int share_cmp(const void *a, const void *b)
{
    const share_entry *x = a, *y = b;
    if (x->val != y->val)
        return x->val > y->val ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* m's entries in that order (malloc'd), or NULL when out of memory (the
 * caller then keeps first-seen order). */
static share_entry *sorted_entries(const fwsm *m)
{
    share_entry *e = m->n > 0 ? malloc(m->n * sizeof(*e)) : NULL;
    for (size_t i = 0; e != NULL && i < m->n; i++)
        e[i] = (share_entry){m->keys[i], m->vals[i]};
    if (e != NULL)
        qsort(e, m->n, sizeof(*e), share_cmp);
    return e;
}

/* filter_events(ops, 2): per operator total over all phases, keep shares
 * > 2 %, renormalise the kept shares to 100; listed by share, then name
 * (share_cmp: the same in run and eval, the kept sum too). */
static int write_ops(const tw_host *h, tw_json *j, const fwsm *ops, int totals)
{
    fwsm agg;
    fwsm_init(&agg);
    for (size_t p = 0; p < ops->n; p++) {
        const fwsm *child = ops->ptrs[p];
        for (size_t i = 0; child && i < child->n; i++)
            if (flat_add(&agg, child->keys[i], child->vals[i]) != TW_OK) {
                fwsm_free(&agg);
                return TW_ERR;
            }
    }
    share_entry *e = sorted_entries(&agg);
    double sum = (double)flat_sum(&agg);
    double kept = 0.0;
    for (size_t i = 0; i < agg.n; i++) {
        int64_t v = e != NULL ? e[i].val : agg.vals[i];
        double share = (double)v / sum * 100.0;
        if (share > 2)
            kept += share;
    }
    h->json_object_begin(j);
    for (size_t i = 0; i < agg.n; i++) {
        int64_t v = e != NULL ? e[i].val : agg.vals[i];
        double share = (double)v / sum * 100.0;
        if (!(share > 2))
            continue;
        h->json_key(j, e != NULL ? e[i].key : agg.keys[i]);
        if (totals)
            h->json_int(j, v);
        else
            h->json_double(j, share / kept * 100);
    }
    h->json_object_end(j);
    free(e);
    fwsm_free(&agg);
    return TW_OK;
}

static void write_shares(const tw_host *h, tw_json *j, const fwsm *m)
{
    double sum = (double)flat_sum(m);
    share_entry *e = sorted_entries(m);
    h->json_object_begin(j);
    for (size_t i = 0; i < m->n; i++) { /* out of memory: first seen */
        h->json_key(j, e != NULL ? e[i].key : m->keys[i]);
        h->json_double(j,
                       (double)(e != NULL ? e[i].val : m->vals[i]) / sum * 100);
    }
    h->json_object_end(j);
    free(e);
}

static int ofm_write_key(const ofm_state *s, tw_json *j, int k)
{
    const tw_host *h = s->host;
    h->json_key(j, ofm_key_names[k]);
    if (!ofm_present(s, k)) {
        /* Only reachable with negative durations: keep the key, empty. */
        h->json_object_begin(j);
        h->json_object_end(j);
        return TW_OK;
    }
    switch (k) {
    case K_RATIO: {
        /* GPU phases first, then CPU phases, each with its own total. */
        double total =
            (double)(ops_total(&s->cpu_ops) + ops_total(&s->gpu_ops));
        h->json_object_begin(j);
        for (int pass = 0; pass < 2; pass++) {
            const fwsm *ops = pass == 0 ? &s->gpu_ops : &s->cpu_ops;
            for (size_t i = 0; i < ops->n; i++) {
                h->json_key(j, ops->keys[i]);
                h->json_double(j, (double)nested_sum(ops->ptrs[i]) / total *
                                      100.0);
            }
        }
        h->json_object_end(j);
        return TW_OK;
    }
    case K_CPU:
    case K_CPU_TOTAL:
        return write_ops(h, j, &s->cpu_ops, k == K_CPU_TOTAL);
    case K_GPU:
    case K_GPU_TOTAL:
        return write_ops(h, j, &s->gpu_ops, k == K_GPU_TOTAL);
    case K_PHASE: {
        double sum = step_sum(s, NULL);
        h->json_object_begin(j);
        for (size_t i = 0; i <= s->step_phases.n; i++) {
            if (s->have_others && i == s->others_pos) {
                h->json_key(j, "others");
                h->json_double(j, s->others / sum * 100);
            }
            if (i == s->step_phases.n)
                break;
            h->json_key(j, s->step_phases.keys[i]);
            h->json_double(j, (double)s->step_phases.vals[i] / sum * 100);
        }
        h->json_object_end(j);
        return TW_OK;
    }
    case K_PHASE_TIME:
        h->json_object_begin(j);
        h->json_object_end(j);
        return TW_OK;
    case K_GENERAL:
        write_shares(h, j, &s->general);
        return TW_OK;
    case K_FORWARD_BACKWARD: {
        double f = (double)flat_sum(&s->forward);
        double b = (double)flat_sum(&s->backward);
        int64_t fb = flat_sum(&s->forward) + flat_sum(&s->backward);
        h->json_object_begin(j);
        h->json_key(j, "Forward pass");
        h->json_double(j, f / (double)fb * 100);
        h->json_key(j, "Backward pass");
        h->json_double(j, b / (double)fb * 100);
        h->json_object_end(j);
        return TW_OK;
    }
    case K_HOROVOD: {
        /* by share, then name (share_cmp), as the op lists */
        const fwsm *m = &s->horovod;
        share_entry *e = sorted_entries(m);
        double total = (double)flat_sum(m);
        int64_t kept = 0;
        for (size_t i = 0; i < m->n; i++) {
            int64_t v = e != NULL ? e[i].val : m->vals[i];
            if (v > 0 && (double)v / total > 0.02)
                kept += v;
        }
        h->json_object_begin(j);
        for (size_t i = 0; i < m->n; i++) {
            int64_t v = e != NULL ? e[i].val : m->vals[i];
            if (!(v > 0 && (double)v / total > 0.02))
                continue;
            h->json_key(j, e != NULL ? e[i].key : m->keys[i]);
            h->json_double(j, (double)v / (double)kept * 100);
        }
        h->json_object_end(j);
        free(e);
        return TW_OK;
    }
    default:
        return TW_ERR;
    }
}

/* ---- callbacks ------------------------------------------------------------
 */

static int ofm_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                    char *err, size_t errlen)
{
    ofm_state *s = state;
    int scan_have_end = 0; /* the reference's scan-local `end` */
    int64_t scan_end = 0;
    tw_ptr_memo_clear(&s->phase_class);
    for (size_t i = 0; i < scan->nevents; i++) {
        if (ofm_event(s, &scan->events[i], &scan_have_end, &scan_end) !=
            TW_OK) {
            snprintf(err, errlen, "OverallFrameworkMetrics: out of memory");
            return TW_ERR;
        }
    }
    ofm_note_keys(s);
    out->condition_met = 0;
    out->rule_triggered = 0;
    out->violations = 0;
    out->datapoints = 0;
    return TW_OK;
}

static int ofm_details(void *state, tw_json *j)
{
    ofm_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    for (size_t i = 0; i < s->norder; i++)
        if (ofm_write_key(s, j, s->order[i]) != TW_OK)
            return TW_ERR;
    h->json_object_end(j);
    return TW_OK;
}

/* ---- checkpoint --------------------------------------------------------- */

#define OFM_MAGIC 0x4f464d31u /* "OFM1" */

static void put_flat(tw_ser *w, const fwsm *m)
{
    tw_ser_u64(w, m->n);
    for (size_t i = 0; i < m->n; i++) {
        tw_ser_str(w, m->keys[i]);
        tw_ser_i64(w, m->vals[i]);
    }
}

static void put_nested(tw_ser *w, const fwsm *m)
{
    tw_ser_u64(w, m->n);
    for (size_t i = 0; i < m->n; i++) {
        tw_ser_str(w, m->keys[i]);
        const fwsm *child = m->ptrs[i];
        if (child) {
            put_flat(w, child);
        } else {
            tw_ser_u64(w, 0);
        }
    }
}

static int ofm_save(void *state, tw_buf *out)
{
    ofm_state *s = state;
    tw_ser w;
    tw_ser_init(&w, s->host, out);
    tw_ser_u64(&w, OFM_MAGIC);
    put_nested(&w, &s->cpu_ops);
    put_nested(&w, &s->gpu_ops);
    put_flat(&w, &s->step_phases);
    tw_ser_i64(&w, s->have_others);
    tw_ser_u64(&w, s->others_pos);
    tw_ser_f64(&w, s->others);
    put_flat(&w, &s->forward);
    put_flat(&w, &s->backward);
    put_flat(&w, &s->general);
    put_flat(&w, &s->horovod);
    tw_ser_i64(&w, s->gpu_counts);
    tw_ser_i64(&w, s->have_start);
    tw_ser_i64(&w, s->start_us);
    tw_ser_i64(&w, s->have_end);
    tw_ser_i64(&w, s->end_us);
    tw_ser_u64(&w, s->norder);
    tw_ser_bytes(&w, s->order, s->norder);
    return tw_ser_ok(&w) ? TW_OK : TW_ERR;
}

static int get_flat(tw_deser *r, fwsm *m)
{
    size_t n = (size_t)tw_deser_count(r, 16);
    for (size_t i = 0; i < n && tw_deser_ok(r); i++) {
        char *key = tw_deser_str(r);
        int64_t v = tw_deser_i64(r);
        if (!tw_deser_ok(r) || !key) {
            free(key);
            return TW_ERR;
        }
        long at = fwsm_intern(m, key);
        free(key);
        if (at < 0)
            return TW_ERR;
        m->vals[at] = v;
    }
    return tw_deser_ok(r) ? TW_OK : TW_ERR;
}

static int get_nested(tw_deser *r, fwsm *m)
{
    size_t n = (size_t)tw_deser_count(r, 16);
    for (size_t i = 0; i < n && tw_deser_ok(r); i++) {
        char *key = tw_deser_str(r);
        if (!tw_deser_ok(r) || !key) {
            free(key);
            return TW_ERR;
        }
        long at = fwsm_intern(m, key);
        free(key);
        if (at < 0 || m->ptrs[at])
            return TW_ERR;
        fwsm *child = malloc(sizeof(*child));
        if (!child)
            return TW_ERR;
        fwsm_init(child);
        m->ptrs[at] = child;
        if (get_flat(r, child) != TW_OK)
            return TW_ERR;
    }
    return tw_deser_ok(r) ? TW_OK : TW_ERR;
}

static int ofm_restore(void *state, const void *data, size_t len, char *err,
                       size_t errlen)
{
    ofm_state *s = state;
    ofm_reset(s);
    tw_deser r;
    tw_deser_init(&r, data, len);
    int ok = tw_deser_u64(&r) == OFM_MAGIC && tw_deser_ok(&r);
    ok = ok && get_nested(&r, &s->cpu_ops) == TW_OK;
    ok = ok && get_nested(&r, &s->gpu_ops) == TW_OK;
    ok = ok && get_flat(&r, &s->step_phases) == TW_OK;
    if (ok) {
        s->have_others = tw_deser_i64(&r) != 0;
        s->others_pos = (size_t)tw_deser_u64(&r);
        s->others = tw_deser_f64(&r);
        ok = tw_deser_ok(&r) && s->others_pos <= s->step_phases.n;
    }
    ok = ok && get_flat(&r, &s->forward) == TW_OK;
    ok = ok && get_flat(&r, &s->backward) == TW_OK;
    ok = ok && get_flat(&r, &s->general) == TW_OK;
    ok = ok && get_flat(&r, &s->horovod) == TW_OK;
    if (ok) {
        s->gpu_counts = tw_deser_i64(&r);
        s->have_start = tw_deser_i64(&r) != 0;
        s->start_us = tw_deser_i64(&r);
        s->have_end = tw_deser_i64(&r) != 0;
        s->end_us = tw_deser_i64(&r);
        s->norder = (size_t)tw_deser_u64(&r);
        ok = tw_deser_ok(&r) && s->norder <= K_COUNT && s->gpu_counts > 0;
    }
    if (ok) {
        tw_deser_bytes(&r, s->order, s->norder);
        for (size_t i = 0; i < s->norder; i++)
            if (s->order[i] >= K_COUNT)
                ok = 0;
        ok = ok && tw_deser_done(&r);
    }
    if (!ok) {
        ofm_reset(s);
        snprintf(err, errlen,
                 "OverallFrameworkMetrics: checkpoint is truncated, corrupt or "
                 "not from this rule");
        return TW_ERR;
    }
    return TW_OK;
}

static const tw_rule_descriptor ofm_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "OverallFrameworkMetrics",
    .description = "Breaks framework time down by step phase, CPU/GPU "
                   "operator, forward/backward pass, annotated phase and "
                   "Horovod operation; never triggers.",
    .params = NULL,
    .nparams = 0,
    .create = ofm_create,
    .scan = ofm_scan,
    .details = ofm_details,
    .save = ofm_save,
    .restore = ofm_restore,
    .destroy = ofm_destroy,
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &ofm_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_FRAMEWORK;
}
