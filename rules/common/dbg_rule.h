/*
 * dbg_rule.h - what every built-in debugging rule (DEBUG_RULES.md §4) shares,
 * so each rule file holds only its own condition:
 *
 *  - the common parameters, appended after the rule's own (DBG_COMMON_PARAMS):
 *    start_step, end_step (exclusive; None = no end), mode (None = every
 *    mode, else TRAIN/EVAL/PREDICT/GLOBAL), stop_at_first_fire (default
 *    true: the managed service ends a rule job at its first fire, status
 *    IssuesFound; false = keep evaluating, as the reference's local
 *    driver does, and fire again at later steps; DEBUG_RULES.md §8.3 item 6);
 *  - the optional tensor selection (collection_names, tensor_regex;
 *    trainwatch/tensor.h) when the rule declares those parameters;
 *  - the per-step driver: a scan's tensors (ordered by node, step, name)
 *    are evaluated one (node, step) group at a time, in order; the rule's
 *    step() sees the group's selected tensors inside the step range and
 *    mode. A group with none is no invocation (the reference skips a step
 *    without data silently). Each worker (node) is evaluated on its own:
 *    the reference reads only the lexically first worker, trainwatch lets
 *    any worker fire (decision, documented in README "Debugging rules");
 *  - counters (datapoints = steps evaluated, violations = steps fired,
 *    rule_triggered = scans with a fire), the first and last fire (node,
 *    step, mode, mode step, wall time, tensor, value), details(),
 *    finding() and save/restore of all of it plus the rule's own state.
 *
 * Ownership: the dbg_rule owns its selection, its parameters text and the
 * rule's own state (ops->destroy frees that).
 */
#ifndef TW_RULES_DBG_RULE_H
#define TW_RULES_DBG_RULE_H

#include <stdint.h>

#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"
#include "trainwatch/tensor.h"

/* Appended to every debugging rule's parameter table, in this order.
 * (clang-format does not settle on one layout of these initializers.) */
/* clang-format off */
#define DBG_COMMON_PARAMS                                                      \
    {"start_step", TW_PARAM_INT, "0", 0, 9.0e15,                               \
     "first global step evaluated"},                                           \
    {"end_step", TW_PARAM_INT, NULL, 0, 9.0e15,                                \
     "global step where evaluation ends (exclusive); None = the job's end"},  \
    {"mode", TW_PARAM_STRING, NULL, 0, 0,                                      \
     "evaluate only tensors saved in this mode (TRAIN, EVAL, PREDICT, "        \
     "GLOBAL); None = every mode"},                                            \
    {"stop_at_first_fire", TW_PARAM_BOOL, "true", 0, 1,                        \
     "true: stop evaluating after the first fire (the managed service's "      \
     "IssuesFound); false: keep evaluating and fire again"}
#define DBG_NCOMMON 4

/* The selection parameters, for rules that take them. */
#define DBG_SELECT_PARAMS                                                      \
    {"collection_names", TW_PARAM_STRING, NULL, 0, 0,                          \
     "comma-separated collections whose tensors are checked"},                 \
    {"tensor_regex", TW_PARAM_STRING, NULL, 0, 0,                              \
     "comma-separated Python regexes (re.search) of tensor names checked"}
#define DBG_NSELECT 2
/* clang-format on */

/* What step() found at a fire: the tensor that decided it and the numbers,
 * for the finding and the details. */
typedef struct dbg_hit {
    char tensor[160];
    tw_mode mode; /* of that tensor (dbg_hit_set fills these three) */
    int64_t mode_step;
    int64_t wall_us;
    double value;   /* the measured quantity */
    double limit;   /* the parameter it was compared with */
    char what[200]; /* e.g. "abs_mean 3e-09 < threshold 1e-07" */
} dbg_hit;

/* One evaluated (node, step) group. */
typedef struct dbg_step {
    const char *node;
    int64_t step;
    const tw_tensor *const *tensors; /* selected, in (name) order */
    size_t ntensors;
} dbg_step;

typedef struct dbg_rule dbg_rule;

typedef struct dbg_rule_ops {
    const char *name;
    /* Parameter table layout: the rule's own `nown` parameters, then
     * DBG_SELECT_PARAMS when `select`, then DBG_COMMON_PARAMS. */
    size_t nown;
    int select;
    /* The rule reads the `mode` parameter itself (LossNotDecreasing's
     * mode preference); the driver then does not filter by mode. */
    int mode_is_own;
    /* With no collection or regex: select every tensor (all_if_empty),
     * these collections (default_collections, comma-separated), or refuse
     * the configuration (require_selection). */
    int all_if_empty;
    const char *default_collections;
    int require_selection;
    /* Optional: 1 selects t besides the configured selection (the rule's
     * built-in default, e.g. the `losses` collection). */
    int (*select_extra)(void *impl, const tw_tensor *t);
    /* Own state from the parameters (own ones at values[0..nown), the
     * common ones at dbg_common_index()); *impl may stay NULL. */
    int (*create)(const tw_param_value *values, void **impl, char *err,
                  size_t errlen);
    /* 1 = the condition holds at this step (fill *hit), 0 = not,
     * TW_ERR = failure (err filled; the rule goes Error). */
    int (*step)(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                size_t errlen);
    void (*save)(void *impl, tw_ser *s);
    int (*restore)(void *impl, tw_deser *d);
    void (*destroy)(void *impl);
    /* what a person should try (finding recommendation) */
    const char *recommendation;
    /* one sentence: what the condition is, for the finding summary */
    const char *condition;
} dbg_rule_ops;

/* The descriptor callbacks, shared by every debugging rule. `ops` is
 * passed through a per-rule trampoline (DBG_RULE_DEFINE). */
int dbg_rule_create(const dbg_rule_ops *ops, const tw_host *host,
                    const tw_params *params, void **state, char *err,
                    size_t errlen);
int dbg_rule_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                  char *err, size_t errlen);
int dbg_rule_details(void *state, tw_json *out);
int dbg_rule_save(void *state, tw_buf *out);
int dbg_rule_restore(void *state, const void *data, size_t len, char *err,
                     size_t errlen);
void dbg_rule_destroy(void *state);
int dbg_rule_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                     char *err, size_t errlen);

/* Defines the rule's descriptor and its two exports from `ops` (a
 * dbg_rule_ops), `ptable` (the full parameter table) and the texts. */
#define DBG_RULE_DEFINE(ops, ptable, rule_name, descr, help)                   \
    static int dbg_create_(const tw_host *h, const tw_params *p, void **s,     \
                           char *e, size_t n)                                  \
    {                                                                          \
        return dbg_rule_create(&(ops), h, p, s, e, n);                         \
    }                                                                          \
    static const tw_rule_descriptor dbg_descriptor_ = {                        \
        .abi_version = TW_PLUGIN_ABI_VERSION,                                  \
        .name = rule_name,                                                     \
        .description = descr,                                                  \
        .params = ptable,                                                      \
        .nparams = sizeof(ptable) / sizeof(ptable[0]),                         \
        .create = dbg_create_,                                                 \
        .scan = dbg_rule_scan,                                                 \
        .details = dbg_rule_details,                                           \
        .save = dbg_rule_save,                                                 \
        .restore = dbg_rule_restore,                                           \
        .destroy = dbg_rule_destroy,                                           \
        .finding = dbg_rule_finding,                                           \
        .finding_help = help,                                                  \
    };                                                                         \
    TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)           \
    {                                                                          \
        return &dbg_descriptor_;                                               \
    }                                                                          \
    TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)                     \
    {                                                                          \
        return TW_INPUT_TENSOR;                                                \
    }

/* Index of common parameter k (0 start_step, 1 end_step, 2 mode, 3
 * stop_at_first_fire) in the values. */
static inline size_t dbg_common_index(const dbg_rule_ops *ops, size_t k)
{
    return ops->nown + (ops->select ? DBG_NSELECT : 0) + k;
}

/* Helpers for rules' own code. */
/* The tensor's reduction `op`, or NAN (with *found 0). */
double dbg_get(const tw_tensor *t, const char *op, int *found);
/* A scalar tensor's value: reduction "value", else a 1-element raw. */
int dbg_scalar(const tw_tensor *t, double *out);
void dbg_hit_set(dbg_hit *hit, const tw_tensor *t, double value, double limit,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Per-tensor state of a rule, keyed by (name, mode): payloads of `words`
 * 8-byte words (int64_t or double fields only), zeroed when created,
 * saved bit for bit. Owned by the rule; dbg_map_free releases it. */
typedef struct dbg_map {
    size_t words;
    size_t n, cap;
    char **names;
    tw_mode *modes;
    uint64_t *data;
} dbg_map;

void dbg_map_init(dbg_map *m, size_t words);
/* The payload of (name, mode); NULL when absent (create 0) or out of
 * memory (create 1). */
void *dbg_map_get(dbg_map *m, const char *name, tw_mode mode, int create);
void dbg_map_free(dbg_map *m);
void dbg_map_save(const dbg_map *m, tw_ser *s);
int dbg_map_restore(dbg_map *m, tw_deser *d);

/* Population variance of raw values in float64 (DEBUG_RULES.md §8.3
 * item 5); NAN when n is 0. */
double dbg_variance(const double *v, size_t n);

#endif /* TW_RULES_DBG_RULE_H */
