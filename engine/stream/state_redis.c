/*
 * state_redis.c - the Redis state store (hiredis, blocking, with connect and
 * command timeouts). Every key gets state.redis.prefix in front. A
 * transaction is one pipelined MULTI, op..., EXEC: all replies are read and
 * checked, so the connection stays in step even after an error reply.
 *
 * Availability: an I/O error, a timeout, or a reply that says the server
 * cannot serve right now (LOADING, BUSY, MASTERDOWN, READONLY, TRYAGAIN,
 * CLUSTERDOWN, OOM) drops the connection and marks the store down; calls
 * then return TW_UNAVAILABLE at once until the backoff (retry_initial,
 * doubling up to retry_max) allows the next reconnect attempt. One log line
 * when it goes down, one when it is back.
 *
 * Large values: Redis refuses a bulk string longer than its
 * proto-max-bulk-len (512 MB by default) by dropping the connection, so a
 * value longer than redis.chunk_bytes (64 MiB by default) is stored as a
 * hash of chunks (fields "0", "1", ...) under the same key instead of a
 * string; GET sees WRONGTYPE and reads the chunks back in order. DEL and
 * EXPIRE work on either shape, and SET replaces either.
 *
 * The password (from the environment variable named by password_env, or the
 * file password_file) is kept only in this struct, wiped on close, and
 * never written to a log or an error message.
 *
 * Ownership: the store owns its hiredis context, strings and scratch
 * buffer; replies are freed before each call returns.
 */
#include "state_store_internal.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "clock.h"
#include "config_schema.h"
#include "log.h"
#include "secret_file.h"

typedef struct rstore {
    char *host; /* NULL when socket is set */
    int port;
    char *socket;
    int db;
    char *prefix;
    size_t prefix_len;
    char *user;     /* NULL: the default user */
    char *password; /* NULL: no AUTH */
    int64_t connect_timeout_us, command_timeout_us;
    int64_t retry_initial_us, retry_max_us;
    char where[256]; /* "127.0.0.1:6379 db 0" for messages */

    redisContext *c; /* NULL while down */
    int down;        /* for logging once per state change */
    int64_t down_since_us;
    int64_t next_retry_us;
    int64_t backoff_us;
    unsigned attempts;
    char reason[256]; /* why it is down */

    size_t chunk_bytes; /* longer values are stored as a hash of chunks */

    char *scratch; /* prefixed keys for argv */
    size_t scratch_cap;
} rstore;

static struct timeval to_tv(int64_t us)
{
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    return tv;
}

/* Redis replies meaning "not now" rather than "never". */
static int transient_error(const char *msg)
{
    static const char *const codes[] = {"LOADING",  "BUSY",     "MASTERDOWN",
                                        "READONLY", "TRYAGAIN", "CLUSTERDOWN",
                                        "OOM",      NULL};
    for (size_t i = 0; codes[i] != NULL; i++) {
        size_t n = strlen(codes[i]);
        if (strncmp(msg, codes[i], n) == 0 && (msg[n] == ' ' || !msg[n]))
            return 1;
    }
    return 0;
}

/* Drop the connection and schedule the next reconnect. */
static int mark_down(rstore *r, const char *reason, char *err, size_t errlen)
{
    int64_t now = tw_mono_us();
    /* reason may point into the context (errstr): copy it first */
    if (reason != r->reason)
        snprintf(r->reason, sizeof(r->reason), "%s", reason);
    if (r->c != NULL) {
        redisFree(r->c);
        r->c = NULL;
    }
    if (!r->down) {
        r->down = 1;
        r->down_since_us = now;
        r->attempts = 0;
        r->backoff_us = r->retry_initial_us;
        tw_log(TW_LOG_WARN,
               "state: redis %s unavailable: %s; holding state writes and "
               "retrying with backoff (at most every %.1f s)",
               r->where, r->reason, (double)r->retry_max_us / 1e6);
    } else {
        r->backoff_us *= 2;
        if (r->backoff_us > r->retry_max_us)
            r->backoff_us = r->retry_max_us;
    }
    r->next_retry_us = now + r->backoff_us;
    snprintf(err, errlen, "state: redis %s unavailable: %s", r->where,
             r->reason);
    return TW_UNAVAILABLE;
}

/* Run one command on the live connection. TW_OK with *reply (caller frees)
 * unless the reply is an error; error replies -> TW_ERR (or TW_UNAVAILABLE
 * when transient); I/O errors -> TW_UNAVAILABLE. */
static int command(rstore *r, int argc, const char **argv, const size_t *lens,
                   redisReply **reply, const char *what, char *err,
                   size_t errlen)
{
    *reply = redisCommandArgv(r->c, argc, argv, lens);
    if (*reply == NULL)
        return mark_down(r, r->c->errstr[0] ? r->c->errstr : "I/O error", err,
                         errlen);
    if ((*reply)->type == REDIS_REPLY_ERROR) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s: %s", what, (*reply)->str);
        int transient = transient_error((*reply)->str);
        freeReplyObject(*reply);
        *reply = NULL;
        if (transient)
            return mark_down(r, msg, err, errlen);
        snprintf(err, errlen, "state: redis %s: %s", r->where, msg);
        return TW_ERR;
    }
    return TW_OK;
}

/* Connect, AUTH, SELECT and PING. TW_ERR: the server refused our settings
 * (password, db); TW_UNAVAILABLE: it could not be reached. */
static int connect_once(rstore *r, char *err, size_t errlen)
{
    struct timeval ctv = to_tv(r->connect_timeout_us);
    r->c = r->socket != NULL ? redisConnectUnixWithTimeout(r->socket, ctv)
                             : redisConnectWithTimeout(r->host, r->port, ctv);
    if (r->c == NULL) {
        snprintf(err, errlen, "state: redis %s: out of memory", r->where);
        return TW_ERR;
    }
    if (r->c->err) {
        char msg[200];
        snprintf(msg, sizeof(msg), "connect: %s", r->c->errstr);
        return mark_down(r, msg, err, errlen);
    }
    if (redisSetTimeout(r->c, to_tv(r->command_timeout_us)) != REDIS_OK ||
        (r->socket == NULL && redisEnableKeepAlive(r->c) != REDIS_OK))
        return mark_down(r, "cannot set socket options", err, errlen);
    redisReply *reply;
    int rc;
    if (r->password != NULL) {
        const char *argv[3] = {"AUTH", r->user, r->password};
        size_t lens[3] = {4, r->user ? strlen(r->user) : 0,
                          strlen(r->password)};
        if (r->user == NULL) {
            argv[1] = r->password;
            lens[1] = lens[2];
        }
        rc = command(r, r->user ? 3 : 2, argv, lens, &reply,
                     "AUTH rejected (check state.redis.password_env / "
                     "password_file)",
                     err, errlen);
        if (rc != TW_OK)
            goto fail;
        freeReplyObject(reply);
    }
    if (r->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", r->db);
        const char *argv[2] = {"SELECT", db};
        size_t lens[2] = {6, strlen(db)};
        rc = command(r, 2, argv, lens, &reply, "SELECT (state.redis.db)", err,
                     errlen);
        if (rc != TW_OK)
            goto fail;
        freeReplyObject(reply);
    }
    const char *argv[1] = {"PING"};
    size_t lens[1] = {4};
    rc = command(r, 1, argv, lens, &reply,
                 r->password ? "PING" : "PING (no password configured)", err,
                 errlen);
    if (rc != TW_OK)
        goto fail;
    freeReplyObject(reply);
    return TW_OK;
fail:
    if (r->c != NULL) {
        redisFree(r->c);
        r->c = NULL;
    }
    return rc;
}

/* TW_OK with a live connection, reconnecting when the backoff allows. */
static int ensure_up(rstore *r, char *err, size_t errlen)
{
    if (r->c != NULL)
        return TW_OK;
    int64_t now = tw_mono_us();
    if (now < r->next_retry_us) {
        snprintf(err, errlen,
                 "state: redis %s unavailable: %s (next attempt in %lld ms)",
                 r->where, r->reason,
                 (long long)((r->next_retry_us - now + 999) / 1000));
        return TW_UNAVAILABLE;
    }
    r->attempts++;
    int rc = connect_once(r, err, errlen);
    if (rc == TW_ERR) /* refused settings while running: keep retrying */
        return mark_down(r, err, err, errlen);
    if (rc != TW_OK)
        return rc;
    if (r->down)
        tw_log(TW_LOG_INFO,
               "state: redis %s available again after %.1f s (%u attempts)",
               r->where, (double)(tw_mono_us() - r->down_since_us) / 1e6,
               r->attempts);
    r->down = 0;
    r->reason[0] = 0;
    return TW_OK;
}

/* prefix + key in the scratch buffer, at offset *at (advanced). Returns the
 * offset of the result, or (size_t)-1 on out-of-memory. */
static size_t scratch_key(rstore *r, size_t *at, const char *key, size_t *len)
{
    size_t klen = strlen(key);
    size_t need = *at + r->prefix_len + klen + 1;
    if (need > r->scratch_cap) {
        size_t cap = r->scratch_cap ? r->scratch_cap : 256;
        while (cap < need)
            cap *= 2;
        char *p = realloc(r->scratch, cap);
        if (p == NULL)
            return (size_t)-1;
        r->scratch = p;
        r->scratch_cap = cap;
    }
    size_t off = *at;
    memcpy(r->scratch + off, r->prefix, r->prefix_len);
    memcpy(r->scratch + off + r->prefix_len, key, klen + 1);
    *len = r->prefix_len + klen;
    *at = need;
    return off;
}

/* One single-key command: argv[1] is the (unprefixed) key. */
static int key_command(rstore *r, int argc, const char **argv, size_t *lens,
                       redisReply **reply, char *err, size_t errlen)
{
    if (ensure_up(r, err, errlen) != TW_OK)
        return TW_UNAVAILABLE;
    size_t at = 0, klen;
    size_t off = scratch_key(r, &at, argv[1], &klen);
    if (off == (size_t)-1) {
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    argv[1] = r->scratch + off;
    lens[1] = klen;
    return command(r, argc, argv, lens, reply, argv[0], err, errlen);
}

/* hiredis writes with write(2): on a connection the server reset, that
 * raises SIGPIPE, which would kill the process. Block it in this thread for
 * the duration of a call and discard one it raised, leaving the process's
 * signal handling alone. */
typedef struct pipe_guard {
    sigset_t old;
    int was_pending;
} pipe_guard;

static void guard_on(pipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void guard_off(pipe_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- the vtable ------------------------------------------------------------
 */

static void rs_close(void *impl)
{
    rstore *r = impl;
    if (r->c != NULL)
        redisFree(r->c);
    if (r->password != NULL) {
        explicit_bzero(r->password, strlen(r->password));
        free(r->password);
    }
    free(r->host);
    free(r->socket);
    free(r->prefix);
    free(r->user);
    free(r->scratch);
    free(r);
}

static int rs_ping_unguarded(void *impl, char *err, size_t errlen)
{
    rstore *r = impl;
    if (ensure_up(r, err, errlen) != TW_OK)
        return TW_UNAVAILABLE;
    const char *argv[1] = {"PING"};
    size_t lens[1] = {4};
    redisReply *reply;
    int rc = command(r, 1, argv, lens, &reply, "PING", err, errlen);
    if (rc == TW_OK)
        freeReplyObject(reply);
    return rc;
}

static int64_t rs_retry_in_ms(const void *impl)
{
    const rstore *r = impl;
    if (r->c != NULL)
        return 0;
    int64_t left = r->next_retry_us - tw_mono_us();
    return left > 0 ? (left + 999) / 1000 : 0;
}

static const char *op_cmd(tw_store_op_kind k)
{
    static const char *const names[] = {"SET",  "DEL",    "SADD",
                                        "SREM", "EXPIRE", "ZREM"};
    return names[k];
}

/* Read one pipelined reply; NULL after an I/O error (store marked down). */
static redisReply *read_reply(rstore *r, char *err, size_t errlen)
{
    void *reply = NULL;
    if (redisGetReply(r->c, &reply) != REDIS_OK || reply == NULL) {
        mark_down(r, r->c->errstr[0] ? r->c->errstr : "I/O error", err, errlen);
        return NULL;
    }
    return reply;
}

/* Appends one op's commands to the pipeline: one, or for a value longer
 * than chunk_bytes a DEL and one HSET per chunk. Records, for each command
 * appended, the index of its op in cmd_op[*ncmd...]. -1 on out of memory. */
static int append_op(rstore *r, const tw_store_op *op, size_t opi,
                     size_t *cmd_op, size_t *ncmd)
{
    size_t at = 0, klen;
    size_t off = scratch_key(r, &at, op->key, &klen);
    if (off == (size_t)-1)
        return -1;
    const char *key = r->scratch + off;
    if (op->kind == TW_STORE_PUT && op->len > r->chunk_bytes) {
        const char *del[2] = {"DEL", key};
        size_t dlens[2] = {3, klen};
        if (redisAppendCommandArgv(r->c, 2, del, dlens) != REDIS_OK)
            return -1;
        cmd_op[(*ncmd)++] = opi;
        for (size_t i = 0, at_byte = 0; at_byte < op->len;
             i++, at_byte += r->chunk_bytes) {
            char field[24];
            snprintf(field, sizeof(field), "%zu", i);
            size_t n = op->len - at_byte;
            if (n > r->chunk_bytes)
                n = r->chunk_bytes;
            const char *argv[4] = {"HSET", key, field,
                                   (const char *)op->data + at_byte};
            size_t lens[4] = {4, klen, strlen(field), n};
            if (redisAppendCommandArgv(r->c, 4, argv, lens) != REDIS_OK)
                return -1;
            cmd_op[(*ncmd)++] = opi;
        }
        return 0;
    }
    const char *argv[3] = {op_cmd(op->kind), key, NULL};
    size_t lens[3] = {strlen(argv[0]), klen, 0};
    int argc = 2;
    char ttl[24];
    if (op->kind == TW_STORE_EXPIRE) {
        snprintf(ttl, sizeof(ttl), "%lld", (long long)op->ttl_s);
        argv[2] = ttl;
        lens[2] = strlen(ttl);
        argc = 3;
    } else if (op->data != NULL) {
        argv[2] = (const char *)op->data;
        lens[2] = op->len;
        argc = 3;
    }
    if (redisAppendCommandArgv(r->c, argc, argv, lens) != REDIS_OK)
        return -1;
    cmd_op[(*ncmd)++] = opi;
    return 0;
}

static int rs_commit_unguarded(void *impl, const tw_store_op *ops, size_t n,
                               char *err, size_t errlen)
{
    rstore *r = impl;
    if (n == 0)
        return TW_OK;
    if (ensure_up(r, err, errlen) != TW_OK)
        return TW_UNAVAILABLE;
    /* How many commands the ops become (chunked values take several). */
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += ops[i].kind == TW_STORE_PUT && ops[i].len > r->chunk_bytes
                   ? 1 + (ops[i].len + r->chunk_bytes - 1) / r->chunk_bytes
                   : 1;
    size_t *cmd_op = malloc(cap * sizeof(*cmd_op));
    size_t ncmd = 0;
    if (cmd_op == NULL)
        goto oom;
    if (redisAppendCommand(r->c, "MULTI") != REDIS_OK)
        goto oom;
    for (size_t i = 0; i < n; i++)
        if (append_op(r, &ops[i], i, cmd_op, &ncmd) != 0)
            goto oom;
    if (redisAppendCommand(r->c, "EXEC") != REDIS_OK)
        goto oom;

    /* MULTI's +OK, one +QUEUED per command, then EXEC's array. */
    char first_err[300] = "";
    for (size_t i = 0; i <= ncmd; i++) {
        redisReply *q = read_reply(r, err, errlen);
        if (q == NULL) {
            free(cmd_op);
            return TW_UNAVAILABLE;
        }
        if (q->type == REDIS_REPLY_ERROR && first_err[0] == 0)
            snprintf(first_err, sizeof(first_err), "%s%s%s: %s",
                     i == 0 ? "MULTI" : op_cmd(ops[cmd_op[i - 1]].kind),
                     i == 0 ? "" : " ", i == 0 ? "" : ops[cmd_op[i - 1]].key,
                     q->str);
        freeReplyObject(q);
    }
    redisReply *ex = read_reply(r, err, errlen);
    if (ex == NULL) {
        free(cmd_op);
        return TW_UNAVAILABLE;
    }
    int rc = TW_OK;
    if (ex->type == REDIS_REPLY_ERROR) {
        char msg[600];
        snprintf(msg, sizeof(msg), "EXEC: %s%s%s", ex->str,
                 first_err[0] ? "; first rejected command: " : "", first_err);
        if (transient_error(ex->str) || transient_error(first_err))
            rc = mark_down(r, msg, err, errlen);
        else {
            snprintf(err, errlen, "state: redis %s: %s; nothing written",
                     r->where, msg);
            rc = TW_ERR;
        }
    } else if (ex->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen,
                 "state: redis %s: EXEC aborted (reply type %d); nothing "
                 "written",
                 r->where, ex->type);
        rc = TW_ERR;
    } else if (ex->elements != ncmd) {
        snprintf(err, errlen,
                 "state: redis %s: EXEC returned %zu replies "
                 "for %zu commands",
                 r->where, ex->elements, ncmd);
        rc = TW_ERR;
    } else {
        for (size_t i = 0; i < ncmd; i++)
            if (ex->element[i]->type == REDIS_REPLY_ERROR) {
                /* Redis does not roll back a command failing inside EXEC. */
                const tw_store_op *op = &ops[cmd_op[i]];
                snprintf(err, errlen,
                         "state: redis %s: %s %s failed inside EXEC: %s "
                         "(the other commands were applied)",
                         r->where, op_cmd(op->kind), op->key,
                         ex->element[i]->str);
                rc = TW_ERR;
                break;
            }
    }
    freeReplyObject(ex);
    free(cmd_op);
    return rc;
oom:
    free(cmd_op);
    /* Half a pipeline may sit in the output buffer: start afresh. */
    redisFree(r->c);
    r->c = NULL;
    r->next_retry_us = 0;
    snprintf(err, errlen,
             "state: redis %s: out of memory building the "
             "transaction",
             r->where);
    return TW_ERR;
}

/* A value stored as a hash of chunks (see the top of the file): HLEN, then
 * each chunk in order. */
static int get_chunked(rstore *r, const char *key, uint8_t **data, size_t *len,
                       char *err, size_t errlen)
{
    const char *argv[3] = {"HLEN", key, NULL};
    size_t lens[3] = {4, 0, 0};
    redisReply *reply;
    int rc = key_command(r, 2, argv, lens, &reply, err, errlen);
    if (rc != TW_OK)
        return rc;
    long long nchunks =
        reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    freeReplyObject(reply);
    if (nchunks <= 0) {
        snprintf(err, errlen,
                 "state: GET '%s': holds neither a value nor chunks", key);
        return TW_ERR;
    }
    uint8_t *buf = NULL;
    size_t used = 0;
    for (long long i = 0; i < nchunks; i++) {
        char field[24];
        snprintf(field, sizeof(field), "%lld", i);
        argv[0] = "HGET";
        argv[1] = key; /* key_command replaced it with the prefixed key */
        argv[2] = field;
        lens[0] = 4;
        lens[2] = strlen(field);
        rc = key_command(r, 3, argv, lens, &reply, err, errlen);
        if (rc != TW_OK) {
            free(buf);
            return rc;
        }
        if (reply->type != REDIS_REPLY_STRING) {
            snprintf(err, errlen,
                     "state: GET '%s': chunk %lld of %lld is missing", key, i,
                     nchunks);
            freeReplyObject(reply);
            free(buf);
            return TW_ERR;
        }
        uint8_t *grown = realloc(buf, used + reply->len + 1);
        if (grown == NULL) {
            freeReplyObject(reply);
            free(buf);
            snprintf(err, errlen, "state: out of memory reading '%s'", key);
            return TW_ERR;
        }
        buf = grown;
        memcpy(buf + used, reply->str, reply->len);
        used += reply->len;
        freeReplyObject(reply);
    }
    buf[used] = 0;
    *data = buf;
    *len = used;
    return 1;
}

static int rs_get_unguarded(void *impl, const char *key, uint8_t **data,
                            size_t *len, char *err, size_t errlen)
{
    const char *argv[2] = {"GET", key};
    size_t lens[2] = {3, 0};
    redisReply *reply;
    int rc = key_command(impl, 2, argv, lens, &reply, err, errlen);
    /* A hash under the key: a value stored in chunks. */
    if (rc == TW_ERR && strstr(err, ": WRONGTYPE ") != NULL)
        return get_chunked(impl, key, data, len, err, errlen);
    if (rc != TW_OK)
        return rc;
    if (reply->type == REDIS_REPLY_NIL) {
        freeReplyObject(reply);
        return 0;
    }
    if (reply->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "state: GET '%s': unexpected reply type %d", key,
                 reply->type);
        freeReplyObject(reply);
        return TW_ERR;
    }
    *data = malloc(reply->len + 1);
    if (*data == NULL) {
        freeReplyObject(reply);
        snprintf(err, errlen, "state: out of memory reading '%s'", key);
        return TW_ERR;
    }
    memcpy(*data, reply->str, reply->len);
    (*data)[reply->len] = 0;
    *len = reply->len;
    freeReplyObject(reply);
    return 1;
}

static int is_wrongtype(const redisReply *reply)
{
    return reply->type == REDIS_REPLY_ERROR &&
           strncmp(reply->str, "WRONGTYPE ", 10) == 0;
}

/* One pipelined GET's reply handed to fn: a value, nil, or a hash of
 * chunks (WRONGTYPE: read with get_chunked, so the pipeline must have
 * been drained before). */
static int deliver_reply(rstore *r, const char *key, size_t i,
                         redisReply *reply, tw_store_value_fn fn, void *ud,
                         char *err, size_t errlen)
{
    if (reply->type == REDIS_REPLY_NIL)
        return fn(ud, i, NULL, 0);
    if (reply->type == REDIS_REPLY_STRING)
        return fn(ud, i, (const uint8_t *)reply->str, reply->len);
    if (is_wrongtype(reply)) {
        uint8_t *data = NULL;
        size_t len = 0;
        int rc = get_chunked(r, key, &data, &len, err, errlen);
        if (rc == 1)
            rc = fn(ud, i, data, len);
        else if (rc == TW_ERR && strstr(err, key) == NULL) {
            char why[400];
            snprintf(why, sizeof(why), "%s", err);
            snprintf(err, errlen, "%s (reading '%s')", why, key);
        }
        free(data);
        return rc;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        char msg[300];
        snprintf(msg, sizeof(msg), "GET '%s': %s", key, reply->str);
        if (transient_error(reply->str))
            return mark_down(r, msg, err, errlen);
        snprintf(err, errlen, "state: redis %s: %s", r->where, msg);
        return TW_ERR;
    }
    snprintf(err, errlen, "state: GET '%s': unexpected reply type %d", key,
             reply->type);
    return TW_ERR;
}

/* GETs in flight at once. One at a time, each value waits for a round
 * trip; all at once, Redis copies every value into its output buffer
 * first (fresh memory for the whole checkpoint) and writes at most 64 KB
 * per event. A few keep the server busy while the caller works and its
 * buffer small (95 MB of parts, measured: 1 at a time ~250 ms, all 172 at
 * once ~350 ms, 4 at a time ~35-100 ms). */
enum { GETS_IN_FLIGHT = 4 };

static int append_get(rstore *r, const char *key, char *err, size_t errlen)
{
    size_t at = 0, klen;
    size_t off = scratch_key(r, &at, key, &klen);
    if (off == (size_t)-1) {
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    const char *argv[2] = {"GET", r->scratch + off};
    size_t lens[2] = {3, klen};
    if (redisAppendCommandArgv(r->c, 2, argv, lens) != REDIS_OK) {
        snprintf(err, errlen, "state: out of memory queueing a GET");
        return TW_ERR;
    }
    return TW_OK;
}

static int rs_get_many_unguarded(rstore *r, const char *const *keys, size_t n,
                                 tw_store_value_fn fn, void *ud, char *err,
                                 size_t errlen)
{
    if (n == 0)
        return TW_OK;
    if (ensure_up(r, err, errlen) != TW_OK)
        return TW_UNAVAILABLE;
    /* Replies read ahead of the one being handed on: only after a value
     * stored in chunks, whose HGETs must not queue behind GETs. */
    redisReply **ahead = NULL;
    size_t sent = 0, got = 0; /* GETs queued, replies taken */
    int rc = TW_OK;
    for (size_t i = 0; i < n && rc == TW_OK; i++) {
        while (rc == TW_OK && sent < n && sent < i + GETS_IN_FLIGHT)
            rc = append_get(r, keys[sent++], err, errlen);
        if (rc != TW_OK)
            break;
        redisReply *reply = ahead != NULL ? ahead[i] : NULL;
        if (reply == NULL) {
            if ((reply = read_reply(r, err, errlen)) == NULL)
                break; /* the connection is gone (rc set below) */
            got++;
        } else {
            ahead[i] = NULL;
        }
        if (is_wrongtype(reply) && got < sent) {
            if (ahead == NULL && (ahead = calloc(n, sizeof(*ahead))) == NULL) {
                snprintf(err, errlen, "state: out of memory");
                rc = TW_ERR;
            }
            for (; rc == TW_OK && got < sent; got++)
                if ((ahead[got] = read_reply(r, err, errlen)) == NULL)
                    rc = TW_UNAVAILABLE;
        }
        if (rc == TW_OK)
            rc = deliver_reply(r, keys[i], i, reply, fn, ud, err, errlen);
        freeReplyObject(reply);
    }
    if (r->c == NULL && rc == TW_OK)
        rc = TW_UNAVAILABLE;
    if (ahead != NULL) {
        for (size_t i = 0; i < n; i++)
            if (ahead[i] != NULL)
                freeReplyObject(ahead[i]);
        free(ahead);
    }
    /* stopped early: the replies still due keep the connection in step */
    while (r->c != NULL && got < sent) {
        char why[256];
        redisReply *reply = read_reply(r, why, sizeof(why));
        if (reply == NULL)
            break;
        freeReplyObject(reply);
        got++;
    }
    return rc;
}

static int rs_smembers_unguarded(void *impl, const char *set,
                                 tw_store_member_fn fn, void *ud, char *err,
                                 size_t errlen)
{
    const char *argv[2] = {"SMEMBERS", set};
    size_t lens[2] = {8, 0};
    redisReply *reply;
    int rc = key_command(impl, 2, argv, lens, &reply, err, errlen);
    if (rc != TW_OK)
        return rc;
    if (reply->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "state: SMEMBERS '%s': unexpected reply type %d",
                 set, reply->type);
        freeReplyObject(reply);
        return TW_ERR;
    }
    for (size_t i = 0; i < reply->elements && rc == 0; i++)
        rc = fn(ud, reply->element[i]->str, reply->element[i]->len);
    freeReplyObject(reply);
    return rc;
}

static int rs_ttl_unguarded(void *impl, const char *key, int64_t *ttl_ms,
                            char *err, size_t errlen)
{
    const char *argv[2] = {"PTTL", key};
    size_t lens[2] = {4, 0};
    redisReply *reply;
    int rc = key_command(impl, 2, argv, lens, &reply, err, errlen);
    if (rc != TW_OK)
        return rc;
    long long v = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -3;
    freeReplyObject(reply);
    if (v == -3) {
        snprintf(err, errlen, "state: PTTL '%s': not an integer reply", key);
        return TW_ERR;
    }
    if (v == -2)
        return 0;
    *ttl_ms = v;
    return 1;
}

/* SET NX EX and, only when it set the key, ZADD to the pending set: one
 * script, so the two cannot be split by a crash or by another engine. */
static const char claim_script[] =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then "
    "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4]) return 1 end return 0";

static int rs_claim_unguarded(void *impl, const char *key, const char *value,
                              int64_t ttl_s, const char *pending,
                              int64_t now_ms, char *err, size_t errlen)
{
    rstore *r = impl;
    char ttl[24], score[24];
    snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_s);
    redisReply *reply;
    int rc;
    if (pending == NULL) {
        const char *argv[6] = {"SET", key, value, "NX", "EX", ttl};
        size_t lens[6] = {3, 0, strlen(value), 2, 2, strlen(ttl)};
        rc = key_command(r, 6, argv, lens, &reply, err, errlen);
        if (rc != TW_OK)
            return rc;
        int claimed = reply->type == REDIS_REPLY_STATUS;
        freeReplyObject(reply);
        return claimed ? 1 : 0;
    }
    if (ensure_up(r, err, errlen) != TW_OK)
        return TW_UNAVAILABLE;
    size_t at = 0, klen, plen;
    size_t koff = scratch_key(r, &at, key, &klen);
    size_t poff =
        koff == (size_t)-1 ? koff : scratch_key(r, &at, pending, &plen);
    if (poff == (size_t)-1) {
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    snprintf(score, sizeof(score), "%lld", (long long)now_ms);
    /* the member is the unprefixed key: what the caller names */
    const char *argv[9] = {
        "EVAL", claim_script, "2", r->scratch + koff, r->scratch + poff, value,
        ttl,    score,        key};
    size_t lens[9] = {
        4,          strlen(claim_script), 1,           klen,
        plen,       strlen(value),        strlen(ttl), strlen(score),
        strlen(key)};
    rc = command(r, 9, argv, lens, &reply, "EVAL (claim)", err, errlen);
    if (rc != TW_OK)
        return rc;
    long long v = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    freeReplyObject(reply);
    if (v != 0 && v != 1) {
        snprintf(err, errlen, "state: claim of '%s': unexpected reply", key);
        return TW_ERR;
    }
    return (int)v;
}

/* ZRANGEBYSCORE, then one pipelined ZREM per member: a member is seen only
 * by the caller whose ZREM removed it. */
static int rs_ztake_unguarded(void *impl, const char *set, int64_t max_score,
                              size_t max, tw_store_scored_fn fn, void *ud,
                              char *err, size_t errlen)
{
    rstore *r = impl;
    char hi[24], lim[24];
    snprintf(hi, sizeof(hi), "%lld", (long long)max_score);
    snprintf(lim, sizeof(lim), "%zu", max);
    const char *argv[8] = {"ZRANGEBYSCORE", set,     "-inf", hi,
                           "WITHSCORES",    "LIMIT", "0",    lim};
    size_t lens[8] = {13, 0, 4, strlen(hi), 10, 5, 1, strlen(lim)};
    redisReply *range;
    int rc = key_command(r, 8, argv, lens, &range, err, errlen);
    if (rc != TW_OK)
        return rc;
    if (range->type != REDIS_REPLY_ARRAY || range->elements % 2 != 0) {
        snprintf(err, errlen, "state: ZRANGEBYSCORE '%s': unexpected reply",
                 set);
        freeReplyObject(range);
        return TW_ERR;
    }
    size_t n = range->elements / 2, at = 0, klen;
    size_t off = scratch_key(r, &at, set, &klen);
    if (off == (size_t)-1) {
        freeReplyObject(range);
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    for (size_t i = 0; i < n; i++) {
        const char *zrem[3] = {"ZREM", r->scratch + off,
                               range->element[2 * i]->str};
        size_t zlens[3] = {4, klen, range->element[2 * i]->len};
        if (redisAppendCommandArgv(r->c, 3, zrem, zlens) != REDIS_OK) {
            freeReplyObject(range);
            redisFree(r->c); /* half a pipeline: start afresh */
            r->c = NULL;
            r->next_retry_us = 0;
            snprintf(err, errlen, "state: out of memory");
            return TW_ERR;
        }
    }
    int seen = 0;
    unsigned char *mine = calloc(n ? n : 1, 1);
    for (size_t i = 0; i < n; i++) {
        redisReply *q = read_reply(r, err, errlen);
        if (q == NULL) {
            free(mine);
            freeReplyObject(range);
            return TW_UNAVAILABLE;
        }
        if (mine != NULL && q->type == REDIS_REPLY_INTEGER && q->integer == 1)
            mine[i] = 1;
        freeReplyObject(q);
    }
    if (mine == NULL) {
        freeReplyObject(range);
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    for (size_t i = 0; i < n; i++)
        if (mine[i]) {
            fn(ud, range->element[2 * i]->str,
               strtoll(range->element[2 * i + 1]->str, NULL, 10));
            seen++;
        }
    free(mine);
    freeReplyObject(range);
    return seen;
}

static int rs_ping(void *impl, char *err, size_t errlen)
{
    pipe_guard g;
    guard_on(&g);
    int rc = rs_ping_unguarded(impl, err, errlen);
    guard_off(&g);
    return rc;
}

static int rs_commit(void *impl, const tw_store_op *ops, size_t n, char *err,
                     size_t errlen)
{
    pipe_guard g;
    guard_on(&g);
    int rc = rs_commit_unguarded(impl, ops, n, err, errlen);
    guard_off(&g);
    return rc;
}

static int rs_get(void *impl, const char *key, uint8_t **data, size_t *len,
                  char *err, size_t errlen)
{
    pipe_guard g;
    guard_on(&g);
    int rc = rs_get_unguarded(impl, key, data, len, err, errlen);
    guard_off(&g);
    return rc;
}

static int rs_get_many(void *impl, const char *const *keys, size_t n,
                       tw_store_value_fn fn, void *ud, char *err, size_t errlen)
{
    pipe_guard g;
    guard_on(&g);
    int rc = rs_get_many_unguarded(impl, keys, n, fn, ud, err, errlen);
    guard_off(&g);
    return rc;
}

static int rs_smembers(void *impl, const char *set, tw_store_member_fn fn,
                       void *ud, char *err, size_t errlen)
{
    pipe_guard g;
    guard_on(&g);
    int rc = rs_smembers_unguarded(impl, set, fn, ud, err, errlen);
    guard_off(&g);
    return rc;
}

static int rs_ttl(void *impl, const char *key, int64_t *ttl_ms, char *err,
                  size_t errlen)
{
    pipe_guard g;
    guard_on(&g);
    int rc = rs_ttl_unguarded(impl, key, ttl_ms, err, errlen);
    guard_off(&g);
    return rc;
}

static int rs_claim(void *impl, const char *key, const char *value,
                    int64_t ttl_s, const char *pending, int64_t now_ms,
                    char *err, size_t errlen)
{
    pipe_guard g;
    guard_on(&g);
    int rc = rs_claim_unguarded(impl, key, value, ttl_s, pending, now_ms, err,
                                errlen);
    guard_off(&g);
    return rc;
}

static int rs_ztake(void *impl, const char *set, int64_t max_score, size_t max,
                    tw_store_scored_fn fn, void *ud, char *err, size_t errlen)
{
    pipe_guard g;
    guard_on(&g);
    int rc = rs_ztake_unguarded(impl, set, max_score, max, fn, ud, err, errlen);
    guard_off(&g);
    return rc;
}

static int rs_durable(const void *impl)
{
    (void)impl;
    return 1;
}

static const tw_store_vtable redis_vtable = {
    "redis",     rs_close,    rs_ping, rs_retry_in_ms, rs_commit, rs_get,
    rs_get_many, rs_smembers, rs_ttl,  rs_claim,       rs_ztake,  rs_durable};

/* The password from password_env or password_file (never both). */
static int read_password(const tw_settings *st, rstore *r, char *err,
                         size_t errlen)
{
    const tw_setting *env = tw_settings_find(st, "redis.password_env");
    const tw_setting *file = tw_settings_find(st, "redis.password_file");
    if (env != NULL && file != NULL)
        return tw_settings_error(st, file, err, errlen,
                                 "give password_env or password_file, not "
                                 "both");
    if (env != NULL) {
        const char *v = getenv(env->value);
        if (v == NULL || v[0] == 0)
            return tw_settings_error(st, env, err, errlen,
                                     "environment variable '%s' is not set "
                                     "or empty",
                                     env->value);
        r->password = strdup(v);
    } else if (file != NULL) {
        FILE *f = fopen(file->value, "r");
        if (f == NULL)
            return tw_settings_error(st, file, err, errlen,
                                     "cannot read '%s': %s", file->value,
                                     strerror(errno));
        char why[512];
        if (tw_secret_file_check(f, file->value, why, sizeof(why)) != TW_OK) {
            fclose(f);
            return tw_settings_error(st, file, err, errlen,
                                     "a password file, and %s", why);
        }
        char buf[1024];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        int bad = ferror(f) || !feof(f);
        fclose(f);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            n--;
        buf[n] = 0;
        if (bad || n == 0 || memchr(buf, 0, n) != NULL) {
            explicit_bzero(buf, sizeof(buf));
            return tw_settings_error(st, file, err, errlen,
                                     "'%s' must hold one password line "
                                     "(1 to 1023 bytes)",
                                     file->value);
        }
        r->password = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
    } else {
        return TW_OK;
    }
    if (r->password == NULL) {
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    return TW_OK;
}

static int read_settings(const tw_settings *st, rstore *r, char *err,
                         size_t errlen)
{
    /* state: was checked against the schema (types, bounds) by
     * tw_store_open; the defaults come from there too. */
    const char *host = tw_schema_str(st, TW_SECTION_STATE, "redis.host");
    const char *socket = tw_schema_str(st, TW_SECTION_STATE, "redis.socket");
    const char *prefix = tw_schema_str(st, TW_SECTION_STATE, "redis.prefix");
    const char *user = tw_schema_str(st, TW_SECTION_STATE, "redis.user");
    const tw_setting *hs = tw_settings_find(st, "redis.host");
    const tw_setting *ps = tw_settings_find(st, "redis.port");
    if (socket != NULL && (hs != NULL || ps != NULL))
        return tw_settings_error(st, hs ? hs : ps, err, errlen,
                                 "give redis.socket or redis.host/port, not "
                                 "both");
    int64_t port = tw_schema_int(st, TW_SECTION_STATE, "redis.port");
    int64_t db = tw_schema_int(st, TW_SECTION_STATE, "redis.db");
    r->connect_timeout_us =
        tw_schema_duration_us(st, TW_SECTION_STATE, "redis.connect_timeout");
    r->command_timeout_us =
        tw_schema_duration_us(st, TW_SECTION_STATE, "redis.command_timeout");
    r->retry_initial_us =
        tw_schema_duration_us(st, TW_SECTION_STATE, "redis.retry_initial");
    r->retry_max_us =
        tw_schema_duration_us(st, TW_SECTION_STATE, "redis.retry_max");
    if (r->retry_max_us < r->retry_initial_us)
        return tw_settings_error(st, tw_settings_find(st, "redis.retry_max"),
                                 err, errlen,
                                 "must not be shorter than retry_initial");
    r->chunk_bytes =
        (size_t)tw_schema_int(st, TW_SECTION_STATE, "redis.chunk_bytes");
    r->port = (int)port;
    r->db = (int)db;
    if (socket != NULL)
        r->socket = strdup(socket);
    else
        r->host = strdup(host);
    r->prefix = strdup(prefix);
    r->prefix_len = strlen(prefix);
    if (user != NULL)
        r->user = strdup(user);
    if ((socket ? r->socket : r->host) == NULL || r->prefix == NULL ||
        (user != NULL && r->user == NULL)) {
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    if (socket != NULL)
        snprintf(r->where, sizeof(r->where), "unix:%s db %d", socket, r->db);
    else
        snprintf(r->where, sizeof(r->where), "%s:%d db %d", host, r->port,
                 r->db);
    return read_password(st, r, err, errlen);
}

int tw_store_redis_open(const tw_settings *state, const tw_store_vtable **vt,
                        void **impl, char *err, size_t errlen)
{
    rstore *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    if (read_settings(state, r, err, errlen) != TW_OK) {
        rs_close(r);
        return TW_ERR;
    }
    r->attempts = 1;
    pipe_guard g;
    guard_on(&g);
    int rc = connect_once(r, err, errlen);
    guard_off(&g);
    if (rc == TW_ERR) { /* the server refused our password or db */
        rs_close(r);
        return TW_ERR;
    }
    /* TW_UNAVAILABLE: opened in the down state (logged by mark_down). */
    if (rc == TW_OK)
        tw_log(TW_LOG_INFO, "state: redis %s connected (prefix '%s')", r->where,
               r->prefix);
    *vt = &redis_vtable;
    *impl = r;
    return TW_OK;
}
