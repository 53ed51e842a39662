/*
 * cmd_replay.c - `trainwatch replay DIR`: options, then tools/replay.h
 * publishes the folder (see there for order, numbering, markers, flow
 * control and following), then the summary line.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "log.h"
#include "replay.h"
#include "signals.h"

static void tw_replay_usage(FILE *out)
{
    fprintf(
        out,
        "usage: trainwatch replay DIR --brokers B [options]\n"
        "\n"
        "Publishes the profiler-output folder DIR (the agent's system/ and\n"
        "framework/ files) to Kafka as FlatBuffers metric batches keyed by\n"
        "the job id, in the order the engine reads files: a JOB_START\n"
        "marker, every batch, a JOB_END marker. Sequence numbers start at\n"
        "1 per (job, node); markers come from node \"replay\".\n"
        "Batches larger than 900000 bytes are split; a single record\n"
        "larger than that (eval accepts it) goes alone in a message of\n"
        "its own, up to 64 MiB, with a warning: the broker must accept\n"
        "it (the embedded broker does; Kafka's default limit is 1 MB).\n"
        "\n"
        "Flow control: before each message replay waits while the\n"
        "consumer group (--group) has not yet read more than --max-lag\n"
        "bytes of what this replay published (its committed offsets, or\n"
        "the position `trainwatch run` commits with them), so a broker\n"
        "that keeps little loses nothing: the embedded broker (`trainwatch\n"
        "broker`) keeps 5 MiB per partition and deletes older messages\n"
        "whether read or not. While waiting it logs progress every 5 s,\n"
        "and a warning every 10 s during which the group read nothing.\n"
        "\n"
        "options:\n"
        "  --brokers B         bootstrap servers, host:port[,host:port]\n"
        "                      (required)\n"
        "  --topic T           topic (default trainwatch.metrics)\n"
        "  --job J             job id and Kafka key (default: DIR's base\n"
        "                      name)\n"
        "  --follow            keep following DIR while the agent writes\n"
        "                      it: list it every second, publish new\n"
        "                      files and the complete lines appended to\n"
        "                      system files; framework files once their\n"
        "                      size is stable for a second. Ends when\n"
        "                      training_job_end.ts appears (then JOB_END)\n"
        "                      or on SIGINT/SIGTERM (no JOB_END)\n"
        "  --rate X            limit the pace: X samples+events per second\n"
        "                      (e.g. 50000), or with a trailing x a\n"
        "                      multiple of the data's own time (1x = as\n"
        "                      fast as it was recorded, 60x = an hour in a\n"
        "                      minute). Default: as fast as possible\n"
        "  --group G           the consumer group to wait for (default\n"
        "                      trainwatch, the engine's kafka.group\n"
        "                      default); none: no flow control (a broker\n"
        "                      with little retention may then delete\n"
        "                      messages before they are read)\n"
        "  --max-lag SIZE      most bytes of this replay the group may\n"
        "                      have left unread, with an optional k, M or\n"
        "                      G (x1024) suffix (default 3M: 60%% of the\n"
        "                      embedded broker's 5 MiB per partition; with\n"
        "                      a Kafka cluster keeping more, raise it for\n"
        "                      speed). Also at most 50000 messages\n"
        "  --end-marker        send JOB_END at the end (default)\n"
        "  --no-end-marker     do not send JOB_END\n"
        "  --reorder N         testing: publish data messages in blocks of\n"
        "                      N, each block newest first (out of order\n"
        "                      by at most N-1 places; markers stay in\n"
        "                      place). The engine must give the same\n"
        "                      results while within its lateness\n"
        "  --duplicate-every K testing: publish every K-th message twice\n"
        "                      (the engine drops the copy by its sequence\n"
        "                      number)\n"
        "  --drop-every K      testing: never publish every K-th data\n"
        "                      message (a loss the engine must report as\n"
        "                      a sequence gap; counted as dropped=)\n"
        "  --key K             testing: publish with key K instead of the\n"
        "                      job id ('' = no key; the engine must\n"
        "                      dead-letter such messages as key_mismatch)\n"
        "  -X KEY=VALUE        librdkafka property, e.g.\n"
        "                      security.protocol=SASL_SSL (repeatable)\n"
        "  -q, --quiet         no log lines below warnings\n"
        "  -h, --help          this text\n"
        "\n"
        "At the end one summary line goes to stdout:\n"
        "  replay: job=J batches=N markers=M samples=S events=E files=F\n"
        "          bad_lines=L mb=X seconds=T delivered=D failed=F\n"
        "          duplicates=U dropped=V oversized=O flow_waits=W\n"
        "          flow_wait_s=S unreadable_dirs=R skipped_dirs=K\n"
        "          [interrupted]\n"
        "(on one line) where batches counts every message published,\n"
        "markers included; mb the encoded megabytes (10^6 bytes);\n"
        "delivered/failed what the brokers acknowledged or not;\n"
        "unreadable_dirs/skipped_dirs the folders not walked (each named\n"
        "in a warning: unreadable, symbolic link loop, reached twice).\n"
        "oversized the single records sent alone past 900000 bytes;\n"
        "flow_waits/flow_wait_s how often and how long flow control\n"
        "waited for the group.\n"
        "\n"
        "Exit status: 0 when every batch was delivered (also after a\n"
        "signal), 1 on a failure, 2 on bad usage.\n");
}

/* "N", "Nk", "NM", "NG" (x1024) bytes, >= 1. */
static int tw_replay_parse_size(const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || s[0] == '-')
        return -1;
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    else if (*end == 'g' || *end == 'G')
        shift = 30;
    if (shift != 0)
        end++;
    if (*end != '\0' || v < 1 || v > (UINT64_MAX >> 30))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int tw_replay_parse_rate(const char *s, tw_replay *r)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || !(v > 0) || !isfinite(v))
        return -1;
    if (*end == 'x' && end[1] == '\0') {
        r->rate_mode = TW_RATE_SPEED;
    } else if (*end == '\0') {
        r->rate_mode = TW_RATE_RECORDS;
    } else {
        return -1;
    }
    r->rate = v;
    return 0;
}

int tw_cmd_replay(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"brokers", required_argument, NULL, 'b'},
        {"topic", required_argument, NULL, 't'},
        {"job", required_argument, NULL, 'j'},
        {"follow", no_argument, NULL, 'f'},
        {"rate", required_argument, NULL, 'r'},
        {"end-marker", no_argument, NULL, 'e'},
        {"no-end-marker", no_argument, NULL, 'E'},
        {"reorder", required_argument, NULL, 'R'},
        {"duplicate-every", required_argument, NULL, 'D'},
        {"drop-every", required_argument, NULL, 'P'},
        {"key", required_argument, NULL, 'K'},
        {"group", required_argument, NULL, 'g'},
        {"max-lag", required_argument, NULL, 'L'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    tw_replay r;
    memset(&r, 0, sizeof(r));
    r.topic = "trainwatch.metrics";
    r.end_marker = 1;
    const char *brokers = NULL;
    const char *group = TW_REPLAY_DEFAULT_GROUP;
    uint64_t max_lag = TW_REPLAY_DEFAULT_MAX_LAG;
    /* props[0]: room for single records past 900000 bytes; -X after it */
    char max_bytes_prop[64];
    snprintf(max_bytes_prop, sizeof(max_bytes_prop), "message.max.bytes=%u",
             TW_REPLAY_MAX_RECORD_MESSAGE + 65536u);
    const char *props[TW_REPLAY_MAX_PROPS + 1] = {max_bytes_prop};
    size_t nprops = 1;

    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "X:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            brokers = optarg;
            break;
        case 't':
            r.topic = optarg;
            break;
        case 'j':
            r.job = optarg;
            break;
        case 'f':
            r.follow = 1;
            break;
        case 'r':
            if (tw_replay_parse_rate(optarg, &r) != 0) {
                fprintf(stderr,
                        "trainwatch replay: --rate '%s': expected records "
                        "per second (e.g. 50000) or a multiple of real "
                        "time (e.g. 2x)\n",
                        optarg);
                return 2;
            }
            break;
        case 'e':
            r.end_marker = 1;
            break;
        case 'E':
            r.end_marker = 0;
            break;
        case 'K':
            r.key = optarg;
            r.key_set = 1;
            break;
        case 'P':
        case 'R':
        case 'D': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (end == optarg || *end != '\0' || errno != 0 || v < 1 ||
                v > (c == 'R' ? 1000ULL : UINT64_MAX)) {
                fprintf(stderr,
                        "trainwatch replay: --%s '%s': expected a whole "
                        "number from 1%s\n",
                        c == 'R'   ? "reorder"
                        : c == 'P' ? "drop-every"
                                   : "duplicate-every",
                        optarg, c == 'R' ? " to 1000" : "");
                return 2;
            }
            if (c == 'R')
                r.reorder = (size_t)v;
            else if (c == 'P')
                r.drop_every = v;
            else
                r.duplicate_every = v;
            break;
        }
        case 'g':
            if (optarg[0] == '\0') {
                fprintf(stderr, "trainwatch replay: --group '': expected a "
                                "consumer group, or none\n");
                return 2;
            }
            group = strcmp(optarg, "none") == 0 ? NULL : optarg;
            break;
        case 'L':
            if (tw_replay_parse_size(optarg, &max_lag) != 0) {
                fprintf(stderr,
                        "trainwatch replay: --max-lag '%s': expected bytes "
                        "(at least 1), optionally with k, M or G\n",
                        optarg);
                return 2;
            }
            break;
        case 'X':
            if (nprops == TW_REPLAY_MAX_PROPS + 1) {
                fprintf(stderr, "trainwatch replay: at most %d -X options\n",
                        TW_REPLAY_MAX_PROPS);
                return 2;
            }
            props[nprops++] = optarg;
            break;
        case 'q':
            r.quiet = 1;
            tw_log_set_level(TW_LOG_WARN);
            break;
        case 'h':
            tw_replay_usage(stdout);
            return 0;
        default:
            tw_replay_usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "trainwatch replay: expected one folder DIR (see "
                        "--help)\n");
        return 2;
    }
    r.dir = argv[optind];
    if (brokers == NULL) {
        fprintf(stderr, "trainwatch replay: --brokers is required\n");
        return 2;
    }
    char base[PATH_MAX];
    if (r.job == NULL) {
        snprintf(base, sizeof(base), "%s", r.dir);
        size_t n = strlen(base);
        while (n > 1 && base[n - 1] == '/')
            base[--n] = '\0';
        r.job = basename(base);
    }
    if (r.job[0] == '\0' || strcmp(r.job, "/") == 0 ||
        strcmp(r.job, ".") == 0 || strcmp(r.job, "..") == 0) {
        fprintf(stderr,
                "trainwatch replay: cannot take a job id from '%s': "
                "give --job\n",
                r.dir);
        return 2;
    }

    if (tw_signals_block(&r.sigs) != 0) {
        tw_log(TW_LOG_ERROR, "replay: cannot block signals: %s",
               strerror(errno));
        return 1;
    }
    char err[512];
    int status = 1;
    if (tw_replay_open(&r, brokers, props, nprops, group, max_lag, err,
                       sizeof(err)) != 0)
        tw_log(TW_LOG_ERROR, "replay: %s", err);
    else if (tw_replay_run(&r) == 0)
        status = 0;
    tw_replay_summary(&r, stdout);
    tw_replay_close(&r);
    return status;
}
