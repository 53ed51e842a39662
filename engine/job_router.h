/*
 * job_router.h - the daemon's jobs: routes each decoded batch to its job's
 * evaluation context (job.h) by job id, creates contexts, finalizes them
 * (job-end marker, or no message for `job_idle` of wall time), writes
 * results files and feeds the alert tracker (alert.h). Jobs are grouped
 * by the Kafka partition they arrive on, because a partition is the unit
 * a consumer group moves between instances.
 *
 * Offsets and exactness (no state store yet). A message is processed when
 * its job no longer needs it: the job has finished, or the message has
 * been ingested by a job this instance will finish. Per partition the
 * commit offset is therefore
 *     min(first offset of every unfinished job, last processed offset + 1)
 * so an instance that takes the partition over re-reads every unfinished
 * job from its first message and evaluates it completely. Messages of
 * jobs finished before that point may be re-read as well:
 *  - a job whose first message seen since assignment is neither a
 *    JOB_START marker nor sequence number 1 joined mid-stream: its start
 *    lies before the committed offset, so a previous owner finished it.
 *    Its messages are skipped and counted (jobs_skipped_partial,
 *    skipped_messages), with one log line per job;
 *  - a job that started after that point but finished before the commit
 *    would be evaluated again from its start. So each commit carries, as
 *    Kafka offset metadata, the ids of the jobs finished here whose first
 *    message lies at or after the committed offset (a JSON array of
 *    strings, at most TW_ROUTER_META_MAX bytes); the next owner skips
 *    them (counted as after_end).
 * With a persistent state store (tw_router_config.store: Redis, or the
 * memory store with a snapshot file) the store is the truth instead:
 *  - tw_router_checkpoint() writes, per partition and in one transaction
 *    (checkpoint.h), the dirty parts of its unfinished jobs (tw_job_save
 *    parts plus an "alerts" part: the alert tracker's bookkeeping), the
 *    tombstones of the jobs finished since the last one, and the next
 *    offset; the Kafka commit (tw_router_commit_point) is then exactly that
 *    checkpointed offset, with no metadata;
 *  - on assignment the partition's checkpoint is loaded: its jobs are
 *    restored (counted in jobs_restored, one log line each) and reading
 *    starts at the stored offset; a job first seen after that with a
 *    tombstone is skipped (after_end); one without either that is not at
 *    its start still joined mid-stream (skipped as above);
 *  - alerts are claimed in the store (tw_checkpoint_claim, SET NX) before
 *    they are handed to the alert callback: scans queue them, and
 *    tw_router_flush_alerts() claims and sends them; an id claimed before
 *    (a re-evaluation after a crash) is not sent again (alerts_deduped).
 *    A crash between claim and send loses that alert (at most once).
 * Store calls return TW_UNAVAILABLE when the store cannot be reached; the
 * caller then stops consuming, drops messages already fetched, and once
 * tw_store_ping succeeds retries, seeks each partition back to
 * tw_router_position() and resumes. Nothing is half-applied on
 * TW_UNAVAILABLE, so the retry is exact.
 *
 * Ownership: the router owns its partitions, jobs and trackers; it
 * borrows the registry and the rule specs in its config, which must
 * outlive it. tw_router_batch() takes ownership of the batch.
 * One router is used from one thread.
 */
#ifndef TW_JOB_ROUTER_H
#define TW_JOB_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "kafka_source.h"
#include "state_store.h"

/* Offset metadata stays below Kafka's default offset.metadata.max.bytes. */
#define TW_ROUTER_META_MAX 3900

typedef struct tw_router_config {
    tw_job_config job;
    tw_registry *reg;
    const tw_rule_spec *rules;
    size_t nrules;
    int64_t job_idle_us;     /* wall time without a message: finalize */
    const char *results_dir; /* NULL = no results files */
    tw_store *store;         /* persistent store, or NULL (borrowed) */
    const char *topic;       /* the metrics topic: checkpoint keys */
    size_t max_alert_bytes;  /* 0 = none (tw_alert_tracker_set_max_bytes) */
} tw_router_config;

typedef struct tw_router_stats {
    uint64_t batches;         /* decoded batches routed to a job            */
    uint64_t dead_letters;    /* messages that could not be decoded         */
    uint64_t duplicates;      /* batches dropped: (node, seq) seen before   */
    uint64_t samples, events; /* accepted                      */
    uint64_t late_samples, late_events; /* dropped: their scan had closed */
    uint64_t jobs_active;
    uint64_t jobs_started;
    uint64_t jobs_finished;        /* by end marker or idle timeout        */
    uint64_t jobs_idle;            /* of those, by idle timeout            */
    uint64_t jobs_dropped;         /* unfinished when their partition left */
    uint64_t jobs_skipped_partial; /* joined mid-stream, see above       */
    uint64_t skipped_messages;     /* their messages                       */
    uint64_t after_end;            /* messages of jobs already finished    */
    uint64_t alerts_sent;
    uint64_t alerts_deduped;   /* claimed before: not sent again       */
    uint64_t jobs_restored;    /* from a checkpoint on assignment      */
    uint64_t checkpoints;      /* partition checkpoints written        */
    uint64_t checkpoint_bytes; /* bytes of parts they wrote            */
    uint64_t scans;
    uint64_t alerts_truncated;     /* cut to max_alert_bytes               */
    uint64_t jobs_quarantined;     /* tw_router_quarantine                 */
    uint64_t messages_quarantined; /* tw_router_quarantine                 */
} tw_router_stats;

/* An alert to publish (key = job). partition/offset: the metrics message
 * whose batch completed the scan, or -1/-1 (idle finalization). */
typedef int (*tw_router_alert_fn)(void *ud, const char *job, const char *id,
                                  const char *json, size_t len,
                                  int32_t partition, int64_t offset);

typedef struct tw_router tw_router;

int tw_router_new(const tw_router_config *cfg, tw_router_alert_fn alert,
                  void *ud, tw_router **out, char *err, size_t errlen);
void tw_router_free(tw_router *r);

/* The partition is this instance's from now on. `metadata` and
 * `committed` are what the previous owner committed (may be NULL or "",
 * -1). *start_offset gets where to read from: TW_SOURCE_OFFSET_DEFAULT
 * without a store; with one the checkpoint's offset (or the committed one,
 * or -2 = the beginning). With a store that cannot be reached the load is
 * left pending (tw_router_load_pending). TW_ERR: out of memory, or a
 * checkpoint that cannot be restored (err names the key or part). */
int tw_router_assign(tw_router *r, int32_t partition, const char *metadata,
                     int64_t committed, int64_t *start_offset, char *err,
                     size_t errlen);

/* Loads the checkpoints whose load failed for want of the store:
 * TW_OK when none is left, TW_UNAVAILABLE, TW_ERR. */
int tw_router_load_pending(tw_router *r, char *err, size_t errlen);

/* Where reading `partition` must go on: the offset after the last message
 * processed, else where the assignment started; -1001 when unknown. */
int64_t tw_router_position(const tw_router *r, int32_t partition);

/* Claims and sends the queued alerts (store only; without a store alerts
 * are sent at once). TW_OK when none is left, TW_UNAVAILABLE, TW_ERR (the
 * alert callback failed, or the store refused). */
int tw_router_flush_alerts(tw_router *r, char *err, size_t errlen);

/* Writes the partition's checkpoint (store only; TW_OK without one or
 * with nothing new). Alerts must have been flushed and delivered first:
 * TW_UNAVAILABLE while some are still queued. */
int tw_router_checkpoint(tw_router *r, int32_t partition, char *err,
                         size_t errlen);

/* Nonzero when a checkpoint of `partition` should not wait for the
 * interval: jobs finished since the last one. */
int tw_router_checkpoint_due(const tw_router *r, int32_t partition);

/* The partition has left: its unfinished jobs are dropped unevaluated
 * (their next owner re-reads them). Commit first (tw_router_commit_point). */
void tw_router_revoke(tw_router *r, int32_t partition);

/* Routes batch b read at (partition, offset) at wall time now_us; takes
 * ownership of b. TW_ERR only when the engine cannot go on (out of memory,
 * an alert could not be queued). With a store: TW_UNAVAILABLE when the
 * store is needed and cannot be reached (nothing changed: the message must
 * be read again); a message before the partition's position (redelivered)
 * is ignored. */
int tw_router_batch(tw_router *r, int32_t partition, int64_t offset,
                    tw_batch *b, int64_t now_us);

/* A message that was sent to the dead-letter topic: counted, processed. */
void tw_router_dead_letter(tw_router *r, int32_t partition, int64_t offset);

/* The message at (partition, offset) of job `job` (NULL when it does not
 * decode) failed for good (quarantine.h) and went to the dead-letter
 * topic: it counts as processed (messages_quarantined), and the job, when
 * unfinished here, is finished as quarantined: its results file gets
 * "quarantined": {reason, partition, offset, attempts}, no final alerts
 * are sent, and its later messages are skipped like a finished job's
 * (jobs_quarantined, one ERROR line). TW_ERR: out of memory. */
int tw_router_quarantine(tw_router *r, int32_t partition, int64_t offset,
                         const char *job, const char *reason,
                         unsigned attempts);

/* Finalizes the jobs without a message for job_idle. TW_ERR as above. */
int tw_router_expire(tw_router *r, int64_t now_us);

/* The commit of one partition: 1 and *out filled (metadata owned by the
 * router, valid until the next call), 0 when there is nothing to commit. */
int tw_router_commit_point(tw_router *r, int32_t partition,
                           tw_source_commit_entry *out);

/* Partitions currently assigned, into parts (at most max); the count. */
size_t tw_router_partitions(const tw_router *r, int32_t *parts, size_t max);

void tw_router_get_stats(const tw_router *r, tw_router_stats *out);

#endif /* TW_JOB_ROUTER_H */
