/* test_job_tensors.c - debugging tensors through the job: each tensor in
 * exactly one scan (tick: [start, end), final closed; continuous: (start,
 * end]), ordered by (node, step, name), late and skewed ones counted, a
 * tensor-only job has a clock, and buffered tensors survive a checkpoint
 * so the restored job hands the rules exactly what an uninterrupted one
 * does. Scans are observed through tw_job_on_scan (no rule needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "job.h"

#define S(x) ((int64_t)(x)*1000000LL)

/* What the scans delivered: "k:node:step:name:wall_s:value" lines. */
typedef struct seen {
    char text[8192];
    size_t len;
} seen;

static void on_scan(void *ud, tw_job *job, const tw_scan *scan)
{
    (void)job;
    seen *s = ud;
    for (size_t i = 0; i < scan->ntensors; i++) {
        const tw_tensor *t = &scan->tensors[i];
        double v = t->nreductions ? t->reductions[0].value : -1;
        s->len += (size_t)snprintf(
            s->text + s->len, sizeof(s->text) - s->len,
            "%llu:%s:%lld:%s:%.3f:%g:%u\n", (unsigned long long)scan->index,
            t->node, (long long)t->step, t->name, (double)t->wall_us / 1e6, v,
            t->ncollections ? (unsigned)t->ncollections : 0u);
    }
}

typedef struct spec {
    const char *name;
    int64_t step;
    double wall_s;
    double value;
} spec;

static tw_batch *tensors(const char *node, uint64_t seq, size_t n,
                         const spec *sp)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "job";
    b->node = tw_arena_strdup(&b->arena, node);
    b->seq = seq;
    b->tensors = tw_arena_alloc(&b->arena, (n + 1) * sizeof(tw_tensor));
    assert_non_null(b->tensors);
    for (size_t i = 0; i < n; i++) {
        tw_tensor *t = &b->tensors[i];
        memset(t, 0, sizeof(*t));
        t->node = b->node;
        t->name = tw_arena_strdup(&b->arena, sp[i].name);
        t->step = sp[i].step;
        t->mode = TW_MODE_TRAIN;
        t->mode_step = sp[i].step;
        t->wall_us = (int64_t)(sp[i].wall_s * 1e6);
        t->prev_step = -1;
        t->dtype = "float32";
        t->numel = 1;
        const char **c = tw_arena_alloc(&b->arena, sizeof(char *));
        c[0] = "losses";
        t->collections = c;
        t->ncollections = 1;
        tw_tensor_reduction *r =
            tw_arena_alloc(&b->arena, sizeof(tw_tensor_reduction));
        r->op = "value";
        r->value = sp[i].value;
        t->reductions = r;
        t->nreductions = 1;
    }
    b->ntensors = n;
    return b;
}

static tw_job *job_new(tw_registry *reg, int64_t tick_us, seen *s)
{
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.tick_us = tick_us;
    cfg.lateness_us = 0;
    tw_job *j;
    char err[256];
    if (tw_job_new("job", &cfg, reg, NULL, 0, &j, err, sizeof(err)) != TW_OK)
        fail_msg("%s", err);
    tw_job_on_scan(j, on_scan, s);
    return j;
}

/* The batches every test below feeds, in arrival order. */
static void feed(tw_job *j, int upto)
{
    const spec a1[] = {{"loss", 1, 1010.0, 0.9},
                       {"gradient/Net_fc.weight", 1, 1010.0, 3e-3}};
    const spec b1[] = {{"loss", 0, 1005.0, 1.0}, {"loss", 1, 1011.0, 0.95}};
    const spec a2[] = {{"loss", 2, 1060.0, 0.8}, {"loss", 3, 1119.0, 0.7}};
    const spec a3[] = {{"loss", 4, 1130.0, 0.6}};
    tw_batch *bs[] = {tensors("w1", 1, 2, a1), tensors("w0", 1, 2, b1),
                      tensors("w1", 2, 2, a2), tensors("w1", 3, 1, a3)};
    for (int i = 0; i < 4; i++) {
        if (i < upto)
            assert_int_equal(tw_job_ingest(j, bs[i]), TW_OK);
        else
            tw_batch_free(bs[i]);
    }
}

static const char *want_all = "0:w0:0:loss:1005.000:1:1\n"
                              "0:w0:1:loss:1011.000:0.95:1\n"
                              "0:w1:1:gradient/Net_fc.weight:1010.000:0.003:1\n"
                              "0:w1:1:loss:1010.000:0.9:1\n"
                              "1:w1:2:loss:1060.000:0.8:1\n"
                              "1:w1:3:loss:1119.000:0.7:1\n"
                              "2:w1:4:loss:1130.000:0.6:1\n";

static void test_tick_scans_and_order(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    seen s = {0};
    tw_job *j = job_new(reg, S(60), &s);
    tw_job_set_first_timestamp(j, S(1000));
    feed(j, 4);
    assert_int_equal(tw_job_finish(j, 0), TW_OK);
    /* 1060 is scan 1's start (scan 0 is [1000, 1060)); the last scan is
     * the job's final one */
    assert_string_equal(s.text, want_all);
    tw_job_stats js;
    tw_job_get_stats(j, &js);
    assert_int_equal(js.tensors, 7);
    assert_int_equal(js.late_tensors, 0);
    tw_job_free(j);
    tw_registry_free(reg);
}

static void test_late_and_skewed(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    seen s = {0};
    tw_job *j = job_new(reg, S(60), &s);
    tw_job_set_first_timestamp(j, S(1000));
    feed(j, 3); /* w0 holds the watermark at 1011 until ... */
    const spec late_w0[] = {{"loss", 9, 1130.0, 0.5}};
    assert_int_equal(tw_job_ingest(j, tensors("w0", 2, 1, late_w0)), TW_OK);
    /* ... w0 reaches 1130: scan 0 [1000, 1060) closed */
    assert_true(strstr(s.text, "0:w1:1:loss") != NULL);
    const spec late[] = {{"loss", 1, 1030.0, 0.5}, {"loss", 7, 5e9, 0.1}};
    assert_int_equal(tw_job_ingest(j, tensors("w1", 9, 2, late)), TW_OK);
    tw_job_stats js;
    tw_job_get_stats(j, &js);
    assert_int_equal(js.late_tensors, 1);   /* 1030 s: scan 0 had closed */
    assert_int_equal(js.skewed_tensors, 1); /* year 2128: beyond the bound */
    tw_job_free(j);
    tw_registry_free(reg);
}

static void test_continuous_each_once(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    seen s = {0};
    tw_job *j = job_new(reg, 0, &s);
    feed(j, 4);
    assert_int_equal(tw_job_finish(j, 0), TW_OK);
    /* every tensor at most once; the missing ones counted late (w0's
     * first batch arrives after w1 closed (1010, ...] without lateness) */
    const char *names[] = {
        ":w0:0:loss:", ":w0:1:loss:", ":w1:1:loss:", ":w1:1:gradient/",
        ":w1:2:loss:", ":w1:3:loss:", ":w1:4:loss:"};
    size_t delivered = 0;
    for (size_t i = 0; i < 7; i++) {
        const char *p = strstr(s.text, names[i]);
        if (p == NULL)
            continue;
        delivered++;
        assert_null(strstr(p + 1, names[i]));
    }
    tw_job_stats js;
    tw_job_get_stats(j, &js);
    assert_int_equal(js.late_tensors, 1); /* w0 step 0 at 1005 s */
    assert_int_equal(delivered, 6);
    assert_int_equal(js.tensors, 6);
    assert_null(strstr(s.text, ":w0:0:loss:"));
    tw_job_free(j);
    tw_registry_free(reg);
}

/* Checkpoint parts captured by tw_job_save. */
typedef struct parts {
    void *core;
    size_t core_len;
} parts;

static int keep_part(void *ud, const char *part, const void *data, size_t len)
{
    parts *p = ud;
    if (strcmp(part, "core") == 0) {
        p->core = malloc(len);
        memcpy(p->core, data, len);
        p->core_len = len;
    }
    return TW_OK;
}

static void test_checkpoint_restores_buffered_tensors(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    /* uninterrupted */
    seen whole = {0};
    tw_job *j = job_new(reg, S(60), &whole);
    tw_job_set_first_timestamp(j, S(1000));
    feed(j, 4);
    assert_int_equal(tw_job_finish(j, 0), TW_OK);
    tw_job_free(j);

    /* saved after two batches (tensors buffered, no scan closed yet),
     * restored into a fresh job that gets the rest */
    seen before = {0}, after = {0};
    j = job_new(reg, S(60), &before);
    tw_job_set_first_timestamp(j, S(1000));
    feed(j, 2);
    parts p = {0};
    char err[256];
    assert_int_equal(tw_job_save(j, 0, keep_part, &p, err, sizeof(err)), TW_OK);
    tw_job_stats js;
    tw_job_get_stats(j, &js);
    assert_true(js.buffered_batches > 0);
    tw_job_free(j);
    j = job_new(reg, S(60), &after);
    if (tw_job_restore_part(j, "core", p.core, p.core_len, err, sizeof(err)) !=
        TW_OK)
        fail_msg("%s", err);
    tw_job_get_stats(j, &js);
    assert_int_equal(js.tensors, 4);
    const spec a2[] = {{"loss", 2, 1060.0, 0.8}, {"loss", 3, 1119.0, 0.7}};
    const spec a3[] = {{"loss", 4, 1130.0, 0.6}};
    assert_int_equal(tw_job_ingest(j, tensors("w1", 2, 2, a2)), TW_OK);
    assert_int_equal(tw_job_ingest(j, tensors("w1", 3, 1, a3)), TW_OK);
    assert_int_equal(tw_job_finish(j, 0), TW_OK);
    char joined[16384];
    snprintf(joined, sizeof(joined), "%s%s", before.text, after.text);
    assert_string_equal(joined, whole.text);
    assert_string_equal(whole.text, want_all);

    tw_job_free(j);
    free(p.core);
    tw_registry_free(reg);
}

/* Header length and CRC rewritten after a change (job_state.c layout). */
static void reseal(uint8_t *d, size_t len)
{
    uint64_t n = len - 20;
    for (int i = 0; i < 8; i++)
        d[8 + i] = (uint8_t)(n >> (8 * i));
    uint32_t crc = (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), d + 20, n);
    for (int i = 0; i < 4; i++)
        d[16 + i] = (uint8_t)(crc >> (8 * i));
}

/* A core part holding buffered tensors, cut short or with a byte changed
 * and resealed: refused naming the part, or accepted; never a crash (the
 * check pass reads the whole blob before the job changes). */
static void test_corrupt_tensor_checkpoint(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    seen s = {0};
    tw_job *j = job_new(reg, S(60), &s);
    tw_job_set_first_timestamp(j, S(1000));
    feed(j, 2);
    parts p = {0};
    char err[256];
    assert_int_equal(tw_job_save(j, 0, keep_part, &p, err, sizeof(err)), TW_OK);
    tw_job_free(j);
    uint8_t *buf = malloc(p.core_len);
    size_t refused = 0, tried = 0;
    for (size_t at = 20; at < p.core_len; at++) {
        for (int cut = 0; cut < 2; cut++) {
            memcpy(buf, p.core, p.core_len);
            size_t len = p.core_len;
            if (cut)
                len = at;
            else
                buf[at] ^= 0x5a;
            if (len < 20)
                continue;
            reseal(buf, len);
            seen x = {0};
            j = job_new(reg, S(60), &x);
            tried++;
            if (tw_job_restore_part(j, "core", buf, len, err, sizeof(err)) !=
                TW_OK) {
                refused++;
                assert_non_null(strstr(err, "'core'"));
            } else {
                assert_int_equal(tw_job_finish(j, 0), TW_OK);
            }
            tw_job_free(j);
        }
    }
    assert_true(refused > tried / 2); /* every cut is refused at least */
    free(buf);
    free(p.core);
    tw_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tick_scans_and_order),
        cmocka_unit_test(test_late_and_skewed),
        cmocka_unit_test(test_continuous_each_once),
        cmocka_unit_test(test_checkpoint_restores_buffered_tensors),
        cmocka_unit_test(test_corrupt_tensor_checkpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
