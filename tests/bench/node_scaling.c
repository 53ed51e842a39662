/*
 * node_scaling.c - benchmark: per-message cost of `run`'s job router as a
 * job's node count grows (the edge-case issue's 1 500 / 3 000 / 6 000
 * nodes).
 *
 *   bench_node_scaling [--nodes 1500,3000,6000] [--minutes M]
 *                      [--interval-ms MS] [--cores N] [--gpus N]
 *                      [--results DIR]
 *
 * One job per node count, fed in process to a router (job_router.h, no
 * Kafka, no store) as `replay` sends it: a JOB_START batch, then per
 * minute one batch per node (one per agent file), then a JOB_END batch;
 * a CPU bottleneck on odd nodes, imbalanced GPUs on every third.
 * The default rule set (ProfilerReport). Prints per count:
 * messages, the whole job's time per message (job_us_per_message), mean
 * µs per data message (first minute apart: it creates the
 * series), the JOB_END message (the job's finish: final alerts, results),
 * alerts and the largest alert's bytes, and the results file's size when
 * --results is given.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "config.h"
#include "job_router.h"
#include "log.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct bench_opts {
    unsigned minutes, interval_ms, cores, gpus;
    const char *results;
} bench_opts;

typedef struct alert_tally {
    uint64_t n;
    size_t max_len;
} alert_tally;

static int on_alert(void *ud, const char *job, const char *id, const char *json,
                    size_t len, int32_t partition, int64_t offset)
{
    (void)job;
    (void)id;
    (void)json;
    (void)partition;
    (void)offset;
    alert_tally *t = ud;
    t->n++;
    if (len > t->max_len)
        t->max_len = len;
    return TW_OK;
}

#define T0_US 1700000000000000LL

static tw_batch *marker_batch(const char *job, tw_marker_kind kind,
                              uint64_t seq, int64_t t_us, int64_t latest_us)
{
    tw_batch *b = tw_batch_new();
    if (b == NULL)
        return NULL;
    b->job = job;
    b->node = "replay";
    b->seq = seq;
    b->file_ts_us = t_us;
    b->markers = tw_arena_alloc(&b->arena, sizeof(tw_marker));
    if (b->markers == NULL) {
        tw_batch_free(b);
        return NULL;
    }
    b->markers[0] =
        (tw_marker){.kind = kind, .time_us = t_us, .latest_us = latest_us};
    b->nmarkers = 1;
    return b;
}

/* Minute m of node n: every interval, each GPU's utilization and memory
 * and each core's utilization; a CPU bottleneck on odd nodes. */
static tw_batch *data_batch(const bench_opts *o, const char *job, unsigned n,
                            unsigned m)
{
    tw_batch *b = tw_batch_new();
    if (b == NULL)
        return NULL;
    char node[32];
    snprintf(node, sizeof(node), "algo-%u", n + 1);
    b->job = job;
    b->node = tw_arena_strdup(&b->arena, node);
    b->seq = m + 1;
    b->file_ts_us = T0_US + (int64_t)m * 60000000;
    size_t nseries = (size_t)o->gpus * 2 + o->cores;
    size_t rounds = 60000 / o->interval_ms;
    b->series = tw_arena_alloc(&b->arena, nseries * sizeof(tw_batch_series));
    b->samples =
        tw_arena_alloc(&b->arena, nseries * rounds * sizeof(tw_sample));
    if (b->node == NULL || b->series == NULL || b->samples == NULL) {
        tw_batch_free(b);
        return NULL;
    }
    static const char *gpu_names[] = {"gpu0", "gpu1", "gpu2", "gpu3",
                                      "gpu4", "gpu5", "gpu6", "gpu7"};
    static const char *cpu_names[] = {"cpu0", "cpu1", "cpu2", "cpu3",
                                      "cpu4", "cpu5", "cpu6", "cpu7"};
    for (unsigned g = 0; g < o->gpus; g++) {
        b->series[2 * g] =
            (tw_batch_series){"gpu", gpu_names[g], "GPUUtilization"};
        b->series[2 * g + 1] =
            (tw_batch_series){"gpu", gpu_names[g], "GPUMemoryUtilization"};
    }
    for (unsigned c = 0; c < o->cores; c++)
        b->series[2 * o->gpus + c] =
            (tw_batch_series){"cpu", cpu_names[c], "CPUUtilization"};
    b->nseries = nseries;
    size_t k = 0;
    for (size_t r = 0; r < rounds; r++) {
        double ts = (double)(T0_US / 1000000) + m * 60.0 +
                    (double)r * o->interval_ms / 1000.0;
        for (size_t s = 0; s < nseries; s++) {
            int cpu = s >= 2u * o->gpus;
            double v = (n % 2 == 1) ? (cpu ? 95.0 : 10.0) : 50.0;
            if (!cpu && n % 3 == 0) /* imbalanced GPUs: LoadBalancing */
                v = 10.0 + 25.0 * (double)(s / 2);
            v += (double)((r * 7 + s * 3 + n) % 10);
            b->samples[k++] = (tw_sample){
                .ts = ts, .value = v, .series = (uint32_t)s, .flags = 0};
        }
    }
    b->nsamples = k;
    return b;
}

/* What run does with each message: route it, then send the alerts its
 * scans queued. */
static int route(tw_router *r, int64_t offset, tw_batch *b)
{
    char err[512];
    if (tw_router_batch(r, 0, offset, b, 0) != TW_OK)
        return TW_ERR;
    return tw_router_flush_alerts(r, err, sizeof(err));
}

static int run_one(const bench_opts *o, const tw_config *cfg, tw_registry *reg,
                   unsigned nodes)
{
    char job[64], err[1024];
    snprintf(job, sizeof(job), "nodes-%u", nodes);
    alert_tally tally = {0};
    tw_job_config jc = cfg->job;
    jc.external_watermark = 0;
    tw_router_config rc = {.job = jc,
                           .reg = reg,
                           .rules = cfg->rules,
                           .nrules = cfg->nrules,
                           .job_idle_us = 3600LL * 1000000,
                           .results_dir = o->results};
    tw_router *r = NULL;
    if (tw_router_new(&rc, on_alert, &tally, &r, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_node_scaling: %s\n", err);
        return 1;
    }
    int64_t off = 0;
    uint64_t replay_seq = 1;
    tw_batch *b =
        marker_batch(job, TW_MARKER_JOB_START, replay_seq++, T0_US, 0);
    if (b == NULL || route(r, off++, b) != TW_OK)
        goto fail;
    double first_minute = 0, rest = 0, end_s = 0;
    uint64_t rest_msgs = 0;
    for (unsigned m = 0; m < o->minutes; m++) {
        for (unsigned n = 0; n < nodes; n++) {
            b = data_batch(o, job, n, m);
            if (b == NULL)
                goto fail;
            double t = now_s();
            if (route(r, off++, b) != TW_OK)
                goto fail;
            double dt = now_s() - t;
            if (m == 0) {
                first_minute += dt;
            } else {
                rest += dt;
                rest_msgs++;
            }
        }
    }
    int64_t latest = T0_US + (int64_t)o->minutes * 60000000;
    b = marker_batch(job, TW_MARKER_JOB_END, replay_seq++, latest, latest);
    if (b == NULL)
        goto fail;
    double t = now_s();
    if (route(r, off++, b) != TW_OK)
        goto fail;
    end_s = now_s() - t;
    tw_router_stats st;
    tw_router_get_stats(r, &st);
    long long results_bytes = -1;
    if (o->results != NULL) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%s.json", o->results, job);
        if (stat(path, &sb) == 0)
            results_bytes = (long long)sb.st_size;
    }
    printf("nodes=%u messages=%lld job_us_per_message=%.1f "
           "us_per_message=%.1f "
           "first_minute_us_per_message=%.1f job_end_ms=%.1f scans=%llu "
           "alerts=%llu max_alert_bytes=%zu jobs_finished=%llu "
           "results_bytes=%lld\n",
           nodes, (long long)off,
           (first_minute + rest + end_s) * 1e6 / (double)off,
           rest_msgs ? rest * 1e6 / (double)rest_msgs : 0.0,
           first_minute * 1e6 / nodes, end_s * 1e3,
           (unsigned long long)st.scans, (unsigned long long)tally.n,
           tally.max_len, (unsigned long long)st.jobs_finished, results_bytes);
    fflush(stdout);
    tw_router_free(r);
    return 0;
fail:
    fprintf(stderr,
            "bench_node_scaling: %u nodes: routing failed at offset "
            "%lld\n",
            nodes, (long long)off - 1);
    tw_router_free(r);
    return 1;
}

int main(int argc, char **argv)
{
    bench_opts o = {.minutes = 4, .interval_ms = 5000, .cores = 2, .gpus = 1};
    const char *counts = "1500,3000,6000";
    static const struct option opts[] = {
        {"nodes", required_argument, NULL, 'n'},
        {"minutes", required_argument, NULL, 'm'},
        {"interval-ms", required_argument, NULL, 'i'},
        {"cores", required_argument, NULL, 'c'},
        {"gpus", required_argument, NULL, 'g'},
        {"results", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            counts = optarg;
            break;
        case 'm':
            o.minutes = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'i':
            o.interval_ms = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'c':
            o.cores = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'g':
            o.gpus = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'r':
            o.results = optarg;
            break;
        default:
            fprintf(stderr, "usage: bench_node_scaling [--nodes A,B,...] "
                            "[--minutes M] [--interval-ms MS] [--cores N] "
                            "[--gpus N] [--results DIR]\n");
            return 2;
        }
    }
    if (o.minutes < 2 || o.interval_ms == 0 || o.interval_ms > 60000 ||
        o.cores > 8 || o.gpus > 8) {
        fprintf(stderr, "bench_node_scaling: --minutes >= 2, --interval-ms "
                        "1..60000, --cores and --gpus 0..8\n");
        return 2;
    }
    tw_log_set_level(TW_LOG_WARN);
    char err[1024];
    tw_registry *reg = tw_registry_new();
    tw_config *cfg = NULL;
    if (reg == NULL ||
        tw_config_default(reg, &cfg, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_node_scaling: %s\n",
                reg == NULL ? "out of memory" : err);
        tw_registry_free(reg);
        return 1;
    }
    int rc = 0;
    char *list = strdup(counts);
    for (char *tok = strtok(list, ","); rc == 0 && tok != NULL;
         tok = strtok(NULL, ","))
        rc = run_one(&o, cfg, reg, (unsigned)strtoul(tok, NULL, 10));
    free(list);
    tw_config_free(cfg);
    tw_registry_free(reg);
    return rc;
}
