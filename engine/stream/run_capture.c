/* run_capture.c - capture requests out, answers in, outcomes recorded
 * (run_capture.h). */
#include "run_capture.h"

#include <inttypes.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "hash.h"
#include "kafka_producer.h"
#include "log.h"
#include "tw_assert.h"

#define TW_CAP_MAX_RANKS 4096 /* answers kept per request */

/* One request, from submit() to its outcome. */
typedef struct tw_cap_req {
    struct tw_cap_req *next;
    char *request_id, *job, *rule, *alert_id, *topic;
    char *alert_json; /* NULL: none */
    int *ranks;       /* NULL: all */
    size_t nranks;
    int steps;
    int64_t duration_us;
    int trace, stacks;
    int64_t wait_us;
    /* worker only */
    int64_t sent_us;     /* monotonic, when published */
    int64_t deadline_us; /* monotonic */
    json_t *answers;     /* array of the answers' objects */
    int world_size;      /* largest seen in an answer; 0: none */
} tw_cap_req;

/* The last request time of a job (rate limit). */
typedef struct tw_cap_last {
    char *job;
    int64_t at_us;
} tw_cap_last;

struct tw_run_capture {
    tw_producer *producer; /* worker only */
    rd_kafka_t *consumer;  /* worker only */
    char *alerts_topic;
    pthread_t thread;
    int started;

    pthread_mutex_t mu; /* guards inbox, quit, last */
    tw_cap_req *inbox, *inbox_tail;
    int quit;
    tw_cap_last *last;
    size_t nlast, caplast;

    tw_cap_req *waiting; /* worker only: published, not yet decided */

    _Atomic uint64_t requested, rate_limited, captured, unreachable, timed_out,
        answers, bad_answers;
};

/* ---- requests ------------------------------------------------------------ */

static void req_free(tw_cap_req *q)
{
    if (q == NULL)
        return;
    free(q->request_id);
    free(q->job);
    free(q->rule);
    free(q->alert_id);
    free(q->topic);
    free(q->alert_json);
    free(q->ranks);
    json_decref(q->answers);
    free(q);
}

static tw_cap_req *req_copy(const tw_capture_request *r)
{
    tw_cap_req *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return NULL;
    q->request_id = strdup(r->request_id);
    q->job = strdup(r->job);
    q->rule = strdup(r->rule ? r->rule : "");
    q->alert_id = strdup(r->alert_id ? r->alert_id : "");
    q->topic = strdup(r->topic);
    q->alert_json = r->alert_json ? strdup(r->alert_json) : NULL;
    q->answers = json_array();
    if (r->nranks > 0) {
        q->ranks = malloc(r->nranks * sizeof(*q->ranks));
        if (q->ranks != NULL)
            memcpy(q->ranks, r->ranks, r->nranks * sizeof(*q->ranks));
        q->nranks = r->nranks;
    }
    q->steps = r->steps;
    q->duration_us = r->duration_us;
    q->trace = r->trace;
    q->stacks = r->stacks;
    q->wait_us = r->wait_us;
    if (!q->request_id || !q->job || !q->rule || !q->alert_id || !q->topic ||
        (r->alert_json && !q->alert_json) || !q->answers ||
        (r->nranks > 0 && q->ranks == NULL)) {
        req_free(q);
        return NULL;
    }
    return q;
}

/* 1 when job may have a capture now (and records now), 0 when its last
 * one is within min_interval. Under c->mu. */
static int rate_ok(tw_run_capture *c, const char *job, int64_t min_interval,
                   int64_t now, int64_t *ago)
{
    for (size_t i = 0; i < c->nlast; i++)
        if (strcmp(c->last[i].job, job) == 0) {
            *ago = now - c->last[i].at_us;
            if (min_interval > 0 && *ago < min_interval)
                return 0;
            c->last[i].at_us = now;
            return 1;
        }
    if (c->nlast == c->caplast) {
        size_t cap = c->caplast ? c->caplast * 2 : 16;
        tw_cap_last *p = realloc(c->last, cap * sizeof(*p));
        if (p == NULL)
            return -1;
        c->last = p;
        c->caplast = cap;
    }
    char *j = strdup(job);
    if (j == NULL)
        return -1;
    c->last[c->nlast].job = j;
    c->last[c->nlast++].at_us = now;
    return 1;
}

int tw_run_capture_submit(void *ud, const tw_capture_request *r, char *msg,
                          size_t msglen)
{
    tw_run_capture *c = ud;
    TW_ASSERT(c != NULL && r != NULL);
    tw_cap_req *q = req_copy(r);
    if (q == NULL) {
        snprintf(msg, msglen, "capture %s: out of memory", r->request_id);
        return TW_ERR;
    }
    int64_t now = tw_mono_us(), ago = 0;
    pthread_mutex_lock(&c->mu);
    int ok = rate_ok(c, r->job, r->min_interval_us, now, &ago);
    if (ok == 1) {
        if (c->inbox_tail != NULL)
            c->inbox_tail->next = q;
        else
            c->inbox = q;
        c->inbox_tail = q;
    }
    pthread_mutex_unlock(&c->mu);
    if (ok == 1) {
        snprintf(msg, msglen, "capture %s requested on '%s'", r->request_id,
                 r->topic);
        return 1;
    }
    req_free(q);
    if (ok < 0) {
        snprintf(msg, msglen, "capture %s: out of memory", r->request_id);
        return TW_ERR;
    }
    atomic_fetch_add(&c->rate_limited, 1);
    snprintf(msg, msglen,
             "capture %s: rate limited (job '%s' had one %.1f s ago; "
             "min_interval %.1f s)",
             r->request_id, r->job, ago / 1e6, r->min_interval_us / 1e6);
    return 0;
}

/* ---- worker: publish, answers, outcomes -------------------------------- */

static void publish_request(tw_run_capture *c, tw_cap_req *q)
{
    json_t *o = json_object();
    json_t *ranks;
    if (q->ranks == NULL)
        ranks = json_string("all");
    else {
        ranks = json_array();
        for (size_t i = 0; i < q->nranks; i++)
            json_array_append_new(ranks, json_integer(q->ranks[i]));
    }
    json_t *what = json_array();
    if (q->trace)
        json_array_append_new(what, json_string("trace"));
    if (q->stacks)
        json_array_append_new(what, json_string("stacks"));
    json_object_set_new(o, "type", json_string("capture_request"));
    json_object_set_new(o, "request_id", json_string(q->request_id));
    json_object_set_new(o, "job", json_string(q->job));
    json_object_set_new(o, "rule", json_string(q->rule));
    json_object_set_new(o, "alert_id", json_string(q->alert_id));
    json_object_set_new(o, "ranks", ranks);
    if (q->duration_us > 0)
        json_object_set_new(o, "seconds", json_real(q->duration_us / 1e6));
    else
        json_object_set_new(o, "steps", json_integer(q->steps));
    json_object_set_new(o, "what", what);
    json_object_set_new(o, "wait_s", json_real(q->wait_us / 1e6));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    char err[512];
    q->sent_us = tw_mono_us();
    q->deadline_us = q->sent_us + q->wait_us;
    if (text == NULL ||
        tw_producer_send(c->producer, q->topic, q->job, text, strlen(text),
                         NULL, 0, err, sizeof(err)) != 0) {
        /* still waited for: a hook may have seen nothing; timed out then */
        tw_log(TW_LOG_ERROR,
               "capture %s (job '%s'): cannot publish on '%s': %s",
               q->request_id, q->job, q->topic, text ? err : "out of memory");
    } else {
        atomic_fetch_add(&c->requested, 1);
        tw_log(TW_LOG_INFO,
               "capture %s (job '%s', rule '%s'): requested on '%s' (ranks "
               "%s, wait %.0f s)",
               q->request_id, q->job, q->rule, q->topic,
               q->ranks ? "listed" : "all", q->wait_us / 1e6);
    }
    free(text);
    q->next = c->waiting;
    c->waiting = q;
}

static int answered(const tw_cap_req *q, int rank)
{
    size_t i;
    json_t *a;
    json_array_foreach(q->answers, i, a)
    {
        if (json_integer_value(json_object_get(a, "rank")) == rank)
            return 1;
    }
    return 0;
}

/* The ranks expected and not answered, as a JSON array; *nexp: how many
 * are expected (0 when unknown: all ranks and no answer). */
static json_t *missing_ranks(const tw_cap_req *q, size_t *nexp)
{
    json_t *m = json_array();
    if (q->ranks != NULL) {
        *nexp = q->nranks;
        for (size_t i = 0; i < q->nranks; i++)
            if (!answered(q, q->ranks[i]))
                json_array_append_new(m, json_integer(q->ranks[i]));
    } else {
        *nexp = (size_t)q->world_size;
        for (int r = 0; r < q->world_size && r < TW_CAP_MAX_RANKS; r++)
            if (!answered(q, r))
                json_array_append_new(m, json_integer(r));
    }
    return m;
}

/* The alert id of a capture outcome: 128-bit FNV-1a-like pair of 64-bit
 * hashes of "tw-capture-1" NUL request id, as 32 hex digits. */
static void capture_id(const char *request_id, char out[33])
{
    static const char tag[] = "tw-capture-1";
    uint64_t h1 = tw_fnv1a64(tag, sizeof(tag));
    h1 = tw_fnv1a64_update(h1, request_id, strlen(request_id));
    uint64_t h2 = tw_fnv1a64_update(h1 ^ 0x9e3779b97f4a7c15ULL, request_id,
                                    strlen(request_id));
    snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, h1, h2);
}

static void decide(tw_run_capture *c, tw_cap_req *q, int64_t now)
{
    size_t nexp = 0;
    json_t *missing = missing_ranks(q, &nexp);
    size_t nans = json_array_size(q->answers);
    const char *outcome = nans == 0                      ? "timed out"
                          : json_array_size(missing) > 0 ? "rank unreachable"
                                                         : "captured";
    atomic_fetch_add(nans == 0                      ? &c->timed_out
                     : json_array_size(missing) > 0 ? &c->unreachable
                                                    : &c->captured,
                     1);
    char *miss = json_dumps(missing, JSON_COMPACT);
    tw_log(nans == 0 || json_array_size(missing) ? TW_LOG_WARN : TW_LOG_INFO,
           "capture %s (job '%s', rule '%s'): %s after %.1f s: %zu rank(s) "
           "answered%s%s",
           q->request_id, q->job, q->rule, outcome, (now - q->sent_us) / 1e6,
           nans, json_array_size(missing) ? ", missing " : "",
           json_array_size(missing) && miss ? miss : "");
    free(miss);

    json_t *alert = NULL;
    if (q->alert_json != NULL)
        alert = json_loads(q->alert_json, 0, NULL);
    if (!json_is_object(alert)) {
        json_decref(alert);
        alert = json_object();
        json_object_set_new(alert, "job", json_string(q->job));
        json_object_set_new(alert, "rule", json_string(q->rule));
    }
    char id[33];
    capture_id(q->request_id, id);
    json_t *cap = json_object();
    json_object_set_new(cap, "request_id", json_string(q->request_id));
    json_object_set_new(cap, "alert_id", json_string(q->alert_id));
    json_object_set_new(cap, "outcome", json_string(outcome));
    json_object_set_new(cap, "elapsed_s",
                        json_real((double)(now - q->sent_us) / 1e6));
    json_object_set(cap, "ranks", q->answers);
    json_object_set_new(cap, "missing", missing);
    if (nexp > 0)
        json_object_set_new(cap, "expected", json_integer((json_int_t)nexp));
    json_object_set_new(alert, "id", json_string(id));
    json_object_set_new(alert, "kind", json_string("capture"));
    json_object_set_new(alert, "capture", cap);
    char *text = json_dumps(alert, JSON_COMPACT);
    json_decref(alert);
    char err[512];
    if (text == NULL ||
        tw_producer_send(c->producer, c->alerts_topic, q->job, text,
                         strlen(text), NULL, 0, err, sizeof(err)) != 0)
        tw_log(TW_LOG_ERROR, "capture %s: cannot publish its outcome: %s",
               q->request_id, text ? err : "out of memory");
    free(text);
}

/* One control message: an answer to a waiting request, or anything else
 * (requests, other engines' answers: ignored). */
static void on_message(tw_run_capture *c, const rd_kafka_message_t *m)
{
    json_error_t je;
    json_t *o = json_loadb(m->payload, m->len, 0, &je);
    const char *type = json_string_value(json_object_get(o, "type"));
    if (!json_is_object(o) || type == NULL) {
        if (atomic_fetch_add(&c->bad_answers, 1) < 5)
            tw_log(TW_LOG_WARN,
                   "capture: control message at %s[%d]@%" PRId64
                   " is not a JSON object with a type: %s",
                   rd_kafka_topic_name(m->rkt), (int)m->partition, m->offset,
                   o ? "no type" : je.text);
        json_decref(o);
        return;
    }
    if (strcmp(type, "capture_ack") != 0) {
        json_decref(o);
        return;
    }
    const char *rid = json_string_value(json_object_get(o, "request_id"));
    json_t *rank = json_object_get(o, "rank");
    if (rid == NULL || !json_is_integer(rank) || json_integer_value(rank) < 0) {
        if (atomic_fetch_add(&c->bad_answers, 1) < 5)
            tw_log(TW_LOG_WARN,
                   "capture: answer at %s[%d]@%" PRId64
                   " has no request_id or no rank",
                   rd_kafka_topic_name(m->rkt), (int)m->partition, m->offset);
        json_decref(o);
        return;
    }
    for (tw_cap_req *q = c->waiting; q != NULL; q = q->next) {
        if (strcmp(q->request_id, rid) != 0)
            continue;
        int r = (int)json_integer_value(rank);
        if (!answered(q, r) && json_array_size(q->answers) < TW_CAP_MAX_RANKS) {
            json_object_set_new(o, "received_s",
                                json_real((tw_mono_us() - q->sent_us) / 1e6));
            json_object_del(o, "type");
            json_array_append(q->answers, o);
            atomic_fetch_add(&c->answers, 1);
        }
        json_int_t ws = json_integer_value(json_object_get(o, "world_size"));
        if (ws > q->world_size && ws <= TW_CAP_MAX_RANKS)
            q->world_size = (int)ws;
        break;
    }
    json_decref(o);
}

/* Requests every expected rank answered, or past their deadline. */
static void decide_ready(tw_run_capture *c)
{
    int64_t now = tw_mono_us();
    for (tw_cap_req **pp = &c->waiting; *pp != NULL;) {
        tw_cap_req *q = *pp;
        size_t nexp = 0;
        json_t *m = missing_ranks(q, &nexp);
        int complete = nexp > 0 && json_array_size(m) == 0;
        json_decref(m);
        if (complete || now >= q->deadline_us) {
            *pp = q->next;
            decide(c, q, now);
            req_free(q);
        } else
            pp = &q->next;
    }
}

static void *worker(void *arg)
{
    tw_run_capture *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        tw_cap_req *in = c->inbox;
        c->inbox = c->inbox_tail = NULL;
        int quit = c->quit;
        pthread_mutex_unlock(&c->mu);
        while (in != NULL) {
            tw_cap_req *next = in->next;
            publish_request(c, in);
            in = next;
        }
        if (quit)
            break;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->consumer, 100);
        if (m != NULL) {
            if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
                on_message(c, m);
            else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                tw_log(TW_LOG_WARN, "capture: control topic: %s",
                       rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
        }
        tw_producer_poll(c->producer, 0);
        decide_ready(c);
    }
    while (c->waiting != NULL) {
        tw_cap_req *q = c->waiting;
        c->waiting = q->next;
        tw_log(TW_LOG_WARN,
               "capture %s (job '%s'): abandoned at shutdown with %zu "
               "answer(s)",
               q->request_id, q->job, json_array_size(q->answers));
        req_free(q);
    }
    char err[256];
    if (tw_producer_flush(c->producer, 5000, err, sizeof(err)) != 0)
        tw_log(TW_LOG_WARN, "capture: %s", err);
    return NULL;
}

/* ---- construction -------------------------------------------------------- */

static int consumer_new(tw_run_capture *c, const tw_run_capture_config *cfg,
                        char *err, size_t errlen)
{
    char why[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *fixed[][2] = {
        {"bootstrap.servers", cfg->brokers}, {"group.id", cfg->group},
        {"enable.auto.commit", "false"},     {"auto.offset.reset", "latest"},
        {"client.id", "trainwatch-capture"}, {"log_level", "3"}};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (rd_kafka_conf_set(conf, fixed[i][0], fixed[i][1], why,
                              sizeof(why)) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "capture: consumer: %s", why);
            rd_kafka_conf_destroy(conf);
            return TW_ERR;
        }
    for (size_t i = 0; i < cfg->nprops; i++) {
        char kv[1024];
        snprintf(kv, sizeof(kv), "%s", cfg->props[i]);
        char *eq = strchr(kv, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        /* producer-only properties (acks, linger.ms, ...) do not apply */
        rd_kafka_conf_set(conf, kv, eq + 1, why, sizeof(why));
    }
    c->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    if (c->consumer == NULL) {
        snprintf(err, errlen, "capture: consumer: %s", why);
        rd_kafka_conf_destroy(conf);
        return TW_ERR;
    }
    rd_kafka_poll_set_consumer(c->consumer);
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new((int)cfg->ntopics);
    for (size_t i = 0; i < cfg->ntopics; i++)
        rd_kafka_topic_partition_list_add(l, cfg->topics[i],
                                          RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(c->consumer, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen,
                 "capture: cannot subscribe to the control "
                 "topic: %s",
                 rd_kafka_err2str(e));
        return TW_ERR;
    }
    return TW_OK;
}

int tw_run_capture_new(const tw_run_capture_config *cfg, tw_run_capture **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    tw_run_capture *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "capture: out of memory");
        return TW_ERR;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->alerts_topic = strdup(cfg->alerts_topic);
    if (c->alerts_topic == NULL) {
        snprintf(err, errlen, "capture: out of memory");
        goto fail;
    }
    if (tw_producer_new(cfg->brokers, cfg->props, cfg->nprops, &c->producer,
                        err, errlen) != 0 ||
        consumer_new(c, cfg, err, errlen) != TW_OK)
        goto fail;
    int rc = pthread_create(&c->thread, NULL, worker, c);
    if (rc != 0) {
        snprintf(err, errlen, "capture: cannot start its thread: %s",
                 strerror(rc));
        goto fail;
    }
    c->started = 1;
    *out = c;
    return TW_OK;
fail:
    tw_run_capture_free(c);
    return TW_ERR;
}

void tw_run_capture_counters(const tw_run_capture *c, tw_capture_counters *o)
{
    memset(o, 0, sizeof(*o));
    if (c == NULL)
        return;
    tw_run_capture *m = (tw_run_capture *)c; /* atomics: loads only */
    o->requested = atomic_load(&m->requested);
    o->rate_limited = atomic_load(&m->rate_limited);
    o->captured = atomic_load(&m->captured);
    o->unreachable = atomic_load(&m->unreachable);
    o->timed_out = atomic_load(&m->timed_out);
    o->answers = atomic_load(&m->answers);
    o->bad_answers = atomic_load(&m->bad_answers);
}

void tw_run_capture_free(tw_run_capture *c)
{
    if (c == NULL)
        return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->quit = 1;
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    while (c->inbox != NULL) {
        tw_cap_req *next = c->inbox->next;
        req_free(c->inbox);
        c->inbox = next;
    }
    if (c->consumer != NULL) {
        rd_kafka_consumer_close(c->consumer);
        rd_kafka_destroy(c->consumer);
    }
    tw_producer_free(c->producer);
    for (size_t i = 0; i < c->nlast; i++)
        free(c->last[i].job);
    free(c->last);
    free(c->alerts_topic);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
