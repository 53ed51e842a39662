/*
 * plugin_host.h - loads rule plugins (dlopen), validates their ABI and
 * parameters, and runs rule instances: the host side of plugin.h.
 *
 * Ownership:
 *  - tw_registry owns every loaded plugin (tw_plugin) and its dlopen
 *    handle; plugins stay loaded until tw_registry_free().
 *  - tw_rule (an instance) is owned by whoever created it
 *    (tw_rule_destroy). It borrows its plugin, its tw_host_ctx and the
 *    registry, which must outlive it.
 *  - tw_host_ctx is the per-job context handed to plugins as tw_host.ctx:
 *    the windowed aggregator, the registry (for sub-rules), the logger.
 */
#ifndef TW_PLUGIN_HOST_H
#define TW_PLUGIN_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "trainwatch/plugin.h"
#include "windows.h"

typedef struct tw_registry tw_registry;
typedef struct tw_plugin tw_plugin;
typedef struct tw_rule tw_rule;

/* ---- registry ---------------------------------------------------------- */

/* A registry searching, in order, $TRAINWATCH_RULES_DIR,
 * <executable's dir>/../lib/trainwatch/rules (a relocated install), the
 * build tree's rules directory and the install directory for built-in
 * rules. */
tw_registry *tw_registry_new(void);
void tw_registry_free(tw_registry *r);

/* Add a directory to search for built-in rules (first added, first
 * searched, before the defaults). */
int tw_registry_add_dir(tw_registry *r, const char *dir);

/* A built-in rule by its name ("LowGPUUtilization"): the first <dir>/NAME.so
 * of the search path whose descriptor carries that name. */
int tw_registry_find(tw_registry *r, const char *rule_name,
                     const tw_plugin **out, char *err, size_t errlen);

/* A custom rule: `path` is the .so (the reference's `source`), `entry` the
 * entry symbol (`rule_to_invoke`; NULL = TW_PLUGIN_ENTRY). Errors name the
 * file and the reason: missing file, not a shared object, missing symbol,
 * ABI mismatch, malformed descriptor. */
int tw_registry_load(tw_registry *r, const char *path, const char *entry,
                     const tw_plugin **out, char *err, size_t errlen);

/* Names of all built-in rules found on the search path (sorted). The array
 * and strings are owned by the registry. */
size_t tw_registry_list(tw_registry *r, const char *const **names);

const tw_rule_descriptor *tw_plugin_descriptor(const tw_plugin *p);
const char *tw_plugin_path(const tw_plugin *p);
/* TW_INPUT_SYSTEM and/or TW_INPUT_FRAMEWORK: what the plugin reads (its
 * optional `<entry>_inputs`; both without it). */
uint32_t tw_plugin_inputs(const tw_plugin *p);

/* The descriptor's parameters checked without calling the plugin (`rules
 * check`): names unique, each default parses as its type and lies within
 * its bounds. TW_ERR with a sentence naming the file, rule and parameter. */
int tw_plugin_check_params(const tw_plugin *p, char *err, size_t errlen);

/* ---- per-job host context ----------------------------------------------- */

typedef struct tw_host_ctx tw_host_ctx;

/* Plugin isolation (plugin_guard.h): which rules run guarded, and the
 * limits of one guarded call. A stopped call puts its rule in Error with
 * the signal, timeout or memory cap as the reason. */
typedef enum tw_isolation_mode {
    TW_ISOLATE_CUSTOM = 0, /* rules loaded from a `source` .so (default) */
    TW_ISOLATE_ALL,        /* built-in rules too */
    TW_ISOLATE_OFF
} tw_isolation_mode;

typedef struct tw_isolation {
    tw_isolation_mode mode;
    uint32_t timeout_ms; /* 0 = no timeout */
    uint32_t memory_mb;  /* 0 = no cap */
} tw_isolation;

#define TW_ISOLATION_TIMEOUT_MS 30000u
#define TW_ISOLATION_MEMORY_MB 1024u

/* custom, 30 s, 1024 MiB */
void tw_isolation_default(tw_isolation *iso);

/* `windows` is borrowed. `job` names the job in log lines. */
tw_host_ctx *tw_host_ctx_new(tw_registry *reg, tw_windows *windows,
                             const char *job);
void tw_host_ctx_free(tw_host_ctx *h);
/* Rules created after this call use `iso` (the default until then). */
void tw_host_ctx_set_isolation(tw_host_ctx *h, const tw_isolation *iso);
const tw_host *tw_host_ctx_host(tw_host_ctx *h);

/* ---- rule instances ------------------------------------------------------ */

typedef enum tw_rule_status {
    TW_STATUS_IN_PROGRESS = 0,
    TW_STATUS_NO_ISSUES_FOUND,
    TW_STATUS_ISSUES_FOUND,
    TW_STATUS_ERROR,
    /* fixed semantics only: the job ended and the rule's input never
     * arrived (tw_rule_received_input), so there is nothing to call
     * healthy. reference semantics says NoIssuesFound, as the reference
     * does, and results/alerts carry "input": "none" beside it. */
    TW_STATUS_NO_DATA
} tw_rule_status;

const char *tw_rule_status_name(tw_rule_status s); /* "IssuesFound" */

/* Validates `keys[i]=values[i]` against the plugin's parameter specs
 * (unknown name, unparsable or out-of-range value -> TW_ERR with a
 * sentence naming the rule, the parameter and the value), then calls the
 * plugin's create(). `display_name` (may be NULL = descriptor name) is how
 * the rule is reported. */
int tw_rule_create(const tw_plugin *p, const char *display_name,
                   const char *const *keys, const char *const *values, size_t n,
                   tw_semantics semantics, tw_host_ctx *host, tw_rule **out,
                   char *err, size_t errlen);
void tw_rule_destroy(tw_rule *r);

/* Runs one scan. A plugin error puts the rule in TW_STATUS_ERROR (the
 * error text is kept, see tw_rule_error) and later scans are skipped;
 * this returns TW_ERR then, but the caller should simply go on with the
 * other rules. */
int tw_rule_scan(tw_rule *r, const tw_scan *scan);

/* 1 when the rule's plugin exports `<entry>_wallclock` (plugin.h). */
int tw_rule_has_wallclock(const tw_rule *r);

/* Runs the plugin's wall-clock callback: its result is taken as a scan's
 * (counters, status IssuesFound when condition_met; met window = now),
 * a failure puts the rule in Error as for scan(). TW_ERR also for a rule
 * without the callback or already in Error (nothing ran). */
int tw_rule_wallclock(tw_rule *r, const tw_wallclock *wc);

/* The job has ended: InProgress becomes NoIssuesFound, or NoData in fixed
 * semantics for a rule whose input never arrived. */
void tw_rule_finish(tw_rule *r);

/* 1 once a scan handed the rule a system sample or framework event of a
 * kind it reads (the plugin's optional `<entry>_inputs`, plugin.h; both
 * kinds without it), or the rule reported datapoints. */
int tw_rule_received_input(const tw_rule *r);

tw_rule_status tw_rule_get_status(const tw_rule *r);
const char *tw_rule_name(const tw_rule *r);
const char *tw_rule_error(const tw_rule *r); /* "" when none */
/* 1 when the rule's plugin calls run guarded (tw_isolation). */
int tw_rule_isolated(const tw_rule *r);
const tw_scan_result *tw_rule_last_result(const tw_rule *r);
uint64_t tw_rule_scans(const tw_rule *r);
uint64_t
tw_rule_conditions_met(const tw_rule *r); /* scans that returned true */
tw_semantics tw_rule_semantics(const tw_rule *r);
const tw_rule_descriptor *tw_rule_descriptor_of(const tw_rule *r);
/* Sub-rules a composite rule (ProfilerReport) created through the host,
 * in creation order. Borrowed: valid until the parent is destroyed. */
size_t tw_rule_nchildren(const tw_rule *r);
tw_rule *tw_rule_child(const tw_rule *r, size_t i);

/* The validated parameters, in descriptor order. */
const tw_params *tw_rule_params(const tw_rule *r);

/* The plugin's report object written into j. */
int tw_rule_report(tw_rule *r, tw_json *j);

/* Checkpoint support: plugin state plus the host's own bookkeeping. */
int tw_rule_save(tw_rule *r, tw_buf *out);
int tw_rule_restore(tw_rule *r, const void *data, size_t len, char *err,
                    size_t errlen);

/* The rule's finding (plugin.h, ABI 2) into out: the plugin's finding()
 * completed by the host (generic summary, magnitude and recommendation
 * from the counters, the time range of the scans whose condition was met,
 * the parameter list), or all generic for ABI 1 rules and rules without
 * finding(). TW_ERR (out zeroed) when the rule's status is not
 * IssuesFound: there is nothing to describe. */
int tw_rule_finding(const tw_rule *r, tw_finding *out);

/* TW_OK when the rule (and each sub-rule) can be checkpointed exactly:
 * it has save() and restore(), or declares TW_RULE_STATELESS. Otherwise
 * TW_ERR with a sentence naming the rule, its file and what it lacks.
 * Hosts with a persistent state store call it at start-up. */
int tw_rule_checkpointable(const tw_rule *r, char *err, size_t errlen);

/* Checkpoint round trip in place (eval --roundtrip): saves the rule,
 * destroys its plugin state, creates a fresh one with the same parameters
 * (sub-rules anew) and restores the saved bytes into it, then checks that
 * the restored state saves to the same bytes. TW_ERR with a sentence
 * naming the rule when any step fails or the bytes differ; the rule is
 * then in Error unless only the comparison failed. Rules in Error are
 * left alone. */
int tw_rule_roundtrip(tw_rule *r, char *err, size_t errlen);

#endif /* TW_PLUGIN_HOST_H */
