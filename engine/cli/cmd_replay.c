/*
 * cmd_replay.c - `trainwatch replay DIR`: options, then tools/replay.h
 * publishes the folder (see there for order, numbering, markers, flow
 * control and following), then the summary line.
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "commands.h"
#include "log.h"
#include "replay.h"
#include "signals.h"

enum {
    OPT_BROKERS = 1,
    OPT_TOPIC,
    OPT_JOB,
    OPT_FOLLOW,
    OPT_RATE,
    OPT_GROUP,
    OPT_MAX_LAG,
    OPT_END_MARKER,
    OPT_NO_END_MARKER,
    OPT_REORDER,
    OPT_DUPLICATE_EVERY,
    OPT_DROP_EVERY,
    OPT_KEY,
    OPT_PROP,
    OPT_QUIET,
    OPT_TRACE_START
};

static const tw_cli_option tw_replay_options[] = {
    {"brokers", 0, "B", "bootstrap servers, host:port[,host:port] (required)",
     OPT_BROKERS},
    {"topic", 0, "T", "topic (default trainwatch.metrics)", OPT_TOPIC},
    {"job", 0, "J", "job id and Kafka key (default: DIR's base name)", OPT_JOB},
    {"follow", 0, NULL,
     "keep following DIR while the agent writes it: list it every second, "
     "publish new files and the complete lines appended to system files; "
     "framework files once their size is stable for a second. Ends when "
     "training_job_end.ts appears (then JOB_END) or on SIGINT/SIGTERM (no "
     "JOB_END)",
     OPT_FOLLOW},
    {"rate", 0, "X",
     "limit the pace: X samples+events per second (e.g. 50000), or with a "
     "trailing x a multiple of the data's own time (1x = as fast as it was "
     "recorded, 60x = an hour in a minute). Default: as fast as possible",
     OPT_RATE},
    {"group", 0, "G",
     "the consumer group to wait for (default trainwatch, the engine's "
     "kafka.group default); none: no flow control (a broker with little "
     "retention may then delete messages before they are read)",
     OPT_GROUP},
    {"max-lag", 0, "SIZE",
     "most bytes of this replay the group may have left unread, with an "
     "optional k, M or G (x1024) suffix (default 3M: 60% of the embedded "
     "broker's 5 MiB per partition; with a Kafka cluster keeping more, "
     "raise it for speed). Also at most 50000 messages",
     OPT_MAX_LAG},
    {"end-marker", 0, NULL, "send JOB_END at the end (default)",
     OPT_END_MARKER},
    {"no-end-marker", 0, NULL, "do not send JOB_END", OPT_NO_END_MARKER},
    {"reorder", 0, "N",
     "testing: publish data messages in blocks of N, each block newest "
     "first (out of order by at most N-1 places; markers stay in place). "
     "The engine must give the same results while within its lateness",
     OPT_REORDER},
    {"duplicate-every", 0, "K",
     "testing: publish every K-th message twice (the engine drops the copy "
     "by its sequence number)",
     OPT_DUPLICATE_EVERY},
    {"drop-every", 0, "K",
     "testing: never publish every K-th data message (a loss the engine "
     "must report as a sequence gap; counted as dropped=)",
     OPT_DROP_EVERY},
    {"key", 0, "K",
     "testing: publish with key K instead of the job id ('' = no key; the "
     "engine must dead-letter such messages as key_mismatch)",
     OPT_KEY},
    {NULL, 'X', "KEY=VALUE",
     "librdkafka property, e.g. security.protocol=SASL_SSL (repeatable)",
     OPT_PROP},
    {"quiet", 'q', NULL, "no log lines below warnings", OPT_QUIET},
    {"trace-start", 0, "SECONDS",
     "PyTorch traces with relative times: their ts 0 is this time (seconds "
     "since the epoch) instead of the file's mtime minus its span (as "
     "eval's --trace-start)",
     OPT_TRACE_START},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command tw_replay_command = {
    .name = "replay",
    .synopsis = "DIR|TRACE --brokers B [options]",
    .description =
        "Publishes the profiler-output folder DIR (the agent's system/ and\n"
        "framework/ files, PyTorch traces *.pt.trace.json[.gz]) or one\n"
        "PyTorch profiler trace file TRACE (read as eval reads it) to\n"
        "Kafka as FlatBuffers metric batches keyed by\n"
        "the job id, in the order the engine reads files: a JOB_START\n"
        "marker, every batch, a JOB_END marker. Sequence numbers start at\n"
        "1 per (job, node); markers come from node \"replay\".\n"
        "A legacy debug-output folder's tensors go as the training\n"
        "hook sends them: one batch per (worker, step).\n"
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
        "and a warning every 10 s during which the group read nothing.\n",
    .options = tw_replay_options,
    .epilogue =
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
        "signal), 1 on a failure, 2 on bad usage.\n",
};

/* What the options ask for besides the tw_replay fields. */
typedef struct tw_replay_cmd {
    const char *brokers;
    const char *group;
    uint64_t max_lag;
    /* props[0]: room for single records past 900000 bytes; -X after it */
    char max_bytes_prop[64];
    const char *props[TW_REPLAY_MAX_PROPS + 1];
    size_t nprops;
    char base[PATH_MAX]; /* DIR's base name: the default job id */
} tw_replay_cmd;

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

/* --reorder N, --duplicate-every K, --drop-every K. */
static int tw_replay_cmd_count(const char *opt, const char *arg, uint64_t max,
                               uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (end == arg || *end != '\0' || errno != 0 || v < 1 || v > max) {
        fprintf(stderr,
                "trainwatch replay: --%s '%s': expected a whole "
                "number from 1%s\n",
                opt, arg, max == 1000 ? " to 1000" : "");
        return -1;
    }
    *out = v;
    return 0;
}

/* One option into r or c; -1 on a bad value (said on stderr). */
static int tw_replay_cmd_option(tw_replay *r, tw_replay_cmd *c, int id,
                                const char *arg)
{
    uint64_t v = 0;
    switch (id) {
    case OPT_BROKERS:
        c->brokers = arg;
        break;
    case OPT_TOPIC:
        r->topic = arg;
        break;
    case OPT_JOB:
        r->job = arg;
        break;
    case OPT_FOLLOW:
        r->follow = 1;
        break;
    case OPT_RATE:
        if (tw_replay_parse_rate(arg, r) != 0) {
            fprintf(stderr,
                    "trainwatch replay: --rate '%s': expected records "
                    "per second (e.g. 50000) or a multiple of real "
                    "time (e.g. 2x)\n",
                    arg);
            return -1;
        }
        break;
    case OPT_END_MARKER:
    case OPT_NO_END_MARKER:
        r->end_marker = id == OPT_END_MARKER;
        break;
    case OPT_KEY:
        r->key = arg;
        r->key_set = 1;
        break;
    case OPT_REORDER:
        if (tw_replay_cmd_count("reorder", arg, 1000, &v) != 0)
            return -1;
        r->reorder = (size_t)v;
        break;
    case OPT_DROP_EVERY:
        return tw_replay_cmd_count("drop-every", arg, UINT64_MAX,
                                   &r->drop_every);
    case OPT_DUPLICATE_EVERY:
        return tw_replay_cmd_count("duplicate-every", arg, UINT64_MAX,
                                   &r->duplicate_every);
    case OPT_GROUP:
        if (arg[0] == '\0') {
            fprintf(stderr, "trainwatch replay: --group '': expected a "
                            "consumer group, or none\n");
            return -1;
        }
        c->group = strcmp(arg, "none") == 0 ? NULL : arg;
        break;
    case OPT_MAX_LAG:
        if (tw_replay_parse_size(arg, &c->max_lag) != 0) {
            fprintf(stderr,
                    "trainwatch replay: --max-lag '%s': expected bytes "
                    "(at least 1), optionally with k, M or G\n",
                    arg);
            return -1;
        }
        break;
    case OPT_PROP:
        if (c->nprops == TW_REPLAY_MAX_PROPS + 1) {
            fprintf(stderr, "trainwatch replay: at most %d -X options\n",
                    TW_REPLAY_MAX_PROPS);
            return -1;
        }
        c->props[c->nprops++] = arg;
        break;
    case OPT_QUIET:
        r->quiet = 1;
        tw_log_set_level(TW_LOG_WARN);
        break;
    case OPT_TRACE_START:
        if (tw_cli_parse_epoch_us(arg, &r->trace_start_us) != 0) {
            fprintf(stderr,
                    "trainwatch replay: --trace-start '%s': expected "
                    "seconds since the epoch (e.g. 1700000000.25)\n",
                    arg);
            return -1;
        }
        r->has_trace_start = 1;
        break;
    }
    return 0;
}

/* The job id when --job is not given: DIR's base name. */
static int tw_replay_cmd_job(tw_replay *r, tw_replay_cmd *c)
{
    if (r->job == NULL) {
        snprintf(c->base, sizeof(c->base), "%s", r->dir);
        size_t n = strlen(c->base);
        while (n > 1 && c->base[n - 1] == '/')
            c->base[--n] = '\0';
        r->job = basename(c->base);
    }
    if (r->job[0] == '\0' || strcmp(r->job, "/") == 0 ||
        strcmp(r->job, ".") == 0 || strcmp(r->job, "..") == 0) {
        fprintf(stderr,
                "trainwatch replay: cannot take a job id from '%s': "
                "give --job\n",
                r->dir);
        return -1;
    }
    return 0;
}

/* Defaults, then the options and DIR: -1 to exit with *status (0 after
 * --help, 2 on bad usage). */
static int tw_replay_cmd_load(tw_replay *r, tw_replay_cmd *c, int argc,
                              char **argv, int *status)
{
    memset(r, 0, sizeof(*r));
    memset(c, 0, sizeof(*c));
    r->topic = "trainwatch.metrics";
    r->end_marker = 1;
    c->group = TW_REPLAY_DEFAULT_GROUP;
    c->max_lag = TW_REPLAY_DEFAULT_MAX_LAG;
    snprintf(c->max_bytes_prop, sizeof(c->max_bytes_prop),
             "message.max.bytes=%u", TW_REPLAY_MAX_RECORD_MESSAGE + 65536u);
    c->props[0] = c->max_bytes_prop;
    c->nprops = 1;
    *status = 2;
    tw_cli_parser p;
    tw_cli_begin(&p, &tw_replay_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        if (id == TW_CLI_HELP)
            *status = 0;
        if (id < 0 || tw_replay_cmd_option(r, c, id, p.arg) != 0)
            return -1;
    }
    if (p.optind != argc - 1) {
        fprintf(stderr, "trainwatch replay: expected one folder DIR (see "
                        "--help)\n");
        return -1;
    }
    r->dir = argv[p.optind];
    if (c->brokers == NULL) {
        fprintf(stderr, "trainwatch replay: --brokers is required\n");
        return -1;
    }
    return tw_replay_cmd_job(r, c);
}

int tw_cmd_replay(int argc, char **argv)
{
    tw_replay r;
    tw_replay_cmd c;
    int status;
    if (tw_replay_cmd_load(&r, &c, argc, argv, &status) != 0)
        return status;
    if (tw_signals_block(&r.sigs) != 0) {
        tw_log(TW_LOG_ERROR, "replay: cannot block signals: %s",
               strerror(errno));
        return 1;
    }
    char err[512];
    status = 1;
    if (tw_replay_open(&r, c.brokers, c.props, c.nprops, c.group, c.max_lag,
                       err, sizeof(err)) != 0)
        tw_log(TW_LOG_ERROR, "replay: %s", err);
    else if (tw_replay_run(&r) == 0)
        status = 0;
    tw_replay_summary(&r, stdout);
    tw_replay_close(&r);
    return status;
}
