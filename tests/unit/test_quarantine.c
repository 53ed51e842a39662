/* test_quarantine.c - the failure ledger (quarantine.h) and the router's
 * quarantine of a job (tw_router_quarantine): counts survive a new
 * instance reading the same file (a restart), the last attempt is
 * announced, forgetting rewrites the file, a damaged ledger is refused
 * with file:line; a quarantined job's results file is its results plus
 * "quarantined", valid JSON, the job counts as quarantined (not finished)
 * and its later messages are skipped. */
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
#include <unistd.h>

#include "config.h"
#include "job_router.h"
#include "log.h"
#include "quarantine.h"

static void temp_dir(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/tw_quarantine_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void test_ledger_survives_restart(void **st)
{
    (void)st;
    char dir[64], path[128], err[256];
    temp_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/ledger", dir);
    tw_quarantine *q = NULL;
    assert_int_equal(tw_quarantine_new(path, 3, &q, err, sizeof(err)), TW_OK);
    assert_false(tw_quarantine_last_attempt(q, 2, 40));
    assert_int_equal(tw_quarantine_failed(q, 2, 40), 1);
    assert_int_equal(tw_quarantine_failed(q, 1, 7), 1);
    tw_quarantine_free(q);
    /* a restart */
    assert_int_equal(tw_quarantine_new(path, 3, &q, err, sizeof(err)), TW_OK);
    assert_false(tw_quarantine_last_attempt(q, 2, 40));
    assert_int_equal(tw_quarantine_failed(q, 2, 40), 2);
    tw_quarantine_free(q);
    assert_int_equal(tw_quarantine_new(path, 3, &q, err, sizeof(err)), TW_OK);
    assert_true(tw_quarantine_last_attempt(q, 2, 40));
    assert_false(tw_quarantine_last_attempt(q, 1, 7));
    assert_false(tw_quarantine_last_attempt(q, 2, 41));
    assert_int_equal(tw_quarantine_failed(q, 2, 40), 3);
    tw_quarantine_forget(q, 2, 40);
    tw_quarantine_free(q);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[64];
    assert_non_null(fgets(line, sizeof(line), f));
    assert_string_equal(line, "1 7 1\n");
    assert_null(fgets(line, sizeof(line), f));
    fclose(f);
    /* in memory only */
    assert_int_equal(tw_quarantine_new(NULL, 1, &q, err, sizeof(err)), TW_OK);
    assert_true(tw_quarantine_last_attempt(q, 0, 0));
    assert_int_equal(tw_quarantine_failed(q, 0, 0), 1);
    tw_quarantine_free(q);
    unlink(path);
    rmdir(dir);
}

static void test_ledger_damaged(void **st)
{
    (void)st;
    char dir[64], path[128], err[256];
    temp_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/ledger", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("0 12 1\n0 x 2\n", f);
    fclose(f);
    tw_quarantine *q = NULL;
    assert_int_equal(tw_quarantine_new(path, 3, &q, err, sizeof(err)), TW_ERR);
    assert_null(q);
    char want[160];
    snprintf(want, sizeof(want), "%s':2:", path);
    assert_non_null(strstr(err, want));
    unlink(path);
    rmdir(dir);
}

static int on_alert(void *ud, const char *job, const char *id, const char *json,
                    size_t len, int32_t partition, int64_t offset,
                    const tw_alert_facts *facts)
{
    (void)facts;
    (void)ud;
    (void)job;
    (void)id;
    (void)json;
    (void)len;
    (void)partition;
    (void)offset;
    return TW_OK;
}

static tw_batch *batch(const char *job, const char *node, uint64_t seq,
                       int start)
{
    static const tw_batch_series cpu = {"cpu", "cpu0", "CPUUtilization"};
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = job;
    b->node = node;
    b->seq = seq;
    b->file_ts_us = 1700000000000000LL + (int64_t)seq * 60000000;
    if (start) {
        b->markers = tw_arena_alloc(&b->arena, sizeof(tw_marker));
        assert_non_null(b->markers);
        b->markers[0] =
            (tw_marker){.kind = TW_MARKER_JOB_START, .time_us = b->file_ts_us};
        b->nmarkers = 1;
        return b;
    }
    b->series = tw_arena_alloc(&b->arena, sizeof(cpu));
    b->samples = tw_arena_alloc(&b->arena, 12 * sizeof(tw_sample));
    assert_true(b->series != NULL && b->samples != NULL);
    b->series[0] = cpu;
    b->nseries = 1;
    for (int i = 0; i < 12; i++)
        b->samples[b->nsamples++] = (tw_sample){
            .ts = (double)b->file_ts_us / 1e6 + 5.0 * i, .value = 40.0};
    return b;
}

static void test_router_quarantines_job(void **st)
{
    (void)st;
    tw_log_set_level(TW_LOG_WARN);
    char dir[64], err[512];
    temp_dir(dir, sizeof(dir));
    tw_registry *reg = tw_registry_new();
    tw_config *cfg = NULL;
    assert_non_null(reg);
    assert_int_equal(tw_config_default(reg, &cfg, err, sizeof(err)), TW_OK);
    tw_job_config jc = cfg->job;
    jc.external_watermark = 0;
    tw_router_config rc = {.job = jc,
                           .reg = reg,
                           .rules = cfg->rules,
                           .nrules = cfg->nrules,
                           .job_idle_us = 3600LL * 1000000,
                           .results_dir = dir};
    tw_router *r = NULL;
    assert_int_equal(tw_router_new(&rc, on_alert, NULL, &r, err, sizeof(err)),
                     TW_OK);
    assert_int_equal(tw_router_batch(r, 0, 0, batch("jobq", "replay", 1, 1), 0),
                     TW_OK);
    assert_int_equal(tw_router_batch(r, 0, 1, batch("jobq", "algo-1", 1, 0), 0),
                     TW_OK);
    assert_int_equal(tw_router_quarantine(r, 0, 2, "jobq",
                                          "processing failed \"3\" times", 3),
                     TW_OK);
    /* its later messages are skipped like a finished job's */
    assert_int_equal(tw_router_batch(r, 0, 3, batch("jobq", "algo-1", 2, 0), 0),
                     TW_OK);
    /* a message without a job: only counted */
    assert_int_equal(tw_router_quarantine(r, 0, 4, NULL, "undecodable", 3),
                     TW_OK);
    tw_router_stats s;
    tw_router_get_stats(r, &s);
    assert_int_equal(s.jobs_quarantined, 1);
    assert_int_equal(s.messages_quarantined, 2);
    assert_int_equal(s.jobs_finished, 0);
    assert_int_equal(s.jobs_active, 0);
    assert_int_equal(s.after_end, 1);
    assert_int_equal(tw_router_position(r, 0), 5);
    tw_router_free(r);

    char path[128];
    snprintf(path, sizeof(path), "%s/jobq.json", dir);
    json_error_t je;
    json_t *res = json_load_file(path, 0, &je);
    if (res == NULL)
        fail_msg("%s: %s (line %d)", path, je.text, je.line);
    assert_string_equal(json_string_value(json_object_get(res, "job")), "jobq");
    assert_true(json_array_size(json_object_get(res, "rules")) > 0);
    json_t *q = json_object_get(res, "quarantined");
    assert_non_null(q);
    assert_string_equal(json_string_value(json_object_get(q, "reason")),
                        "processing failed \"3\" times");
    assert_int_equal(json_integer_value(json_object_get(q, "partition")), 0);
    assert_int_equal(json_integer_value(json_object_get(q, "offset")), 2);
    assert_int_equal(json_integer_value(json_object_get(q, "attempts")), 3);
    json_decref(res);
    unlink(path);
    rmdir(dir);
    tw_config_free(cfg);
    tw_registry_free(reg);
}

/* A job whose idle finalization fails (here: no final alert fits a 300-byte
 * bound) has no message to retry: exiting would meet it again after every
 * restart. It is quarantined instead: results marked (offset -1), counted,
 * and the engine goes on. */
static void test_router_quarantines_failed_idle_finish(void **st)
{
    (void)st;
    tw_log_set_level(TW_LOG_ERROR + 1);
    char dir[64], err[512];
    temp_dir(dir, sizeof(dir));
    tw_registry *reg = tw_registry_new();
    tw_config *cfg = NULL;
    assert_non_null(reg);
    assert_int_equal(tw_config_default(reg, &cfg, err, sizeof(err)), TW_OK);
    tw_job_config jc = cfg->job;
    jc.external_watermark = 0;
    tw_router_config rc = {.job = jc,
                           .reg = reg,
                           .rules = cfg->rules,
                           .nrules = cfg->nrules,
                           .job_idle_us = 1000000,
                           .results_dir = dir,
                           .max_alert_bytes = 300};
    tw_router *r = NULL;
    assert_int_equal(tw_router_new(&rc, on_alert, NULL, &r, err, sizeof(err)),
                     TW_OK);
    assert_int_equal(tw_router_batch(r, 0, 0, batch("jobi", "replay", 1, 1), 0),
                     TW_OK);
    assert_int_equal(tw_router_batch(r, 0, 1, batch("jobi", "algo-1", 1, 0), 0),
                     TW_OK);
    assert_int_equal(tw_router_expire(r, 10 * 1000000), TW_OK);
    tw_router_stats s;
    tw_router_get_stats(r, &s);
    assert_int_equal(s.jobs_quarantined, 1);
    assert_int_equal(s.messages_quarantined, 0);
    assert_int_equal(s.jobs_idle, 0);
    assert_int_equal(s.jobs_active, 0);
    tw_router_free(r);

    char path[128];
    snprintf(path, sizeof(path), "%s/jobi.json", dir);
    json_error_t je;
    json_t *res = json_load_file(path, 0, &je);
    if (res == NULL)
        fail_msg("%s: %s (line %d)", path, je.text, je.line);
    json_t *q = json_object_get(res, "quarantined");
    assert_non_null(q);
    assert_int_equal(json_integer_value(json_object_get(q, "offset")), -1);
    assert_non_null(strstr(json_string_value(json_object_get(q, "reason")),
                           "idle finalization failed"));
    json_decref(res);
    unlink(path);
    rmdir(dir);
    tw_config_free(cfg);
    tw_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ledger_survives_restart),
        cmocka_unit_test(test_ledger_damaged),
        cmocka_unit_test(test_router_quarantines_job),
        cmocka_unit_test(test_router_quarantines_failed_idle_finish),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
