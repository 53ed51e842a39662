/*
 * action_internal.h - what the action files share (not a public API):
 * the typed action spec built from the config (action_config.c), the task
 * the dispatcher queues and retries (action_dispatch.c), and the request
 * builders per transport (action_http.c, action_smtp.c, action_local.c).
 *
 * Ownership: specs and their strings live in tw_actions' arena (secrets
 * included) until tw_actions_free(). A task and its strings are malloc'ed by
 * fire() and owned by the dispatcher; the builders attach transfer state to
 * the task (headers, body, response) and free it in tw_action_task_reset().
 */
#ifndef TW_ACTION_INTERNAL_H
#define TW_ACTION_INTERNAL_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "actions.h"
#include "arena.h"

typedef struct tw_aws_creds {
    const char *access_key_id;
    const char *secret_access_key; /* secret */
    const char *session_token;     /* secret; NULL when none */
} tw_aws_creds;

typedef struct tw_action_spec {
    tw_action_type type;
    const char *what; /* "rule 'R' action N" for logs */
    const char *rule_name;
    int index; /* 1-based position in the rule's list */
    int64_t timeout_us;
    int retries;        /* attempts after the first */
    int64_t backoff_us; /* first retry delay, doubled each time */
    int64_t backoff_max_us;
    int64_t repeat_after_us; /* notifications; 0 = once per rule and job */

    /* stop_training, sms */
    const char *region;
    const char *endpoint; /* no trailing '/' */
    const char *prefix;   /* stop_training; NULL = the job id */
    tw_aws_creds creds;
    /* webhook */
    const char *url;
    const char *hmac_secret; /* secret; NULL = no signature header */
    /* signal */
    int pid; /* 0 = read pid_file at send time */
    const char *pid_file;
    int signo;
    /* stop_file */
    const char *path;
    /* email */
    const char *smtp_url;
    const char *from;
    const char *to; /* comma-separated */
    const char *username;
    const char *password; /* secret */
    int use_tls;
    /* sms */
    const char *phone;
    const char *topic_arn; /* NULL: Publish with PhoneNumber */
    /* alertmanager (url: its base URL, no trailing '/') */
    const char *severity;
    const char *report_base; /* NULL: no report_url annotation */
    /* capture */
    const int *ranks; /* NULL / nranks 0: all ranks */
    size_t nranks;
    int steps;
    int64_t duration_us; /* > 0: capture for this long instead of steps */
    int trace, stacks;
    const char *topic;
    int64_t wait_us;
    int64_t min_interval_us;
} tw_action_spec;

/* Outcome of one attempt, decided by the transport. */
typedef enum {
    TW_ACT_DONE,  /* success */
    TW_ACT_RETRY, /* transient failure: retry if attempts are left */
    TW_ACT_FAIL,  /* permanent failure: do not retry */
    TW_ACT_NEXT,  /* one more request right away (ListTrainingJobs -> Stop) */
    TW_ACT_SKIP,  /* nothing to do (counted skipped) */
    TW_ACT_NONE   /* capture: rate limited (counted deduplicated) */
} tw_act_outcome;

typedef struct tw_action_task {
    struct tw_action_task *next;
    const tw_action_spec *spec;
    char *id; /* ledger id */
    char *job;
    char *rule;
    char *alert_id;
    char *finding;
    char *report;
    char *alert_json;
    char *am_alert;  /* alertmanager: the alert object (actions.h) */
    char *subject;   /* NULL: generic */
    char *mail_text; /* NULL: "Finding: " + finding */
    char *sms_text;  /* NULL: built from rule, job and finding */
    int64_t time_us;

    int claimed;      /* the ledger said send */
    int attempts;     /* started so far */
    int64_t due_ms;   /* monotonic ms of the next attempt */
    int stage;        /* stop_training: 0 = list by prefix, 1 = stop */
    char *job_name;   /* stop_training: the name to stop */
    char *next_token; /* stop_training: ListTrainingJobs page to ask next */
    int pages;        /* stop_training: ListTrainingJobs pages read */

    /* transfer state of the current attempt (reset between attempts) */
    CURL *easy;
    struct curl_slist *headers;
    struct curl_slist *rcpt;
    char *body;
    size_t body_len;
    size_t body_off; /* SMTP upload position */
    char *resp;
    size_t resp_len;
    char *resp_text; /* short description of the last failure, for logs */
    char errbuf[CURL_ERROR_SIZE];
} tw_action_task;

/* action_config.c: the typed specs of rule `rule_index`'s `actions:` list,
 * allocated in `arena`. */
int tw_action_specs_build(const tw_settings *items, size_t n,
                          const char *rule_name, tw_arena *arena,
                          tw_action_spec **out, char *err, size_t errlen);

/* action_http.c / action_smtp.c: set up t->easy (already created, with the
 * common options: timeout, private pointer, no signals) for one attempt. */
int tw_action_http_prepare(tw_action_task *t, char *err, size_t errlen);
tw_act_outcome tw_action_http_done(tw_action_task *t, CURLcode rc, long status);
int tw_action_smtp_prepare(tw_action_task *t, char *err, size_t errlen);
tw_act_outcome tw_action_smtp_done(tw_action_task *t, CURLcode rc, long status);

/* action_local.c: run a signal/stop_file action now (fast syscalls). */
tw_act_outcome tw_action_local_run(tw_action_task *t, char *msg, size_t msglen);

/* Free the transfer state of t (not the easy handle's ownership by multi:
 * the dispatcher removes it first). */
void tw_action_task_reset(tw_action_task *t);

/* Appends to t->resp (CURLOPT_WRITEFUNCTION with t as data); caps at 64 KiB. */
size_t tw_action_collect(char *data, size_t size, size_t n, void *ud);

/* Curl error or HTTP status -> retry policy shared by the HTTP transports. */
tw_act_outcome tw_action_http_classify(CURLcode rc, long status);

#endif /* TW_ACTION_INTERNAL_H */
