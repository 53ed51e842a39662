/*
 * state_store_internal.h - what state_store.c shares with the two store
 * implementations (state_memory.c, state_redis.c): the vtable and the
 * buffered transaction. Not for other modules.
 *
 * Ownership: the tw_store owns the buffered ops (keys and data are malloc'd
 * copies); an implementation owns its `impl` and frees it in close().
 */
#ifndef TW_STATE_STORE_INTERNAL_H
#define TW_STATE_STORE_INTERNAL_H

#include "state_store.h"

typedef enum tw_store_op_kind {
    TW_STORE_PUT,
    TW_STORE_DEL,
    TW_STORE_SADD,
    TW_STORE_SREM,
    TW_STORE_EXPIRE,
    TW_STORE_ZREM
} tw_store_op_kind;

/* One buffered operation. key is NUL-terminated; data is the value (PUT) or
 * the member (SADD/SREM/ZREM, NUL-terminated), NULL otherwise. */
typedef struct tw_store_op {
    tw_store_op_kind kind;
    char *key;
    uint8_t *data;
    size_t len;
    int64_t ttl_s; /* EXPIRE */
} tw_store_op;

typedef struct tw_store_vtable {
    const char *kind;
    void (*close)(void *impl);
    int (*ping)(void *impl, char *err, size_t errlen);
    int64_t (*retry_in_ms)(const void *impl);
    /* All of ops or none. */
    int (*commit)(void *impl, const tw_store_op *ops, size_t n, char *err,
                  size_t errlen);
    int (*get)(void *impl, const char *key, uint8_t **data, size_t *len,
               char *err, size_t errlen);
    /* fn's non-zero return values are handed back as they are */
    int (*get_many)(void *impl, const char *const *keys, size_t n,
                    tw_store_value_fn fn, void *ud, char *err, size_t errlen);
    int (*smembers)(void *impl, const char *set, tw_store_member_fn fn,
                    void *ud, char *err, size_t errlen);
    int (*ttl)(void *impl, const char *key, int64_t *ttl_ms, char *err,
               size_t errlen);
    /* pending NULL: a plain claim; else also ZADD pending now_ms key */
    int (*claim)(void *impl, const char *key, const char *value, int64_t ttl_s,
                 const char *pending, int64_t now_ms, char *err, size_t errlen);
    int (*ztake)(void *impl, const char *set, int64_t max_score, size_t max,
                 tw_store_scored_fn fn, void *ud, char *err, size_t errlen);
    /* 1 when what is committed outlives this process. */
    int (*durable)(const void *impl);
} tw_store_vtable;

/* Each implementation's constructor: reads its own settings from `state`
 * (keys already checked by tw_store_open). */
int tw_store_memory_open(const tw_settings *state, const tw_store_vtable **vt,
                         void **impl, char *err, size_t errlen);
int tw_store_redis_open(const tw_settings *state, const tw_store_vtable **vt,
                        void **impl, char *err, size_t errlen);

#endif /* TW_STATE_STORE_INTERNAL_H */
