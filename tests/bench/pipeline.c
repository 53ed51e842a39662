/*
 * pipeline.c - benchmark: FlatBuffers-encoded batches decoded and fed
 * through the job pipeline (aggregator + rules) on one core.
 *
 *   bench_pipeline [--samples N] [--nodes N] [--gpus N] [--cores N]
 *                  [--rounds-per-batch N] [--rules A,B,...]
 *                  [--semantics fixed|reference] [--seed N]
 *
 * Batches are generated and encoded outside the timed region; the timed
 * region is tw_wire_decode() + tw_job_ingest() (which closes scans and runs
 * the rules). Prints samples/s, ns/sample, scans, and peak RSS. Memory is
 * bounded: each batch is generated, encoded, timed and freed in turn.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "job.h"
#include "log.h"
#include "wire.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(rng_next() >> 11) / 9007199254740992.0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct bench_opts {
    uint64_t samples;
    unsigned nodes, gpus, cores, rounds;
    const char *rules;
    tw_semantics semantics;
} bench_opts;

/* One node's batch of `rounds` sampling rounds at 2 Hz, with the CPU
 * bottleneck pattern on odd nodes so both rules have work to do. */
static tw_batch *make_batch(const bench_opts *o, unsigned node, uint64_t seq,
                            double t0, char **names)
{
    tw_batch *b = tw_batch_new();
    if (b == NULL)
        return NULL;
    char nodebuf[32];
    snprintf(nodebuf, sizeof(nodebuf), "algo-%u", node + 1);
    b->job = "bench-job";
    b->node = tw_arena_strdup(&b->arena, nodebuf);
    b->seq = seq;
    size_t nseries = (size_t)o->gpus * 2 + o->cores;
    b->series = tw_arena_alloc(&b->arena, nseries * sizeof(tw_batch_series));
    b->nseries = nseries;
    for (unsigned g = 0; g < o->gpus; g++) {
        b->series[2 * g] = (tw_batch_series){"gpu", names[g], "GPUUtilization"};
        b->series[2 * g + 1] =
            (tw_batch_series){"gpu", names[g], "GPUMemoryUtilization"};
    }
    for (unsigned c = 0; c < o->cores; c++)
        b->series[o->gpus * 2 + c] =
            (tw_batch_series){"cpu", names[o->gpus + c], "CPUUtilization"};
    size_t n = nseries * o->rounds;
    b->samples = tw_arena_alloc(&b->arena, n * sizeof(tw_sample));
    b->nsamples = n;
    size_t k = 0;
    int bottleneck = node % 2 == 1;
    for (unsigned r = 0; r < o->rounds; r++) {
        /* Nodes sample at slightly different instants, as real agents do. */
        double t = t0 + 0.5 * r + 0.000137 * node;
        for (size_t s = 0; s < nseries; s++) {
            double v;
            if (s < (size_t)o->gpus * 2)
                v = s % 2 == 0 ? (bottleneck ? uniform(0, 8) : uniform(60, 100))
                               : uniform(30, 40);
            else
                v = bottleneck && s % 4 == 0 ? uniform(91, 100)
                                             : uniform(5, 60);
            v = (double)(int64_t)(v * 100) /
                100; /* two decimals, like the agent */
            b->samples[k].ts = t + (s < (size_t)o->gpus * 2 ? 0.001 : 0.004);
            b->samples[k].value = v;
            b->samples[k].series = (uint32_t)s;
            k++;
        }
    }
    b->file_ts_us = (int64_t)(t0 / 60) * 60 * 1000000LL;
    return b;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_pipeline [--samples N] [--nodes N] [--gpus N] "
            "[--cores N]\n"
            "                      [--rounds-per-batch N] [--rules A,B] "
            "[--semantics fixed|reference]\n");
}

int main(int argc, char **argv)
{
    bench_opts o = {
        10000000ull,       16, 8, 32, 10, "LowGPUUtilization,CPUBottleneck",
        TW_SEMANTICS_FIXED};
    static const struct option opts[] = {
        {"samples", required_argument, NULL, 'n'},
        {"nodes", required_argument, NULL, 'N'},
        {"gpus", required_argument, NULL, 'g'},
        {"cores", required_argument, NULL, 'c'},
        {"rounds-per-batch", required_argument, NULL, 'r'},
        {"rules", required_argument, NULL, 'R'},
        {"semantics", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            o.samples = strtoull(optarg, NULL, 10);
            break;
        case 'N':
            o.nodes = (unsigned)atoi(optarg);
            break;
        case 'g':
            o.gpus = (unsigned)atoi(optarg);
            break;
        case 'c':
            o.cores = (unsigned)atoi(optarg);
            break;
        case 'r':
            o.rounds = (unsigned)atoi(optarg);
            break;
        case 'R':
            o.rules = optarg;
            break;
        case 's':
            o.semantics = strcmp(optarg, "reference") == 0
                              ? TW_SEMANTICS_REFERENCE
                              : TW_SEMANTICS_FIXED;
            break;
        default:
            usage();
            return 2;
        }
    }
    if (o.nodes == 0 || o.rounds == 0 || o.cores == 0) {
        usage();
        return 2;
    }
    tw_log_set_level(TW_LOG_WARN);

    /* Rule specs from the comma-separated list. */
    char *rules = strdup(o.rules);
    tw_rule_spec specs[16];
    size_t nspecs = 0;
    for (char *tok = strtok(rules, ","); tok != NULL && nspecs < 16;
         tok = strtok(NULL, ","))
        specs[nspecs++] = (tw_rule_spec){.rule = tok};

    tw_registry *reg = tw_registry_new();
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    cfg.semantics = o.semantics;
    tw_job *job;
    char err[1024];
    if (tw_job_new("bench-job", &cfg, reg, specs, nspecs, &job, err,
                   sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_pipeline: %s\n", err);
        return 1;
    }
    char **names = calloc((size_t)o.gpus + o.cores, sizeof(char *));
    for (unsigned g = 0; g < o.gpus; g++) {
        names[g] = malloc(16);
        snprintf(names[g], 16, "gpu%u", g);
    }
    for (unsigned k = 0; k < o.cores; k++) {
        names[o.gpus + k] = malloc(16);
        snprintf(names[o.gpus + k], 16, "cpu%u", k);
    }

    double timed = 0, t_start = now_s();
    uint64_t fed = 0, bytes = 0, batches = 0, seq = 0;
    double t0 = 1700000000.0;
    while (fed < o.samples) {
        for (unsigned node = 0; node < o.nodes && fed < o.samples; node++) {
            tw_batch *b = make_batch(&o, node, seq / o.nodes + 1, t0, names);
            seq++;
            uint8_t *buf;
            size_t len;
            if (b == NULL || tw_wire_encode(b, &buf, &len) != TW_WIRE_OK) {
                fprintf(stderr, "bench_pipeline: encode failed\n");
                return 1;
            }
            tw_batch_free(b);
            double a = now_s();
            tw_batch *d;
            if (tw_wire_decode(buf, len, &d, err, sizeof(err)) != TW_WIRE_OK) {
                fprintf(stderr, "bench_pipeline: decode failed: %s\n", err);
                return 1;
            }
            fed += d->nsamples;
            if (tw_job_ingest(job, d) != TW_OK) {
                fprintf(stderr, "bench_pipeline: ingest failed\n");
                return 1;
            }
            timed += now_s() - a;
            bytes += len;
            batches++;
            free(buf);
        }
        t0 += 0.5 * o.rounds;
    }
    double a = now_s();
    tw_job_finish(job, 0);
    timed += now_s() - a;
    double wall = now_s() - t_start;

    tw_job_stats js;
    tw_job_get_stats(job, &js);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("samples           %llu\n", (unsigned long long)fed);
    printf("batches           %llu (%.1f KiB avg encoded)\n",
           (unsigned long long)batches, (double)bytes / (double)batches / 1024);
    printf("event time        %.1f h (%u nodes, %u GPUs, %u cores each)\n",
           (t0 - 1700000000.0) / 3600, o.nodes, o.gpus, o.cores);
    printf("scans             %llu\n", (unsigned long long)js.scans);
    printf("rules             %s (%s)\n", o.rules,
           o.semantics == TW_SEMANTICS_REFERENCE ? "reference" : "fixed");
    printf("timed seconds     %.3f (decode + ingest + rules)\n", timed);
    printf("samples/s         %.0f\n", (double)fed / timed);
    printf("ns/sample         %.1f\n", timed * 1e9 / (double)fed);
    printf("MB/s decoded      %.1f\n", (double)bytes / timed / 1e6);
    printf("wall seconds      %.3f (including generation and encoding)\n",
           wall);
    printf("peak RSS          %.1f MiB\n", (double)ru.ru_maxrss / 1024);
    for (size_t i = 0; i < tw_job_nrules(job); i++) {
        tw_rule *r = tw_job_rule(job, i);
        const tw_scan_result *res = tw_rule_last_result(r);
        printf("rule %-20s %s datapoints=%lld violations=%lld triggered=%lld\n",
               tw_rule_name(r), tw_rule_status_name(tw_rule_get_status(r)),
               (long long)res->datapoints, (long long)res->violations,
               (long long)res->rule_triggered);
    }
    for (unsigned k = 0; k < o.gpus + o.cores; k++)
        free(names[k]);
    free(names);
    free(rules);
    tw_job_free(job);
    tw_registry_free(reg);
    return 0;
}
