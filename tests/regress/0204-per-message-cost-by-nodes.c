/* 0204-per-message-cost-by-nodes.c - edge-case issue, defect 2 (per-node
 * cost).
 *
 * Defect: the cost of a job's messages grew faster than its node count
 * (0.68 / 4.3 / 12.7 ms per message at 1 500 / 3 000 / 6 000 nodes through
 * `run`). The main cause was LoadBalancing's report, built for every
 * alert and the results file: O(nodes x series) per node, i.e. cubic in
 * the nodes (31 s for the finish of a 3 000-node job); also O(nodes x
 * series) per scan in two rules and the watermark recomputed from every
 * producer per message.
 *
 * Asserts: a job fed in process to the router (default rules, as `run`
 * evaluates it, finish included) costs per message at 4x the nodes less
 * than 6x what it costs at 1x (linear would be 4x at worst; the defect
 * made it ~10x here). Time is the best of up to three tries per size, so
 * a loaded machine does not fail it; the results of both jobs are
 * written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "job_router.h"
#include "log.h"

#define SMALL 300u
#define MINUTES 4u
#define ROUNDS 12u /* one sample per series every 5 s */
#define T0_S 1700000000LL

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int on_alert(void *ud, const char *job, const char *id, const char *json,
                    size_t len, int32_t partition, int64_t offset)
{
    (void)job;
    (void)id;
    (void)json;
    (void)len;
    (void)partition;
    (void)offset;
    (*(uint64_t *)ud)++;
    return TW_OK;
}

static tw_batch *marker(tw_marker_kind kind, uint64_t seq, int64_t t_us)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = "job";
    b->node = "replay";
    b->seq = seq;
    b->file_ts_us = t_us;
    b->markers = tw_arena_alloc(&b->arena, sizeof(tw_marker));
    assert_non_null(b->markers);
    b->markers[0] =
        (tw_marker){.kind = kind, .time_us = t_us, .latest_us = t_us};
    b->nmarkers = 1;
    return b;
}

/* Minute m of node n: two GPUs (utilization, memory) and two cores. */
static tw_batch *minute(unsigned n, unsigned m)
{
    static const tw_batch_series series[] = {
        {"gpu", "gpu0", "GPUUtilization"},
        {"gpu", "gpu0", "GPUMemoryUtilization"},
        {"gpu", "gpu1", "GPUUtilization"},
        {"gpu", "gpu1", "GPUMemoryUtilization"},
        {"cpu", "cpu0", "CPUUtilization"},
        {"cpu", "cpu1", "CPUUtilization"},
    };
    const size_t ns = sizeof(series) / sizeof(series[0]);
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    char node[32];
    snprintf(node, sizeof(node), "algo-%u", n + 1);
    b->job = "job";
    b->node = tw_arena_strdup(&b->arena, node);
    b->seq = m + 1;
    b->file_ts_us = (T0_S + 60LL * m) * 1000000;
    b->series = tw_arena_alloc(&b->arena, sizeof(series));
    b->samples = tw_arena_alloc(&b->arena, ns * ROUNDS * sizeof(tw_sample));
    assert_true(b->node && b->series && b->samples);
    memcpy(b->series, series, sizeof(series));
    b->nseries = ns;
    for (size_t r = 0; r < ROUNDS; r++)
        for (size_t s = 0; s < ns; s++)
            b->samples[b->nsamples++] =
                (tw_sample){.ts = (double)T0_S + 60.0 * m + 5.0 * (double)r,
                            .value = (n % 2 ? (s >= 4 ? 95.0 : 10.0) : 50.0) +
                                     (double)((r * 7 + s * 3 + n) % 10),
                            .series = (uint32_t)s};
    return b;
}

/* What run does with each message: route it, then send the alerts its
 * scans queued (claimed in the router's store first). */
static void route(tw_router *r, int64_t offset, tw_batch *b)
{
    char err[512];
    assert_int_equal(tw_router_batch(r, 0, offset, b, 0), TW_OK);
    if (tw_router_flush_alerts(r, err, sizeof(err)) != TW_OK)
        fail_msg("flush: %s", err);
}

/* Seconds per message for a whole job of `nodes` nodes. */
static double job_cost(const tw_config *cfg, tw_registry *reg, unsigned nodes)
{
    uint64_t alerts = 0;
    tw_job_config jc = cfg->job;
    jc.external_watermark = 0;
    tw_router_config rc = {.job = jc,
                           .reg = reg,
                           .rules = cfg->rules,
                           .nrules = cfg->nrules,
                           .job_idle_us = 3600LL * 1000000};
    tw_router *r = NULL;
    char err[512];
    assert_int_equal(
        tw_router_new(&rc, on_alert, &alerts, &r, err, sizeof(err)), TW_OK);
    int64_t off = 0;
    double spent = 0;
    tw_batch *b = marker(TW_MARKER_JOB_START, 1, T0_S * 1000000);
    route(r, off++, b);
    for (unsigned m = 0; m < MINUTES; m++)
        for (unsigned n = 0; n < nodes; n++) {
            b = minute(n, m);
            double t = now_s();
            route(r, off++, b);
            spent += now_s() - t;
        }
    b = marker(TW_MARKER_JOB_END, 2, (T0_S + 60LL * MINUTES) * 1000000);
    double t = now_s();
    route(r, off++, b);
    spent += now_s() - t;
    tw_router_stats st;
    tw_router_get_stats(r, &st);
    assert_int_equal(st.jobs_finished, 1);
    assert_true(alerts > 0);
    tw_router_free(r);
    return spent / (double)off;
}

static void test_cost_linear_in_nodes(void **state)
{
    (void)state;
    tw_log_set_level(TW_LOG_WARN);
    char err[512];
    tw_registry *reg = tw_registry_new();
    tw_config *cfg = NULL;
    assert_non_null(reg);
    assert_int_equal(tw_config_default(reg, &cfg, err, sizeof(err)), TW_OK);
    double small = 1e9, big = 1e9;
    for (int i = 0; i < 3; i++) {
        double s = job_cost(cfg, reg, SMALL);
        double g = job_cost(cfg, reg, 4 * SMALL);
        small = s < small ? s : small;
        big = g < big ? g : big;
        printf("try %d: %u nodes %.1f us/message, %u nodes %.1f us/message "
               "(best ratio %.2f)\n",
               i + 1, SMALL, s * 1e6, 4 * SMALL, g * 1e6, big / small);
        if (big < 6 * small)
            break;
    }
    assert_true(big < 6 * small);
    tw_config_free(cfg);
    tw_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_linear_in_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
