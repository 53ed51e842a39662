/*
 * action_dispatch.c - the action queue and its worker thread (actions.h).
 *
 * fire() (consuming thread) copies the event into one malloc'ed task per
 * action, appends them to the inbox under a mutex and wakes the worker with
 * curl_multi_wakeup(). The worker owns everything else: the pending list
 * (tasks waiting for their due time: new, retry backoff, ledger retry), the
 * transfers on the multi handle, the in-memory ledger and the repeat_after
 * times. Counters are atomics so any thread may read them.
 *
 * Ownership: a task belongs to the inbox until the worker takes it, then to
 * the worker until it is freed on its final outcome (or at shutdown).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "action_internal.h"
#include "clock.h"
#include "log.h"
#include "strmap.h"

enum {
    C_FIRED,
    C_ATTEMPTS,
    C_SUCCEEDED,
    C_FAILED,
    C_RETRIED,
    C_TIMED_OUT,
    C_DEDUP,
    C_SKIPPED,
    C_N
};

struct tw_actions {
    tw_arena arena;         /* specs and their strings (secrets included) */
    tw_action_spec **specs; /* per rule */
    size_t *nspecs;
    size_t nrules;
    tw_action_claim_fn claim;
    tw_action_confirm_fn confirm;
    void *claim_ud;
    tw_action_capture_fn capture;
    void *capture_ud;
    int64_t ledger_retry_ms;
    size_t max_queued;
    CURLM *multi;
    pthread_t thread;
    int thread_started;

    pthread_mutex_t mu; /* guards the inbox and the shutdown flags */
    tw_action_task *inbox, *inbox_tail;
    int draining;        /* drain() began: fire() refuses */
    int64_t deadline_ms; /* drain's deadline */
    int quit;            /* free() without drain: stop now */
    int abandoned;       /* set by the worker when it gave up tasks */

    /* worker only */
    tw_action_task *pending; /* waiting for due_ms, in arrival order */
    tw_action_task *pending_tail;
    tw_action_task *flying; /* on the multi handle */
    size_t inflight;
    tw_strmap ledger;   /* in-memory ledger: claimed ids */
    tw_strmap last_map; /* "<job>/<rule>/<n>" -> index into last_us */
    int64_t *last_us;   /* event time of the last claimed send */
    size_t nlast, caplast;

    _Atomic uint64_t c[TW_ACTION_NTYPES][C_N];
    _Atomic uint64_t dropped, ledger_errors, queued;
};

int64_t tw_actions_now_ms(void)
{
    return tw_mono_us() / 1000;
}

static void count(tw_actions *a, const tw_action_task *t, int which)
{
    atomic_fetch_add_explicit(&a->c[t->spec->type][which], 1,
                              memory_order_relaxed);
}

/* ---- tasks ---------------------------------------------------------- */

void tw_action_task_reset(tw_action_task *t)
{
    if (t->easy != NULL)
        curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    curl_slist_free_all(t->rcpt);
    free(t->body);
    free(t->resp);
    t->easy = NULL;
    t->headers = t->rcpt = NULL;
    t->body = t->resp = NULL;
    t->body_len = t->body_off = t->resp_len = 0;
    t->errbuf[0] = '\0';
}

/* Every end of a task goes through here; a claimed one has reached its
 * final, counted outcome. */
static void task_free(tw_actions *a, tw_action_task *t)
{
    if (t->claimed && a->confirm != NULL)
        a->confirm(a->claim_ud, t->id);
    tw_action_task_reset(t);
    free(t->job_name);
    free(t->next_token);
    free(t); /* the event strings live in the same block */
    atomic_fetch_sub_explicit(&a->queued, 1, memory_order_relaxed);
}

size_t tw_action_collect(char *data, size_t size, size_t n, void *ud)
{
    tw_action_task *t = ud;
    size_t len = size * n;
    size_t keep = t->resp_len >= 65536        ? 0
                  : len < 65536 - t->resp_len ? len
                                              : 65536 - t->resp_len;
    if (keep > 0) {
        char *p = realloc(t->resp, t->resp_len + keep + 1);
        if (p == NULL)
            return 0; /* aborts the transfer: counted as a failure */
        memcpy(p + t->resp_len, data, keep);
        t->resp = p;
        t->resp_len += keep;
        p[t->resp_len] = '\0';
    }
    return len;
}

/* Copies of the event's strings in one block after the task. */
static tw_action_task *task_new(const tw_action_spec *sp,
                                const tw_action_event *ev, const char *rule)
{
    char id[96 + 1024];
    const char *type = tw_action_type_name(sp->type);
    if (sp->type == TW_ACTION_STOP_TRAINING || sp->type == TW_ACTION_SIGNAL ||
        sp->type == TW_ACTION_STOP_FILE)
        snprintf(id, sizeof(id), "%s/stop/%s", ev->job_id, type);
    else if (sp->type == TW_ACTION_ALERTMANAGER ||
             sp->type == TW_ACTION_CAPTURE)
        snprintf(id, sizeof(id), "%s/%s/%d/%s/%s", ev->job_id, rule, sp->index,
                 type, ev->alert_id ? ev->alert_id : "once");
    else if (sp->repeat_after_us > 0)
        snprintf(id, sizeof(id), "%s/%s/%d/%s/%" PRId64, ev->job_id, rule,
                 sp->index, type, ev->time_us / sp->repeat_after_us);
    else
        snprintf(id, sizeof(id), "%s/%s/%d/%s/once", ev->job_id, rule,
                 sp->index, type);
    const char *src[] = {
        id,          ev->job_id,     rule,        ev->alert_id,  ev->finding,
        ev->report,  ev->alert_json, ev->subject, ev->mail_text, ev->sms_text,
        ev->am_alert};
    enum { NSRC = sizeof(src) / sizeof(src[0]) };
    size_t len[NSRC], total = 0;
    for (size_t i = 0; i < NSRC; i++) {
        len[i] = src[i] ? strlen(src[i]) + 1 : 0;
        total += len[i];
    }
    tw_action_task *t = calloc(1, sizeof(*t) + total);
    if (t == NULL)
        return NULL;
    char *p = (char *)(t + 1);
    char **dst[] = {&t->id,        &t->job,      &t->rule,       &t->alert_id,
                    &t->finding,   &t->report,   &t->alert_json, &t->subject,
                    &t->mail_text, &t->sms_text, &t->am_alert};
    for (size_t i = 0; i < NSRC; i++) {
        if (src[i] == NULL)
            continue;
        memcpy(p, src[i], len[i]);
        *dst[i] = p;
        p += len[i];
    }
    t->spec = sp;
    t->time_us = ev->time_us;
    return t;
}

/* ---- public: construction, fire, counters --------------------------- */

static void *worker(void *arg);

int tw_actions_new(const tw_config *cfg, const tw_actions_options *opt,
                   tw_actions **out, char *err, size_t errlen)
{
    *out = NULL;
    tw_actions *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    tw_arena_init(&a->arena);
    tw_strmap_init(&a->ledger);
    tw_strmap_init(&a->last_map);
    pthread_mutex_init(&a->mu, NULL);
    a->nrules = cfg->nrules;
    a->specs = tw_arena_alloc(&a->arena, (cfg->nrules + 1) * sizeof(*a->specs));
    a->nspecs = tw_arena_alloc(&a->arena, (cfg->nrules + 1) * sizeof(size_t));
    if (a->specs == NULL || a->nspecs == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < cfg->nrules; i++) {
        const tw_rule_spec *r = &cfg->rules[i];
        const char *name = r->name ? r->name : r->rule ? r->rule : r->entry;
        const tw_rule_actions *ra = cfg->actions ? &cfg->actions[i] : NULL;
        if (ra == NULL || ra->n == 0)
            continue;
        if (tw_action_specs_build(ra->items, ra->n, name ? name : "(rule)",
                                  &a->arena, &a->specs[i], err,
                                  errlen) != TW_OK)
            goto fail;
        a->nspecs[i] = ra->n;
    }
    a->claim = opt ? opt->claim : NULL;
    a->claim_ud = opt ? opt->claim_ud : NULL;
    a->confirm = opt ? opt->confirm : NULL;
    a->capture = opt ? opt->capture : NULL;
    a->capture_ud = opt ? opt->capture_ud : NULL;
    a->ledger_retry_ms =
        opt && opt->ledger_retry_ms > 0 ? opt->ledger_retry_ms : 1000;
    a->max_queued = opt && opt->max_queued > 0 ? opt->max_queued : 10000;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "actions: curl_global_init failed");
        goto fail;
    }
    a->multi = curl_multi_init();
    if (a->multi == NULL) {
        curl_global_cleanup();
        snprintf(err, errlen, "actions: curl_multi_init failed");
        goto fail;
    }
    int rc = pthread_create(&a->thread, NULL, worker, a);
    if (rc != 0) {
        snprintf(err, errlen, "actions: cannot start the worker thread: %s",
                 strerror(rc));
        curl_multi_cleanup(a->multi);
        curl_global_cleanup();
        a->multi = NULL;
        goto fail;
    }
    a->thread_started = 1;
    *out = a;
    return TW_OK;
fail:
    tw_strmap_free(&a->ledger);
    tw_strmap_free(&a->last_map);
    pthread_mutex_destroy(&a->mu);
    tw_arena_free(&a->arena);
    free(a);
    return TW_ERR;
}

size_t tw_actions_count(const tw_actions *a, size_t rule_index)
{
    return rule_index < a->nrules ? a->nspecs[rule_index] : 0;
}

int tw_actions_has_type(const tw_actions *a, size_t rule_index,
                        tw_action_type t)
{
    for (size_t i = 0; rule_index < a->nrules && i < a->nspecs[rule_index]; i++)
        if (a->specs[rule_index][i].type == t)
            return 1;
    return 0;
}

size_t tw_actions_capture_topics(const tw_actions *a, const char **out,
                                 size_t max)
{
    size_t n = 0;
    for (size_t r = 0; r < a->nrules; r++)
        for (size_t i = 0; i < a->nspecs[r]; i++) {
            const tw_action_spec *sp = &a->specs[r][i];
            if (sp->type != TW_ACTION_CAPTURE)
                continue;
            int seen = 0;
            for (size_t k = 0; k < n && k < max; k++)
                seen |= strcmp(out[k], sp->topic) == 0;
            if (seen)
                continue;
            if (n < max)
                out[n] = sp->topic;
            n++;
        }
    return n;
}

int tw_actions_fire(tw_actions *a, const tw_action_event *ev)
{
    if (ev == NULL || ev->job_id == NULL || ev->rule_index >= a->nrules)
        return TW_ERR;
    size_t n = a->nspecs[ev->rule_index];
    if (n == 0)
        return TW_OK;
    const tw_action_spec *specs = a->specs[ev->rule_index];
    if (atomic_load_explicit(&a->queued, memory_order_relaxed) + n >
        a->max_queued) {
        atomic_fetch_add(&a->dropped, n);
        return TW_ERR;
    }
    tw_action_task *head = NULL, *tail = NULL;
    size_t queued = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev->am_only && specs[i].type != TW_ACTION_ALERTMANAGER)
            continue;
        queued++;
        tw_action_task *t = task_new(&specs[i], ev, specs[i].rule_name);
        if (t == NULL) {
            while (head != NULL) {
                tw_action_task *next = head->next;
                free(head);
                head = next;
            }
            atomic_fetch_add(&a->dropped, n);
            return TW_ERR;
        }
        if (tail != NULL)
            tail->next = t;
        else
            head = t;
        tail = t;
    }
    if (head == NULL)
        return TW_OK;
    n = queued;
    pthread_mutex_lock(&a->mu);
    int refused = a->draining || a->quit;
    if (!refused) {
        if (a->inbox_tail != NULL)
            a->inbox_tail->next = head;
        else
            a->inbox = head;
        a->inbox_tail = tail;
        atomic_fetch_add_explicit(&a->queued, n, memory_order_relaxed);
        for (const tw_action_task *t = head; t != NULL; t = t->next)
            atomic_fetch_add_explicit(&a->c[t->spec->type][C_FIRED], 1,
                                      memory_order_relaxed);
    }
    pthread_mutex_unlock(&a->mu);
    if (refused) {
        while (head != NULL) {
            tw_action_task *next = head->next;
            free(head);
            head = next;
        }
        atomic_fetch_add(&a->dropped, n);
        return TW_ERR;
    }
    curl_multi_wakeup(a->multi);
    return TW_OK;
}

void tw_actions_get_counters(const tw_actions *a, tw_action_counters *out)
{
    tw_actions *m = (tw_actions *)a; /* atomics: loads only */
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < TW_ACTION_NTYPES; i++) {
        tw_action_type_counters *c = &out->type[i];
        c->fired = atomic_load(&m->c[i][C_FIRED]);
        c->attempts = atomic_load(&m->c[i][C_ATTEMPTS]);
        c->succeeded = atomic_load(&m->c[i][C_SUCCEEDED]);
        c->failed = atomic_load(&m->c[i][C_FAILED]);
        c->retried = atomic_load(&m->c[i][C_RETRIED]);
        c->timed_out = atomic_load(&m->c[i][C_TIMED_OUT]);
        c->deduplicated = atomic_load(&m->c[i][C_DEDUP]);
        c->skipped = atomic_load(&m->c[i][C_SKIPPED]);
    }
    out->dropped = atomic_load(&m->dropped);
    out->ledger_errors = atomic_load(&m->ledger_errors);
    out->queued = atomic_load(&m->queued);
}

size_t tw_actions_format_metrics(const tw_action_counters *c, char *buf,
                                 size_t len)
{
    static const char *const names[] = {"fired",        "attempts", "succeeded",
                                        "failed",       "retried",  "timed_out",
                                        "deduplicated", "skipped"};
    size_t used = 0;
#define EMIT(...)                                                              \
    do {                                                                       \
        int w_ = snprintf(buf ? buf + (used < len ? used : len) : NULL,        \
                          used < len ? len - used : 0, __VA_ARGS__);           \
        if (w_ > 0)                                                            \
            used += (size_t)w_;                                                \
    } while (0)
    for (int k = 0; k < C_N; k++) {
        EMIT("# TYPE trainwatch_actions_%s_total counter\n", names[k]);
        for (int i = 0; i < TW_ACTION_NTYPES; i++) {
            const tw_action_type_counters *t = &c->type[i];
            const uint64_t v[] = {t->fired,        t->attempts, t->succeeded,
                                  t->failed,       t->retried,  t->timed_out,
                                  t->deduplicated, t->skipped};
            EMIT("trainwatch_actions_%s_total{type=\"%s\"} %" PRIu64 "\n",
                 names[k], tw_action_type_name((tw_action_type)i), v[k]);
        }
    }
    EMIT("# TYPE trainwatch_actions_dropped_total counter\n"
         "trainwatch_actions_dropped_total %" PRIu64 "\n",
         c->dropped);
    EMIT("# TYPE trainwatch_actions_ledger_errors_total counter\n"
         "trainwatch_actions_ledger_errors_total %" PRIu64 "\n",
         c->ledger_errors);
    EMIT("# TYPE trainwatch_actions_queued gauge\n"
         "trainwatch_actions_queued %" PRIu64 "\n",
         c->queued);
#undef EMIT
    return used;
}

/* ---- worker ----------------------------------------------------------- */

/* Append: tasks due together start in the order they were fired, which
 * repeat_after relies on (it compares event times). */
static void pending_push(tw_actions *a, tw_action_task *t)
{
    t->next = NULL;
    if (a->pending_tail != NULL)
        a->pending_tail->next = t;
    else
        a->pending = t;
    a->pending_tail = t;
}

static void log_final(tw_log_level lvl, const tw_action_task *t,
                      const char *outcome, const char *msg)
{
    tw_log(lvl, "action %s (%s, %s, job '%s'): %s after %d attempt%s%s%s",
           t->id, tw_action_type_name(t->spec->type), t->spec->what, t->job,
           outcome, t->attempts, t->attempts == 1 ? "" : "s",
           msg && *msg ? ": " : "", msg ? msg : "");
}

static void outcome(tw_actions *a, tw_action_task *t, tw_act_outcome o,
                    const char *msg)
{
    const tw_action_spec *sp = t->spec;
    int64_t now = tw_actions_now_ms();
    switch (o) {
    case TW_ACT_DONE:
        count(a, t, C_SUCCEEDED);
        log_final(TW_LOG_INFO, t, "succeeded", msg);
        task_free(a, t);
        return;
    case TW_ACT_SKIP:
        count(a, t, C_SKIPPED);
        log_final(TW_LOG_WARN, t, "nothing to do", msg);
        task_free(a, t);
        return;
    case TW_ACT_NEXT: /* the next request of the same send, right away */
        tw_action_task_reset(t);
        t->due_ms = now;
        pending_push(a, t);
        return;
    case TW_ACT_RETRY:
        if (t->attempts <= sp->retries) {
            int64_t d = sp->backoff_us;
            for (int i = 1; i < t->attempts && d < sp->backoff_max_us; i++)
                d *= 2;
            if (d > sp->backoff_max_us)
                d = sp->backoff_max_us;
            count(a, t, C_RETRIED);
            tw_log(TW_LOG_WARN,
                   "action %s (%s, %s, job '%s'): attempt %d/%d failed: %s; "
                   "retry in %.3fs",
                   t->id, tw_action_type_name(sp->type), sp->what, t->job,
                   t->attempts, sp->retries + 1, msg ? msg : "?", d / 1e6);
            tw_action_task_reset(t);
            t->due_ms = now + d / 1000;
            pending_push(a, t);
            return;
        }
        __attribute__((fallthrough)); /* retries spent */
    case TW_ACT_FAIL:
    default:
        count(a, t, C_FAILED);
        log_final(TW_LOG_ERROR, t, "failed", msg);
        task_free(a, t);
        return;
    }
}

/* The repeat_after gate: 1 when this notification is too soon after the
 * last one claimed for (job, rule, action) in this process. */
static int too_soon(tw_actions *a, const tw_action_task *t, int record)
{
    const tw_action_spec *sp = t->spec;
    if (sp->repeat_after_us <= 0)
        return 0;
    char key[1200];
    int n = snprintf(key, sizeof(key), "%s/%s/%d", t->job, t->rule, sp->index);
    size_t len = n < (int)sizeof(key) ? (size_t)n : sizeof(key) - 1;
    uint32_t ix;
    if (tw_strmap_get(&a->last_map, key, len, &ix)) {
        if (!record)
            return t->time_us < a->last_us[ix] + sp->repeat_after_us;
        a->last_us[ix] = t->time_us;
        return 0;
    }
    if (!record)
        return 0;
    if (a->nlast == a->caplast) {
        size_t cap = a->caplast ? a->caplast * 2 : 64;
        int64_t *p = realloc(a->last_us, cap * sizeof(*p));
        if (p == NULL)
            return 0;
        a->last_us = p;
        a->caplast = cap;
    }
    if (tw_strmap_put(&a->last_map, key, len, (uint32_t)a->nlast) != TW_OK)
        return 0;
    a->last_us[a->nlast++] = t->time_us;
    return 0;
}

/* 1 = send, 0 = skip (freed), -1 = ledger down (requeued). */
static int claim(tw_actions *a, tw_action_task *t)
{
    if (too_soon(a, t, 0)) {
        count(a, t, C_DEDUP);
        tw_log(TW_LOG_DEBUG, "action %s: within repeat_after of the last send",
               t->id);
        task_free(a, t);
        return 0;
    }
    int r;
    if (a->claim != NULL)
        r = a->claim(a->claim_ud, t->id);
    else {
        size_t len = strlen(t->id);
        uint32_t v;
        if (tw_strmap_get(&a->ledger, t->id, len, &v))
            r = 0;
        else
            r = tw_strmap_put(&a->ledger, t->id, len, 1) == TW_OK ? 1 : TW_ERR;
    }
    if (r == 1) {
        t->claimed = 1;
        too_soon(a, t, 1);
        return 1;
    }
    if (r == 0) {
        count(a, t, C_DEDUP);
        too_soon(a, t, 1);
        tw_log(TW_LOG_DEBUG, "action %s: already sent (ledger)", t->id);
        task_free(a, t);
        return 0;
    }
    atomic_fetch_add(&a->ledger_errors, 1);
    tw_log(TW_LOG_WARN,
           "action %s: the action ledger is unavailable; "
           "retrying the claim in %" PRId64 " ms",
           t->id, a->ledger_retry_ms);
    t->due_ms = tw_actions_now_ms() + a->ledger_retry_ms;
    pending_push(a, t);
    return -1;
}

/* A capture: handed to the capture callback, which only queues. */
static tw_act_outcome capture_run(tw_actions *a, const tw_action_task *t,
                                  char *msg, size_t msglen)
{
    const tw_action_spec *sp = t->spec;
    if (a->capture == NULL) {
        snprintf(msg, msglen, "no control channel (capture needs `run`)");
        return TW_ACT_SKIP;
    }
    char rid[1100];
    snprintf(rid, sizeof(rid), "%s-%d", t->alert_id ? t->alert_id : "once",
             sp->index);
    tw_capture_request r = {.request_id = rid,
                            .job = t->job,
                            .rule = t->rule,
                            .alert_id = t->alert_id ? t->alert_id : "",
                            .alert_json = t->alert_json,
                            .ranks = sp->ranks,
                            .nranks = sp->nranks,
                            .steps = sp->steps,
                            .duration_us = sp->duration_us,
                            .trace = sp->trace,
                            .stacks = sp->stacks,
                            .topic = sp->topic,
                            .wait_us = sp->wait_us,
                            .min_interval_us = sp->min_interval_us};
    int rc = a->capture(a->capture_ud, &r, msg, msglen);
    return rc == 1 ? TW_ACT_DONE : rc == 0 ? TW_ACT_NONE : TW_ACT_RETRY;
}

static void start(tw_actions *a, tw_action_task *t)
{
    if (!t->claimed && claim(a, t) != 1)
        return;
    const tw_action_spec *sp = t->spec;
    t->attempts++;
    count(a, t, C_ATTEMPTS);
    char msg[512] = "";
    if (sp->type == TW_ACTION_ALERTMANAGER && t->am_alert == NULL) {
        outcome(a, t, TW_ACT_SKIP, "no alert for Alertmanager in this event");
        return;
    }
    if (sp->type == TW_ACTION_CAPTURE) {
        tw_act_outcome o = capture_run(a, t, msg, sizeof(msg));
        if (o == TW_ACT_NONE) { /* rate limited: a repeat, as repeat_after */
            count(a, t, C_DEDUP);
            tw_log(TW_LOG_DEBUG, "action %s: %s", t->id, msg);
            task_free(a, t);
            return;
        }
        outcome(a, t, o, msg);
        return;
    }
    if (sp->type == TW_ACTION_SIGNAL || sp->type == TW_ACTION_STOP_FILE) {
        tw_act_outcome o = tw_action_local_run(t, msg, sizeof(msg));
        outcome(a, t, o, msg);
        return;
    }
    t->easy = curl_easy_init();
    if (t->easy == NULL) {
        outcome(a, t, TW_ACT_RETRY, "curl_easy_init failed");
        return;
    }
    long ms = (long)(sp->timeout_us / 1000);
    curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
    curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->easy, CURLOPT_VERBOSE, 0L); /* never dump headers */
    curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, tw_action_collect);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
    int rc = sp->type == TW_ACTION_EMAIL
                 ? tw_action_smtp_prepare(t, msg, sizeof(msg))
                 : tw_action_http_prepare(t, msg, sizeof(msg));
    if (rc != TW_OK) {
        outcome(a, t, TW_ACT_FAIL, msg);
        return;
    }
    if (curl_multi_add_handle(a->multi, t->easy) != CURLM_OK) {
        outcome(a, t, TW_ACT_RETRY, "curl_multi_add_handle failed");
        return;
    }
    a->inflight++;
    t->next = a->flying;
    a->flying = t;
    tw_log(TW_LOG_DEBUG, "action %s (%s, %s, job '%s'): attempt %d/%d started",
           t->id, tw_action_type_name(sp->type), sp->what, t->job, t->attempts,
           sp->retries + 1);
}

static void finish(tw_actions *a, CURL *easy, CURLcode rc)
{
    tw_action_task *t = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t);
    curl_multi_remove_handle(a->multi, easy);
    a->inflight--;
    for (tw_action_task **pp = &a->flying; *pp != NULL; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    t->next = NULL;
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        count(a, t, C_TIMED_OUT);
    tw_act_outcome o = t->spec->type == TW_ACTION_EMAIL
                           ? tw_action_smtp_done(t, rc, status)
                           : tw_action_http_done(t, rc, status);
    char msg[512];
    if (rc != CURLE_OK)
        snprintf(msg, sizeof(msg), "%s",
                 t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc));
    else
        snprintf(msg, sizeof(msg), "status %ld%s%s", status,
                 t->resp_text ? ": " : "", t->resp_text ? t->resp_text : "");
    free(t->resp_text);
    t->resp_text = NULL;
    outcome(a, t, o, msg);
}

static void abandon_all(tw_actions *a, const char *why)
{
    int n = 0;
    tw_action_task *lists[2] = {a->flying, a->pending};
    a->flying = a->pending = a->pending_tail = NULL;
    for (int k = 0; k < 2; k++)
        while (lists[k] != NULL) {
            tw_action_task *t = lists[k];
            lists[k] = t->next;
            if (k == 0) {
                curl_multi_remove_handle(a->multi, t->easy);
                a->inflight--;
            }
            count(a, t, C_FAILED);
            log_final(TW_LOG_ERROR, t, why, NULL);
            task_free(a, t);
            n++;
        }
    pthread_mutex_lock(&a->mu);
    tw_action_task *t = a->inbox; /* fired after the worker's last look */
    a->inbox = a->inbox_tail = NULL;
    if (n > 0 || t != NULL)
        a->abandoned = 1;
    pthread_mutex_unlock(&a->mu);
    while (t != NULL) {
        tw_action_task *next = t->next;
        count(a, t, C_FAILED);
        log_final(TW_LOG_ERROR, t, why, NULL);
        task_free(a, t);
        t = next;
    }
}

static void *worker(void *arg)
{
    tw_actions *a = arg;
    for (;;) {
        pthread_mutex_lock(&a->mu);
        tw_action_task *in = a->inbox;
        a->inbox = a->inbox_tail = NULL;
        int draining = a->draining, quit = a->quit;
        int64_t deadline = a->deadline_ms;
        pthread_mutex_unlock(&a->mu);
        int64_t now = tw_actions_now_ms();
        while (in != NULL) {
            tw_action_task *next = in->next;
            in->due_ms = now;
            pending_push(a, in);
            in = next;
        }
        if (quit) {
            abandon_all(a, "abandoned (shut down)");
            break;
        }
        if (draining && a->pending == NULL && a->inflight == 0)
            break;
        if (draining && now >= deadline) {
            abandon_all(a, "abandoned at the drain deadline");
            break;
        }
        /* start what is due, in order; start() may push onto pending again
         * (ledger retry, local retry), so detach the list first */
        tw_action_task *list = a->pending;
        a->pending = a->pending_tail = NULL;
        tw_action_task *due = NULL, **due_tail = &due;
        while (list != NULL) {
            tw_action_task *t = list;
            list = t->next;
            t->next = NULL;
            if (t->due_ms <= now) {
                *due_tail = t;
                due_tail = &t->next;
            } else
                pending_push(a, t);
        }
        while (due != NULL) {
            tw_action_task *t = due;
            due = t->next;
            t->next = NULL;
            start(a, t);
        }
        int running = 0;
        curl_multi_perform(a->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(a->multi, &left)) != NULL)
            if (m->msg == CURLMSG_DONE)
                finish(a, m->easy_handle, m->data.result);
        /* sleep until the next due time, a transfer event or a wakeup */
        int64_t wait = 1000;
        now = tw_actions_now_ms();
        for (tw_action_task *t = a->pending; t != NULL; t = t->next)
            if (t->due_ms - now < wait)
                wait = t->due_ms - now;
        if (draining && deadline - now < wait)
            wait = deadline - now;
        if (wait < 0)
            wait = 0;
        curl_multi_poll(a->multi, NULL, 0, (int)wait, NULL);
    }
    return NULL;
}

static void stop_worker(tw_actions *a)
{
    if (!a->thread_started)
        return;
    curl_multi_wakeup(a->multi);
    pthread_join(a->thread, NULL);
    a->thread_started = 0;
}

int tw_actions_drain(tw_actions *a, int64_t deadline_ms)
{
    pthread_mutex_lock(&a->mu);
    a->draining = 1;
    a->deadline_ms = deadline_ms;
    pthread_mutex_unlock(&a->mu);
    stop_worker(a);
    pthread_mutex_lock(&a->mu);
    int abandoned = a->abandoned;
    pthread_mutex_unlock(&a->mu);
    return abandoned ? TW_ERR : TW_OK;
}

void tw_actions_free(tw_actions *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    a->quit = 1;
    pthread_mutex_unlock(&a->mu);
    stop_worker(a);
    curl_multi_cleanup(a->multi);
    curl_global_cleanup();
    tw_strmap_free(&a->ledger);
    tw_strmap_free(&a->last_map);
    free(a->last_us);
    pthread_mutex_destroy(&a->mu);
    tw_arena_free(&a->arena);
    free(a);
}
