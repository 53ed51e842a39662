/*
 * cmd_run.c - `trainwatch run --config FILE`: the daemon. One consuming
 * thread: poll the metrics topic (kafka_source.h), verify and decode each
 * message (wire.h), send what fails to the dead-letter topic
 * (dead_letter.h), route batches to their jobs (job_router.h), publish
 * alerts (alert.h) with the producer (kafka_producer.h), and commit the
 * offsets the router says are safe, after the producer has delivered
 * every alert and dead letter they cover.
 *
 * Configuration sections interpreted here (config.h keeps them flat):
 *   kafka:  brokers, group, metrics_topic, alerts_topic, deadletter_topic,
 *           client_id, properties.<librdkafka property> (passed unchanged
 *           to the consumer and the producer)
 *   engine: job_idle, results_dir, commit_interval, progress_interval
 *   state:  state_store.h (opened here, interpreted there)
 *
 * Every partition is checkpointed (job_router.h: one protocol for every
 * store) at most every state.checkpoint_interval (engine.commit_interval
 * with the plain memory store, which keeps no job state) and when a job
 * finishes: queued alerts are claimed and sent, the producer is flushed,
 * the checkpoint written, and only then the Kafka offset committed.
 * A message whose key is not its batch's job id is dead-lettered
 * (key_mismatch): a job split over partitions would be evaluated in
 * fragments by different owners. When the store cannot be reached
 * consumption stops (every partition paused, messages already fetched
 * dropped; the consumer keeps polling so the group keeps it), the store
 * is retried with its backoff, and once it answers the pending work is
 * redone, each partition sought back to where processing stopped, and
 * consumption resumed.
 *
 * SIGINT/SIGTERM: the message in hand is finished, offsets are committed,
 * the group is left (the revoke commits again), the producer is flushed,
 * and a summary line goes to stdout.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_options.h"
#include "clock.h"
#include "commands.h"
#include "config.h"
#include "config_schema.h"
#include "dead_letter.h"
#include "finding_text.h"
#include "job_router.h"
#include "kafka_producer.h"
#include "kafka_source.h"
#include "log.h"
#include "quarantine.h"
#include "run_actions.h"
#include "run_http.h"
#include "signals.h"
#include "state_store.h"
#include "wire.h"

#define TW_RUN_MAX_PROPS 128
#define TW_RUN_FLUSH_MS 30000
#define TW_RUN_POLL_MS 100
/* How often the wall-clock rules (hangs, stalls) look at the live jobs. */
#define TW_RUN_WALLCLOCK_US 1000000
#define TW_RUN_ACTIONS_DRAIN_MS 10000
/* Most scans one message may run (tw_job_config.max_scans_per_advance):
 * with the clock-skew bound a batch moves the watermark by minutes, so
 * this is a safety net; the rest run with the next messages. */
#define TW_RUN_MAX_SCANS_PER_MESSAGE 1000

typedef struct tw_run_settings {
    const char *brokers;
    const char *group;
    const char *metrics_topic;
    const char *alerts_topic;
    const char *deadletter_topic;
    const char *client_id;
    tw_source_prop props[TW_RUN_MAX_PROPS];
    char *prop_where[TW_RUN_MAX_PROPS];
    char *prop_kv[TW_RUN_MAX_PROPS]; /* "key=value" for the producer */
    size_t nprops;
    int64_t job_idle_us;
    int64_t finding_every_us; /* -1: unset (by tick, tw_run_finding_every) */
    tw_on_data_loss on_data_loss;
    const char *results_dir;
    int report_html; /* engine.report_html */
    int64_t commit_interval_us;
    int64_t progress_interval_us;
    int64_t quarantine_after;   /* failures at one offset: quarantined */
    const char *failure_ledger; /* quarantine.h; NULL = in memory */
    char *default_ledger;       /* <results_dir>/.trainwatch-failures */
} tw_run_settings;

typedef struct tw_run {
    tw_run_settings s;
    tw_producer *producer;
    tw_kafka_source *source;
    tw_router *router;
    tw_run_actions *actions; /* NULL: no rule has actions */
    tw_store *store;         /* the state store (owned by tw_cmd_run) */
    int paused;              /* store unavailable: consumption stopped */
    int failed;              /* a commit or flush failed inside a rebalance */
    tw_quarantine *quarantine;
    tw_config *cfg;
    tw_registry *reg;
    sigset_t sigs;               /* SIGINT/SIGTERM, blocked and polled */
    int64_t commit_every_us;     /* checkpoint and commit pace */
    int64_t next_claim_check_us; /* the next unconfirmed-claims sweep */
    tw_run_http *http;           /* NULL: http.enabled is false */
    int64_t msg_polled_us;       /* when the message in hand was polled */
    int64_t next_wallclock_us;   /* next wall-clock rules call (monotonic) */
    char pause_reason[512];      /* why consumption stopped (readiness) */
} tw_run;

/* What the options ask for. */
typedef struct tw_run_opts {
    const char *config_path; /* NULL: the default configuration */
    const char *brokers;     /* overrides kafka.brokers */
    int check;               /* --check: validate, then exit */
} tw_run_opts;

enum { OPT_CONFIG = 1, OPT_BROKERS, OPT_CHECK, OPT_QUIET, OPT_VERBOSE };

static const tw_cli_option tw_run_options[] = {
    {"config", 0, "FILE",
     "configuration (YAML or JSON, see deploy/trainwatch.yaml): rules "
     "(default: ProfilerReport), tick, lateness, idle_node, clock_skew, and "
     "the sections kafka:, engine: and state: (their keys with their "
     "defaults below). `trainwatch config --describe` lists every key with "
     "its type, bounds and default. A file with a secret in it (such as "
     "properties: {sasl.password: ...}) is refused when every user can "
     "read it (chmod o-r).",
     OPT_CONFIG},
    {"brokers", 0, "B", "bootstrap servers; overrides kafka.brokers",
     OPT_BROKERS},
    {"check", 0, NULL,
     "load and check the configuration (every section, rules, plugins, "
     "actions, the state store), then exit: 0 when valid, 2 with "
     "file:line:key if not",
     OPT_CHECK},
    {"quiet", 'q', NULL, "warnings and errors only", OPT_QUIET},
    {"verbose", 'v', NULL, "debug log lines too", OPT_VERBOSE},
    {NULL, 0, NULL, NULL, 0}};

/* The sections' keys with their defaults, from the schema. */
static void tw_run_help_sections(FILE *out)
{
    static const tw_section sections[] = {TW_SECTION_KAFKA, TW_SECTION_ENGINE,
                                          TW_SECTION_STATE, TW_SECTION_HTTP,
                                          TW_SECTION_AM};
    fprintf(out, "\nconfiguration sections (keys with their defaults):\n");
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        fprintf(out, "  %s:\n", tw_section_name(sections[i]));
        tw_schema_print_keys(out, sections[i], 4);
    }
}

static const tw_cli_command tw_run_command = {
    .name = "run",
    .synopsis = "[--config FILE] [--brokers B] [options]",
    .description =
        "The streaming engine: joins a Kafka consumer group on the metrics\n"
        "topic, evaluates the configured rules per job (key = job id) at\n"
        "each tick of event time, publishes alerts as JSON on the alert\n"
        "topic (schemas/alert.schema.json), sends messages that fail\n"
        "verification or decoding to the dead-letter topic, and commits\n"
        "offsets only once the jobs they belong to no longer need them.\n"
        "A job ends with its JOB_END marker, or after engine.job_idle of\n"
        "wall time without a message; its results then go to\n"
        "engine.results_dir/<name>.json (same rule results as `eval --json`;\n"
        "<name>: the job id, bytes outside [A-Za-z0-9._-] as %XX, see\n"
        "README \"Results files\"; a failed write is retried with backoff)\n"
        "and its HTML report to <name>.html (engine.report_html).\n",
    .options = tw_run_options,
    .more = tw_run_help_sections,
    .epilogue =
        "Log lines go to stderr; a `progress:` line every\n"
        "progress_interval and, at the end, one summary line on stdout:\n"
        "  run: batches=N dead_letters=N duplicates=N late=N jobs_active=N\n"
        "       jobs_started=N jobs_finished=N jobs_partial=N\n"
        "       jobs_data_loss=N offset_gaps=N offsets_lost=N\n"
        "       alerts_sent=N alerts_deduped=N claims_unconfirmed=N ...\n"
        "       results_written=N results_versions=N\n"
        "       results_failures=N results_retries=N results_pending=N\n"
        "       skewed=N skewed_batches=N scan_cap_hits=N\n"
        "       and, when rules have actions:,\n"
        "       actions_fired=N actions_sent=N actions_failed=N ...\n"
        "       (with capture actions: captures_requested=N ...)\n"
        "A rule's actions (stop_training, webhook, signal, stop_file,\n"
        "email, sms, alertmanager, capture) fire on its findings\n"
        "(a ProfilerReport's: any sub-rule's); with state.store: redis\n"
        "each action id is claimed there first, so a restart never sends\n"
        "it again (at most once: a claim whose send a crash interrupted is\n"
        "reported by a WARN and counted in claims_unconfirmed once it is\n"
        "older than state.pending_after). A capture action\n"
        "asks the job's hooks on trainwatch.control for a profiler trace\n"
        "and stacks; its outcome is an alert of kind capture.\n"
        "\n"
        "With http.enabled: true (default 127.0.0.1:9468): /healthz,\n"
        "/readyz (503 with the reason when no partition is assigned or\n"
        "consumption is paused), /metrics (Prometheus text), /jobs,\n"
        "/jobs/<id> (its results JSON), /jobs/<id>/report; a bearer token\n"
        "(http.token_env or token_file) guards all but the probes.\n"
        "\n"
        "Clock skew: a sample, event or JOB_END latest time more than\n"
        "clock_skew (top-level key; default 10 ticks, at most idle_node;\n"
        "'off' disables it) ahead of its job's newest time is refused and\n"
        "counted (skewed=), never moves the job's clock, and its message\n"
        "is copied to the dead-letter topic with reason clock_skew (the\n"
        "rest of the batch is used). One message runs at most 1000 scans.\n"
        "Alerts and dead letters never exceed the producer's\n"
        "message.max.bytes (kafka.properties): longer alerts are sent\n"
        "without their report and with fewer nodes, marked truncated.\n"
        "A message that fails quarantine_after times at the same offset\n"
        "(restarts included, counted in failure_ledger) is quarantined:\n"
        "dead-lettered, its job's results marked quarantined.\n"
        "\n"
        "Stops on SIGINT/SIGTERM after the message in hand (a long\n"
        "evaluation is interrupted between scans and the message read\n"
        "again), committing what is safe. Exit status: 0 after a signal,\n"
        "1 on a failure, 2 on bad usage or configuration.\n",
};

static void tw_run_settings_free(tw_run_settings *s)
{
    for (size_t i = 0; i < s->nprops; i++) {
        free(s->prop_where[i]);
        free(s->prop_kv[i]);
    }
    s->nprops = 0;
    free(s->default_ledger);
    s->default_ledger = NULL;
}

/* Interprets the kafka: and engine: sections (keys, types, bounds and
 * defaults: config_schema.c). */
static int tw_run_settings_load(const tw_config *cfg, tw_run_settings *s,
                                char *err, size_t errlen)
{
    const tw_settings *k = &cfg->kafka, *e = &cfg->engine;
    if (tw_schema_check_settings(k, TW_SECTION_KAFKA, NULL, err, errlen) !=
            TW_OK ||
        tw_schema_check_settings(e, TW_SECTION_ENGINE, NULL, err, errlen) !=
            TW_OK)
        return TW_ERR;
    s->brokers = tw_schema_str(k, TW_SECTION_KAFKA, "brokers");
    s->group = tw_schema_str(k, TW_SECTION_KAFKA, "group");
    s->metrics_topic = tw_schema_str(k, TW_SECTION_KAFKA, "metrics_topic");
    s->alerts_topic = tw_schema_str(k, TW_SECTION_KAFKA, "alerts_topic");
    s->deadletter_topic =
        tw_schema_str(k, TW_SECTION_KAFKA, "deadletter_topic");
    s->client_id = tw_schema_str(k, TW_SECTION_KAFKA, "client_id");
    for (size_t i = 0; i < k->n; i++) {
        const tw_setting *it = &k->items[i];
        if (strncmp(it->key, "properties.", 11) != 0)
            continue;
        if (s->nprops == TW_RUN_MAX_PROPS)
            return tw_settings_error(k, it, err, errlen,
                                     "more than %d properties",
                                     TW_RUN_MAX_PROPS);
        const char *key = it->key + 11;
        size_t n = s->nprops;
        if (asprintf(&s->prop_where[n], "%s:%d: kafka: key '%s'", k->path,
                     it->line, it->key) < 0) {
            s->prop_where[n] = NULL;
            snprintf(err, errlen, "out of memory");
            return TW_ERR;
        }
        if (asprintf(&s->prop_kv[n], "%s=%s", key, it->value) < 0) {
            free(s->prop_where[n]);
            s->prop_where[n] = NULL;
            s->prop_kv[n] = NULL;
            snprintf(err, errlen, "out of memory");
            return TW_ERR;
        }
        s->props[n] = (tw_source_prop){
            .key = key, .value = it->value, .where = s->prop_where[n]};
        s->nprops++;
    }
    s->job_idle_us = tw_schema_duration_us(e, TW_SECTION_ENGINE, "job_idle");
    s->finding_every_us =
        tw_schema_str(e, TW_SECTION_ENGINE, "finding_every") == NULL
            ? -1
            : tw_schema_duration_us(e, TW_SECTION_ENGINE, "finding_every");
    s->commit_interval_us =
        tw_schema_duration_us(e, TW_SECTION_ENGINE, "commit_interval");
    s->progress_interval_us =
        tw_schema_duration_us(e, TW_SECTION_ENGINE, "progress_interval");
    s->on_data_loss =
        strcmp(tw_schema_str(e, TW_SECTION_ENGINE, "on_data_loss"), "skip") == 0
            ? TW_ON_DATA_LOSS_SKIP
            : TW_ON_DATA_LOSS_EVALUATE;
    s->quarantine_after =
        tw_schema_int(e, TW_SECTION_ENGINE, "quarantine_after");
    s->failure_ledger = tw_schema_str(e, TW_SECTION_ENGINE, "failure_ledger");
    s->results_dir = tw_schema_str(e, TW_SECTION_ENGINE, "results_dir");
    s->report_html = tw_schema_bool(e, TW_SECTION_ENGINE, "report_html");
    if (s->failure_ledger == NULL && s->results_dir != NULL) {
        if (asprintf(&s->default_ledger, "%s/.trainwatch-failures",
                     s->results_dir) < 0) {
            s->default_ledger = NULL;
            snprintf(err, errlen, "out of memory");
            return TW_ERR;
        }
        s->failure_ledger = s->default_ledger;
    }
    if (s->results_dir != NULL) {
        struct stat sb;
        if (stat(s->results_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return tw_settings_error(e, tw_settings_find(e, "results_dir"), err,
                                     errlen, "'%s' is not a folder%s%s",
                                     s->results_dir, errno ? ": " : "",
                                     errno ? strerror(errno) : "");
    }
    return TW_OK;
}

/* ---- outputs and commits ------------------------------------------------- */

/* What the key (a job id, at most TW_WIRE_ID_MAX bytes), tw_run_alert's
 * three headers and the record's framing may take of a message. */
#define TW_RUN_ALERT_HEADROOM 1024

/* Below this no alert fits (its fixed fields alone). */
#define TW_RUN_ALERT_MIN 512

/* engine.finding_every, or by default 60 s of event time with continuous
 * ticks (a scan per message: a rule that keeps finding would publish a
 * finding per message) and every scan that finds with ticks. */
static int64_t tw_run_finding_every(const tw_run_settings *s,
                                    const tw_job_config *jc)
{
    if (s->finding_every_us >= 0)
        return s->finding_every_us;
    return jc->tick_us == 0 ? 60 * 1000000LL : 0;
}

/* The longest alert JSON the producer will accept (message.max.bytes in
 * kafka.properties, else librdkafka's 1000000), less the headroom. */
static size_t tw_run_alert_room(const tw_run_settings *s)
{
    size_t max = tw_producer_props_max_message_bytes(
        (const char *const *)s->prop_kv, s->nprops);
    if (max >= TW_RUN_ALERT_HEADROOM + TW_RUN_ALERT_MIN)
        return max - TW_RUN_ALERT_HEADROOM;
    /* Every alert will fail to fit, and its job be quarantined. */
    tw_log(TW_LOG_WARN,
           "run: kafka.properties message.max.bytes %zu leaves no room for "
           "alerts (at least %d needed): every job will be quarantined",
           max, TW_RUN_ALERT_HEADROOM + TW_RUN_ALERT_MIN);
    return TW_RUN_ALERT_MIN;
}

static int tw_run_alert(void *ud, const char *job, const char *id,
                        const char *json, size_t len, int32_t partition,
                        int64_t offset, const tw_alert_facts *facts)
{
    tw_run *r = ud;
    char part[16], off[32], err[512];
    snprintf(part, sizeof(part), "%" PRId32, partition);
    snprintf(off, sizeof(off), "%" PRId64, offset);
    /* Headers: the alert id for consumers that dedupe without parsing,
     * and which metrics message completed the scan (latency tracing). */
    tw_kafka_header h[3] = {{"trainwatch.alert.id", id, strlen(id)},
                            {"trainwatch.source.partition", part, strlen(part)},
                            {"trainwatch.source.offset", off, strlen(off)}};
    size_t nh = offset >= 0 ? 3 : 1;
    if (tw_producer_send(r->producer, r->s.alerts_topic, job, json, len, h, nh,
                         err, sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "alert %s of job %s: %s", id, job, err);
        return TW_ERR;
    }
    /* a person reading the log sees the finding, not only a count */
    if (facts != NULL && facts->kind == TW_ALERT_FINDING &&
        facts->has_finding) {
        char line[1400];
        tw_finding_line(&facts->finding, facts->job_start_us, line,
                        sizeof(line));
        tw_log(TW_LOG_INFO, "finding: job %s rule %s%s%s: %s", job, facts->rule,
               facts->parent ? " in " : "", facts->parent ? facts->parent : "",
               line);
    }
    tw_run_actions_alert(r->actions, job, id, json, len, facts); /* queues */
    tw_run_metrics *mt = tw_run_http_metrics(r->http);
    if (mt != NULL) {
        int64_t now = tw_mono_us();
        if (offset >= 0 && r->msg_polled_us > 0)
            tw_run_metrics_observe(mt, TW_LATENCY_ALERT,
                                   now - r->msg_polled_us);
        if (facts != NULL && tw_run_metrics_alert(mt, job, facts, now) != TW_OK)
            tw_log(TW_LOG_WARN, "http: out of memory counting an alert");
    }
    return TW_OK;
}

/* Store unavailable: stop consuming (once). */
static void tw_run_pause(tw_run *r, const char *why)
{
    if (r->paused)
        return;
    char err[512];
    r->paused = 1;
    snprintf(r->pause_reason, sizeof(r->pause_reason), "%s", why);
    if (tw_source_pause(r->source, 1, err, sizeof(err)) != 0)
        tw_log(TW_LOG_WARN, "%s", err);
    tw_log(TW_LOG_WARN, "paused consumption: %s", why);
}

/* With a store: claims and sends queued alerts, delivers them, then
 * checkpoints the given partitions. TW_UNAVAILABLE pauses consumption. */
static int tw_run_checkpoint(tw_run *r, const int32_t *parts, size_t n)
{
    char err[512];
    int64_t t0 = tw_mono_us();
    tw_router_stats before;
    tw_router_get_stats(r->router, &before);
    int rc = tw_router_flush_alerts(r->router, err, sizeof(err));
    if (rc == TW_OK && tw_producer_flush(r->producer, TW_RUN_FLUSH_MS, err,
                                         sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "not checkpointing: %s", err);
        r->failed = 1;
        return TW_ERR;
    }
    /* everything produced so far is delivered: clear those claims (one
     * round trip per checkpoint, not per alert) */
    if (rc == TW_OK) {
        rc = tw_router_confirm_alerts(r->router, err, sizeof(err));
        if (rc == TW_ERR) {
            tw_log(TW_LOG_WARN, "confirming delivered alerts: %s", err);
            rc = TW_OK; /* kept: tried again at the next checkpoint */
        }
    }
    for (size_t i = 0; rc == TW_OK && i < n; i++)
        rc = tw_router_checkpoint(r->router, parts[i], err, sizeof(err));
    if (rc == TW_OK && n > 0 && r->http != NULL) {
        tw_run_metrics *mt = tw_run_http_metrics(r->http);
        tw_run_metrics_observe(mt, TW_LATENCY_CHECKPOINT, tw_mono_us() - t0);
        tw_router_stats after;
        tw_router_get_stats(r->router, &after);
        if (after.checkpoints != before.checkpoints)
            tw_run_metrics_checkpoint_bytes(mt, after.checkpoint_bytes -
                                                    before.checkpoint_bytes);
    }
    if (rc == TW_UNAVAILABLE)
        tw_run_pause(r, err);
    else if (rc != TW_OK) {
        tw_log(TW_LOG_ERROR, "checkpoint: %s", err);
        r->failed = 1; /* not an outage: the engine cannot go on */
    }
    return rc;
}

/* Checkpoints the given partitions (which delivers everything produced
 * so far first), then commits their safe offsets: those of the last
 * checkpoint, even when this one could not be written. */
static int tw_run_commit(tw_run *r, const int32_t *parts, size_t n)
{
    char err[512];
    if (!r->paused && tw_run_checkpoint(r, parts, n) == TW_ERR)
        return TW_ERR;
    tw_source_commit_entry e[64];
    size_t ne = 0;
    for (size_t i = 0; i < n; i++) {
        if (tw_router_commit_point(r->router, parts[i], &e[ne]) == 1)
            ne++;
        if (ne == sizeof(e) / sizeof(e[0]) || (i + 1 == n && ne > 0)) {
            if (tw_source_commit(r->source, e, ne, err, sizeof(err)) != 0) {
                tw_log(TW_LOG_WARN, "%s", err);
                return TW_ERR;
            }
            for (size_t k = 0; k < ne; k++)
                tw_log(TW_LOG_DEBUG,
                       "committed partition %" PRId32 " offset %" PRId64 "%s%s",
                       e[k].partition, e[k].offset,
                       e[k].metadata ? " metadata " : "",
                       e[k].metadata ? e[k].metadata : "");
            ne = 0;
        }
    }
    return TW_OK;
}

static int tw_run_commit_all(tw_run *r)
{
    int32_t parts[1024];
    size_t n = tw_router_partitions(r->router, parts, 1024);
    return tw_run_commit(r, parts, n);
}

static void tw_run_on_assign(void *ud, tw_kafka_source *s,
                             tw_source_assigned *a, size_t n)
{
    (void)s;
    tw_run *r = ud;
    char err[1024];
    for (size_t i = 0; i < n; i++) {
        tw_log(TW_LOG_INFO,
               "assigned partition %" PRId32 " (committed offset %" PRId64 ")",
               a[i].partition, a[i].committed);
        if (tw_router_assign(r->router, a[i].partition, a[i].metadata,
                             a[i].committed, &a[i].start_offset, err,
                             sizeof(err)) != TW_OK) {
            tw_log(TW_LOG_ERROR, "partition %" PRId32 ": %s", a[i].partition,
                   err);
            r->failed = 1;
        }
    }
    /* a checkpoint that could not be loaded yet: consume nothing */
    if (tw_router_load_pending(r->router, err, sizeof(err)) == TW_UNAVAILABLE)
        tw_run_pause(r, err);
}

/* Paused: retry the store when its backoff allows; once it answers, redo
 * what failed, seek every partition back to where processing stopped and
 * resume. TW_ERR = cannot go on. */
static int tw_run_try_resume(tw_run *r)
{
    char err[1024];
    if (tw_store_retry_in_ms(r->store) > 0 ||
        tw_store_ping(r->store, err, sizeof(err)) != TW_OK)
        return TW_OK;
    int rc = tw_router_load_pending(r->router, err, sizeof(err));
    if (rc == TW_ERR) {
        tw_log(TW_LOG_ERROR, "run: %s", err);
        return TW_ERR;
    }
    if (rc != TW_OK)
        return TW_OK;
    int32_t parts[1024];
    size_t n = tw_router_partitions(r->router, parts, 1024);
    r->paused = 0; /* lets tw_run_commit checkpoint */
    rc = tw_run_commit(r, parts, n);
    if (r->paused)
        return TW_OK; /* down again */
    if (rc == TW_ERR)
        return TW_ERR;
    for (size_t i = 0; i < n; i++) {
        int64_t pos = tw_router_position(r->router, parts[i]);
        if (pos != TW_SOURCE_OFFSET_DEFAULT &&
            tw_source_seek(r->source, parts[i], pos, err, sizeof(err)) != 0) {
            tw_log(TW_LOG_WARN, "%s", err);
            r->paused = 1; /* try again later */
            return TW_OK;
        }
    }
    if (tw_source_pause(r->source, 0, err, sizeof(err)) != 0) {
        tw_log(TW_LOG_WARN, "%s", err);
        r->paused = 1;
        return TW_OK;
    }
    tw_log(TW_LOG_INFO, "resumed consumption (%zu partition(s))", n);
    return TW_OK;
}

static void tw_run_on_revoke(void *ud, tw_kafka_source *s, const int32_t *parts,
                             size_t n)
{
    (void)s;
    tw_run *r = ud;
    /* The message in hand is done (we are inside poll): commit what is
     * safe before another member starts reading these partitions. */
    if (tw_run_commit(r, parts, n) != TW_OK)
        tw_log(TW_LOG_WARN, "revoke: could not commit; the next owner "
                            "re-reads from the previous commit");
    for (size_t i = 0; i < n; i++)
        tw_router_revoke(r->router, parts[i]);
}

static void tw_run_stats_line(const tw_router *router,
                              const tw_run_actions *actions, const char *prefix,
                              FILE *out)
{
    char act[512];
    tw_run_actions_format(actions, act, sizeof(act));
    tw_router_stats st;
    tw_router_get_stats(router, &st);
    fprintf(out,
            "%s batches=%" PRIu64 " samples=%" PRIu64 " events=%" PRIu64
            " dead_letters=%" PRIu64 " duplicates=%" PRIu64 " late=%" PRIu64
            " jobs_active=%" PRIu64 " jobs_started=%" PRIu64
            " jobs_finished=%" PRIu64 " jobs_idle=%" PRIu64
            " jobs_dropped=%" PRIu64 " jobs_partial=%" PRIu64
            " jobs_finished_before=%" PRIu64 " jobs_data_loss=%" PRIu64
            " jobs_skipped_partial=%" PRIu64 " skipped_messages=%" PRIu64
            " after_end=%" PRIu64 " offset_gaps=%" PRIu64
            " offsets_lost=%" PRIu64 " key_mismatches=%" PRIu64
            " scans=%" PRIu64 " alerts_sent=%" PRIu64 " alerts_deduped=%" PRIu64
            " claims_unconfirmed=%" PRIu64 " jobs_restored=%" PRIu64
            " checkpoints=%" PRIu64 " results_written=%" PRIu64
            " results_versions=%" PRIu64 " results_failures=%" PRIu64
            " results_retries=%" PRIu64 " results_pending=%" PRIu64
            " checkpoints_held=%" PRIu64 " skewed=%" PRIu64
            " skewed_batches=%" PRIu64 " scan_cap_hits=%" PRIu64
            " alerts_truncated=%" PRIu64 " findings_held=%" PRIu64
            " jobs_quarantined=%" PRIu64 " messages_quarantined=%" PRIu64
            " python_profiles=%" PRIu64 " tensors=%" PRIu64
            " late_tensors=%" PRIu64 "%s\n",
            prefix, st.batches, st.samples, st.events, st.dead_letters,
            st.duplicates, st.late_samples + st.late_events, st.jobs_active,
            st.jobs_started, st.jobs_finished, st.jobs_idle, st.jobs_dropped,
            st.jobs_partial, st.jobs_finished_before, st.jobs_data_loss,
            st.jobs_skipped_partial, st.skipped_messages, st.after_end,
            st.offset_gaps, st.offsets_lost, st.key_mismatches, st.scans,
            st.alerts_sent, st.alerts_deduped, st.claims_unconfirmed,
            st.jobs_restored, st.checkpoints, st.results_written,
            st.results_versions, st.results_failures, st.results_retries,
            st.results_pending, st.checkpoints_held, st.skewed,
            st.skewed_batches, st.scan_cap_hits, st.alerts_truncated,
            st.findings_held, st.jobs_quarantined, st.messages_quarantined,
            st.python_profiles, st.tensors, st.late_tensors, act);
    fflush(out);
}

/* Producers key each message by its batch's job id, so one job stays in
 * one partition with one owner. 1 when the key is that id. */
static int tw_run_key_matches(const tw_source_msg *m, const tw_batch *b,
                              char *why, size_t whylen)
{
    const char *job = b->job != NULL ? b->job : "";
    size_t n = strlen(job);
    if (m->key == NULL) {
        snprintf(why, whylen,
                 "message without a key (batch of job '%.200s'): producers "
                 "must key messages by job id",
                 job);
        return 0;
    }
    if (m->key_len != n || memcmp(m->key, job, n) != 0) {
        snprintf(why, whylen,
                 "message key '%.*s' is not the batch's job '%.200s': "
                 "producers must key messages by job id",
                 (int)(m->key_len > 200 ? 200 : m->key_len),
                 (const char *)m->key, job);
        return 0;
    }
    return 1;
}

/* tw_job_config.stop_requested: SIGINT/SIGTERM pending (not taken: the
 * main loop takes it and stops). */
static int tw_run_stop_requested(void *ud)
{
    return tw_signals_pending(ud);
}

/* A copy of message m to the dead-letter topic with its reason and error
 * (dead_letter.h). TW_ERR (logged) when it cannot be queued. */
static int tw_run_send_dead_letter(tw_run *r, const tw_source_msg *m,
                                   const char *reason, const char *why)
{
    char err[512];
    tw_dead_letter dl = {.topic = m->topic,
                         .partition = m->partition,
                         .offset = m->offset,
                         .key = m->key,
                         .key_len = m->key_len,
                         .value = m->value,
                         .len = m->len,
                         .reason = reason,
                         .error = why};
    if (tw_dead_letter_send(r->producer, r->s.deadletter_topic, &dl, err,
                            sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "dead letter: %s", err);
        return TW_ERR;
    }
    return TW_OK;
}

/* A copy of a message some of whose items the router refused for clock
 * skew (the rest was used), to the dead-letter topic. */
static int tw_run_dead_letter_skewed(tw_run *r, const tw_source_msg *m,
                                     uint64_t items)
{
    char why[160];
    snprintf(why, sizeof(why),
             "%" PRIu64 " sample(s)/event(s)/JOB_END time(s) beyond the "
             "clock-skew bound were refused; the rest of the batch was used",
             items);
    return tw_run_send_dead_letter(r, m, "clock_skew", why);
}

/* One message: decode, route or dead-letter. TW_ERR = cannot go on;
 * TW_JOB_STOPPED = a stop was requested in the middle of it. */
static int tw_run_message(tw_run *r, const tw_source_msg *m)
{
    char why[512] = "";
    tw_batch *b = NULL;
    tw_wire_status st = tw_wire_decode(m->value, m->len, &b, why, sizeof(why));
    const char *reason = tw_wire_status_name(st);
    if (st == TW_WIRE_OK && !tw_run_key_matches(m, b, why, sizeof(why))) {
        tw_batch_free(b);
        b = NULL;
        reason = "key_mismatch";
        tw_router_key_mismatch(r->router);
    } else if (st == TW_WIRE_OK) {
        tw_router_stats pre;
        tw_router_get_stats(r->router, &pre);
        int rc = tw_router_batch(r->router, m->partition, m->offset, b,
                                 tw_mono_us());
        tw_router_stats post;
        tw_router_get_stats(r->router, &post);
        if (post.skewed_batches != pre.skewed_batches &&
            tw_run_dead_letter_skewed(r, m, post.skewed - pre.skewed) != TW_OK)
            return TW_ERR;
        if (rc == TW_JOB_STOPPED)
            return rc;
        if (rc == TW_OK) {
            tw_router_stats before, after;
            tw_router_get_stats(r->router, &before);
            rc = tw_router_flush_alerts(r->router, why, sizeof(why));
            tw_router_get_stats(r->router, &after);
            /* claimed alerts are delivered at once: a crash loses at most
             * the ones in flight (claimed, at most once); a volatile
             * store's claims die with the process, so nothing to protect */
            if (after.alerts_sent != before.alerts_sent &&
                tw_store_durable(r->store) &&
                tw_producer_flush(r->producer, TW_RUN_FLUSH_MS, why,
                                  sizeof(why)) != 0) {
                tw_log(TW_LOG_ERROR, "run: %s", why);
                return TW_ERR;
            }
        }
        if (rc == TW_UNAVAILABLE) {
            tw_run_pause(r, why[0] ? why : "state store unavailable");
            rc = TW_OK; /* read again after the resume's seek */
        } else if (rc == TW_ERR && why[0] != 0) {
            tw_log(TW_LOG_ERROR, "run: %s", why);
        }
        if (rc == TW_OK && tw_router_checkpoint_due(r->router, m->partition))
            rc = tw_run_commit(r, &m->partition, 1) == TW_ERR ? TW_ERR : TW_OK;
        return rc;
    }
    tw_router_stats rs;
    tw_router_get_stats(r->router, &rs);
    if (rs.dead_letters < 20)
        tw_log(TW_LOG_WARN,
               "partition %" PRId32 " offset %" PRId64
               ": %s (%s): to the dead-letter topic",
               m->partition, m->offset, reason, why);
    if (tw_run_send_dead_letter(r, m, reason, why) != TW_OK)
        return TW_ERR;
    tw_router_dead_letter(r->router, m->partition, m->offset);
    return TW_OK;
}

/* The message failed for the last time (quarantine.h): to the
 * dead-letter topic with reason "quarantined", and its job finished as
 * quarantined. TW_ERR = cannot go on (the dead letter cannot be queued). */
static int tw_run_quarantine(tw_run *r, const tw_source_msg *m,
                             unsigned attempts)
{
    char why[512];
    snprintf(why, sizeof(why),
             "processing failed %u time(s) at this offset (see the ERROR "
             "lines before)",
             attempts);
    tw_batch *b = NULL;
    char derr[256];
    /* the job it belongs to: the batch's, else the key (undecodable) */
    char *job = NULL;
    if (tw_wire_decode(m->value, m->len, &b, derr, sizeof(derr)) == TW_WIRE_OK)
        job = strdup(b->job);
    else if (m->key != NULL)
        job = strndup(m->key, m->key_len);
    tw_batch_free(b);
    int rc = TW_OK;
    if (tw_run_send_dead_letter(r, m, "quarantined", why) != TW_OK) {
        rc = TW_ERR;
    } else if (tw_router_quarantine(r->router, m->partition, m->offset, job,
                                    why, attempts) != TW_OK) {
        tw_log(TW_LOG_ERROR, "quarantine: out of memory");
        rc = TW_ERR;
    }
    free(job);
    if (rc == TW_OK)
        tw_quarantine_forget(r->quarantine, m->partition, m->offset);
    return rc;
}

/* The options: -1 to exit with *status (0 after --help, 2 on bad usage). */
static int tw_run_load_options(tw_run_opts *o, int argc, char **argv,
                               int *status)
{
    memset(o, 0, sizeof(*o));
    *status = 2;
    tw_cli_parser p;
    tw_cli_begin(&p, &tw_run_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        switch (id) {
        case TW_CLI_HELP:
            *status = 0;
            return -1;
        case TW_CLI_USAGE:
            return -1;
        case OPT_CONFIG:
            o->config_path = p.arg;
            break;
        case OPT_BROKERS:
            o->brokers = p.arg;
            break;
        case OPT_CHECK:
            o->check = 1;
            break;
        case OPT_QUIET:
            tw_log_set_level(TW_LOG_WARN);
            break;
        case OPT_VERBOSE:
            tw_log_set_level(TW_LOG_DEBUG);
            break;
        }
    }
    if (p.optind != argc) {
        tw_cli_usage_error(&tw_run_command, "unexpected argument '%s'",
                           argv[p.optind]);
        return -1;
    }
    return 0;
}

/* The configuration (the file's or the default) and the settings of its
 * kafka: and engine: sections, --brokers applied. */
static int tw_run_load(tw_run *r, const tw_run_opts *o, char *err, size_t n)
{
    int rc = tw_config_load_or_default(o->config_path, r->reg, &r->cfg, err, n);
    if (rc == TW_OK)
        rc = tw_run_settings_load(r->cfg, &r->s, err, n);
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        return -1;
    }
    if (o->brokers != NULL)
        r->s.brokers = o->brokers;
    if (r->s.brokers == NULL || r->s.brokers[0] == '\0') {
        fprintf(stderr, "trainwatch run: no brokers: set kafka.brokers in "
                        "the configuration or give --brokers\n");
        return -1;
    }
    return 0;
}

/* Rules are checked before connecting: a bad plugin or parameter is a
 * start-up error, not a failure at the first job. Then the actions. */
static int tw_run_check_rules(tw_run *r, const tw_run_opts *o,
                              const tw_job_config *jc, char *err, size_t n)
{
    tw_job *probe = NULL;
    if (tw_job_new("(check)", jc, r->reg, r->cfg->rules, r->cfg->nrules, &probe,
                   err, n) != TW_OK) {
        fprintf(stderr, "trainwatch run: %s%s%s\n",
                o->config_path ? o->config_path : "",
                o->config_path ? ": " : "", err);
        return -1;
    }
    /* A persistent store restores jobs: every rule must checkpoint. */
    for (size_t i = 0; tw_store_durable(r->store) && i < tw_job_nrules(probe);
         i++) {
        if (tw_rule_checkpointable(tw_job_rule(probe, i), err, n) != TW_OK) {
            fprintf(stderr, "trainwatch run: %s%s%s (state.store: %s)\n",
                    o->config_path ? o->config_path : "",
                    o->config_path ? ": " : "", err, tw_store_kind(r->store));
            tw_job_free(probe);
            return -1;
        }
    }
    int rc = tw_run_actions_new(r->cfg, probe, r->s.results_dir, &r->actions,
                                err, n);
    tw_job_free(probe);
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        return -1;
    }
    return 0;
}

/* tw_router_config.job_finished: the job's TTL in /metrics starts. */
static void tw_run_job_finished(void *ud, const char *job)
{
    tw_run *r = ud;
    tw_run_metrics_job_finished(tw_run_http_metrics(r->http), job,
                                tw_mono_us());
    tw_run_actions_job_finished(r->actions, job);
}

/* Everything that needs no broker: the HTTP endpoints (not with --check:
 * their settings only), the state store, the quarantine, the router, the
 * rules and the actions. */
static int tw_run_open(tw_run *r, const tw_run_opts *o, char *err, size_t n)
{
    int hrc = o->check
                  ? tw_schema_check_settings(&r->cfg->http, TW_SECTION_HTTP,
                                             NULL, err, n)
                  : tw_run_http_new(r->cfg, r->s.results_dir, &r->http, err, n);
    if (hrc != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        return -1;
    }
    if (tw_store_open(&r->cfg->state, &r->store, err, n) != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        return -1;
    }
    /* The plain memory store's checkpoints hold no job state, only where
     * a next owner must start: engine.commit_interval paces those. */
    r->commit_every_us = tw_store_durable(r->store)
                             ? tw_store_checkpoint_interval_us(r->store)
                             : r->s.commit_interval_us;
    if (r->commit_every_us <= 0)
        r->commit_every_us = 1;
    tw_job_config jc = r->cfg->job;
    jc.external_watermark = 0; /* the data's own clock */
    jc.max_scans_per_advance = TW_RUN_MAX_SCANS_PER_MESSAGE;
    jc.stop_requested = tw_run_stop_requested; /* SIGTERM within a scan */
    jc.stop_ud = &r->sigs;
    jc.wall_now = tw_wall_us; /* hangs and stalls judged on it */
    tw_router_config rc_cfg = {.job = jc,
                               .reg = r->reg,
                               .rules = r->cfg->rules,
                               .nrules = r->cfg->nrules,
                               .job_idle_us = r->s.job_idle_us,
                               .results_dir = r->s.results_dir,
                               .report_html = r->s.report_html,
                               .store = r->store,
                               .topic = r->s.metrics_topic,
                               .on_data_loss = r->s.on_data_loss,
                               .max_alert_bytes = tw_run_alert_room(&r->s),
                               .finding_every_us =
                                   tw_run_finding_every(&r->s, &jc),
                               .job_finished = tw_run_job_finished,
                               .job_finished_ud = r};
    if (tw_quarantine_new(r->s.failure_ledger, (unsigned)r->s.quarantine_after,
                          &r->quarantine, err, n) != TW_OK ||
        tw_router_new(&rc_cfg, tw_run_alert, r, &r->router, err, n) != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        return -1;
    }
    return tw_run_check_rules(r, o, &jc, err, n);
}

/* The consumer (status 2 when it cannot be made: configuration) and the
 * producer (1); the output topics learnt. 0 when connected. */
static int tw_run_connect(tw_run *r, char *err, size_t n)
{
    tw_source_config sc = {.brokers = r->s.brokers,
                           .group = r->s.group,
                           .topic = r->s.metrics_topic,
                           .client_id = r->s.client_id,
                           .props = r->s.props,
                           .nprops = r->s.nprops};
    tw_source_handler sh = {
        .assign = tw_run_on_assign, .revoke = tw_run_on_revoke, .ud = r};
    if (tw_source_new(&sc, &sh, &r->source, err, n) != 0) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        return 2;
    }
    if (tw_producer_new(r->s.brokers, (const char *const *)r->s.prop_kv,
                        r->s.nprops, &r->producer, err, n) != 0) {
        tw_log(TW_LOG_ERROR, "run: %s", err);
        return 1;
    }
    if (tw_run_actions_start_capture(
            r->actions, r->s.brokers, (const char *const *)r->s.prop_kv,
            r->s.nprops, r->s.alerts_topic, err, n) != TW_OK) {
        tw_log(TW_LOG_ERROR, "run: %s", err);
        return 1;
    }
    /* Learn the output topics now: the first alert or dead letter would
     * otherwise wait for a metadata round trip (about a second when the
     * cluster has to create the topic). */
    const char *outputs[] = {r->s.alerts_topic, r->s.deadletter_topic};
    for (size_t i = 0; i < 2; i++)
        if (tw_producer_prepare_topic(r->producer, outputs[i], 5000, err, n) !=
            0)
            tw_log(TW_LOG_WARN, "run: %s (sending will retry)", err);
    tw_log(TW_LOG_INFO,
           "run: group '%s' on '%s' via %s; alerts to '%s', dead letters to "
           "'%s'; %zu rule(s); state: %s%s",
           r->s.group, r->s.metrics_topic, r->s.brokers, r->s.alerts_topic,
           r->s.deadletter_topic, r->cfg->nrules, tw_store_kind(r->store),
           tw_store_durable(r->store) ? " (durable checkpoints)"
                                      : " (volatile: offsets only)");
    return 0;
}

/* One polled message, counted against the quarantine: TW_OK, or
 * TW_JOB_STOPPED (a signal in the middle of it), or TW_ERR (stop without
 * committing past it). */
static int tw_run_handle(tw_run *r, const tw_source_msg *m)
{
    int mrc = tw_run_message(r, m);
    if (mrc == TW_OK) {
        /* one that failed before got through (transient) */
        tw_quarantine_forget(r->quarantine, m->partition, m->offset);
        return TW_OK;
    }
    /* Counted across restarts: the last allowed failure at this offset
     * quarantines the message (quarantine.h). */
    unsigned n = tw_quarantine_failed(r->quarantine, m->partition, m->offset);
    if (n >= tw_quarantine_max_attempts(r->quarantine))
        mrc = tw_run_quarantine(r, m, n);
    else
        tw_log(TW_LOG_ERROR,
               "run: partition %" PRId32 " offset %" PRId64
               " failed (attempt %u of %u before it is quarantined)",
               m->partition, m->offset, n,
               tw_quarantine_max_attempts(r->quarantine));
    return mrc;
}

/* A new snapshot for the HTTP endpoints (at most every http.refresh unless
 * forced): the router's counters, the actions', the lag, readiness. */
static void tw_run_publish(tw_run *r, int force)
{
    if (r->http == NULL)
        return;
    int32_t parts[1024];
    int64_t lag[1024];
    tw_partition_lag pl[1024];
    size_t n = tw_router_partitions(r->router, parts, 1024);
    if (r->source != NULL)
        tw_source_lag(r->source, parts, n, lag);
    for (size_t i = 0; i < n; i++)
        pl[i] = (tw_partition_lag){parts[i], r->source ? lag[i] : -1};
    tw_router_stats st;
    tw_router_get_stats(r->router, &st);
    tw_action_counters ac;
    tw_run_actions_counters(r->actions, &ac);
    tw_run_metrics_input in = {.router = &st,
                               .actions = r->actions ? &ac : NULL,
                               .lag = pl,
                               .npartitions = n,
                               .paused = r->paused,
                               .pause_reason = r->pause_reason,
                               .store_round_trips =
                                   tw_store_requests(r->store)};
    tw_run_http_update(r->http, &in, tw_mono_us(), force);
}

/* About once a second: the wall-clock rules of every live job, and their
 * alerts sent as a message's are (claimed, then delivered). */
static int tw_run_wallclock(tw_run *r, int64_t now)
{
    if (r->paused || now < r->next_wallclock_us)
        return TW_OK;
    r->next_wallclock_us = now + TW_RUN_WALLCLOCK_US;
    tw_router_stats before, after;
    tw_router_get_stats(r->router, &before);
    tw_router_wallclock(r->router, tw_wall_us());
    char why[512];
    why[0] = '\0';
    int rc = tw_router_flush_alerts(r->router, why, sizeof(why));
    tw_router_get_stats(r->router, &after);
    if (rc == TW_UNAVAILABLE) {
        tw_run_pause(r, why[0] ? why : "state store unavailable");
        return TW_OK;
    }
    if (rc != TW_OK) {
        tw_log(TW_LOG_ERROR, "run: wall-clock alerts: %s", why);
        return TW_ERR;
    }
    if (after.alerts_sent != before.alerts_sent && tw_store_durable(r->store) &&
        tw_producer_flush(r->producer, TW_RUN_FLUSH_MS, why, sizeof(why)) !=
            0) {
        tw_log(TW_LOG_ERROR, "run: %s", why);
        return TW_ERR;
    }
    return TW_OK;
}

/* At start and every state.pending_check: reports the claims a stopped
 * process left unconfirmed (only a durable store outlives one). */
static void tw_run_sweep_claims(tw_run *r, int64_t now)
{
    r->next_claim_check_us = now + tw_store_pending_check_us(r->store);
    if (!tw_store_durable(r->store))
        return;
    char err[512];
    int rc = tw_router_sweep_claims(r->router, err, sizeof(err));
    if (rc == TW_ERR)
        tw_log(TW_LOG_WARN, "looking for unconfirmed claims: %s", err);
    /* TW_UNAVAILABLE: the store logged it; the next sweep tries again */
}

/* Between messages: a signal, the periodic expiry and commit, the progress
 * line, the HTTP snapshot. Sets *stop on a signal; TW_ERR = cannot go on. */
static int tw_run_housekeeping(tw_run *r, int64_t *next_commit,
                               int64_t *next_progress, int *stop)
{
    int sig = tw_signals_wait(&r->sigs, 0);
    if (sig != 0) {
        tw_log(TW_LOG_INFO, "run: %s received, stopping", tw_signals_name(sig));
        *stop = 1;
    }
    int64_t now = tw_mono_us();
    if (!*stop && now >= *next_commit) {
        int erc = tw_router_expire(r->router, now);
        if (erc == TW_JOB_STOPPED) {
            tw_log(TW_LOG_INFO, "run: %s received, stopping",
                   tw_signals_name(tw_signals_wait(&r->sigs, 0)));
            *stop = 1;
        } else if (erc != TW_OK) {
            return TW_ERR;
        } else {
            tw_run_commit_all(r);
            *next_commit = now + r->commit_every_us;
        }
    }
    if (!*stop && tw_run_wallclock(r, now) != TW_OK)
        return TW_ERR;
    if (!*stop && !r->paused && now >= r->next_claim_check_us)
        tw_run_sweep_claims(r, now);
    if (r->s.progress_interval_us > 0 && now >= *next_progress) {
        tw_run_stats_line(r->router, r->actions, "progress:", stderr);
        *next_progress = now + r->s.progress_interval_us;
    }
    tw_run_publish(r, 0);
    tw_run_actions_resolve_ended(r->actions); /* final alerts flushed */
    tw_producer_poll(r->producer, 0);
    return TW_OK;
}

/* Consumes until a signal (0) or a failure (-1). */
static int tw_run_loop(tw_run *r)
{
    char err[1024];
    int64_t now = tw_mono_us();
    int64_t next_commit = now + r->commit_every_us;
    int64_t next_progress = now + r->s.progress_interval_us;
    unsigned since_signal_check = 0;
    int stop = 0;
    tw_run_publish(r, 1);
    while (!stop && !r->failed) {
        tw_source_msg m;
        int got =
            tw_source_poll(r->source, TW_RUN_POLL_MS, &m, err, sizeof(err));
        if (got < 0) {
            tw_log(TW_LOG_ERROR, "run: %s", err);
            return -1;
        }
        if (got == 1 && r->paused) {
            /* fetched before the pause: read again after the resume */
            tw_source_release(r->source, &m);
        } else if (got == 1) {
            r->msg_polled_us = tw_mono_us();
            int mrc = tw_run_handle(r, &m);
            tw_source_release(r->source, &m);
            if (mrc == TW_JOB_STOPPED) {
                since_signal_check = 64; /* take the signal below */
            } else if (mrc != TW_OK) {
                tw_log(TW_LOG_ERROR, "run: stopping without committing "
                                     "past the failed message");
                return -1;
            }
        }
        if (r->paused && tw_run_try_resume(r) != TW_OK)
            return -1;
        /* Checking for a signal costs a system call: not per message. */
        if (got == 0 || ++since_signal_check >= 64) {
            since_signal_check = 0;
            if (tw_run_housekeeping(r, &next_commit, &next_progress, &stop) !=
                TW_OK)
                return -1;
        }
    }
    return r->failed ? -1 : 0;
}

/* Graceful stop: results held for a retry get one last try (what is still
 * held keeps its checkpoint, so the next run re-evaluates it), commit,
 * leave the group (the revoke commits again), deliver everything. */
static int tw_run_stop(tw_run *r)
{
    char err[1024];
    size_t held = tw_router_retry_results(r->router);
    if (held > 0)
        tw_log(TW_LOG_ERROR,
               "run: %zu job(s)' results could not be written; their "
               "partitions keep the previous checkpoint and the next run "
               "evaluates them again",
               held);
    tw_run_commit_all(r);
    tw_run_actions_resolve_ended(r->actions);
    tw_source_close(r->source);
    if (tw_producer_flush(r->producer, TW_RUN_FLUSH_MS, err, sizeof(err)) !=
        0) {
        tw_log(TW_LOG_ERROR, "run: %s", err);
        return -1;
    }
    if (tw_run_actions_drain(r->actions, TW_RUN_ACTIONS_DRAIN_MS) != TW_OK)
        tw_log(TW_LOG_WARN,
               "run: actions still pending after %d ms were "
               "abandoned",
               TW_RUN_ACTIONS_DRAIN_MS);
    return 0;
}

/* The summary line (when the router was made), then everything freed. */
static void tw_run_close(tw_run *r)
{
    if (r->router != NULL)
        tw_run_stats_line(r->router, r->actions, "run:", stdout);
    tw_run_http_free(r->http); /* first: no request reads what follows */
    tw_source_free(r->source);
    tw_producer_free(r->producer);
    tw_router_free(r->router);
    tw_quarantine_free(r->quarantine);
    tw_run_actions_free(r->actions);
    tw_store_close(r->store);
    tw_run_settings_free(&r->s);
    tw_config_free(r->cfg);
    tw_registry_free(r->reg);
}

int tw_cmd_run(int argc, char **argv)
{
    tw_run_opts o;
    int status;
    if (tw_run_load_options(&o, argc, argv, &status) != 0)
        return status;
    tw_run r;
    memset(&r, 0, sizeof(r));
    if (tw_signals_block(&r.sigs) != 0) {
        fprintf(stderr, "trainwatch run: cannot block signals: %s\n",
                strerror(errno));
        return 1;
    }
    r.reg = tw_registry_new();
    if (r.reg == NULL) {
        fprintf(stderr, "trainwatch run: out of memory\n");
        return 1;
    }
    char err[1024];
    status = 2;
    if (tw_run_load(&r, &o, err, sizeof(err)) != 0 ||
        tw_run_open(&r, &o, err, sizeof(err)) != 0)
        goto out;
    if (o.check) { /* everything checked that needs no broker */
        printf("trainwatch run: configuration %s is valid\n",
               o.config_path ? o.config_path : "(default)");
        tw_router_free(r.router);
        r.router = NULL;
        status = 0;
        goto out;
    }
    status = tw_run_connect(&r, err, sizeof(err));
    if (status == 0)
        status = tw_run_loop(&r) == 0 && tw_run_stop(&r) == 0 ? 0 : 1;
out:
    tw_run_close(&r);
    return status;
}
