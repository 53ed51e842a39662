/*
 * checkpoint.h - the key layout of the engine's state and the atomic
 * checkpoint of one Kafka partition (state of its jobs + consumed offset).
 *
 * Key layout (v1; <prefix> is state.redis.prefix, default "tw:", and is
 * added by the Redis store; the memory store uses the keys as they are):
 *
 *   <prefix>v1:job:{<job>}:<part>          the bytes of one part of a job's
 *                                          state: "core" (engine: clock,
 *                                          producers), "dict.<n>",
 *                                          "windows", "chunks.<n>" (job.h,
 *                                          segmented checkpoints) and
 *                                          "rule.<i>" (rule i's plugin state)
 *   <prefix>v1:job:{<job>}:parts           set of the job's part names
 *   <prefix>v1:part:<topic>:<p>:jobs       set of the job ids checkpointed
 *                                          for partition p of topic
 *   <prefix>v1:part:<topic>:<p>:offset     next Kafka offset to consume
 *                                          (decimal)
 *   <prefix>v1:done:{<job>}                tombstone of a finished job
 *                                          (value: unix seconds when it
 *                                          finished), TTL state.finished_ttl
 *   <prefix>v1:sent:<id>                   an action/alert id claimed before
 *                                          sending (SET NX EX), TTL
 *                                          state.finished_ttl
 *   <prefix>v1:pending                     sorted set of the v1:sent:<id>
 *                                          keys whose send is not confirmed
 *                                          yet (score: claim time, ms)
 *
 * The version ("v1") changes when the layout or a part's encoding changes
 * incompatibly, so a new engine never misreads an old checkpoint. There are
 * no per-node or per-rule keys outside the parts: node state lives in the
 * job's engine parts and each rule's state (all nodes) in "rule.<i>". The
 * parts' blobs carry their own versions (job_state.c), so a segmented
 * engine still reads a whole version 4 "core".
 * `{<job>}` is a Redis Cluster hash tag keeping a job's keys in one slot;
 * a partition's checkpoint spans jobs, so it needs a single Redis (or a
 * cluster-aware store later).
 *
 * Job ids are any C string; part names hold only [A-Za-z0-9._-] (so a key
 * splits unambiguously at its last "}:") and may not be "parts". Only the owner
 * of a partition writes its keys (Kafka key = job id: a job lives in exactly
 * one partition).
 *
 * Ownership: nothing passed in is kept; data handed to the load callback is
 * valid only during the call.
 */
#ifndef TW_CHECKPOINT_H
#define TW_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "state_store.h"

/* One serialized part of one job's state (e.g. from tw_job_save). */
typedef struct tw_checkpoint_part {
    const char *job;
    const char *part; /* "core", "rule.0", "chunks.12", ... */
    const void *data; /* NULL: remove the part (its key and set member) */
    size_t len;
} tw_checkpoint_part;

/* Write, in one transaction: every part (replacing what was stored for that
 * job and part; parts not given are left as they were, so only dirty parts
 * need to be passed), the partition's job set, the partition's next offset,
 * and for each finished job: delete all its parts, drop it from the job
 * set, and write its tombstone with TTL tw_store_finished_ttl_s. Parts of
 * a job that is also in `finished` are not written. Commit the Kafka offset
 * only after this returns TW_OK; on TW_UNAVAILABLE pause consuming, wait
 * for tw_store_ping, and call again with the same arguments (a checkpoint
 * is idempotent). */
int tw_checkpoint_commit(tw_store *s, const char *topic, int32_t partition,
                         int64_t next_offset, const tw_checkpoint_part *parts,
                         size_t nparts, const char *const *finished,
                         size_t nfinished, char *err, size_t errlen);

/* Drops a partition's offset and job set (not tombstones or claims): for a
 * store that keeps no job state (tw_store_durable = 0), whose checkpoint
 * offset would otherwise outlive the jobs it assumes, when the partition
 * moves to another owner. */
int tw_checkpoint_forget(tw_store *s, const char *topic, int32_t partition,
                         char *err, size_t errlen);

/* Called by tw_checkpoint_load once per stored part: per job (jobs in
 * sorted order) "core" first, then "dict.<n>" by n, "windows", "chunks.<n>"
 * by n, "rule.<i>" by i, then any other part by name (job.h, segmented
 * checkpoints). Non-zero stops the load and is returned. */
typedef int (*tw_checkpoint_part_fn)(void *ud, const char *job,
                                     const char *part, const uint8_t *data,
                                     size_t len);

/* <0, 0, >0 as part a is restored before, with, after part b (the order
 * above). */
int tw_checkpoint_part_cmp(const char *a, const char *b);

/* Load a partition's checkpoint on assignment: *next_offset gets the
 * offset to seek to (-1 when the partition has none), then fn sees every
 * part of every job of the partition. A job listed but missing a part it
 * lists, or a malformed offset, is TW_ERR naming the key. */
int tw_checkpoint_load(tw_store *s, const char *topic, int32_t partition,
                       int64_t *next_offset, tw_checkpoint_part_fn fn, void *ud,
                       char *err, size_t errlen);

/* 1 when job finished within state.finished_ttl (its tombstone exists),
 * 0 when not; TW_ERR / TW_UNAVAILABLE. */
int tw_checkpoint_job_done(tw_store *s, const char *job, char *err,
                           size_t errlen);

/* Claim an action or alert id before sending it (at most once across
 * restarts): 1 first time (send it), 0 already sent, TW_ERR /
 * TW_UNAVAILABLE (do not send; retry later). Kept state.finished_ttl, with
 * `label` (what it is, for messages; NULL: none) as its value. A claim is
 * also recorded in v1:pending until tw_checkpoint_confirm clears it. */
int tw_checkpoint_claim(tw_store *s, const char *id, const char *label,
                        char *err, size_t errlen);
/* The sends of these claimed ids reached their final outcome (delivered,
 * or a failure already counted): one transaction removing them from
 * v1:pending. */
int tw_checkpoint_confirm(tw_store *s, const char *const *ids, size_t n,
                          char *err, size_t errlen);
/* Takes (removes) from v1:pending up to 1000 claims made before
 * claimed_before_ms (wall clock) and calls fn for each one this call took
 * (with several engines on one store, exactly one of them sees each):
 * the id, its label (NULL: none or expired) and the claim time. Returns
 * how many, TW_ERR or TW_UNAVAILABLE. */
typedef void (*tw_checkpoint_unconfirmed_fn)(void *ud, const char *id,
                                             const char *label,
                                             int64_t claimed_ms);
int tw_checkpoint_unconfirmed(tw_store *s, int64_t claimed_before_ms,
                              tw_checkpoint_unconfirmed_fn fn, void *ud,
                              char *err, size_t errlen);

/* The key names above into buf (TW_ERR when buf is too small). */
int tw_checkpoint_key_part(char *buf, size_t size, const char *job,
                           const char *part);
int tw_checkpoint_key_partition(char *buf, size_t size, const char *topic,
                                int32_t partition, const char *what);
int tw_checkpoint_key_done(char *buf, size_t size, const char *job);

#endif /* TW_CHECKPOINT_H */
