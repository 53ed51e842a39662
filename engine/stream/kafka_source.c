/* kafka_source.c - the high-level consumer of the metrics topic
 * (kafka_source.h). */
#include "kafka_source.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "kafka_log.h"
#include "log.h"

/* How long a rebalance waits for the committed offsets of new partitions. */
#define TW_SOURCE_COMMITTED_TIMEOUT_MS 15000

struct tw_kafka_source {
    rd_kafka_t *rk;
    char *topic;
    char *brokers;
    tw_source_handler h;
    int closed;
    int paused; /* tw_source_pause(1) in force */
};

static void tw_source_on_error(rd_kafka_t *rk, int err, const char *reason,
                               void *opaque)
{
    (void)rk;
    tw_kafka_source *s = opaque;
    tw_log(TW_LOG_WARN, "kafka consumer (%s): %s: %s", s->brokers,
           rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static int tw_source_cooperative(rd_kafka_t *rk)
{
    const char *p = rd_kafka_rebalance_protocol(rk);
    return p != NULL && strcmp(p, "COOPERATIVE") == 0;
}

static void tw_source_assign(tw_kafka_source *s,
                             rd_kafka_topic_partition_list_t *pl)
{
    size_t n = (size_t)pl->cnt;
    tw_source_assigned *a = calloc(n ? n : 1, sizeof(*a));
    rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_copy(pl);
    rd_kafka_resp_err_t e =
        rd_kafka_committed(s->rk, c, TW_SOURCE_COMMITTED_TIMEOUT_MS);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        tw_log(TW_LOG_WARN,
               "kafka consumer: cannot read committed offsets: %s "
               "(starting from the defaults)",
               rd_kafka_err2str(e));
    char **meta = calloc(n ? n : 1, sizeof(char *));
    if (a == NULL || meta == NULL) {
        tw_log(TW_LOG_ERROR, "kafka consumer: out of memory in rebalance");
        free(a);
        free(meta);
        rd_kafka_topic_partition_list_destroy(c);
        if (tw_source_cooperative(s->rk))
            rd_kafka_incremental_assign(s->rk, pl);
        else
            rd_kafka_assign(s->rk, pl);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const rd_kafka_topic_partition_t *tp = &c->elems[i];
        a[i].partition = tp->partition;
        a[i].committed = e == RD_KAFKA_RESP_ERR_NO_ERROR && tp->offset >= 0
                             ? tp->offset
                             : -1;
        meta[i] = calloc(1, tp->metadata_size + 1);
        if (meta[i] != NULL && tp->metadata != NULL && tp->metadata_size > 0 &&
            e == RD_KAFKA_RESP_ERR_NO_ERROR)
            memcpy(meta[i], tp->metadata, tp->metadata_size);
        a[i].metadata = meta[i] != NULL ? meta[i] : "";
        a[i].start_offset = TW_SOURCE_OFFSET_DEFAULT;
    }
    if (s->h.assign != NULL)
        s->h.assign(s->h.ud, s, a, n);
    for (size_t i = 0; i < n; i++) {
        pl->elems[i].offset = a[i].start_offset == TW_SOURCE_OFFSET_DEFAULT
                                  ? RD_KAFKA_OFFSET_INVALID
                                  : a[i].start_offset;
        free(meta[i]);
    }
    free(meta);
    free(a);
    rd_kafka_topic_partition_list_destroy(c);
    rd_kafka_error_t *ie = NULL;
    rd_kafka_resp_err_t ae = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (tw_source_cooperative(s->rk))
        ie = rd_kafka_incremental_assign(s->rk, pl);
    else
        ae = rd_kafka_assign(s->rk, pl);
    if (ie != NULL) {
        tw_log(TW_LOG_ERROR, "kafka consumer: assign: %s",
               rd_kafka_error_string(ie));
        rd_kafka_error_destroy(ie);
    } else if (ae != RD_KAFKA_RESP_ERR_NO_ERROR) {
        tw_log(TW_LOG_ERROR, "kafka consumer: assign: %s",
               rd_kafka_err2str(ae));
    } else if (s->paused) {
        rd_kafka_resp_err_t pe = rd_kafka_pause_partitions(s->rk, pl);
        if (pe != RD_KAFKA_RESP_ERR_NO_ERROR)
            tw_log(TW_LOG_WARN, "kafka consumer: pause: %s",
                   rd_kafka_err2str(pe));
    }
}

static void tw_source_revoke(tw_kafka_source *s,
                             rd_kafka_topic_partition_list_t *pl)
{
    size_t n = (size_t)pl->cnt;
    int32_t *parts = calloc(n ? n : 1, sizeof(*parts));
    if (parts != NULL) {
        for (size_t i = 0; i < n; i++)
            parts[i] = pl->elems[i].partition;
        if (s->h.revoke != NULL)
            s->h.revoke(s->h.ud, s, parts, n);
        free(parts);
    } else {
        tw_log(TW_LOG_ERROR, "kafka consumer: out of memory in rebalance");
    }
    if (tw_source_cooperative(s->rk)) {
        rd_kafka_error_t *ie = rd_kafka_incremental_unassign(s->rk, pl);
        if (ie != NULL)
            rd_kafka_error_destroy(ie);
    } else {
        rd_kafka_assign(s->rk, NULL);
    }
}

static void tw_source_on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                   rd_kafka_topic_partition_list_t *pl,
                                   void *opaque)
{
    (void)rk;
    tw_kafka_source *s = opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        tw_source_assign(s, pl);
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        tw_source_revoke(s, pl);
    } else {
        tw_log(TW_LOG_ERROR, "kafka consumer: rebalance failed: %s",
               rd_kafka_err2str(err));
        tw_source_revoke(s, pl);
    }
}

static int tw_source_set(rd_kafka_conf_t *conf, const char *key,
                         const char *value, const char *where, char *err,
                         size_t errlen)
{
    char why[512];
    if (rd_kafka_conf_set(conf, key, value, why, sizeof(why)) !=
        RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "%s%skafka property '%s': %s",
                 where != NULL ? where : "", where != NULL ? ": " : "", key,
                 why);
        return -1;
    }
    return 0;
}

int tw_source_new(const tw_source_config *cfg, const tw_source_handler *h,
                  tw_kafka_source **out, char *err, size_t errlen)
{
    *out = NULL;
    tw_kafka_source *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->topic = strdup(cfg->topic)) == NULL ||
        (s->brokers = strdup(cfg->brokers)) == NULL) {
        snprintf(err, errlen, "out of memory");
        tw_source_free(s);
        return -1;
    }
    if (h != NULL)
        s->h = *h;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* Defaults first; the user's properties come last and win. */
    if (tw_source_set(conf, "bootstrap.servers", cfg->brokers, NULL, err,
                      errlen) != 0 ||
        tw_source_set(conf, "group.id", cfg->group, NULL, err, errlen) != 0 ||
        tw_source_set(conf, "client.id",
                      cfg->client_id != NULL ? cfg->client_id : "trainwatch",
                      NULL, err, errlen) != 0 ||
        tw_source_set(conf, "enable.auto.commit", "false", NULL, err, errlen) !=
            0 ||
        tw_source_set(conf, "enable.auto.offset.store", "false", NULL, err,
                      errlen) != 0 ||
        tw_source_set(conf, "auto.offset.reset", "earliest", NULL, err,
                      errlen) != 0) {
        rd_kafka_conf_destroy(conf);
        tw_source_free(s);
        return -1;
    }
    for (size_t i = 0; i < cfg->nprops; i++) {
        if (tw_source_set(conf, cfg->props[i].key, cfg->props[i].value,
                          cfg->props[i].where, err, errlen) != 0) {
            rd_kafka_conf_destroy(conf);
            tw_source_free(s);
            return -1;
        }
    }
    rd_kafka_conf_set_opaque(conf, s);
    rd_kafka_conf_set_log_cb(conf, tw_kafka_on_log);
    rd_kafka_conf_set_error_cb(conf, tw_source_on_error);
    rd_kafka_conf_set_rebalance_cb(conf, tw_source_on_rebalance);
    char why[512];
    s->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    if (s->rk == NULL) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "cannot create the Kafka consumer: %s", why);
        tw_source_free(s);
        return -1;
    }
    rd_kafka_poll_set_consumer(s->rk);
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, cfg->topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(s->rk, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "cannot subscribe to '%s': %s", cfg->topic,
                 rd_kafka_err2str(e));
        tw_source_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

int tw_source_poll(tw_kafka_source *s, int timeout_ms, tw_source_msg *msg,
                   char *err, size_t errlen)
{
    memset(msg, 0, sizeof(*msg));
    rd_kafka_message_t *m = rd_kafka_consumer_poll(s->rk, timeout_ms);
    if (m == NULL)
        return 0;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        int fatal = m->err == RD_KAFKA_RESP_ERR__FATAL;
        if (fatal) {
            char why[256];
            rd_kafka_fatal_error(s->rk, why, sizeof(why));
            snprintf(err, errlen, "kafka consumer: fatal error: %s", why);
        } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            tw_log(TW_LOG_WARN, "kafka consumer: %s [%" PRId32 "]: %s",
                   m->rkt != NULL ? rd_kafka_topic_name(m->rkt) : s->topic,
                   m->partition, rd_kafka_message_errstr(m));
        }
        rd_kafka_message_destroy(m);
        return fatal ? -1 : 0;
    }
    msg->topic = m->rkt != NULL ? rd_kafka_topic_name(m->rkt) : s->topic;
    msg->partition = m->partition;
    msg->offset = m->offset;
    msg->key = m->key;
    msg->key_len = m->key_len;
    msg->value = m->payload;
    msg->len = m->len;
    msg->opaque_ = m;
    return 1;
}

void tw_source_release(tw_kafka_source *s, tw_source_msg *msg)
{
    (void)s;
    if (msg->opaque_ != NULL)
        rd_kafka_message_destroy(msg->opaque_);
    msg->opaque_ = NULL;
}

int tw_source_commit(tw_kafka_source *s, const tw_source_commit_entry *e,
                     size_t n, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    rd_kafka_topic_partition_list_t *pl =
        rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++) {
        rd_kafka_topic_partition_t *tp =
            rd_kafka_topic_partition_list_add(pl, s->topic, e[i].partition);
        tp->offset = e[i].offset;
        if (e[i].metadata != NULL && e[i].metadata[0] != '\0') {
            size_t len = strlen(e[i].metadata);
            /* the list frees it with librdkafka's allocator */
            tp->metadata = rd_kafka_mem_malloc(s->rk, len);
            if (tp->metadata != NULL) {
                memcpy(tp->metadata, e[i].metadata, len);
                tp->metadata_size = len;
            }
        }
    }
    rd_kafka_resp_err_t r = rd_kafka_commit(s->rk, pl, 0);
    if (r == RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* per-partition errors */
        for (int i = 0; i < pl->cnt; i++)
            if (pl->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
                r = pl->elems[i].err;
                break;
            }
    }
    rd_kafka_topic_partition_list_destroy(pl);
    if (r != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "kafka consumer: commit to '%s' failed: %s",
                 s->topic, rd_kafka_err2str(r));
        return -1;
    }
    return 0;
}

int tw_source_pause(tw_kafka_source *s, int pause, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *pl = NULL;
    rd_kafka_resp_err_t e = rd_kafka_assignment(s->rk, &pl);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR && pl->cnt > 0)
        e = pause ? rd_kafka_pause_partitions(s->rk, pl)
                  : rd_kafka_resume_partitions(s->rk, pl);
    if (pl != NULL)
        rd_kafka_topic_partition_list_destroy(pl);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "kafka consumer: %s: %s",
                 pause ? "pause" : "resume", rd_kafka_err2str(e));
        return -1;
    }
    s->paused = pause;
    return 0;
}

int tw_source_paused(const tw_kafka_source *s)
{
    return s->paused;
}

void tw_source_lag(tw_kafka_source *s, const int32_t *parts, size_t n,
                   int64_t *lag)
{
    for (size_t i = 0; i < n; i++)
        lag[i] = -1;
    rd_kafka_topic_partition_list_t *pl =
        rd_kafka_topic_partition_list_new((int)(n > 0 ? n : 1));
    if (pl == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(pl, s->topic, parts[i]);
    if (n > 0 && rd_kafka_position(s->rk, pl) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (size_t i = 0; i < n; i++) {
            int64_t lo, hi;
            /* cached from fetch responses: no request to the broker */
            if (pl->elems[i].offset < 0 ||
                rd_kafka_get_watermark_offsets(s->rk, s->topic, parts[i], &lo,
                                               &hi) !=
                    RD_KAFKA_RESP_ERR_NO_ERROR ||
                hi < 0)
                continue;
            lag[i] = hi > pl->elems[i].offset ? hi - pl->elems[i].offset : 0;
        }
    }
    rd_kafka_topic_partition_list_destroy(pl);
}

int tw_source_seek(tw_kafka_source *s, int32_t partition, int64_t offset,
                   char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *pl = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(pl, s->topic, partition)->offset = offset;
    rd_kafka_error_t *e = rd_kafka_seek_partitions(s->rk, pl, 10000);
    rd_kafka_resp_err_t pe = pl->elems[0].err;
    rd_kafka_topic_partition_list_destroy(pl);
    if (e != NULL || pe != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen,
                 "kafka consumer: seek '%s' [%" PRId32 "] to %" PRId64 ": %s",
                 s->topic, partition, offset,
                 e != NULL ? rd_kafka_error_string(e) : rd_kafka_err2str(pe));
        if (e != NULL)
            rd_kafka_error_destroy(e);
        return -1;
    }
    return 0;
}

void tw_source_close(tw_kafka_source *s)
{
    if (s == NULL || s->rk == NULL || s->closed)
        return;
    s->closed = 1;
    rd_kafka_resp_err_t e = rd_kafka_consumer_close(s->rk);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        tw_log(TW_LOG_WARN, "kafka consumer: close: %s", rd_kafka_err2str(e));
}

void tw_source_free(tw_kafka_source *s)
{
    if (s == NULL)
        return;
    if (s->rk != NULL) {
        tw_source_close(s);
        rd_kafka_destroy(s->rk);
    }
    free(s->topic);
    free(s->brokers);
    free(s);
}

const char *tw_source_topic(const tw_kafka_source *s)
{
    return s->topic;
}
