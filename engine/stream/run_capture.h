/*
 * run_capture.h - the engine's side of the `capture` action (actions.h):
 * diagnostics requested from the training-side hooks when a rule fires,
 * and the outcome recorded when they answer (or do not).
 *
 * Protocol (the control topic, `trainwatch.control` by default; key = the
 * job id; one JSON object per message, see README "Diagnostics capture"):
 *   engine -> hooks  {"type":"capture_request","request_id","job","rule",
 *                     "alert_id","ranks":[..]|"all","steps"|"seconds",
 *                     "what":["trace","stacks"],"wait_s"}
 *   hook -> engine   {"type":"capture_ack","request_id","job","rank",
 *                     "world_size","node","status","trace","stacks",
 *                     "error"}
 * JSON, not a FlatBuffers table: a request or an answer is a few hundred
 * bytes at most once per min_interval per job, read by a Python thread
 * (the json module, no generated code) and by people with kcat; the
 * metrics topic's volume argument for FlatBuffers does not apply.
 *
 * Outcome, per request, once every expected rank answered or `wait`
 * passed: "captured" (every expected rank answered), "rank unreachable"
 * (some answered, the ranks listed in `missing` did not), "timed out"
 * (none answered). Expected ranks: the action's `ranks`, or with all
 * ranks the world size the answers carry. It is logged, counted and
 * published on the alert topic as an alert of kind "capture": the
 * alert that fired the action with "kind": "capture", its own id and a
 * "capture" object (request id, the firing alert's id, outcome, the
 * artifact paths per rank; schemas/alert.schema.json).
 *
 * Rate limit: per job, at most one request per the action's min_interval
 * (monotonic clock of this process); later ones are refused (the action
 * counts them skipped). Idempotency: the action module claims
 * "<job>/<rule>/<n>/capture/<alert id>" once, the request id is
 * "<alert id>-<n>", and the hook ignores a request id it has seen.
 *
 * Threads: submit() is called on the action worker thread and only
 * queues under a mutex; one thread owned by this module publishes the
 * requests (its own producer), consumes the answers (its own consumer,
 * a group of its own per engine process, from the newest offset: it
 * subscribes at start, before any request) and publishes the outcomes.
 *
 * Ownership: new() copies its configuration; submit() copies the request.
 * free() stops the thread; requests still waiting are recorded as
 * abandoned (logged), not published.
 */
#ifndef TW_RUN_CAPTURE_H
#define TW_RUN_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "actions.h"

typedef struct tw_run_capture tw_run_capture;

typedef struct tw_run_capture_config {
    const char *brokers;
    const char *const *props; /* "key=value" librdkafka properties */
    size_t nprops;
    const char *alerts_topic;  /* where the outcomes go */
    const char *const *topics; /* the control topics to listen on */
    size_t ntopics;
    const char *group; /* the answers' consumer group (unique per process) */
} tw_run_capture_config;

typedef struct tw_capture_counters {
    uint64_t requested;    /* published on the control topic */
    uint64_t rate_limited; /* refused by min_interval */
    uint64_t captured;     /* outcome: every expected rank answered */
    uint64_t unreachable;  /* outcome: some ranks did not answer */
    uint64_t timed_out;    /* outcome: no rank answered */
    uint64_t answers;      /* answers matched to a waiting request */
    uint64_t bad_answers;  /* control messages that could not be read */
} tw_capture_counters;

int tw_run_capture_new(const tw_run_capture_config *cfg, tw_run_capture **out,
                       char *err, size_t errlen);

/* tw_action_capture_fn: 1 queued, 0 rate-limited, TW_ERR (msg). */
int tw_run_capture_submit(void *ud, const tw_capture_request *r, char *msg,
                          size_t msglen);

void tw_run_capture_counters(const tw_run_capture *c, tw_capture_counters *o);

void tw_run_capture_free(tw_run_capture *c);

#endif /* TW_RUN_CAPTURE_H */
