/*
 * topic_read.c - engine/stream/topic_read.h over librdkafka: metadata and
 * watermarks first, then rd_kafka_assign at each partition's low
 * watermark (a group id is set because librdkafka's consumer API needs
 * one, but the group is never joined and nothing is committed).
 */
#include "topic_read.h"

#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "kafka_log.h"
#include "trainwatch/plugin.h"

/* the read's own state: the last broker error, for the messages */
typedef struct reader {
    char last_error[256];
} reader;

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    reader *r = opaque;
    snprintf(r->last_error, sizeof(r->last_error), "%s: %s",
             rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static int set(rd_kafka_conf_t *conf, const char *key, const char *value,
               const char *where, char *err, size_t errlen)
{
    char why[512];
    if (rd_kafka_conf_set(conf, key, value, why, sizeof(why)) !=
        RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "%s%skafka property '%s': %s",
                 where != NULL ? where : "", where != NULL ? ": " : "", key,
                 why);
        return TW_ERR;
    }
    return TW_OK;
}

static rd_kafka_t *consumer(const tw_topic_read_opts *o, reader *r, char *err,
                            size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    int rc = set(conf, "bootstrap.servers", o->brokers, NULL, err, errlen);
    static const char *const defaults[][2] = {
        {"group.id", "trainwatch-topic-read"},
        {"client.id", "trainwatch"},
        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        {"enable.partition.eof", "true"},
        {"auto.offset.reset", "earliest"}};
    for (size_t i = 0; rc == TW_OK && i < sizeof(defaults) / sizeof(*defaults);
         i++)
        rc = set(conf, defaults[i][0], defaults[i][1], NULL, err, errlen);
    for (size_t i = 0; rc == TW_OK && i < o->nprops; i++)
        rc = set(conf, o->props[i].key, o->props[i].value, o->props[i].where,
                 err, errlen);
    if (rc != TW_OK) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_opaque(conf, r);
    rd_kafka_conf_set_log_cb(conf, tw_kafka_on_log);
    rd_kafka_conf_set_error_cb(conf, on_error);
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "cannot create the Kafka consumer: %s", why);
    }
    return rk;
}

/* The topic's partition count, time-bounded. */
static int partitions(rd_kafka_t *rk, const tw_topic_read_opts *o,
                      const reader *r, int32_t *n, char *err, size_t errlen)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    if (rkt == NULL) {
        snprintf(err, errlen, "topic '%s': %s", o->topic,
                 rd_kafka_err2str(rd_kafka_last_error()));
        return TW_ERR;
    }
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, o->timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen,
                 "brokers %s unreachable or silent: no metadata for topic "
                 "'%s' within %d ms (%s%s%s)",
                 o->brokers, o->topic, o->timeout_ms, rd_kafka_err2str(e),
                 r->last_error[0] ? "; " : "", r->last_error);
        return TW_ERR;
    }
    int rc = TW_OK;
    if (md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "brokers %s: topic '%s': %s", o->brokers,
                 o->topic,
                 md->topic_cnt != 1 ? "not in the metadata"
                                    : rd_kafka_err2str(md->topics[0].err));
        rc = TW_ERR;
    } else {
        *n = md->topics[0].partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

typedef struct partition_span {
    int64_t lo, hi; /* [lo, hi): what is read */
    int done;
} partition_span;

static int watermarks(rd_kafka_t *rk, const tw_topic_read_opts *o,
                      partition_span *p, int32_t n, tw_topic_read_stats *st,
                      char *err, size_t errlen)
{
    for (int32_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
            rk, o->topic, i, &p[i].lo, &p[i].hi, o->timeout_ms);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen,
                     "brokers %s: topic '%s' partition %d: no offsets within "
                     "%d ms (%s)",
                     o->brokers, o->topic, (int)i, o->timeout_ms,
                     rd_kafka_err2str(e));
            return TW_ERR;
        }
        p[i].done = p[i].hi <= p[i].lo;
        if (!p[i].done)
            st->to_read += p[i].hi - p[i].lo;
    }
    return TW_OK;
}

static int assign(rd_kafka_t *rk, const partition_span *p, int32_t n,
                  const char *topic, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int32_t i = 0; i < n; i++)
        if (!p[i].done)
            rd_kafka_topic_partition_list_add(l, topic, i)->offset = p[i].lo;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "topic '%s': assigning its partitions: %s", topic,
                 rd_kafka_err2str(e));
        return TW_ERR;
    }
    return TW_OK;
}

static int all_done(const partition_span *p, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (!p[i].done)
            return 0;
    return 1;
}

/* the first partition not read to its watermark, for the timeout message */
static int32_t first_pending(const partition_span *p, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (!p[i].done)
            return i;
    return -1;
}

/* One message (or event) of the consumer: 1 = went on, 0 = nothing,
 * -1 = the callback stopped the read. */
static int one(rd_kafka_message_t *m, partition_span *p, int32_t n,
               tw_topic_read_fn fn, void *ud, tw_topic_read_stats *st,
               reader *r, char *err, size_t errlen)
{
    if (m->partition < 0 || m->partition >= n)
        return 0;
    partition_span *ps = &p[m->partition];
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        ps->done = 1;
        return 1;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(r->last_error, sizeof(r->last_error), "partition %d: %s",
                 (int)m->partition, rd_kafka_message_errstr(m));
        return 0;
    }
    if (ps->done || m->offset >= ps->hi) {
        ps->done = 1;
        return 1;
    }
    tw_topic_msg tm = {.partition = m->partition,
                       .offset = m->offset,
                       .key = m->key,
                       .key_len = m->key_len,
                       .value = m->payload,
                       .len = m->len};
    st->messages++;
    st->bytes += (int64_t)m->len;
    if (m->offset + 1 >= ps->hi)
        ps->done = 1;
    return fn(ud, &tm, err, errlen) != 0 ? -1 : 1;
}

static int consume(rd_kafka_t *rk, const tw_topic_read_opts *o,
                   partition_span *p, int32_t n, tw_topic_read_fn fn, void *ud,
                   tw_topic_read_stats *st, reader *r, char *err, size_t errlen)
{
    int64_t quiet_since = tw_mono_us(), last_progress = quiet_since;
    while (!all_done(p, n)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        int64_t now = tw_mono_us();
        int went = 0;
        if (m != NULL) {
            went = one(m, p, n, fn, ud, st, r, err, errlen);
            rd_kafka_message_destroy(m);
            if (went < 0)
                return TW_ERR;
        }
        if (went)
            quiet_since = now;
        else if (now - quiet_since > (int64_t)o->timeout_ms * 1000) {
            int32_t k = first_pending(p, n);
            snprintf(err, errlen,
                     "brokers %s: topic '%s' partition %d: nothing read for "
                     "%d ms before offset %lld%s%s",
                     o->brokers, o->topic, (int)k, o->timeout_ms,
                     (long long)p[k].hi, r->last_error[0] ? ": " : "",
                     r->last_error);
            return TW_ERR;
        }
        if (o->progress != NULL && now - last_progress >= 2000000) {
            fprintf(o->progress, "%s: topic '%s': %lld of %lld messages read\n",
                    o->who != NULL ? o->who : "trainwatch", o->topic,
                    (long long)st->messages, (long long)st->to_read);
            last_progress = now;
        }
    }
    return TW_OK;
}

int tw_topic_read(const tw_topic_read_opts *o, tw_topic_read_fn fn, void *ud,
                  tw_topic_read_stats *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof(*st));
    reader r = {{0}};
    rd_kafka_t *rk = consumer(o, &r, err, errlen);
    if (rk == NULL)
        return TW_ERR;
    partition_span *p = NULL;
    int32_t n = 0;
    int rc = partitions(rk, o, &r, &n, err, errlen);
    if (rc == TW_OK) {
        st->partitions = n;
        p = calloc(n > 0 ? (size_t)n : 1, sizeof(*p));
        if (p == NULL) {
            snprintf(err, errlen, "out of memory");
            rc = TW_ERR;
        }
    }
    if (rc == TW_OK)
        rc = watermarks(rk, o, p, n, st, err, errlen);
    if (rc == TW_OK && !all_done(p, n)) {
        rc = assign(rk, p, n, o->topic, err, errlen);
        if (rc == TW_OK)
            rc = consume(rk, o, p, n, fn, ud, st, &r, err, errlen);
        rd_kafka_assign(rk, NULL);
    }
    free(p);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}
