/*
 * run_actions.h - the daemon's side of the actions (actions.h): which alerts
 * fire a rule's actions, what the event carries, and the once-ledger.
 *
 * When. Every "finding" alert (alert.h: a scan whose condition was met and
 * after which the rule's violation count grew, i.e. RULES.md §5's "check
 * returned true") fires the actions of the configured rule it belongs to.
 * A sub-rule's finding (an alert with "parent") fires the actions of the
 * configured composite (ProfilerReport) that runs it; the event's finding
 * text names the sub-rule. A status alert to IssuesFound fires them too
 * (a rule can get there without a finding, e.g. at its final scan);
 * other status alerts fire nothing. The action module
 * decides what is actually sent: stop kinds once per job, notifications
 * once per (job, configured rule) or once per repeat_after; the repeats
 * are counted as deduplicated.
 *
 * The event, from the alert's typed facts (alert.h; the JSON is only
 * passed on as the webhook body, never re-read): job, configured rule,
 * the alert id, a one-line finding ("CPUBottleneck (in ProfilerReport):
 * <summary> Where: ... Since ... Try: ..."), an e-mail subject naming
 * rule, job and worst node with the finding as wrapped paragraphs for the
 * body, an SMS text of at most 160 bytes, and the report path
 * results_dir/<job>.json when engine.results_dir is set (the file
 * appears when the job ends).
 *
 * Once across restarts. With `state.store: redis` the ledger claims each
 * action id with tw_checkpoint_claim (SET NX of v1:sent:<id>) on a store
 * connection of its own, opened here from the `state:` section and used
 * only by the action worker thread (hiredis connections are not thread
 * safe). With the memory store the module's in-memory ledger is used: once
 * per process only. At most once by design: an id claimed just before a
 * crash whose request never left is not sent again; its claim stays in
 * v1:pending (each final outcome confirms one, tw_checkpoint_confirm, on
 * the same connection), so `run` reports and counts it (claim_pending.h).
 *
 * Threads: tw_run_actions_alert() runs on the consuming thread and only
 * formats the texts and queues (non-blocking); sends and claims run on the
 * module's worker thread.
 *
 * Ownership: tw_run_actions_new() copies what it needs from cfg and probe
 * (both may be freed afterwards); the store it opens is its own and is
 * closed by tw_run_actions_free() after the worker has stopped.
 */
#ifndef TW_RUN_ACTIONS_H
#define TW_RUN_ACTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "actions.h"
#include "alert.h"
#include "config.h"
#include "job.h"

typedef struct tw_run_actions tw_run_actions;

/* Validates every rule's actions (TW_ERR with "FILE:LINE: rule 'R' action
 * N: key 'K': ..." in err) and starts the worker. probe: a job built from
 * cfg's rules (its rule names map alerts to configured rules). *out stays
 * NULL when no rule has actions (nothing to start). */
int tw_run_actions_new(const tw_config *cfg, tw_job *probe,
                       const char *results_dir, tw_run_actions **out, char *err,
                       size_t errlen);

/* The capture actions' control channel (run_capture.h): started when a
 * configured rule has a capture action, with its own producer and
 * consumer on these brokers; outcomes go to alerts_topic. Call before the
 * first alert. Without it capture actions are skipped ("no control
 * channel"). TW_OK when there is nothing to start. NULL ra is fine. */
int tw_run_actions_start_capture(tw_run_actions *ra, const char *brokers,
                                 const char *const *props, size_t nprops,
                                 const char *alerts_topic, char *err,
                                 size_t errlen);

/* One alert published by the router (its arguments as the router gives
 * them). Fires the configured actions on a finding or a status change to
 * IssuesFound; never blocks. NULL ra
 * is fine (no actions). */
void tw_run_actions_alert(tw_run_actions *ra, const char *job, const char *id,
                          const char *json, size_t len,
                          const tw_alert_facts *facts);

/* " actions_fired=N actions_sent=N actions_failed=N actions_deduplicated=N
 * actions_skipped=N actions_retried=N actions_dropped=N actions_queued=N"
 * (all action types summed; with capture actions also " captures_requested=N
 * captures_captured=N captures_unreachable=N captures_timed_out=N
 * captures_rate_limited=N") into buf; "" when ra is NULL. */
void tw_run_actions_format(const tw_run_actions *ra, char *buf, size_t len);

/* Alertmanager resolution. A job ended (router): its alerts posted to
 * Alertmanager are posted again with endsAt = the job's latest event time
 * seen in its alerts by the next tw_run_actions_resolve_ended, called
 * after the job's final alerts were flushed. NULL ra is fine. */
void tw_run_actions_job_finished(tw_run_actions *ra, const char *job);
void tw_run_actions_resolve_ended(tw_run_actions *ra);

/* The actions' counters by type (actions.h); zeros when ra is NULL. */
void tw_run_actions_counters(const tw_run_actions *ra, tw_action_counters *out);

/* Shutdown: let queued sends finish for at most timeout_ms. TW_OK when
 * nothing was abandoned. */
int tw_run_actions_drain(tw_run_actions *ra, int64_t timeout_ms);

void tw_run_actions_free(tw_run_actions *ra);

#endif /* TW_RUN_ACTIONS_H */
