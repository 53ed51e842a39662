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
 * Errors name the file, the line and the key.
 *
 * Ownership: tw_config owns all its strings (arena) and spec arrays.
 */
#ifndef TW_CONFIG_H
#define TW_CONFIG_H

#include <stddef.h>

#include "arena.h"
#include "job.h"

typedef struct tw_config {
    tw_arena arena;
    char *path; /* NULL for the built-in default */
    tw_job_config job;
    tw_rule_spec *rules;
    size_t nrules;
} tw_config;

int tw_config_load(const char *path, tw_config **out, char *err,
                   size_t errlen);
/* The built-in default: ProfilerReport when the registry has it, else every
 * built-in profiler rule found (in ProfilerReport's order). */
int tw_config_default(tw_registry *reg, tw_config **out, char *err,
                      size_t errlen);
void tw_config_free(tw_config *c);

/* "60s", "500ms", "2m", "1h", "90" (seconds) -> µs. TW_ERR when malformed. */
int tw_parse_duration_us(const char *text, int64_t *out);

#endif /* TW_CONFIG_H */
