/*
 * config.h - the rule configuration file (YAML, or JSON which YAML reads
 * too). See deploy/trainwatch.yaml for a documented example:
 *
 *   semantics: fixed          # or reference (RULES.md), default fixed
 *   tick: 60s                 # scan interval, or "continuous"
 *   lateness: 60s             # allowed lateness of events
 *   rules:
 *     - name: LowGPUUtilization
 *       parameters: {threshold_p95: 70}
 *     - name: Ceiling
 *       source: ./gpu_memory_ceiling.so
 *       rule_to_invoke: gpu_memory_ceiling_rule
 *       semantics: reference
 *
 * The daemon's sections (`kafka:`, `state:`, `engine:`) and each rule's
 * `actions:` list are kept as flat settings (nested mappings become dotted
 * keys, lists of plain values become comma-separated values) and are
 * interpreted by the module that owns them (run's settings, state stores,
 * actions), which validates them against config_schema.h's table. `rules`
 * may be left out: the caller then uses the default rule set
 * (tw_config_default_rules).
 *
 * Errors name the file, the line and the key.
 *
 * Ownership: tw_config owns all its strings (arena) and spec arrays.
 */
#ifndef TW_CONFIG_H
#define TW_CONFIG_H

#include <stddef.h>

#include "arena.h"
#include "job.h"

/* One `key: value` of a settings section, with its line for errors. */
typedef struct tw_setting {
    const char
        *key; /* dotted for nested mappings: "properties.sasl.mechanism" */
    const char *value; /* scalars as written; a list of scalars joined by ',' */
    int line;
} tw_setting;

/* A flat settings section: a top-level section or one rule action. */
typedef struct tw_settings {
    const char *path; /* the config file ("(default)" for built-in) */
    const char *what; /* "kafka", "rule 'CPUBottleneck' action 1", ... */
    int line;         /* where the section starts; 0 when absent */
    tw_setting *items;
    size_t n;
} tw_settings;

/* One rule's configured actions, in file order. */
typedef struct tw_rule_actions {
    tw_settings *items;
    size_t n;
} tw_rule_actions;

typedef struct tw_config {
    tw_arena arena;
    char *path; /* NULL for the built-in default */
    tw_job_config job;
    tw_rule_spec *rules;
    size_t nrules;
    tw_rule_actions *actions; /* parallel to rules (n = nrules) */
    tw_settings kafka;        /* empty (n = 0, line = 0) when absent */
    tw_settings state;
    tw_settings engine;
    tw_settings http;
    tw_settings alertmanager; /* the engine-wide sink (see
                                 tw_config_load_or_default) */
} tw_config;

/* The setting `key` of s, NULL when absent. */
const tw_setting *tw_settings_find(const tw_settings *s, const char *key);

/* Write "FILE:LINE: WHAT: key 'KEY': <message>" into err and return TW_ERR.
 * `at` may be NULL (the section's own line is used). */
int tw_settings_error(const tw_settings *s, const tw_setting *at, char *err,
                      size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The value of `key` as written, into *out when present (else *out is
 * untouched); always TW_OK. Keys, types, bounds and defaults of every
 * section are config_schema.h's: check a section with
 * tw_schema_check_settings, then read typed values with tw_schema_*(). */
int tw_settings_get_str(const tw_settings *s, const char *key,
                        const char **out);

int tw_config_load(const char *path, tw_config **out, char *err, size_t errlen);
/* The built-in default: ProfilerReport when the registry has it, else every
 * built-in profiler rule found (in ProfilerReport's order). */
int tw_config_default(tw_registry *reg, tw_config **out, char *err,
                      size_t errlen);
/* Give c (loaded without `rules`) the built-in default rule set. */
int tw_config_default_rules(tw_config *c, tw_registry *reg, char *err,
                            size_t errlen);
/* What eval and run load: the file at path (NULL: the built-in default),
 * with the default rule set when it names no rules; an `alertmanager:`
 * section becomes one more action of every rule (type alertmanager, the
 * section's keys). */
int tw_config_load_or_default(const char *path, tw_registry *reg,
                              tw_config **out, char *err, size_t errlen);
void tw_config_free(tw_config *c);

/* The longest duration any key accepts: 100 years, far below INT64_MAX µs
 * so that sums of durations and timestamps cannot overflow either. */
#define TW_DURATION_MAX_US (36525LL * 86400 * 1000000)
#define TW_DURATION_MAX_TEXT "36525d (100 years)"

/* "60s", "500ms", "2m", "1h", "7d", "90" (seconds) -> µs. TW_ERR when
 * malformed, negative or longer than TW_DURATION_MAX_US. */
int tw_parse_duration_us(const char *text, int64_t *out);

#endif /* TW_CONFIG_H */
