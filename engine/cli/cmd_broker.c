/*
 * cmd_broker.c - `trainwatch broker`: a standalone Kafka-protocol broker
 * (librdkafka's mock cluster, kafka_broker.h) for development and tests,
 * running until SIGINT or SIGTERM.
 *
 * Exit status: 0 stopped by a signal, 1 could not start, 2 usage error.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_faults.h"
#include "cli_options.h"
#include "commands.h"
#include "kafka_broker.h"
#include "log.h"
#include "signals.h"

#define TW_BROKER_MAX_TOPICS 64

enum {
    OPT_PORT = 1,
    OPT_BROKERS,
    OPT_TOPIC,
    OPT_PARTITIONS,
    OPT_BOOTSTRAP_FILE,
    OPT_FAULTS,
    OPT_VERBOSE
};

static const tw_cli_option tw_broker_options[] = {
    {"port", 0, "P",
     "also accept bootstrap connections on 127.0.0.1:P (1..65535) and print "
     "that as bootstrap=. The mock brokers themselves always listen on "
     "ports that the kernel picks (librdkafka 2.0.2 has no way to fix them); "
     "port P relays to the first broker, whose metadata then sends clients "
     "to the brokers' own ports. Default: no fixed port.",
     OPT_PORT},
    {"brokers", 0, "N", "number of mock brokers, 1..16 (default 1)",
     OPT_BROKERS},
    {"topic", 0, "NAME[:PARTITIONS]",
     "create this topic too (repeatable); with the name of a default topic, "
     "overrides its partition count",
     OPT_TOPIC},
    {"partitions", 0, "N",
     "partitions of every topic created without :PARTITIONS, 1..1024 "
     "(default 4)",
     OPT_PARTITIONS},
    {"bootstrap-file", 0, "FILE",
     "also write the bootstrap address (one line) to FILE, atomically once "
     "the broker is ready; FILE is removed when it stops",
     OPT_BOOTSTRAP_FILE},
    {"faults", 0, NULL,
     "read fault commands from standard input, one per line, for tests: "
     "`error REQUEST COUNT ERROR`, `down ID`, `up ID`, `leader TOPIC "
     "PARTITION ID`, `coordinator group|transaction KEY ID`, `rtt ID MS` "
     "(README \"Fault injection\"); each is logged as done or refused",
     OPT_FAULTS},
    {"verbose", 'v', NULL, "log librdkafka's debug messages too", OPT_VERBOSE},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command tw_broker_command = {
    .name = "broker",
    .synopsis = "[options]",
    .description =
        "Runs a Kafka-protocol broker for development and tests:\n"
        "librdkafka's mock cluster, in memory (nothing is kept after it\n"
        "stops), listening on 127.0.0.1 only. Any Kafka client on this\n"
        "host can use it (tested with kcat).\n"
        "\n"
        "It creates the topics trainwatch.metrics, trainwatch.alerts,\n"
        "trainwatch.deadletter and trainwatch.control, plus those given\n"
        "with --topic; a topic\n"
        "that does not exist is created on first use with the mock's\n"
        "defaults.\n"
        "\n"
        "The first line on stdout is `bootstrap=HOST:PORT[,...]`: the\n"
        "address for clients' bootstrap.servers. Then `brokers=...` (the\n"
        "mock brokers' own addresses) and one `topic=NAME partitions=N`\n"
        "line per created topic. It runs until SIGINT or SIGTERM, then\n"
        "stops cleanly and exits 0.\n"
        "\n"
        "Retention: per partition the mock keeps at most 5 MiB of\n"
        "messages (as produced, batched) and 100000 produce batches; past\n"
        "either it deletes the oldest at once, whether a consumer has\n"
        "read them or not (a consumer further behind gets \"offset out of\n"
        "range\" and loses them). librdkafka fixes both (2.0.2 and later\n"
        "alike: no API, property or topic setting), so this command\n"
        "cannot raise them. `trainwatch replay` waits for the engine's\n"
        "consumer group to keep within them (its --group, --max-lag);\n"
        "other producers must keep their consumers less than 5 MiB\n"
        "behind. Messages up to 100 MB are accepted.\n",
    .options = tw_broker_options,
    .epilogue =
        "Example:\n"
        "  trainwatch broker --port 9092 &\n"
        "  echo hello | kcat -b 127.0.0.1:9092 -P -t trainwatch.alerts\n"
        "  kcat -b 127.0.0.1:9092 -C -t trainwatch.alerts -o beginning -e\n",
};

/* What the options ask for. */
typedef struct tw_broker_cmd {
    tw_broker_opts opts;
    int default_partitions;
    const char *bootstrap_file;
    int faults; /* read fault commands from stdin */
    /* Topic arguments: name and explicit partitions (0 = the default). */
    char *names[TW_BROKER_MAX_TOPICS];
    int parts[TW_BROKER_MAX_TOPICS];
    size_t ntopics;
    tw_broker_topic topics[TW_BROKER_MAX_TOPICS];
} tw_broker_cmd;

static int tw_broker_cmd_int(const char *opt, const char *s, long min, long max,
                             int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        fprintf(stderr,
                "trainwatch broker: %s '%s': expected an integer "
                "%ld..%ld\n",
                opt, s, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Writes the address to path atomically (temporary file + rename). */
static int tw_broker_cmd_write_file(const char *path, const char *addr)
{
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        tw_log(TW_LOG_ERROR, "broker: --bootstrap-file '%s': path too long",
               path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        tw_log(TW_LOG_ERROR, "broker: cannot write '%s': %s", tmp,
               strerror(errno));
        return -1;
    }
    int bad = fprintf(f, "%s\n", addr) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        tw_log(TW_LOG_ERROR, "broker: cannot write '%s': %s", path,
               strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* --topic NAME[:PARTITIONS]: a new topic, or new partitions for one. */
static int tw_broker_cmd_topic(tw_broker_cmd *b, const char *arg)
{
    const char *colon = strrchr(arg, ':');
    size_t len = colon != NULL ? (size_t)(colon - arg) : strlen(arg);
    int p = 0;
    if (colon != NULL &&
        tw_broker_cmd_int("--topic partitions", colon + 1, 1, 1024, &p))
        return -1;
    if (len == 0 || len > 249) {
        fprintf(stderr,
                "trainwatch broker: --topic '%s': a topic "
                "name has 1..249 characters\n",
                arg);
        return -1;
    }
    size_t k = 0;
    while (k < b->ntopics &&
           !(strlen(b->names[k]) == len && strncmp(b->names[k], arg, len) == 0))
        k++;
    if (k == b->ntopics) {
        if (b->ntopics == TW_BROKER_MAX_TOPICS) {
            fprintf(stderr, "trainwatch broker: at most %d topics\n",
                    TW_BROKER_MAX_TOPICS);
            return -1;
        }
        b->names[b->ntopics] = strndup(arg, len);
        if (b->names[b->ntopics] == NULL) {
            fprintf(stderr, "trainwatch broker: out of memory\n");
            return -1;
        }
        b->ntopics++;
    }
    b->parts[k] = p;
    return 0;
}

/* Fills b from the defaults and the options: -1 to exit with *status
 * (0 after --help, 2 on bad usage, 1 out of memory). */
static int tw_broker_cmd_load(tw_broker_cmd *b, int argc, char **argv,
                              int *status)
{
    static const char *const defaults[] = {
        "trainwatch.metrics", "trainwatch.alerts", "trainwatch.deadletter",
        "trainwatch.control"};
    *status = 1;
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        b->names[b->ntopics] = strdup(defaults[i]);
        if (b->names[b->ntopics] == NULL) {
            fprintf(stderr, "trainwatch broker: out of memory\n");
            return -1;
        }
        b->parts[b->ntopics++] = 0;
    }
    *status = 2;
    tw_cli_parser p;
    tw_cli_begin(&p, &tw_broker_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        int bad = 0;
        switch (id) {
        case TW_CLI_HELP:
            *status = 0;
            return -1;
        case TW_CLI_USAGE:
            return -1;
        case OPT_PORT:
            bad = tw_broker_cmd_int("--port", p.arg, 1, 65535, &b->opts.port);
            break;
        case OPT_BROKERS:
            bad =
                tw_broker_cmd_int("--brokers", p.arg, 1, 16, &b->opts.brokers);
            break;
        case OPT_PARTITIONS:
            bad = tw_broker_cmd_int("--partitions", p.arg, 1, 1024,
                                    &b->default_partitions);
            break;
        case OPT_TOPIC:
            bad = tw_broker_cmd_topic(b, p.arg);
            break;
        case OPT_BOOTSTRAP_FILE:
            b->bootstrap_file = p.arg;
            break;
        case OPT_FAULTS:
            b->faults = 1;
            break;
        case OPT_VERBOSE:
            tw_log_set_level(TW_LOG_DEBUG);
            break;
        }
        if (bad)
            return -1;
    }
    if (p.optind < argc) {
        tw_cli_usage_error(&tw_broker_command, "unexpected argument '%s'",
                           argv[p.optind]);
        return -1;
    }
    for (size_t i = 0; i < b->ntopics; i++) {
        b->topics[i].name = b->names[i];
        b->topics[i].partitions =
            b->parts[i] > 0 ? b->parts[i] : b->default_partitions;
    }
    b->opts.topics = b->topics;
    b->opts.ntopics = b->ntopics;
    return 0;
}

/* Starts the broker, tells where it listens (stdout, --bootstrap-file). */
static int tw_broker_cmd_open(tw_broker_cmd *b, tw_broker **broker)
{
    char err[512];
    if (tw_broker_start(&b->opts, broker, err, sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "%s", err);
        return -1;
    }
    printf("bootstrap=%s\n", tw_broker_bootstrap(*broker));
    printf("brokers=%s\n", tw_broker_direct_bootstrap(*broker));
    for (size_t i = 0; i < b->ntopics; i++)
        printf("topic=%s partitions=%d\n", b->topics[i].name,
               b->topics[i].partitions);
    fflush(stdout);
    if (b->bootstrap_file != NULL &&
        tw_broker_cmd_write_file(b->bootstrap_file,
                                 tw_broker_bootstrap(*broker)) != 0)
        return -1;
    tw_log(TW_LOG_INFO,
           "broker: listening at %s (%d broker(s)); keeps %u MiB and %u "
           "batches per partition (librdkafka's fixed limits: older "
           "messages are deleted, read or not); stop with SIGINT or SIGTERM",
           tw_broker_bootstrap(*broker), b->opts.brokers,
           TW_BROKER_RETENTION_BYTES >> 20, TW_BROKER_RETENTION_BATCHES);
    return 0;
}

/* --faults: stdin's complete lines so far, applied in order. */
typedef struct tw_fault_input {
    char buf[4096];
    size_t len;
    int open;
} tw_fault_input;

static void tw_broker_cmd_apply(tw_broker *broker, int nbrokers,
                                const char *line)
{
    char msg[640];
    if (tw_broker_fault_apply(tw_broker_mock_cluster(broker), nbrokers, line,
                              msg, sizeof(msg)) != 0)
        tw_log(TW_LOG_WARN, "broker: fault '%s' refused: %s", line, msg);
    else if (msg[0] != '\0')
        tw_log(TW_LOG_INFO, "broker: fault: %s", msg);
}

/* Reads what stdin has (never blocks) and applies each whole line. */
static void tw_broker_cmd_faults(tw_fault_input *in, tw_broker *broker,
                                 int nbrokers)
{
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    while (in->open && poll(&pfd, 1, 0) > 0) {
        ssize_t n = read(STDIN_FILENO, in->buf + in->len,
                         sizeof(in->buf) - 1 - in->len);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            in->open = 0; /* end of input: no more faults */
            n = 0;
        }
        in->len += (size_t)n;
        in->buf[in->len] = '\0';
        char *start = in->buf, *nl;
        while ((nl = strchr(start, '\n')) != NULL) {
            *nl = '\0';
            tw_broker_cmd_apply(broker, nbrokers, start);
            start = nl + 1;
        }
        in->len -= (size_t)(start - in->buf);
        memmove(in->buf, start, in->len);
        if (in->len == sizeof(in->buf) - 1) {
            tw_log(TW_LOG_WARN,
                   "broker: fault command longer than %zu bytes "
                   "dropped",
                   in->len);
            in->len = 0;
        }
        if (n == 0)
            break;
    }
}

/* Serves until SIGINT or SIGTERM, then removes --bootstrap-file. */
static void tw_broker_cmd_serve(const tw_broker_cmd *b, tw_broker *broker,
                                sigset_t *sigs)
{
    int sig = 0;
    tw_fault_input in = {.open = b->faults};
    while (sig == 0) {
        if (in.open)
            tw_broker_cmd_faults(&in, broker, b->opts.brokers);
        sig = tw_signals_wait(sigs, in.open ? 50 : 1000);
    }
    tw_log(TW_LOG_INFO, "broker: %s received, stopping", tw_signals_name(sig));
    if (b->bootstrap_file != NULL && unlink(b->bootstrap_file) != 0)
        tw_log(TW_LOG_WARN, "broker: cannot remove '%s': %s", b->bootstrap_file,
               strerror(errno));
}

int tw_cmd_broker(int argc, char **argv)
{
    tw_broker_cmd b = {.opts = {.brokers = 1, .port = 0},
                       .default_partitions = 4};
    tw_broker *broker = NULL;
    int status;
    sigset_t sigs;
    if (tw_broker_cmd_load(&b, argc, argv, &status) != 0)
        goto out;
    status = 1;
    if (tw_signals_block(&sigs) != 0) {
        tw_log(TW_LOG_ERROR, "broker: cannot block signals: %s",
               strerror(errno));
        goto out;
    }
    if (tw_broker_cmd_open(&b, &broker) != 0)
        goto out;
    tw_broker_cmd_serve(&b, broker, &sigs);
    status = 0;
out:
    tw_broker_stop(broker);
    for (size_t i = 0; i < b.ntopics; i++)
        free(b.names[i]);
    return status;
}
