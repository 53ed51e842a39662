/*
 * cmd_broker.c - `trainwatch broker`: a standalone Kafka-protocol broker
 * (librdkafka's mock cluster, kafka_broker.h) for development and tests,
 * running until SIGINT or SIGTERM.
 *
 * Exit status: 0 stopped by a signal, 1 could not start, 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "kafka_broker.h"
#include "log.h"
#include "signals.h"

#define TW_BROKER_MAX_TOPICS 64

static void tw_broker_cmd_usage(FILE *out)
{
    fprintf(
        out,
        "usage: trainwatch broker [options]\n"
        "\n"
        "Runs a Kafka-protocol broker for development and tests:\n"
        "librdkafka's mock cluster, in memory (nothing is kept after it\n"
        "stops), listening on 127.0.0.1 only. Any Kafka client on this\n"
        "host can use it (tested with kcat).\n"
        "\n"
        "It creates the topics trainwatch.metrics, trainwatch.alerts and\n"
        "trainwatch.deadletter, plus those given with --topic; a topic\n"
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
        "behind. Messages up to 100 MB are accepted.\n"
        "\n"
        "options:\n"
        "  --port P            also accept bootstrap connections on\n"
        "                      127.0.0.1:P (1..65535) and print that as\n"
        "                      bootstrap=. The mock brokers themselves\n"
        "                      always listen on ports the kernel picks\n"
        "                      (librdkafka 2.0.2 has no way to fix them);\n"
        "                      port P relays to the first broker, whose\n"
        "                      metadata then sends clients to the\n"
        "                      brokers' own ports. Default: no fixed port.\n"
        "  --brokers N         number of mock brokers, 1..16 (default 1)\n"
        "  --topic NAME[:PARTITIONS]\n"
        "                      create this topic too (repeatable); with\n"
        "                      the name of a default topic, overrides its\n"
        "                      partition count\n"
        "  --partitions N      partitions of every topic created without\n"
        "                      :PARTITIONS, 1..1024 (default 4)\n"
        "  --bootstrap-file FILE\n"
        "                      also write the bootstrap address (one line)\n"
        "                      to FILE, atomically once the broker is\n"
        "                      ready; FILE is removed when it stops\n"
        "  -v, --verbose       log librdkafka's debug messages too\n"
        "  -h, --help          this text\n"
        "\n"
        "Example:\n"
        "  trainwatch broker --port 9092 &\n"
        "  echo hello | kcat -b 127.0.0.1:9092 -P -t trainwatch.alerts\n"
        "  kcat -b 127.0.0.1:9092 -C -t trainwatch.alerts -o beginning "
        "-e\n");
}

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

int tw_cmd_broker(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"port", required_argument, NULL, 'p'},
        {"brokers", required_argument, NULL, 'b'},
        {"topic", required_argument, NULL, 't'},
        {"partitions", required_argument, NULL, 'n'},
        {"bootstrap-file", required_argument, NULL, 'f'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    tw_broker_opts opts = {.brokers = 1, .port = 0};
    int default_partitions = 4;
    const char *bootstrap_file = NULL;
    /* Topic arguments: name and explicit partitions (0 = the default). */
    char *names[TW_BROKER_MAX_TOPICS];
    int parts[TW_BROKER_MAX_TOPICS];
    size_t ntopics = 0;
    static const char *const defaults[] = {
        "trainwatch.metrics", "trainwatch.alerts", "trainwatch.deadletter"};
    int status = 2;
    tw_broker *broker = NULL;

    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        names[ntopics] = strdup(defaults[i]);
        parts[ntopics] = 0;
        if (names[ntopics] == NULL) {
            fprintf(stderr, "trainwatch broker: out of memory\n");
            status = 1;
            goto out;
        }
        ntopics++;
    }

    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (tw_broker_cmd_int("--port", optarg, 1, 65535, &opts.port))
                goto out;
            break;
        case 'b':
            if (tw_broker_cmd_int("--brokers", optarg, 1, 16, &opts.brokers))
                goto out;
            break;
        case 'n':
            if (tw_broker_cmd_int("--partitions", optarg, 1, 1024,
                                  &default_partitions))
                goto out;
            break;
        case 't': {
            const char *colon = strrchr(optarg, ':');
            size_t len =
                colon != NULL ? (size_t)(colon - optarg) : strlen(optarg);
            int p = 0;
            if (colon != NULL &&
                tw_broker_cmd_int("--topic partitions", colon + 1, 1, 1024, &p))
                goto out;
            if (len == 0 || len > 249) {
                fprintf(stderr,
                        "trainwatch broker: --topic '%s': a topic "
                        "name has 1..249 characters\n",
                        optarg);
                goto out;
            }
            size_t k = 0;
            while (k < ntopics && !(strlen(names[k]) == len &&
                                    strncmp(names[k], optarg, len) == 0))
                k++;
            if (k == ntopics) {
                if (ntopics == TW_BROKER_MAX_TOPICS) {
                    fprintf(stderr, "trainwatch broker: at most %d topics\n",
                            TW_BROKER_MAX_TOPICS);
                    goto out;
                }
                names[ntopics] = strndup(optarg, len);
                if (names[ntopics] == NULL)
                    goto out;
                ntopics++;
            }
            parts[k] = p;
            break;
        }
        case 'f':
            bootstrap_file = optarg;
            break;
        case 'v':
            tw_log_set_level(TW_LOG_DEBUG);
            break;
        case 'h':
            tw_broker_cmd_usage(stdout);
            status = 0;
            goto out;
        default:
            tw_broker_cmd_usage(stderr);
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "trainwatch broker: unexpected argument '%s'\n",
                argv[optind]);
        tw_broker_cmd_usage(stderr);
        goto out;
    }

    status = 1;
    sigset_t sigs;
    if (tw_signals_block(&sigs) != 0) {
        tw_log(TW_LOG_ERROR, "broker: cannot block signals: %s",
               strerror(errno));
        goto out;
    }
    tw_broker_topic topics[TW_BROKER_MAX_TOPICS];
    for (size_t i = 0; i < ntopics; i++) {
        topics[i].name = names[i];
        topics[i].partitions = parts[i] > 0 ? parts[i] : default_partitions;
    }
    opts.topics = topics;
    opts.ntopics = ntopics;
    char err[512];
    if (tw_broker_start(&opts, &broker, err, sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "%s", err);
        goto out;
    }
    printf("bootstrap=%s\n", tw_broker_bootstrap(broker));
    printf("brokers=%s\n", tw_broker_direct_bootstrap(broker));
    for (size_t i = 0; i < ntopics; i++)
        printf("topic=%s partitions=%d\n", topics[i].name,
               topics[i].partitions);
    fflush(stdout);
    if (bootstrap_file != NULL &&
        tw_broker_cmd_write_file(bootstrap_file, tw_broker_bootstrap(broker)) !=
            0)
        goto out;
    tw_log(TW_LOG_INFO,
           "broker: listening at %s (%d broker(s)); keeps %u MiB and %u "
           "batches per partition (librdkafka's fixed limits: older "
           "messages are deleted, read or not); stop with SIGINT or SIGTERM",
           tw_broker_bootstrap(broker), opts.brokers,
           TW_BROKER_RETENTION_BYTES >> 20, TW_BROKER_RETENTION_BATCHES);

    int sig = 0;
    while (sig == 0)
        sig = tw_signals_wait(&sigs, 1000);
    tw_log(TW_LOG_INFO, "broker: %s received, stopping", tw_signals_name(sig));
    if (bootstrap_file != NULL && unlink(bootstrap_file) != 0)
        tw_log(TW_LOG_WARN, "broker: cannot remove '%s': %s", bootstrap_file,
               strerror(errno));
    status = 0;

out:
    tw_broker_stop(broker);
    for (size_t i = 0; i < ntopics; i++)
        free(names[i]);
    return status;
}
