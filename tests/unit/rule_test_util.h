/*
 * rule_test_util.h - helpers for rule unit tests (cmocka): build series,
 * samples, events and scans by hand, load a rule from the registry with
 * parameters, run scans (feeding the aggregator first, as the job does),
 * and read the report back as jansson JSON or text.
 *
 * Typical use:
 *
 *     rt_env *e = rt_env_new();
 *     const char *kv[] = {"window", "4", "patience", "3", NULL};
 *     assert_int_equal(rt_create(e, "LowGPUUtilization",
 *                                TW_SEMANTICS_REFERENCE, kv), TW_OK);
 *     rt_job job; rt_job_init(&job);
 *     uint32_t g0 = rt_job_series(&job, "algo-1", "gpu", "gpu0",
 *                                 "GPUUtilization");
 *     tw_sample s[] = {rt_sample(100.0, 5, g0)};
 *     tw_scan sc = rt_job_scan(&job, 0, 100000000, 160000000, s, 1, NULL, 0);
 *     const tw_scan_result *r = rt_run(e, &sc);
 *     json_t *rep = rt_report(e);   (caller json_decref()s)
 *     rt_env_free(e);
 *
 * Ownership: rt_env owns its registry, aggregator, host context, rule and
 * JSON writer. rt_job owns nothing: node/type/name/dimension strings must
 * outlive it (string literals in tests). All helpers abort the test (via
 * cmocka's assertions) on allocation failure.
 */
#ifndef TW_RULE_TEST_UTIL_H
#define TW_RULE_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "json_writer.h"
#include "plugin_host.h"
#include "trainwatch/plugin.h"
#include "windows.h"

/* ---- numbers ---------------------------------------------------------- */

/* Bit-exact double equality (distinguishes 0.0/-0.0, equal NaNs match). */
static inline int rt_bits_eq(double a, double b)
{
    return memcmp(&a, &b, sizeof(a)) == 0;
}

#define rt_assert_bits(got, want)                                              \
    do {                                                                       \
        double rt_g_ = (got), rt_w_ = (want);                                  \
        if (!rt_bits_eq(rt_g_, rt_w_))                                         \
            fail_msg("%s = %.17g, want %.17g", #got, rt_g_, rt_w_);            \
    } while (0)

/* ---- a job's series table and nodes ------------------------------------ */

#define RT_MAX_SERIES 256
#define RT_MAX_NODES 32

typedef struct rt_job {
    tw_series series[RT_MAX_SERIES];
    size_t nseries;
    const char *nodes[RT_MAX_NODES];
    size_t nnodes;
} rt_job;

static inline void rt_job_init(rt_job *j)
{
    memset(j, 0, sizeof(*j));
}

static inline tw_metric rt_metric_of(const char *name, const char *dim)
{
    if (strcmp(dim, "CPUUtilization") == 0)
        return TW_METRIC_CPU_UTIL;
    if (strcmp(dim, "I/OWaitPercentage") == 0)
        return TW_METRIC_CPU_IOWAIT;
    if (strcmp(dim, "GPUUtilization") == 0)
        return TW_METRIC_GPU_UTIL;
    if (strcmp(dim, "GPUMemoryUtilization") == 0)
        return TW_METRIC_GPU_MEM;
    if (name != NULL && strcmp(name, "MemoryUsedPercent") == 0)
        return TW_METRIC_MEM_USED;
    if (strcmp(dim, "Algorithm") == 0)
        return TW_METRIC_NET_ALGORITHM;
    return TW_METRIC_OTHER;
}

static inline uint32_t rt_job_node(rt_job *j, const char *node)
{
    for (size_t i = 0; i < j->nnodes; i++)
        if (strcmp(j->nodes[i], node) == 0)
            return (uint32_t)i;
    assert_true(j->nnodes < RT_MAX_NODES);
    j->nodes[j->nnodes] = node;
    return (uint32_t)j->nnodes++;
}

/* The id of series (node, type, name, dimension), added on first use. */
static inline uint32_t rt_job_series(rt_job *j, const char *node,
                                     const char *type, const char *name,
                                     const char *dim)
{
    uint32_t n = rt_job_node(j, node);
    for (size_t i = 0; i < j->nseries; i++) {
        const tw_series *s = &j->series[i];
        if (s->node == n && strcmp(s->type, type) == 0 &&
            strcmp(s->dimension, dim) == 0 &&
            ((s->name == NULL && name == NULL) ||
             (s->name != NULL && name != NULL && strcmp(s->name, name) == 0)))
            return (uint32_t)i;
    }
    assert_true(j->nseries < RT_MAX_SERIES);
    tw_series *s = &j->series[j->nseries];
    s->id = (uint32_t)j->nseries;
    s->node = n;
    s->metric = rt_metric_of(name, dim);
    s->type = type;
    s->name = name;
    s->dimension = dim;
    return (uint32_t)j->nseries++;
}

static inline tw_sample rt_sample(double ts, double value, uint32_t series)
{
    tw_sample s;
    memset(&s, 0, sizeof(s));
    s.ts = ts;
    s.value = value;
    s.series = series;
    return s;
}

/* An X event; mode is parsed from "Step:ModeKeys.<MODE>" names. */
static inline tw_fw_event rt_event(const char *name, const char *phase,
                                   const char *node, int64_t start_us,
                                   int64_t end_us, tw_source source)
{
    tw_fw_event e;
    memset(&e, 0, sizeof(e));
    e.name = name;
    e.phase = phase;
    e.node = node;
    e.start_us = start_us;
    e.end_us = end_us;
    e.source = source;
    e.mode = TW_MODE_NONE;
    if (name != NULL && strncmp(name, "Step:ModeKeys.", 14) == 0) {
        const char *m = name + 14;
        e.mode = strcmp(m, "TRAIN") == 0     ? TW_MODE_TRAIN
                 : strcmp(m, "EVAL") == 0    ? TW_MODE_EVAL
                 : strcmp(m, "PREDICT") == 0 ? TW_MODE_PREDICT
                 : strcmp(m, "GLOBAL") == 0  ? TW_MODE_GLOBAL
                                             : TW_MODE_NONE;
    }
    return e;
}

/* Scan k over [start_us, end_us] with the job's series/nodes so far. The
 * rule clock is start_us; F is taken as start_us - k * (end - start). */
static inline tw_scan rt_job_scan(const rt_job *j, uint64_t k, int64_t start_us,
                                  int64_t end_us, const tw_sample *samples,
                                  size_t nsamples, const tw_fw_event *events,
                                  size_t nevents)
{
    tw_scan s;
    memset(&s, 0, sizeof(s));
    s.index = k;
    s.start_us = start_us;
    s.end_us = end_us;
    s.first_timestamp_us = start_us - (int64_t)k * (end_us - start_us);
    s.rule_clock_us = start_us;
    s.series = j->series;
    s.nseries = j->nseries;
    s.nodes = j->nodes;
    s.nnodes = j->nnodes;
    s.samples = samples;
    s.nsamples = nsamples;
    s.events = events;
    s.nevents = nevents;
    return s;
}

/* ---- a rule instance with its host -------------------------------------- */

typedef struct rt_env {
    tw_registry *reg;
    tw_windows *win;
    tw_host_ctx *hctx;
    tw_rule *rule;
    tw_json *json;
    char err[512];
} rt_env;

static inline rt_env *rt_env_new(void)
{
    rt_env *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    e->reg = tw_registry_new();
    assert_non_null(e->reg);
    e->win = tw_windows_new();
    assert_non_null(e->win);
    e->hctx = tw_host_ctx_new(e->reg, e->win, "test-job");
    assert_non_null(e->hctx);
    e->json = tw_json_new();
    assert_non_null(e->json);
    return e;
}

static inline void rt_env_free(rt_env *e)
{
    if (e == NULL)
        return;
    tw_rule_destroy(e->rule);
    tw_json_free(e->json);
    tw_host_ctx_free(e->hctx);
    tw_windows_free(e->win);
    tw_registry_free(e->reg);
    free(e);
}

static inline size_t rt_kv_count(const char *const *kv)
{
    size_t n = 0;
    while (kv != NULL && kv[2 * n] != NULL)
        n++;
    return n;
}

/* Creates the rule `name` with `kv` = {"key", "value", ..., NULL} (NULL =
 * defaults). Returns TW_OK or TW_ERR with the reason in e->err. */
static inline int rt_create(rt_env *e, const char *name, tw_semantics sem,
                            const char *const *kv)
{
    const tw_plugin *p = NULL;
    e->err[0] = '\0';
    if (tw_registry_find(e->reg, name, &p, e->err, sizeof(e->err)) != TW_OK)
        return TW_ERR;
    size_t n = rt_kv_count(kv);
    const char *keys[32], *vals[32];
    assert_true(n <= 32);
    for (size_t i = 0; i < n; i++) {
        keys[i] = kv[2 * i];
        vals[i] = kv[2 * i + 1];
    }
    if (e->rule != NULL) {
        tw_rule_destroy(e->rule);
        e->rule = NULL;
    }
    return tw_rule_create(p, NULL, keys, vals, n, sem, e->hctx, &e->rule,
                          e->err, sizeof(e->err));
}

/* Feeds the aggregator, runs the scan and returns the scan result (owned
 * by the rule). Fails the test if the rule reports an error. */
static inline const tw_scan_result *rt_run(rt_env *e, tw_scan *scan)
{
    scan->windows = (const struct tw_windows *)e->win;
    assert_int_equal(tw_windows_feed_scan(e->win, scan), TW_OK);
    if (tw_rule_scan(e->rule, scan) != TW_OK)
        fail_msg("scan failed: %s", tw_rule_error(e->rule));
    return tw_rule_last_result(e->rule);
}

/* Only feeds the aggregator (e.g. to rebuild the job-level windows of a
 * restored instance, which the job checkpoints apart from the rule). */
static inline void rt_feed_only(rt_env *e, tw_scan *scan)
{
    scan->windows = (const struct tw_windows *)e->win;
    assert_int_equal(tw_windows_feed_scan(e->win, scan), TW_OK);
}

/* The report text (owned by e, valid until the next report). */
static inline const char *rt_report_text(rt_env *e)
{
    tw_json_reset(e->json);
    assert_int_equal(tw_rule_report(e->rule, e->json), TW_OK);
    assert_false(tw_json_failed(e->json));
    return tw_json_str(e->json);
}

/* The report parsed by jansson (caller json_decref()s). jansson rejects
 * the NaN/Infinity tokens Python writes: check such reports with
 * rt_report_text() and substrings instead. */
static inline json_t *rt_report(rt_env *e)
{
    const char *text = rt_report_text(e);
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (root == NULL)
        fail_msg("report is not JSON (%s): %s", jerr.text, text);
    return root;
}

/* obj["a"]["b"]... (NULL-terminated path); NULL when missing. */
static inline json_t *rt_jget(json_t *obj, ...)
{
    va_list ap;
    va_start(ap, obj);
    const char *k;
    while (obj != NULL && (k = va_arg(ap, const char *)) != NULL)
        obj = json_object_get(obj, k);
    va_end(ap);
    return obj;
}

/* Number at a path (fails the test when missing or not a number). */
#define rt_jnum(obj, ...)                                                      \
    rt_jnum_(rt_jget((obj), __VA_ARGS__, NULL), #__VA_ARGS__)
static inline double rt_jnum_(json_t *v, const char *path)
{
    if (v == NULL || !json_is_number(v))
        fail_msg("no number at %s", path);
    return json_number_value(v);
}

/* Keys of an object in document order joined with ',' into buf. */
static inline const char *rt_jkeys(json_t *obj, char *buf, size_t len)
{
    buf[0] = '\0';
    const char *k;
    json_t *v;
    size_t used = 0;
    json_object_foreach(obj, k, v)
    {
        (void)v;
        int w = snprintf(buf + used, len - used, "%s%s", used ? "," : "", k);
        if (w < 0 || (size_t)w >= len - used)
            break;
        used += (size_t)w;
    }
    return buf;
}

/* Save the rule, create a fresh instance of the same rule with the same
 * parameters and semantics in a fresh env, restore into it, and return the
 * new env (the caller frees both). */
static inline rt_env *rt_clone_via_checkpoint(rt_env *e, const char *name,
                                              tw_semantics sem,
                                              const char *const *kv)
{
    tw_buf *b = tw_buf_new();
    assert_non_null(b);
    assert_int_equal(tw_rule_save(e->rule, b), TW_OK);
    rt_env *c = rt_env_new();
    assert_int_equal(rt_create(c, name, sem, kv), TW_OK);
    char err[256];
    if (tw_rule_restore(c->rule, tw_buf_data(b), tw_buf_len(b), err,
                        sizeof(err)) != TW_OK)
        fail_msg("restore failed: %s", err);
    tw_buf_free(b);
    return c;
}

#endif /* TW_RULE_TEST_UTIL_H */
