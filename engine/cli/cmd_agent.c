/*
 * cmd_agent.c - `trainwatch agent`: samples this host (host_sampler.h) at a
 * fixed interval and publishes the samples as metric batches (wire.h) on
 * Kafka, keyed by the job id, as the profiler agent beside a training node
 * would.
 *
 * Batches: one per interval, or per second when the interval is shorter
 * (the rounds of that second together), never spanning two UTC minutes;
 * file_ts_us = the start of the UTC minute of its samples (the agent's
 * file naming, RULES.md §1.1). Sequence numbers run 1, 2, ... for this
 * (job, node): 1 is the JOB_START marker (with the sampling interval), the
 * last the JOB_END marker sent when --duration is over or on SIGINT/SIGTERM.
 * With --profiler-config, JOB_START carries the job's ProfilerConfig (JSON,
 * validated by the hook's table, profiler_config.h), as the hook's does.
 * With --profiler-output DIR the same samples also go to DIR in the legacy
 * layout (legacy_system_writer.h), beside the hook's framework/ files.
 *
 * Exit status: 0 everything delivered, 1 a failure (sampling, Kafka),
 * 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli_options.h"
#include "clock.h"
#include "commands.h"
#include "host_sampler.h"
#include "kafka_producer.h"
#include "legacy_system_writer.h"
#include "log.h"
#include "profiler_config.h"
#include "signals.h"
#include "wire.h"

#define TW_AGENT_MAX_PROPS 64
#define TW_AGENT_FLUSH_MS 15000

static const uint32_t tw_agent_intervals[] = {100, 200, 500, 1000, 5000, 60000};

enum {
    OPT_BROKERS = 1,
    OPT_JOB,
    OPT_INTERVAL,
    OPT_NODE,
    OPT_DURATION,
    OPT_TOPIC,
    OPT_NO_GPUS,
    OPT_PROP,
    OPT_QUIET,
    OPT_PROFILER_CONFIG,
    OPT_PROFILER_OUTPUT,
    OPT_PROFILER_OUTPUT_MAX_MB
};

static const tw_cli_option tw_agent_options[] = {
    {"brokers", 0, "B", "bootstrap servers, host:port[,host:port] (required)",
     OPT_BROKERS},
    {"job", 0, "J", "job id: the Kafka key (required)", OPT_JOB},
    {"interval-ms", 0, "MS",
     "sampling interval: 100, 200, 500, 1000, 5000 or 60000 (default 500)",
     OPT_INTERVAL},
    {"node", 0, "NAME", "node id of the samples (default: this host's name)",
     OPT_NODE},
    {"duration", 0, "S",
     "stop after S seconds (decimals allowed; default: run until "
     "SIGINT/SIGTERM)",
     OPT_DURATION},
    {"profiler-config", 0, "JSON|@FILE",
     "the job's ProfilerConfig as JSON (the hook's ProfilerConfig.to_dict() "
     "form), or @FILE holding it: validated as the hook validates it and "
     "sent in JOB_START; its system_monitor_interval_millis is the "
     "sampling interval (--interval-ms, if given, must equal it)",
     OPT_PROFILER_CONFIG},
    {"profiler-output", 0, "DIR",
     "also write the samples in the legacy profiler-output layout under "
     "DIR (system/incremental/<hour>/<minute>.<node>.json, the end marker "
     "when the last writer of DIR closes), for `trainwatch eval DIR`; "
     "needs --node algo-<N>",
     OPT_PROFILER_OUTPUT},
    {"profiler-output-max-mb", 0, "MB",
     "at most MB megabytes written under --profiler-output (default "
     "10240); samples past it are dropped from the folder and counted, "
     "still streamed",
     OPT_PROFILER_OUTPUT_MAX_MB},
    {"topic", 0, "T", "topic (default trainwatch.metrics)", OPT_TOPIC},
    {"no-gpus", 0, NULL, "do not load NVML", OPT_NO_GPUS},
    {NULL, 'X', "KEY=VALUE",
     "librdkafka property, e.g. security.protocol=SASL_SSL (repeatable)",
     OPT_PROP},
    {"quiet", 'q', NULL, "no log lines below warnings", OPT_QUIET},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command tw_agent_command = {
    .name = "agent",
    .synopsis = "--brokers B --job J [options]",
    .description =
        "Samples this host like the profiler agent beside a training node\n"
        "and publishes the samples to Kafka as FlatBuffers batches keyed\n"
        "by the job id: per-core CPUUtilization and I/OWaitPercentage\n"
        "(/proc/stat), MemoryUsedPercent (/proc/meminfo), network bytes/s\n"
        "(/proc/net/dev, all interfaces but lo, Dimension Algorithm), disk\n"
        "IOPS and throughput (/proc/diskstats), and GPUUtilization and\n"
        "GPUMemoryUtilization through NVML when libnvidia-ml.so.1 loads\n"
        "(otherwise GPUs are skipped, said once in the log).\n"
        "\n"
        "It sends a JOB_START marker first (sequence number 1, with the\n"
        "interval), then one batch per interval (per second when the\n"
        "interval is shorter), then a JOB_END marker when --duration is\n"
        "over or on SIGINT/SIGTERM, and prints a summary line on stdout.\n"
        "Agents on several hosts may share a job id (one --node each):\n"
        "the engine ends the job when every agent that sent JOB_START\n"
        "has sent JOB_END.\n"
        "\n"
        "With --profiler-output DIR it also writes the samples it sends\n"
        "as legacy system files (DIR/system/incremental/<YYYYMMDDHH>/\n"
        "<minute>.<node>.json, JSON lines), so that with the hook's\n"
        "Hook(profiler_output=DIR) the folder is complete for\n"
        "`trainwatch eval DIR`; of the agent and the hook, the last to\n"
        "close writes the end marker. A sample that cannot be written is\n"
        "dropped from the folder and counted, never from the stream.\n",
    .options = tw_agent_options,
    .epilogue = "Exit status: 0 when every batch was delivered, 1 on a "
                "failure,\n2 on bad usage.\n",
};

/* What the options ask for. */
typedef struct tw_agent_cmd {
    const char *brokers, *job, *node, *topic;
    const char *profiler_arg; /* --profiler-config as given */
    const char *output_dir;   /* --profiler-output, or NULL */
    uint64_t output_max_bytes;
    char *profiler_config; /* its validated JSON text (owned) */
    int interval_given;
    uint32_t interval_ms;
    double duration_s; /* 0: until a signal */
    int gpus;
    const char *props[TW_AGENT_MAX_PROPS];
    size_t nprops;
    char hostname[256];
} tw_agent_cmd;

static int tw_agent_interval_ok(uint32_t ms)
{
    for (size_t i = 0;
         i < sizeof(tw_agent_intervals) / sizeof(tw_agent_intervals[0]); i++)
        if (tw_agent_intervals[i] == ms)
            return 1;
    return 0;
}

static int64_t tw_agent_minute_us(double ts_s)
{
    return (int64_t)floor(ts_s / 60.0) * 60 * 1000000;
}

typedef struct tw_agent {
    tw_producer *producer;
    const char *profiler_config; /* JOB_START's, or NULL */
    const char *topic;
    const char *job;
    const char *node;
    tw_legacy_sys *legacy; /* --profiler-output's writer, or NULL */
    uint64_t next_seq;
    uint64_t batches, samples, bytes;
} tw_agent;

static int tw_agent_publish(tw_agent *a, tw_batch *b)
{
    b->job = a->job;
    b->node = a->node;
    b->seq = a->next_seq;
    uint8_t *buf = NULL;
    size_t len = 0;
    tw_wire_status st = tw_wire_encode(b, &buf, &len);
    if (st != TW_WIRE_OK) {
        tw_log(TW_LOG_ERROR, "agent: cannot encode batch %" PRIu64 ": %s",
               b->seq, tw_wire_status_name(st));
        return -1;
    }
    char err[512];
    int rc = tw_producer_send(a->producer, a->topic, a->job, buf, len, NULL, 0,
                              err, sizeof(err));
    free(buf);
    if (rc != 0) {
        tw_log(TW_LOG_ERROR, "agent: %s", err);
        return -1;
    }
    a->next_seq++;
    a->batches++;
    a->samples += b->nsamples;
    a->bytes += len;
    return 0;
}

static int tw_agent_marker(tw_agent *a, tw_marker_kind kind,
                           uint32_t interval_ms, int64_t time_us)
{
    tw_marker m = {
        .kind = kind, .time_us = time_us, .sampling_interval_ms = interval_ms};
    if (kind == TW_MARKER_JOB_START)
        m.profiler_config = a->profiler_config;
    tw_batch b;
    memset(&b, 0, sizeof(b));
    b.file_ts_us = tw_agent_minute_us((double)m.time_us / 1e6);
    b.markers = &m;
    b.nmarkers = 1;
    return tw_agent_publish(a, &b);
}

/* Publishes the pending samples (all of one UTC minute) and empties vec. */
static int tw_agent_flush_samples(tw_agent *a, const tw_host_sampler *hs,
                                  tw_sample_vec *vec)
{
    if (vec->n == 0)
        return 0;
    tw_batch b;
    memset(&b, 0, sizeof(b));
    b.series = (tw_batch_series *)tw_host_sampler_series(hs, &b.nseries);
    b.samples = vec->v;
    b.nsamples = vec->n;
    b.file_ts_us = tw_agent_minute_us(vec->v[0].ts);
    int rc = tw_agent_publish(a, &b);
    if (a->legacy != NULL)
        tw_legacy_sys_write(a->legacy, b.series, b.samples, b.nsamples);
    vec->n = 0;
    return rc;
}

/* One option into c; -1 on a bad value (said on stderr). */
static int tw_agent_cmd_option(tw_agent_cmd *c, int id, const char *arg)
{
    char *end = NULL;
    errno = 0;
    switch (id) {
    case OPT_BROKERS:
        c->brokers = arg;
        break;
    case OPT_JOB:
        c->job = arg;
        break;
    case OPT_NODE:
        c->node = arg;
        break;
    case OPT_TOPIC:
        c->topic = arg;
        break;
    case OPT_INTERVAL: {
        unsigned long v = strtoul(arg, &end, 10);
        if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' ||
            v > UINT32_MAX || !tw_agent_interval_ok((uint32_t)v)) {
            fprintf(stderr,
                    "trainwatch agent: --interval-ms '%s': the agent "
                    "samples every 100, 200, 500, 1000, 5000 or 60000 "
                    "ms only\n",
                    arg);
            return -1;
        }
        c->interval_ms = (uint32_t)v;
        c->interval_given = 1;
        break;
    }
    case OPT_PROFILER_CONFIG:
        c->profiler_arg = arg;
        break;
    case OPT_PROFILER_OUTPUT:
        c->output_dir = arg;
        break;
    case OPT_PROFILER_OUTPUT_MAX_MB: {
        unsigned long long mb = strtoull(arg, &end, 10);
        if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' ||
            mb == 0 || mb > 1000000000ULL) {
            fprintf(stderr,
                    "trainwatch agent: --profiler-output-max-mb '%s': "
                    "expected megabytes > 0\n",
                    arg);
            return -1;
        }
        c->output_max_bytes = (uint64_t)mb * 1000000;
        break;
    }
    case OPT_DURATION:
        c->duration_s = strtod(arg, &end);
        if (errno != 0 || end == arg || *end != '\0' || !(c->duration_s > 0) ||
            c->duration_s > 1e9) {
            fprintf(stderr,
                    "trainwatch agent: --duration '%s': expected "
                    "seconds > 0\n",
                    arg);
            return -1;
        }
        break;
    case OPT_NO_GPUS:
        c->gpus = 0;
        break;
    case OPT_PROP:
        if (c->nprops == TW_AGENT_MAX_PROPS) {
            fprintf(stderr, "trainwatch agent: at most %d -X options\n",
                    TW_AGENT_MAX_PROPS);
            return -1;
        }
        c->props[c->nprops++] = arg;
        break;
    case OPT_QUIET:
        tw_log_set_level(TW_LOG_WARN);
        break;
    }
    return 0;
}

/* --profiler-config: the JSON text (from @FILE: the file's JSON, compact)
 * into c->profiler_config, validated; its interval is the sampling
 * interval. -1 on an error (said on stderr). */
static int tw_agent_profiler_config(tw_agent_cmd *c)
{
    const char *arg = c->profiler_arg;
    if (arg[0] == '@') {
        json_error_t je;
        json_t *root = json_load_file(arg + 1, JSON_REJECT_DUPLICATES, &je);
        if (root == NULL) {
            fprintf(stderr,
                    "trainwatch agent: --profiler-config %s: line %d "
                    "column %d: %s\n",
                    arg, je.line, je.column, je.text);
            return -1;
        }
        c->profiler_config = json_dumps(root, JSON_COMPACT);
        json_decref(root);
    } else {
        c->profiler_config = strdup(arg);
    }
    if (c->profiler_config == NULL) {
        fprintf(stderr, "trainwatch agent: --profiler-config: out of "
                        "memory\n");
        return -1;
    }
    char err[512];
    size_t len = strlen(c->profiler_config);
    if (tw_profiler_config_check(c->profiler_config, len, err, sizeof(err)) !=
        0) {
        fprintf(stderr, "trainwatch agent: --profiler-config: %s\n", err);
        return -1;
    }
    uint32_t ms = 500; /* ProfilerConfig's default */
    if (tw_profiler_config_interval(c->profiler_config, len, &ms) < 0) {
        fprintf(stderr, "trainwatch agent: --profiler-config: not a JSON "
                        "object\n");
        return -1;
    }
    if (c->interval_given && ms != c->interval_ms) {
        fprintf(stderr,
                "trainwatch agent: --interval-ms %" PRIu32
                " and --profiler-config's "
                "system_monitor_interval_millis %" PRIu32 " differ\n",
                c->interval_ms, ms);
        return -1;
    }
    c->interval_ms = ms;
    return 0;
}

/* Defaults, then the options: -1 to exit with *status (0 after --help,
 * 2 on bad usage). */
static int tw_agent_cmd_load(tw_agent_cmd *c, int argc, char **argv,
                             int *status)
{
    memset(c, 0, sizeof(*c));
    c->topic = "trainwatch.metrics";
    c->interval_ms = 500;
    c->output_max_bytes = (uint64_t)10240 * 1000000;
    c->gpus = 1;
    *status = 2;
    tw_cli_parser p;
    tw_cli_begin(&p, &tw_agent_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        if (id == TW_CLI_HELP)
            *status = 0;
        if (id < 0 || tw_agent_cmd_option(c, id, p.arg) != 0)
            return -1;
    }
    if (p.optind < argc) {
        fprintf(stderr, "trainwatch agent: unexpected argument '%s'\n",
                argv[p.optind]);
        return -1;
    }
    if (c->brokers == NULL || c->job == NULL || c->job[0] == '\0') {
        fprintf(stderr, "trainwatch agent: --brokers and --job are required "
                        "(see --help)\n");
        return -1;
    }
    if (c->profiler_arg != NULL && tw_agent_profiler_config(c) != 0)
        return -1;
    if (c->node == NULL) {
        if (gethostname(c->hostname, sizeof(c->hostname)) != 0) {
            fprintf(stderr,
                    "trainwatch agent: cannot read the host name "
                    "(%s): give --node\n",
                    strerror(errno));
            return -1;
        }
        c->hostname[sizeof(c->hostname) - 1] = '\0';
        c->node = c->hostname;
    }
    if (c->output_dir != NULL && !tw_legacy_sys_node_ok(c->node)) {
        fprintf(stderr,
                "trainwatch agent: --profiler-output needs --node "
                "algo-<N> (node '%s'): the legacy reader reads system "
                "files of such nodes only\n",
                c->node);
        return -1;
    }
    return 0;
}

/* The sampler and the producer. */
static int tw_agent_open(const tw_agent_cmd *c, tw_agent *a,
                         tw_host_sampler **hs)
{
    char err[512];
    tw_host_sampler_opts so = {.proc_root = NULL, .gpus = c->gpus};
    if (tw_host_sampler_new(&so, hs, err, sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "agent: %s", err);
        return -1;
    }
    *a = (tw_agent){.topic = c->topic,
                    .job = c->job,
                    .node = c->node,
                    .profiler_config = c->profiler_config,
                    .next_seq = 1};
    if (tw_producer_new(c->brokers, c->props, c->nprops, &a->producer, err,
                        sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "agent: %s", err);
        return -1;
    }
    tw_log(TW_LOG_INFO,
           "agent: job '%s' node '%s': %zu core(s), %zu GPU(s), every %" PRIu32
           " ms to %s topic %s",
           c->job, c->node, tw_host_sampler_cpus(*hs),
           tw_host_sampler_gpus(*hs), c->interval_ms, c->brokers, c->topic);
    return 0;
}

/* One round's samples into vec; a batch holds one UTC minute, so what
 * came before a new minute is published first. */
static int tw_agent_round(tw_agent *a, tw_host_sampler *hs, tw_sample_vec *vec)
{
    char err[512];
    size_t before = vec->n;
    if (tw_host_sampler_sample(hs, vec, err, sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "agent: %s", err);
        return -1;
    }
    if (before > 0 && vec->n > before &&
        tw_agent_minute_us(vec->v[before].ts) !=
            tw_agent_minute_us(vec->v[0].ts)) {
        size_t fresh = vec->n - before;
        tw_sample_vec head = {.v = vec->v, .n = before, .cap = vec->cap};
        if (tw_agent_flush_samples(a, hs, &head) != 0)
            return -1;
        memmove(vec->v, vec->v + before, fresh * sizeof(*vec->v));
        vec->n = fresh;
    }
    return 0;
}

/* JOB_START, a batch per interval (per second when shorter) until the
 * duration is over or a signal comes, then JOB_END and a flush. */
static int tw_agent_run(const tw_agent_cmd *c, tw_agent *a, tw_host_sampler *hs,
                        sigset_t *sigs, int64_t start_ms)
{
    uint32_t interval_ms = c->interval_ms;
    int64_t stop_ms = c->duration_s > 0
                          ? start_ms + (int64_t)(c->duration_s * 1000)
                          : INT64_MAX;
    int64_t batch_ms = interval_ms < 1000 ? 1000 : interval_ms;
    int64_t last_batch_ms = start_ms;
    tw_sample_vec vec = {0};
    const char *why = "duration reached";
    int rc = -1;
    char err[512];

    int64_t start_us = tw_wall_us();
    if (c->output_dir != NULL &&
        tw_legacy_sys_open(c->output_dir, c->node, start_us,
                           c->output_max_bytes, &a->legacy, err,
                           sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "agent: %s", err);
        goto out;
    }
    if (tw_agent_marker(a, TW_MARKER_JOB_START, interval_ms, start_us) != 0)
        goto out;
    for (uint64_t round = 1;; round++) {
        int64_t next = start_ms + (int64_t)round * interval_ms;
        int64_t now = (tw_mono_us() / 1000);
        if (next > stop_ms) {
            /* Wait out the rest of the duration, then stop. */
            int sig = stop_ms > now ? tw_signals_wait(sigs, stop_ms - now)
                                    : tw_signals_wait(sigs, 0);
            if (sig != 0)
                why = tw_signals_name(sig);
            break;
        }
        int sig = tw_signals_wait(sigs, next > now ? next - now : 0);
        if (sig != 0) {
            why = tw_signals_name(sig);
            break;
        }
        if (tw_agent_round(a, hs, &vec) != 0)
            goto out;
        now = (tw_mono_us() / 1000);
        if (now - last_batch_ms >= batch_ms - interval_ms / 2) {
            if (tw_agent_flush_samples(a, hs, &vec) != 0)
                goto out;
            last_batch_ms = now;
        }
        tw_producer_poll(a->producer, 0);
    }
    tw_log(TW_LOG_INFO, "agent: %s, sending JOB_END", why);
    if (tw_agent_flush_samples(a, hs, &vec) != 0 ||
        tw_agent_marker(a, TW_MARKER_JOB_END, interval_ms, tw_wall_us()) != 0)
        goto out;
    if (tw_producer_flush(a->producer, TW_AGENT_FLUSH_MS, err, sizeof(err)) !=
        0) {
        tw_log(TW_LOG_ERROR, "agent: %s", err);
        goto out;
    }
    rc = 0;
out:
    free(vec.v);
    return rc;
}

/* The summary line on stdout. */
static void tw_agent_report(const tw_agent_cmd *c, const tw_agent *a,
                            const tw_legacy_sys_stats *ls, int64_t start_ms)
{
    tw_producer_stats ps;
    tw_producer_get_stats(a->producer, &ps);
    double secs = (double)((tw_mono_us() / 1000) - start_ms) / 1000.0;
    printf("agent: job=%s node=%s batches=%" PRIu64 " samples=%" PRIu64
           " delivered=%" PRIu64 " failed=%" PRIu64 " mb=%.3f seconds=%.1f\n",
           c->job, c->node, a->batches, a->samples, ps.delivered, ps.failed,
           (double)a->bytes / 1e6, secs);
    if (c->output_dir != NULL) {
        printf("agent: profiler-output=%s files=%" PRIu64 " lines=%" PRIu64
               " mb=%.3f dropped=%" PRIu64 " errors=%" PRIu64 "\n",
               c->output_dir, ls->files, ls->lines, (double)ls->bytes / 1e6,
               ls->dropped, ls->errors);
        if (ls->dropped > 0 || ls->errors > 0)
            tw_log(TW_LOG_WARN,
                   "agent: %" PRIu64 " sample(s) not written under %s "
                   "(%" PRIu64 " error(s)): the folder misses them",
                   ls->dropped, c->output_dir, ls->errors);
    }
    fflush(stdout);
}

int tw_cmd_agent(int argc, char **argv)
{
    tw_agent_cmd c;
    int status;
    if (tw_agent_cmd_load(&c, argc, argv, &status) != 0) {
        free(c.profiler_config);
        return status;
    }
    sigset_t sigs;
    if (tw_signals_block(&sigs) != 0) {
        tw_log(TW_LOG_ERROR, "agent: cannot block signals: %s",
               strerror(errno));
        free(c.profiler_config);
        return 1;
    }
    tw_host_sampler *hs = NULL;
    tw_agent a = {0};
    status = 1;
    if (tw_agent_open(&c, &a, &hs) == 0) {
        int64_t start_ms = (tw_mono_us() / 1000);
        if (tw_agent_run(&c, &a, hs, &sigs, start_ms) == 0)
            status = 0;
        /* The folder closes after JOB_END was sent. */
        tw_legacy_sys_stats ls = {0};
        tw_legacy_sys_close(a.legacy, tw_wall_us(), &ls);
        a.legacy = NULL;
        tw_agent_report(&c, &a, &ls, start_ms);
    }
    tw_producer_free(a.producer);
    tw_host_sampler_free(hs);
    free(c.profiler_config);
    return status;
}
