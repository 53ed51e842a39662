/* state_store.c - the store interface (state_store.h): settings, the
 * buffered transaction, and dispatch to the chosen implementation. */
#include "state_store_internal.h"

#include "clock.h"
#include "config_schema.h"
#include "grow.h"
#include "tw_assert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tw_store {
    const tw_store_vtable *vt;
    void *impl;
    tw_store_op *ops; /* the buffered transaction */
    size_t nops, capops;
    int txn_failed; /* an op could not be buffered (out of memory) */
    int64_t checkpoint_interval_us;
    size_t slice_bytes;
    size_t target_bytes;
    int64_t finished_ttl_s;
    int64_t pending_check_us, pending_after_us;
    uint64_t requests; /* ping, commit, get, smembers, ttl, claim */
};

int tw_store_open(const tw_settings *state, tw_store **out, char *err,
                  size_t errlen)
{
    static const tw_settings empty = {"(default)", "state", 0, NULL, 0};
    if (state == NULL)
        state = &empty;
    *out = NULL;
    if (tw_schema_check_settings(state, TW_SECTION_STATE, NULL, err, errlen) !=
        TW_OK)
        return TW_ERR;
    const char *kind = tw_schema_str(state, TW_SECTION_STATE, "store");
    int64_t interval =
        tw_schema_duration_us(state, TW_SECTION_STATE, "checkpoint_interval");
    int64_t ttl_us =
        tw_schema_duration_us(state, TW_SECTION_STATE, "finished_ttl");

    int64_t pending_after =
        tw_schema_duration_us(state, TW_SECTION_STATE, "pending_after");
    /* delivered alerts are confirmed at checkpoints: a shorter wait would
     * report them while they are merely not confirmed yet */
    if (pending_after <= interval)
        return tw_settings_error(
            state, tw_settings_find(state, "pending_after"), err, errlen,
            "pending_after (%.3g s) must be longer than checkpoint_interval "
            "(%.3g s): delivered alerts are confirmed at checkpoints",
            pending_after / 1e6, interval / 1e6);
    tw_store *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "state store: out of memory");
        return TW_ERR;
    }
    s->checkpoint_interval_us = interval;
    s->slice_bytes = (size_t)tw_schema_int(state, TW_SECTION_STATE,
                                           "checkpoint_slice_bytes");
    s->target_bytes = (size_t)tw_schema_int(state, TW_SECTION_STATE,
                                            "checkpoint_target_bytes");
    s->finished_ttl_s = ttl_us / 1000000;
    s->pending_check_us =
        tw_schema_duration_us(state, TW_SECTION_STATE, "pending_check");
    s->pending_after_us = pending_after;
    int rc;
    if (strcmp(kind, "memory") == 0)
        rc = tw_store_memory_open(state, &s->vt, &s->impl, err, errlen);
    else if (strcmp(kind, "redis") == 0)
        rc = tw_store_redis_open(state, &s->vt, &s->impl, err, errlen);
    else
        rc = tw_settings_error(state, tw_settings_find(state, "store"), err,
                               errlen, "'%s' is not a store (memory, redis)",
                               kind);
    if (rc != TW_OK) {
        free(s);
        return TW_ERR;
    }
    *out = s;
    return TW_OK;
}

static void txn_clear(tw_store *s)
{
    for (size_t i = 0; i < s->nops; i++) {
        free(s->ops[i].key);
        free(s->ops[i].data);
    }
    s->nops = 0;
    s->txn_failed = 0;
}

void tw_store_close(tw_store *s)
{
    if (s == NULL)
        return;
    txn_clear(s);
    free(s->ops);
    s->vt->close(s->impl);
    free(s);
}

const char *tw_store_kind(const tw_store *s)
{
    return s->vt->kind;
}

int tw_store_durable(const tw_store *s)
{
    return s->vt->durable(s->impl);
}

size_t tw_store_checkpoint_slice_bytes(const tw_store *s)
{
    return s->slice_bytes;
}

size_t tw_store_checkpoint_target_bytes(const tw_store *s)
{
    return s->target_bytes;
}

int64_t tw_store_checkpoint_interval_us(const tw_store *s)
{
    return s->checkpoint_interval_us;
}

int64_t tw_store_finished_ttl_s(const tw_store *s)
{
    return s->finished_ttl_s;
}

int64_t tw_store_pending_check_us(const tw_store *s)
{
    return s->pending_check_us;
}

int64_t tw_store_pending_after_us(const tw_store *s)
{
    return s->pending_after_us;
}

int tw_store_ping(tw_store *s, char *err, size_t errlen)
{
    s->requests++;
    return s->vt->ping(s->impl, err, errlen);
}

uint64_t tw_store_requests(const tw_store *s)
{
    return s->requests;
}

int64_t tw_store_retry_in_ms(const tw_store *s)
{
    return s->vt->retry_in_ms(s->impl);
}

void tw_store_txn_begin(tw_store *s)
{
    txn_clear(s);
}

size_t tw_store_txn_size(const tw_store *s)
{
    return s->nops;
}

/* Buffer one op with copies of key and data (data gets a NUL after it). */
static int txn_push(tw_store *s, tw_store_op_kind kind, const char *key,
                    const void *data, size_t len, int64_t ttl_s)
{
    if (s->txn_failed)
        return TW_ERR;
    if (tw_grow((void **)&s->ops, &s->capops, s->nops + 1, sizeof(*s->ops),
                64) != TW_OK)
        goto oom;
    tw_store_op *op = &s->ops[s->nops];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->ttl_s = ttl_s;
    op->key = strdup(key);
    if (op->key == NULL)
        goto oom;
    if (data != NULL) {
        op->data = malloc(len + 1);
        if (op->data == NULL) {
            free(op->key);
            goto oom;
        }
        memcpy(op->data, data, len);
        op->data[len] = 0;
        op->len = len;
    }
    s->nops++;
    return TW_OK;
oom:
    s->txn_failed = 1;
    return TW_ERR;
}

int tw_store_txn_put(tw_store *s, const char *key, const void *data, size_t len)
{
    return txn_push(s, TW_STORE_PUT, key, data != NULL ? data : "", len, 0);
}

int tw_store_txn_del(tw_store *s, const char *key)
{
    return txn_push(s, TW_STORE_DEL, key, NULL, 0, 0);
}

int tw_store_txn_sadd(tw_store *s, const char *set, const char *member)
{
    return txn_push(s, TW_STORE_SADD, set, member, strlen(member), 0);
}

int tw_store_txn_srem(tw_store *s, const char *set, const char *member)
{
    return txn_push(s, TW_STORE_SREM, set, member, strlen(member), 0);
}

int tw_store_txn_expire(tw_store *s, const char *key, int64_t ttl_s)
{
    return txn_push(s, TW_STORE_EXPIRE, key, NULL, 0, ttl_s > 0 ? ttl_s : 1);
}

int tw_store_txn_zrem(tw_store *s, const char *set, const char *member)
{
    return txn_push(s, TW_STORE_ZREM, set, member, strlen(member), 0);
}

int tw_store_txn_commit(tw_store *s, char *err, size_t errlen)
{
    if (s->txn_failed) {
        snprintf(err, errlen,
                 "state store: out of memory while building a transaction");
        return TW_ERR;
    }
    s->requests++;
    return s->vt->commit(s->impl, s->ops, s->nops, err, errlen);
}

int tw_store_get(tw_store *s, const char *key, uint8_t **data, size_t *len,
                 char *err, size_t errlen)
{
    s->requests++;
    return s->vt->get(s->impl, key, data, len, err, errlen);
}

int tw_store_get_many(tw_store *s, const char *const *keys, size_t n,
                      tw_store_value_fn fn, void *ud, char *err, size_t errlen)
{
    s->requests++;
    return s->vt->get_many(s->impl, keys, n, fn, ud, err, errlen);
}

int tw_store_smembers(tw_store *s, const char *set, tw_store_member_fn fn,
                      void *ud, char *err, size_t errlen)
{
    s->requests++;
    return s->vt->smembers(s->impl, set, fn, ud, err, errlen);
}

int tw_store_ttl(tw_store *s, const char *key, int64_t *ttl_ms, char *err,
                 size_t errlen)
{
    s->requests++;
    return s->vt->ttl(s->impl, key, ttl_ms, err, errlen);
}

int tw_store_claim(tw_store *s, const char *key, int64_t ttl_s, char *err,
                   size_t errlen)
{
    s->requests++;
    return s->vt->claim(s->impl, key, "1", ttl_s > 0 ? ttl_s : 1, NULL, 0, err,
                        errlen);
}

int tw_store_claim_pending(tw_store *s, const char *key, const char *value,
                           int64_t ttl_s, const char *pending, char *err,
                           size_t errlen)
{
    TW_ASSERT(value != NULL && pending != NULL);
    s->requests++;
    return s->vt->claim(s->impl, key, value, ttl_s > 0 ? ttl_s : 1, pending,
                        tw_wall_us() / 1000, err, errlen);
}

int tw_store_ztake(tw_store *s, const char *set, int64_t max_score, size_t max,
                   tw_store_scored_fn fn, void *ud, char *err, size_t errlen)
{
    s->requests++;
    return s->vt->ztake(s->impl, set, max_score, max, fn, ud, err, errlen);
}
