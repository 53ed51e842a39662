/* 0104-time-conversions.c - edge-case issue, defect 1: double -> int64
 * time conversions were unchecked.
 *
 * How it showed: a sample timestamp is a double (seconds) in the agent's
 * files and on the wire; the job converted it with plain casts
 * ((int64_t)(ts * 1e9) and friends), which is undefined behaviour for NaN,
 * ±Inf or anything past year 2262 (UBSan: "is outside the range of
 * representable values"), and the garbage times then drove the clock.
 *
 * Asserts: the checked helpers (event_time.h) refuse NaN, ±Inf, ±1e300
 * and 9.3e9 s and convert ordinary times exactly; a job (external
 * watermark as in `eval`, internal as in `run`) refuses such samples,
 * counting them in skewed_samples, keeps the good ones, and scans as if
 * they were never sent; the same holds after a wire encode/decode round
 * trip; the agent-file reader reports a Timestamp of 1e300 as a bad line
 * with its line number. Run under UBSan in CI (no runtime error).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "event_time.h"
#include "job.h"
#include "reader.h"
#include "wire.h"

static void test_helpers(void **st)
{
    (void)st;
    const double bad[] = {NAN,    INFINITY, -INFINITY, 1e300,
                          -1e300, 9.3e9,    -9.3e9};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t v = 42;
        assert_false(tw_time_s_to_ns(bad[i], &v));
        assert_int_equal(v, 42); /* untouched */
        assert_false(tw_time_s_valid(bad[i]));
    }
    assert_false(tw_time_s_to_us(1e300, &(int64_t){0}));
    assert_false(tw_time_minute_floor_us(NAN, &(int64_t){0}));
    int64_t ns = 0, us = 0, min = 0;
    assert_true(tw_time_s_to_ns(1700000000.5, &ns));
    assert_int_equal(ns, 1700000000500000000LL);
    assert_true(tw_time_s_to_us(1700000000.5, &us));
    assert_int_equal(us, 1700000000500000LL);
    assert_true(tw_time_minute_floor_us(1700000000.5, &min));
    assert_int_equal(min, 1699999980000000LL);
    assert_true(tw_time_s_valid(9.2e9)); /* year 2261 still fits */
    assert_int_equal(tw_time_add_sat(INT64_MAX - 1, 5), INT64_MAX);
    assert_int_equal(tw_time_add_sat(INT64_MIN + 1, -5), INT64_MIN);
    assert_int_equal(tw_time_add_sat(1, 2), 3);
}

/* 2 nodes, one sample a second for 5 minutes from T0, plus the bad times
 * in the middle of node a's batch. */
#define T0 1700000000.0
static const double bad_ts[] = {NAN, INFINITY, -INFINITY, 1e300, -1e300, 9.3e9};
#define NBAD (sizeof(bad_ts) / sizeof(bad_ts[0]))

static tw_batch *batch_of(const char *node, uint64_t seq, double from, size_t n,
                          int with_bad)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "j";
    b->node = tw_arena_strdup(&b->arena, node);
    b->seq = seq;
    b->series = tw_arena_alloc(&b->arena, sizeof(tw_batch_series));
    b->series[0].type = "gpu";
    b->series[0].name = "gpu0";
    b->series[0].dimension = "GPUUtilization";
    b->nseries = 1;
    size_t total = n + (with_bad ? NBAD : 0);
    b->samples = tw_arena_alloc(&b->arena, total * sizeof(tw_sample));
    assert_non_null(b->samples);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (with_bad && i == n / 2)
            for (size_t x = 0; x < NBAD; x++)
                b->samples[k++] = (tw_sample){.ts = bad_ts[x], .value = 1};
        b->samples[k++] = (tw_sample){.ts = from + (double)i, .value = 50};
    }
    b->nsamples = k;
    return b;
}

/* Through the wire codec and back, as `run` receives it. */
static tw_batch *via_wire(tw_batch *b)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(tw_wire_encode(b, &buf, &len), TW_WIRE_OK);
    tw_batch_free(b);
    tw_batch *out = NULL;
    char why[256];
    assert_int_equal(tw_wire_decode(buf, len, &out, why, sizeof(why)),
                     TW_WIRE_OK);
    free(buf);
    out->job = "j";
    return out;
}

static void run_job(int external, int wire, uint64_t *samples, uint64_t *skewed,
                    uint64_t *scans)
{
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.external_watermark = external;
    tw_job *j = NULL;
    char err[256];
    assert_int_equal(tw_job_new("j", &cfg, reg, NULL, 0, &j, err, sizeof(err)),
                     TW_OK);
    uint64_t seq = 1;
    for (size_t m = 0; m < 5; m++) {
        for (int node = 0; node < 2; node++) {
            tw_batch *b = batch_of(node ? "b" : "a", seq, T0 + 60.0 * m, 60,
                                   node == 0 && m == 2);
            if (wire)
                b = via_wire(b);
            assert_int_equal(tw_job_ingest(j, b), TW_OK);
        }
        seq++;
        if (external)
            assert_int_equal(
                tw_job_advance(j, (int64_t)(T0 * 1e6) + (int64_t)m * 60000000),
                TW_OK);
    }
    assert_int_equal(tw_job_finish(j, 0), TW_OK);
    tw_job_stats st;
    tw_job_get_stats(j, &st);
    *samples = st.samples;
    *skewed = st.skewed_samples;
    *scans = st.scans;
    assert_int_equal(st.late_samples, 0);
    tw_job_free(j);
    tw_registry_free(reg);
}

static void test_job_refuses_bad_times(void **st)
{
    (void)st;
    for (int external = 0; external < 2; external++) {
        for (int wire = 0; wire < 2; wire++) {
            uint64_t samples, skewed, scans;
            run_job(external, wire, &samples, &skewed, &scans);
            assert_int_equal(samples, 2 * 5 * 60);
            assert_int_equal(skewed, NBAD);
            /* F = T0's minute (T0 - 20 s), L = the minute of the last
             * sample (T0 + 280 s): scans start at F + 0..4 min */
            assert_int_equal(scans, 5);
        }
    }
}

static int count_batch(void *ud, tw_batch *b)
{
    *(size_t *)ud += b->nsamples;
    tw_batch_free(b);
    return TW_OK;
}

static void on_bad(void *ud, const char *path, uint64_t line,
                   const char *reason)
{
    (void)path;
    if (strstr(reason, "Timestamp") != NULL)
        *(uint64_t *)ud = line;
}

static void test_reader_refuses_1e300(void **st)
{
    (void)st;
    char dir[] = "/tmp/tw-0104.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/1700000000.algo-1.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    const char *line = "{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":"
                       "\"CPUUtilization\",\"Value\":50,\"NodeId\":\"algo-1\","
                       "\"Timestamp\":%s}\n";
    fprintf(f, line, "1700000001.0");
    fprintf(f, line, "1e300");
    fprintf(f, line, "-1e300");
    fprintf(f, line, "1700000002.0");
    fclose(f);
    tw_folder *folder = NULL;
    char err[256];
    assert_int_equal(tw_folder_list(dir, &folder, err, sizeof(err)), TW_OK);
    assert_int_equal(folder->nfiles, 1);
    tw_reader_stats rs;
    memset(&rs, 0, sizeof(rs));
    size_t samples = 0;
    uint64_t bad_line = 0;
    assert_int_equal(tw_folder_read_file(&folder->files[0], "j", NULL,
                                         count_batch, &samples, on_bad,
                                         &bad_line, &rs),
                     TW_OK);
    assert_int_equal(samples, 2);
    assert_int_equal(rs.bad_lines, 2);
    assert_int_equal(bad_line, 3); /* the last one reported */
    tw_folder_free(folder);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_job_refuses_bad_times),
        cmocka_unit_test(test_reader_refuses_1e300),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
