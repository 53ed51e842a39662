/*
 * streaming.c - end-to-end benchmark of the streaming engine: replay ->
 * Kafka-protocol broker -> `trainwatch run`. Prints figures; asserts
 * nothing.
 *
 *   bench_streaming [--tw PATH/trainwatch] [--jobs N] [--preset P]
 *                   [--actions off|hung] [--state FILE]
 *
 * --state FILE: YAML appended to both `run` configurations, e.g. a
 * `state:` section with `store: redis` (checkpoints on; start a
 * redis-server first, e.g. with tests/integration/lib/redis.sh) to compare
 * with the default memory store.
 *
 * 1. Throughput. A generated job (4 nodes x 16 cores x 4 GPUs at 100 ms,
 *    system metrics only, ~150 k samples) is replayed N times under job
 *    ids that hash to N distinct partitions of a topic with N partitions
 *    (librdkafka's mock broker keeps only 5 MB per partition, so a big
 *    input is spread over partitions). Then `trainwatch run` (default
 *    rules: ProfilerReport) consumes it all; samples/s = the samples of
 *    all jobs / (last job finished - partitions assigned), both from
 *    run's log: fetching starts at the assignment, so every byte's
 *    transfer from the broker is counted, the group join is not.
 * 2. Alert latency. `trainwatch run` is started and joins its group; a
 *    cpu_bottleneck job (2 nodes, 10 min, with framework traces) is then
 *    replayed at 30x its own pace. Each alert carries the partition and
 *    offset of the metrics message whose batch completed the scan
 *    (headers); latency = when this program received the alert from the
 *    alert topic - the CreateTime of that metrics message (set by the
 *    replaying producer when it queued the message; 1 ms resolution).
 * --preset P: the throughput job's synth preset (default healthy).
 * --actions off|hung: the throughput run evaluates ProfilerReport plus
 *    CPUBottleneck (patience 100) and part 2 is skipped; with `hung` both
 *    rules carry a webhook and a stop_training action pointed at a
 *    loopback port that accepts connections and never answers (timeout
 *    30 s, no retries), so every send hangs for 30 s: compare samples/s
 *    of `off` and `hung` (with --preset cpu_bottleneck, so that the rules
 *    fire). The run's action counters are printed.
 * The broker runs inside this process (kafka_broker.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <librdkafka/rdkafka.h>

#include "bench_alerts.h"

#include "kafka_broker.h"

#define MAX_JOBS 64

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_streaming: %s\n", what);
    exit(1);
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_streaming: failed: %s\n", cmd);
        exit(1);
    }
}

/* Starts `tw run --config cfg` with stderr into log; returns its pid. */
static pid_t start_run(const char *tw, const char *cfg, const char *log)
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        char out[1100];
        snprintf(out, sizeof(out), "%.1000s.out", log);
        FILE *f = freopen(log, "w", stderr);
        if (f == NULL || freopen(out, "w", stdout) == NULL)
            _exit(127);
        execl(tw, tw, "run", "--config", cfg, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Dies when the child has exited (it should run until stopped). */
static void check_alive(pid_t pid, const char *log)
{
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
        fprintf(stderr,
                "bench_streaming: trainwatch run exited early; see "
                "%s\n",
                log);
        exit(1);
    }
}

static void stop(pid_t pid)
{
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
}

/* A loopback port that accepts TCP connections (the kernel completes the
 * handshake into the backlog) and never reads or answers: a hung HTTP
 * endpoint. Returns the port; the socket stays open until exit. */
static int hung_listener(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(fd, 4096) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &n) != 0)
        die("hung listener");
    return ntohs(a.sin_port);
}

/* The summary line's fields from " actions_" on (or "" when absent). */
static void print_action_counters(const char *log)
{
    char out[1100], line[4096];
    snprintf(out, sizeof(out), "%.1000s.out", log);
    FILE *f = fopen(out, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        const char *a = strstr(line, " actions_");
        if (strncmp(line, "run:", 4) == 0 && a != NULL)
            printf("actions:%s", a);
    }
    if (f != NULL)
        fclose(f);
}

static int file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static int count_results(const char *dir, int n, const char *const *ids)
{
    int have = 0;
    for (int i = 0; i < n; i++) {
        char p[2200];
        snprintf(p, sizeof(p), "%.1024s/%.1024s.json", dir, ids[i]);
        have += access(p, F_OK) == 0;
    }
    return have;
}

/* "2026-01-01T12:34:56.789Z ..." -> ms of the day */
static int64_t log_ms(const char *line)
{
    int h, m, s, ms;
    if (sscanf(line + 11, "%d:%d:%d.%d", &h, &m, &s, &ms) != 4)
        return -1;
    return ((int64_t)h * 3600 + m * 60 + s) * 1000 + ms;
}

static rd_kafka_t *consumer(const char *bootstrap)
{
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    if (rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, err,
                          sizeof(err)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(c, "group.id", "bench-reader", err, sizeof(err)) !=
            RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(c, "fetch.wait.max.ms", "5", err, sizeof(err)) !=
            RD_KAFKA_CONF_OK)
        die(err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
    if (rk == NULL)
        die(err);
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

static void assign_all(rd_kafka_t *rk, const char *topic, int parts)
{
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
}

int main(int argc, char **argv)
{
    const char *tw = NULL, *state_file = NULL;
    int njobs = 24;
    const char *preset = "healthy", *actions = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tw") == 0 && i + 1 < argc)
            tw = argv[++i];
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            njobs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--preset") == 0 && i + 1 < argc)
            preset = argv[++i];
        else if (strcmp(argv[i], "--actions") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "off") == 0 ||
                  strcmp(argv[i + 1], "hung") == 0))
            actions = argv[++i];
        else if (strcmp(argv[i], "--state") == 0 && i + 1 < argc)
            state_file = argv[++i];
        else {
            fprintf(stderr, "usage: bench_streaming [--tw PATH/trainwatch] "
                            "[--jobs 1..64] [--preset P] "
                            "[--actions off|hung] [--state FILE]\n");
            return 2;
        }
    }
    if (njobs < 1 || njobs > MAX_JOBS)
        die("--jobs must be 1..64");
    char twbuf[1024];
    if (tw == NULL) {
        const char *b = getenv("TW_BUILD_DIR");
        snprintf(twbuf, sizeof(twbuf), "%s/trainwatch", b ? b : "build");
        tw = twbuf;
    }
    if (access(tw, X_OK) != 0)
        die("trainwatch binary not found (give --tw PATH)");
    static char state_yaml[8192];
    if (state_file != NULL) {
        FILE *sf = fopen(state_file, "r");
        size_t n =
            sf != NULL ? fread(state_yaml, 1, sizeof(state_yaml) - 1, sf) : 0;
        if (sf == NULL || ferror(sf) || !feof(sf))
            die("--state: cannot read the file (at most 8 KiB)");
        fclose(sf);
        state_yaml[n] = 0;
    }
    char work[] = "/tmp/tw-bench-streaming.XXXXXX";
    if (mkdtemp(work) == NULL)
        die("mkdtemp");

    tw_broker_topic topics[] = {{"bench.metrics", njobs},
                                {"bench.alerts", 4},
                                {"bench.live", 4},
                                {"bench.live.alerts", 4},
                                {"trainwatch.deadletter", 1}};
    tw_broker_opts bo = {.brokers = 1,
                         .port = 0,
                         .topics = topics,
                         .ntopics = sizeof(topics) / sizeof(topics[0])};
    tw_broker *broker;
    char err[512];
    if (tw_broker_start(&bo, &broker, err, sizeof(err)) != 0)
        die(err);
    const char *bs = tw_broker_bootstrap(broker);

    /* ---- 1. throughput ----------------------------------------------------
     */
    static char idbuf[MAX_JOBS][32];
    const char *ids[MAX_JOBS];
    int taken[MAX_JOBS] = {0}, found = 0;
    for (int k = 0; found < njobs && k < 100000; k++) {
        char id[32];
        snprintf(id, sizeof(id), "bench-%d", k);
        int p =
            (int)(crc32(0, (const Bytef *)id, (uInt)strlen(id)) % (uLong)njobs);
        if (taken[p])
            continue;
        taken[p] = 1;
        snprintf(idbuf[found], sizeof(idbuf[found]), "%s", id);
        ids[found] = idbuf[found];
        found++;
    }
    if (found < njobs)
        die("cannot spread the jobs over the partitions");
    sh("'%s' synth %s/big --preset '%s' --no-framework --nodes 4 "
       "--cores 16 --gpus 4 --interval-ms 100 --duration 80 >/dev/null 2>&1",
       tw, work, preset);
    fprintf(stderr, "producing %d jobs ...\n", njobs);
    for (int i = 0; i < njobs; i++)
        /* before run starts: no group to wait for */
        sh("'%s' replay %s/big --brokers %s --topic bench.metrics --job %s "
           "--group none -q >/dev/null",
           tw, work, bs, ids[i]);
    char cfg[1024], log[1024], res[1024];
    snprintf(res, sizeof(res), "%s/res", work);
    mkdir(res, 0755);
    snprintf(cfg, sizeof(cfg), "%s/tp.yaml", work);
    FILE *f = fopen(cfg, "w");
    if (f == NULL)
        die("config");
    fprintf(f,
            "kafka:\n  brokers: %s\n  group: bench-tp\n"
            "  metrics_topic: bench.metrics\n"
            "  alerts_topic: bench.alerts\nengine:\n  results_dir: %s\n"
            "  progress_interval: 0\n%s",
            bs, res, state_yaml);
    if (actions != NULL) {
        char act[512] = "";
        if (strcmp(actions, "hung") == 0) {
            int port = hung_listener();
            /* dummy credentials: SigV4 signs, the endpoint never answers */
            setenv("AWS_ACCESS_KEY_ID", "AKIDBENCH", 1);
            setenv("AWS_SECRET_ACCESS_KEY", "bench-secret", 1);
            snprintf(act, sizeof(act),
                     "    actions:\n"
                     "      - {type: webhook, url: 'http://127.0.0.1:%d/h', "
                     "timeout: 30s, retries: 0}\n"
                     "      - {type: stop_training, endpoint: "
                     "'http://127.0.0.1:%d', timeout: 30s, retries: 0}\n",
                     port, port);
        }
        fprintf(f,
                "rules:\n  - name: ProfilerReport\n%s"
                "  - name: CPUBottleneck\n    parameters: {patience: 100}\n"
                "%s",
                act, act);
    }
    fclose(f);
    snprintf(log, sizeof(log), "%s/tp.log", work);
    fprintf(stderr, "consuming them with trainwatch run ...\n");
    pid_t run = start_run(tw, cfg, log);
    int64_t t0 = wall_us();
    while (count_results(res, njobs, ids) < njobs) {
        if (wall_us() - t0 > 600 * 1000000LL)
            die("throughput: results did not appear in 600 s");
        check_alive(run, log);
        usleep(20000);
    }
    stop(run);
    /* first start and last finish from the log */
    f = fopen(log, "r");
    if (f == NULL)
        die("log");
    char line[4096];
    int64_t first = -1, last = -1;
    uint64_t samples = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        /* the clock starts when the last partition is assigned: fetching
         * starts then, so all transfer time is counted */
        if (strstr(line, "assigned partition") != NULL) {
            int64_t t = log_ms(line);
            if (t > first)
                first = t;
        }
        const char *s = strstr(line, " finished (");
        if (s != NULL) {
            int64_t t = log_ms(line);
            if (t > last)
                last = t;
            const char *n = strstr(s, "samples=");
            if (n != NULL)
                samples += strtoull(n + 8, NULL, 10);
        }
    }
    fclose(f);
    double secs = (double)(last - first) / 1e3;
    printf("throughput: jobs=%d samples=%" PRIu64 " seconds=%.3f "
           "samples_per_s=%.0f (replay -> broker -> run, ProfilerReport)\n",
           njobs, samples, secs, secs > 0 ? (double)samples / secs : 0);
    if (actions != NULL) {
        printf("throughput: preset=%s actions=%s (ProfilerReport + "
               "CPUBottleneck)\n",
               preset, actions);
        print_action_counters(log);
        fflush(stdout);
        tw_broker_stop(broker);
        sh("rm -rf '%s'", work);
        return 0;
    }
    fflush(stdout);

    /* ---- 2. alert latency --------------------------------------------------
     */
    sh("'%s' synth %s/cpu --preset cpu_bottleneck --nodes 2 --duration 10m "
       ">/dev/null 2>&1",
       tw, work);
    char res2[1024];
    snprintf(res2, sizeof(res2), "%s/res2", work);
    mkdir(res2, 0755);
    snprintf(cfg, sizeof(cfg), "%s/lat.yaml", work);
    f = fopen(cfg, "w");
    if (f == NULL)
        die("config");
    fprintf(f,
            "kafka:\n  brokers: %s\n  group: bench-lat\n"
            "  metrics_topic: bench.live\n"
            "  alerts_topic: bench.live.alerts\n  properties:\n"
            "    fetch.wait.max.ms: 5\n    linger.ms: 0\nengine:\n"
            "  results_dir: %s\n  progress_interval: 0\n%s",
            bs, res2, state_yaml);
    fclose(f);
    snprintf(log, sizeof(log), "%s/lat.log", work);
    run = start_run(tw, cfg, log);
    t0 = wall_us();
    while (!file_has(log, "assigned partition")) {
        if (wall_us() - t0 > 60 * 1000000LL)
            die("latency: run did not join its group in 60 s");
        check_alive(run, log);
        usleep(20000);
    }
    rd_kafka_t *rk = consumer(bs);
    assign_all(rk, "bench.live.alerts", 4);
    pid_t rp = fork();
    if (rp == 0) {
        if (freopen("/dev/null", "w", stdout) == NULL)
            _exit(127);
        char dir[1100];
        snprintf(dir, sizeof(dir), "%s/cpu", work);
        execl(tw, tw, "replay", dir, "--brokers", bs, "--topic", "bench.live",
              "--group", "bench-lat", "--rate", "30x", "-q", (char *)NULL);
        _exit(127);
    }
    size_t cap = 4096, n = 0;
    int64_t *recv = malloc(cap * sizeof(int64_t));
    int32_t *sp = malloc(cap * sizeof(int32_t));
    int64_t *so = malloc(cap * sizeof(int64_t));
    if (recv == NULL || sp == NULL || so == NULL)
        die("out of memory");
    const char *cpu_id[] = {"cpu"};
    int replay_done = 0;
    int64_t done_at = 0;
    t0 = wall_us();
    for (;;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 20);
        int64_t now = wall_us();
        if (m != NULL) {
            if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && n < cap) {
                recv[n] = now;
                sp[n] =
                    (int32_t)bench_header_int(m, "trainwatch.source.partition");
                so[n] = bench_header_int(m, "trainwatch.source.offset");
                n++;
            }
            rd_kafka_message_destroy(m);
            continue;
        }
        if (!replay_done) {
            int st;
            if (waitpid(rp, &st, WNOHANG) == rp)
                replay_done = 1;
        }
        if (replay_done && done_at == 0 && count_results(res2, 1, cpu_id) == 1)
            done_at = now;
        if (done_at != 0 && now - done_at > 2000000)
            break;
        if (now - t0 > 300 * 1000000LL)
            die("latency: the job did not finish in 300 s");
    }
    stop(run);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    /* CreateTime of every metrics message */
    rk = consumer(bs);
    assign_all(rk, "bench.live", 4);
    int64_t *ts[4] = {0};
    int64_t tsn[4] = {0};
    for (int p = 0; p < 4; p++)
        ts[p] = calloc(200000, sizeof(int64_t));
    int idle = 0;
    while (idle < 50) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 20);
        if (m == NULL) {
            idle++;
            continue;
        }
        idle = 0;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition >= 0 &&
            m->partition < 4 && m->offset < 200000 && ts[m->partition]) {
            ts[m->partition][m->offset] = rd_kafka_message_timestamp(m, NULL);
            if (m->offset + 1 > tsn[m->partition])
                tsn[m->partition] = m->offset + 1;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    int64_t *lat = malloc((n ? n : 1) * sizeof(int64_t));
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) {
        if (sp[i] < 0 || sp[i] >= 4 || so[i] < 0 || so[i] >= tsn[sp[i]] ||
            ts[sp[i]][so[i]] <= 0)
            continue;
        lat[nl++] = recv[i] - ts[sp[i]][so[i]] * 1000;
    }
    if (nl == 0)
        die("latency: no alert could be matched to its metrics message");
    qsort(lat, nl, sizeof(int64_t), bench_cmp_i64);
    printf("alert latency: alerts=%zu p50_ms=%.1f p99_ms=%.1f max_ms=%.1f "
           "(completing batch queued by replay -> alert received from the "
           "alert topic)\n",
           nl, (double)lat[nl / 2] / 1e3,
           (double)lat[(nl * 99) / 100 < nl ? (nl * 99) / 100 : nl - 1] / 1e3,
           (double)lat[nl - 1] / 1e3);
    for (int p = 0; p < 4; p++)
        free(ts[p]);
    free(lat);
    free(recv);
    free(sp);
    free(so);
    tw_broker_stop(broker);
    sh("rm -rf '%s'", work);
    return 0;
}
