/*
 * kafka_source.h - the engine's input: a librdkafka high-level consumer,
 * member of a consumer group on the metrics topic.
 *
 * Offsets are never committed automatically (enable.auto.commit=false):
 * the owner of the events decides what is processed and calls
 * tw_source_commit() with explicit offsets (job_router.h explains which).
 * A commit may carry a metadata string per partition (Kafka keeps it with
 * the offset); the next owner of the partition receives it on assignment.
 *
 * Rebalancing: librdkafka calls back from inside tw_source_poll(), on the
 * consuming thread, between two messages, so the message in hand has been
 * processed completely when a partition is revoked. On revoke the
 * handler commits what is safe and drops the partitions' state; on assign
 * it receives each partition's committed offset and metadata, and may set
 * the offset to start from (later: a checkpoint's offset); the default is
 * the committed offset, or the earliest one when none is committed.
 *
 * Configuration: bootstrap servers, group id, topic, and any librdkafka
 * properties as key/value pairs applied last (security.protocol, sasl.*,
 * ssl.* pass through unchanged).
 *
 * Ownership: the source copies its configuration. A polled message is
 * owned by the source until tw_source_release(); its pointers are valid
 * until then. One source is used from one thread.
 */
#ifndef TW_KAFKA_SOURCE_H
#define TW_KAFKA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#define TW_SOURCE_OFFSET_DEFAULT (-1001) /* committed, else earliest */

typedef struct tw_kafka_source tw_kafka_source;

typedef struct tw_source_prop {
    const char *key;
    const char *value;
    const char *where; /* "FILE:LINE" for errors; may be NULL */
} tw_source_prop;

typedef struct tw_source_config {
    const char *brokers;
    const char *group;
    const char *topic;
    const char *client_id; /* may be NULL */
    const tw_source_prop *props;
    size_t nprops;
} tw_source_config;

/* One partition handed to this member. The handler may set start_offset
 * (TW_SOURCE_OFFSET_DEFAULT = committed or earliest). */
typedef struct tw_source_assigned {
    int32_t partition;
    int64_t committed;    /* -1 when none */
    const char *metadata; /* committed metadata, "" when none */
    int64_t start_offset;
} tw_source_assigned;

typedef struct tw_source_handler {
    void (*assign)(void *ud, tw_kafka_source *s, tw_source_assigned *parts,
                   size_t n);
    void (*revoke)(void *ud, tw_kafka_source *s, const int32_t *parts,
                   size_t n);
    void *ud;
} tw_source_handler;

typedef struct tw_source_msg {
    const char *topic;
    int32_t partition;
    int64_t offset;
    const void *key; /* NULL when absent */
    size_t key_len;
    const void *value;
    size_t len;
    void *opaque_; /* the librdkafka message */
} tw_source_msg;

/* Creates the consumer and subscribes. Errors name the bad property with
 * its `where`. */
int tw_source_new(const tw_source_config *cfg, const tw_source_handler *h,
                  tw_kafka_source **out, char *err, size_t errlen);

/* Waits at most timeout_ms for a message: 1 = *msg filled (release it),
 * 0 = none (or a transient consumer error, logged), -1 = fatal (err). */
int tw_source_poll(tw_kafka_source *s, int timeout_ms, tw_source_msg *msg,
                   char *err, size_t errlen);
void tw_source_release(tw_kafka_source *s, tw_source_msg *msg);

/* One partition's commit. */
typedef struct tw_source_commit_entry {
    int32_t partition;
    int64_t offset;       /* the next offset to read */
    const char *metadata; /* may be NULL */
} tw_source_commit_entry;

/* Commits synchronously. 0, or -1 with err (e.g. not a member any more). */
int tw_source_commit(tw_kafka_source *s, const tw_source_commit_entry *e,
                     size_t n, char *err, size_t errlen);

/* Backpressure: pause (1) or resume (0) fetching every partition assigned
 * now; partitions assigned while paused start paused. Callbacks (rebalance)
 * keep being served by tw_source_poll, which a paused consumer must keep
 * calling (max.poll.interval.ms). Messages already fetched may still be
 * delivered: a caller that must not process them drops them and seeks. */
int tw_source_pause(tw_kafka_source *s, int pause, char *err, size_t errlen);
int tw_source_paused(const tw_kafka_source *s);
/* Per partition: messages between the consumer's position and the high
 * watermark last seen in a fetch response (no broker request), or -1
 * when not known yet. */
void tw_source_lag(tw_kafka_source *s, const int32_t *parts, size_t n,
                   int64_t *lag);

/* The next message of `partition` will be the one at `offset` (assigned
 * partitions only; works on a paused partition). */
int tw_source_seek(tw_kafka_source *s, int32_t partition, int64_t offset,
                   char *err, size_t errlen);

/* Leaves the group (the revoke handler runs first) and closes. */
void tw_source_close(tw_kafka_source *s);
void tw_source_free(tw_kafka_source *s);

const char *tw_source_topic(const tw_kafka_source *s);

#endif /* TW_KAFKA_SOURCE_H */
