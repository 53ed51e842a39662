/*
 * scale_producer.c - the agents of a large job for the scale benchmark
 * (tests/bench/scale.sh runs it; see there and README "Benchmarks").
 *
 *   bench_scale_producer --brokers B --group G --results DIR
 *       [--topic T] [--alerts-topic A] [--jobs K] [--nodes N] [--gpus G]
 *       [--cores C] [--interval-ms MS] [--event-minutes M]
 *       [--bottleneck-every E] [--max-lag BYTES] [--compression CODEC]
 *       [--wait-s S] [--realtime] [--noise]
 *
 * N nodes split over K jobs (job "scale-<k>" to partition k mod the
 * topic's partitions, keyed by its id). Every --interval-ms of event time
 * each node's agent sends one batch, encoded as FlatBuffers by the wire
 * encoder (wire.h): per GPU its utilization and memory utilization, per
 * core its utilization and I/O wait, host memory, two network and three
 * I/O series (what `synth` writes per round: 2G + 2C + 6 samples), values
 * in hundredths as an agent reports them (--noise: the part that varies
 * drawn at random, as real utilization's low digits are, instead of a
 * regular pattern that compresses far better than real data). Every
 * E-th node has a CPU
 * bottleneck (CPU > 90 %, GPU < 10 %), so rules fire and alerts flow.
 * Rounds go out as fast as the engine keeps up: before each message the
 * partition's flow control (replay_flow.h, replay's) waits while more
 * than --max-lag bytes of it are unread by group G; with --realtime
 * round r also waits until r x interval of wall time has passed (the
 * agents' own pace). A JOB_START marker
 * opens each job and a JOB_END marker (latest time known) ends it.
 *
 * Meanwhile it reads the alert topic. An alert names the metrics message
 * whose batch completed its scan (headers); latency = alert received -
 * that message's CreateTime (set here when it was queued, 1 ms
 * resolution; matched by its delivery report's offset).
 *
 * It exits once every job's results file is in DIR (or after --wait-s),
 * printing on stdout:
 *   producer: jobs= nodes= ... batches= samples= bytes= wall_s= cpu_s=
 *             flow_waits= flow_wait_s= failed=
 *   alerts: received= matched= p50_ms= p99_ms= max_ms=
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "bench_alerts.h"

#include "clock.h"
#include "log.h"
#include "replay.h" /* TW_REPLAY_MARKER_NODE, flow bounds */
#include "replay_flow.h"
#include "wire.h"

#define T0_S 1700000000LL /* event time of the first round */
#define MAX_PARTS 1024

typedef struct scale_opts {
    const char *brokers, *group, *results, *topic, *alerts_topic;
    const char *compression;
    unsigned jobs, nodes, gpus, cores, interval_ms, event_minutes;
    unsigned bottleneck_every, wait_s;
    int realtime; /* round r not before start + r x interval of wall time */
    int noise;    /* the 0-9.99 part of each value random, not a pattern */
    uint64_t max_lag;
} scale_opts;

/* CreateTime (ms) of every delivered message of one partition, by
 * offset (the topic is new: offsets start at 0). */
typedef struct part_times {
    int64_t *ms;
    size_t cap;
} part_times;

/* One received alert that names its completing message. */
typedef struct alert_seen {
    int64_t recv_ms;
    int32_t partition;
    int64_t offset;
    int final; /* a rule's verdict at the job's end, not raised mid-job */
} alert_seen;

typedef struct scale {
    scale_opts o;
    rd_kafka_t *prod, *cons;
    int nparts; /* the topic's */
    int nused;  /* partitions the jobs go to: min(jobs, nparts) */
    tw_replay_flow *flow[MAX_PARTS];
    part_times times[MAX_PARTS];
    uint64_t failed, alerts;
    alert_seen *seen;
    size_t nseen, capseen;
    /* one node's batch layout, shared by every node */
    tw_batch_series *series;
    tw_sample *samples;
    size_t nseries;
    char **names;
} scale;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench_scale_producer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (p == NULL)
        die("out of memory");
    return p;
}

static void conf_set(rd_kafka_conf_t *c, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(c, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK)
        die("kafka property %s=%s: %s", k, v, err);
}

static void record_time(part_times *t, int64_t offset, int64_t ms)
{
    if (offset < 0)
        return;
    if ((size_t)offset >= t->cap) {
        size_t cap = t->cap ? t->cap : 65536;
        while (cap <= (size_t)offset)
            cap *= 2;
        int64_t *ms_new = realloc(t->ms, cap * sizeof(int64_t));
        if (ms_new == NULL)
            die("out of memory");
        memset(ms_new + t->cap, 0, (cap - t->cap) * sizeof(int64_t));
        t->ms = ms_new;
        t->cap = cap;
    }
    t->ms[offset] = ms;
}

/* Delivery report: the partition's flow control learns where the message
 * landed; its CreateTime is kept for the alert latency. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *ud)
{
    (void)rk;
    scale *s = ud;
    int ok = m->err == RD_KAFKA_RESP_ERR_NO_ERROR;
    if (!ok)
        s->failed++;
    if (m->partition < 0 || m->partition >= s->nused)
        return;
    tw_replay_flow_on_delivery(s->flow[m->partition], s->o.topic, m->partition,
                               ok ? m->offset : -1, m->len, ok);
    if (ok) /* the queue time publish() set as CreateTime and opaque */
        record_time(&s->times[m->partition], m->offset,
                    (int64_t)(intptr_t)m->_private);
}

/* Reads every alert available now. */
static void drain_alerts(scale *s)
{
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consumer_poll(s->cons, 0)) != NULL) {
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            s->alerts++;
            int64_t part = bench_header_int(m, "trainwatch.source.partition");
            int64_t off = bench_header_int(m, "trainwatch.source.offset");
            if (part >= 0 && off >= 0) {
                if (s->nseen == s->capseen) {
                    s->capseen = s->capseen ? 2 * s->capseen : 4096;
                    s->seen = realloc(s->seen, s->capseen * sizeof(*s->seen));
                    if (s->seen == NULL)
                        die("out of memory");
                }
                /* the engine writes compact JSON: "final":true|false */
                int final = m->payload != NULL &&
                            memmem(m->payload, m->len, "\"final\":true", 12);
                s->seen[s->nseen++] = (alert_seen){tw_wall_us() / 1000,
                                                   (int32_t)part, off, final};
            }
        }
        rd_kafka_message_destroy(m);
    }
}

static int topic_partitions(rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int n = -1;
    for (int attempt = 0; attempt < 20 && n <= 0; attempt++) {
        if (rd_kafka_metadata(rk, 0, t, &md, 5000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (md->topic_cnt == 1 && md->topics[0].err == 0)
                n = md->topics[0].partition_cnt;
            rd_kafka_metadata_destroy(md);
        }
        if (n <= 0)
            usleep(250000);
    }
    rd_kafka_topic_destroy(t);
    if (n <= 0)
        die("topic %s: no metadata", topic);
    return n;
}

static void open_clients(scale *s)
{
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    conf_set(c, "bootstrap.servers", s->o.brokers);
    conf_set(c, "linger.ms", "5");
    conf_set(c, "queue.buffering.max.kbytes", "262144");
    conf_set(c, "compression.type", s->o.compression);
    rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
    rd_kafka_conf_set_opaque(c, s);
    s->prod = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
    if (s->prod == NULL)
        die("producer: %s", err);
    s->nparts = topic_partitions(s->prod, s->o.topic);
    if (s->nparts > MAX_PARTS)
        die("topic %s has more than %d partitions", s->o.topic, MAX_PARTS);
    s->nused = s->nparts < (int)s->o.jobs ? s->nparts : (int)s->o.jobs;
    for (int p = 0; p < s->nused; p++) {
        tw_replay_flow_config fc = {.brokers = s->o.brokers,
                                    .group = s->o.group,
                                    .topic = s->o.topic,
                                    .max_bytes = s->o.max_lag,
                                    .max_messages = TW_REPLAY_MAX_LAG_MESSAGES};
        if (tw_replay_flow_new(&fc, &s->flow[p], err, sizeof(err)) != 0)
            die("%s", err);
    }
    c = rd_kafka_conf_new();
    conf_set(c, "bootstrap.servers", s->o.brokers);
    conf_set(c, "group.id", "bench-scale-alerts");
    conf_set(c, "fetch.wait.max.ms", "5");
    s->cons = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
    if (s->cons == NULL)
        die("alert consumer: %s", err);
    rd_kafka_poll_set_consumer(s->cons);
    int ap = topic_partitions(s->cons, s->o.alerts_topic);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(ap);
    for (int p = 0; p < ap; p++)
        rd_kafka_topic_partition_list_add(l, s->o.alerts_topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(s->cons, l);
    rd_kafka_topic_partition_list_destroy(l);
}

static char *fmt_name(const char *fmt, unsigned i)
{
    char buf[32];
    snprintf(buf, sizeof(buf), fmt, i);
    char *d = strdup(buf);
    if (d == NULL)
        die("out of memory");
    return d;
}

/* The series of one node's agent, in synth's order. */
static void build_layout(scale *s)
{
    const scale_opts *o = &s->o;
    s->nseries = 2u * o->gpus + 2u * o->cores + 6u;
    s->series = xcalloc(s->nseries, sizeof(*s->series));
    s->samples = xcalloc(s->nseries, sizeof(*s->samples));
    s->names = xcalloc(o->gpus + o->cores, sizeof(char *));
    size_t k = 0;
    for (unsigned g = 0; g < o->gpus; g++) {
        s->names[g] = fmt_name("gpu%u", g);
        s->series[k++] =
            (tw_batch_series){"gpu", s->names[g], "GPUUtilization"};
        s->series[k++] =
            (tw_batch_series){"gpu", s->names[g], "GPUMemoryUtilization"};
    }
    for (unsigned c = 0; c < o->cores; c++) {
        s->names[o->gpus + c] = fmt_name("cpu%u", c);
        s->series[k++] =
            (tw_batch_series){"cpu", s->names[o->gpus + c], "CPUUtilization"};
        s->series[k++] = (tw_batch_series){"cpu", s->names[o->gpus + c],
                                           "I/OWaitPercentage"};
    }
    s->series[k++] = (tw_batch_series){"memory", "MemoryUsedPercent", ""};
    s->series[k++] =
        (tw_batch_series){"network", "ReceiveBytesPerSecond", "Algorithm"};
    s->series[k++] =
        (tw_batch_series){"network", "TransmitBytesPerSecond", "Algorithm"};
    s->series[k++] = (tw_batch_series){"i/o", "IOPS", ""};
    s->series[k++] =
        (tw_batch_series){"i/o", "ReadThroughputInBytesPerSecond", ""};
    s->series[k++] =
        (tw_batch_series){"i/o", "WriteThroughputInBytesPerSecond", ""};
}

/* The unrounded value of series k of node n at round r (sample_value). */
static double sample_value_raw(const scale *s, unsigned n, unsigned r, size_t k)
{
    const scale_opts *o = &s->o;
    /* nodes 1, 1 + E, 1 + 2E, ...: with E = 1 every node (n % 1 is 0) */
    int bottleneck = o->bottleneck_every > 0 &&
                     n % o->bottleneck_every == 1u % o->bottleneck_every;
    double wiggle =
        (double)((r * 7u + (unsigned)k * 13u + n * 3u) % 1000u) / 100;
    if (o->noise) { /* a splitmix64 hash of (n, r, k): 0.00-9.99 */
        uint64_t z = ((uint64_t)n << 40 ^ (uint64_t)r << 16 ^ (uint64_t)k) +
                     0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        wiggle = (double)((z ^ (z >> 31)) % 1000u) / 100;
    }
    size_t gpu_end = 2u * o->gpus, cpu_end = gpu_end + 2u * o->cores;
    if (k < gpu_end)
        return k % 2 == 0
                   ? (bottleneck ? 0.0 : 70.0) + wiggle * (bottleneck ? 0.5 : 2)
                   : 40.0 + wiggle;
    if (k < cpu_end)
        return (k - gpu_end) % 2 == 0
                   ? (bottleneck ? 91.0 : 35.0) + wiggle * 0.8
                   : wiggle / 10;
    return k == cpu_end ? 30.0 + wiggle : 1000.0 * (100 + wiggle);
}

/* Value of series k of node n at round r: a base by kind plus 0-9.99 in
 * hundredths that moves with r, k and n, rounded to hundredths as the
 * agent reports its values (../shared/data/smdebug: "Value":4.76). */
static double sample_value(const scale *s, unsigned n, unsigned r, size_t k)
{
    return round(sample_value_raw(s, n, r, k) * 100) / 100;
}

static void wait_flow(scale *s, int p, size_t len)
{
    rd_kafka_poll(s->prod, 0);
    if (!tw_replay_flow_blocked(s->flow[p], len))
        return;
    for (;;) {
        tw_replay_flow_refresh(s->flow[p]);
        if (!tw_replay_flow_blocked(s->flow[p], len))
            break;
        tw_replay_flow_report(s->flow[p], 1, tw_mono_us());
        if (s->failed > 0)
            die("a delivery failed while waiting for group %s", s->o.group);
        drain_alerts(s);
        rd_kafka_poll(s->prod, 10);
    }
    tw_replay_flow_report(s->flow[p], 0, tw_mono_us());
}

/* Encodes b and queues it for partition p (flow control first). */
static size_t publish(scale *s, int p, const tw_batch *b)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    tw_wire_status st = tw_wire_encode(b, &buf, &len);
    if (st != TW_WIRE_OK)
        die("encode: %s", tw_wire_status_name(st));
    wait_flow(s, p, len);
    tw_replay_flow_queued(s->flow[p], len);
    for (;;) {
        int64_t now_ms = tw_wall_us() / 1000;
        rd_kafka_resp_err_t e = rd_kafka_producev(
            s->prod, RD_KAFKA_V_TOPIC(s->o.topic), RD_KAFKA_V_PARTITION(p),
            RD_KAFKA_V_KEY(b->job, strlen(b->job)), RD_KAFKA_V_VALUE(buf, len),
            RD_KAFKA_V_TIMESTAMP(now_ms),
            RD_KAFKA_V_OPAQUE((void *)(intptr_t)now_ms),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            die("produce: %s", rd_kafka_err2str(e));
        rd_kafka_poll(s->prod, 10);
    }
    return len;
}

static void publish_marker(scale *s, int p, const char *job,
                           tw_marker_kind kind, int64_t t_us, int64_t latest_us,
                           uint64_t *bytes)
{
    tw_marker m = {.kind = kind,
                   .time_us = t_us,
                   .sampling_interval_ms =
                       kind == TW_MARKER_JOB_START ? s->o.interval_ms : 0,
                   .latest_us = latest_us};
    tw_batch b;
    memset(&b, 0, sizeof(b));
    b.job = job;
    b.node = TW_REPLAY_MARKER_NODE;
    b.file_ts_us = t_us;
    b.markers = &m;
    b.nmarkers = 1;
    *bytes += publish(s, p, &b);
}

static int results_done(const scale *s, char (*ids)[32])
{
    for (unsigned k = 0; k < s->o.jobs; k++) {
        char p[4200];
        snprintf(p, sizeof(p), "%.4096s/%s.json", s->o.results, ids[k]);
        if (access(p, F_OK) != 0)
            return 0;
    }
    return 1;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* One latency line over the matched alerts of one kind: which < 0 all,
 * 0 the others (findings and status changes as scans run), 1 the final
 * ones (each rule's verdict at the job's end). */
static void print_latency_of(const scale *s, const char *label, int which)
{
    int64_t *lat = xcalloc(s->nseen ? s->nseen : 1, sizeof(int64_t));
    size_t n = 0;
    uint64_t received = 0;
    for (size_t i = 0; i < s->nseen; i++) {
        const alert_seen *a = &s->seen[i];
        if (which >= 0 && a->final != which)
            continue;
        received++;
        if (a->partition >= s->nused)
            continue;
        const part_times *t = &s->times[a->partition];
        if ((size_t)a->offset >= t->cap || t->ms[a->offset] <= 0)
            continue;
        lat[n++] = a->recv_ms - t->ms[a->offset];
    }
    if (which < 0)
        received = s->alerts; /* also those without source headers */
    qsort(lat, n, sizeof(int64_t), bench_cmp_i64);
    if (n == 0)
        printf("%s: received=%" PRIu64 " matched=0\n", label, received);
    else
        printf("%s: received=%" PRIu64 " matched=%zu p50_ms=%" PRId64
               " p99_ms=%" PRId64 " max_ms=%" PRId64 "\n",
               label, received, n, lat[n / 2], lat[(n * 99) / 100], lat[n - 1]);
    free(lat);
}

static void print_latency(const scale *s)
{
    print_latency_of(s, "alerts", -1);
    print_latency_of(s, "alerts not final", 0);
    print_latency_of(s, "alerts final", 1);
}

static void parse_opts(scale_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"brokers", required_argument, NULL, 'b'},
        {"group", required_argument, NULL, 'G'},
        {"results", required_argument, NULL, 'r'},
        {"topic", required_argument, NULL, 't'},
        {"alerts-topic", required_argument, NULL, 'a'},
        {"jobs", required_argument, NULL, 'k'},
        {"nodes", required_argument, NULL, 'n'},
        {"gpus", required_argument, NULL, 'g'},
        {"cores", required_argument, NULL, 'c'},
        {"interval-ms", required_argument, NULL, 'i'},
        {"event-minutes", required_argument, NULL, 'm'},
        {"bottleneck-every", required_argument, NULL, 'e'},
        {"max-lag", required_argument, NULL, 'l'},
        {"compression", required_argument, NULL, 'z'},
        {"wait-s", required_argument, NULL, 'w'},
        {"realtime", no_argument, NULL, 'R'},
        {"noise", no_argument, NULL, 'N'},
        {NULL, 0, NULL, 0}};
    *o = (scale_opts){.topic = "trainwatch.metrics",
                      .alerts_topic = "trainwatch.alerts",
                      .compression = "none",
                      .jobs = 1,
                      .nodes = 1000,
                      .gpus = 8,
                      .cores = 96,
                      .interval_ms = 500,
                      .event_minutes = 10,
                      .bottleneck_every = 10,
                      .wait_s = 3600,
                      .max_lag = TW_REPLAY_DEFAULT_MAX_LAG};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        unsigned long v = optarg ? strtoul(optarg, NULL, 10) : 0;
        switch (c) {
        case 'b':
            o->brokers = optarg;
            break;
        case 'G':
            o->group = optarg;
            break;
        case 'r':
            o->results = optarg;
            break;
        case 't':
            o->topic = optarg;
            break;
        case 'a':
            o->alerts_topic = optarg;
            break;
        case 'k':
            o->jobs = (unsigned)v;
            break;
        case 'n':
            o->nodes = (unsigned)v;
            break;
        case 'g':
            o->gpus = (unsigned)v;
            break;
        case 'c':
            o->cores = (unsigned)v;
            break;
        case 'i':
            o->interval_ms = (unsigned)v;
            break;
        case 'm':
            o->event_minutes = (unsigned)v;
            break;
        case 'e':
            o->bottleneck_every = (unsigned)v;
            break;
        case 'l':
            o->max_lag = strtoull(optarg, NULL, 10);
            break;
        case 'z':
            o->compression = optarg;
            break;
        case 'w':
            o->wait_s = (unsigned)v;
            break;
        case 'R':
            o->realtime = 1;
            break;
        case 'N':
            o->noise = 1;
            break;
        default:
            fprintf(stderr, "usage: bench_scale_producer --brokers B --group "
                            "G --results DIR [options] (see the source)\n");
            exit(2);
        }
    }
    if (o->brokers == NULL || o->group == NULL || o->results == NULL)
        die("--brokers, --group and --results are needed");
    if (o->jobs < 1 || o->nodes < o->jobs || o->interval_ms < 1 ||
        o->event_minutes < 1 || o->max_lag < 1)
        die("need 1 <= --jobs <= --nodes, --interval-ms >= 1, "
            "--event-minutes >= 1, --max-lag >= 1");
}

int main(int argc, char **argv)
{
    static scale s;
    parse_opts(&s.o, argc, argv);
    tw_log_set_level(TW_LOG_WARN);
    const scale_opts *o = &s.o;
    open_clients(&s);
    build_layout(&s);
    char(*ids)[32] = xcalloc(o->jobs, sizeof(*ids));
    char(*node_ids)[32] = xcalloc(o->nodes, sizeof(*node_ids));
    for (unsigned k = 0; k < o->jobs; k++)
        snprintf(ids[k], sizeof(ids[k]), "scale-%u", k);
    for (unsigned n = 0; n < o->nodes; n++)
        snprintf(node_ids[n], sizeof(node_ids[n]), "algo-%u", n + 1);

    unsigned rounds = o->event_minutes * 60000u / o->interval_ms;
    uint64_t batches = 0, samples = 0, bytes = 0;
    double cpu0 = cpu_s();
    int64_t t0 = tw_mono_us();
    for (unsigned k = 0; k < o->jobs; k++)
        publish_marker(&s, (int)(k % (unsigned)s.nparts), ids[k],
                       TW_MARKER_JOB_START, T0_S * 1000000, 0, &bytes);
    for (unsigned r = 0; r < rounds; r++) {
        /* --realtime: the agents' own pace (alert latency without a
         * backlog); the wait serves delivery reports and alerts */
        while (o->realtime &&
               tw_mono_us() < t0 + (int64_t)r * o->interval_ms * 1000) {
            rd_kafka_poll(s.prod, 1);
            drain_alerts(&s);
        }
        double ts = (double)T0_S + (double)r * o->interval_ms / 1000.0;
        for (unsigned n = 0; n < o->nodes; n++) {
            unsigned k = (unsigned)((uint64_t)n * o->jobs / o->nodes);
            for (size_t i = 0; i < s.nseries; i++)
                s.samples[i] = (tw_sample){.ts = ts,
                                           .value = sample_value(&s, n, r, i),
                                           .series = (uint32_t)i};
            tw_batch b;
            memset(&b, 0, sizeof(b));
            b.job = ids[k];
            b.node = node_ids[n];
            b.seq = r + 1;
            b.file_ts_us = (int64_t)(ts * 1e6);
            b.series = s.series;
            b.nseries = s.nseries;
            b.samples = s.samples;
            b.nsamples = s.nseries;
            bytes += publish(&s, (int)(k % (unsigned)s.nparts), &b);
            batches++;
            samples += s.nseries;
        }
        drain_alerts(&s);
    }
    int64_t latest_us =
        T0_S * 1000000 + (int64_t)(rounds - 1) * o->interval_ms * 1000;
    for (unsigned k = 0; k < o->jobs; k++)
        publish_marker(&s, (int)(k % (unsigned)s.nparts), ids[k],
                       TW_MARKER_JOB_END, latest_us, latest_us, &bytes);
    while (rd_kafka_outq_len(s.prod) > 0) {
        rd_kafka_poll(s.prod, 10);
        drain_alerts(&s);
    }
    double produce_s = (double)(tw_mono_us() - t0) / 1e6;
    double produce_cpu = cpu_s() - cpu0;
    int64_t deadline = tw_mono_us() + (int64_t)o->wait_s * 1000000;
    while (!results_done(&s, ids) && tw_mono_us() < deadline) {
        drain_alerts(&s);
        usleep(20000);
    }
    int done = results_done(&s, ids);
    double wall_s = (double)(tw_mono_us() - t0) / 1e6;
    for (int64_t until = tw_mono_us() + 2000000; tw_mono_us() < until;) {
        drain_alerts(&s); /* the last scans' alerts */
        usleep(20000);
    }
    uint64_t waits = 0;
    int64_t waited = 0;
    for (int p = 0; p < s.nused; p++) {
        tw_replay_flow_stats fs;
        tw_replay_flow_get_stats(s.flow[p], &fs);
        waits += fs.waits;
        waited += fs.waited_us;
    }
    printf("producer: jobs=%u nodes=%u gpus=%u cores=%u interval_ms=%u "
           "event_minutes=%u partitions=%d batches=%" PRIu64 " samples=%" PRIu64
           " bytes=%" PRIu64
           " produce_s=%.1f cpu_s=%.1f wall_s=%.1f flow_waits=%" PRIu64
           " flow_wait_s=%.1f failed=%" PRIu64 " results=%s\n",
           o->jobs, o->nodes, o->gpus, o->cores, o->interval_ms,
           o->event_minutes, s.nparts, batches, samples, bytes, produce_s,
           produce_cpu, wall_s, waits, (double)waited / 1e6, s.failed,
           done ? "all" : "missing");
    print_latency(&s);
    fflush(stdout);
    rd_kafka_consumer_close(s.cons);
    rd_kafka_destroy(s.cons);
    for (int p = 0; p < s.nused; p++) {
        tw_replay_flow_free(s.flow[p]);
        free(s.times[p].ms);
    }
    rd_kafka_destroy(s.prod);
    for (unsigned i = 0; i < o->gpus + o->cores; i++)
        free(s.names[i]);
    free(s.names);
    free(s.series);
    free(s.samples);
    free(s.seen);
    free(ids);
    free(node_ids);
    return done && s.failed == 0 ? 0 : 1;
}
