/* kafka_producer.c - librdkafka producer with delivery accounting
 * (kafka_producer.h). */
#include "kafka_producer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "clock.h"
#include "kafka_log.h"
#include "log.h"

/* How long tw_producer_send() waits for room in a full queue. */
#define TW_PRODUCER_QUEUE_WAIT_MS 60000
/* librdkafka's own default for message.max.bytes. */
#define TW_PRODUCER_DEFAULT_MAX_MESSAGE 1000000
/* A record's framing besides key, value and headers (varints, attributes,
 * timestamps), rounded up generously. */
#define TW_PRODUCER_RECORD_OVERHEAD 256

struct tw_producer {
    rd_kafka_t *rk;
    char *bootstrap;
    tw_producer_stats stats;
    char first_failure[512]; /* "" until a delivery fails */
    char fatal[512];         /* "" until librdkafka reports a fatal error */
    tw_producer_delivery_fn on_delivery; /* NULL: none */
    void *on_delivery_ud;
};

static void tw_producer_on_delivery(rd_kafka_t *rk,
                                    const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    tw_producer *p = opaque;
    if (p->on_delivery != NULL)
        p->on_delivery(p->on_delivery_ud,
                       msg->rkt != NULL ? rd_kafka_topic_name(msg->rkt) : "",
                       msg->partition,
                       msg->err == RD_KAFKA_RESP_ERR_NO_ERROR ? msg->offset
                                                              : -1,
                       msg->len, msg->err == RD_KAFKA_RESP_ERR_NO_ERROR);
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        p->stats.delivered++;
        p->stats.bytes_delivered += msg->len;
        return;
    }
    p->stats.failed++;
    if (p->first_failure[0] == '\0') {
        snprintf(p->first_failure, sizeof(p->first_failure),
                 "delivery to topic '%s' partition %" PRId32
                 " via %s failed: %s",
                 msg->rkt != NULL ? rd_kafka_topic_name(msg->rkt) : "?",
                 msg->partition, p->bootstrap, rd_kafka_err2str(msg->err));
        tw_log(TW_LOG_ERROR, "kafka producer: %s", p->first_failure);
    }
}

static void tw_producer_on_error(rd_kafka_t *rk, int err, const char *reason,
                                 void *opaque)
{
    tw_producer *p = opaque;
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char fatal[256];
        rd_kafka_resp_err_t orig =
            rd_kafka_fatal_error(rk, fatal, sizeof(fatal));
        snprintf(p->fatal, sizeof(p->fatal), "fatal producer error (%s): %s",
                 rd_kafka_err2name(orig), fatal);
        tw_log(TW_LOG_ERROR, "kafka producer: %s", p->fatal);
        return;
    }
    tw_log(TW_LOG_WARN, "kafka producer (%s): %s: %s", p->bootstrap,
           rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static int tw_producer_conf_set(rd_kafka_conf_t *conf, const char *key,
                                const char *value, char *err, size_t errlen)
{
    char why[512];
    if (rd_kafka_conf_set(conf, key, value, why, sizeof(why)) !=
        RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "kafka property '%s=%s': %s", key, value, why);
        return -1;
    }
    return 0;
}

int tw_producer_new(const char *bootstrap, const char *const *props,
                    size_t nprops, tw_producer **out, char *err, size_t errlen)
{
    *out = NULL;
    if (bootstrap == NULL || bootstrap[0] == '\0') {
        snprintf(err, errlen, "kafka producer: no bootstrap servers given");
        return -1;
    }
    tw_producer *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(err, errlen, "kafka producer: out of memory");
        return -1;
    }
    p->bootstrap = strdup(bootstrap);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (p->bootstrap == NULL || conf == NULL) {
        snprintf(err, errlen, "kafka producer: out of memory");
        goto fail;
    }
    if (tw_producer_conf_set(conf, "bootstrap.servers", bootstrap, err,
                             errlen) != 0 ||
        tw_producer_conf_set(conf, "enable.idempotence", "true", err, errlen) !=
            0 ||
        tw_producer_conf_set(conf, "linger.ms", "5", err, errlen) != 0 ||
        tw_producer_conf_set(conf, "client.id", "trainwatch", err, errlen) != 0)
        goto fail;
    for (size_t i = 0; i < nprops; i++) {
        const char *eq = strchr(props[i], '=');
        if (eq == NULL || eq == props[i]) {
            snprintf(err, errlen, "kafka property '%s': expected key=value",
                     props[i]);
            goto fail;
        }
        char key[256];
        size_t klen = (size_t)(eq - props[i]);
        if (klen >= sizeof(key)) {
            snprintf(err, errlen, "kafka property '%.40s...': key too long",
                     props[i]);
            goto fail;
        }
        memcpy(key, props[i], klen);
        key[klen] = '\0';
        if (tw_producer_conf_set(conf, key, eq + 1, err, errlen) != 0)
            goto fail;
    }
    rd_kafka_conf_set_opaque(conf, p);
    rd_kafka_conf_set_dr_msg_cb(conf, tw_producer_on_delivery);
    rd_kafka_conf_set_error_cb(conf, tw_producer_on_error);
    rd_kafka_conf_set_log_cb(conf, tw_kafka_on_log);

    char why[512];
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
    if (p->rk == NULL) {
        snprintf(err, errlen, "kafka producer for %s: %s", bootstrap, why);
        goto fail;
    }
    /* rd_kafka_new() took ownership of conf. */
    *out = p;
    return 0;

fail:
    if (conf != NULL)
        rd_kafka_conf_destroy(conf);
    free(p->bootstrap);
    free(p);
    return -1;
}

int tw_producer_send(tw_producer *p, const char *topic, const char *key,
                     const void *value, size_t len,
                     const tw_kafka_header *headers, size_t nheaders, char *err,
                     size_t errlen)
{
    return tw_producer_send_keyed(p, topic, key, key != NULL ? strlen(key) : 0,
                                  value, len, headers, nheaders, err, errlen);
}

int tw_producer_send_keyed(tw_producer *p, const char *topic, const void *key,
                           size_t klen, const void *value, size_t len,
                           const tw_kafka_header *headers, size_t nheaders,
                           char *err, size_t errlen)
{
    if (p->fatal[0] != '\0') {
        snprintf(err, errlen, "kafka producer: %s", p->fatal);
        return -1;
    }
    int64_t deadline = (tw_mono_us() / 1000) + TW_PRODUCER_QUEUE_WAIT_MS;
    /* librdkafka's V_ macros cast their arguments unparenthesized. */
    void *kp = (void *)key;
    for (;;) {
        rd_kafka_headers_t *hdrs = NULL;
        if (nheaders > 0) {
            hdrs = rd_kafka_headers_new(nheaders);
            for (size_t i = 0; i < nheaders; i++)
                rd_kafka_header_add(
                    hdrs, headers[i].name, -1, headers[i].value,
                    headers[i].value != NULL ? (ssize_t)headers[i].len : 0);
        }
        rd_kafka_resp_err_t e = rd_kafka_producev(
            p->rk, RD_KAFKA_V_TOPIC(topic),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(kp, klen),
            RD_KAFKA_V_VALUE((void *)value, len), RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            /* The message owns hdrs now. */
            p->stats.queued++;
            p->stats.bytes_queued += len;
            rd_kafka_poll(p->rk, 0);
            return 0;
        }
        if (hdrs != NULL)
            rd_kafka_headers_destroy(hdrs);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
            (tw_mono_us() / 1000) < deadline) {
            rd_kafka_poll(p->rk, 100);
            continue;
        }
        snprintf(err, errlen,
                 "kafka producer: cannot queue a %zu-byte message for topic "
                 "'%s' (key '%.*s') via %s: %s",
                 len, topic, (int)(klen > 200 ? 200 : klen),
                 key != NULL ? (const char *)key : "", p->bootstrap,
                 rd_kafka_err2str(e));
        return -1;
    }
}

int tw_producer_prepare_topic(tw_producer *p, const char *topic, int timeout_ms,
                              char *err, size_t errlen)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(p->rk, topic, NULL);
    if (rkt == NULL) {
        snprintf(err, errlen, "kafka producer: topic '%s': %s", topic,
                 rd_kafka_err2str(rd_kafka_last_error()));
        return -1;
    }
    int64_t deadline = (tw_mono_us() / 1000) + timeout_ms;
    rd_kafka_resp_err_t e;
    for (;;) {
        const struct rd_kafka_metadata *md = NULL;
        int64_t left = deadline - (tw_mono_us() / 1000);
        e = rd_kafka_metadata(p->rk, 0, rkt, &md, left > 0 ? (int)left : 1);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            e = md->topic_cnt == 1 ? md->topics[0].err
                                   : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
            rd_kafka_metadata_destroy(md);
        }
        /* An auto-created topic may need a second request to show up
         * with its partitions. */
        if (e != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
            e != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE)
            break;
        if ((tw_mono_us() / 1000) + 100 >= deadline)
            break;
        rd_kafka_poll(p->rk, 100);
    }
    rd_kafka_topic_destroy(rkt);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "kafka producer: topic '%s' via %s: %s", topic,
                 p->bootstrap, rd_kafka_err2str(e));
        return -1;
    }
    return 0;
}

void tw_producer_poll(tw_producer *p, int timeout_ms)
{
    rd_kafka_poll(p->rk, timeout_ms);
}

void tw_producer_set_delivery_cb(tw_producer *p, tw_producer_delivery_fn fn,
                                 void *ud)
{
    p->on_delivery = fn;
    p->on_delivery_ud = ud;
}

uint64_t tw_producer_pending(const tw_producer *p)
{
    return p->stats.queued - p->stats.delivered - p->stats.failed;
}

int tw_producer_flush(tw_producer *p, int timeout_ms, char *err, size_t errlen)
{
    rd_kafka_flush(p->rk, timeout_ms);
    /* Serve the reports of messages that completed during the flush. */
    rd_kafka_poll(p->rk, 0);
    uint64_t pending = tw_producer_pending(p);
    if (pending > 0) {
        snprintf(err, errlen,
                 "kafka producer: %" PRIu64
                 " message(s) still undelivered to %s after %d ms%s%s",
                 pending, p->bootstrap, timeout_ms,
                 p->first_failure[0] != '\0' ? "; " : "", p->first_failure);
        return -1;
    }
    if (p->stats.failed > 0) {
        snprintf(err, errlen,
                 "kafka producer: %" PRIu64 " of %" PRIu64
                 " message(s) failed; first: %s",
                 p->stats.failed, p->stats.queued, p->first_failure);
        return -1;
    }
    return 0;
}

void tw_producer_get_stats(const tw_producer *p, tw_producer_stats *out)
{
    *out = p->stats;
}

static size_t tw_producer_conf_max_message(const rd_kafka_conf_t *conf)
{
    char buf[32];
    size_t n = sizeof(buf);
    if (conf == NULL || rd_kafka_conf_get(conf, "message.max.bytes", buf, &n) !=
                            RD_KAFKA_CONF_OK)
        return TW_PRODUCER_DEFAULT_MAX_MESSAGE;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    return end != buf && *end == '\0' && v > 0
               ? (size_t)v
               : TW_PRODUCER_DEFAULT_MAX_MESSAGE;
}

size_t tw_producer_max_message_bytes(const tw_producer *p)
{
    return tw_producer_conf_max_message(rd_kafka_conf(p->rk));
}

size_t tw_producer_props_max_message_bytes(const char *const *props,
                                           size_t nprops)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (conf == NULL)
        return TW_PRODUCER_DEFAULT_MAX_MESSAGE;
    char why[256];
    for (size_t i = 0; i < nprops; i++) {
        const char *eq = strchr(props[i], '=');
        if (eq == NULL || strncmp(props[i], "message.max.bytes=", 18) != 0)
            continue;
        /* a bad value is reported by tw_producer_new */
        rd_kafka_conf_set(conf, "message.max.bytes", eq + 1, why, sizeof(why));
    }
    size_t max = tw_producer_conf_max_message(conf);
    rd_kafka_conf_destroy(conf);
    return max;
}

size_t tw_producer_value_room(const tw_producer *p, size_t klen,
                              const tw_kafka_header *headers, size_t nheaders)
{
    size_t overhead = TW_PRODUCER_RECORD_OVERHEAD + klen;
    for (size_t i = 0; i < nheaders; i++)
        overhead += strlen(headers[i].name) +
                    (headers[i].value != NULL ? headers[i].len : 0) + 16;
    size_t max = tw_producer_max_message_bytes(p);
    return max > overhead ? max - overhead : 0;
}

const char *tw_producer_bootstrap(const tw_producer *p)
{
    return p->bootstrap;
}

void tw_producer_free(tw_producer *p)
{
    if (p == NULL)
        return;
    /* Drop what is still queued: its delivery reports count it failed. */
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(p->rk, 0);
    rd_kafka_destroy(p->rk);
    free(p->bootstrap);
    free(p);
}
