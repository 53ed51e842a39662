/*
 * run_metrics.h - what the daemon tells its HTTP endpoints (http_server.h):
 * per-job, per-rule status and finding counters learnt from the alerts,
 * latency histograms, and the rendering of one snapshot (the Prometheus
 * text exposition, the /jobs JSON, readiness) from them, the router's
 * counters, the actions' outcomes and the consumer lag.
 *
 * Bounded label cardinality: at most max_jobs jobs are tracked; a job
 * finished more than ttl ago drops out; a new job beyond max_jobs evicts
 * the oldest finished one, or, when every tracked job is active, is not
 * tracked (counted: trainwatch_jobs_untracked_total). Rule labels come
 * from the configured rules, so they are bounded by the configuration.
 *
 * Threads: used only on the consuming thread; the snapshot it renders is
 * handed to the HTTP thread with tw_http_publish.
 *
 * Ownership: the collector owns copies of every job id and rule name.
 */
#ifndef TW_RUN_METRICS_H
#define TW_RUN_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "actions.h"
#include "alert.h"
#include "http_server.h"
#include "job_router.h"

typedef enum tw_latency_kind {
    TW_LATENCY_CHECKPOINT = 0, /* flush alerts + store transaction */
    TW_LATENCY_ALERT,          /* message polled -> its alert produced */
    TW_LATENCY_COUNT
} tw_latency_kind;

typedef struct tw_partition_lag {
    int32_t partition;
    int64_t lag; /* messages behind the high watermark; -1 unknown */
} tw_partition_lag;

/* What one snapshot is rendered from (borrowed for the call). */
typedef struct tw_run_metrics_input {
    const tw_router_stats *router;
    const tw_action_counters *actions; /* NULL: no rule has actions */
    const tw_partition_lag *lag;
    size_t npartitions;
    int paused;               /* consumption stopped: store unavailable */
    const char *pause_reason; /* with paused */
    uint64_t store_round_trips;
    const tw_http_stats *http;
    int64_t snapshot_us_max; /* longest render + publish so far */
} tw_run_metrics_input;

typedef struct tw_run_metrics tw_run_metrics;

tw_run_metrics *tw_run_metrics_new(int64_t ttl_us, size_t max_jobs);
void tw_run_metrics_free(tw_run_metrics *m);

/* An alert the router produced: the rule's status, violations and (for a
 * finding) its finding count. TW_ERR only when out of memory. */
int tw_run_metrics_alert(tw_run_metrics *m, const char *job,
                         const tw_alert_facts *f, int64_t now_us);

/* The job ended (its TTL starts now). NULL m is fine. */
void tw_run_metrics_job_finished(tw_run_metrics *m, const char *job,
                                 int64_t now_us);

void tw_run_metrics_observe(tw_run_metrics *m, tw_latency_kind k,
                            int64_t micros);

/* A checkpoint that wrote something wrote this many bytes of state. */
void tw_run_metrics_checkpoint_bytes(tw_run_metrics *m, uint64_t bytes);

/* Renders a snapshot into *out (zeroed first; release with
 * tw_http_snapshot_release or give it to tw_http_publish); drops jobs
 * past their TTL. TW_ERR when out of memory. */
int tw_run_metrics_snapshot(tw_run_metrics *m, const tw_run_metrics_input *in,
                            int64_t now_us, tw_http_snapshot *out);

#endif /* TW_RUN_METRICS_H */
