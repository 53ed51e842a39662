/*
 * state_memory.c - the embedded state store: a chained hash map of keys to
 * values or sets, with Redis-like expiry, and an optional snapshot file.
 *
 * Snapshot file (all integers little-endian):
 *   "TWSNAP01"
 *   records, each one of
 *     'S' u32 klen, key, i64 expire_ms (0: none), u32 vlen, value
 *     'T' u32 klen, key, i64 expire_ms, u32 count, count x (u32 len, member)
 *     'Z' u32 klen, key, i64 expire_ms, u32 count,
 *         count x (u32 len, member, i64 score)       (a sorted set)
 *   'E' u64 record count, u32 CRC-32 of every byte before this 'E'
 * and nothing after. It is written to PATH.tmp, fsync'd and renamed over
 * PATH (then the folder is fsync'd), so PATH is always a whole snapshot.
 * A file that does not parse is an error naming the file and the offset:
 * the store refuses to start rather than run with silently empty state.
 *
 * Ownership: the store owns every entry, key, value and set; the snapshot
 * path is a copy.
 */
#include "state_store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "ckpt_codec.h"
#include "clock.h"
#include "config_schema.h"
#include "hash.h"
#include "log.h"

/* A sorted set is an ENT_ZSET whose members keep their score in
 * expire_ms (members never expire on their own). */
enum { ENT_STR = 1, ENT_SET, ENT_MEMBER, ENT_ZSET };

typedef struct mtable mtable;

typedef struct mentry {
    struct mentry *next;
    uint64_t hash;
    int kind;
    int64_t expire_ms; /* wall clock ms; 0 = never */
    uint8_t *val;      /* ENT_STR: value (NUL added) */
    size_t vlen;
    mtable *set; /* ENT_SET, ENT_ZSET: its members (ENT_MEMBER entries) */
    size_t klen;
    char key[]; /* NUL-terminated */
} mentry;

struct mtable {
    mentry **buckets;
    size_t cap; /* power of two, 0 before the first insert */
    size_t count;
};

typedef struct memstore {
    mtable keys;
    char *snapshot; /* NULL: none */
    int64_t snapshot_interval_us;
    int64_t last_snapshot_us; /* monotonic */
    int dirty;                /* changes not in the snapshot yet */
    int snapshot_failing;     /* for logging once per state change */
    int broken;               /* a commit failed half-way (out of memory) */
} memstore;

/* ---- the hash table ---------------------------------------------------- */

static uint64_t hash_bytes(const void *p, size_t n)
{
    return tw_fnv1a64(p, n);
}

static void entry_free(mentry *e);

static void table_free(mtable *t)
{
    for (size_t i = 0; i < t->cap; i++) {
        mentry *e = t->buckets[i];
        while (e != NULL) {
            mentry *next = e->next;
            entry_free(e);
            e = next;
        }
    }
    free(t->buckets);
    memset(t, 0, sizeof(*t));
}

static void entry_free(mentry *e)
{
    free(e->val);
    if (e->set != NULL) {
        table_free(e->set);
        free(e->set);
    }
    free(e);
}

/* The entry for key, or NULL. *pp gets the link pointing at it (for
 * unlinking). */
static mentry *table_find(const mtable *t, const char *key, size_t klen,
                          uint64_t h, mentry ***pp)
{
    if (t->cap == 0)
        return NULL;
    mentry **p = &t->buckets[h & (t->cap - 1)];
    for (; *p != NULL; p = &(*p)->next) {
        mentry *e = *p;
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) {
            if (pp != NULL)
                *pp = p;
            return e;
        }
    }
    return NULL;
}

static int table_grow(mtable *t)
{
    size_t cap = t->cap ? t->cap * 2 : 16;
    mentry **b = calloc(cap, sizeof(*b));
    if (b == NULL)
        return TW_ERR;
    for (size_t i = 0; i < t->cap; i++) {
        mentry *e = t->buckets[i];
        while (e != NULL) {
            mentry *next = e->next;
            e->next = b[e->hash & (cap - 1)];
            b[e->hash & (cap - 1)] = e;
            e = next;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->cap = cap;
    return TW_OK;
}

/* A new, empty entry for key linked into t (key must be absent). */
static mentry *table_add(mtable *t, const char *key, size_t klen, uint64_t h,
                         int kind)
{
    if (t->count >= t->cap && table_grow(t) != TW_OK)
        return NULL;
    mentry *e = calloc(1, sizeof(*e) + klen + 1);
    if (e == NULL)
        return NULL;
    e->hash = h;
    e->kind = kind;
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->next = t->buckets[h & (t->cap - 1)];
    t->buckets[h & (t->cap - 1)] = e;
    t->count++;
    return e;
}

static void table_unlink(mtable *t, mentry **p)
{
    mentry *e = *p;
    *p = e->next;
    t->count--;
    entry_free(e);
}

/* A live top-level entry (an expired one is dropped on the way). */
static mentry *key_find(memstore *m, const char *key, mentry ***pp)
{
    size_t klen = strlen(key);
    mentry **p;
    mentry *e = table_find(&m->keys, key, klen, hash_bytes(key, klen), &p);
    if (e != NULL && e->expire_ms != 0 &&
        e->expire_ms <= (tw_wall_us() / 1000)) {
        table_unlink(&m->keys, p);
        m->dirty = 1;
        return NULL;
    }
    if (e != NULL && pp != NULL)
        *pp = p;
    return e;
}

static mentry *key_add(memstore *m, const char *key, int kind)
{
    size_t klen = strlen(key);
    return table_add(&m->keys, key, klen, hash_bytes(key, klen), kind);
}

/* ---- snapshot writing ---------------------------------------------------- */

/* Fixed-width little-endian fields (the snapshot format predates the
 * varints of ckpt_codec.h); the buffer and its failure flag are tw_ckw's. */
static void wb_u32(tw_ckw *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                    (uint8_t)(v >> 24)};
    tw_ckw_bytes(w, b, 4);
}

static void wb_u64(tw_ckw *w, uint64_t v)
{
    wb_u32(w, (uint32_t)v);
    wb_u32(w, (uint32_t)(v >> 32));
}

static const char snap_magic[8] = {'T', 'W', 'S', 'N', 'A', 'P', '0', '1'};

static int encode_snapshot(memstore *m, tw_ckw *w)
{
    int64_t now = (tw_wall_us() / 1000);
    uint64_t records = 0;
    tw_ckw_bytes(w, snap_magic, sizeof(snap_magic));
    for (size_t i = 0; i < m->keys.cap; i++) {
        for (mentry *e = m->keys.buckets[i]; e != NULL; e = e->next) {
            if (e->expire_ms != 0 && e->expire_ms <= now)
                continue;
            if (e->klen > UINT32_MAX || e->vlen > UINT32_MAX)
                return TW_ERR;
            tw_ckw_bytes(w,
                         e->kind == ENT_STR    ? "S"
                         : e->kind == ENT_ZSET ? "Z"
                                               : "T",
                         1);
            wb_u32(w, (uint32_t)e->klen);
            tw_ckw_bytes(w, e->key, e->klen);
            wb_u64(w, (uint64_t)e->expire_ms);
            if (e->kind == ENT_STR) {
                wb_u32(w, (uint32_t)e->vlen);
                tw_ckw_bytes(w, e->val, e->vlen);
            } else {
                wb_u32(w, (uint32_t)e->set->count);
                for (size_t j = 0; j < e->set->cap; j++)
                    for (mentry *x = e->set->buckets[j]; x; x = x->next) {
                        wb_u32(w, (uint32_t)x->klen);
                        tw_ckw_bytes(w, x->key, x->klen);
                        if (e->kind == ENT_ZSET)
                            wb_u64(w, (uint64_t)x->expire_ms);
                    }
            }
            records++;
        }
    }
    uint32_t crc = w->failed ? 0
                             : (uint32_t)crc32(0L, tw_buf_data(w->b),
                                               (uInt)tw_buf_len(w->b));
    tw_ckw_bytes(w, "E", 1);
    wb_u64(w, records);
    wb_u32(w, crc);
    return w->failed ? TW_ERR : TW_OK;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return TW_ERR;
        p += w;
        n -= (size_t)w;
    }
    return TW_OK;
}

/* Write the whole map to the snapshot file atomically. */
static int snapshot_write(memstore *m, char *err, size_t errlen)
{
    tw_ckw w = {.b = tw_buf_new(), .failed = 0};
    if (w.b == NULL || encode_snapshot(m, &w) != TW_OK) {
        tw_buf_free(w.b);
        snprintf(err, errlen, "state snapshot %s: out of memory encoding it",
                 m->snapshot);
        return TW_ERR;
    }
    size_t plen = strlen(m->snapshot);
    char *tmp = malloc(plen + 5);
    char *dir = strdup(m->snapshot);
    int rc = TW_ERR;
    if (tmp == NULL || dir == NULL) {
        snprintf(err, errlen, "state snapshot %s: out of memory", m->snapshot);
        goto out;
    }
    memcpy(tmp, m->snapshot, plen);
    memcpy(tmp + plen, ".tmp", 5);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "state snapshot %s: cannot create: %s", tmp,
                 strerror(errno));
        goto out;
    }
    if (write_all(fd, tw_buf_data(w.b), tw_buf_len(w.b)) != TW_OK ||
        fsync(fd) != 0) {
        snprintf(err, errlen, "state snapshot %s: cannot write: %s", tmp,
                 strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    if (close(fd) != 0 || rename(tmp, m->snapshot) != 0) {
        snprintf(err, errlen, "state snapshot %s: cannot replace it: %s",
                 m->snapshot, strerror(errno));
        unlink(tmp);
        goto out;
    }
    /* The rename itself must reach the disk too. */
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    rc = TW_OK;
out:
    tw_buf_free(w.b);
    free(tmp);
    free(dir);
    return rc;
}

/* Write the snapshot when one is configured and due (force: now). A failure
 * is TW_UNAVAILABLE: the change is kept in memory, marked dirty, and written
 * by the next commit or ping. */
static int snapshot_maybe(memstore *m, int force, char *err, size_t errlen)
{
    if (m->snapshot == NULL || !m->dirty)
        return TW_OK;
    int64_t now = tw_mono_us();
    if (!force && m->snapshot_interval_us > 0 &&
        now - m->last_snapshot_us < m->snapshot_interval_us)
        return TW_OK;
    if (snapshot_write(m, err, errlen) != TW_OK) {
        if (!m->snapshot_failing)
            tw_log(TW_LOG_WARN,
                   "state: %s; holding commits until it can be "
                   "written",
                   err);
        m->snapshot_failing = 1;
        return TW_UNAVAILABLE;
    }
    if (m->snapshot_failing)
        tw_log(TW_LOG_INFO, "state: snapshot %s written again", m->snapshot);
    m->snapshot_failing = 0;
    m->dirty = 0;
    m->last_snapshot_us = now;
    return TW_OK;
}

/* ---- snapshot loading ---------------------------------------------------- */

typedef struct rbuf {
    const uint8_t *p;
    size_t len, off;
    const char *path;
    char *err;
    size_t errlen;
} rbuf;

static int rb_fail(rbuf *r, size_t at, const char *what)
{
    snprintf(r->err, r->errlen,
             "state snapshot %s: corrupt at byte offset %zu: %s (move the "
             "file away to start with empty state)",
             r->path, at, what);
    return TW_ERR;
}

static int rb_get(rbuf *r, void *out, size_t n, const char *what)
{
    if (r->len - r->off < n)
        return rb_fail(r, r->off, what);
    memcpy(out, r->p + r->off, n);
    r->off += n;
    return TW_OK;
}

static int rb_u32(rbuf *r, uint32_t *v, const char *what)
{
    uint8_t b[4];
    if (rb_get(r, b, 4, what) != TW_OK)
        return TW_ERR;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
    return TW_OK;
}

static int rb_u64(rbuf *r, uint64_t *v, const char *what)
{
    uint32_t lo, hi;
    if (rb_u32(r, &lo, what) != TW_OK || rb_u32(r, &hi, what) != TW_OK)
        return TW_ERR;
    *v = (uint64_t)hi << 32 | lo;
    return TW_OK;
}

/* A length-prefixed byte string, pointing into the buffer. */
static int rb_bytes(rbuf *r, const uint8_t **p, uint32_t *n, const char *what)
{
    size_t at = r->off;
    if (rb_u32(r, n, what) != TW_OK)
        return TW_ERR;
    if (r->len - r->off < *n)
        return rb_fail(r, at, what);
    *p = r->p + r->off;
    r->off += *n;
    return TW_OK;
}

static int snapshot_parse(memstore *m, rbuf *r)
{
    char magic[8];
    if (rb_get(r, magic, 8, "truncated header") != TW_OK)
        return TW_ERR;
    if (memcmp(magic, snap_magic, 8) != 0)
        return rb_fail(r, 0, "not a trainwatch state snapshot (bad magic)");
    uint64_t records = 0;
    for (;;) {
        size_t at = r->off;
        uint8_t type;
        if (rb_get(r, &type, 1, "truncated: no end record") != TW_OK)
            return TW_ERR;
        if (type == 'E') {
            uint64_t count;
            uint32_t crc;
            if (rb_u64(r, &count, "truncated end record") != TW_OK ||
                rb_u32(r, &crc, "truncated end record") != TW_OK)
                return TW_ERR;
            if (count != records)
                return rb_fail(r, at, "record count does not match");
            if (crc != (uint32_t)crc32(0L, r->p, (uInt)at))
                return rb_fail(r, at, "checksum mismatch");
            if (r->off != r->len)
                return rb_fail(r, r->off, "data after the end record");
            return TW_OK;
        }
        if (type != 'S' && type != 'T' && type != 'Z')
            return rb_fail(r, at, "unknown record type");
        const uint8_t *key;
        uint32_t klen;
        uint64_t expire;
        if (rb_bytes(r, &key, &klen, "truncated key") != TW_OK ||
            rb_u64(r, &expire, "truncated expiry") != TW_OK)
            return TW_ERR;
        if (memchr(key, 0, klen) != NULL)
            return rb_fail(r, at, "key contains a NUL byte");
        uint64_t h = hash_bytes(key, klen);
        if (table_find(&m->keys, (const char *)key, klen, h, NULL) != NULL)
            return rb_fail(r, at, "duplicate key");
        mentry *e = table_add(&m->keys, (const char *)key, klen, h,
                              type == 'S'   ? ENT_STR
                              : type == 'Z' ? ENT_ZSET
                                            : ENT_SET);
        if (e == NULL)
            return rb_fail(r, at, "out of memory");
        e->expire_ms = (int64_t)expire;
        if (type == 'S') {
            const uint8_t *v;
            uint32_t vlen;
            if (rb_bytes(r, &v, &vlen, "truncated value") != TW_OK)
                return TW_ERR;
            e->val = malloc((size_t)vlen + 1);
            if (e->val == NULL)
                return rb_fail(r, at, "out of memory");
            memcpy(e->val, v, vlen);
            e->val[vlen] = 0;
            e->vlen = vlen;
        } else {
            uint32_t count;
            if (rb_u32(r, &count, "truncated set size") != TW_OK)
                return TW_ERR;
            e->set = calloc(1, sizeof(*e->set));
            if (e->set == NULL)
                return rb_fail(r, at, "out of memory");
            for (uint32_t i = 0; i < count; i++) {
                const uint8_t *mb;
                uint32_t mlen;
                size_t mat = r->off;
                if (rb_bytes(r, &mb, &mlen, "truncated set member") != TW_OK)
                    return TW_ERR;
                uint64_t mh = hash_bytes(mb, mlen);
                if (table_find(e->set, (const char *)mb, mlen, mh, NULL))
                    return rb_fail(r, mat, "duplicate set member");
                mentry *x =
                    table_add(e->set, (const char *)mb, mlen, mh, ENT_MEMBER);
                if (x == NULL)
                    return rb_fail(r, mat, "out of memory");
                uint64_t score = 0;
                if (type == 'Z' &&
                    rb_u64(r, &score, "truncated member score") != TW_OK)
                    return TW_ERR;
                x->expire_ms = (int64_t)score;
            }
        }
        records++;
    }
}

static int snapshot_load(memstore *m, char *err, size_t errlen)
{
    int fd = open(m->snapshot, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            tw_log(TW_LOG_INFO, "state: no snapshot at %s yet; starting empty",
                   m->snapshot);
            return TW_OK;
        }
        snprintf(err, errlen, "state snapshot %s: cannot open: %s", m->snapshot,
                 strerror(errno));
        return TW_ERR;
    }
    struct stat st;
    uint8_t *data = NULL;
    if (fstat(fd, &st) != 0 ||
        (data = malloc((size_t)st.st_size + 1)) == NULL) {
        snprintf(err, errlen, "state snapshot %s: cannot read: %s", m->snapshot,
                 strerror(errno));
        close(fd);
        return TW_ERR;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, data + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    rbuf r = {data, got, 0, m->snapshot, err, errlen};
    int rc = snapshot_parse(m, &r);
    free(data);
    if (rc != TW_OK) {
        table_free(&m->keys);
        return TW_ERR;
    }
    /* Drop what expired while we were down (the next snapshot omits it). */
    int64_t now = (tw_wall_us() / 1000);
    size_t live = 0;
    for (size_t i = 0; i < m->keys.cap; i++)
        for (mentry **p = &m->keys.buckets[i]; *p != NULL;) {
            if ((*p)->expire_ms != 0 && (*p)->expire_ms <= now) {
                table_unlink(&m->keys, p);
                m->dirty = 1;
            } else {
                p = &(*p)->next;
                live++;
            }
        }
    tw_log(TW_LOG_INFO, "state: loaded %zu keys from snapshot %s", live,
           m->snapshot);
    return TW_OK;
}

/* ---- the vtable ------------------------------------------------------------
 */

static void mem_close(void *impl)
{
    memstore *m = impl;
    char err[512];
    if (m->snapshot != NULL && m->dirty && !m->broken &&
        snapshot_write(m, err, sizeof(err)) != TW_OK)
        tw_log(TW_LOG_ERROR, "state: final snapshot failed: %s", err);
    table_free(&m->keys);
    free(m->snapshot);
    free(m);
}

static int mem_ping(void *impl, char *err, size_t errlen)
{
    memstore *m = impl;
    if (m->broken) {
        snprintf(err, errlen,
                 "state: the memory store was left half-updated "
                 "by an out-of-memory error; restart");
        return TW_ERR;
    }
    return snapshot_maybe(m, m->snapshot_failing, err, errlen);
}

static int64_t mem_retry_in_ms(const void *impl)
{
    (void)impl;
    return 0;
}

static const char *op_name(tw_store_op_kind k)
{
    static const char *const names[] = {"put",  "del",    "sadd",
                                        "srem", "expire", "zrem"};
    return names[k];
}

/* Type check of the whole transaction before anything is applied, so a
 * mistyped op (e.g. SADD on a value) fails it without a partial write. The
 * overlay records each key's kind after the ops so far (0: deleted). */
static int mem_check(memstore *m, const tw_store_op *ops, size_t n, char *err,
                     size_t errlen)
{
    mtable overlay = {0};
    int rc = TW_OK;
    for (size_t i = 0; i < n && rc == TW_OK; i++) {
        const tw_store_op *op = &ops[i];
        size_t klen = strlen(op->key);
        uint64_t h = hash_bytes(op->key, klen);
        mentry *o = table_find(&overlay, op->key, klen, h, NULL);
        int kind;
        if (o != NULL) {
            kind = (int)o->vlen;
        } else {
            mentry *e = key_find(m, op->key, NULL);
            kind = e != NULL ? e->kind : 0;
            o = table_add(&overlay, op->key, klen, h, ENT_MEMBER);
            if (o == NULL) {
                snprintf(err, errlen, "state: out of memory");
                rc = TW_ERR;
                break;
            }
        }
        if ((op->kind == TW_STORE_SADD || op->kind == TW_STORE_SREM) &&
            (kind == ENT_STR || kind == ENT_ZSET)) {
            snprintf(err, errlen,
                     "state: transaction op %zu (%s '%s'): the key holds %s, "
                     "not a set; nothing written",
                     i + 1, op_name(op->kind), op->key,
                     kind == ENT_STR ? "a value" : "a sorted set");
            rc = TW_ERR;
        }
        if (op->kind == TW_STORE_ZREM && kind != 0 && kind != ENT_ZSET) {
            snprintf(err, errlen,
                     "state: transaction op %zu (zrem '%s'): the key holds "
                     "%s, not a sorted set; nothing written",
                     i + 1, op->key, kind == ENT_STR ? "a value" : "a set");
            rc = TW_ERR;
        }
        if (op->kind == TW_STORE_PUT)
            kind = ENT_STR;
        else if (op->kind == TW_STORE_DEL)
            kind = 0;
        else if (op->kind == TW_STORE_SADD)
            kind = ENT_SET;
        o->vlen = (size_t)kind; /* the overlay keeps the kind in vlen */
    }
    table_free(&overlay);
    return rc;
}

static int mem_apply(memstore *m, const tw_store_op *op)
{
    mentry **p;
    mentry *e = key_find(m, op->key, &p);
    switch (op->kind) {
    case TW_STORE_PUT: {
        uint8_t *v = malloc(op->len + 1);
        if (v == NULL)
            return TW_ERR;
        memcpy(v, op->data, op->len + 1);
        if (e == NULL && (e = key_add(m, op->key, ENT_STR)) == NULL) {
            free(v);
            return TW_ERR;
        }
        free(e->val);
        if (e->set != NULL) {
            table_free(e->set);
            free(e->set);
            e->set = NULL;
        }
        e->val = v;
        e->vlen = op->len;
        e->kind = ENT_STR;
        e->expire_ms = 0; /* as Redis SET does */
        return TW_OK;
    }
    case TW_STORE_DEL:
        if (e != NULL)
            table_unlink(&m->keys, p);
        return TW_OK;
    case TW_STORE_SADD: {
        if (e == NULL) {
            e = key_add(m, op->key, ENT_SET);
            if (e == NULL || (e->set = calloc(1, sizeof(*e->set))) == NULL)
                return TW_ERR;
        }
        uint64_t h = hash_bytes(op->data, op->len);
        if (table_find(e->set, (const char *)op->data, op->len, h, NULL))
            return TW_OK;
        return table_add(e->set, (const char *)op->data, op->len, h,
                         ENT_MEMBER) != NULL
                   ? TW_OK
                   : TW_ERR;
    }
    case TW_STORE_SREM:
    case TW_STORE_ZREM: {
        if (e == NULL)
            return TW_OK;
        mentry **mp;
        uint64_t h = hash_bytes(op->data, op->len);
        if (table_find(e->set, (const char *)op->data, op->len, h, &mp))
            table_unlink(e->set, mp);
        if (e->set->count == 0) /* Redis drops empty (sorted) sets */
            table_unlink(&m->keys, p);
        return TW_OK;
    }
    case TW_STORE_EXPIRE:
        if (e != NULL)
            e->expire_ms = (tw_wall_us() / 1000) + op->ttl_s * 1000;
        return TW_OK;
    }
    return TW_ERR;
}

static int mem_commit(void *impl, const tw_store_op *ops, size_t n, char *err,
                      size_t errlen)
{
    memstore *m = impl;
    if (m->broken)
        return mem_ping(m, err, errlen);
    if (mem_check(m, ops, n, err, errlen) != TW_OK)
        return TW_ERR;
    for (size_t i = 0; i < n; i++) {
        if (mem_apply(m, &ops[i]) != TW_OK) {
            /* Only out-of-memory gets here; the map is half-updated. */
            m->broken = 1;
            snprintf(err, errlen,
                     "state: out of memory applying op %zu of %zu (%s '%s'); "
                     "the memory store is unusable",
                     i + 1, n, op_name(ops[i].kind), ops[i].key);
            return TW_ERR;
        }
    }
    if (n > 0)
        m->dirty = 1;
    return snapshot_maybe(m, 0, err, errlen);
}

static int mem_get(void *impl, const char *key, uint8_t **data, size_t *len,
                   char *err, size_t errlen)
{
    mentry *e = key_find(impl, key, NULL);
    if (e == NULL)
        return 0;
    if (e->kind != ENT_STR) {
        snprintf(err, errlen, "state: key '%s' holds a set, not a value", key);
        return TW_ERR;
    }
    *data = malloc(e->vlen + 1);
    if (*data == NULL) {
        snprintf(err, errlen, "state: out of memory reading '%s'", key);
        return TW_ERR;
    }
    memcpy(*data, e->val, e->vlen + 1);
    *len = e->vlen;
    return 1;
}

static int mem_get_many(void *impl, const char *const *keys, size_t n,
                        tw_store_value_fn fn, void *ud, char *err,
                        size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        mentry *e = key_find(impl, keys[i], NULL);
        if (e != NULL && e->kind != ENT_STR) {
            snprintf(err, errlen, "state: key '%s' holds a set, not a value",
                     keys[i]);
            return TW_ERR;
        }
        int rc = e == NULL ? fn(ud, i, NULL, 0) : fn(ud, i, e->val, e->vlen);
        if (rc != 0)
            return rc;
    }
    return TW_OK;
}

static int mem_smembers(void *impl, const char *set, tw_store_member_fn fn,
                        void *ud, char *err, size_t errlen)
{
    mentry *e = key_find(impl, set, NULL);
    if (e == NULL)
        return TW_OK;
    if (e->kind != ENT_SET) {
        snprintf(err, errlen, "state: key '%s' holds a value, not a set", set);
        return TW_ERR;
    }
    for (size_t i = 0; i < e->set->cap; i++)
        for (mentry *x = e->set->buckets[i]; x != NULL; x = x->next) {
            int rc = fn(ud, x->key, x->klen);
            if (rc != 0)
                return rc;
        }
    return TW_OK;
}

static int mem_ttl(void *impl, const char *key, int64_t *ttl_ms, char *err,
                   size_t errlen)
{
    (void)err;
    (void)errlen;
    mentry *e = key_find(impl, key, NULL);
    if (e == NULL)
        return 0;
    *ttl_ms = e->expire_ms == 0 ? -1 : e->expire_ms - (tw_wall_us() / 1000);
    return 1;
}

/* ZADD set score member (the key must not hold another kind). */
static int zadd(memstore *m, const char *set, const char *member, int64_t score,
                char *err, size_t errlen)
{
    mentry *e = key_find(m, set, NULL);
    if (e != NULL && e->kind != ENT_ZSET) {
        snprintf(err, errlen, "state: key '%s' is not a sorted set", set);
        return TW_ERR;
    }
    if (e == NULL) {
        e = key_add(m, set, ENT_ZSET);
        if (e == NULL || (e->set = calloc(1, sizeof(*e->set))) == NULL)
            goto oom;
    }
    size_t len = strlen(member);
    uint64_t h = hash_bytes(member, len);
    mentry *x = table_find(e->set, member, len, h, NULL);
    if (x == NULL &&
        (x = table_add(e->set, member, len, h, ENT_MEMBER)) == NULL)
        goto oom;
    x->expire_ms = score;
    return TW_OK;
oom:
    snprintf(err, errlen, "state: out of memory adding to '%s'", set);
    return TW_ERR;
}

static int mem_claim(void *impl, const char *key, const char *value,
                     int64_t ttl_s, const char *pending, int64_t now_ms,
                     char *err, size_t errlen)
{
    memstore *m = impl;
    if (m->broken)
        return mem_ping(m, err, errlen);
    if (key_find(m, key, NULL) != NULL)
        return 0;
    tw_store_op op = {TW_STORE_PUT, (char *)key, (uint8_t *)value,
                      strlen(value), 0};
    tw_store_op unpend = {TW_STORE_ZREM, (char *)pending, (uint8_t *)key,
                          strlen(key), 0};
    mentry **p;
    mentry *e;
    if (mem_apply(m, &op) != TW_OK || (e = key_find(m, key, &p)) == NULL) {
        snprintf(err, errlen, "state: out of memory claiming '%s'", key);
        return TW_ERR;
    }
    e->expire_ms = (tw_wall_us() / 1000) + ttl_s * 1000;
    if (pending != NULL &&
        zadd(m, pending, key, now_ms, err, errlen) != TW_OK) {
        table_unlink(&m->keys, p);
        return TW_ERR;
    }
    m->dirty = 1;
    /* The claim must be on disk before the caller acts on it. */
    int rc = snapshot_maybe(m, 1, err, errlen);
    if (rc != TW_OK) {
        if (pending != NULL)
            mem_apply(m, &unpend); /* a removal: cannot fail */
        if ((e = key_find(m, key, &p)) != NULL)
            table_unlink(&m->keys, p);
        return rc;
    }
    return 1;
}

static int mem_ztake(void *impl, const char *set, int64_t max_score, size_t max,
                     tw_store_scored_fn fn, void *ud, char *err, size_t errlen)
{
    memstore *m = impl;
    mentry **sp;
    mentry *e = key_find(m, set, &sp);
    if (e == NULL)
        return 0;
    if (e->kind != ENT_ZSET) {
        snprintf(err, errlen, "state: key '%s' is not a sorted set", set);
        return TW_ERR;
    }
    /* detach the members first: fn may use the store */
    mentry *taken = NULL;
    size_t n = 0;
    for (size_t i = 0; i < e->set->cap && n < max; i++)
        for (mentry **p = &e->set->buckets[i]; *p != NULL && n < max;) {
            mentry *x = *p;
            if (x->expire_ms > max_score) {
                p = &x->next;
                continue;
            }
            *p = x->next;
            e->set->count--;
            x->next = taken;
            taken = x;
            n++;
        }
    if (n == 0)
        return 0;
    if (e->set->count == 0)
        table_unlink(&m->keys, sp);
    m->dirty = 1;
    /* a failure is logged there and kept dirty: the next commit writes it */
    (void)snapshot_maybe(m, 1, err, errlen);
    while (taken != NULL) {
        mentry *x = taken;
        taken = x->next;
        fn(ud, x->key, x->expire_ms);
        entry_free(x);
    }
    return (int)n;
}

/* Only a snapshot file outlives the process. */
static int mem_durable(const void *impl)
{
    const memstore *m = impl;
    return m->snapshot != NULL;
}

static const tw_store_vtable memory_vtable = {
    "memory",   mem_close, mem_ping,     mem_retry_in_ms,
    mem_commit, mem_get,   mem_get_many, mem_smembers,
    mem_ttl,    mem_claim, mem_ztake,    mem_durable};

int tw_store_memory_open(const tw_settings *state, const tw_store_vtable **vt,
                         void **impl, char *err, size_t errlen)
{
    memstore *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "state: out of memory");
        return TW_ERR;
    }
    /* state: was checked against the schema by tw_store_open */
    const char *path = tw_schema_str(state, TW_SECTION_STATE, "snapshot");
    m->snapshot_interval_us =
        tw_schema_duration_us(state, TW_SECTION_STATE, "snapshot_interval");
    if (path != NULL && path[0] == '\0') {
        tw_settings_error(state, tw_settings_find(state, "snapshot"), err,
                          errlen, "empty path");
        goto fail;
    }
    if (path != NULL) {
        if ((m->snapshot = strdup(path)) == NULL) {
            snprintf(err, errlen, "state: out of memory");
            goto fail;
        }
        if (snapshot_load(m, err, errlen) != TW_OK)
            goto fail;
        m->last_snapshot_us = tw_mono_us();
    }
    *vt = &memory_vtable;
    *impl = m;
    return TW_OK;
fail:
    free(m->snapshot);
    free(m);
    return TW_ERR;
}
