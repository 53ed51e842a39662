/* test_wire.c - the FlatBuffers wire codec (engine/io/wire.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_wire_helpers.h"
#include "wire.h"

/* ------------------------------------------------------------------ */
/* Fixtures                                                            */

static void *arena_copy(tw_batch *b, const void *src, size_t n)
{
    void *p = tw_arena_alloc(&b->arena, n);
    assert_non_null(p);
    memcpy(p, src, n);
    return p;
}

static const char *S(tw_batch *b, const char *s)
{
    const char *p = tw_arena_strdup(&b->arena, s);
    assert_non_null(p);
    return p;
}

/* One of everything the wire carries. */
static tw_batch *full_batch(void)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = S(b, "job-1");
    b->node = S(b, "algo-1");
    b->seq = 0xfedcba9876543210ull;
    b->file_ts_us = 1596668400000000;
    b->file_path = S(b, "system/incremental/2020080623/1596668400.algo-1.json");

    const tw_batch_series series[] = {
        {S(b, "cpu"), S(b, "cpu0"), S(b, "CPUUtilization")},
        {S(b, "gpu"), S(b, "gpu0"), S(b, "GPUUtilization")},
        {S(b, "memory"), NULL, S(b, "MemoryUsedPercent")},
        {S(b, "i/o"), S(b, "nvme0"), S(b, "")},
    };
    b->series = arena_copy(b, series, sizeof(series));
    b->nseries = 4;

    const tw_sample samples[] = {
        {1591748109.2321954, 51.1, 0, 0},
        {1591748109.2331020, 41.0, 1, TW_SAMPLE_INTEGRAL},
        {1591748109.2331020, -0.0, 2, TW_SAMPLE_REPEAT},
        {1591748110.0, 1e308, 3, TW_SAMPLE_INTEGRAL | TW_SAMPLE_REPEAT},
        {0.0, -123.456, 3, 0xffffffffu},
    };
    b->samples = arena_copy(b, samples, sizeof(samples));
    b->nsamples = 5;

    const tw_arg args[] = {
        {S(b, "name"), S(b, "conv2d"), TW_ARG_STRING},
        {S(b, "step_num"), S(b, "17"), TW_ARG_NUMBER},
        {S(b, "is_training"), S(b, "true"), TW_ARG_BOOL},
        {S(b, "parent"), S(b, "null"), TW_ARG_NULL},
        {S(b, "shape"), S(b, "[1,{\"a\":2}]"), TW_ARG_JSON},
    };
    const tw_arg *argp = arena_copy(b, args, sizeof(args));
    /* has_args with zero args must stay distinct from "no args". */
    const tw_arg *empty = tw_arena_alloc(&b->arena, sizeof(tw_arg));
    assert_non_null(empty);

    const tw_fw_event events[] = {
        {S(b, "Step:ModeKeys.TRAIN"), S(b, "Step:ModeKeys.TRAIN"), b->node,
         1596668220000001, 1596668220400002, 4242, -1, TW_SOURCE_PYTHONTIMELINE,
         TW_MODE_TRAIN, argp, 5, 0},
        {S(b, "Step:ModeKeys.EVAL"), S(b, "Unknown"), b->node, -5, 0, INT64_MAX,
         INT64_MIN, TW_SOURCE_MODEL_TIMELINE, TW_MODE_EVAL, empty, 0, 0},
        {S(b, "MatMul"), S(b, "GPU"), NULL, 10, 20, 1, 2, TW_SOURCE_TF_PROFILER,
         TW_MODE_PREDICT, NULL, 0, 0},
        {S(b, "allreduce"), S(b, ""), b->node, 30, 40, 3, 4, TW_SOURCE_HOROVOD,
         TW_MODE_GLOBAL, argp + 1, 1, 0},
        {S(b, "AllReduce"), S(b, "NCCL"), b->node, 50, 60, 5, 6,
         TW_SOURCE_SMDATAPARALLEL, TW_MODE_NONE, NULL, 0, 0},
    };
    b->events = arena_copy(b, events, sizeof(events));
    b->nevents = 5;

    const tw_marker markers[] = {
        {TW_MARKER_JOB_START, 1596668220000000, 500, 0,
         S(b, "{\"system_monitor_interval_millis\":500}")},
        {TW_MARKER_JOB_END, 1596668460000000, 0, 1596668400000000, NULL},
        {TW_MARKER_NONE, -1, UINT32_MAX, INT64_MIN, NULL},
    };
    b->markers = arena_copy(b, markers, sizeof(markers));
    b->nmarkers = 3;
    return b;
}

static void assert_str_or_null(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

/* Doubles compare by bits so -0.0 and NaN round trips are exact. */
static void assert_same_double(double a, double b)
{
    assert_memory_equal(&a, &b, sizeof(a));
}

/* `got` is a decoded batch: its events point at its own node. */
static void assert_batch_equal(const tw_batch *want, const tw_batch *got)
{
    assert_string_equal(want->job, got->job);
    assert_string_equal(want->node, got->node);
    assert_true(want->seq == got->seq);
    assert_true(want->file_ts_us == got->file_ts_us);
    assert_str_or_null(want->file_path, got->file_path);

    assert_int_equal(want->nseries, got->nseries);
    for (size_t i = 0; i < want->nseries; i++) {
        assert_string_equal(want->series[i].type, got->series[i].type);
        assert_str_or_null(want->series[i].name, got->series[i].name);
        assert_string_equal(want->series[i].dimension,
                            got->series[i].dimension);
    }
    assert_int_equal(want->nsamples, got->nsamples);
    for (size_t i = 0; i < want->nsamples; i++) {
        assert_same_double(want->samples[i].ts, got->samples[i].ts);
        assert_same_double(want->samples[i].value, got->samples[i].value);
        assert_int_equal(want->samples[i].series, got->samples[i].series);
        assert_int_equal(want->samples[i].flags, got->samples[i].flags);
    }
    assert_int_equal(want->nevents, got->nevents);
    for (size_t i = 0; i < want->nevents; i++) {
        const tw_fw_event *w = &want->events[i], *g = &got->events[i];
        assert_string_equal(w->name, g->name);
        assert_string_equal(w->phase, g->phase);
        assert_ptr_equal(g->node, got->node);
        assert_true(w->start_us == g->start_us);
        assert_true(w->end_us == g->end_us);
        assert_true(w->pid == g->pid);
        assert_true(w->tid == g->tid);
        assert_int_equal(w->source, g->source);
        assert_int_equal(w->mode, g->mode);
        assert_int_equal(g->flags, 0);
        if (w->args == NULL) {
            assert_null(g->args);
            assert_int_equal(g->nargs, 0);
            continue;
        }
        assert_non_null(g->args);
        assert_int_equal(w->nargs, g->nargs);
        for (uint32_t j = 0; j < w->nargs; j++) {
            assert_string_equal(w->args[j].key, g->args[j].key);
            assert_string_equal(w->args[j].value, g->args[j].value);
            assert_int_equal(w->args[j].kind, g->args[j].kind);
        }
    }
    assert_int_equal(want->nmarkers, got->nmarkers);
    for (size_t i = 0; i < want->nmarkers; i++) {
        assert_int_equal(want->markers[i].kind, got->markers[i].kind);
        assert_true(want->markers[i].time_us == got->markers[i].time_us);
        assert_int_equal(want->markers[i].sampling_interval_ms,
                         got->markers[i].sampling_interval_ms);
        assert_true(want->markers[i].latest_us == got->markers[i].latest_us);
        if (want->markers[i].profiler_config == NULL)
            assert_null(got->markers[i].profiler_config);
        else
            assert_string_equal(want->markers[i].profiler_config,
                                got->markers[i].profiler_config);
    }
}

static void encode_ok(const tw_batch *b, uint8_t **buf, size_t *len)
{
    assert_int_equal(tw_wire_encode(b, buf, len), TW_WIRE_OK);
    assert_non_null(*buf);
    assert_true(*len > 0);
}

static tw_batch *decode_ok(const uint8_t *buf, size_t len)
{
    char err[256] = "";
    tw_batch *out = NULL;
    tw_wire_status st = tw_wire_decode(buf, len, &out, err, sizeof(err));
    if (st != TW_WIRE_OK)
        fail_msg("decode: %s: %s", tw_wire_status_name(st), err);
    assert_non_null(out);
    assert_string_equal(err, "");
    return out;
}

/* Decodes a buffer that must be refused with `want`; returns the message
 * (static storage) so callers can check what it names. */
static const char *decode_fails(const uint8_t *buf, size_t len,
                                tw_wire_status want)
{
    static char err[512];
    tw_batch *out = (tw_batch *)(uintptr_t)1; /* must be overwritten */
    err[0] = '\0';
    tw_wire_status st = tw_wire_decode(buf, len, &out, err, sizeof(err));
    if (st != want)
        fail_msg("want %s, got %s (%s)", tw_wire_status_name(want),
                 tw_wire_status_name(st), err);
    assert_null(out);
    assert_true(strlen(err) > 0);
    return err;
}

static void assert_contains(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) == NULL)
        fail_msg("\"%s\" does not mention \"%s\"", haystack, needle);
}

/* xorshift64*: reproducible bytes for the random tests. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* ------------------------------------------------------------------ */
/* Round trips                                                         */

static void test_round_trip_every_field(void **state)
{
    (void)state;
    tw_batch *b = full_batch();
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    tw_batch *got = decode_ok(buf, len);
    free(buf); /* the decoded batch must not point into the buffer */
    assert_batch_equal(b, got);
    /* strings live in the decoded batch's arena, not the source's */
    assert_ptr_not_equal(got->job, b->job);

    /* and once more from the decoded batch */
    encode_ok(got, &buf, &len);
    tw_batch *again = decode_ok(buf, len);
    assert_batch_equal(b, again);
    free(buf);
    tw_batch_free(again);
    tw_batch_free(got);
    tw_batch_free(b);
}

static void test_round_trip_minimal(void **state)
{
    (void)state;
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "j";
    b->node = "n";
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    tw_batch *got = decode_ok(buf, len);
    assert_batch_equal(b, got);
    assert_null(got->file_path);
    assert_null(got->series);
    assert_null(got->samples);
    assert_null(got->events);
    assert_null(got->markers);
    free(buf);
    tw_batch_free(got);
    tw_batch_free(b);
}

static void test_version_is_stored(void **state)
{
    (void)state;
    tw_batch *b = full_batch();
    uint8_t *buf;
    size_t len;
    unsigned version = 0;
    encode_ok(b, &buf, &len);
    /* explicitly, so a later default bump cannot reinterpret it */
    assert_int_equal(twt_stored_version(buf, len, &version), 1);
    assert_int_equal(version, 1);
    free(buf);
    tw_batch_free(b);
}

/* One round of a 96-core, 8-GPU agent (214 series, a sample each): the
 * decoded batch holds about its message's size, not a 64 KB block (a job
 * buffers hundreds of such batches per node). */
static void test_decoded_arena_fits_message(void **state)
{
    (void)state;
    enum { NSERIES = 214 };
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "job";
    b->node = "algo-1";
    b->seq = 1;
    tw_batch_series *series =
        tw_arena_alloc(&b->arena, NSERIES * sizeof(*series));
    tw_sample *samples = tw_arena_alloc(&b->arena, NSERIES * sizeof(*samples));
    assert_non_null(series);
    assert_non_null(samples);
    for (int i = 0; i < NSERIES; i++) {
        char name[16];
        snprintf(name, sizeof(name), "cpu%d", i / 2);
        series[i] = (tw_batch_series){
            "cpu", S(b, name), i % 2 ? "I/OWaitPercentage" : "CPUUtilization"};
        samples[i] = (tw_sample){
            .ts = 1700000000.5, .value = 35.0 + i % 10, .series = (uint32_t)i};
    }
    b->series = series;
    b->nseries = NSERIES;
    b->samples = samples;
    b->nsamples = NSERIES;
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    tw_batch *got = decode_ok(buf, len);
    assert_batch_equal(b, got);
    /* one block, sized by the message */
    assert_true(tw_arena_capacity(&got->arena) <= len + len / 2 + 256);
    assert_true(got->arena.total <= tw_arena_capacity(&got->arena));
    assert_true(tw_arena_capacity(&got->arena) < 64 * 1024);
    free(buf);
    tw_batch_free(got);
    tw_batch_free(b);

    /* a reserve only shapes an empty arena; allocations past it go on */
    tw_arena a;
    tw_arena_init(&a);
    assert_int_equal(tw_arena_reserve(&a, 100), 0);
    assert_int_equal(tw_arena_capacity(&a), 112);
    assert_non_null(tw_arena_alloc(&a, 100));
    assert_int_equal(tw_arena_reserve(&a, 1000), 0);
    assert_int_equal(tw_arena_capacity(&a), 112);
    assert_non_null(tw_arena_alloc(&a, 100));
    assert_int_equal(tw_arena_capacity(&a), 112 + 64 * 1024);
    tw_arena_free(&a);
}

static void test_large_batch(void **state)
{
    (void)state;
    enum { NSAMPLES = 100000, NSERIES = 16 };
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "big";
    b->node = "algo-1";
    b->seq = 7;
    tw_batch_series *series =
        tw_arena_alloc(&b->arena, NSERIES * sizeof(*series));
    assert_non_null(series);
    for (int i = 0; i < NSERIES; i++) {
        char name[16];
        snprintf(name, sizeof(name), "cpu%d", i);
        series[i].type = "cpu";
        series[i].name = S(b, name);
        series[i].dimension = "CPUUtilization";
    }
    tw_sample *samples = tw_arena_alloc(&b->arena, NSAMPLES * sizeof(*samples));
    assert_non_null(samples);
    for (uint32_t i = 0; i < NSAMPLES; i++) {
        samples[i].ts = 1591748109.0 + i * 0.0001;
        samples[i].value = (double)(i % 1000) / 7.0;
        samples[i].series = i % NSERIES;
        samples[i].flags = i & 1u;
    }
    b->series = series;
    b->nseries = NSERIES;
    b->samples = samples;
    b->nsamples = NSAMPLES;

    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    assert_true(len >= (size_t)NSAMPLES * 24);
    tw_batch *got = decode_ok(buf, len);
    assert_batch_equal(b, got);
    free(buf);
    tw_batch_free(got);
    tw_batch_free(b);
}

static void test_decode_unaligned(void **state)
{
    (void)state;
    tw_batch *b = full_batch();
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    /* Kafka payloads may start anywhere */
    uint8_t *shifted = malloc(len + 3);
    assert_non_null(shifted);
    for (size_t off = 1; off <= 3; off++) {
        memcpy(shifted + off, buf, len);
        tw_batch *got = decode_ok(shifted + off, len);
        assert_batch_equal(b, got);
        tw_batch_free(got);
    }
    free(shifted);
    free(buf);
    tw_batch_free(b);
}

/* ------------------------------------------------------------------ */
/* Rejections                                                          */

static void test_status_names(void **state)
{
    (void)state;
    static const struct {
        tw_wire_status st;
        const char *name;
    } want[] = {
        {TW_WIRE_OK, "ok"},
        {TW_WIRE_TOO_SHORT, "too_short"},
        {TW_WIRE_BAD_IDENTIFIER, "bad_identifier"},
        {TW_WIRE_VERIFY_FAILED, "verify_failed"},
        {TW_WIRE_MISSING_FIELD, "missing_field"},
        {TW_WIRE_BAD_REFERENCE, "bad_reference"},
        {TW_WIRE_UNSUPPORTED_VERSION, "unsupported_version"},
        {TW_WIRE_NO_MEMORY, "no_memory"},
        {TW_WIRE_BAD_VALUE, "bad_value"},
        {TW_WIRE_ID_TOO_LONG, "id_too_long"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_string_equal(tw_wire_status_name(want[i].st), want[i].name);
    assert_string_equal(tw_wire_status_name((tw_wire_status)99), "unknown");
}

static void test_truncated(void **state)
{
    (void)state;
    tw_batch *b = full_batch();
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);

    /* A copy of exactly t bytes, so ASan sees any read past the end. */
    size_t accepted = 0;
    for (size_t t = 0; t < len; t++) {
        uint8_t *cut = malloc(t == 0 ? 1 : t);
        assert_non_null(cut);
        memcpy(cut, buf, t);
        char err[256];
        tw_batch *out = NULL;
        tw_wire_status st = tw_wire_decode(cut, t, &out, err, sizeof(err));
        if (t < 12) {
            assert_int_equal(st, TW_WIRE_TOO_SHORT);
        } else if (st == TW_WIRE_OK) {
            /* only alignment padding at the very end may go missing */
            assert_true(len - t < 8);
            assert_batch_equal(b, out);
            accepted++;
        } else {
            assert_int_equal(st, TW_WIRE_VERIFY_FAILED);
        }
        if (st != TW_WIRE_OK)
            assert_null(out);
        tw_batch_free(out);
        free(cut);
    }
    assert_true(accepted < 8);

    /* named cut points, each with its message */
    assert_contains(decode_fails(buf, 0, TW_WIRE_TOO_SHORT), "0 bytes");
    assert_contains(decode_fails(buf, 11, TW_WIRE_TOO_SHORT), "11 bytes");
    decode_fails(buf, 12, TW_WIRE_VERIFY_FAILED);
    decode_fails(buf, len / 2, TW_WIRE_VERIFY_FAILED);
    assert_contains(decode_fails(buf, len - 16, TW_WIRE_VERIFY_FAILED),
                    "verification failed: ");
    assert_contains(decode_fails(NULL, 100, TW_WIRE_TOO_SHORT), "shorter");
    free(buf);
    tw_batch_free(b);
}

static void test_bad_identifier(void **state)
{
    (void)state;
    tw_batch *b = full_batch();
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    memcpy(buf + 4, "TWM2", 4);
    assert_contains(decode_fails(buf, len, TW_WIRE_BAD_IDENTIFIER),
                    "\"TWM2\", expected \"TWM1\"");
    memcpy(buf + 4, "\x01\"\\z", 4);
    assert_contains(decode_fails(buf, len, TW_WIRE_BAD_IDENTIFIER),
                    "\"\\x01\\x22\\x5cz\"");
    free(buf);
    tw_batch_free(b);
}

static void test_random_bytes(void **state)
{
    (void)state;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    uint8_t buf[512];
    for (int i = 0; i < 4000; i++) {
        size_t len = rng_next(&seed) % sizeof(buf);
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)rng_next(&seed);
        /* half of them get past the identifier check to reach the verifier */
        if (i % 2 == 1 && len >= 8)
            memcpy(buf + 4, "TWM1", 4);
        char err[256] = "";
        tw_batch *out = NULL;
        tw_wire_status st = tw_wire_decode(buf, len, &out, err, sizeof(err));
        if (st == TW_WIRE_OK) {
            tw_batch_free(out); /* possible in principle; must be sound */
            continue;
        }
        assert_null(out);
        assert_true(strlen(err) > 0);
        if (len < 12)
            assert_int_equal(st, TW_WIRE_TOO_SHORT);
        else if (i % 2 == 0 && memcmp(buf + 4, "TWM1", 4) != 0)
            assert_int_equal(st, TW_WIRE_BAD_IDENTIFIER);
    }
}

/* Bit flips and byte overwrites of a real buffer reach every branch of
 * the verifier and the decoder; whatever the outcome, it must be sound. */
static void test_mutated_buffers(void **state)
{
    (void)state;
    tw_batch *b = full_batch();
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    uint8_t *m = malloc(len);
    assert_non_null(m);
    uint64_t seed = 42;
    int counts[TW_WIRE_ID_TOO_LONG + 1] = {0};
    for (int i = 0; i < 4000; i++) {
        memcpy(m, buf, len);
        int flips = 1 + (int)(rng_next(&seed) % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = 8 + rng_next(&seed) % (len - 8); /* keep the id */
            if (rng_next(&seed) & 1)
                m[at] ^= (uint8_t)(1u << (rng_next(&seed) % 8));
            else
                m[at] = (uint8_t)rng_next(&seed);
        }
        char err[256] = "";
        tw_batch *out = NULL;
        tw_wire_status st = tw_wire_decode(m, len, &out, err, sizeof(err));
        assert_true(st <= TW_WIRE_ID_TOO_LONG);
        counts[st]++;
        if (st == TW_WIRE_OK) {
            /* a decoded batch re-encodes to the same counts */
            uint8_t *again;
            size_t again_len;
            assert_int_equal(tw_wire_encode(out, &again, &again_len),
                             TW_WIRE_OK);
            tw_batch *back = decode_ok(again, again_len);
            assert_batch_equal(out, back);
            tw_batch_free(back);
            free(again);
            tw_batch_free(out);
        } else {
            assert_null(out);
            assert_true(strlen(err) > 0);
        }
    }
    /* the mutations exercised both acceptance and the verifier */
    assert_true(counts[TW_WIRE_OK] > 0);
    assert_true(counts[TW_WIRE_VERIFY_FAILED] > 0);
    free(m);
    free(buf);
    tw_batch_free(b);
}

static void test_vector_length_past_end(void **state)
{
    (void)state;
    tw_batch *b = full_batch();
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    size_t at = twt_samples_length_offset(buf, len);
    assert_true(at > 0 && at + 4 <= len);
    uint32_t n;
    memcpy(&n, buf + at, 4);
    assert_int_equal(n, b->nsamples);

    n = 1000000;
    memcpy(buf + at, &n, 4);
    const char *err = decode_fails(buf, len, TW_WIRE_VERIFY_FAILED);
    assert_contains(err, "verification failed: vector length of 'samples' "
                         "(1000000 elements of 24 bytes");
    char tail[64];
    snprintf(tail, sizeof(tail), "past the end of the %zu-byte buffer", len);
    assert_contains(err, tail);

    /* the smallest count that no longer fits */
    n = (uint32_t)((len - at - 4) / 24 + 1);
    memcpy(buf + at, &n, 4);
    decode_fails(buf, len, TW_WIRE_VERIFY_FAILED);
    free(buf);
    tw_batch_free(b);
}

static void test_missing_required_fields(void **state)
{
    (void)state;
    static const struct {
        twt_case c;
        const char *field;
    } cases[] = {
        {TWT_NO_JOB, "'job'"},
        {TWT_NO_NODE, "'node'"},
        {TWT_NO_SERIES_TYPE, "'series[0].type'"},
        {TWT_NO_SERIES_DIMENSION, "'series[0].dimension'"},
        {TWT_NO_EVENT_NAME, "'events[0].name'"},
        {TWT_NO_EVENT_PHASE, "'events[0].phase'"},
        {TWT_NO_ARG_KEY, "'events[0].args[0].key'"},
        {TWT_NO_ARG_VALUE, "'events[0].args[0].value'"},
    };
    size_t len;
    uint8_t *valid = twt_build(TWT_VALID, &len);
    assert_non_null(valid);
    tw_batch *ok = decode_ok(valid, len);
    tw_batch_free(ok);
    free(valid);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t *buf = twt_build(cases[i].c, &len);
        assert_non_null(buf);
        const char *err = decode_fails(buf, len, TW_WIRE_MISSING_FIELD);
        assert_contains(err, "required field ");
        assert_contains(err, cases[i].field);
        free(buf);
    }

    /* a broken structure outranks a missing field */
    uint8_t *buf = twt_build(TWT_NO_JOB_BAD_SAMPLES, &len);
    assert_non_null(buf);
    assert_contains(decode_fails(buf, len, TW_WIRE_VERIFY_FAILED), "samples");
    free(buf);
}

static void test_bad_reference(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = twt_build(TWT_SERIES_OUT_OF_RANGE, &len);
    assert_non_null(buf);
    assert_contains(decode_fails(buf, len, TW_WIRE_BAD_REFERENCE),
                    "samples[1] refers to series 2 but the batch has 2 series");
    free(buf);

    /* the encoder refuses to write one */
    tw_batch *b = full_batch();
    ((tw_sample *)b->samples)[4].series = (uint32_t)b->nseries;
    uint8_t *out = (uint8_t *)(uintptr_t)1;
    assert_int_equal(tw_wire_encode(b, &out, &len), TW_WIRE_BAD_REFERENCE);
    assert_null(out);
    tw_batch_free(b);
}

/* The training hook's Python profiles (no rule reads them yet): a batch
 * with one decodes, its events and markers intact. */
static void test_python_profile_skipped(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = twt_build(TWT_PYTHON_PROFILE, &len);
    assert_non_null(buf);
    tw_batch *got = decode_ok(buf, len);
    assert_string_equal(got->job, "job-h");
    assert_int_equal(got->nevents, 1);
    assert_int_equal(got->nmarkers, 1);
    tw_batch_free(got);
    free(buf);
}

/* A tensor-only batch: a loss with a NaN value, a gradient with
 * collections, shape, several reductions and raw values. */
static tw_batch *tensor_batch(void)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = S(b, "job-t");
    b->node = S(b, "worker_0");
    b->seq = 3;
    b->tensors = tw_arena_alloc(&b->arena, 2 * sizeof(tw_tensor));
    assert_non_null(b->tensors);
    memset(b->tensors, 0, 2 * sizeof(tw_tensor));
    tw_tensor *t = &b->tensors[0];
    t->name = S(b, "CrossEntropyLoss_output_0");
    t->mode = TW_MODE_EVAL;
    t->step = 12;
    t->mode_step = 3;
    t->wall_us = 1700000000123456;
    t->prev_step = -1;
    t->dtype = S(b, "float32");
    static const tw_tensor_reduction loss[] = {{"value", NAN}};
    t->reductions = arena_copy(b, loss, sizeof(loss));
    t->nreductions = 1;
    t = &b->tensors[1];
    t->name = S(b, "gradient/Net_fc1.weight");
    static const char *const colls[] = {"gradients", "weights"};
    const char **c = arena_copy(b, colls, sizeof(colls));
    t->collections = c;
    t->ncollections = 2;
    t->mode = TW_MODE_TRAIN;
    t->step = 12;
    t->mode_step = 9;
    t->wall_us = 1700000000123999;
    t->prev_step = 11;
    t->dtype = S(b, "float16");
    static const int64_t shape[] = {2, 3};
    t->shape = arena_copy(b, shape, sizeof(shape));
    t->nshape = 2;
    t->numel = 6;
    static const tw_tensor_reduction red[] = {
        {"abs_mean", 2.5e-9}, {"nan_count", 0}, {"inf_count", 1}};
    t->reductions = arena_copy(b, red, sizeof(red));
    t->nreductions = 3;
    static const double raw[] = {1, -2, INFINITY, 0, -0.0, 1e-300};
    t->raw = arena_copy(b, raw, sizeof(raw));
    t->nraw = 6;
    b->ntensors = 2;
    return b;
}

static void test_tensors_round_trip(void **state)
{
    (void)state;
    tw_batch *b = tensor_batch();
    uint8_t *buf;
    size_t len;
    encode_ok(b, &buf, &len);
    tw_batch *got = decode_ok(buf, len);
    assert_int_equal(got->ntensors, 2);
    for (size_t i = 0; i < 2; i++) {
        const tw_tensor *w = &b->tensors[i], *g = &got->tensors[i];
        assert_string_equal(g->node, "worker_0");
        assert_string_equal(g->name, w->name);
        assert_string_equal(g->dtype, w->dtype);
        assert_int_equal(g->mode, w->mode);
        assert_int_equal(g->step, w->step);
        assert_int_equal(g->mode_step, w->mode_step);
        assert_int_equal(g->wall_us, w->wall_us);
        assert_int_equal(g->prev_step, w->prev_step);
        assert_int_equal(g->numel, w->numel);
        assert_int_equal(g->ncollections, w->ncollections);
        for (uint32_t k = 0; k < w->ncollections; k++)
            assert_string_equal(g->collections[k], w->collections[k]);
        assert_int_equal(g->nshape, w->nshape);
        for (uint32_t k = 0; k < w->nshape; k++)
            assert_int_equal(g->shape[k], w->shape[k]);
        assert_int_equal(g->nreductions, w->nreductions);
        for (uint32_t k = 0; k < w->nreductions; k++) {
            assert_string_equal(g->reductions[k].op, w->reductions[k].op);
            assert_same_double(g->reductions[k].value, w->reductions[k].value);
        }
        assert_int_equal(g->nraw, w->nraw);
        for (uint32_t k = 0; k < w->nraw; k++)
            assert_same_double(g->raw[k], w->raw[k]);
    }
    tw_batch_free(got);
    free(buf);
    tw_batch_free(b);
}

/* What no honest hook writes refuses the batch as bad_value, naming the
 * tensor and the field. */
static void test_tensors_bad_values(void **state)
{
    (void)state;
    static const struct {
        int field;
        const char *named;
    } cases[] = {{0, "step"},
                 {1, "wall_us"},
                 {2, "prev_step"},
                 {3, "shape[1]"},
                 {4, "name is empty"},
                 {5, "op is empty"},
                 {6, "collections[1] is empty"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tw_batch *b = tensor_batch();
        tw_tensor *t = &b->tensors[1];
        switch (cases[i].field) {
        case 0:
            t->step = -1;
            t->prev_step = -1;
            break;
        case 1:
            t->wall_us = 0;
            break;
        case 2:
            t->prev_step = 12;
            break;
        case 3:
            ((int64_t *)(uintptr_t)t->shape)[1] = -3;
            break;
        case 4:
            t->name = "";
            break;
        case 5:
            ((tw_tensor_reduction *)(uintptr_t)t->reductions)[2].op = "";
            break;
        case 6:
            ((const char **)(uintptr_t)t->collections)[1] = "";
            break;
        }
        uint8_t *buf;
        size_t len;
        encode_ok(b, &buf, &len);
        const char *err = decode_fails(buf, len, TW_WIRE_BAD_VALUE);
        assert_contains(err, "tensors[1]");
        assert_contains(err, cases[i].named);
        free(buf);
        tw_batch_free(b);
    }
    /* the encoder refuses a tensor without a name or with a bad mode */
    tw_batch *b = tensor_batch();
    uint8_t *buf;
    size_t len;
    b->tensors[0].name = NULL;
    assert_int_equal(tw_wire_encode(b, &buf, &len), TW_WIRE_MISSING_FIELD);
    b->tensors[0].name = "x";
    memset(&b->tensors[0].mode, 0x7f, sizeof(b->tensors[0].mode));
    assert_int_equal(tw_wire_encode(b, &buf, &len), TW_WIRE_BAD_VALUE);
    tw_batch_free(b);
}

static void test_versions(void **state)
{
    (void)state;
    size_t len;
    unsigned version;
    uint8_t *buf = twt_build(TWT_VERSION_0, &len);
    assert_non_null(buf);
    assert_contains(decode_fails(buf, len, TW_WIRE_UNSUPPORTED_VERSION),
                    "version 0");
    free(buf);

    /* absent: the schema default, 1 */
    buf = twt_build(TWT_VERSION_ABSENT, &len);
    assert_non_null(buf);
    assert_int_equal(twt_stored_version(buf, len, &version), 0);
    assert_int_equal(version, 1);
    tw_batch *got = decode_ok(buf, len);
    tw_batch_free(got);
    free(buf);

    /* a newer writer that appended a field: read what this reader knows */
    buf = twt_build(TWT_VERSION_2_APPENDED, &len);
    assert_non_null(buf);
    assert_int_equal(twt_stored_version(buf, len, &version), 1);
    assert_int_equal(version, 2);
    got = decode_ok(buf, len);
    assert_string_equal(got->job, "job-h");
    assert_string_equal(got->node, "node-h");
    assert_int_equal(got->seq, 9);
    assert_int_equal(got->nseries, 2);
    assert_null(got->series[1].name);
    assert_int_equal(got->nsamples, 2);
    assert_int_equal(got->samples[1].flags, TW_SAMPLE_INTEGRAL);
    assert_int_equal(got->nevents, 1);
    assert_int_equal(got->events[0].source, TW_SOURCE_MODEL_TIMELINE);
    assert_int_equal(got->events[0].mode, TW_MODE_TRAIN);
    assert_int_equal(got->events[0].nargs, 1);
    assert_int_equal(got->events[0].args[0].kind, TW_ARG_NUMBER);
    assert_int_equal(got->nmarkers, 1);
    assert_int_equal(got->markers[0].kind, TW_MARKER_JOB_START);
    assert_int_equal(got->markers[0].sampling_interval_ms, 500);
    tw_batch_free(got);
    free(buf);
}

static void test_bad_values(void **state)
{
    (void)state;
    static const struct {
        twt_case c;
        const char *what;
    } cases[] = {
        {TWT_BAD_SOURCE, "events[0].source is 5"},
        {TWT_BAD_MODE, "events[0].mode is -1"},
        {TWT_BAD_ARG_KIND, "events[0].args[0].kind is 5"},
        {TWT_BAD_MARKER_KIND, "markers[0].kind is 3"},
        {TWT_ARGS_WITHOUT_HAS_ARGS,
         "events[0] has 1 args but has_args is false"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len;
        uint8_t *buf = twt_build(cases[i].c, &len);
        assert_non_null(buf);
        assert_contains(decode_fails(buf, len, TW_WIRE_BAD_VALUE),
                        cases[i].what);
        free(buf);
    }
}

static void test_shared_tables(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = twt_build(TWT_SHARED_TABLES, &len);
    assert_non_null(buf);
    assert_contains(decode_fails(buf, len, TW_WIRE_VERIFY_FAILED),
                    "tables (one per 8 bytes");
    free(buf);
}

static void test_misaligned_structs(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = twt_build(TWT_MISALIGNED_SAMPLES, &len);
    assert_non_null(buf);
    assert_contains(decode_fails(buf, len, TW_WIRE_VERIFY_FAILED),
                    "elements of vector 'samples' at byte ");
    free(buf);
}

static void test_encode_refuses(void **state)
{
    (void)state;
    uint8_t *out;
    size_t len;
    tw_batch *b = full_batch();
    tw_fw_event *ev = (tw_fw_event *)b->events;

    b->job = NULL;
    assert_int_equal(tw_wire_encode(b, &out, &len), TW_WIRE_MISSING_FIELD);
    assert_null(out);
    b->job = "job-1";

    ((tw_batch_series *)b->series)[1].dimension = NULL;
    assert_int_equal(tw_wire_encode(b, &out, &len), TW_WIRE_MISSING_FIELD);
    ((tw_batch_series *)b->series)[1].dimension = "GPUUtilization";

    ev[2].nargs = 1; /* args NULL with a count */
    assert_int_equal(tw_wire_encode(b, &out, &len), TW_WIRE_MISSING_FIELD);
    ev[2].nargs = 0;

    ev[0].mode = (tw_mode)17;
    assert_int_equal(tw_wire_encode(b, &out, &len), TW_WIRE_BAD_VALUE);
    ev[0].mode = TW_MODE_TRAIN;

    ev[0].source = TW_SOURCE_COUNT;
    assert_int_equal(tw_wire_encode(b, &out, &len), TW_WIRE_BAD_VALUE);
    ev[0].source = TW_SOURCE_PYTHONTIMELINE;

    ((tw_marker *)b->markers)[0].kind = (tw_marker_kind)9;
    assert_int_equal(tw_wire_encode(b, &out, &len), TW_WIRE_BAD_VALUE);
    ((tw_marker *)b->markers)[0].kind = TW_MARKER_JOB_START;

    ev[1].node = "algo-2"; /* one node per batch on the wire */
    assert_int_equal(tw_wire_encode(b, &out, &len), TW_WIRE_BAD_VALUE);
    assert_null(out);
    ev[1].node = "algo-1"; /* equal text, other pointer: fine */
    encode_ok(b, &out, &len);
    free(out);
    tw_batch_free(b);
}

static void test_err_buffer_optional(void **state)
{
    (void)state;
    uint8_t junk[16] = {0};
    tw_batch *out = NULL;
    assert_int_equal(tw_wire_decode(junk, sizeof(junk), &out, NULL, 0),
                     TW_WIRE_BAD_IDENTIFIER);
    assert_null(out);
    char tiny[8];
    assert_int_equal(tw_wire_decode(junk, 3, &out, tiny, sizeof(tiny)),
                     TW_WIRE_TOO_SHORT);
    assert_int_equal(strlen(tiny), sizeof(tiny) - 1); /* truncated, ended */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_field),
        cmocka_unit_test(test_round_trip_minimal),
        cmocka_unit_test(test_version_is_stored),
        cmocka_unit_test(test_large_batch),
        cmocka_unit_test(test_decoded_arena_fits_message),
        cmocka_unit_test(test_decode_unaligned),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bad_identifier),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_mutated_buffers),
        cmocka_unit_test(test_vector_length_past_end),
        cmocka_unit_test(test_missing_required_fields),
        cmocka_unit_test(test_bad_reference),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_python_profile_skipped),
        cmocka_unit_test(test_tensors_round_trip),
        cmocka_unit_test(test_tensors_bad_values),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_shared_tables),
        cmocka_unit_test(test_misaligned_structs),
        cmocka_unit_test(test_encode_refuses),
        cmocka_unit_test(test_err_buffer_optional),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
