/* 0105-clock-skew-bound.c - edge-case issue, defect 1, at the job level
 * (tw_job, the data's own clock as `run` drives it).
 *
 * How it showed: one producer's sample far ahead made the others "idle"
 * and the watermark jumped with it (hundreds of thousands of scans in one
 * ingest, the real samples then late); a JOB_END latest time far ahead did
 * the same in tw_job_finish; neither loop could be stopped.
 *
 * Asserts:
 *  - a sample a year ahead is refused and counted (skewed_samples 1),
 *    nothing is late and the scans equal those of the job without it;
 *  - a node whose clock really jumped (an hour's pause) is refused for
 *    TW_JOB_SKEW_CONFIRM - 1 whole batches, then accepted, and the job
 *    goes on scanning;
 *  - max_scans_per_advance defers the rest of a big advance (scan_cap_hits)
 *    to later calls, and tw_job_finish still evaluates every scan;
 *  - stop_requested stops tw_job_advance and tw_job_finish between scans
 *    (TW_JOB_STOPPED); calling again goes on, and the results equal an
 *    unstopped job's;
 *  - a JOB_END latest time beyond the bound is refused and counted once
 *    (also across a stopped finish); L then comes from the data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

#define T0 1700000000.0
#define MIN_US (60 * 1000000LL)

/* One batch: `n` samples one second apart from `from`, plus `extra` (if
 * not 0) after the first. */
static tw_batch *batch_of(const char *node, uint64_t seq, double from, size_t n,
                          double extra)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "j";
    b->node = tw_arena_strdup(&b->arena, node);
    b->seq = seq;
    b->series = tw_arena_alloc(&b->arena, sizeof(tw_batch_series));
    b->series[0].type = "cpu";
    b->series[0].name = "cpu0";
    b->series[0].dimension = "CPUUtilization";
    b->nseries = 1;
    b->samples = tw_arena_alloc(&b->arena, (n + 1) * sizeof(tw_sample));
    assert_non_null(b->samples);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        b->samples[k++] = (tw_sample){.ts = from + (double)i, .value = 50};
        if (i == 0 && extra != 0)
            b->samples[k++] = (tw_sample){.ts = extra, .value = 50};
    }
    b->nsamples = k;
    return b;
}

/* stop_requested: stop at the n-th question. */
typedef struct stopper {
    int asked, stop_at;
} stopper;

static int stop_at(void *ud)
{
    stopper *s = ud;
    return ++s->asked == s->stop_at;
}

typedef struct job_fixture {
    tw_registry *reg;
    tw_job *job;
} job_fixture;

static void open_job(job_fixture *f, const tw_job_config *cfg)
{
    f->reg = tw_registry_new();
    assert_non_null(f->reg);
    char err[256];
    assert_int_equal(
        tw_job_new("j", cfg, f->reg, NULL, 0, &f->job, err, sizeof(err)),
        TW_OK);
}

static void close_job(job_fixture *f, tw_job_stats *st)
{
    tw_job_get_stats(f->job, st);
    tw_job_free(f->job);
    tw_registry_free(f->reg);
}

/* 2 nodes, 20 one-minute batches each; `bad` (if not 0) rides in node a's
 * 6th batch. */
static void two_nodes(double bad, tw_job_stats *st)
{
    job_fixture f;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    open_job(&f, &cfg);
    for (uint64_t m = 0; m < 20; m++)
        for (int node = 0; node < 2; node++)
            assert_int_equal(
                tw_job_ingest(f.job,
                              batch_of(node ? "b" : "a", m + 1, T0 + 60.0 * m,
                                       60, node == 0 && m == 5 ? bad : 0)),
                TW_OK);
    assert_int_equal(tw_job_finish(f.job, 0), TW_OK);
    close_job(&f, st);
}

static void test_far_future_sample(void **state)
{
    (void)state;
    tw_job_stats clean, bad;
    two_nodes(0, &clean);
    two_nodes(T0 + 365 * 86400.0, &bad);
    assert_int_equal(bad.skewed_samples, 1);
    assert_int_equal(bad.late_samples, 0);
    assert_int_equal(bad.samples, clean.samples);
    assert_int_equal(bad.scans, clean.scans);
    assert_true(clean.scans <= 20);
    /* the default bound: 10 ticks, capped at idle_node (5 min) */
    tw_job_stats near;
    two_nodes(T0 + 5 * 60.0 + 250.0, &near); /* 4 min ahead of its batch */
    assert_int_equal(near.skewed_samples, 0);
}

static void test_real_jump_accepted(void **state)
{
    (void)state;
    job_fixture f;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    open_job(&f, &cfg);
    uint64_t seq = 1;
    for (int m = 0; m < 10; m++)
        assert_int_equal(
            tw_job_ingest(f.job, batch_of("a", seq++, T0 + 60.0 * m, 60, 0)),
            TW_OK);
    tw_job_stats st;
    tw_job_get_stats(f.job, &st);
    uint64_t scans_before = st.scans;
    /* an hour's pause, then 10 more minutes */
    for (int m = 0; m < 10; m++)
        assert_int_equal(
            tw_job_ingest(f.job,
                          batch_of("a", seq++, T0 + 3600.0 + 60.0 * m, 60, 0)),
            TW_OK);
    tw_job_get_stats(f.job, &st);
    assert_int_equal(st.skewed_samples, (TW_JOB_SKEW_CONFIRM - 1) * 60);
    assert_true(st.scans > scans_before + 50); /* it scans past the gap */
    assert_int_equal(tw_job_finish(f.job, 0), TW_OK);
    close_job(&f, &st);
    assert_int_equal(st.late_samples, 0);
}

/* One node: a minute of data, then one batch 30 minutes later, then
 * JOB_END with latest time `latest`; `arm` (if any) stops the finish at
 * its first question. */
static void jumpy(const tw_job_config *cfg, int64_t latest, tw_job_stats *st,
                  int *stops, stopper *arm)
{
    job_fixture f;
    open_job(&f, cfg);
    *stops = 0;
    assert_int_equal(tw_job_ingest(f.job, batch_of("a", 1, T0, 60, 0)), TW_OK);
    int rc = tw_job_ingest(f.job, batch_of("a", 2, T0 + 1800.0, 60, 0));
    while (rc == TW_JOB_STOPPED) {
        (*stops)++;
        rc = tw_job_advance(f.job, (int64_t)((T0 + 1859.0) * 1e6));
    }
    assert_int_equal(rc, TW_OK);
    for (int i = 0; i < 40; i++) /* what the cap deferred */
        assert_int_equal(tw_job_advance(f.job, (int64_t)((T0 + 1859.0) * 1e6)),
                         TW_OK);
    if (arm != NULL)
        arm->stop_at = arm->asked + 1;
    while ((rc = tw_job_finish(f.job, latest)) == TW_JOB_STOPPED)
        (*stops)++;
    assert_int_equal(rc, TW_OK);
    assert_true(tw_job_finished(f.job));
    close_job(&f, st);
}

static void test_cap_and_stop(void **state)
{
    (void)state;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.clock_skew_us = 0; /* off: the jump drives 30 scans */
    tw_job_stats plain, capped, stopped;
    int stops;
    jumpy(&cfg, 0, &plain, &stops, NULL);
    assert_int_equal(plain.scan_cap_hits, 0);
    assert_true(plain.scans >= 29);

    cfg.max_scans_per_advance = 4;
    jumpy(&cfg, 0, &capped, &stops, NULL);
    assert_true(capped.scan_cap_hits >= 1);
    assert_int_equal(capped.scans, plain.scans);

    stopper s = {.stop_at = 7};
    cfg.max_scans_per_advance = 0;
    cfg.stop_requested = stop_at;
    cfg.stop_ud = &s;
    jumpy(&cfg, 0, &stopped, &stops, NULL);
    assert_int_equal(stops, 1);
    assert_int_equal(stopped.scans, plain.scans);
    assert_int_equal(stopped.samples, plain.samples);
}

static void test_job_end_far_ahead(void **state)
{
    (void)state;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.clock_skew_us = 3600 * 1000000LL; /* the 30-minute jump passes */
    tw_job_stats ok, near, far, far_stopped;
    int stops;
    /* L from the data; a real L just past it; one a year ahead */
    jumpy(&cfg, 0, &ok, &stops, NULL);
    jumpy(&cfg, (int64_t)((T0 + 1860.0) * 1e6), &near, &stops, NULL);
    jumpy(&cfg, (int64_t)((T0 + 365 * 86400.0) * 1e6), &far, &stops, NULL);
    assert_int_equal(near.skewed_markers, 0);
    assert_int_equal(near.scans, ok.scans + 1); /* L was used */
    assert_int_equal(far.skewed_markers, 1);
    assert_int_equal(far.scans, ok.scans);
    /* stopped in the middle of the finish: still counted once */
    stopper s = {.stop_at = -1};
    cfg.stop_requested = stop_at;
    cfg.stop_ud = &s;
    jumpy(&cfg, (int64_t)((T0 + 365 * 86400.0) * 1e6), &far_stopped, &stops,
          &s);
    assert_int_equal(stops, 1);
    assert_int_equal(far_stopped.skewed_markers, 1);
    assert_int_equal(far_stopped.scans, ok.scans);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_far_future_sample),
        cmocka_unit_test(test_real_jump_accepted),
        cmocka_unit_test(test_cap_and_stop),
        cmocka_unit_test(test_job_end_far_ahead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
