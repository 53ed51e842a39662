/*
 * actions.h - what happens when a rule finds an issue: stop the training job
 * (SageMaker StopTrainingJob, a webhook, a signal to a local PID or a stop
 * file), send an e-mail (SMTP) or an SMS (SNS Publish). Configured per rule
 * (`actions:` in the config, see action_config.c for the keys), validated at
 * load, dispatched off the consuming thread.
 *
 * Threads: tw_actions_fire() is called on the consuming thread and only
 * copies the event into a queue (a few µs); one worker thread owned by
 * tw_actions runs every request on a libcurl multi handle, with timeouts,
 * retries with exponential backoff and a cap, and logs each attempt and the
 * final outcome. A slow or dead endpoint never blocks fire().
 *
 * Once semantics: every send has a deterministic action id, claimed in a
 * ledger *before* the first attempt (at-most-once across restarts when the
 * ledger is the state store: SET NX). Ids:
 *   stop kinds (stop_training, signal, stop_file): "<job>/stop/<type>"
 *     -> at most once per job, whichever rule fires first;
 *   notifications (email, sms, webhook): "<job>/<rule>/<n>/<type>/once",
 *     or with `repeat_after: D` "<job>/<rule>/<n>/<type>/<event time / D>";
 *   alertmanager: "<job>/<rule>/<n>/alertmanager/<alert id>" (each alert
 *     and each resolution is posted once; Alertmanager merges them by
 *     their labels)
 *     plus an in-process minimum interval D between sends (event time).
 *   capture: "<job>/<rule>/<n>/capture/<alert id>" (one request per alert
 *     and action; the request's own id is "<alert id>-<n>"); handed to the
 *     capture callback of the options, which publishes it on the control
 *     topic and rate-limits per job (stream/run_capture.h).
 *
 * Ownership: tw_actions_new() copies everything it needs from the config
 * (the config may be freed afterwards) and reads secrets (AWS keys, SMTP
 * password, HMAC secret) from the environment or files at that moment;
 * secrets are never logged. fire() copies the event; the caller keeps its
 * strings. tw_actions_free() stops the worker (abandoning what is left) and
 * releases everything.
 */
#ifndef TW_ACTIONS_H
#define TW_ACTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef enum tw_action_type {
    TW_ACTION_STOP_TRAINING = 0,
    TW_ACTION_WEBHOOK,
    TW_ACTION_SIGNAL,
    TW_ACTION_STOP_FILE,
    TW_ACTION_EMAIL,
    TW_ACTION_SMS,
    TW_ACTION_ALERTMANAGER,
    TW_ACTION_CAPTURE,
    TW_ACTION_NTYPES
} tw_action_type;

/* "stop_training", "webhook", ... (the config's `type` values). */
const char *tw_action_type_name(tw_action_type t);

/* The once-ledger. Called on the worker thread before the first attempt of
 * a send. Returns 1: claimed now (send it); 0: claimed before (skip, counted
 * as deduplicated); TW_ERR: ledger unavailable (the send stays queued and
 * the claim is tried again after opt->ledger_retry_ms). */
typedef int (*tw_action_claim_fn)(void *ud, const char *action_id);
/* Called on the worker thread once a claimed send reaches its final
 * outcome (succeeded, failed, skipped or abandoned: each already counted),
 * so the ledger can stop treating the claim as possibly lost. */
typedef void (*tw_action_confirm_fn)(void *ud, const char *action_id);

/* A diagnostics capture to request from the training-side hooks (the
 * `capture` action). Strings are borrowed for the call only. */
typedef struct tw_capture_request {
    const char *request_id; /* "<alert id>-<action index>" */
    const char *job;
    const char *rule;       /* the configured rule */
    const char *alert_id;   /* the alert that fired it ("" when none) */
    const char *alert_json; /* that alert as published (may be NULL) */
    const int *ranks;       /* the ranks to capture; nranks 0: all */
    size_t nranks;
    int steps;               /* profile the next N steps ... */
    int64_t duration_us;     /* ... or, when > 0, this long */
    int trace, stacks;       /* what to capture */
    const char *topic;       /* the control topic */
    int64_t wait_us;         /* how long the ranks have to answer */
    int64_t min_interval_us; /* per job: at most one capture this often */
} tw_capture_request;

/* Called on the worker thread for each claimed capture. Returns 1:
 * requested (queued for publishing); 0: not sent, by the rate limit (msg
 * says why; counted deduplicated, as a repeat within repeat_after);
 * TW_ERR: failed (msg says why; retried as any transient failure). */
typedef int (*tw_action_capture_fn)(void *ud, const tw_capture_request *r,
                                    char *msg, size_t msglen);

typedef struct tw_actions_options {
    tw_action_claim_fn claim; /* NULL: an in-memory ledger (this process) */
    void *claim_ud;
    tw_action_confirm_fn confirm; /* NULL: none (uses claim_ud) */
    tw_action_capture_fn capture; /* NULL: capture actions are skipped */
    void *capture_ud;
    int64_t ledger_retry_ms; /* 0: 1000 */
    size_t max_queued;       /* 0: 10000; fire() beyond it drops, counted */
} tw_actions_options;

/* One rule firing, as the consuming thread sees it. Only job_id and
 * rule_index are required; strings are copied by fire(). */
typedef struct tw_action_event {
    const char *job_id;
    size_t rule_index;      /* index into cfg->rules */
    const char *alert_id;   /* deterministic alert id (may be NULL) */
    const char *finding;    /* one-line text for e-mail/SMS (may be NULL) */
    const char *subject;    /* e-mail subject (NULL: a generic one) */
    const char *mail_text;  /* e-mail body text, CRLF lines (NULL: finding) */
    const char *sms_text;   /* SNS message, <= 160 bytes (NULL: built from
                               rule, job and finding) */
    const char *report;     /* path or link to the report (may be NULL) */
    const char *alert_json; /* webhook body; NULL: a small JSON is built */
    const char *am_alert;   /* alertmanager: one alert of the v2 API as a
                               JSON object (labels without severity,
                               annotations, startsAt, endsAt); NULL: the
                               alertmanager actions of the rule skip it */
    int am_only;            /* queue only the rule's alertmanager actions (a
                               resolution at job end) */
    int64_t time_us;        /* event time (µs since the epoch) */
} tw_action_event;

typedef struct tw_action_type_counters {
    uint64_t fired;        /* sends queued by fire() */
    uint64_t attempts;     /* requests started (each retry is one) */
    uint64_t succeeded;    /* final outcome: done */
    uint64_t failed;       /* final outcome: gave up (retries spent,
                              permanent error, abandoned at shutdown) */
    uint64_t retried;      /* attempts scheduled again after a failure */
    uint64_t timed_out;    /* attempts that hit the timeout */
    uint64_t deduplicated; /* skipped: once semantics / ledger said sent */
    uint64_t skipped;      /* nothing to do (no or several jobs matched the
                              prefix, pid file missing, ...) */
} tw_action_type_counters;

typedef struct tw_action_counters {
    tw_action_type_counters type[TW_ACTION_NTYPES];
    uint64_t dropped;       /* fire() found the queue full */
    uint64_t ledger_errors; /* claims answered TW_ERR */
    uint64_t queued;        /* sends waiting or in flight now (gauge) */
} tw_action_counters;

typedef struct tw_actions tw_actions;

/* Validate every rule's actions of cfg and start the worker. On a config
 * error: TW_ERR with "FILE:LINE: rule 'R' action N: key 'K': ..." in err.
 * opt may be NULL (defaults). The worker thread starts here. */
int tw_actions_new(const tw_config *cfg, const tw_actions_options *opt,
                   tw_actions **out, char *err, size_t errlen);

/* Number of actions configured for rule i (0 when out of range). */
size_t tw_actions_count(const tw_actions *a, size_t rule_index);

/* Whether rule i has an action of type t. */
int tw_actions_has_type(const tw_actions *a, size_t rule_index,
                        tw_action_type t);

/* The distinct control topics of the configured capture actions, at most
 * max of them into out (borrowed until tw_actions_free); returns how many
 * there are. */
size_t tw_actions_capture_topics(const tw_actions *a, const char **out,
                                 size_t max);

/* Non-blocking: queue every action of ev->rule_index. TW_ERR when the event
 * is malformed (no job id, rule index out of range), after drain() began,
 * or when the queue is full (counted as dropped). */
int tw_actions_fire(tw_actions *a, const tw_action_event *ev);

/* A consistent-enough snapshot (each counter read atomically). */
void tw_actions_get_counters(const tw_actions *a, tw_action_counters *out);

/* Prometheus text exposition of c into buf (NUL-terminated, truncated to
 * len). Returns the length it needed. */
size_t tw_actions_format_metrics(const tw_action_counters *c, char *buf,
                                 size_t len);

/* Shutdown: stop accepting fire(), let queued and in-flight sends finish
 * (retries included) until the monotonic deadline (ms, tw_actions_now_ms()
 * clock); what is left then is abandoned (counted failed). TW_OK when
 * nothing was abandoned. */
int tw_actions_drain(tw_actions *a, int64_t deadline_ms);

/* Monotonic clock in ms, the one drain() deadlines use. */
int64_t tw_actions_now_ms(void);

void tw_actions_free(tw_actions *a);

#endif /* TW_ACTIONS_H */
