/*
 * kafka_producer.h - a small librdkafka producer for trainwatch's outputs:
 * replay and agent publish metric batches with it, the engine its alerts
 * and dead letters.
 *
 * Configuration: a bootstrap list plus any librdkafka properties as
 * "key=value" strings (security.protocol, sasl.*, ssl.* ... pass through
 * unchanged; they are applied after trainwatch's defaults, so they win).
 * Defaults: enable.idempotence=true (retries never reorder or duplicate a
 * key's messages), linger.ms=5, client.id=trainwatch.
 *
 * Delivery: tw_producer_send() only queues; librdkafka delivers in the
 * background and reports each message's fate, which tw_producer_poll()
 * and tw_producer_flush() collect into the counters of tw_producer_stats.
 * The first failed delivery is kept as a sentence (topic, partition,
 * error) and returned by tw_producer_flush().
 *
 * Ownership: the producer copies the bootstrap list, the properties, every
 * key, value and header it is given; the caller keeps ownership of all of
 * them. tw_producer_free() does not flush: call tw_producer_flush() first
 * or what is still queued is dropped (and counted as failed).
 * One producer is used from one thread.
 */
#ifndef TW_KAFKA_PRODUCER_H
#define TW_KAFKA_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tw_producer tw_producer;

typedef struct tw_kafka_header {
    const char *name;
    const void *value; /* NULL = a header with a null value */
    size_t len;
} tw_kafka_header;

typedef struct tw_producer_stats {
    uint64_t queued;          /* accepted by tw_producer_send()           */
    uint64_t delivered;       /* acknowledged by the broker               */
    uint64_t failed;          /* reported failed (after librdkafka's own
                                 retries), or dropped by tw_producer_free */
    uint64_t bytes_queued;    /* value bytes                              */
    uint64_t bytes_delivered; /* value bytes                              */
} tw_producer_stats;

/* Creates a producer for `bootstrap` ("host:port[,host:port...]").
 * props: nprops strings "key=value" (may be NULL when nprops is 0).
 * Returns 0, or -1 with a sentence in err naming the bad property or
 * librdkafka's reason. Connecting happens later, in the background: a
 * broker that cannot be reached shows as failed deliveries at flush. */
int tw_producer_new(const char *bootstrap, const char *const *props,
                    size_t nprops, tw_producer **out, char *err, size_t errlen);

/* Asks the cluster for topic's metadata, waiting at most timeout_ms, so
 * that the first message sent to it later does not wait for a metadata
 * round trip (and a cluster that auto-creates topics creates it now).
 * Returns 0 when the topic exists, or -1 with a sentence in err (unknown
 * topic, cluster unreachable); sending still works once it appears. */
int tw_producer_prepare_topic(tw_producer *p, const char *topic, int timeout_ms,
                              char *err, size_t errlen);

/* Queues one message; key may be NULL; headers may be NULL when nheaders
 * is 0. Waits (serving delivery reports) while librdkafka's queue is full,
 * for at most 60 s. Returns 0, or -1 with a sentence in err (unknown
 * topic, message too large, queue still full, fatal producer error). */
int tw_producer_send(tw_producer *p, const char *topic, const char *key,
                     const void *value, size_t len,
                     const tw_kafka_header *headers, size_t nheaders, char *err,
                     size_t errlen);

/* The same with a key of klen bytes (any bytes; NULL = no key), e.g. to
 * forward a message's key unchanged. */
int tw_producer_send_keyed(tw_producer *p, const char *topic, const void *key,
                           size_t klen, const void *value, size_t len,
                           const tw_kafka_header *headers, size_t nheaders,
                           char *err, size_t errlen);

/* Serves delivery reports, waiting at most timeout_ms for one. */
void tw_producer_poll(tw_producer *p, int timeout_ms);

/* Waits until every queued message is delivered or failed, at most
 * timeout_ms. Returns 0 when all were delivered; -1 with a sentence in err
 * when messages remain after the timeout or any delivery has failed since
 * the producer was created. */
int tw_producer_flush(tw_producer *p, int timeout_ms, char *err, size_t errlen);

/* Called for each delivery report, from tw_producer_poll(), _send() and
 * _flush(): the message's topic, partition and offset (the offset is -1
 * when it failed) and its value's length. For callers that follow where
 * their messages landed (replay's flow control). */
typedef void (*tw_producer_delivery_fn)(void *ud, const char *topic,
                                        int32_t partition, int64_t offset,
                                        size_t len, int delivered);

/* Sets (or with fn NULL clears) the delivery callback. */
void tw_producer_set_delivery_cb(tw_producer *p, tw_producer_delivery_fn fn,
                                 void *ud);

/* Messages queued but not yet reported. */
uint64_t tw_producer_pending(const tw_producer *p);

void tw_producer_get_stats(const tw_producer *p, tw_producer_stats *out);

/* The producer's message.max.bytes (librdkafka refuses a larger message
 * with "message size too large"): as configured in the properties, else
 * librdkafka's default, 1000000. */
size_t tw_producer_max_message_bytes(const tw_producer *p);

/* The same for a producer that tw_producer_new would create with these
 * properties, before creating it. */
size_t tw_producer_props_max_message_bytes(const char *const *props,
                                           size_t nprops);

/* The largest value that fits one message with a key of klen bytes and
 * these headers (framing estimated generously); 0 when none fits. */
size_t tw_producer_value_room(const tw_producer *p, size_t klen,
                              const tw_kafka_header *headers, size_t nheaders);

/* The bootstrap list given at creation; owned by the producer. */
const char *tw_producer_bootstrap(const tw_producer *p);

void tw_producer_free(tw_producer *p);

#endif /* TW_KAFKA_PRODUCER_H */
