/*
 * trainwatch/plugin.h - the public C ABI between the trainwatch engine and
 * rule plugins.
 *
 * A rule plugin is a shared object that exports one entry function (by
 * default named TW_PLUGIN_ENTRY, or the name configured as
 * `rule_to_invoke`) returning a constant descriptor. The host dlopen()s the
 * object, calls the entry, checks `abi_version`, validates the configured
 * parameters against `params`, then drives the rule:
 *
 *     create() once per (job, rule)
 *     scan()   once per evaluation interval, in order k = 0, 1, 2, ...
 *     report() whenever the host wants the rule's report JSON
 *     save() / restore() for checkpoints
 *     destroy()
 *
 * All callbacks of one rule instance are called from one thread at a time.
 * Nothing here may be retained by the plugin beyond the call that received
 * it unless the comment says so.
 *
 * Built-in rules are built only against this header; so can yours (see
 * docs/plugins.md and plugins/example/; docs/rules.md for the built-ins).
 */
#ifndef TRAINWATCH_PLUGIN_H
#define TRAINWATCH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change to a struct or callback below. */
#define TW_PLUGIN_ABI_VERSION 1u

/* Default entry symbol: `const tw_rule_descriptor *trainwatch_rule(void);` */
#define TW_PLUGIN_ENTRY "trainwatch_rule"

/* Visibility helper for the entry function. */
#if defined(__GNUC__)
#define TW_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TW_PLUGIN_EXPORT
#endif

/* Status convention of every callback and host function that can fail. */
enum { TW_OK = 0, TW_ERR = -1 };

/* `fixed` corrects the reference's quirks (default); `reference` reproduces
 * the reference implementation's numbers on the same stream (docs/rules.md). */
typedef enum tw_semantics {
    TW_SEMANTICS_FIXED = 0,
    TW_SEMANTICS_REFERENCE = 1
} tw_semantics;

/* ------------------------------------------------------------------------
 * Events as rules see them
 * --------------------------------------------------------------------- */

/* What a system series measures. The host classifies each series once when
 * it first appears; the raw strings stay available in tw_series. */
typedef enum tw_metric {
    TW_METRIC_OTHER = 0,
    TW_METRIC_CPU_UTIL,      /* Dimension "CPUUtilization" (per core)      */
    TW_METRIC_CPU_IOWAIT,    /* Dimension "I/OWaitPercentage" (per core)   */
    TW_METRIC_GPU_UTIL,      /* Dimension "GPUUtilization"                 */
    TW_METRIC_GPU_MEM,       /* Dimension "GPUMemoryUtilization"           */
    TW_METRIC_MEM_USED,      /* Name "MemoryUsedPercent"                   */
    TW_METRIC_NET_ALGORITHM, /* Dimension "Algorithm" (network bytes/s)    */
    TW_METRIC_COUNT
} tw_metric;

/* One system series of a job: (node, type, name, dimension). Series ids are
 * dense, assigned in order of first appearance, and stable for the job's
 * lifetime (and across checkpoints). Strings are owned by the host and live
 * as long as the job. */
typedef struct tw_series {
    uint32_t id;           /* index into tw_scan.series                  */
    uint32_t node;         /* index into tw_scan.nodes                   */
    tw_metric metric;
    const char *type;      /* "cpu", "gpu", "memory", "i/o", "network"   */
    const char *name;      /* "cpu0", "gpu1", ...; NULL when JSON null   */
    const char *dimension; /* may be ""                                  */
} tw_series;

/* One system sample. `ts` is seconds since the epoch exactly as the agent
 * wrote it (a double, ~100 ns resolution): the reference's 20 ms snapshot
 * grouping and its report keys depend on that exact double. */
typedef struct tw_sample {
    double ts;
    double value;
    uint32_t series; /* tw_series.id */
    uint32_t flags;  /* TW_SAMPLE_* */
} tw_sample;

/* The value was written as a JSON integer (no decimal point). */
#define TW_SAMPLE_INTEGRAL 1u
/* The sample lies exactly on this scan's start and was also delivered to
 * the previous scan (both scan ends are inclusive, docs/rules.md). */
#define TW_SAMPLE_REPEAT 2u

/* Source type of a framework event (the kind of trace file it came from),
 * in the reference's delivery order. */
typedef enum tw_source {
    TW_SOURCE_PYTHONTIMELINE = 0, /* "PythontimelineMetrics"          */
    TW_SOURCE_MODEL_TIMELINE = 1, /* "DetailedframeworkMetrics"       */
    TW_SOURCE_TF_PROFILER = 2,    /* "TFProfilerMetrics"              */
    TW_SOURCE_HOROVOD = 3,        /* "" (the rules test for empty)    */
    TW_SOURCE_SMDATAPARALLEL = 4, /* "SMDataParallelMetrics"          */
    TW_SOURCE_COUNT
} tw_source;

typedef enum tw_mode {
    TW_MODE_NONE = 0, /* not a step event */
    TW_MODE_TRAIN,
    TW_MODE_EVAL,
    TW_MODE_PREDICT,
    TW_MODE_GLOBAL
} tw_mode;

typedef enum tw_arg_kind {
    TW_ARG_STRING = 0, /* value is the decoded string            */
    TW_ARG_NUMBER,     /* value is the JSON number's text         */
    TW_ARG_BOOL,       /* value is "true" or "false"              */
    TW_ARG_NULL,       /* value is "null"                         */
    TW_ARG_JSON        /* object/array: value is its JSON text    */
} tw_arg_kind;

typedef struct tw_arg {
    const char *key;
    const char *value;
    tw_arg_kind kind;
} tw_arg;

/* One framework event (a Chrome-trace X event, or a B/E pair). Times are
 * microseconds since the epoch. Strings are owned by the host and valid for
 * the duration of the scan() call. */
/* The event overlaps the previous scan too and was delivered to it. */
#define TW_EVENT_REPEAT 1u

typedef struct tw_fw_event {
    const char *name;
    const char *phase;   /* phase bound to the pid ("Unknown" if none)  */
    const char *node;    /* framework node id, e.g. "algo-1-0"          */
    int64_t start_us;
    int64_t end_us;
    int64_t pid;
    int64_t tid;
    tw_source source;
    tw_mode mode;        /* parsed from "Step:ModeKeys.<MODE>" names    */
    const tw_arg *args;  /* NULL when the event had no args             */
    uint32_t nargs;
    uint32_t flags;      /* TW_EVENT_*                                  */
} tw_fw_event;

/* ------------------------------------------------------------------------
 * One evaluation interval
 * --------------------------------------------------------------------- */

struct tw_windows; /* the host's windowed aggregator, opaque to plugins */

/* Scan k covers [start_us, end_us], both inclusive (docs/rules.md). The
 * samples and events are those the reference would deliver for that
 * interval, in the reference's order (docs/rules.md). Everything a scan
 * points to is owned by the host and valid only during scan(). */
typedef struct tw_scan {
    uint64_t index;             /* k                                       */
    int64_t start_us;
    int64_t end_us;
    int64_t first_timestamp_us; /* F: the job's first timestamp            */
    int64_t rule_clock_us;      /* the rule's own clock ("last_timestamp"):
                                   start_us normally; F for sub-rules run by
                                   ProfilerReport in reference semantics   */
    const tw_series *series;    /* every series of the job so far          */
    size_t nseries;
    const char *const *nodes;   /* system node ids, first-seen order       */
    size_t nnodes;
    const tw_sample *samples;
    size_t nsamples;
    const tw_fw_event *events;
    size_t nevents;
    const struct tw_windows *windows; /* read through tw_host window_*()  */
    int final;                  /* 1 on the job's last scan                */
} tw_scan;

/* What a scan() reports back. The three counters are the report's
 * RuleTriggered, Violations and Datapoints after this scan. */
typedef struct tw_scan_result {
    int condition_met; /* the reference's "returned true" for this scan */
    int64_t rule_triggered;
    int64_t violations;
    int64_t datapoints;
} tw_scan_result;

/* ------------------------------------------------------------------------
 * Parameters
 * --------------------------------------------------------------------- */

typedef enum tw_param_type {
    TW_PARAM_INT = 0,
    TW_PARAM_DOUBLE,
    TW_PARAM_STRING,
    TW_PARAM_BOOL
} tw_param_type;

/* A parameter the rule accepts. Numbers are checked against [min, max]
 * (inclusive) at load time. `default_value` is the literal as a user would
 * write it ("70", "0.2", "true"); NULL means None. */
typedef struct tw_param_spec {
    const char *name;
    tw_param_type type;
    const char *default_value;
    double min;
    double max;
    const char *help;
} tw_param_spec;

/* A validated value. `text` is the value printed like Python's str()
 * ("70", "0.2", "None"): what RuleParameters strings need. */
typedef struct tw_param_value {
    tw_param_type type;
    int is_none; /* the parameter is None (no default, not configured) */
    int64_t i;   /* TW_PARAM_INT, TW_PARAM_BOOL                         */
    double d;    /* TW_PARAM_DOUBLE (and TW_PARAM_INT, converted)       */
    const char *s;
    const char *text;
} tw_param_value;

/* Values in the order of tw_rule_descriptor.params. */
typedef struct tw_params {
    const tw_param_value *values;
    size_t nvalues;
    tw_semantics semantics;
} tw_params;

/* ------------------------------------------------------------------------
 * Services the host lends to plugins
 * --------------------------------------------------------------------- */

typedef struct tw_json tw_json; /* a JSON writer, owned by the host     */
typedef struct tw_buf tw_buf;   /* a growable byte buffer, host-owned   */
typedef struct tw_subrule tw_subrule; /* a rule run by another rule     */

/* Online statistics of one series over everything the host saw. */
typedef struct tw_series_stats {
    uint64_t count;
    double mean; /* Welford */
    double std;  /* population (ddof 0), Welford */
    double min;
    double max;
} tw_series_stats;

typedef enum tw_log_level {
    TW_LOG_DEBUG = 0,
    TW_LOG_INFO,
    TW_LOG_WARN,
    TW_LOG_ERROR
} tw_log_level;

/* Handed to create(); valid until destroy(). Plugins may keep the pointer. */
typedef struct tw_host {
    uint32_t abi_version;
    void *ctx; /* pass back as the first argument where asked */

    void (*log)(void *ctx, tw_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;

    /* --- windowed aggregator ------------------------------------------
     * During create() only: ask the host to keep the newest `n` values of
     * every series of `metric` (the host keeps the largest n asked for).
     * window_read() copies the newest min(n, kept) values of a series,
     * oldest first, into out[] and returns how many it copied. */
    int (*request_window)(void *ctx, tw_metric metric, uint32_t n);
    size_t (*window_read)(const struct tw_windows *w, uint32_t series,
                          double *out, size_t n);
    int (*series_stats)(const struct tw_windows *w, uint32_t series,
                        tw_series_stats *out);

    /* --- numerics that reproduce numpy bit for bit (docs/rules.md) ---- */
    /* Q(v, q) of an ascending array; n must be > 0. */
    double (*quantile_sorted)(const double *sorted, size_t n, double q);
    void (*sort_doubles)(double *v, size_t n);
    double (*sum_pairwise)(const double *v, size_t n);
    double (*mean)(const double *v, size_t n);
    double (*std)(const double *v, size_t n); /* ddof 0, two-pass */
    /* H100: 100 counts and 101 edges. */
    void (*hist100)(const double *v, size_t n, int64_t probs[100],
                    double edges[101]);
    /* numpy's round(x, 2): rint(x * 100) / 100. */
    double (*round2)(double x);

    /* --- JSON writer: commas and nesting are handled by the writer;
     * doubles are printed as Python's json.dump does (repr, NaN,
     * Infinity, integral floats as "5.0"). ------------------------------ */
    void (*json_object_begin)(tw_json *j);
    void (*json_object_end)(tw_json *j);
    void (*json_array_begin)(tw_json *j);
    void (*json_array_end)(tw_json *j);
    void (*json_key)(tw_json *j, const char *key);
    void (*json_key_double)(tw_json *j, double key); /* "1596668240.3562295" */
    void (*json_string)(tw_json *j, const char *s);
    void (*json_double)(tw_json *j, double v);
    void (*json_int)(tw_json *j, int64_t v);
    void (*json_bool)(tw_json *j, int v);
    void (*json_null)(tw_json *j);
    void (*json_raw)(tw_json *j, const char *text); /* pre-encoded value */

    /* --- checkpoint buffers --------------------------------------------- */
    int (*buf_write)(tw_buf *b, const void *data, size_t len);

    /* --- rules that run other rules (ProfilerReport) -------------------
     * subrule_create() instantiates a built-in or custom rule by name with
     * textual parameter overrides (`keys[i]` = `values[i]`), validated as a
     * configured rule's would be. The returned handle is owned by the
     * caller and freed with subrule_destroy(). */
    tw_subrule *(*subrule_create)(void *ctx, const char *rule_name,
                                  const char *const *keys,
                                  const char *const *values, size_t n,
                                  tw_semantics semantics, char *err,
                                  size_t errlen);
    int (*subrule_scan)(tw_subrule *r, const tw_scan *scan,
                        tw_scan_result *out, char *err, size_t errlen);
    int (*subrule_report)(tw_subrule *r, tw_json *out);
    int (*subrule_save)(tw_subrule *r, tw_buf *out);
    int (*subrule_restore)(tw_subrule *r, const void *data, size_t len,
                           char *err, size_t errlen);
    const char *(*subrule_name)(const tw_subrule *r);
    void (*subrule_destroy)(tw_subrule *r);

    /* Bytes in a checkpoint buffer so far. A rule that saves sub-rules
     * (subrule_save appends an unframed blob) reads it before and after
     * to frame each blob. Appended last: plugins that do not use it are
     * unaffected. */
    size_t (*buf_len)(const tw_buf *b);
} tw_host;

/* ------------------------------------------------------------------------
 * The descriptor a plugin exports
 * --------------------------------------------------------------------- */

typedef struct tw_rule_descriptor {
    uint32_t abi_version; /* must be TW_PLUGIN_ABI_VERSION */
    const char *name;     /* "LowGPUUtilization"           */
    const char *description;
    const tw_param_spec *params;
    size_t nparams;

    /* Create an instance. `host` and `params` stay valid until destroy().
     * On success store the instance in *state and return TW_OK; on failure
     * write a sentence to err and return TW_ERR. */
    int (*create)(const tw_host *host, const tw_params *params, void **state,
                  char *err, size_t errlen);

    /* Evaluate one interval. On TW_ERR the host marks the rule `Error`,
     * logs err, and stops calling scan() for it; other rules go on. */
    int (*scan)(void *state, const tw_scan *scan, tw_scan_result *out,
                char *err, size_t errlen);

    /* Write the whole report object:
     * {"RuleTriggered":..,"Violations":..,"Details":{..},"Datapoints":..,
     *  "RuleParameters":".."} (docs/plugins.md, "The report"). */
    int (*report)(void *state, tw_json *out);

    /* Serialize every bit of state needed to continue exactly; restore()
     * is called on a freshly created instance with the same parameters. */
    int (*save)(void *state, tw_buf *out);
    int (*restore)(void *state, const void *data, size_t len, char *err,
                   size_t errlen);

    void (*destroy)(void *state);
} tw_rule_descriptor;

typedef const tw_rule_descriptor *(*tw_rule_entry_fn)(void);

/* ------------------------------------------------------------------------
 * Optional: which input the rule reads
 * --------------------------------------------------------------------- */

/* A plugin may also export `uint32_t <entry>_inputs(void)` (for the default
 * entry: `trainwatch_rule_inputs`) returning the TW_INPUT_* bits of what its
 * decisions are made from. The host uses it only to tell whether the
 * rule's input ever arrived: a rule never handed a scan with a sample (or
 * event) of a kind it reads has had no data, and says so in results and
 * alerts instead of passing for healthy. Without the symbol (or with 0)
 * both kinds count. Not part of the descriptor, so the ABI version and
 * older plugins are unaffected. */
#define TW_INPUT_SYSTEM 1u    /* system samples (tw_scan.samples)  */
#define TW_INPUT_FRAMEWORK 2u /* framework events (tw_scan.events) */
#define TW_PLUGIN_INPUTS_SUFFIX "_inputs"
typedef uint32_t (*tw_rule_inputs_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_PLUGIN_H */
