/*
 * broker_faults.h - faults injected into `trainwatch broker`'s mock cluster
 * (librdkafka's rdkafka_mock.h) from one-line text commands, so tests can
 * make the engine and its producers live through what a real cluster
 * does: request errors, brokers going down and up, partition leaders and
 * group coordinators moving, slow brokers.
 *
 * Commands (words separated by blanks; '#' starts a comment):
 *   error REQUEST COUNT ERROR     the next COUNT requests of that kind (to
 *                                 any broker) fail with ERROR
 *   down ID | up ID               broker ID (1..N) stops / starts answering
 *   leader TOPIC PARTITION ID     the partition's leader becomes broker ID
 *   coordinator group|transaction KEY ID
 *                                 the coordinator of that group/transaction
 *                                 becomes broker ID
 *   rtt ID MS                     broker ID answers MS ms late (0: on time)
 * REQUEST is a Kafka API name (Produce, Fetch, ListOffsets, Metadata,
 * OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat,
 * LeaveGroup, SyncGroup, DescribeGroups, ApiVersions, InitProducerId);
 * ERROR a Kafka error name as librdkafka spells it without its prefix
 * (NOT_LEADER_FOR_PARTITION, REQUEST_TIMED_OUT, NOT_COORDINATOR, ...).
 *
 * Ownership: nothing is kept; the caller owns the cluster and the line.
 */
#ifndef TW_BROKER_FAULTS_H
#define TW_BROKER_FAULTS_H

#include <stddef.h>

struct rd_kafka_mock_cluster_s; /* librdkafka's rdkafka_mock.h */

/* Applies one command line. 0 with a sentence of what was done in msg (an
 * empty or comment line: 0 and msg ""), or -1 with the reason in msg. */
int tw_broker_fault_apply(struct rd_kafka_mock_cluster_s *mc, int nbrokers,
                          const char *line, char *msg, size_t msglen);

#endif /* TW_BROKER_FAULTS_H */
