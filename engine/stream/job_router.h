/*
 * job_router.h - the daemon's jobs: routes each decoded batch to its job's
 * evaluation context (job.h) by job id, creates contexts, finalizes them
 * (job-end marker, or no message for `job_idle` of wall time), writes
 * results files (results_file.h: held and retried when a write fails,
 * retried by tw_router_expire) and feeds the alert tracker (alert.h).
 * Jobs are grouped by the Kafka partition they arrive on, because a
 * partition is the unit a consumer group moves between instances.
 *
 * Exactness: one protocol for every state store (state_store.h; given
 * none, the router makes a private volatile memory store).
 *  - Checkpoint, then commit. tw_router_checkpoint() writes, per partition
 *    and in one transaction (checkpoint.h), the tombstones of the jobs
 *    finished since the last one, the next offset, and - when the store is
 *    durable (Redis, or memory with a snapshot) - the dirty parts of its
 *    unfinished jobs: tw_job_save's parts, "alerts" (the alert tracker)
 *    and "origin" (the job's first offset). tw_router_commit_point() then
 *    gives the Kafka commit: the checkpoint's offset, but never past the
 *    first message of a job still unfinished, with the ids of the jobs
 *    finished here whose first message lies at or after it as the offset
 *    metadata (a JSON array, at most TW_ROUTER_META_MAX bytes, whose
 *    first element is {"next_offset": N}: the offset after the last
 *    message processed, which replay's flow control (replay_flow.h)
 *    reads).
 *  - On assignment the partition's checkpoint is loaded: its jobs are
 *    restored and reading starts at its offset; without one (a volatile
 *    store, or a durable one emptied while the engine was down) reading
 *    starts at the committed offset and the unfinished jobs are re-read
 *    from their first message. Jobs named in the metadata or with a
 *    tombstone are not evaluated again (after_end).
 *  - A job first met mid-stream (neither JOB_START nor sequence 1) was
 *    finished by a previous owner only when the offset where reading
 *    started covers its start (a checkpoint or a commit of this protocol)
 *    and no offset was lost since (jobs_finished_before). Otherwise its
 *    beginning was lost: it is evaluated and marked partial, or skipped
 *    with engine.on_data_loss: skip (jobs_data_loss, WARN either way).
 *  - Offsets never read (the broker truncated the log under the consumer,
 *    or its position was reset) are counted (offset_gaps, offsets_lost)
 *    and mark the jobs in flight partial; per-node sequence gaps mark a
 *    job partial with the missing ranges (job_loss.h).
 *  - Alerts are claimed in the store (tw_checkpoint_claim, SET NX) before
 *    they are handed to the alert callback: scans queue them and
 *    tw_router_flush_alerts() claims and sends them; an id claimed before
 *    (a re-evaluation after a crash) is not sent again (alerts_deduped).
 *    A crash between claim and send loses that alert (at most once), but
 *    not silently: the claim stays in v1:pending until
 *    tw_router_confirm_alerts() clears it after delivery, and
 *    tw_router_sweep_claims() reports and counts (claims_unconfirmed)
 *    the claims never confirmed (claim_pending.h).
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

#include "alert.h"
#include "job.h"
#include "kafka_source.h"
#include "state_store.h"

/* Offset metadata stays below Kafka's default offset.metadata.max.bytes. */
#define TW_ROUTER_META_MAX 3900

/* What to do with a job met mid-stream whose start nothing accounts for. */
typedef enum tw_on_data_loss {
    TW_ON_DATA_LOSS_EVALUATE = 0, /* evaluate what is left, marked partial */
    TW_ON_DATA_LOSS_SKIP = 1,     /* skip it (counted, WARN)               */
} tw_on_data_loss;

typedef struct tw_router_config {
    tw_job_config job;
    tw_registry *reg;
    const tw_rule_spec *rules;
    size_t nrules;
    int64_t job_idle_us;          /* wall time without a message: finalize */
    const char *results_dir;      /* NULL = no results files */
    int report_html;              /* also results_dir/<name>.html */
    tw_store *store;              /* borrowed; NULL = a private volatile one */
    const char *topic;            /* the metrics topic: checkpoint keys */
    tw_on_data_loss on_data_loss; /* a job whose beginning was lost */
    size_t max_alert_bytes;   /* 0 = none (tw_alert_tracker_set_max_bytes) */
    int64_t finding_every_us; /* tw_alert_tracker_set_finding_every */
    /* Told of each job finished here (its results handed to the writer);
     * NULL = nobody. */
    void (*job_finished)(void *ud, const char *job);
    void *job_finished_ud;
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
    uint64_t jobs_finished_before; /* met mid-stream, start covered      */
    uint64_t jobs_data_loss;       /* met mid-stream, beginning lost     */
    uint64_t jobs_skipped_partial; /* of those, skipped (on_data_loss)   */
    uint64_t skipped_messages;     /* their messages                       */
    uint64_t jobs_partial;         /* finished with input known missing   */
    uint64_t offset_gaps;          /* offset ranges never read            */
    uint64_t offsets_lost;         /* offsets in them                      */
    uint64_t key_mismatches;       /* dead letters: key is not the job id  */
    uint64_t after_end;            /* messages of jobs already finished    */
    uint64_t alerts_sent;
    uint64_t alerts_deduped;     /* claimed before: not sent again       */
    uint64_t claims_unconfirmed; /* claims whose delivery was never
                                    confirmed (claim_pending.h)         */
    uint64_t jobs_restored;      /* from a checkpoint on assignment      */
    uint64_t checkpoints;        /* partition checkpoints written        */
    uint64_t checkpoint_bytes;   /* bytes of parts they wrote            */
    uint64_t scans;
    /* results files (results_file.h) */
    uint64_t results_written;  /* on disk                              */
    uint64_t results_versions; /* of those, as <name>~v<n>.json        */
    uint64_t results_failures; /* write attempts that failed           */
    uint64_t results_retries;  /* attempts after a failure             */
    uint64_t results_pending;  /* held in memory, not on disk yet      */
    uint64_t checkpoints_held; /* not written: a finished job's results
                                  were still held (see checkpoint)     */
    uint64_t skewed;           /* samples, events, JOB_END times refused as
                                  beyond the clock-skew bound (job.h)     */
    uint64_t skewed_batches;   /* batches that had any (dead-letter copies) */
    uint64_t scan_cap_hits;    /* advances cut short by the scan cap      */
    uint64_t alerts_truncated; /* cut to max_alert_bytes               */
    uint64_t findings_held;    /* finding alerts held: finding_every   */
    uint64_t jobs_quarantined; /* tw_router_quarantine                 */
    uint64_t messages_quarantined; /* tw_router_quarantine                 */
    uint64_t python_profiles;      /* the hook's, verified and not evaluated */
    uint64_t tensors;      /* the hook's debugging tensors accepted      */
    uint64_t late_tensors; /* dropped: their scan had closed             */
} tw_router_stats;

/* An alert to publish (key = job). partition/offset: the metrics message
 * whose batch completed the scan, or -1/-1 (idle finalization). facts:
 * the alert's content typed (alert.h), borrowed for the call. */
typedef int (*tw_router_alert_fn)(void *ud, const char *job, const char *id,
                                  const char *json, size_t len,
                                  int32_t partition, int64_t offset,
                                  const tw_alert_facts *facts);

typedef struct tw_router tw_router;

int tw_router_new(const tw_router_config *cfg, tw_router_alert_fn alert,
                  void *ud, tw_router **out, char *err, size_t errlen);
void tw_router_free(tw_router *r);

/* The partition is this instance's from now on. `metadata` and
 * `committed` are what the previous owner committed (may be NULL or "",
 * -1). *start_offset gets where to read from: the checkpoint's offset, or
 * the committed one, or -2 = the beginning. With a store that cannot be
 * reached the load is left pending (tw_router_load_pending). TW_ERR: out
 * of memory, or a checkpoint that cannot be restored (err names the key or
 * part). */
int tw_router_assign(tw_router *r, int32_t partition, const char *metadata,
                     int64_t committed, int64_t *start_offset, char *err,
                     size_t errlen);

/* Loads the checkpoints whose load failed for want of the store:
 * TW_OK when none is left, TW_UNAVAILABLE, TW_ERR. */
int tw_router_load_pending(tw_router *r, char *err, size_t errlen);

/* Where reading `partition` must go on: the offset after the last message
 * processed, else where the assignment started; -1001 when unknown. */
int64_t tw_router_position(const tw_router *r, int32_t partition);

/* Claims and sends the queued alerts. TW_OK when none is left,
 * TW_UNAVAILABLE, TW_ERR (the alert callback failed, or the store
 * refused). */
int tw_router_flush_alerts(tw_router *r, char *err, size_t errlen);
/* Every alert handed to the callback so far was delivered (the producer
 * flushed without error): clears their claims from v1:pending, in one
 * transaction. TW_OK, TW_UNAVAILABLE or TW_ERR (kept for the next call). */
int tw_router_confirm_alerts(tw_router *r, char *err, size_t errlen);
/* Reports and counts (claims_unconfirmed) the claims of alerts and actions
 * older than state.pending_after never confirmed (claim_pending.h). */
int tw_router_sweep_claims(tw_router *r, char *err, size_t errlen);

/* Writes the partition's checkpoint (TW_OK with nothing new). Alerts must
 * have been flushed and delivered first: TW_UNAVAILABLE while some are
 * still queued. While a job finished on the partition has its results
 * held (the write failed and is retried), nothing is written (TW_OK,
 * counted in checkpoints_held): the previous checkpoint and commit stay,
 * so a crash re-evaluates that job. */
int tw_router_checkpoint(tw_router *r, int32_t partition, char *err,
                         size_t errlen);

/* Tries every held results file once more, now (at a graceful stop);
 * returns how many are still held. */
size_t tw_router_retry_results(tw_router *r);

/* Nonzero when a checkpoint of `partition` should not wait for the
 * interval: jobs finished since the last one. */
int tw_router_checkpoint_due(const tw_router *r, int32_t partition);

/* The partition has left: its unfinished jobs are dropped unevaluated
 * (their next owner re-reads them). Commit first (tw_router_commit_point). */
void tw_router_revoke(tw_router *r, int32_t partition);

/* Routes batch b read at (partition, offset) at wall time now_us; takes
 * ownership of b. TW_ERR only when the engine cannot go on (out of memory,
 * an alert could not be queued). TW_UNAVAILABLE when the store is needed
 * and cannot be reached (nothing changed: the message must be read
 * again); a message before the partition's position (redelivered) is
 * ignored. TW_JOB_STOPPED: the job's stop_requested callback stopped
 * its scans (whole scans only; a job end is not finalized); the position
 * stays at this message, so it is read again (its samples then count as
 * duplicates, its JOB_END finishes the job). Stop consuming.
 * When stats.skewed_batches grew, the batch had items refused for clock
 * skew: the caller dead-letters a copy (reason clock_skew). */
int tw_router_batch(tw_router *r, int32_t partition, int64_t offset,
                    tw_batch *b, int64_t now_us);

/* The message about to be dead-lettered had a key other than its batch's
 * job id (counted; tw_router_dead_letter follows). */
void tw_router_key_mismatch(tw_router *r);

/* A message that was sent to the dead-letter topic: counted, processed. */
void tw_router_dead_letter(tw_router *r, int32_t partition, int64_t offset);

/* The message at (partition, offset) of job `job` (NULL when it does not
 * decode) failed for good (quarantine.h) and went to the dead-letter
 * topic: it counts as processed (messages_quarantined); offset -1: no
 * message, the job's idle finalization failed (tw_router_expire quarantines
 * it rather than fail and meet it again after a restart). The job, when
 * unfinished here, is finished as quarantined: its results file gets
 * "quarantined": {reason, partition, offset, attempts}, no final alerts
 * are sent, and its later messages are skipped like a finished job's
 * (jobs_quarantined, one ERROR line). TW_ERR: out of memory. */
int tw_router_quarantine(tw_router *r, int32_t partition, int64_t offset,
                         const char *job, const char *reason,
                         unsigned attempts);

/* Runs the wall-clock rules of every live job at now_us (engine wall
 * clock, µs since the epoch; tw_job_wallclock); their alerts join the
 * outbox, belonging to no message, for tw_router_flush_alerts. */
void tw_router_wallclock(tw_router *r, int64_t now_us);

/* Finalizes the jobs without a message for job_idle; one whose
 * finalization fails is quarantined (see tw_router_quarantine). TW_ERR
 * (out of memory quarantining it), and TW_JOB_STOPPED (that job stays
 * unfinished), as above. */
int tw_router_expire(tw_router *r, int64_t now_us);

/* The commit of one partition (see above; after tw_router_checkpoint): 1
 * and *out filled (metadata owned by the router, valid until the next
 * call), 0 when there is nothing to commit. */
int tw_router_commit_point(tw_router *r, int32_t partition,
                           tw_source_commit_entry *out);

/* Partitions currently assigned, into parts (at most max); the count. */
size_t tw_router_partitions(const tw_router *r, int32_t *parts, size_t max);

void tw_router_get_stats(const tw_router *r, tw_router_stats *out);

#endif /* TW_JOB_ROUTER_H */
