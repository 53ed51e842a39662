/*
 * replay_flow.h - replay's flow control: keeps what replay has published
 * but a consumer group has not read yet below a bound, so that a broker
 * which keeps little (the embedded broker keeps TW_BROKER_RETENTION_BYTES
 * per partition, kafka_broker.h) never deletes a message before the
 * engine has read it.
 *
 * How far the group has read, per partition: its committed offset, or,
 * when larger, the next_offset the engine puts first in its commit
 * metadata (job_router.h): without a state store the engine commits the
 * first offset of its oldest unfinished job, which does not move while a
 * job is being replayed. The position only moves forward here: a group
 * that goes back (an engine restarted without a store re-reads its
 * unfinished jobs) is not followed back.
 *
 * What is ahead of the group: this producer's own messages, placed
 * (partition, offset, bytes) by their delivery reports, plus those queued
 * and not yet reported. Messages of other producers on the same partition
 * are not counted: the bound leaves room for them.
 *
 * The caller publishes while tw_replay_flow_blocked() says no; when it
 * says yes it serves delivery reports, calls tw_replay_flow_refresh() and
 * tw_replay_flow_report() and sleeps a little, until it says no again.
 *
 * Ownership: tw_replay_flow_new() copies what it needs from the config.
 * One flow is used from one thread (delivery reports arrive from
 * tw_producer_poll() on the caller's thread).
 */
#ifndef TW_REPLAY_FLOW_H
#define TW_REPLAY_FLOW_H

#include <stddef.h>
#include <stdint.h>

typedef struct tw_replay_flow tw_replay_flow;

typedef struct tw_replay_flow_config {
    const char *brokers;
    const char *const *props; /* "key=value" librdkafka properties */
    size_t nprops;
    const char *group; /* the consumer group to follow */
    const char *topic;
    uint64_t max_bytes;    /* value bytes ahead of the group, >= 1 */
    uint64_t max_messages; /* messages ahead of the group, >= 1    */
} tw_replay_flow_config;

typedef struct tw_replay_flow_stats {
    uint64_t waits;            /* times publishing had to wait      */
    int64_t waited_us;         /* time spent waiting, in total      */
    uint64_t max_ahead_bytes;  /* most bytes ahead at any moment    */
    uint64_t refresh_failures; /* committed offsets not obtained    */
} tw_replay_flow_stats;

/* Creates the flow and its handle for reading the group's committed
 * offsets (a consumer that never joins the group). 0, or -1 with a
 * sentence in err (bad property, librdkafka failure). */
int tw_replay_flow_new(const tw_replay_flow_config *cfg, tw_replay_flow **out,
                       char *err, size_t errlen);

void tw_replay_flow_free(tw_replay_flow *f);

/* A message of len value bytes was queued for the topic. */
void tw_replay_flow_queued(tw_replay_flow *f, size_t len);

/* The producer's delivery report (a tw_producer_delivery_fn; ud is the
 * flow). Reports for other topics are ignored. */
void tw_replay_flow_on_delivery(void *ud, const char *topic, int32_t partition,
                                int64_t offset, size_t len, int delivered);

/* Nonzero when publishing len more bytes would pass a bound, as far as
 * the last refresh knows. Never blocks when nothing is ahead, so a
 * message larger than the bound goes once the group has read the rest. */
int tw_replay_flow_blocked(const tw_replay_flow *f, size_t len);

/* Reads the group's committed offsets of the partitions with messages
 * ahead and forgets the messages it has read. 0, or -1 (logged as a
 * warning at most every 10 s; the caller just tries again later). */
int tw_replay_flow_refresh(tw_replay_flow *f);

/* Called while waiting, with the monotonic time: an INFO line every 5 s
 * saying what is waited for, and a WARN every 10 s during which the group
 * read nothing (naming the group, partition and offset, and how to turn
 * flow control off). `waiting` 0 ends a wait (it is then counted). */
void tw_replay_flow_report(tw_replay_flow *f, int waiting, int64_t now_us);

void tw_replay_flow_get_stats(const tw_replay_flow *f,
                              tw_replay_flow_stats *out);

#endif /* TW_REPLAY_FLOW_H */
