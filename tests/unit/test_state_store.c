/* test_state_store.c - the state stores (memory and a real redis-server on
 * a free loopback port, through the same test bodies) and partition
 * checkpoints: values, sets, expiry, claims, transactions, snapshots,
 * AUTH, db/prefix isolation, outage and reconnect, settings errors. */
/* cmocka.h needs these first */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

// clang-format on
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "clock.h"
#include "log.h"
#include "redis_test_util.h"
#include "state_store.h"

static tw_test_redis shared_redis; /* for the tests of both stores */

/* ---- helpers ----------------------------------------------------------------
 */

/* A state section from "key", "value", ... NULL, as config.c builds it. */
typedef struct settings_fixture {
    tw_setting items[32];
    tw_settings s;
} settings_fixture;

static const tw_settings *make_settings(settings_fixture *f, va_list ap)
{
    memset(f, 0, sizeof(*f));
    f->s.path = "test.yaml";
    f->s.what = "state";
    f->s.line = 1;
    f->s.items = f->items;
    const char *k;
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);
        f->items[f->s.n] = (tw_setting){k, v, (int)f->s.n + 2};
        f->s.n++;
    }
    return &f->s;
}

/* Open a store from key/value pairs; TW_OK expected. */
static tw_store *open_kv(const char *first, ...)
{
    settings_fixture f;
    va_list ap;
    va_start(ap, first);
    /* make_settings wants the first key back in the list */
    memset(&f, 0, sizeof(f));
    f.s.path = "test.yaml";
    f.s.what = "state";
    f.s.items = f.items;
    const char *k = first;
    while (k != NULL) {
        const char *v = va_arg(ap, const char *);
        f.items[f.s.n] = (tw_setting){k, v, (int)f.s.n + 2};
        f.s.n++;
        k = va_arg(ap, const char *);
    }
    va_end(ap);
    tw_store *s = NULL;
    char err[512] = "";
    int rc = tw_store_open(&f.s, &s, err, sizeof(err));
    if (rc != TW_OK)
        fail_msg("tw_store_open: %s", err);
    return s;
}

/* tw_store_open expected to fail; returns the message. */
static int open_err(char *err, size_t errlen, ...)
{
    settings_fixture f;
    va_list ap;
    va_start(ap, errlen);
    const tw_settings *st = make_settings(&f, ap);
    va_end(ap);
    tw_store *s = NULL;
    err[0] = 0;
    int rc = tw_store_open(st, &s, err, errlen);
    tw_store_close(s);
    return rc;
}

static char port_str[16];

static void flush_shared(void)
{
    redisContext *c = tw_test_redis_connect(&shared_redis);
    assert_non_null(c);
    redisReply *rep = redisCommand(c, "FLUSHALL");
    assert_non_null(rep);
    freeReplyObject(rep);
    redisFree(c);
}

/* kind 0: memory, 1: redis on the shared server (flushed first). */
static tw_store *open_kind(int kind)
{
    if (kind == 0)
        return open_kv("finished_ttl", "2d", NULL);
    flush_shared();
    snprintf(port_str, sizeof(port_str), "%d", shared_redis.port);
    return open_kv("store", "redis", "redis.port", port_str, "finished_ttl",
                   "2d", NULL);
}

static const char *kind_name(int kind)
{
    return kind ? "redis" : "memory";
}

/* Log capture into a temp file. */
static FILE *log_capture(void)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    tw_log_set_stream(f);
    return f;
}

static char *log_release(FILE *f)
{
    tw_log_set_stream(NULL);
    fflush(f);
    long n = ftell(f);
    char *text = calloc(1, (size_t)n + 1);
    rewind(f);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return text;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static int collect(void *ud, const char *member, size_t len)
{
    char *out = ud; /* members joined by ',' (callers sort if needed) */
    assert_int_equal(strlen(member), len);
    strcat(out, member);
    strcat(out, ",");
    return 0;
}

/* ---- values, sets, expiry -------------------------------------------------
 */

static void put_get_body(tw_store *s)
{
    char err[512];
    const uint8_t bin[] = {0, 1, 2, 0xff, 0, 'x'};
    tw_store_txn_begin(s);
    assert_int_equal(tw_store_txn_put(s, "a", bin, sizeof(bin)), TW_OK);
    assert_int_equal(tw_store_txn_put(s, "b", "bee", 3), TW_OK);
    assert_int_equal(tw_store_txn_sadd(s, "set", "m1"), TW_OK);
    assert_int_equal(tw_store_txn_sadd(s, "set", "m2"), TW_OK);
    assert_int_equal(tw_store_txn_sadd(s, "set", "m1"), TW_OK);
    assert_int_equal(tw_store_txn_expire(s, "b", 100), TW_OK);
    assert_int_equal(tw_store_txn_size(s), 6);
    assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);

    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal(tw_store_get(s, "a", &data, &len, err, sizeof(err)), 1);
    assert_int_equal(len, sizeof(bin));
    assert_memory_equal(data, bin, sizeof(bin));
    free(data);
    assert_int_equal(tw_store_get(s, "nope", &data, &len, err, sizeof(err)), 0);
    int64_t ttl = 0;
    assert_int_equal(tw_store_ttl(s, "b", &ttl, err, sizeof(err)), 1);
    assert_true(ttl > 90000 && ttl <= 100000);
    assert_int_equal(tw_store_ttl(s, "a", &ttl, err, sizeof(err)), 1);
    assert_int_equal(ttl, -1);
    assert_int_equal(tw_store_ttl(s, "nope", &ttl, err, sizeof(err)), 0);

    char members[64] = "";
    assert_int_equal(
        tw_store_smembers(s, "set", collect, members, err, sizeof(err)), TW_OK);
    assert_true(strcmp(members, "m1,m2,") == 0 ||
                strcmp(members, "m2,m1,") == 0);
    members[0] = 0;
    assert_int_equal(
        tw_store_smembers(s, "noset", collect, members, err, sizeof(err)),
        TW_OK);
    assert_string_equal(members, "");

    /* overwrite clears the TTL (Redis SET semantics); del; srem */
    tw_store_txn_begin(s);
    tw_store_txn_put(s, "b", "b2", 2);
    tw_store_txn_del(s, "a");
    tw_store_txn_srem(s, "set", "m1");
    assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
    assert_int_equal(tw_store_get(s, "a", &data, &len, err, sizeof(err)), 0);
    assert_int_equal(tw_store_ttl(s, "b", &ttl, err, sizeof(err)), 1);
    assert_int_equal(ttl, -1);
    assert_int_equal(tw_store_get(s, "b", &data, &len, err, sizeof(err)), 1);
    assert_string_equal((char *)data, "b2");
    free(data);
    members[0] = 0;
    tw_store_smembers(s, "set", collect, members, err, sizeof(err));
    assert_string_equal(members, "m2,");

    /* a value is not a set and a set is not a value */
    assert_int_equal(tw_store_get(s, "set", &data, &len, err, sizeof(err)),
                     TW_ERR);
    /* an empty transaction is fine */
    tw_store_txn_begin(s);
    assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
}

static void test_put_get(void **st)
{
    (void)st;
    for (int k = 0; k < 2; k++) {
        print_message("  store %s\n", kind_name(k));
        tw_store *s = open_kind(k);
        assert_string_equal(tw_store_kind(s), kind_name(k));
        put_get_body(s);
        tw_store_close(s);
    }
}

/* A transaction with a mistyped op fails as a whole: the memory store
 * checks before applying; Redis reports the command that failed. */
static void test_txn_type_error(void **st)
{
    (void)st;
    for (int k = 0; k < 2; k++) {
        tw_store *s = open_kind(k);
        char err[512];
        tw_store_txn_begin(s);
        tw_store_txn_put(s, "val", "v", 1);
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
        tw_store_txn_begin(s);
        tw_store_txn_put(s, "before", "x", 1);
        tw_store_txn_sadd(s, "val", "m");
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_ERR);
        assert_non_null(strstr(err, "val"));
        if (k == 0) {
            uint8_t *d;
            size_t n;
            assert_non_null(strstr(err, "nothing written"));
            assert_int_equal(
                tw_store_get(s, "before", &d, &n, err, sizeof(err)), 0);
        } else {
            assert_non_null(strstr(err, "WRONGTYPE"));
        }
        tw_store_close(s);
    }
}

static void test_claim(void **st)
{
    (void)st;
    for (int k = 0; k < 2; k++) {
        tw_store *s = open_kind(k);
        char err[512];
        assert_int_equal(tw_store_claim(s, "act:1", 60, err, sizeof(err)), 1);
        assert_int_equal(tw_store_claim(s, "act:1", 60, err, sizeof(err)), 0);
        assert_int_equal(tw_store_claim(s, "act:2", 60, err, sizeof(err)), 1);
        int64_t ttl;
        assert_int_equal(tw_store_ttl(s, "act:1", &ttl, err, sizeof(err)), 1);
        assert_true(ttl > 50000 && ttl <= 60000);
        /* through the checkpoint layout: v1:sent:<id>, TTL finished_ttl */
        assert_int_equal(
            tw_checkpoint_claim(s, "alert-9", NULL, err, sizeof(err)), 1);
        assert_int_equal(
            tw_checkpoint_claim(s, "alert-9", NULL, err, sizeof(err)), 0);
        assert_int_equal(
            tw_store_ttl(s, "v1:sent:alert-9", &ttl, err, sizeof(err)), 1);
        assert_true(ttl > 2 * 86400000LL - 60000 && ttl <= 2 * 86400000LL);
        tw_store_close(s);
    }
}

typedef struct taken {
    char members[8][64];
    int64_t scores[8];
    int n;
} taken;

static void on_taken(void *ud, const char *member, int64_t score)
{
    taken *t = ud;
    if (t->n < 8) {
        snprintf(t->members[t->n], sizeof(t->members[0]), "%s", member);
        t->scores[t->n++] = score;
    }
}

/* claim_pending records the claim in a sorted set, only when it claims;
 * zrem clears it; ztake takes what is old enough, each member once. */
static void test_claim_pending(void **st)
{
    (void)st;
    for (int k = 0; k < 2; k++) {
        tw_store *s = open_kind(k);
        char err[512];
        assert_int_equal(tw_store_claim_pending(s, "sent:a", "label a", 60,
                                                "pend", err, sizeof(err)),
                         1);
        assert_int_equal(tw_store_claim_pending(s, "sent:b", "label b", 60,
                                                "pend", err, sizeof(err)),
                         1);
        /* a second claim neither claims nor touches the pending set */
        assert_int_equal(tw_store_claim_pending(s, "sent:a", "other", 60,
                                                "pend", err, sizeof(err)),
                         0);
        uint8_t *d;
        size_t n;
        assert_int_equal(tw_store_get(s, "sent:a", &d, &n, err, sizeof(err)),
                         1);
        assert_string_equal((char *)d, "label a");
        free(d);
        /* b delivered: cleared */
        tw_store_txn_begin(s);
        tw_store_txn_zrem(s, "pend", "sent:b");
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
        /* nothing claimed before an hour ago */
        taken t = {0};
        int64_t hour_ago = tw_wall_us() / 1000 - 3600000;
        assert_int_equal(tw_store_ztake(s, "pend", hour_ago, 100, on_taken, &t,
                                        err, sizeof(err)),
                         0);
        /* the claims' clock (tw_wall_us): time() may read a coarser one,
         * a few ms behind, and a claim just after a second's start would
         * then look newer than "a second later" */
        int64_t now_ms = tw_wall_us() / 1000 + 1000;
        assert_int_equal(tw_store_ztake(s, "pend", now_ms, 100, on_taken, &t,
                                        err, sizeof(err)),
                         1);
        assert_int_equal(t.n, 1);
        assert_string_equal(t.members[0], "sent:a");
        assert_true(t.scores[0] > hour_ago && t.scores[0] <= now_ms);
        /* taken once: a second look (another engine) sees nothing */
        assert_int_equal(tw_store_ztake(s, "pend", now_ms, 100, on_taken, &t,
                                        err, sizeof(err)),
                         0);
        assert_int_equal(t.n, 1);
        /* a zrem on a value is refused as a whole */
        tw_store_txn_begin(s);
        tw_store_txn_zrem(s, "sent:a", "x");
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_ERR);
        tw_store_close(s);
    }
}

/* ---- checkpoints ------------------------------------------------------------
 */

enum { NJOBS = 3, NRULES = 12 };

typedef struct loaded {
    char order[4096]; /* "job/part;" in callback order */
    int nparts;
    int mismatches;
    int version; /* expected data version of job-b rule.3 */
} loaded;

/* The bytes of (job, part): deterministic, binary, distinct sizes. */
static size_t part_data(const char *job, const char *part, int version,
                        uint8_t *buf)
{
    size_t n = 100 + strlen(part) * 37 + (size_t)job[4] * 3;
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(i * 7 + (size_t)job[4] + strlen(part) + version);
    buf[3] = 0;
    return n;
}

static int on_part(void *ud, const char *job, const char *part,
                   const uint8_t *data, size_t len)
{
    loaded *l = ud;
    char item[64];
    snprintf(item, sizeof(item), "%s/%s;", job, part);
    strcat(l->order, item);
    l->nparts++;
    uint8_t want[2048];
    int version = strcmp(job, "job-b") == 0 && strcmp(part, "rule.3") == 0
                      ? l->version
                      : 0;
    size_t n = part_data(job, part, version, want);
    if (n != len || memcmp(want, data, n) != 0)
        l->mismatches++;
    return 0;
}

static void checkpoint_body(tw_store *s)
{
    char err[512];
    static const char *jobs[NJOBS] = {"job-c", "job-a", "job-b"};
    static uint8_t bufs[NJOBS * (NRULES + 1)][2048];
    static char names[NRULES + 1][16];
    tw_checkpoint_part parts[NJOBS * (NRULES + 1)];
    size_t n = 0;
    for (int j = 0; j < NJOBS; j++)
        for (int p = 0; p <= NRULES; p++) {
            /* rules before core on purpose: load must reorder */
            if (p < NRULES)
                snprintf(names[p], sizeof(names[p]), "rule.%d", NRULES - 1 - p);
            else
                snprintf(names[p], sizeof(names[p]), "core");
            size_t len = part_data(jobs[j], names[p], 0, bufs[n]);
            parts[n] = (tw_checkpoint_part){jobs[j], names[p], bufs[n], len};
            n++;
        }
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 2, 42, parts, n, NULL,
                                          0, err, sizeof(err)),
                     TW_OK);

    loaded l = {0};
    int64_t off = 0;
    assert_int_equal(tw_checkpoint_load(s, "metrics", 2, &off, on_part, &l, err,
                                        sizeof(err)),
                     TW_OK);
    assert_int_equal(off, 42);
    assert_int_equal(l.nparts, NJOBS * (NRULES + 1));
    assert_int_equal(l.mismatches, 0);
    /* jobs sorted; core, then rules by number (rule.2 before rule.10) */
    assert_true(strncmp(l.order,
                        "job-a/core;job-a/rule.0;job-a/rule.1;job-a/rule.2;"
                        "job-a/rule.3;job-a/rule.4;job-a/rule.5;job-a/rule.6;"
                        "job-a/rule.7;job-a/rule.8;job-a/rule.9;job-a/rule.10;"
                        "job-a/rule.11;job-b/core;",
                        strlen("job-a/core;job-a/rule.0;job-a/rule.1;"
                               "job-a/rule.2;job-a/rule.3;job-a/rule.4;"
                               "job-a/rule.5;job-a/rule.6;job-a/rule.7;"
                               "job-a/rule.8;job-a/rule.9;job-a/rule.10;"
                               "job-a/rule.11;job-b/core;")) == 0);

    /* only a dirty part: the others stay as they were */
    uint8_t nb[2048];
    size_t len = part_data("job-b", "rule.3", 5, nb);
    tw_checkpoint_part dirty = {"job-b", "rule.3", nb, len};
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 2, 50, &dirty, 1, NULL,
                                          0, err, sizeof(err)),
                     TW_OK);
    memset(&l, 0, sizeof(l));
    l.version = 5;
    assert_int_equal(tw_checkpoint_load(s, "metrics", 2, &off, on_part, &l, err,
                                        sizeof(err)),
                     TW_OK);
    assert_int_equal(off, 50);
    assert_int_equal(l.nparts, NJOBS * (NRULES + 1));
    assert_int_equal(l.mismatches, 0);

    /* another partition and another topic are separate */
    memset(&l, 0, sizeof(l));
    assert_int_equal(tw_checkpoint_load(s, "metrics", 3, &off, on_part, &l, err,
                                        sizeof(err)),
                     TW_OK);
    assert_int_equal(off, -1);
    assert_int_equal(l.nparts, 0);
    assert_int_equal(
        tw_checkpoint_load(s, "other", 2, &off, on_part, &l, err, sizeof(err)),
        TW_OK);
    assert_int_equal(off, -1);

    /* job-a finishes: parts gone, tombstone with TTL, others intact */
    const char *done[1] = {"job-a"};
    assert_int_equal(tw_checkpoint_job_done(s, "job-a", err, sizeof(err)), 0);
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 2, 60, parts, 1, done,
                                          1, err, sizeof(err)),
                     TW_OK);
    memset(&l, 0, sizeof(l));
    l.version = 5;
    assert_int_equal(tw_checkpoint_load(s, "metrics", 2, &off, on_part, &l, err,
                                        sizeof(err)),
                     TW_OK);
    assert_int_equal(off, 60);
    assert_int_equal(l.nparts, 2 * (NRULES + 1));
    assert_null(strstr(l.order, "job-a"));
    assert_int_equal(tw_checkpoint_job_done(s, "job-a", err, sizeof(err)), 1);
    assert_int_equal(tw_checkpoint_job_done(s, "job-b", err, sizeof(err)), 0);
    int64_t ttl;
    char key[128];
    tw_checkpoint_key_done(key, sizeof(key), "job-a");
    assert_string_equal(key, "v1:done:{job-a}");
    assert_int_equal(tw_store_ttl(s, key, &ttl, err, sizeof(err)), 1);
    assert_true(ttl > 2 * 86400000LL - 60000 && ttl <= 2 * 86400000LL);
    uint8_t *d;
    size_t dl;
    tw_checkpoint_key_part(key, sizeof(key), "job-a", "core");
    assert_int_equal(tw_store_get(s, key, &d, &dl, err, sizeof(err)), 0);
    tw_checkpoint_key_part(key, sizeof(key), "job-a", "parts");
    assert_int_equal(tw_store_ttl(s, key, &ttl, err, sizeof(err)), 0);

    /* bad input */
    tw_checkpoint_part bad = {"job-x", "parts", "x", 1};
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 2, 61, &bad, 1, NULL, 0,
                                          err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "reserved"));
    bad.part = "core}:x";
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 2, 61, &bad, 1, NULL, 0,
                                          err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "part name 'core}:x'"));
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 2, -5, NULL, 0, NULL, 0,
                                          err, sizeof(err)),
                     TW_ERR);
}

/* Segmented jobs' parts (job.h): restored in dependency order with
 * numbers compared as numbers, and a part given with data NULL is removed,
 * key and set member, in the same transaction as the rest. */
static void checkpoint_segments_body(tw_store *s)
{
    char err[512];
    static const char *names[] = {"chunks.10", "rule.1",  "alerts",
                                  "chunks.9",  "windows", "dict.11",
                                  "rule.0",    "dict.2",  "core"};
    enum { N = sizeof(names) / sizeof(names[0]) };
    static uint8_t bufs[N][2048];
    tw_checkpoint_part parts[N];
    for (size_t i = 0; i < N; i++) {
        size_t len = part_data("job-s", names[i], 0, bufs[i]);
        parts[i] = (tw_checkpoint_part){"job-s", names[i], bufs[i], len};
    }
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 7, 5, parts, N, NULL, 0,
                                          err, sizeof(err)),
                     TW_OK);
    loaded l = {0};
    int64_t off = 0;
    assert_int_equal(tw_checkpoint_load(s, "metrics", 7, &off, on_part, &l, err,
                                        sizeof(err)),
                     TW_OK);
    assert_int_equal(l.mismatches, 0);
    assert_string_equal(l.order,
                        "job-s/core;job-s/dict.2;job-s/dict.11;job-s/windows;"
                        "job-s/chunks.9;job-s/chunks.10;job-s/rule.0;"
                        "job-s/rule.1;job-s/alerts;");

    /* chunks.9 released, chunks.11 new: one commit */
    uint8_t nb[2048];
    size_t len = part_data("job-s", "chunks.11", 0, nb);
    tw_checkpoint_part step[2] = {{"job-s", "chunks.9", NULL, 0},
                                  {"job-s", "chunks.11", nb, len}};
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 7, 6, step, 2, NULL, 0,
                                          err, sizeof(err)),
                     TW_OK);
    memset(&l, 0, sizeof(l));
    assert_int_equal(tw_checkpoint_load(s, "metrics", 7, &off, on_part, &l, err,
                                        sizeof(err)),
                     TW_OK);
    assert_int_equal(off, 6);
    assert_int_equal(l.mismatches, 0);
    assert_string_equal(l.order,
                        "job-s/core;job-s/dict.2;job-s/dict.11;job-s/windows;"
                        "job-s/chunks.10;job-s/chunks.11;job-s/rule.0;"
                        "job-s/rule.1;job-s/alerts;");
    char key[128];
    uint8_t *d = NULL;
    size_t dl;
    tw_checkpoint_key_part(key, sizeof(key), "job-s", "chunks.9");
    assert_int_equal(tw_store_get(s, key, &d, &dl, err, sizeof(err)), 0);
    /* removing a part that is not there is harmless (a retried save) */
    assert_int_equal(tw_checkpoint_commit(s, "metrics", 7, 7, step, 1, NULL, 0,
                                          err, sizeof(err)),
                     TW_OK);
    assert_true(tw_checkpoint_part_cmp("chunks.9", "chunks.10") < 0);
    assert_true(tw_checkpoint_part_cmp("windows", "dict.100") > 0);
    assert_true(tw_checkpoint_part_cmp("rule.0", "chunks.100") > 0);
}

static void test_checkpoint(void **st)
{
    (void)st;
    for (int k = 0; k < 2; k++) {
        print_message("  store %s\n", kind_name(k));
        tw_store *s = open_kind(k);
        checkpoint_segments_body(s);
        checkpoint_body(s);
        tw_store_close(s);
    }
}

/* A checkpoint whose keys do not agree is an error naming the key. */
static void test_checkpoint_inconsistent(void **st)
{
    (void)st;
    for (int k = 0; k < 2; k++) {
        tw_store *s = open_kind(k);
        char err[512];
        loaded l = {0};
        int64_t off;
        tw_store_txn_begin(s);
        tw_store_txn_sadd(s, "v1:part:t:0:jobs", "j1");
        tw_store_txn_sadd(s, "v1:job:{j1}:parts", "core");
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
        assert_int_equal(
            tw_checkpoint_load(s, "t", 0, &off, on_part, &l, err, sizeof(err)),
            TW_ERR);
        assert_non_null(strstr(err, "v1:job:{j1}:core"));
        tw_store_txn_begin(s);
        tw_store_txn_put(s, "v1:part:t:1:offset", "12x", 3);
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
        assert_int_equal(
            tw_checkpoint_load(s, "t", 1, &off, on_part, &l, err, sizeof(err)),
            TW_ERR);
        assert_non_null(strstr(err, "v1:part:t:1:offset"));
        tw_store_close(s);
    }
}

/* ---- memory snapshot
 * ---------------------------------------------------------- */

static char snapdir[64];
static char snappath[128];

static void snap_paths(void)
{
    snprintf(snapdir, sizeof(snapdir), "/tmp/tw-snap.XXXXXX");
    assert_non_null(mkdtemp(snapdir));
    snprintf(snappath, sizeof(snappath), "%s/state.snap", snapdir);
}

static void snap_cleanup(void)
{
    unlink(snappath);
    rmdir(snapdir);
}

typedef struct reported {
    char ids[8][64];
    char labels[8][128];
    int n;
} reported;

static void on_unconfirmed(void *ud, const char *id, const char *label,
                           int64_t claimed_ms)
{
    (void)claimed_ms;
    reported *r = ud;
    if (r->n < 8) {
        snprintf(r->ids[r->n], sizeof(r->ids[0]), "%s", id);
        snprintf(r->labels[r->n], sizeof(r->labels[0]), "%s",
                 label ? label : "(none)");
        r->n++;
    }
}

/* Through the checkpoint layout, on the durable stores (redis; memory
 * with a snapshot, across a reopen): v1:pending until confirmed; two
 * stores on one redis (two engines) report an unconfirmed claim once. */
static void test_checkpoint_unconfirmed(void **st)
{
    (void)st;
    snap_paths();
    for (int k = 0; k < 2; k++) {
        char err[512];
        unlink(snappath);
        tw_store *s = k ? open_kind(1) : open_kv("snapshot", snappath, NULL);
        assert_int_equal(tw_checkpoint_claim(s, "j/r/0/webhook/once",
                                             "action j/r/0", err, sizeof(err)),
                         1);
        assert_int_equal(
            tw_checkpoint_claim(s, "alert-1", "alert 1", err, sizeof(err)), 1);
        const char *ok[] = {"alert-1"};
        assert_int_equal(tw_checkpoint_confirm(s, ok, 1, err, sizeof(err)),
                         TW_OK);
        tw_store *other = NULL;
        if (k == 0) { /* the restarted process */
            tw_store_close(s);
            s = open_kv("snapshot", snappath, NULL);
        } else { /* a second engine */
            snprintf(port_str, sizeof(port_str), "%d", shared_redis.port);
            other = open_kv("store", "redis", "redis.port", port_str, NULL);
        }
        reported r = {0};
        int64_t later = tw_wall_us() / 1000 + 1000; /* the claims' clock */
        if (other != NULL)
            assert_int_equal(tw_checkpoint_unconfirmed(other, later,
                                                       on_unconfirmed, &r, err,
                                                       sizeof(err)),
                             1);
        assert_int_equal(tw_checkpoint_unconfirmed(s, later, on_unconfirmed, &r,
                                                   err, sizeof(err)),
                         k == 0 ? 1 : 0);
        assert_int_equal(r.n, 1);
        assert_string_equal(r.ids[0], "j/r/0/webhook/once");
        assert_string_equal(r.labels[0], "action j/r/0");
        /* the claim itself stays: never sent twice */
        assert_int_equal(tw_checkpoint_claim(s, "j/r/0/webhook/once", NULL, err,
                                             sizeof(err)),
                         0);
        tw_store_close(other);
        tw_store_close(s);
    }
    snap_cleanup();
}

static void test_snapshot_roundtrip(void **st)
{
    (void)st;
    snap_paths();
    char err[512];
    tw_store *s = open_kv("snapshot", snappath, NULL);
    uint8_t data[2048];
    size_t n = part_data("job-a", "core", 0, data);
    tw_checkpoint_part p = {"job-a", "core", data, n};
    assert_int_equal(
        tw_checkpoint_commit(s, "m", 0, 7, &p, 1, NULL, 0, err, sizeof(err)),
        TW_OK);
    /* written at the commit (snapshot_interval 0) */
    struct stat sb;
    assert_int_equal(stat(snappath, &sb), 0);
    assert_int_equal(tw_store_claim(s, "c1", 3600, err, sizeof(err)), 1);
    tw_store_close(s);

    s = open_kv("snapshot", snappath, NULL);
    loaded l = {0};
    int64_t off;
    assert_int_equal(
        tw_checkpoint_load(s, "m", 0, &off, on_part, &l, err, sizeof(err)),
        TW_OK);
    assert_int_equal(off, 7);
    assert_int_equal(l.nparts, 1);
    assert_int_equal(l.mismatches, 0);
    assert_int_equal(tw_store_claim(s, "c1", 3600, err, sizeof(err)), 0);
    int64_t ttl;
    assert_int_equal(tw_store_ttl(s, "c1", &ttl, err, sizeof(err)), 1);
    assert_true(ttl > 3500000 && ttl <= 3600000);
    tw_store_close(s);

    /* snapshot_interval: commits wait, claims do not, close writes */
    unlink(snappath);
    s = open_kv("snapshot", snappath, "snapshot_interval", "1h", NULL);
    assert_int_equal(
        tw_checkpoint_commit(s, "m", 0, 8, &p, 1, NULL, 0, err, sizeof(err)),
        TW_OK);
    assert_int_equal(stat(snappath, &sb), -1);
    assert_int_equal(tw_store_claim(s, "c2", 60, err, sizeof(err)), 1);
    assert_int_equal(stat(snappath, &sb), 0);
    tw_store_close(s);
    s = open_kv("snapshot", snappath, NULL);
    assert_int_equal(
        tw_checkpoint_load(s, "m", 0, &off, on_part, &l, err, sizeof(err)),
        TW_OK);
    assert_int_equal(off, 8);
    tw_store_close(s);
    snap_cleanup();
}

static void write_file(const char *path, const uint8_t *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    uint8_t *d = malloc(*n);
    assert_int_equal(fread(d, 1, *n, f), *n);
    fclose(f);
    return d;
}

/* Damaged snapshots: the store refuses to open, naming file and offset. */
static void test_snapshot_corrupt(void **st)
{
    (void)st;
    snap_paths();
    char err[512];
    tw_store *s = open_kv("snapshot", snappath, NULL);
    uint8_t data[2048];
    size_t n = part_data("job-a", "core", 0, data);
    tw_checkpoint_part p = {"job-a", "core", data, n};
    assert_int_equal(
        tw_checkpoint_commit(s, "m", 0, 7, &p, 1, NULL, 0, err, sizeof(err)),
        TW_OK);
    tw_store_close(s);
    size_t len;
    uint8_t *good = read_file(snappath, &len);
    assert_true(len > 200);
    /* a byte inside the stored value (not a length field) */
    uint8_t *in_value = memmem(good, len, data + 10, 20);
    assert_non_null(in_value);
    long value_at = (long)(in_value - good) + 5;

    struct {
        const char *what;
        size_t keep; /* bytes kept (truncation) */
        long flip;   /* byte to flip, -1 none */
        const char *expect;
    } cases[] = {
        {"truncated", len - 7, -1, "truncated"},
        {"cut in a value", len / 2, -1, "truncated"},
        {"flipped byte", len, value_at, "checksum mismatch"},
        {"bad magic", len, 1, "bad magic"},
        {"empty", 0, -1, "truncated header"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t *copy = malloc(len);
        memcpy(copy, good, len);
        if (cases[i].flip >= 0)
            copy[cases[i].flip] ^= 0x5a;
        write_file(snappath, copy, cases[i].keep);
        free(copy);
        assert_int_equal(open_err(err, sizeof(err), "snapshot", snappath, NULL),
                         TW_ERR);
        print_message("  %s: %s\n", cases[i].what, err);
        assert_non_null(strstr(err, snappath));
        assert_non_null(strstr(err, "offset"));
        assert_non_null(strstr(err, cases[i].expect));
    }
    free(good);
    snap_cleanup();
}

/* ---- settings
 * ---------------------------------------------------------------- */

static void test_settings_errors(void **st)
{
    (void)st;
    char err[512];
    assert_int_equal(
        open_err(err, sizeof(err), "store", "redis", "redis.hots", "x", NULL),
        TW_ERR);
    assert_non_null(strstr(err, "test.yaml:3: state: key 'redis.hots'"));
    assert_int_equal(open_err(err, sizeof(err), "store", "postgres", NULL),
                     TW_ERR);
    assert_non_null(strstr(err, "test.yaml:2"));
    assert_non_null(strstr(err, "postgres"));
    assert_int_equal(open_err(err, sizeof(err), "finished_ttl", "soon", NULL),
                     TW_ERR);
    assert_non_null(strstr(err, "key 'finished_ttl'"));
    assert_int_equal(
        open_err(err, sizeof(err), "store", "redis", "redis.port", "0", NULL),
        TW_ERR);
    assert_non_null(strstr(err, "key 'redis.port'"));
    assert_int_equal(open_err(err, sizeof(err), "store", "redis",
                              "redis.socket", "/x.sock", "redis.host", "h",
                              NULL),
                     TW_ERR);
    assert_non_null(strstr(err, "not both"));
    assert_int_equal(open_err(err, sizeof(err), "store", "redis",
                              "redis.password_env", "TW_TEST_UNSET_VAR_1",
                              NULL),
                     TW_ERR);
    assert_non_null(strstr(err, "TW_TEST_UNSET_VAR_1"));

    /* unconfirmed claims: reported only after a checkpoint could confirm */
    assert_int_equal(open_err(err, sizeof(err), "checkpoint_interval", "10s",
                              "pending_after", "5s", NULL),
                     TW_ERR);
    assert_non_null(strstr(err, "test.yaml:3: state: key 'pending_after'"));
    assert_non_null(strstr(err, "longer than checkpoint_interval"));

    tw_store *s =
        open_kv("checkpoint_interval", "250ms", "finished_ttl", "1.5d",
                "pending_check", "2s", "pending_after", "90s", NULL);
    assert_int_equal(tw_store_checkpoint_interval_us(s), 250000);
    assert_int_equal(tw_store_finished_ttl_s(s), 129600);
    assert_int_equal(tw_store_pending_check_us(s), 2000000);
    assert_int_equal(tw_store_pending_after_us(s), 90000000);
    tw_store_close(s);
    s = open_kv("store", "memory", NULL);
    assert_int_equal(tw_store_checkpoint_interval_us(s), 1000000);
    assert_int_equal(tw_store_finished_ttl_s(s), 7 * 86400);
    assert_int_equal(tw_store_pending_check_us(s), 60000000);
    assert_int_equal(tw_store_pending_after_us(s), 300000000);
    tw_store_close(s);
    assert_int_equal(tw_store_open(NULL, &s, err, sizeof(err)), TW_OK);
    assert_string_equal(tw_store_kind(s), "memory");
    tw_store_close(s);
}

/* ---- redis only
 * ---------------------------------------------------------------- */

static void test_redis_auth(void **st)
{
    (void)st;
    static const char secret[] = "s3cret-Pa55-7731";
    static const char wrong[] = "wr0ng-Pa55-4410";
    tw_test_redis r;
    assert_int_equal(tw_test_redis_start(&r, secret, 0), 0);
    char port[16], err[512], pwfile[128];
    snprintf(port, sizeof(port), "%d", r.port);
    snprintf(pwfile, sizeof(pwfile), "%s/pw", r.dir);
    FILE *lf = log_capture();

    /* no password configured */
    assert_int_equal(
        open_err(err, sizeof(err), "store", "redis", "redis.port", port, NULL),
        TW_ERR);
    print_message("  no password: %s\n", err);
    assert_non_null(strstr(err, "NOAUTH"));
    /* a wrong one */
    setenv("TW_TEST_REDIS_PW", wrong, 1);
    assert_int_equal(open_err(err, sizeof(err), "store", "redis", "redis.port",
                              port, "redis.password_env", "TW_TEST_REDIS_PW",
                              NULL),
                     TW_ERR);
    print_message("  wrong password: %s\n", err);
    assert_non_null(strstr(err, "AUTH rejected"));
    assert_null(strstr(err, wrong));
    assert_null(strstr(err, secret));
    /* the right one, from the environment and from a file */
    setenv("TW_TEST_REDIS_PW", secret, 1);
    tw_store *s = open_kv("store", "redis", "redis.port", port,
                          "redis.password_env", "TW_TEST_REDIS_PW", NULL);
    assert_int_equal(tw_store_claim(s, "k", 10, err, sizeof(err)), 1);
    tw_store_close(s);
    FILE *f = fopen(pwfile, "w");
    assert_non_null(f);
    assert_int_equal(fchmod(fileno(f), 0600), 0); /* a secret: private */
    fprintf(f, "%s\n", secret);
    fclose(f);
    s = open_kv("store", "redis", "redis.port", port, "redis.password_file",
                pwfile, NULL);
    assert_int_equal(tw_store_claim(s, "k", 10, err, sizeof(err)), 0);
    /* the password survives a reconnect */
    tw_test_redis_stop(&r, 0);
    assert_int_equal(tw_store_ping(s, err, sizeof(err)), TW_UNAVAILABLE);
    assert_null(strstr(err, secret));
    assert_int_equal(tw_test_redis_spawn(&r), 0);
    double deadline = tw_test_now() + 30;
    while (tw_store_ping(s, err, sizeof(err)) != TW_OK &&
           tw_test_now() < deadline)
        tw_test_sleep_ms(50);
    assert_int_equal(tw_store_ping(s, err, sizeof(err)), TW_OK);
    tw_store_close(s);
    unsetenv("TW_TEST_REDIS_PW");

    char *log = log_release(lf);
    assert_null(strstr(log, secret));
    assert_null(strstr(log, wrong));
    assert_non_null(strstr(log, "connected"));
    free(log);
    tw_test_redis_cleanup(&r);
}

/* A value longer than redis.chunk_bytes is stored as a hash of chunks
 * (Redis refuses a string over proto-max-bulk-len): it reads back equal,
 * SET and chunked PUT replace each other, EXPIRE and DEL reach it. */
static void test_redis_chunked_values(void **st)
{
    (void)st;
    char err[512];
    snprintf(port_str, sizeof(port_str), "%d", shared_redis.port);
    flush_shared();
    tw_store *s = open_kv("store", "redis", "redis.port", port_str,
                          "redis.chunk_bytes", "1024", NULL);
    assert_non_null(s);
    uint8_t big[2500];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 131 + 7); /* every byte value, NULs too */
    redisContext *rc = tw_test_redis_connect(&shared_redis);
    assert_non_null(rc);
    for (int round = 0; round < 2; round++) {
        /* round 1 puts the big value over a small one already there */
        tw_store_txn_begin(s);
        assert_int_equal(tw_store_txn_put(s, "big", big, sizeof(big)), TW_OK);
        assert_int_equal(tw_store_txn_put(s, "small", "abc", 3), TW_OK);
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
        redisReply *rep = redisCommand(rc, "HLEN tw:big");
        assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
        assert_int_equal(rep->integer, 3); /* 1024 + 1024 + 452 bytes */
        freeReplyObject(rep);
        uint8_t *d;
        size_t n;
        assert_int_equal(tw_store_get(s, "big", &d, &n, err, sizeof(err)), 1);
        assert_int_equal(n, sizeof(big));
        assert_memory_equal(d, big, sizeof(big));
        free(d);
        /* a short value replaces the chunks with a plain string */
        tw_store_txn_begin(s);
        assert_int_equal(tw_store_txn_put(s, "big", "short", 5), TW_OK);
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
        assert_int_equal(tw_store_get(s, "big", &d, &n, err, sizeof(err)), 1);
        assert_int_equal(n, 5);
        assert_memory_equal(d, "short", 5);
        free(d);
    }
    /* exactly chunk_bytes stays a string; one more byte is two chunks */
    tw_store_txn_begin(s);
    tw_store_txn_put(s, "edge", big, 1024);
    tw_store_txn_put(s, "edge1", big, 1025);
    assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
    redisReply *rep = redisCommand(rc, "TYPE tw:edge");
    assert_string_equal(rep->str, "string");
    freeReplyObject(rep);
    rep = redisCommand(rc, "HLEN tw:edge1");
    assert_int_equal(rep->integer, 2);
    freeReplyObject(rep);
    /* EXPIRE and DEL reach a chunked value */
    tw_store_txn_begin(s);
    tw_store_txn_put(s, "big", big, sizeof(big));
    tw_store_txn_expire(s, "big", 100);
    tw_store_txn_del(s, "edge1");
    assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
    int64_t ttl;
    assert_int_equal(tw_store_ttl(s, "big", &ttl, err, sizeof(err)), 1);
    assert_true(ttl > 90000 && ttl <= 100000);
    uint8_t *d;
    size_t n;
    assert_int_equal(tw_store_get(s, "edge1", &d, &n, err, sizeof(err)), 0);
    /* a chunk lost behind the store's back is an error naming the key */
    rep = redisCommand(rc, "HDEL tw:big 1");
    freeReplyObject(rep);
    assert_int_equal(tw_store_get(s, "big", &d, &n, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "'big'"));
    assert_non_null(strstr(err, "chunk"));
    redisFree(rc);
    tw_store_close(s);
    /* the setting's bounds */
    assert_int_equal(open_err(err, sizeof(err), "store", "redis", "redis.port",
                              port_str, "redis.chunk_bytes", "10", NULL),
                     TW_ERR);
    assert_non_null(strstr(err, "redis.chunk_bytes"));
}

/* What tw_store_get_many handed over: "key=value," per call ("key=-,"
 * when absent), up to stop_at calls (then it returns 7). */
typedef struct many_seen {
    const char *const *keys;
    char text[8192];
    size_t calls, stop_at;
} many_seen;

static int many_collect(void *ud, size_t i, const uint8_t *data, size_t len)
{
    many_seen *m = ud;
    size_t at = strlen(m->text);
    char val[3000];
    if (data == NULL) {
        snprintf(val, sizeof(val), "-");
    } else {
        /* long values by length and a checksum: the text stays short */
        unsigned sum = 0;
        for (size_t k = 0; k < len; k++)
            sum = sum * 31 + data[k];
        if (len > 64)
            snprintf(val, sizeof(val), "%zu:%u", len, sum);
        else
            snprintf(val, sizeof(val), "%.*s", (int)len, (const char *)data);
        assert_int_equal(data[len], 0); /* NUL-terminated */
    }
    snprintf(m->text + at, sizeof(m->text) - at, "%s=%s,", m->keys[i], val);
    m->calls++;
    return m->calls == m->stop_at ? 7 : 0;
}

/* Values in the keys' order (more keys than GETs in flight), absent keys,
 * a value stored in chunks among them (Redis: its HGETs must not mix with
 * the GETs in flight), a walk stopped early, and the store still in step
 * afterwards. */
static void test_get_many(void **st)
{
    (void)st;
    char err[512];
    uint8_t big[2500];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 131 + 7);
    unsigned bigsum = 0;
    for (size_t k = 0; k < sizeof(big); k++)
        bigsum = bigsum * 31 + big[k];
    for (int k = 0; k < 2; k++) {
        print_message("  store %s\n", kind_name(k));
        tw_store *s;
        if (k == 0) {
            s = open_kind(0);
        } else {
            snprintf(port_str, sizeof(port_str), "%d", shared_redis.port);
            flush_shared();
            s = open_kv("store", "redis", "redis.port", port_str,
                        "redis.chunk_bytes", "1024", NULL);
        }
        assert_non_null(s);
        tw_store_txn_begin(s);
        const char *names[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6"};
        for (size_t i = 0; i < 7; i++)
            if (i != 2)
                tw_store_txn_put(s, names[i], names[i], 2);
        tw_store_txn_put(s, "big", big, sizeof(big));
        tw_store_txn_sadd(s, "aset", "m");
        assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_OK);
        const char *keys[] = {"k0", "k1",  "k2", "big", "k3",
                              "k4", "big", "k5", "k6"};
        many_seen m = {.keys = keys};
        assert_int_equal(
            tw_store_get_many(s, keys, 9, many_collect, &m, err, sizeof(err)),
            TW_OK);
        char want[512];
        snprintf(want, sizeof(want),
                 "k0=k0,k1=k1,k2=-,big=2500:%u,k3=k3,k4=k4,big=2500:%u,"
                 "k5=k5,k6=k6,",
                 bigsum, bigsum);
        assert_string_equal(m.text, want);
        /* stopped at the second value: its return value comes back, and
         * what was in flight does not leak into the next read */
        many_seen m2 = {.keys = keys, .stop_at = 2};
        assert_int_equal(
            tw_store_get_many(s, keys, 9, many_collect, &m2, err, sizeof(err)),
            7);
        assert_string_equal(m2.text, "k0=k0,k1=k1,");
        uint8_t *d;
        size_t n;
        assert_int_equal(tw_store_get(s, "k6", &d, &n, err, sizeof(err)), 1);
        assert_string_equal((char *)d, "k6");
        free(d);
        /* stopped at the value in chunks, with GETs behind it in flight */
        many_seen m3 = {.keys = keys, .stop_at = 4};
        assert_int_equal(
            tw_store_get_many(s, keys, 9, many_collect, &m3, err, sizeof(err)),
            7);
        assert_int_equal(tw_store_get(s, "k5", &d, &n, err, sizeof(err)), 1);
        assert_string_equal((char *)d, "k5");
        free(d);
        /* a set where a value should be: an error naming the key */
        const char *bad[] = {"k0", "aset", "k1"};
        many_seen m4 = {.keys = bad};
        assert_int_equal(
            tw_store_get_many(s, bad, 3, many_collect, &m4, err, sizeof(err)),
            TW_ERR);
        assert_non_null(strstr(err, "aset"));
        assert_int_equal(tw_store_get(s, "k1", &d, &n, err, sizeof(err)), 1);
        assert_string_equal((char *)d, "k1");
        free(d);
        /* nothing asked, nothing called */
        many_seen m5 = {.keys = keys};
        assert_int_equal(
            tw_store_get_many(s, keys, 0, many_collect, &m5, err, sizeof(err)),
            TW_OK);
        assert_int_equal(m5.calls, 0);
        tw_store_close(s);
    }
}

static void test_redis_db_prefix(void **st)
{
    (void)st;
    char err[512];
    snprintf(port_str, sizeof(port_str), "%d", shared_redis.port);
    flush_shared();
    tw_store *a = open_kv("store", "redis", "redis.port", port_str, NULL);
    tw_store *b = open_kv("store", "redis", "redis.port", port_str,
                          "redis.prefix", "other:", NULL);
    tw_store *c = open_kv("store", "redis", "redis.port", port_str, "redis.db",
                          "3", NULL);
    tw_store *u = open_kv("store", "redis", "redis.socket", shared_redis.socket,
                          "redis.db", "3", NULL);
    tw_store *all[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        char v[8];
        snprintf(v, sizeof(v), "v%d", i);
        tw_store_txn_begin(all[i]);
        tw_store_txn_put(all[i], "k", v, strlen(v));
        assert_int_equal(tw_store_txn_commit(all[i], err, sizeof(err)), TW_OK);
    }
    for (int i = 0; i < 3; i++) {
        uint8_t *d;
        size_t n;
        assert_int_equal(tw_store_get(all[i], "k", &d, &n, err, sizeof(err)),
                         1);
        char v[8];
        snprintf(v, sizeof(v), "v%d", i);
        assert_string_equal((char *)d, v);
        free(d);
    }
    /* the unix socket reaches the same server (db 3) */
    uint8_t *d;
    size_t n;
    assert_int_equal(tw_store_get(u, "k", &d, &n, err, sizeof(err)), 1);
    assert_string_equal((char *)d, "v2");
    free(d);
    /* the raw keys, as Redis has them */
    redisContext *rc = tw_test_redis_connect(&shared_redis);
    assert_non_null(rc);
    redisReply *rep = redisCommand(rc, "GET tw:k");
    assert_string_equal(rep->str, "v0");
    freeReplyObject(rep);
    rep = redisCommand(rc, "GET other:k");
    assert_string_equal(rep->str, "v1");
    freeReplyObject(rep);
    rep = redisCommand(rc, "DBSIZE");
    assert_int_equal(rep->integer, 2);
    freeReplyObject(rep);
    rep = redisCommand(rc, "SELECT 3");
    freeReplyObject(rep);
    rep = redisCommand(rc, "GET tw:k");
    assert_string_equal(rep->str, "v2");
    freeReplyObject(rep);
    redisFree(rc);
    /* a db Redis does not have */
    assert_int_equal(open_err(err, sizeof(err), "store", "redis", "redis.port",
                              port_str, "redis.db", "999", NULL),
                     TW_ERR);
    assert_non_null(strstr(err, "SELECT"));
    for (int i = 0; i < 3; i++)
        tw_store_close(all[i]);
    tw_store_close(u);
}

static void checkpoint_one(tw_store *s, const char *job, int64_t offset,
                           int expect)
{
    char err[512];
    uint8_t data[2048];
    size_t n = part_data(job, "core", 0, data);
    tw_checkpoint_part p = {job, "core", data, n};
    int rc = tw_checkpoint_commit(s, "m", 0, offset, &p, 1, NULL, 0, err,
                                  sizeof(err));
    if (rc != expect)
        fail_msg("checkpoint %lld: rc %d, want %d: %s", (long long)offset, rc,
                 expect, err);
}

/* Redis killed and restarted on the same port: calls fail fast with
 * TW_UNAVAILABLE, nothing half-written, one log line per state change, and
 * the store comes back by itself with what was committed before. */
static void test_redis_outage(void **st)
{
    (void)st;
    tw_test_redis r;
    assert_int_equal(tw_test_redis_start(&r, NULL, 1), 0);
    char port[16], err[512];
    snprintf(port, sizeof(port), "%d", r.port);
    FILE *lf = log_capture();
    tw_store *s =
        open_kv("store", "redis", "redis.port", port, "redis.retry_initial",
                "20ms", "redis.retry_max", "300ms", NULL);
    checkpoint_one(s, "job-1", 10, TW_OK);

    tw_test_redis_stop(&r, 1); /* SIGKILL: a crash */
    /* a big write into the dead connection: EPIPE, not a SIGPIPE death */
    size_t big = 16u << 20;
    char *blob = calloc(1, big);
    tw_store_txn_begin(s);
    tw_store_txn_put(s, "big", blob, big);
    assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_UNAVAILABLE);
    free(blob);
    checkpoint_one(s, "job-2", 20, TW_UNAVAILABLE);
    int unavailable = 0;
    double until = tw_test_now() + 1.5; /* several backoff rounds */
    while (tw_test_now() < until) {
        unavailable += tw_store_ping(s, err, sizeof(err)) == TW_UNAVAILABLE;
        assert_true(tw_store_retry_in_ms(s) <= 300);
        tw_test_sleep_ms(10);
    }
    assert_true(unavailable > 5);
    uint8_t *d;
    size_t n;
    assert_int_equal(tw_store_get(s, "x", &d, &n, err, sizeof(err)),
                     TW_UNAVAILABLE);
    print_message("  while down: %s\n", err);

    assert_int_equal(tw_test_redis_spawn(&r), 0);
    double deadline = tw_test_now() + 30;
    while (tw_store_ping(s, err, sizeof(err)) != TW_OK &&
           tw_test_now() < deadline)
        tw_test_sleep_ms(20);
    assert_int_equal(tw_store_ping(s, err, sizeof(err)), TW_OK);

    /* the failed checkpoint left nothing; the first survived the restart */
    loaded l = {0};
    int64_t off;
    assert_int_equal(
        tw_checkpoint_load(s, "m", 0, &off, on_part, &l, err, sizeof(err)),
        TW_OK);
    assert_int_equal(off, 10);
    assert_string_equal(l.order, "job-1/core;");
    /* the same checkpoint again, now accepted */
    checkpoint_one(s, "job-2", 20, TW_OK);
    memset(&l, 0, sizeof(l));
    assert_int_equal(
        tw_checkpoint_load(s, "m", 0, &off, on_part, &l, err, sizeof(err)),
        TW_OK);
    assert_int_equal(off, 20);
    assert_string_equal(l.order, "job-1/core;job-2/core;");
    assert_int_equal(l.mismatches, 0);
    tw_store_close(s);

    char *log = log_release(lf);
    print_message("%s", log);
    assert_int_equal(count_lines_with(log, "unavailable"), 1);
    assert_int_equal(count_lines_with(log, "available again"), 1);
    free(log);
    tw_test_redis_cleanup(&r);
}

/* Nothing listening at open: the store opens down and says so. */
static void test_redis_unreachable(void **st)
{
    (void)st;
    char port[16], err[512];
    snprintf(port, sizeof(port), "%d", tw_test_free_port());
    FILE *lf = log_capture();
    tw_store *s =
        open_kv("store", "redis", "redis.port", port, "redis.retry_initial",
                "10ms", "redis.retry_max", "20ms", NULL);
    assert_int_equal(tw_store_ping(s, err, sizeof(err)), TW_UNAVAILABLE);
    assert_non_null(strstr(err, port));
    assert_int_equal(tw_store_claim(s, "a", 5, err, sizeof(err)),
                     TW_UNAVAILABLE);
    tw_store_txn_begin(s);
    tw_store_txn_put(s, "a", "b", 1);
    assert_int_equal(tw_store_txn_commit(s, err, sizeof(err)), TW_UNAVAILABLE);
    tw_store_close(s);
    char *log = log_release(lf);
    assert_int_equal(count_lines_with(log, "unavailable"), 1);
    free(log);
}

static int group_setup(void **st)
{
    (void)st;
    return tw_test_redis_start(&shared_redis, NULL, 0);
}

static int group_teardown(void **st)
{
    (void)st;
    tw_test_redis_cleanup(&shared_redis);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_txn_type_error),
        cmocka_unit_test(test_claim),
        cmocka_unit_test(test_claim_pending),
        cmocka_unit_test(test_checkpoint_unconfirmed),
        cmocka_unit_test(test_checkpoint),
        cmocka_unit_test(test_checkpoint_inconsistent),
        cmocka_unit_test(test_snapshot_roundtrip),
        cmocka_unit_test(test_snapshot_corrupt),
        cmocka_unit_test(test_settings_errors),
        cmocka_unit_test(test_redis_auth),
        cmocka_unit_test(test_redis_db_prefix),
        cmocka_unit_test(test_redis_chunked_values),
        cmocka_unit_test(test_get_many),
        cmocka_unit_test(test_redis_outage),
        cmocka_unit_test(test_redis_unreachable),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
