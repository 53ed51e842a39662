/* test_job.c - the job pipeline: scan boundaries (both ends inclusive),
 * the reference's event order, the last partial interval, late data,
 * duplicate and reordered batches, continuous mode. A fixture rule
 * (tests/plugins/recorder.c) reports exactly what each scan delivered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "json_writer.h"

#define S(x) ((int64_t)(x)*1000000LL)

static char recorder_path[1024];

static tw_batch *make_batch(const char *node, uint64_t seq, int64_t file_ts,
                            size_t n, const double *ts, const double *val)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "job";
    b->node = tw_arena_strdup(&b->arena, node);
    b->seq = seq;
    b->file_ts_us = file_ts;
    b->series = tw_arena_alloc(&b->arena, sizeof(tw_batch_series));
    b->series[0].type = "gpu";
    b->series[0].name = "gpu0";
    b->series[0].dimension = "GPUUtilization";
    b->nseries = 1;
    b->samples = tw_arena_alloc(&b->arena, n * sizeof(tw_sample) + 1);
    for (size_t i = 0; i < n; i++) {
        b->samples[i].ts = ts[i];
        b->samples[i].value = val[i];
        b->samples[i].series = 0;
    }
    b->nsamples = n;
    return b;
}

static tw_batch *make_events(const char *node, int64_t file_ts, tw_source src,
                             size_t n, const char *const *names,
                             const int64_t *start, const int64_t *end)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "job";
    b->node = tw_arena_strdup(&b->arena, node);
    b->file_ts_us = file_ts;
    b->events = tw_arena_alloc(&b->arena, n * sizeof(tw_fw_event) + 1);
    for (size_t i = 0; i < n; i++) {
        tw_fw_event *e = &b->events[i];
        e->name = tw_arena_strdup(&b->arena, names[i]);
        e->phase = "phase";
        e->node = b->node;
        e->start_us = start[i];
        e->end_us = end[i];
        e->source = src;
    }
    b->nevents = n;
    return b;
}

typedef struct fixture {
    tw_registry *reg;
    tw_job *job;
} fixture;

static void open_job(fixture *f, const tw_job_config *cfg)
{
    const char *b = getenv("TW_BUILD_DIR");
    snprintf(recorder_path, sizeof(recorder_path),
             "%s/tests/plugins/recorder.so", b ? b : ".");
    f->reg = tw_registry_new();
    tw_rule_spec spec = {0};
    spec.source = recorder_path;
    spec.entry = "recorder_rule";
    char err[512];
    int rc =
        tw_job_new("job", cfg, f->reg, &spec, 1, &f->job, err, sizeof(err));
    if (rc != TW_OK)
        fail_msg("%s", err);
}

static json_t *report(fixture *f)
{
    tw_json *j = tw_json_new();
    assert_int_equal(tw_rule_report(tw_job_rule(f->job, 0), j), TW_OK);
    json_error_t e;
    json_t *root = json_loads(tw_json_str(j), 0, &e);
    if (root == NULL)
        fail_msg("bad report JSON: %s", e.text);
    tw_json_free(j);
    json_t *details = json_incref(json_object_get(root, "Details"));
    json_decref(root);
    return details; /* the recorder's {"scans": [...]} */
}

static void close_job(fixture *f)
{
    tw_job_free(f->job);
    tw_registry_free(f->reg);
}

/* samples of scan k as "node:value:flags" joined by spaces */
static void scan_samples(json_t *root, size_t k, char *out, size_t len)
{
    json_t *scan = json_array_get(json_object_get(root, "scans"), k);
    assert_non_null(scan);
    json_t *arr = json_object_get(scan, "samples");
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *s = json_array_get(arr, i);
        o += (size_t)snprintf(out + o, len - o, "%s%s:%g:%lld", i ? " " : "",
                              json_string_value(json_array_get(s, 0)),
                              json_number_value(json_array_get(s, 1)),
                              json_integer_value(json_array_get(s, 2)));
    }
}

static void test_boundaries_and_order(void **st)
{
    (void)st;
    fixture f;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.external_watermark = 1;
    open_job(&f, &cfg);
    tw_job_set_first_timestamp(f.job, S(1000));
    /* arrival order: algo-2 before algo-1 -- the reference order is by
     * file timestamp, then node id, not arrival */
    assert_int_equal(tw_job_ingest(f.job, make_batch("algo-2", 0, S(1000), 2,
                                                     (double[]){1000.5, 1059.9},
                                                     (double[]){1, 2})),
                     TW_OK);
    assert_int_equal(tw_job_ingest(f.job, make_batch("algo-1", 0, S(1000), 2,
                                                     (double[]){1000.2, 1060.0},
                                                     (double[]){3, 4})),
                     TW_OK);
    assert_int_equal(tw_job_ingest(f.job, make_batch("algo-1", 0, S(1060), 2,
                                                     (double[]){1061.0, 1120.5},
                                                     (double[]){5, 6})),
                     TW_OK);
    assert_int_equal(tw_job_latest_timestamp(f.job), S(1060));
    /* L = 1120: scans 0 and 1 run, the partial interval from 1120 never */
    assert_int_equal(tw_job_finish(f.job, S(1120)), TW_OK);
    json_t *r = report(&f);
    assert_int_equal(json_array_size(json_object_get(r, "scans")), 2);
    char got[512];
    scan_samples(r, 0, got, sizeof(got));
    assert_string_equal(got, "algo-1:3:0 algo-1:4:0 algo-2:1:0 algo-2:2:0");
    scan_samples(r, 1, got, sizeof(got));
    /* 1060.0 lies on the boundary: delivered again, flagged as a repeat */
    assert_string_equal(got, "algo-1:4:2 algo-1:5:0");
    json_t *s1 = json_array_get(json_object_get(r, "scans"), 1);
    assert_int_equal(json_integer_value(json_object_get(s1, "start")), S(1060));
    assert_int_equal(json_integer_value(json_object_get(s1, "end")), S(1120));
    assert_int_equal(json_integer_value(json_object_get(s1, "final")), 1);
    json_decref(r);
    tw_rule *rule = tw_job_rule(f.job, 0);
    assert_int_equal(tw_rule_get_status(rule), TW_STATUS_NO_ISSUES_FOUND);
    close_job(&f);
}

static void test_late_and_duplicates(void **st)
{
    (void)st;
    fixture f;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.lateness_us = 0;
    open_job(&f, &cfg);
    /* F derives from the first file (1000); scan 0 closes once the
     * watermark reaches 1060. */
    assert_int_equal(
        tw_job_ingest(f.job, make_batch("algo-1", 1, S(1000), 1,
                                        (double[]){1000.5}, (double[]){1})),
        TW_OK);
    assert_int_equal(
        tw_job_ingest(f.job, make_batch("algo-1", 3, S(1060), 1,
                                        (double[]){1061.0}, (double[]){3})),
        TW_OK);
    tw_job_stats s;
    tw_job_get_stats(f.job, &s);
    assert_int_equal(s.scans, 1);
    /* seq 2 arrives after 3: accepted, but its sample is late for scan 0 */
    assert_int_equal(tw_job_ingest(f.job, make_batch("algo-1", 2, S(1000), 2,
                                                     (double[]){1030.0, 1062.0},
                                                     (double[]){2, 4})),
                     TW_OK);
    /* seq 3 again: a redelivery */
    assert_int_equal(
        tw_job_ingest(f.job, make_batch("algo-1", 3, S(1060), 1,
                                        (double[]){1061.0}, (double[]){3})),
        TW_OK);
    tw_job_get_stats(f.job, &s);
    assert_int_equal(s.late_samples, 1);
    assert_int_equal(s.duplicate_batches, 1);
    assert_int_equal(s.samples, 3);
    assert_int_equal(tw_job_first_timestamp(f.job), S(1000));
    assert_int_equal(tw_job_finish(f.job, S(1121)), TW_OK);
    json_t *r = report(&f);
    char got[512];
    scan_samples(r, 1, got, sizeof(got));
    /* file 1000 (seq 2) before file 1060 (seq 3): reference order */
    assert_string_equal(got, "algo-1:4:0 algo-1:3:0");
    json_decref(r);
    close_job(&f);
}

/* A batch of node's with only a marker (as agents and replay send them). */
static tw_batch *make_marker(const char *node, uint64_t seq,
                             tw_marker_kind kind)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "job";
    b->node = tw_arena_strdup(&b->arena, node);
    b->seq = seq;
    b->markers = tw_arena_alloc(&b->arena, sizeof(tw_marker));
    memset(b->markers, 0, sizeof(tw_marker));
    b->markers[0].kind = kind;
    b->nmarkers = 1;
    return b;
}

typedef struct saved_part {
    char part[32];
    void *data;
    size_t len;
} saved_part;

typedef struct saved {
    saved_part p[4];
    size_t n;
} saved;

static int save_part(void *ud, const char *part, const void *data, size_t len)
{
    saved *s = ud;
    assert_true(s->n < 4);
    saved_part *x = &s->p[s->n++];
    snprintf(x->part, sizeof(x->part), "%s", part);
    x->data = malloc(len ? len : 1);
    assert_non_null(x->data);
    memcpy(x->data, data, len);
    x->len = len;
    return TW_OK;
}

/* Several agents: each node sends JOB_START and, when it stops, JOB_END.
 * The job has ended only when every node that started has ended (also
 * across a checkpoint); without any JOB_START, one JOB_END ends it. */
static void test_end_markers_per_node(void **st)
{
    (void)st;
    for (int restore_midway = 0; restore_midway < 2; restore_midway++) {
        fixture f;
        tw_job_config cfg;
        tw_job_config_default(&cfg);
        open_job(&f, &cfg);
        assert_int_equal(
            tw_job_ingest(f.job, make_marker("algo-1", 1, TW_MARKER_JOB_START)),
            TW_OK);
        assert_int_equal(
            tw_job_ingest(f.job, make_marker("algo-2", 1, TW_MARKER_JOB_START)),
            TW_OK);
        assert_int_equal(
            tw_job_ingest(f.job, make_batch("algo-1", 2, S(1000), 1,
                                            (double[]){1000.5}, (double[]){1})),
            TW_OK);
        assert_int_equal(
            tw_job_ingest(f.job, make_marker("algo-1", 3, TW_MARKER_JOB_END)),
            TW_OK);
        assert_false(tw_job_end_marker_seen(f.job)); /* algo-2 still runs */
        if (restore_midway) {
            saved sv = {0};
            char err[256];
            assert_int_equal(
                tw_job_save(f.job, 0, save_part, &sv, err, sizeof(err)), TW_OK);
            close_job(&f);
            open_job(&f, &cfg);
            for (size_t i = 0; i < sv.n; i++) {
                if (tw_job_restore_part(f.job, sv.p[i].part, sv.p[i].data,
                                        sv.p[i].len, err, sizeof(err)) != TW_OK)
                    fail_msg("restore %s: %s", sv.p[i].part, err);
                free(sv.p[i].data);
            }
            assert_false(tw_job_end_marker_seen(f.job));
        }
        /* algo-2's data after algo-1 ended still counts */
        assert_int_equal(
            tw_job_ingest(f.job, make_batch("algo-2", 2, S(1000), 1,
                                            (double[]){1001.5}, (double[]){2})),
            TW_OK);
        /* a repeated end of algo-1 does not end it either */
        assert_int_equal(
            tw_job_ingest(f.job, make_marker("algo-1", 3, TW_MARKER_JOB_END)),
            TW_OK);
        assert_false(tw_job_end_marker_seen(f.job));
        assert_int_equal(
            tw_job_ingest(f.job, make_marker("algo-2", 3, TW_MARKER_JOB_END)),
            TW_OK);
        assert_true(tw_job_end_marker_seen(f.job));
        tw_job_stats s;
        tw_job_get_stats(f.job, &s);
        assert_int_equal(s.samples, 2);
        assert_int_equal(s.late_samples, 0);
        close_job(&f);
    }
    /* no JOB_START at all (a job created by its first batch): the first
     * JOB_END ends it */
    fixture f;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    open_job(&f, &cfg);
    assert_int_equal(
        tw_job_ingest(f.job, make_batch("algo-1", 1, S(1000), 1,
                                        (double[]){1000.5}, (double[]){1})),
        TW_OK);
    assert_false(tw_job_end_marker_seen(f.job));
    assert_int_equal(
        tw_job_ingest(f.job, make_marker("replay", 1, TW_MARKER_JOB_END)),
        TW_OK);
    assert_true(tw_job_end_marker_seen(f.job));
    close_job(&f);
}

static void run_order(int reversed, char *out, size_t len)
{
    fixture f;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.lateness_us = S(30);
    open_job(&f, &cfg);
    tw_batch *b[4];
    for (int i = 0; i < 4; i++) {
        double ts[2] = {1000.0 + 30 * i + 1, 1000.0 + 30 * i + 20};
        double v[2] = {i * 10.0, i * 10.0 + 1};
        b[i] = make_batch("algo-1", (uint64_t)i + 1, S(1000 + 60 * (i / 2)), 2,
                          ts, v);
    }
    /* within the lateness bound, batches 1 and 2 swapped */
    int order[4] = {0, 1, 2, 3};
    if (reversed) {
        order[1] = 2;
        order[2] = 1;
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(tw_job_ingest(f.job, b[order[i]]), TW_OK);
    tw_job_stats s;
    tw_job_get_stats(f.job, &s);
    assert_int_equal(s.scans, 1); /* scan 0 closed while streaming */
    assert_int_equal(s.late_samples, 0);
    assert_int_equal(tw_job_finish(f.job, S(1061)), TW_OK);
    tw_json *j = tw_json_new();
    assert_int_equal(tw_rule_report(tw_job_rule(f.job, 0), j), TW_OK);
    snprintf(out, len, "%s", tw_json_str(j));
    tw_json_free(j);
    close_job(&f);
}

static void test_reordered_batches_same_result(void **st)
{
    (void)st;
    char a[4096], b[4096];
    run_order(0, a, sizeof(a));
    run_order(1, b, sizeof(b));
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "\"k\": 1"));
}

static void test_framework_events(void **st)
{
    (void)st;
    fixture f;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.external_watermark = 1;
    open_job(&f, &cfg);
    tw_job_set_first_timestamp(f.job, S(1000));
    assert_int_equal(
        tw_job_ingest(f.job, make_batch("algo-1", 0, S(1000), 1,
                                        (double[]){1001.0}, (double[]){1})),
        TW_OK);
    /* Horovod file first in arrival, but pythontimeline sorts first. */
    const char *hn[] = {"allreduce"};
    assert_int_equal(
        tw_job_ingest(f.job,
                      make_events("algo-1-0", S(1050), TW_SOURCE_HOROVOD, 1, hn,
                                  (int64_t[]){S(1040)}, (int64_t[]){S(1050)})),
        TW_OK);
    const char *pn[] = {"step-long", "step-short"};
    assert_int_equal(
        tw_job_ingest(f.job,
                      make_events("algo-1-0", S(1090), TW_SOURCE_PYTHONTIMELINE,
                                  2, pn, (int64_t[]){S(1050), S(1070)},
                                  (int64_t[]){S(1090), S(1071)})),
        TW_OK);
    assert_int_equal(tw_job_finish(f.job, S(1100)), TW_OK);
    json_t *r = report(&f);
    json_t *scans = json_object_get(r, "scans");
    assert_int_equal(json_array_size(scans), 2);
    char *e0 =
        json_dumps(json_object_get(json_array_get(scans, 0), "events"), 0);
    char *e1 =
        json_dumps(json_object_get(json_array_get(scans, 1), "events"), 0);
    assert_string_equal(e0, "[[\"step-long\", 0], [\"allreduce\", 0]]");
    /* the step spanning the boundary is delivered again, flagged */
    assert_string_equal(e1, "[[\"step-long\", 1], [\"step-short\", 0]]");
    free(e0);
    free(e1);
    json_decref(r);
    close_job(&f);
}

static void test_continuous(void **st)
{
    (void)st;
    fixture f;
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.tick_us = 0;
    cfg.lateness_us = 0;
    open_job(&f, &cfg);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            tw_job_ingest(f.job,
                          make_batch("algo-1", (uint64_t)i + 1, S(1000), 1,
                                     (double[]){1000.0 + i}, (double[]){i})),
            TW_OK);
    tw_job_stats s;
    tw_job_get_stats(f.job, &s);
    assert_int_equal(s.scans, 3); /* one per watermark advance */
    json_t *r = report(&f);
    char got[256];
    scan_samples(r, 1, got, sizeof(got));
    assert_string_equal(got, "algo-1:1:0"); /* no repeats between scans */
    json_decref(r);
    close_job(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundaries_and_order),
        cmocka_unit_test(test_late_and_duplicates),
        cmocka_unit_test(test_reordered_batches_same_result),
        cmocka_unit_test(test_framework_events),
        cmocka_unit_test(test_continuous),
        cmocka_unit_test(test_end_markers_per_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
