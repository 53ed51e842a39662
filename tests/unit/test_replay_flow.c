/*
 * test_replay_flow.c - replay's flow control (replay_flow.h) against the
 * embedded broker (kafka_broker.h, in this process): messages produced
 * with the real producer are placed by their delivery reports; the
 * group's position comes from a commit made by a real consumer handle,
 * as a plain committed offset or as the engine's {"next_offset":N}
 * metadata.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "kafka_broker.h"
#include "kafka_producer.h"
#include "replay_flow.h"

#define TOPIC "flow.test"

typedef struct fixture {
    tw_broker *broker;
    tw_producer *producer;
    rd_kafka_t *committer; /* a consumer of the group, commits by hand */
} fixture;

static int setup(void **state)
{
    static fixture fx;
    memset(&fx, 0, sizeof(fx));
    char err[512];
    tw_broker_topic topics[] = {{.name = TOPIC, .partitions = 1}};
    tw_broker_opts bo = {.brokers = 1, .topics = topics, .ntopics = 1};
    if (tw_broker_start(&bo, &fx.broker, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    const char *bs = tw_broker_bootstrap(fx.broker);
    if (tw_producer_new(bs, NULL, 0, &fx.producer, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    if (rd_kafka_conf_set(c, "bootstrap.servers", bs, err, sizeof(err)) ||
        rd_kafka_conf_set(c, "group.id", "flow-group", err, sizeof(err)) ||
        rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    fx.committer = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
    if (fx.committer == NULL)
        return -1;
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    rd_kafka_consumer_close(fx->committer);
    rd_kafka_destroy(fx->committer);
    tw_producer_free(fx->producer);
    tw_broker_stop(fx->broker);
    return 0;
}

static tw_replay_flow *flow_new(fixture *fx, const char *group,
                                uint64_t max_bytes, uint64_t max_messages)
{
    tw_replay_flow_config fc = {.brokers = tw_broker_bootstrap(fx->broker),
                                .group = group,
                                .topic = TOPIC,
                                .max_bytes = max_bytes,
                                .max_messages = max_messages};
    tw_replay_flow *f = NULL;
    char err[512];
    assert_int_equal(tw_replay_flow_new(&fc, &f, err, sizeof(err)), 0);
    tw_producer_set_delivery_cb(fx->producer, tw_replay_flow_on_delivery, f);
    return f;
}

static void flow_free(fixture *fx, tw_replay_flow *f)
{
    tw_producer_set_delivery_cb(fx->producer, NULL, NULL);
    tw_replay_flow_free(f);
}

/* Publishes n messages of len bytes as replay does; returns the offset
 * of the first. */
static int64_t publish(fixture *fx, tw_replay_flow *f, int n, size_t len)
{
    static char buf[4096];
    char err[512];
    memset(buf, 'm', sizeof(buf));
    assert_true(len <= sizeof(buf));
    int64_t lo = 0, hi = 0;
    rd_kafka_query_watermark_offsets(fx->committer, TOPIC, 0, &lo, &hi, 5000);
    for (int i = 0; i < n; i++) {
        tw_replay_flow_queued(f, len);
        assert_int_equal(tw_producer_send(fx->producer, TOPIC, "k", buf, len,
                                          NULL, 0, err, sizeof(err)),
                         0);
    }
    assert_int_equal(tw_producer_flush(fx->producer, 10000, err, sizeof(err)),
                     0);
    return hi;
}

static void commit(fixture *fx, int64_t offset, const char *metadata)
{
    rd_kafka_topic_partition_list_t *pl = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_t *tp =
        rd_kafka_topic_partition_list_add(pl, TOPIC, 0);
    tp->offset = offset;
    if (metadata != NULL) {
        tp->metadata = rd_kafka_mem_malloc(fx->committer, strlen(metadata));
        memcpy(tp->metadata, metadata, strlen(metadata));
        tp->metadata_size = strlen(metadata);
    }
    assert_int_equal(rd_kafka_commit(fx->committer, pl, 0),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(pl);
}

/* Nothing ahead never blocks, even a message larger than the bound;
 * queued messages count before their delivery reports place them. */
static void test_bytes_bound(void **state)
{
    fixture *fx = *state;
    tw_replay_flow *f = flow_new(fx, "flow-group", 1000, 100);
    assert_false(tw_replay_flow_blocked(f, 5000));
    tw_replay_flow_queued(f, 600);
    assert_false(tw_replay_flow_blocked(f, 400));
    assert_true(tw_replay_flow_blocked(f, 401));
    /* its report, for another topic: ignored */
    tw_replay_flow_on_delivery(f, "other.topic", 0, 7, 600, 1);
    assert_true(tw_replay_flow_blocked(f, 401));
    /* a failed delivery is not ahead any more */
    tw_replay_flow_on_delivery(f, TOPIC, 0, -1, 600, 0);
    assert_false(tw_replay_flow_blocked(f, 1000));
    tw_replay_flow_stats st;
    tw_replay_flow_get_stats(f, &st);
    assert_int_equal(st.waits, 0);
    flow_free(fx, f);
}

/* The group's committed offset releases what it has read. */
static void test_committed_offset(void **state)
{
    fixture *fx = *state;
    tw_replay_flow *f = flow_new(fx, "flow-group", 1000, 100);
    int64_t first = publish(fx, f, 3, 300); /* 900 bytes ahead */
    assert_true(tw_replay_flow_blocked(f, 200));
    assert_int_equal(tw_replay_flow_refresh(f), 0);
    assert_true(tw_replay_flow_blocked(f, 200)); /* nothing committed */
    commit(fx, first + 1, NULL);                 /* one read: 600 ahead */
    assert_int_equal(tw_replay_flow_refresh(f), 0);
    assert_false(tw_replay_flow_blocked(f, 400));
    assert_true(tw_replay_flow_blocked(f, 401));
    commit(fx, first + 3, NULL);
    assert_int_equal(tw_replay_flow_refresh(f), 0);
    assert_false(tw_replay_flow_blocked(f, 1000));
    tw_replay_flow_stats st;
    tw_replay_flow_get_stats(f, &st);
    assert_int_equal(st.max_ahead_bytes, 900);
    assert_int_equal(st.refresh_failures, 0);
    flow_free(fx, f);
}

/* Without a store `run` commits its oldest unfinished job's start and
 * says how far it has read in the metadata: that position counts. A
 * list of job ids only (older engines) leaves the committed offset. */
static void test_metadata_next_offset(void **state)
{
    fixture *fx = *state;
    tw_replay_flow *f = flow_new(fx, "flow-group", 1000, 100);
    int64_t first = publish(fx, f, 3, 300);
    char meta[128];
    commit(fx, first, "[\"job-a\",\"job-b\"]");
    assert_int_equal(tw_replay_flow_refresh(f), 0);
    assert_true(tw_replay_flow_blocked(f, 200));
    snprintf(meta, sizeof(meta), "[{\"next_offset\":%lld},\"job-a\"]",
             (long long)(first + 2));
    commit(fx, first, meta);
    assert_int_equal(tw_replay_flow_refresh(f), 0);
    assert_false(tw_replay_flow_blocked(f, 700));
    assert_true(tw_replay_flow_blocked(f, 701));
    commit(fx, first, "not json");
    assert_int_equal(tw_replay_flow_refresh(f), 0); /* read stays read */
    assert_false(tw_replay_flow_blocked(f, 700));
    flow_free(fx, f);
}

/* The message bound, and a group nobody commits for. */
static void test_messages_bound(void **state)
{
    fixture *fx = *state;
    tw_replay_flow *f = flow_new(fx, "flow-nobody", 1u << 20, 4);
    publish(fx, f, 3, 10);
    assert_false(tw_replay_flow_blocked(f, 10));
    publish(fx, f, 1, 10);
    assert_true(tw_replay_flow_blocked(f, 10));
    assert_int_equal(tw_replay_flow_refresh(f), 0);
    assert_true(tw_replay_flow_blocked(f, 10));
    /* a wait that ends is counted */
    tw_replay_flow_report(f, 1, 1000000);
    tw_replay_flow_report(f, 1, 1500000);
    tw_replay_flow_report(f, 0, 3000000);
    tw_replay_flow_stats st;
    tw_replay_flow_get_stats(f, &st);
    assert_int_equal(st.waits, 1);
    assert_int_equal(st.waited_us, 2000000);
    flow_free(fx, f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_bound),
        cmocka_unit_test(test_committed_offset),
        cmocka_unit_test(test_metadata_next_offset),
        cmocka_unit_test(test_messages_bound),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
