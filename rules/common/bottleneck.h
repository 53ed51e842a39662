/*
 * bottleneck.h - the shared logic of CPUBottleneck (RULES.md §3.2) and
 * IOBottleneck (§3.3): 20 ms snapshots over the system stream in reference
 * order, "low GPU and high <metric> in the same snapshot" bottlenecks, the
 * whole-history ratio against `threshold`, the bottlenecks report map and
 * the §4 framework aggregation at each new bottleneck instant of a
 * triggering scan.
 *
 * The two rule files only declare their parameter table and descriptor
 * and forward every callback here; they differ in the "high" metric
 * (TW_METRIC_CPU_UTIL / TW_METRIC_CPU_IOWAIT), the name of its threshold
 * parameter and the RuleParameters text.
 *
 * Parameters (in this order in each rule's table): threshold, gpu_threshold,
 * <high>_threshold, patience, max_report_entries (see
 * TW_BNECK_PARAMS_INIT).
 *
 * State and semantics:
 *  - decisions use counters only (anchor, snapshot count, low-GPU count,
 *    number of distinct bottleneck anchors since the last reset), in both
 *    semantics; the reset at more than 1 000 000 bottleneck entries clears
 *    the numerator only (quirk 5, reproduced in both);
 *  - an anchor can be a bottleneck again (a snapshot straddling a scan
 *    boundary, quirk 2, or two nodes with an identical timestamp): the
 *    entry is replaced, not counted. `reference` indexes every anchor
 *    ever seen; `fixed` indexes only the anchors of the previous and the
 *    current scan, which is exact because samples of scan k are stamped
 *    within [start_k, end_k], so an anchor of scan k can only equal one of
 *    scan k-1 (same boundary instant) or of scan k;
 *  - Details["bottlenecks"]: `reference` keeps every entry (<= 10^6,
 *    quirk 6); `fixed` keeps the `max_report_entries` most recently
 *    inserted ones (default 10 000) in insertion order (an entry replaced
 *    in place keeps its position, as in the reference's dict);
 *    Violations stays the true count in both;
 *  - fixed, phase-aware: samples of the initialization (before the job's
 *    first step, job_phase.h; before the first step event, those within
 *    `init_grace` minutes of the job's start) make no snapshot: idle GPUs
 *    while the job loads (its CPUs busy loading) are no bottleneck, and
 *    they do not dilute the ratio either; nor do those of the
 *    finalization (more than 10 s after the newest step's end: idle GPUs
 *    while the model is saved); EVAL steps count with the TRAIN ones (a
 *    starved GPU is starved in either);
 *  - the §4 aggregation: `reference` reproduces the swapped ratio,
 *    `fixed` pairs labels with their own totals (fwagg.h).
 *
 * Memory (fixed): ~200 bytes + 16·M bytes for the report ring (M =
 * max_report_entries, 160 KB by default) + the per-scan anchor maps
 * (~40 bytes per snapshot with a low-GPU or high sample in the current
 * scan, freed capacity reused) + the previous scan's bottleneck anchors
 * (16 B each) + the fwagg buffer (vocabulary of phases/operators).
 * Independent of N, G, C and of the job's length. Reference: 16 B + ~40 B
 * of index per bottleneck in history (<= 10^6 entries, ~56 MB).
 */
#ifndef TW_RULES_BOTTLENECK_H
#define TW_RULES_BOTTLENECK_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

enum {
    TW_BNECK_P_THRESHOLD = 0,
    TW_BNECK_P_GPU,
    TW_BNECK_P_HIGH,
    TW_BNECK_P_PATIENCE,
    TW_BNECK_P_MAX_REPORT,
    TW_BNECK_P_INIT_GRACE,
    TW_BNECK_P_COUNT
};

/* Default of max_report_entries (fixed semantics only). */
#define TW_BNECK_DEFAULT_MAX_REPORT "10000"

/* The shared parameter specs; `high_name`, `high_default` and `high_help`
 * describe the rule's own threshold ("cpu_threshold", "90", ...). It may be
 * -1 (every sample is high): RULES.md §6.3's TRIGGER_ALL preset passes
 * io_threshold=-1. */
#define TW_BNECK_PARAMS_INIT(high_name, high_default, high_help)               \
    {                                                                          \
        {"threshold",                                                          \
         TW_PARAM_DOUBLE,                                                      \
         "50",                                                                 \
         0,                                                                    \
         100,                                                                  \
         "% of snapshots that must be bottlenecks for the rule to fire"},      \
            {"gpu_threshold",                                                  \
             TW_PARAM_DOUBLE,                                                  \
             "10",                                                             \
             0,                                                                \
             100,                                                              \
             "% - a GPU utilisation sample below this is low"},                \
            {high_name, TW_PARAM_DOUBLE, high_default, -1, 100, high_help},    \
            {"patience",                                                       \
             TW_PARAM_INT,                                                     \
             "1000",                                                           \
             0,                                                                \
             1e15,                                                             \
             "evaluate only when more than this many snapshots were seen"},    \
            {"max_report_entries",                                             \
             TW_PARAM_INT,                                                     \
             TW_BNECK_DEFAULT_MAX_REPORT,                                      \
             1,                                                                \
             1000000,                                                          \
             "fixed semantics: newest bottleneck entries kept in the "         \
             "report (reference keeps all)"},                                  \
            {"init_grace",                                                     \
             TW_PARAM_DOUBLE,                                                  \
             "30",                                                             \
             0.0,                                                              \
             525600.0,                                                         \
             "trainwatch extension, fixed semantics only: minutes from the "   \
             "job's first timestamp during which samples of a job that has "   \
             "shown no step event yet count as initialization (not "           \
             "evaluated)"},                                                    \
    }

typedef struct tw_bneck_kind {
    const char *rule_name;  /* "CPUBottleneck"                          */
    tw_metric high_metric;  /* TW_METRIC_CPU_UTIL / TW_METRIC_CPU_IOWAIT */
    const char *high_label; /* "cpu_threshold" / "io_threshold"          */
} tw_bneck_kind;

/* The callbacks of tw_rule_descriptor, for either rule. `kind` must
 * outlive the instance (a static const in the rule file). */
int tw_bneck_create(const tw_bneck_kind *kind, const tw_host *host,
                    const tw_params *p, void **state, char *err, size_t errlen);
int tw_bneck_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                  char *err, size_t errlen);
int tw_bneck_details(void *state, tw_json *j);
const char *tw_bneck_parameters_text(void *state);
int tw_bneck_save(void *state, tw_buf *out);
int tw_bneck_restore(void *state, const void *data, size_t len, char *err,
                     size_t errlen);
void tw_bneck_destroy(void *state);
/* The finding (plugin.h, ABI 2): the nodes whose samples made bottleneck
 * snapshots (most first), the first and last bottleneck snapshot, the
 * ratio against `threshold`. */
int tw_bneck_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                     char *err, size_t errlen);

/* Bytes held by an instance (for tests and the benchmarks). */
size_t tw_bneck_memory(const void *state);

#endif /* TW_RULES_BOTTLENECK_H */
