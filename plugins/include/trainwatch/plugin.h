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
 *     create()  once per (job, rule)
 *     scan()    once per evaluation interval, in order k = 0, 1, 2, ...
 *     details() (ABI 2) whenever the host writes the rule's report: the
 *               host writes its envelope (RuleTriggered, Violations,
 *               Datapoints, RuleParameters) and asks the rule for Details
 *     report()  (ABI 1 only) the same, the whole report written by the rule
 *     finding() (ABI 2) whenever the host shows a problem to a person:
 *               after a scan whose condition was met, at the job's end
 *     save() / restore() for checkpoints
 *     destroy()
 *
 * All callbacks of one rule instance are called from one thread at a time.
 * Nothing here may be retained by the plugin beyond the call that received
 * it unless the comment says so.
 *
 * Built-in rules are built only against this header; so can yours (see
 * plugins/example/ and the guide, docs/plugins.md, which says what scans
 * deliver and what the counters mean; docs/rules.md for the built-in
 * rules and the reference semantics they reproduce).
 */
#ifndef TRAINWATCH_PLUGIN_H
#define TRAINWATCH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change to a struct or callback below.
 *
 * Version 2 (this header) appends to tw_rule_descriptor the `flags` word,
 * the `finding` callback, `finding_help`, `details` (which replaces
 * `report`: the host writes the report's envelope from the counters scan()
 * returned) and `parameters_text`, and adds tw_host.size. Every ABI 1
 * member keeps its offset, so the host still loads ABI 1 plugins: it reads the
 * version 2 members only from descriptors that say version 2, calls an
 * ABI 1 rule's own report(), and gives
 * an ABI 1 rule a generic finding built from its counters (violations,
 * datapoints, the scans whose condition was met). Refusing them would
 * break every custom rule in the field for a text they can gain by a
 * rebuild; they are held to the version 2 checkpoint rule below all the
 * same (an ABI 1 rule cannot declare itself stateless, so one without
 * save/restore is refused under a persistent store). */
#define TW_PLUGIN_ABI_VERSION 2u
/* The oldest descriptor version the host still loads. */
#define TW_PLUGIN_ABI_MIN_VERSION 1u

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
    uint32_t id;   /* index into tw_scan.series                  */
    uint32_t node; /* index into tw_scan.nodes                   */
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
    const char *phase; /* phase bound to the pid ("Unknown" if none)  */
    const char *node;  /* framework node id, e.g. "algo-1-0"          */
    int64_t start_us;
    int64_t end_us;
    int64_t pid;
    int64_t tid;
    tw_source source;
    tw_mode mode;       /* parsed from "Step:ModeKeys.<MODE>" names    */
    const tw_arg *args; /* NULL when the event had no args             */
    uint32_t nargs;
    uint32_t flags; /* TW_EVENT_*                                  */
} tw_fw_event;

/* One reduction of a tensor (schemas/metrics.fbs TensorReduction): `op` is
 * "value", "abs_mean", "nan_count", "inf_count", "l2", "update_l2",
 * "variance", "dead_fraction", "zero_fraction", "p5", "p95", or one of the
 * reference's min/max/mean/std/variance/sum/prod/l1/l2 and abs_ forms. */
typedef struct tw_tensor_reduction {
    const char *op;
    double value;
} tw_tensor_reduction;

/* One tensor of the debugging collections at one saved step (or the hook's
 * per-step heartbeat, named "heartbeat", with no reductions). Strings and
 * arrays are owned by the host and valid for the duration of scan(). */
typedef struct tw_tensor {
    const char *node; /* the worker that saved it                   */
    const char *name; /* e.g. "gradient/Net_fc1.weight"             */
    const char *const *collections;
    uint32_t ncollections;
    tw_mode mode;
    int64_t step;      /* global step                               */
    int64_t mode_step; /* step within `mode`                        */
    int64_t wall_us;   /* when the hook recorded it                 */
    int64_t prev_step; /* update_l2's earlier step; -1 = none       */
    const char *dtype; /* "" when unknown                           */
    int64_t numel;
    const int64_t *shape;
    uint32_t nshape;
    const tw_tensor_reduction *reductions;
    uint32_t nreductions;
    const double *raw; /* whole tensor, only for small named ones   */
    uint32_t nraw;
} tw_tensor;

/* ------------------------------------------------------------------------
 * One evaluation interval
 * --------------------------------------------------------------------- */

struct tw_windows; /* the host's windowed aggregator, opaque to plugins */

/* Scan k covers [start_us, end_us], both inclusive (docs/rules.md). The
 * samples and events are those the reference would deliver for that
 * interval, in the reference's order (docs/rules.md). Everything a scan
 * points to is owned by the host and valid only during scan(). */
typedef struct tw_scan {
    uint64_t index; /* k                                       */
    int64_t start_us;
    int64_t end_us;
    int64_t first_timestamp_us; /* F: the job's first timestamp            */
    int64_t rule_clock_us;      /* the rule's own clock ("last_timestamp"):
                                   start_us normally; F for sub-rules run by
                                   ProfilerReport in reference semantics   */
    const tw_series *series;    /* every series of the job so far          */
    size_t nseries;
    const char *const *nodes; /* system node ids, first-seen order       */
    size_t nnodes;
    const tw_sample *samples;
    size_t nsamples;
    const tw_fw_event *events;
    size_t nevents;
    const struct tw_windows *windows; /* read through tw_host window_*()  */
    int final; /* 1 on the job's last scan                */
    /* Appended in ABI 2 (a plugin built against an older header does not
     * see them): the debugging tensors whose wall_us falls in this scan,
     * ordered by (node, step, name). */
    const tw_tensor *tensors;
    size_t ntensors;
} tw_scan;

/* What a scan() reports back. condition_met: this scan's check returned
 * true; a scan with it whose violations grew publishes a finding alert and
 * fires the rule's actions, and the first one makes the status
 * IssuesFound. The three counters are the report's RuleTriggered,
 * Violations and Datapoints after this scan, in the rule's own terms. */
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

typedef struct tw_json tw_json;       /* a JSON writer, owned by the host     */
typedef struct tw_buf tw_buf;         /* a growable byte buffer, host-owned   */
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

/* Handed to create(); valid until destroy(). Plugins may keep the pointer.
 * Members are only ever appended; `size` (ABI 2, in what was padding in
 * ABI 1, so 0 from an ABI 1 host) is sizeof(tw_host) as the host built
 * it: test a member with TW_HOST_HAS(host, member) before calling one
 * added after your plugin's header version. */
typedef struct tw_host {
    uint32_t abi_version;
    uint32_t size; /* ABI 2: sizeof(tw_host) of the host */
    void *ctx;     /* pass back as the first argument where asked */

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
    int (*subrule_scan)(tw_subrule *r, const tw_scan *scan, tw_scan_result *out,
                        char *err, size_t errlen);
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

/* 1 when the host that handed out `h` has member `m` (ABI 2 hosts on). */
#define TW_HOST_HAS(h, m)                                                      \
    ((h)->size >= offsetof(tw_host, m) + sizeof(((const tw_host *)0)->m))

/* ------------------------------------------------------------------------
 * Findings (ABI 2): what a person reads about a problem
 * --------------------------------------------------------------------- */

#define TW_FINDING_MAX_NODES 8  /* nodes (GPUs, ranks) listed by name     */
#define TW_FINDING_NAME_LEN 64  /* per listed name, NUL included          */
#define TW_FINDING_TEXT_LEN 384 /* per text below, NUL included           */

/* Filled by the rule's finding() into a zeroed struct the host owns.
 * Texts are plain UTF-8 sentences without line breaks (the host wraps
 * them); longer ones are cut. Everything is optional: the host fills
 * what the rule leaves empty (see finding() below). */
typedef struct tw_finding {
    /* Where: the nodes, "node/gpu" pairs or ranks involved, the worst
     * first. `nnames` are listed; `ninvolved` (>= nnames) is how many are
     * involved in all, so "3 of 40 nodes" can be said without listing 40. */
    char names[TW_FINDING_MAX_NODES][TW_FINDING_NAME_LEN];
    uint32_t nnames;
    uint64_t ninvolved;
    /* Since when: event times (µs since the epoch) of the first and the
     * last violation, as exactly as the rule knows them; 0 = unknown (the
     * host then uses the windows of the scans whose condition was met). */
    int64_t first_us;
    int64_t last_us;
    /* How much, in the rule's own terms: `value` measured against `limit`
     * (the parameter it was compared with), in `unit` ("%", "s", "x
     * median"); `magnitude` says it in words with the numbers, e.g. "GPU
     * below 10 % while a core was above 90 % in 76 % of 4720 snapshots". */
    double value;
    double limit;
    char unit[16];
    char magnitude[TW_FINDING_TEXT_LEN];
    /* What, in one sentence, and what to try first. */
    char summary[TW_FINDING_TEXT_LEN];
    char recommendation[TW_FINDING_TEXT_LEN];
    /* The parameters that decided it ("threshold 50 %, patience 1000");
     * empty: the host lists every parameter. */
    char parameters[TW_FINDING_TEXT_LEN];
} tw_finding;

/* What the host lends to finding(): the job's system node ids (the same
 * list, and order, as tw_scan.nodes, so a rule may keep node indices in
 * its state and name them here), the job's first timestamp, and the
 * rule's counters after its last scan. Valid during the call only. */
typedef struct tw_finding_ctx {
    const char *const *nodes;
    size_t nnodes;
    int64_t first_timestamp_us;
    const tw_scan_result *counters;
} tw_finding_ctx;

/* ------------------------------------------------------------------------
 * The descriptor a plugin exports
 * --------------------------------------------------------------------- */

/* tw_rule_descriptor.flags */
/* The rule keeps nothing between scans that its decisions depend on: the
 * host may recreate it instead of restoring it, and it needs neither
 * save() nor restore(). Without this flag both are mandatory: a host with
 * a persistent state store refuses, at start-up and naming the rule, a
 * rule that lacks them (a restored job would silently start counting from
 * zero). */
#define TW_RULE_STATELESS 1u

typedef struct tw_rule_descriptor {
    uint32_t abi_version; /* TW_PLUGIN_ABI_VERSION (1 still loads, above) */
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

    /* ABI 1 only (an ABI 2 host ignores it in a version 2 descriptor;
     * leave it NULL there and write `details` below). Writes the whole
     * report object:
     * {"RuleTriggered":..,"Violations":..,"Details":{..},"Datapoints":..,
     *  "RuleParameters":".."} (docs/plugins.md, "The report"). */
    int (*report)(void *state, tw_json *out);

    /* Serialize every bit of state needed to continue exactly; restore()
     * is called on a freshly created instance with the same parameters. */
    int (*save)(void *state, tw_buf *out);
    int (*restore)(void *state, const void *data, size_t len, char *err,
                   size_t errlen);

    void (*destroy)(void *state);

    /* ---- ABI 2: read only when abi_version >= 2 ---------------------- */
    uint32_t flags; /* TW_RULE_* */

    /* Describe the problem the rule has found so far, from its own state
     * (counters after the last scan are in ctx). Called only while the
     * rule's status is IssuesFound, possibly several times, never during
     * scan(); it must not change the state. `out` arrives zeroed. Fill
     * what the rule knows; the host completes the rest: an empty summary
     * becomes "<rule> found N violation(s) in M datapoints", an empty
     * time range the windows of the scans whose condition was met, empty
     * parameters the list of every parameter. NULL: all of it generic.
     * TW_ERR: the host logs err and shows the generic finding. */
    int (*finding)(void *state, const tw_finding_ctx *ctx, tw_finding *out,
                   char *err, size_t errlen);

    /* What a finding of this rule means and what to try first, a short
     * paragraph for `trainwatch explain` (NULL: none). */
    const char *finding_help;

    /* Mandatory in ABI 2. Write one JSON value, the report's Details
     * (normally an object; writing nothing gives {}), from the rule's
     * state; it must not change the state. The host writes the report around
     * it, in this order:
     *   {"RuleTriggered": counters.rule_triggered,
     *    "Violations": counters.violations, "Details": <this>,
     *    "Datapoints": counters.datapoints, "RuleParameters": "<text>"}
     * where counters are the tw_scan_result of the rule's last successful
     * scan (all 0 before the first one). Called whenever the host writes
     * results or an alert, so keep it proportional to what it writes. */
    int (*details)(void *state, tw_json *out);

    /* Optional: the report's RuleParameters text, owned by the rule and
     * valid until its next call or destroy(). NULL (the callback or its
     * result): the host writes `name:value` lines, one per parameter that
     * is not None, in the order of `params`, values as tw_param_value.text.
     * The built-in rules use it to list exactly what the reference lists. */
    const char *(*parameters_text)(void *state);
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
#define TW_INPUT_TENSOR 4u    /* debugging tensors (tw_scan.tensors) */
#define TW_PLUGIN_INPUTS_SUFFIX "_inputs"
typedef uint32_t (*tw_rule_inputs_fn)(void);

/* ------------------------------------------------------------------------
 * Optional: judging on the wall clock (hangs and stalls)
 * --------------------------------------------------------------------- */

/* Scans come only when event time advances, and a hung job sends nothing,
 * so a rule that must notice silence may also export
 *
 *   int <entry>_wallclock(void *state, const tw_wallclock *wc,
 *                         tw_scan_result *out, char *err, size_t errlen);
 *
 * (for the default entry: `trainwatch_rule_wallclock`). `trainwatch run`
 * calls it about once a second for every live job, between messages;
 * `trainwatch eval` calls it after each scan with now_us = the scan's end
 * (event time stands in for the wall clock offline). `out` arrives holding
 * the rule's counters after its last call, condition_met 0; the host
 * treats what it returns as it treats scan()'s (status, a finding alert
 * when condition_met and violations grew, actions, results), so the rule
 * keeps in the state it saves whatever it needs to fire exactly once:
 * checkpoints take the state after a call that changed the status or a
 * counter; a quiet call's changes are saved with the next scan's. Called from
 * the same thread as the other callbacks, never during one. Not part of
 * the descriptor: the ABI version and older plugins are unaffected. */

/* What the host last saw of one producer of the job (a framework node:
 * a training process, "<rank>-<host>"; or an agent's system node). */
typedef struct tw_wallclock_node {
    const char *node;         /* id as in tw_fw_event.node / tw_scan.nodes */
    int is_framework;         /* 1: sent framework events                   */
    int is_system;            /* 1: sent system samples (an agent)          */
    int64_t first_arrival_us; /* when its first batch arrived (wall)        */
    int64_t last_arrival_us;  /* when its newest batch arrived (wall)       */
    /* The framework event with the newest end time (NULL name: none yet):
     * its name, times (event time), args' step_num (-1 when none), mode,
     * and when the batch that carried it arrived (wall). */
    const char *last_event;
    int64_t last_event_start_us;
    int64_t last_event_end_us;
    int64_t last_event_step;
    tw_mode last_event_mode;
    int64_t last_event_arrival_us;
} tw_wallclock_node;

typedef struct tw_wallclock {
    int64_t now_us; /* the engine's wall clock (run) or the scan end (eval) */
    int offline;    /* 1 in eval: arrival times are event times              */
    /* When system samples last arrived from any agent of the job (0 =
     * never): nodes whose agents still report are alive, so silence from
     * their training processes is a hang, not a lost machine. */
    int64_t last_system_arrival_us;
    const tw_wallclock_node *nodes; /* every producer seen, first-seen order */
    size_t nnodes;
} tw_wallclock;

#define TW_PLUGIN_WALLCLOCK_SUFFIX "_wallclock"
typedef int (*tw_rule_wallclock_fn)(void *state, const tw_wallclock *wc,
                                    tw_scan_result *out, char *err,
                                    size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_PLUGIN_H */
