/*
 * kafka_broker.h - a Kafka-protocol broker for development, tests and the
 * engine's embedded default: librdkafka's mock cluster (rdkafka_mock.h),
 * real Kafka protocol on loopback, in this process, data in memory.
 *
 * Ports. librdkafka 2.0.2's mock cluster binds every broker to
 * 127.0.0.1 on a port the kernel picks; it has no API (nor configuration
 * property) for a fixed port, and its metadata advertises those ports.
 * With opts.port != 0 this module also listens on 127.0.0.1:port and
 * relays each connection there to the first mock broker, so clients can
 * bootstrap from a port known in advance; the metadata they receive still
 * names the brokers' own ports, which they then connect to directly. Both
 * are on loopback: clients must run on this host.
 *
 * Topics: those in opts are created at start; others are created by the
 * mock on first use (produce or metadata request) with its own defaults.
 *
 * Retention. The mock keeps, per partition, at most
 * TW_BROKER_RETENTION_BYTES of message sets (the record batches of the
 * produce requests, as sent) and TW_BROKER_RETENTION_BATCHES of them;
 * when an append passes either, the oldest are deleted at once, read or
 * not (rd_kafka_mock_partition_init() and rd_kafka_mock_msgset_new() in
 * librdkafka 2.0.2's src/rdkafka_mock.c, and still in 2.8). Both are
 * constants there, with no API, configuration property or topic config
 * to raise them, so this module cannot. A consumer that falls further
 * behind loses messages (its fetch is answered "offset out of range");
 * `trainwatch replay` keeps within them by flow control
 * (replay_flow.h). Requests up to the hosting handle's
 * receive.message.max.bytes (librdkafka's default, 100 MB) are accepted.
 *
 * Ownership: tw_broker_start() copies what it needs from opts. The strings
 * returned by tw_broker_bootstrap()/tw_broker_direct_bootstrap() are owned
 * by the broker and live until tw_broker_stop().
 */
#ifndef TW_KAFKA_BROKER_H
#define TW_KAFKA_BROKER_H

#include <stddef.h>

typedef struct tw_broker tw_broker;

/* The mock's retention per partition (see above). */
#define TW_BROKER_RETENTION_BYTES (5u * 1024u * 1024u)
#define TW_BROKER_RETENTION_BATCHES 100000u

typedef struct tw_broker_topic {
    const char *name;
    int partitions; /* >= 1 */
} tw_broker_topic;

typedef struct tw_broker_opts {
    int brokers; /* mock brokers, 1..16                         */
    int port;    /* 0 = none; else the relayed bootstrap port   */
    const tw_broker_topic *topics;
    size_t ntopics;
} tw_broker_opts;

/* Starts the cluster (and the relay when opts->port != 0) and creates the
 * topics. Returns 0, or -1 with a sentence in err (port in use, bad
 * topic, mock cluster failure). */
int tw_broker_start(const tw_broker_opts *opts, tw_broker **out, char *err,
                    size_t errlen);

/* What clients should use as bootstrap.servers: "127.0.0.1:PORT" with a
 * relay port, else the mock brokers' own list. */
const char *tw_broker_bootstrap(const tw_broker *b);

/* The mock brokers' own addresses, "127.0.0.1:P1,127.0.0.1:P2,...". */
const char *tw_broker_direct_bootstrap(const tw_broker *b);

/* The mock cluster itself, for fault injection (broker_faults.h); owned
 * by the broker. */
struct rd_kafka_mock_cluster_s;
struct rd_kafka_mock_cluster_s *tw_broker_mock_cluster(tw_broker *b);

/* Stops the relay, closes every connection and destroys the cluster (its
 * data is lost). NULL is ignored. */
void tw_broker_stop(tw_broker *b);

#endif /* TW_KAFKA_BROKER_H */
