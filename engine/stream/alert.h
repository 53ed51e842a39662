/*
 * alert.h - the alerts the engine publishes on the alert topic
 * (schemas/alert.schema.json), and the per-job tracker that decides when
 * to publish one.
 *
 * Kinds (the schema documents them for consumers):
 *  - "status":  a rule's status changed after a scan (InProgress ->
 *    IssuesFound, ... -> Error), and once per rule when the job ends
 *    ("final": true) with its final status, whether it changed or not.
 *  - "finding": a scan whose condition was met and after which the rule's
 *    violation count is larger than before it (a new problem seen).
 * The rules are the job's configured rules and, after each composite rule
 * (ProfilerReport), its sub-rules, in the results' order (job_results.h).
 *
 * Determinism: an alert's JSON depends only on the job's event stream and
 * configuration (no wall clock, no engine counters), so re-evaluating a
 * job after a failover publishes byte-identical alerts. Its id is the
 * 128-bit FNV-1a hash, as 32 lower-case hex digits, of
 *   "tw-alert-2" NUL job NUL parent NUL rule NUL kind NUL scan NUL status
 * (parent: the composite rule of a sub-rule, empty for a configured rule;
 * scan in decimal; the final alerts use the job's scan count, one past the
 * last scan's index), so a consumer can de-duplicate by id. An alert of a
 * rule's wall-clock call (plugin.h, `<entry>_wallclock`; not
 * deterministic: it depends on when messages arrived) carries the scan
 * still open, a window of start = end = the engine's wall clock, and
 * hashes status as "<status>/wall/<violations>", so each new finding
 * gets its own id and a restored job that fires the same one again is
 * de-duplicated. The parent
 * keeps ProfilerReport's LowGPUUtilization apart from a LowGPUUtilization
 * configured beside it; configured rule names are unique (config.c).
 *
 * Ownership: the tracker owns its per-rule bookkeeping; it borrows the job
 * passed to each call. The JSON handed to the emit callback is owned by
 * the tracker and valid only during the call.
 */
#ifndef TW_ALERT_H
#define TW_ALERT_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "plugin_host.h"

#define TW_ALERT_ID_LEN 32

typedef enum tw_alert_kind {
    TW_ALERT_STATUS = 0,
    TW_ALERT_FINDING
} tw_alert_kind;

const char *tw_alert_kind_name(tw_alert_kind k); /* "status", "finding" */

/* The deterministic id described above into out (TW_ALERT_ID_LEN + 1);
 * parent NULL for a configured (top-level) rule. */
void tw_alert_id(const char *job, const char *parent, const char *rule,
                 tw_alert_kind kind, uint64_t scan, const char *status,
                 char *out);

/* What an alert says, typed, for the engine's own consumers (actions):
 * the JSON is for the process edge only, nobody re-reads it. Strings are
 * borrowed in a callback's argument; a copy made with
 * tw_alert_facts_copy() owns them (tw_alert_facts_release). */
typedef struct tw_alert_facts {
    tw_alert_kind kind;
    char *rule;   /* display name */
    char *parent; /* composite rule of a sub-rule; NULL for configured */
    tw_rule_status status;
    uint64_t scan;
    int64_t end_us;       /* the alert window's end */
    int64_t job_start_us; /* the job's first timestamp */
    int64_t violations, datapoints;
    int has_finding; /* status IssuesFound: `finding` is filled */
    tw_finding finding;
    /* fixed semantics: the rule whose finding explains this one
     * (finding_cause.h), NULL when none; its parent as above; the id of
     * its status alert that said IssuesFound ("" when unknown) */
    char *cause_rule;
    char *cause_parent;
    char cause_alert_id[TW_ALERT_ID_LEN + 1];
} tw_alert_facts;

/* Deep copy (strings duplicated); TW_ERR when out of memory (dst is then
 * released). */
int tw_alert_facts_copy(tw_alert_facts *dst, const tw_alert_facts *src);
void tw_alert_facts_release(tw_alert_facts *f);

/* One alert ready to publish: the job (the Kafka key), its id, the JSON,
 * and the same content typed. */
typedef int (*tw_alert_emit_fn)(void *ud, const char *job, const char *id,
                                const char *json, size_t len,
                                const tw_alert_facts *facts);

typedef struct tw_alert_tracker tw_alert_tracker;

tw_alert_tracker *tw_alert_tracker_new(tw_alert_emit_fn emit, void *ud);
void tw_alert_tracker_free(tw_alert_tracker *t);

/* After each scan of the job (tw_job_on_scan): publishes status changes
 * and findings. TW_ERR when out of memory or the emit callback failed. */
int tw_alert_tracker_scan(tw_alert_tracker *t, tw_job *job,
                          const tw_scan *scan);

/* After a tw_job_wallclock() call (tw_job_on_wallclock): status changes
 * and new findings of the configured rules that judge on the wall clock.
 * TW_ERR as tw_alert_tracker_scan. */
int tw_alert_tracker_wallclock(tw_alert_tracker *t, tw_job *job,
                               int64_t now_us);

/* After tw_job_finish(): one final status alert per rule. */
int tw_alert_tracker_finish(tw_alert_tracker *t, tw_job *job);

/* Alerts emitted so far. */
uint64_t tw_alert_tracker_sent(const tw_alert_tracker *t);

/* Size bound (0 = none, the default): an alert longer than max_bytes is
 * published without its report and, when still too long, with only the
 * first nodes that fit (and no parameters when not even one fits), marked
 * "truncated": true and "truncation": {what was cut}
 * (schemas/alert.schema.json); the id is unchanged. One that cannot fit
 * even so (max_bytes below ~700 bytes plus the job id) makes the
 * publishing call fail (TW_ERR). */
void tw_alert_tracker_set_max_bytes(tw_alert_tracker *t, size_t max_bytes);

/* Finding alerts at most one per `us` of event time per rule (0, the
 * default: one per scan that finds more violations): a rule's first
 * finding is always published; a later one only when its scan ends at
 * least `us` after the last published finding's scan, else it is held
 * (counted) and the next published alert carries the violations so far.
 * Saved in checkpoints (version 3), so a restored job holds the same. */
void tw_alert_tracker_set_finding_every(tw_alert_tracker *t, int64_t us);

/* Findings held back by finding_every so far. */
uint64_t tw_alert_tracker_held(const tw_alert_tracker *t);

/* Alerts published truncated so far. */
uint64_t tw_alert_tracker_truncated(const tw_alert_tracker *t);

/* Checkpoints: the tracker's bookkeeping (each rule's last published
 * status, violation count and finding time, the node list, the count
 * sent) appended to out as one blob (magic "TWAT", version 3; 1 and 2
 * are still read; ckpt_codec.h encoding), and
 * restored into a fresh tracker, so a restored job publishes exactly the
 * alerts an uninterrupted one would. TW_ERR: out of memory / a blob that
 * is truncated or malformed (err says which and where). */
int tw_alert_tracker_save(const tw_alert_tracker *t, tw_buf *out);
int tw_alert_tracker_restore(tw_alert_tracker *t, const void *data, size_t len,
                             char *err, size_t errlen);

#endif /* TW_ALERT_H */
