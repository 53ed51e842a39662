/*
 * topic_read.h - one pass over a topic as it is now: every partition from
 * its first retained offset up to the high watermark found at the start,
 * then stop. A plain assigned consumer: no consumer group is joined and
 * nothing is committed, so reading disturbs no engine (`trainwatch
 * pystats --job`).
 *
 * Time-bounded: the metadata and watermark requests wait at most
 * timeout_ms, and so does the read for a partition that delivers nothing
 * new; either is an error naming the brokers, topic and partition.
 */
#ifndef TW_TOPIC_READ_H
#define TW_TOPIC_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kafka_source.h"

typedef struct tw_topic_read_opts {
    const char *brokers;
    const char *topic;
    const tw_source_prop *props; /* librdkafka properties, applied last */
    size_t nprops;
    int timeout_ms;
    FILE *progress;  /* a line every few seconds on long reads; NULL: none */
    const char *who; /* progress lines start "<who>: " */
} tw_topic_read_opts;

typedef struct tw_topic_msg {
    int32_t partition;
    int64_t offset;
    const void *key; /* NULL when absent */
    size_t key_len;
    const void *value;
    size_t len;
} tw_topic_msg;

typedef struct tw_topic_read_stats {
    int32_t partitions; /* the topic's */
    int64_t messages;   /* delivered to the callback */
    int64_t bytes;      /* their values' bytes */
    int64_t to_read;    /* messages below the watermarks at the start */
} tw_topic_read_stats;

/* Called per message in offset order within a partition; a non-zero
 * return stops the read (tw_topic_read then returns TW_ERR with the
 * callback's err). */
typedef int (*tw_topic_read_fn)(void *ud, const tw_topic_msg *m, char *err,
                                size_t errlen);

/* TW_OK, or TW_ERR with a sentence in err. */
int tw_topic_read(const tw_topic_read_opts *o, tw_topic_read_fn fn, void *ud,
                  tw_topic_read_stats *st, char *err, size_t errlen);

#endif /* TW_TOPIC_READ_H */
