/* checkpoint.c - partition checkpoints over the state store (checkpoint.h).
 * Every function builds its key names in stack buffers and frees whatever
 * it read before returning. */
#include "checkpoint.h"
#include "grow.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { KEY_MAX = 1024 };

static int key_fmt(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int key_fmt(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= size ? TW_ERR : TW_OK;
}

int tw_checkpoint_key_part(char *buf, size_t size, const char *job,
                           const char *part)
{
    return key_fmt(buf, size, "v1:job:{%s}:%s", job, part);
}

int tw_checkpoint_key_partition(char *buf, size_t size, const char *topic,
                                int32_t partition, const char *what)
{
    return key_fmt(buf, size, "v1:part:%s:%" PRId32 ":%s", topic, partition,
                   what);
}

int tw_checkpoint_key_done(char *buf, size_t size, const char *job)
{
    return key_fmt(buf, size, "v1:done:{%s}", job);
}

static int too_long(char *err, size_t errlen, const char *what,
                    const char *name)
{
    snprintf(err, errlen, "checkpoint: %s '%.64s...' is too long for a key",
             what, name);
    return TW_ERR;
}

/* ---- a list of strings read from a set ------------------------------------
 */

typedef struct strlist {
    char **v;
    size_t n, cap;
} strlist;

static int strlist_add(void *ud, const char *s, size_t len)
{
    strlist *l = ud;
    if (tw_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v), 16) !=
        TW_OK) {
        return TW_ERR;
    }
    if ((l->v[l->n] = strndup(s, len)) == NULL)
        return TW_ERR;
    l->n++;
    return TW_OK;
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* Members of set into l. On failure err says why. */
static int read_set(tw_store *s, const char *set, strlist *l, char *err,
                    size_t errlen)
{
    err[0] = 0;
    int rc = tw_store_smembers(s, set, strlist_add, l, err, errlen);
    if (rc != TW_OK && err[0] == 0)
        snprintf(err, errlen, "checkpoint: out of memory reading '%s'", set);
    return rc;
}

/* ---- commit
 * ------------------------------------------------------------------ */

static int is_finished(const char *job, const char *const *finished, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(job, finished[i]) == 0)
            return 1;
    return 0;
}

static int check_name(const char *what, const char *name, char *err,
                      size_t errlen)
{
    if (name == NULL || name[0] == 0) {
        snprintf(err, errlen, "checkpoint: empty %s", what);
        return TW_ERR;
    }
    return TW_OK;
}

/* Queue the removal of a finished job: its parts, its part set, its place
 * in the partition's job set; then its tombstone. */
static int queue_finished(tw_store *s, const char *jobs_key, const char *job,
                          char *err, size_t errlen)
{
    char key[KEY_MAX];
    strlist parts = {0};
    if (tw_checkpoint_key_part(key, sizeof(key), job, "parts") != TW_OK)
        return too_long(err, errlen, "job id", job);
    int rc = read_set(s, key, &parts, err, errlen);
    if (rc != TW_OK) {
        strlist_free(&parts);
        return rc;
    }
    /* Out-of-memory while queueing is remembered by the store and
     * reported by the commit, so the queueing results are not checked. */
    tw_store_txn_del(s, key);
    for (size_t i = 0; i < parts.n; i++) {
        if (tw_checkpoint_key_part(key, sizeof(key), job, parts.v[i]) !=
            TW_OK) {
            strlist_free(&parts);
            return too_long(err, errlen, "part name", parts.v[i]);
        }
        tw_store_txn_del(s, key);
    }
    strlist_free(&parts);
    tw_store_txn_srem(s, jobs_key, job);
    if (tw_checkpoint_key_done(key, sizeof(key), job) != TW_OK)
        return too_long(err, errlen, "job id", job);
    char when[24];
    snprintf(when, sizeof(when), "%lld", (long long)time(NULL));
    tw_store_txn_put(s, key, when, strlen(when));
    tw_store_txn_expire(s, key, tw_store_finished_ttl_s(s));
    return TW_OK;
}

/* A partition's job-set and offset keys (KEY_MAX bytes each). */
static int partition_keys(const char *topic, int32_t partition, char *jobs_key,
                          char *offset_key, char *err, size_t errlen)
{
    if (tw_checkpoint_key_partition(jobs_key, KEY_MAX, topic, partition,
                                    "jobs") != TW_OK ||
        tw_checkpoint_key_partition(offset_key, KEY_MAX, topic, partition,
                                    "offset") != TW_OK)
        return too_long(err, errlen, "topic", topic);
    return TW_OK;
}

int tw_checkpoint_commit(tw_store *s, const char *topic, int32_t partition,
                         int64_t next_offset, const tw_checkpoint_part *parts,
                         size_t nparts, const char *const *finished,
                         size_t nfinished, char *err, size_t errlen)
{
    if (check_name("topic", topic, err, errlen) != TW_OK)
        return TW_ERR;
    if (partition < 0 || next_offset < 0) {
        snprintf(err, errlen,
                 "checkpoint: %s [%" PRId32 "]: bad partition or offset "
                 "%" PRId64,
                 topic, partition, next_offset);
        return TW_ERR;
    }
    char jobs_key[KEY_MAX], offset_key[KEY_MAX], key[KEY_MAX];
    if (partition_keys(topic, partition, jobs_key, offset_key, err, errlen) !=
        TW_OK)
        return TW_ERR;

    tw_store_txn_begin(s);
    const char *last_job = NULL;
    for (size_t i = 0; i < nparts; i++) {
        const tw_checkpoint_part *p = &parts[i];
        if (check_name("job id", p->job, err, errlen) != TW_OK ||
            check_name("part name", p->part, err, errlen) != TW_OK)
            return TW_ERR;
        if (strspn(p->part,
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789._-") != strlen(p->part)) {
            /* keeps <job>}:<part> unambiguous whatever the job id holds */
            snprintf(err, errlen,
                     "checkpoint: job '%s': part name '%s' may "
                     "only hold letters, digits, '.', '_', '-'",
                     p->job, p->part);
            return TW_ERR;
        }
        if (strcmp(p->part, "parts") == 0) {
            snprintf(err, errlen,
                     "checkpoint: job '%s': 'parts' is reserved "
                     "and cannot name a part",
                     p->job);
            return TW_ERR;
        }
        if (is_finished(p->job, finished, nfinished))
            continue;
        if (tw_checkpoint_key_part(key, sizeof(key), p->job, p->part) != TW_OK)
            return too_long(err, errlen, "job id", p->job);
        if (p->data == NULL) { /* a part the job no longer has */
            tw_store_txn_del(s, key);
            tw_checkpoint_key_part(key, sizeof(key), p->job, "parts");
            tw_store_txn_srem(s, key, p->part);
            continue;
        }
        tw_store_txn_put(s, key, p->data, p->len);
        tw_checkpoint_key_part(key, sizeof(key), p->job, "parts");
        tw_store_txn_sadd(s, key, p->part);
        /* Parts come grouped by job; a repeated SADD is harmless anyway. */
        if (last_job == NULL || strcmp(last_job, p->job) != 0)
            tw_store_txn_sadd(s, jobs_key, p->job);
        last_job = p->job;
    }
    for (size_t i = 0; i < nfinished; i++) {
        if (check_name("finished job id", finished[i], err, errlen) != TW_OK)
            return TW_ERR;
        int rc = queue_finished(s, jobs_key, finished[i], err, errlen);
        if (rc != TW_OK)
            return rc;
    }
    char off[24];
    snprintf(off, sizeof(off), "%" PRId64, next_offset);
    tw_store_txn_put(s, offset_key, off, strlen(off));
    /* Out-of-memory while queueing shows up here, as one error. */
    return tw_store_txn_commit(s, err, errlen);
}

int tw_checkpoint_forget(tw_store *s, const char *topic, int32_t partition,
                         char *err, size_t errlen)
{
    char jobs_key[KEY_MAX], offset_key[KEY_MAX];
    if (partition_keys(topic, partition, jobs_key, offset_key, err, errlen) !=
        TW_OK)
        return TW_ERR;
    tw_store_txn_begin(s);
    tw_store_txn_del(s, jobs_key);
    tw_store_txn_del(s, offset_key);
    return tw_store_txn_commit(s, err, errlen);
}

/* ---- load
 * -------------------------------------------------------------------- */

/* 1 and *index when p is prefix followed by a decimal number. */
static int numbered(const char *p, const char *prefix,
                    unsigned long long *index)
{
    size_t n = strlen(prefix);
    if (strncmp(p, prefix, n) != 0 || p[n] < '0' || p[n] > '9')
        return 0;
    char *end;
    errno = 0;
    *index = strtoull(p + n, &end, 10);
    return *end == 0 && errno == 0;
}

/* The restore order (job.h, segmented checkpoints): core, the dictionary
 * segments by seq, the windows (which need the whole dictionary), the batch
 * segments by seq, rule.<i> by i, then the rest by name. */
static int part_rank(const char *p, unsigned long long *index)
{
    if (strcmp(p, "core") == 0)
        return 0;
    if (numbered(p, "dict.", index))
        return 1;
    if (strcmp(p, "windows") == 0)
        return 2;
    if (numbered(p, "chunks.", index))
        return 3;
    if (numbered(p, "rule.", index))
        return 4;
    return 5;
}

int tw_checkpoint_part_cmp(const char *pa, const char *pb)
{
    unsigned long long ia = 0, ib = 0;
    int ra = part_rank(pa, &ia), rb = part_rank(pb, &ib);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    if (ia != ib)
        return ia < ib ? -1 : 1;
    return strcmp(pa, pb);
}

static int part_cmp(const void *a, const void *b)
{
    return tw_checkpoint_part_cmp(*(char *const *)a, *(char *const *)b);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One job's parts as tw_store_get_many hands them over. */
typedef struct load_ctx {
    const char *job;
    const strlist *parts;
    char *const *keys;
    tw_checkpoint_part_fn fn;
    void *ud;
    char *err;
    size_t errlen;
} load_ctx;

static int load_part(void *ud, size_t i, const uint8_t *data, size_t len)
{
    load_ctx *c = ud;
    if (data == NULL) {
        snprintf(c->err, c->errlen,
                 "checkpoint: job '%s' lists part '%s' but key '%s' is "
                 "missing",
                 c->job, c->parts->v[i], c->keys[i]);
        return TW_ERR;
    }
    int rc = c->fn(c->ud, c->job, c->parts->v[i], data, len);
    if (rc != TW_OK && c->err[0] == 0)
        snprintf(c->err, c->errlen,
                 "checkpoint: restoring job '%s' part '%s' failed", c->job,
                 c->parts->v[i]);
    return rc != TW_OK ? TW_ERR : TW_OK;
}

/* Every part of the job in one pipeline, in restore order: the store sends
 * the next parts while this one is restored. */
static int load_job(tw_store *s, const char *job, tw_checkpoint_part_fn fn,
                    void *ud, char *err, size_t errlen)
{
    char key[KEY_MAX];
    strlist parts = {0};
    char **keys = NULL;
    if (tw_checkpoint_key_part(key, sizeof(key), job, "parts") != TW_OK)
        return too_long(err, errlen, "job id", job);
    int rc = read_set(s, key, &parts, err, errlen);
    if (rc == TW_OK && parts.n > 0) {
        qsort(parts.v, parts.n, sizeof(*parts.v), part_cmp);
        if ((keys = calloc(parts.n, sizeof(*keys))) == NULL) {
            snprintf(err, errlen, "checkpoint: out of memory loading job '%s'",
                     job);
            rc = TW_ERR;
        }
    }
    for (size_t i = 0; i < parts.n && rc == TW_OK; i++) {
        if (tw_checkpoint_key_part(key, sizeof(key), job, parts.v[i]) !=
            TW_OK) {
            rc = too_long(err, errlen, "part name", parts.v[i]);
        } else if ((keys[i] = strdup(key)) == NULL) {
            snprintf(err, errlen, "checkpoint: out of memory loading job '%s'",
                     job);
            rc = TW_ERR;
        }
    }
    if (rc == TW_OK && parts.n > 0) {
        load_ctx c = {job, &parts, keys, fn, ud, err, errlen};
        rc = tw_store_get_many(s, (const char *const *)keys, parts.n, load_part,
                               &c, err, errlen);
    }
    for (size_t i = 0; keys != NULL && i < parts.n; i++)
        free(keys[i]);
    free(keys);
    strlist_free(&parts);
    return rc;
}

int tw_checkpoint_load(tw_store *s, const char *topic, int32_t partition,
                       int64_t *next_offset, tw_checkpoint_part_fn fn, void *ud,
                       char *err, size_t errlen)
{
    char jobs_key[KEY_MAX], offset_key[KEY_MAX];
    if (check_name("topic", topic, err, errlen) != TW_OK)
        return TW_ERR;
    if (tw_checkpoint_key_partition(jobs_key, sizeof(jobs_key), topic,
                                    partition, "jobs") != TW_OK ||
        tw_checkpoint_key_partition(offset_key, sizeof(offset_key), topic,
                                    partition, "offset") != TW_OK)
        return too_long(err, errlen, "topic", topic);
    *next_offset = -1;
    uint8_t *data = NULL;
    size_t len = 0;
    int got = tw_store_get(s, offset_key, &data, &len, err, errlen);
    if (got < 0)
        return got;
    if (got == 1) {
        char *end;
        errno = 0;
        long long v = strtoll((const char *)data, &end, 10);
        /* the whole value, digits only: a NUL inside would otherwise end
         * it early, and strtoll also takes blanks, '+' and "-0" */
        int bad = len == 0 || data[0] < '0' || data[0] > '9' ||
                  end != (const char *)data + len || errno != 0 || v < 0;
        free(data);
        if (bad) {
            snprintf(err, errlen,
                     "checkpoint: key '%s' does not hold an offset",
                     offset_key);
            return TW_ERR;
        }
        *next_offset = v;
    }
    strlist jobs = {0};
    int rc = read_set(s, jobs_key, &jobs, err, errlen);
    if (rc == TW_OK && jobs.n > 0)
        qsort(jobs.v, jobs.n, sizeof(*jobs.v), str_cmp);
    for (size_t i = 0; i < jobs.n && rc == TW_OK; i++) {
        err[0] = 0;
        rc = load_job(s, jobs.v[i], fn, ud, err, errlen);
    }
    strlist_free(&jobs);
    return rc;
}

int tw_checkpoint_job_done(tw_store *s, const char *job, char *err,
                           size_t errlen)
{
    char key[KEY_MAX];
    if (tw_checkpoint_key_done(key, sizeof(key), job) != TW_OK)
        return too_long(err, errlen, "job id", job);
    uint8_t *data = NULL;
    size_t len;
    int got = tw_store_get(s, key, &data, &len, err, errlen);
    free(data);
    return got;
}

int tw_checkpoint_claim(tw_store *s, const char *id, const char *label,
                        char *err, size_t errlen)
{
    char key[KEY_MAX];
    if (check_name("action id", id, err, errlen) != TW_OK)
        return TW_ERR;
    if (key_fmt(key, sizeof(key), "v1:sent:%s", id) != TW_OK)
        return too_long(err, errlen, "action id", id);
    /* a volatile store's claims die with the process: nothing to find */
    if (!tw_store_durable(s))
        return tw_store_claim(s, key, tw_store_finished_ttl_s(s), err, errlen);
    return tw_store_claim_pending(s, key, label != NULL ? label : "1",
                                  tw_store_finished_ttl_s(s), "v1:pending", err,
                                  errlen);
}

int tw_checkpoint_confirm(tw_store *s, const char *const *ids, size_t n,
                          char *err, size_t errlen)
{
    if (n == 0)
        return TW_OK;
    tw_store_txn_begin(s);
    for (size_t i = 0; i < n; i++) {
        char key[KEY_MAX];
        if (key_fmt(key, sizeof(key), "v1:sent:%s", ids[i]) != TW_OK)
            continue; /* never claimed: tw_checkpoint_claim refused it */
        tw_store_txn_zrem(s, "v1:pending", key);
    }
    return tw_store_txn_commit(s, err, errlen);
}

typedef struct unconfirmed_walk {
    tw_store *s;
    tw_checkpoint_unconfirmed_fn fn;
    void *ud;
} unconfirmed_walk;

static void unconfirmed_one(void *ud, const char *member, int64_t score)
{
    unconfirmed_walk *w = ud;
    static const char sent[] = "v1:sent:";
    const char *id = strncmp(member, sent, sizeof(sent) - 1) == 0
                         ? member + sizeof(sent) - 1
                         : member;
    uint8_t *label = NULL;
    size_t len;
    char err[256];
    if (tw_store_get(w->s, member, &label, &len, err, sizeof(err)) != 1) {
        free(label);
        label = NULL; /* expired or unreadable: the id says enough */
    }
    w->fn(w->ud, id,
          label != NULL && strcmp((char *)label, "1") != 0 ? (const char *)label
                                                           : NULL,
          score);
    free(label);
}

int tw_checkpoint_unconfirmed(tw_store *s, int64_t claimed_before_ms,
                              tw_checkpoint_unconfirmed_fn fn, void *ud,
                              char *err, size_t errlen)
{
    unconfirmed_walk w = {s, fn, ud};
    return tw_store_ztake(s, "v1:pending", claimed_before_ms, 1000,
                          unconfirmed_one, &w, err, errlen);
}
