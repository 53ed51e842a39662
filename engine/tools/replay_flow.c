/* replay_flow.c - replay's flow control over a consumer group's committed
 * offsets (replay_flow.h). */
#include "replay_flow.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "clock.h"
#include "log.h"

#define TW_FLOW_COMMITTED_TIMEOUT_MS 5000
#define TW_FLOW_PROGRESS_US 5000000 /* INFO while waiting   */
#define TW_FLOW_STALL_US 10000000   /* WARN without reading */
#define TW_FLOW_REFRESH_WARN_US 10000000

/* One delivered message of this producer. */
typedef struct tw_flow_msg {
    int64_t offset;
    uint64_t bytes;
} tw_flow_msg;

/* A partition this producer's messages went to. */
typedef struct tw_flow_part {
    int32_t id;
    tw_flow_msg *msgs; /* msgs[head, n): delivered, not read yet */
    size_t head, n, cap;
    uint64_t bytes;        /* of msgs[head, n) */
    int64_t read_to;       /* the group's position; -1 unknown */
    int64_t read_since_us; /* when read_to last moved (or the wait began) */
} tw_flow_part;

struct tw_replay_flow {
    rd_kafka_t *rk; /* a consumer of the group, never subscribed */
    char *group, *topic;
    uint64_t max_bytes, max_messages;

    uint64_t pending_bytes, pending_msgs; /* queued, not reported yet */
    tw_flow_part *parts;
    size_t nparts, capparts;

    int waiting;
    int64_t wait_start_us, next_progress_us, next_stall_us;
    int64_t next_refresh_warn_us;
    tw_replay_flow_stats stats;
};

static void tw_flow_on_log(const rd_kafka_t *rk, int level, const char *fac,
                           const char *buf)
{
    (void)rk;
    tw_log(level <= 3   ? TW_LOG_ERROR
           : level == 4 ? TW_LOG_WARN
                        : TW_LOG_DEBUG,
           "replay flow control: librdkafka %s: %s", fac, buf);
}

static int tw_flow_conf_set(rd_kafka_conf_t *conf, const char *key,
                            const char *value, char *err, size_t errlen)
{
    char why[512];
    if (rd_kafka_conf_set(conf, key, value, why, sizeof(why)) !=
        RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "replay flow control: kafka property '%s=%s': %s",
                 key, value, why);
        return -1;
    }
    return 0;
}

int tw_replay_flow_new(const tw_replay_flow_config *cfg, tw_replay_flow **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->group == NULL || cfg->group[0] == '\0' || cfg->topic == NULL ||
        cfg->max_bytes == 0 || cfg->max_messages == 0) {
        snprintf(err, errlen, "replay flow control: no group, topic or bound");
        return -1;
    }
    tw_replay_flow *f = calloc(1, sizeof(*f));
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (f == NULL || conf == NULL || (f->group = strdup(cfg->group)) == NULL ||
        (f->topic = strdup(cfg->topic)) == NULL) {
        snprintf(err, errlen, "replay flow control: out of memory");
        goto fail;
    }
    f->max_bytes = cfg->max_bytes;
    f->max_messages = cfg->max_messages;
    rd_kafka_conf_set_log_cb(conf, tw_flow_on_log);
    if (tw_flow_conf_set(conf, "bootstrap.servers", cfg->brokers, err,
                         errlen) != 0 ||
        tw_flow_conf_set(conf, "group.id", cfg->group, err, errlen) != 0 ||
        tw_flow_conf_set(conf, "client.id", "trainwatch-replay-flow", err,
                         errlen) != 0 ||
        tw_flow_conf_set(conf, "enable.auto.commit", "false", err, errlen) != 0)
        goto fail;
    for (size_t i = 0; i < cfg->nprops; i++) {
        const char *eq = strchr(cfg->props[i], '=');
        char key[256];
        size_t klen = eq != NULL ? (size_t)(eq - cfg->props[i]) : 0;
        if (klen == 0 || klen >= sizeof(key)) {
            snprintf(err, errlen,
                     "replay flow control: kafka property '%.60s': expected "
                     "key=value",
                     cfg->props[i]);
            goto fail;
        }
        memcpy(key, cfg->props[i], klen);
        key[klen] = '\0';
        /* Producer-only properties (acks, linger.ms, ...) mean nothing
         * to this consumer: skipped, not an error. */
        char why[512];
        rd_kafka_conf_res_t res =
            rd_kafka_conf_set(conf, key, eq + 1, why, sizeof(why));
        if (res == RD_KAFKA_CONF_INVALID) {
            snprintf(err, errlen,
                     "replay flow control: kafka property '%s': %s", key, why);
            goto fail;
        }
    }
    char why[512];
    f->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    if (f->rk == NULL) {
        snprintf(err, errlen,
                 "replay flow control: consumer for group '%s': %s", cfg->group,
                 why);
        goto fail;
    }
    *out = f;
    return 0;
fail:
    if (conf != NULL)
        rd_kafka_conf_destroy(conf);
    tw_replay_flow_free(f);
    return -1;
}

void tw_replay_flow_free(tw_replay_flow *f)
{
    if (f == NULL)
        return;
    if (f->rk != NULL) {
        /* never subscribed: closing leaves no group to leave */
        rd_kafka_consumer_close(f->rk);
        rd_kafka_destroy(f->rk);
    }
    for (size_t i = 0; i < f->nparts; i++)
        free(f->parts[i].msgs);
    free(f->parts);
    free(f->group);
    free(f->topic);
    free(f);
}

void tw_replay_flow_queued(tw_replay_flow *f, size_t len)
{
    f->pending_bytes += len;
    f->pending_msgs++;
}

static uint64_t tw_flow_ahead_bytes(const tw_replay_flow *f)
{
    uint64_t b = f->pending_bytes;
    for (size_t i = 0; i < f->nparts; i++)
        b += f->parts[i].bytes;
    return b;
}

static uint64_t tw_flow_ahead_msgs(const tw_replay_flow *f)
{
    uint64_t n = f->pending_msgs;
    for (size_t i = 0; i < f->nparts; i++)
        n += f->parts[i].n - f->parts[i].head;
    return n;
}

static tw_flow_part *tw_flow_part_get(tw_replay_flow *f, int32_t id)
{
    for (size_t i = 0; i < f->nparts; i++)
        if (f->parts[i].id == id)
            return &f->parts[i];
    if (f->nparts == f->capparts) {
        size_t cap = f->capparts == 0 ? 4 : f->capparts * 2;
        tw_flow_part *np = realloc(f->parts, cap * sizeof(*np));
        if (np == NULL)
            return NULL;
        f->parts = np;
        f->capparts = cap;
    }
    f->parts[f->nparts] =
        (tw_flow_part){.id = id, .read_to = -1, .read_since_us = tw_mono_us()};
    return &f->parts[f->nparts++];
}

void tw_replay_flow_on_delivery(void *ud, const char *topic, int32_t partition,
                                int64_t offset, size_t len, int delivered)
{
    tw_replay_flow *f = ud;
    if (strcmp(topic, f->topic) != 0)
        return;
    if (f->pending_msgs > 0) {
        f->pending_msgs--;
        f->pending_bytes -= len < f->pending_bytes ? len : f->pending_bytes;
    }
    if (!delivered)
        return; /* the replay fails at its flush */
    tw_flow_part *p = tw_flow_part_get(f, partition);
    if (p == NULL) {
        tw_log(TW_LOG_ERROR, "replay flow control: out of memory");
        return;
    }
    if (p->read_to >= 0 && offset < p->read_to)
        return; /* already read (a retry of a message the group has) */
    if (p->n == p->cap) {
        if (p->head > 0) {
            memmove(p->msgs, p->msgs + p->head,
                    (p->n - p->head) * sizeof(*p->msgs));
            p->n -= p->head;
            p->head = 0;
        }
        if (p->n == p->cap) {
            size_t cap = p->cap == 0 ? 256 : p->cap * 2;
            tw_flow_msg *nm = realloc(p->msgs, cap * sizeof(*nm));
            if (nm == NULL) {
                tw_log(TW_LOG_ERROR, "replay flow control: out of memory");
                return;
            }
            p->msgs = nm;
            p->cap = cap;
        }
    }
    p->msgs[p->n++] = (tw_flow_msg){.offset = offset, .bytes = len};
    p->bytes += len;
    uint64_t ahead = tw_flow_ahead_bytes(f);
    if (ahead > f->stats.max_ahead_bytes)
        f->stats.max_ahead_bytes = ahead;
}

int tw_replay_flow_blocked(const tw_replay_flow *f, size_t len)
{
    uint64_t bytes = tw_flow_ahead_bytes(f);
    uint64_t msgs = tw_flow_ahead_msgs(f);
    if (msgs == 0)
        return 0;
    return bytes + len > f->max_bytes || msgs + 1 > f->max_messages;
}

/* The engine's next_offset from commit metadata (job_router.h), or -1. */
static int64_t tw_flow_meta_next(const void *meta, size_t len)
{
    if (meta == NULL || len == 0)
        return -1;
    json_error_t je;
    json_t *a = json_loadb(meta, len, 0, &je);
    int64_t next = -1;
    json_t *first = json_is_array(a) ? json_array_get(a, 0) : NULL;
    json_t *n =
        json_is_object(first) ? json_object_get(first, "next_offset") : NULL;
    if (json_is_integer(n))
        next = (int64_t)json_integer_value(n);
    json_decref(a);
    return next;
}

/* Forgets p's messages below the group's position. */
static void tw_flow_part_read(tw_flow_part *p, int64_t pos, int64_t now_us)
{
    if (pos > p->read_to) {
        p->read_to = pos;
        p->read_since_us = now_us;
    }
    while (p->head < p->n && p->msgs[p->head].offset < p->read_to) {
        p->bytes -= p->msgs[p->head].bytes;
        p->head++;
    }
    if (p->head == p->n)
        p->head = p->n = 0;
}

int tw_replay_flow_refresh(tw_replay_flow *f)
{
    rd_kafka_topic_partition_list_t *pl =
        rd_kafka_topic_partition_list_new((int)f->nparts + 1);
    for (size_t i = 0; i < f->nparts; i++)
        if (f->parts[i].head < f->parts[i].n)
            rd_kafka_topic_partition_list_add(pl, f->topic, f->parts[i].id);
    if (pl->cnt == 0) {
        rd_kafka_topic_partition_list_destroy(pl);
        return 0;
    }
    rd_kafka_resp_err_t e =
        rd_kafka_committed(f->rk, pl, TW_FLOW_COMMITTED_TIMEOUT_MS);
    int64_t now = tw_mono_us();
    for (int i = 0; e == RD_KAFKA_RESP_ERR_NO_ERROR && i < pl->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &pl->elems[i];
        if (tp->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            e = tp->err;
            break;
        }
        int64_t pos = tp->offset >= 0 ? tp->offset : -1;
        int64_t next = tw_flow_meta_next(tp->metadata, tp->metadata_size);
        if (next > pos)
            pos = next;
        tw_flow_part *p = tw_flow_part_get(f, tp->partition);
        if (p != NULL)
            tw_flow_part_read(p, pos, now);
    }
    rd_kafka_topic_partition_list_destroy(pl);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    f->stats.refresh_failures++;
    if (now >= f->next_refresh_warn_us) {
        tw_log(TW_LOG_WARN,
               "replay: cannot read the committed offsets of group '%s' on "
               "'%s': %s (trying again)",
               f->group, f->topic, rd_kafka_err2str(e));
        f->next_refresh_warn_us = now + TW_FLOW_REFRESH_WARN_US;
    }
    return -1;
}

/* The partition the wait is for: the one with the most bytes ahead. */
static const tw_flow_part *tw_flow_worst(const tw_replay_flow *f)
{
    const tw_flow_part *w = NULL;
    for (size_t i = 0; i < f->nparts; i++)
        if (w == NULL || f->parts[i].bytes > w->bytes)
            w = &f->parts[i];
    return w;
}

void tw_replay_flow_report(tw_replay_flow *f, int waiting, int64_t now_us)
{
    if (!waiting) {
        if (f->waiting) {
            f->waiting = 0;
            f->stats.waits++;
            f->stats.waited_us += now_us - f->wait_start_us;
        }
        return;
    }
    if (!f->waiting) {
        f->waiting = 1;
        f->wait_start_us = now_us;
        f->next_progress_us = now_us + TW_FLOW_PROGRESS_US;
        f->next_stall_us = now_us + TW_FLOW_STALL_US;
        return;
    }
    const tw_flow_part *p = tw_flow_worst(f);
    uint64_t bytes = tw_flow_ahead_bytes(f), msgs = tw_flow_ahead_msgs(f);
    if (p == NULL)
        return; /* only queued messages: their reports come first */
    int64_t since = p->read_since_us > f->wait_start_us ? p->read_since_us
                                                        : f->wait_start_us;
    if (now_us - since >= TW_FLOW_STALL_US && now_us >= f->next_stall_us) {
        char at[64];
        if (p->read_to >= 0)
            snprintf(at, sizeof(at), "is at offset %" PRId64, p->read_to);
        else
            snprintf(at, sizeof(at), "has committed no offset there");
        tw_log(TW_LOG_WARN,
               "replay: waiting %.0f s for consumer group '%s', which has "
               "read nothing of '%s' partition %" PRId32 " for %.0f s (it %s; "
               "%" PRIu64 " message(s), %.2f MB of this replay wait there). "
               "Is `trainwatch run` with kafka.group '%s' running? Still "
               "waiting; --group none publishes without flow control",
               (double)(now_us - f->wait_start_us) / 1e6, f->group, f->topic,
               p->id, (double)(now_us - since) / 1e6, at, msgs,
               (double)bytes / 1e6, f->group);
        f->next_stall_us = now_us + TW_FLOW_STALL_US;
        f->next_progress_us = now_us + TW_FLOW_PROGRESS_US;
    } else if (now_us >= f->next_progress_us) {
        char at[64];
        if (p->read_to >= 0)
            snprintf(at, sizeof(at), "read to offset %" PRId64, p->read_to);
        else
            snprintf(at, sizeof(at), "no offset committed yet");
        tw_log(TW_LOG_INFO,
               "replay: waiting for consumer group '%s' to read '%s' "
               "partition %" PRId32 " (%s; %" PRIu64 " message(s), %.2f MB "
               "of this replay ahead; bound %.2f MB)",
               f->group, f->topic, p->id, at, msgs, (double)bytes / 1e6,
               (double)f->max_bytes / 1e6);
        f->next_progress_us = now_us + TW_FLOW_PROGRESS_US;
    }
}

void tw_replay_flow_get_stats(const tw_replay_flow *f,
                              tw_replay_flow_stats *out)
{
    *out = f->stats;
}
