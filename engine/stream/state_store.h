/*
 * state_store.h - the one interface to the engine's durable state, with two
 * implementations: `memory` (state_memory.c: an in-process hash map with an
 * optional snapshot file; the embedded default) and `redis` (state_redis.c:
 * hiredis). The key layout of checkpoints is checkpoint.h's business; this
 * layer stores opaque binary values under binary-safe keys.
 *
 * Configuration, the `state:` section of the config file:
 *
 *   state:
 *     store: redis              # memory (default) | redis
 *     checkpoint_interval: 1s   # at most one checkpoint per interval (daemon)
 *     finished_ttl: 7d          # how long finished-job tombstones and sent-
 *                               # action ids are kept (s, m, h, d suffixes)
 *     snapshot: /var/lib/trainwatch/state.snap  # memory store only; optional
 *     snapshot_interval: 0s     # memory: 0 = write at every commit
 *     pending_check: 60s        # look for unconfirmed claims this often
 *     pending_after: 5m         # report a claim unconfirmed this long
 *     redis:
 *       host: 127.0.0.1         # or socket: /run/redis/redis.sock
 *       port: 6379
 *       db: 0
 *       prefix: "tw:"           # prepended to every key
 *       user: trainwatch        # optional ACL user
 *       password_env: TW_REDIS_PASSWORD   # or password_file: /run/secrets/x
 *       connect_timeout: 2s
 *       command_timeout: 5s
 *       retry_initial: 100ms    # reconnect backoff: doubles up to retry_max
 *       retry_max: 10s
 *       chunk_bytes: 67108864   # values longer than this are stored as a
 *                               # hash of chunks (Redis refuses a string
 *                               # over its proto-max-bulk-len, 512 MB)
 *
 * Return codes: TW_OK (0), TW_ERR (-1, a real error with a sentence in err:
 * bad config, corrupt data, a command Redis rejected) and TW_UNAVAILABLE
 * (-2: the store cannot be reached right now; nothing was written). On
 * TW_UNAVAILABLE the caller stops consuming and calls tw_store_ping() until
 * it returns TW_OK (it reconnects with exponential backoff; see
 * tw_store_retry_in_ms), then repeats the same operation. The store logs one
 * line per change of availability (up -> down, down -> up), never one per
 * failed call. Secrets (the Redis password) never appear in logs or errors.
 *
 * Transactions: one at a time per store. txn_begin starts buffering;
 * put/del/sadd/srem/expire copy their arguments into the store's buffer;
 * txn_commit applies them all or none (Redis: one pipelined MULTI ... EXEC;
 * memory: applied in memory, then the snapshot is written when due). When
 * commit returns TW_UNAVAILABLE the outcome may be unknown (the connection
 * broke after EXEC was sent); every checkpoint is idempotent, so the caller
 * simply commits the same transaction again once the store is back. The
 * buffered transaction is kept until the next txn_begin, so
 * tw_store_txn_commit can be called again after TW_UNAVAILABLE without
 * rebuilding it.
 *
 * Threads: a store is used by one thread at a time.
 * Ownership: tw_store_open gives the caller the store (tw_store_close frees
 * it). Keys and values passed in are copied; values handed out by
 * tw_store_get are malloc'd and owned by the caller.
 */
#ifndef TW_STATE_STORE_H
#define TW_STATE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* A store that cannot be reached now (distinct from TW_ERR). */
enum { TW_UNAVAILABLE = -2 };

typedef struct tw_store tw_store;

/* Open the store the `state:` section asks for (NULL or an empty section:
 * the memory store without a snapshot). Unknown keys and malformed values
 * -> TW_ERR naming file:line:key. Redis: a password Redis rejects or a db
 * it refuses is TW_ERR; a server that cannot be reached yet is not: the
 * store opens in the down state and reconnects on use. A corrupt snapshot
 * file is TW_ERR naming the file and the byte offset. */
int tw_store_open(const tw_settings *state, tw_store **out, char *err,
                  size_t errlen);
/* Memory store: writes a final snapshot when one is due. NULL is fine. */
void tw_store_close(tw_store *s);

/* "memory" or "redis". */
const char *tw_store_kind(const tw_store *s);
/* 1 when what is committed outlives this process (redis; memory with a
 * snapshot file), 0 for the plain memory store: the daemon then keeps no
 * job state in its checkpoints, only offsets and tombstones, and a next
 * owner re-reads unfinished jobs from their first message. */
int tw_store_durable(const tw_store *s);
/* Settings the daemon uses: state.checkpoint_interval (µs, default 1 s) and
 * state.finished_ttl (seconds, default 7 days). */
int64_t tw_store_checkpoint_interval_us(const tw_store *s);
/* state.checkpoint_slice_bytes: a job's state snapshot slices (job.h,
 * tw_job_set_slice_bytes). */
size_t tw_store_checkpoint_slice_bytes(const tw_store *s);
/* state.checkpoint_target_bytes: the bytes a job's checkpoint fills with
 * slices (job.h, tw_job_set_checkpoint_target). */
size_t tw_store_checkpoint_target_bytes(const tw_store *s);
int64_t tw_store_finished_ttl_s(const tw_store *s);
/* state.pending_check (how often to look for unconfirmed claims) and
 * state.pending_after (how old an unconfirmed claim must be to be
 * reported), both µs. */
int64_t tw_store_pending_check_us(const tw_store *s);
int64_t tw_store_pending_after_us(const tw_store *s);

/* ---- availability ------------------------------------------------------- */
/* TW_OK when the store answers; TW_UNAVAILABLE when it does not (a
 * reconnect is attempted only when the backoff allows, so this is cheap to
 * call in a loop). Memory: always TW_OK. */
int tw_store_ping(tw_store *s, char *err, size_t errlen);
/* Requests made to the store so far (each a round trip for Redis: a
 * checkpoint's transaction is pipelined into one). */
uint64_t tw_store_requests(const tw_store *s);
/* Milliseconds until the next reconnect attempt (0 when up or due). */
int64_t tw_store_retry_in_ms(const tw_store *s);

/* ---- transactions ------------------------------------------------------- */
void tw_store_txn_begin(tw_store *s);
/* Each returns TW_ERR only on out-of-memory (the commit then fails too). */
int tw_store_txn_put(tw_store *s, const char *key, const void *data,
                     size_t len);
int tw_store_txn_del(tw_store *s, const char *key);
int tw_store_txn_sadd(tw_store *s, const char *set, const char *member);
int tw_store_txn_srem(tw_store *s, const char *set, const char *member);
int tw_store_txn_expire(tw_store *s, const char *key, int64_t ttl_s);
/* Removes member from the sorted set `set` (ZREM; absent: nothing). */
int tw_store_txn_zrem(tw_store *s, const char *set, const char *member);
/* Number of operations buffered. */
size_t tw_store_txn_size(const tw_store *s);
int tw_store_txn_commit(tw_store *s, char *err, size_t errlen);

/* ---- reads and single operations ---------------------------------------- */
/* 1 and a malloc'd copy in *data (NUL-terminated, *len excludes the NUL)
 * when key holds a value; 0 when absent; TW_ERR / TW_UNAVAILABLE. */
int tw_store_get(tw_store *s, const char *key, uint8_t **data, size_t *len,
                 char *err, size_t errlen);
/* Reads the values of keys[0..n) in one pipeline (Redis: every GET sent
 * at once, each reply handed on as it arrives, so the server sends the
 * next values while the caller works on one) and calls fn once per key, in
 * the keys' order: data NUL-terminated and valid only during the call,
 * NULL when the key is absent. fn returning non-zero stops the walk and
 * that value is returned (fn says why itself); else TW_OK, TW_ERR or
 * TW_UNAVAILABLE. */
typedef int (*tw_store_value_fn)(void *ud, size_t i, const uint8_t *data,
                                 size_t len);
int tw_store_get_many(tw_store *s, const char *const *keys, size_t n,
                      tw_store_value_fn fn, void *ud, char *err, size_t errlen);
/* Calls fn once per member of set (in no particular order; member is
 * NUL-terminated and valid only during the call). fn returning non-zero
 * stops the walk and that value is returned. */
typedef int (*tw_store_member_fn)(void *ud, const char *member, size_t len);
int tw_store_smembers(tw_store *s, const char *set, tw_store_member_fn fn,
                      void *ud, char *err, size_t errlen);
/* 1 when key exists, with its remaining time to live in *ttl_ms (-1: it
 * never expires); 0 when absent. */
int tw_store_ttl(tw_store *s, const char *key, int64_t *ttl_ms, char *err,
                 size_t errlen);
/* Claim `key` once (SET key 1 NX EX ttl_s): 1 the first time, 0 when it was
 * already claimed, TW_ERR / TW_UNAVAILABLE. The memory store writes its
 * snapshot at once (ignoring snapshot_interval) so a claim survives a
 * restart before the caller acts on it. */
int tw_store_claim(tw_store *s, const char *key, int64_t ttl_s, char *err,
                   size_t errlen);
/* tw_store_claim with `value` as the key's value (a label for messages)
 * and, when it claims, the claim recorded as pending in the sorted set
 * `pending` (member: key; score: the claim's wall-clock time in ms), in
 * the same step (Redis: one EVAL, atomic; memory: one snapshot). The
 * caller clears it with tw_store_txn_zrem once the send is confirmed;
 * tw_store_ztake finds the ones never confirmed. */
int tw_store_claim_pending(tw_store *s, const char *key, const char *value,
                           int64_t ttl_s, const char *pending, char *err,
                           size_t errlen);
/* Removes up to `max` members whose score is <= max_score from the sorted
 * set `set` and calls fn (member, score) for each one this call removed:
 * with several engines on one store, each member is seen by exactly one
 * (Redis: ZRANGEBYSCORE, then one pipelined ZREM each; only a ZREM that
 * returns 1 counts). fn is called after the removal, outside the store,
 * and may use the store. Returns the number seen, TW_ERR or
 * TW_UNAVAILABLE. */
typedef void (*tw_store_scored_fn)(void *ud, const char *member, int64_t score);
int tw_store_ztake(tw_store *s, const char *set, int64_t max_score, size_t max,
                   tw_store_scored_fn fn, void *ud, char *err, size_t errlen);

#endif /* TW_STATE_STORE_H */
