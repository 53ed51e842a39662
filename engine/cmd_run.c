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
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "commands.h"
#include "config.h"
#include "dead_letter.h"
#include "finding_text.h"
#include "job_router.h"
#include "kafka_producer.h"
#include "kafka_source.h"
#include "log.h"
#include "run_actions.h"
#include "signals.h"
#include "state_store.h"
#include "wire.h"

#define TW_RUN_MAX_PROPS 128
#define TW_RUN_FLUSH_MS 30000
#define TW_RUN_POLL_MS 100
#define TW_RUN_ACTIONS_DRAIN_MS 10000

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
    tw_on_data_loss on_data_loss;
    const char *results_dir;
    int64_t commit_interval_us;
    int64_t progress_interval_us;
} tw_run_settings;

typedef struct tw_run {
    tw_run_settings s;
    tw_producer *producer;
    tw_kafka_source *source;
    tw_router *router;
    tw_run_actions *actions; /* NULL: no rule has actions */
    tw_store *store; /* the state store (owned by tw_cmd_run) */
    int paused;      /* store unavailable: consumption stopped */
    int failed; /* a commit or flush failed inside a rebalance */
} tw_run;

static void tw_run_usage(FILE *out)
{
    fprintf(
        out,
        "usage: trainwatch run [--config FILE] [--brokers B] [options]\n"
        "\n"
        "The streaming engine: joins a Kafka consumer group on the metrics\n"
        "topic, evaluates the configured rules per job (key = job id) at\n"
        "each tick of event time, publishes alerts as JSON on the alert\n"
        "topic (schemas/alert.schema.json), sends messages that fail\n"
        "verification or decoding to the dead-letter topic, and commits\n"
        "offsets only once the jobs they belong to no longer need them.\n"
        "A job ends with its JOB_END marker, or after engine.job_idle of\n"
        "wall time without a message; its results then go to\n"
        "engine.results_dir/<name>.json (same rule results as `eval --json`;\n"
        "<name>: the job id, bytes outside [A-Za-z0-9._-] as %%XX, see\n"
        "README \"Results files\"; a failed write is retried with backoff).\n"
        "\n"
        "options:\n"
        "  --config FILE   configuration (YAML or JSON, see\n"
        "                  deploy/trainwatch.yaml): rules (default:\n"
        "                  ProfilerReport), tick, lateness, and the\n"
        "                  sections\n"
        "                    kafka:  brokers, group (trainwatch),\n"
        "                            metrics_topic (trainwatch.metrics),\n"
        "                            alerts_topic (trainwatch.alerts),\n"
        "                            deadletter_topic (trainwatch.deadletter),\n"
        "                            client_id, properties: {librdkafka\n"
        "                            property: value, ...}\n"
        "                    engine: job_idle (10m), results_dir (none),\n"
        "                            commit_interval (1s),\n"
        "                            progress_interval (10s; 0 = off),\n"
        "                            on_data_loss (evaluate | skip: a job\n"
        "                            whose beginning was lost)\n"
        "                    state:  store (memory | redis), see README\n"
        "                  A file with a secret in it (such as\n"
        "                  properties: {sasl.password: ...}) is refused\n"
        "                  when every user can read it (chmod o-r).\n"
        "  --brokers B     bootstrap servers; overrides kafka.brokers\n"
        "  -q, --quiet     warnings and errors only\n"
        "  -v, --verbose   debug log lines too\n"
        "  -h, --help      this text\n"
        "\n"
        "Log lines go to stderr; a `progress:` line every\n"
        "progress_interval and, at the end, one summary line on stdout:\n"
        "  run: batches=N dead_letters=N duplicates=N late=N jobs_active=N\n"
        "       jobs_started=N jobs_finished=N jobs_partial=N\n"
        "       jobs_data_loss=N offset_gaps=N offsets_lost=N\n"
        "       alerts_sent=N ... results_written=N results_versions=N\n"
        "       results_failures=N results_retries=N results_pending=N\n"
        "       and, when rules have actions:,\n"
        "       actions_fired=N actions_sent=N actions_failed=N ...\n"
        "A rule's actions (stop_training, webhook, signal, stop_file,\n"
        "email, sms) fire on its findings (a ProfilerReport's: any\n"
        "sub-rule's); with state.store: redis each action id is claimed\n"
        "there first, so a restart never sends it again.\n"
        "\n"
        "Stops on SIGINT/SIGTERM after the message in hand, committing\n"
        "what is safe. Exit status: 0 after a signal, 1 on a failure,\n"
        "2 on bad usage or configuration.\n");
}

static int64_t tw_run_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void tw_run_settings_free(tw_run_settings *s)
{
    for (size_t i = 0; i < s->nprops; i++) {
        free(s->prop_where[i]);
        free(s->prop_kv[i]);
    }
    s->nprops = 0;
}

/* Interprets the kafka: and engine: sections. */
static int tw_run_settings_load(const tw_config *cfg, tw_run_settings *s,
                                char *err, size_t errlen)
{
    static const char *const kafka_keys[] = {
        "brokers",      "group",           "metrics_topic", "alerts_topic",
        "deadletter_topic", "client_id",   NULL};
    static const char *const kafka_prefixes[] = {"properties.", NULL};
    static const char *const engine_keys[] = {
        "job_idle",          "results_dir",  "commit_interval",
        "progress_interval", "on_data_loss", NULL};
    const tw_settings *k = &cfg->kafka, *e = &cfg->engine;
    s->group = "trainwatch";
    s->metrics_topic = "trainwatch.metrics";
    s->alerts_topic = "trainwatch.alerts";
    s->deadletter_topic = "trainwatch.deadletter";
    s->job_idle_us = 600 * 1000000LL;
    s->commit_interval_us = 1000000;
    s->progress_interval_us = 10 * 1000000LL;
    if (tw_settings_check_keys(k, kafka_keys, kafka_prefixes, err, errlen) !=
            TW_OK ||
        tw_settings_check_keys(e, engine_keys, NULL, err, errlen) != TW_OK)
        return TW_ERR;
    tw_settings_get_str(k, "brokers", &s->brokers);
    tw_settings_get_str(k, "group", &s->group);
    tw_settings_get_str(k, "metrics_topic", &s->metrics_topic);
    tw_settings_get_str(k, "alerts_topic", &s->alerts_topic);
    tw_settings_get_str(k, "deadletter_topic", &s->deadletter_topic);
    tw_settings_get_str(k, "client_id", &s->client_id);
    const char *names[] = {"group", "metrics_topic", "alerts_topic",
                           "deadletter_topic"};
    const char *values[] = {s->group, s->metrics_topic, s->alerts_topic,
                            s->deadletter_topic};
    for (size_t i = 0; i < 4; i++)
        if (values[i][0] == '\0')
            return tw_settings_error(k, tw_settings_find(k, names[i]), err,
                                     errlen, "must not be empty");
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
    if (tw_settings_get_duration(e, "job_idle", &s->job_idle_us, err,
                                 errlen) != TW_OK ||
        tw_settings_get_duration(e, "commit_interval", &s->commit_interval_us,
                                 err, errlen) != TW_OK ||
        tw_settings_get_duration(e, "progress_interval",
                                 &s->progress_interval_us, err,
                                 errlen) != TW_OK)
        return TW_ERR;
    if (s->job_idle_us <= 0)
        return tw_settings_error(e, tw_settings_find(e, "job_idle"), err,
                                 errlen, "must be longer than 0");
    if (s->commit_interval_us <= 0)
        return tw_settings_error(e, tw_settings_find(e, "commit_interval"),
                                 err, errlen, "must be longer than 0");
    const char *loss = "evaluate";
    tw_settings_get_str(e, "on_data_loss", &loss);
    if (strcmp(loss, "evaluate") == 0)
        s->on_data_loss = TW_ON_DATA_LOSS_EVALUATE;
    else if (strcmp(loss, "skip") == 0)
        s->on_data_loss = TW_ON_DATA_LOSS_SKIP;
    else
        return tw_settings_error(e, tw_settings_find(e, "on_data_loss"), err,
                                 errlen, "'%s': expected evaluate or skip",
                                 loss);
    tw_settings_get_str(e, "results_dir", &s->results_dir);
    if (s->results_dir != NULL) {
        struct stat sb;
        if (stat(s->results_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return tw_settings_error(e, tw_settings_find(e, "results_dir"),
                                     err, errlen, "'%s' is not a folder%s%s",
                                     s->results_dir, errno ? ": " : "",
                                     errno ? strerror(errno) : "");
    }
    return TW_OK;
}

/* ---- outputs and commits ------------------------------------------------- */

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
        tw_log(TW_LOG_INFO, "finding: job %s rule %s%s%s: %s", job,
               facts->rule, facts->parent ? " in " : "",
               facts->parent ? facts->parent : "", line);
    }
    tw_run_actions_alert(r->actions, job, id, json, len, facts); /* queues */
    return TW_OK;
}

/* Store unavailable: stop consuming (once). */
static void tw_run_pause(tw_run *r, const char *why)
{
    if (r->paused)
        return;
    char err[512];
    r->paused = 1;
    if (tw_source_pause(r->source, 1, err, sizeof(err)) != 0)
        tw_log(TW_LOG_WARN, "%s", err);
    tw_log(TW_LOG_WARN, "paused consumption: %s", why);
}

/* With a store: claims and sends queued alerts, delivers them, then
 * checkpoints the given partitions. TW_UNAVAILABLE pauses consumption. */
static int tw_run_checkpoint(tw_run *r, const int32_t *parts, size_t n)
{
    char err[512];
    int rc = tw_router_flush_alerts(r->router, err, sizeof(err));
    if (rc == TW_OK &&
        tw_producer_flush(r->producer, TW_RUN_FLUSH_MS, err, sizeof(err)) !=
            0) {
        tw_log(TW_LOG_ERROR, "not checkpointing: %s", err);
        r->failed = 1;
        return TW_ERR;
    }
    for (size_t i = 0; rc == TW_OK && i < n; i++)
        rc = tw_router_checkpoint(r->router, parts[i], err, sizeof(err));
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
                tw_log(TW_LOG_DEBUG, "committed partition %" PRId32
                                     " offset %" PRId64 "%s%s",
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

static void tw_run_on_assign(void *ud, tw_kafka_source *s, tw_source_assigned *a,
                             size_t n)
{
    (void)s;
    tw_run *r = ud;
    char err[1024];
    for (size_t i = 0; i < n; i++) {
        tw_log(TW_LOG_INFO,
               "assigned partition %" PRId32 " (committed offset %" PRId64
               ")",
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
                              const tw_run_actions *actions,
                              const char *prefix, FILE *out)
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
            " scans=%" PRIu64 " alerts_sent=%" PRIu64
            " alerts_deduped=%" PRIu64 " jobs_restored=%" PRIu64
            " checkpoints=%" PRIu64 " results_written=%" PRIu64
            " results_versions=%" PRIu64 " results_failures=%" PRIu64
            " results_retries=%" PRIu64 " results_pending=%" PRIu64
            " checkpoints_held=%" PRIu64 "%s\n",
            prefix, st.batches, st.samples, st.events, st.dead_letters,
            st.duplicates, st.late_samples + st.late_events, st.jobs_active,
            st.jobs_started, st.jobs_finished, st.jobs_idle, st.jobs_dropped,
            st.jobs_partial, st.jobs_finished_before, st.jobs_data_loss,
            st.jobs_skipped_partial, st.skipped_messages, st.after_end,
            st.offset_gaps, st.offsets_lost, st.key_mismatches, st.scans,
            st.alerts_sent, st.alerts_deduped, st.jobs_restored,
            st.checkpoints, st.results_written, st.results_versions,
            st.results_failures, st.results_retries, st.results_pending,
            st.checkpoints_held, act);
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

/* One message: decode, route or dead-letter. TW_ERR = cannot go on. */
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
        int rc = tw_router_batch(r->router, m->partition, m->offset, b,
                                 tw_run_mono_us());
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
            rc = tw_run_commit(r, &m->partition, 1) == TW_ERR ? TW_ERR
                                                               : TW_OK;
        return rc;
    }
    tw_dead_letter dl = {.topic = m->topic,
                         .partition = m->partition,
                         .offset = m->offset,
                         .key = m->key,
                         .key_len = m->key_len,
                         .value = m->value,
                         .len = m->len,
                         .reason = reason,
                         .error = why};
    char err[512];
    tw_router_stats rs;
    tw_router_get_stats(r->router, &rs);
    if (rs.dead_letters < 20)
        tw_log(TW_LOG_WARN,
               "partition %" PRId32 " offset %" PRId64
               ": %s (%s): to the dead-letter topic",
               m->partition, m->offset, reason, why);
    if (tw_dead_letter_send(r->producer, r->s.deadletter_topic, &dl, err,
                            sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "dead letter: %s", err);
        return TW_ERR;
    }
    tw_router_dead_letter(r->router, m->partition, m->offset);
    return TW_OK;
}

int tw_cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"brokers", required_argument, NULL, 'b'},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *config_path = NULL, *brokers = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qvh", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config_path = optarg;
            break;
        case 'b':
            brokers = optarg;
            break;
        case 'q':
            tw_log_set_level(TW_LOG_WARN);
            break;
        case 'v':
            tw_log_set_level(TW_LOG_DEBUG);
            break;
        case 'h':
            tw_run_usage(stdout);
            return 0;
        default:
            tw_run_usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "trainwatch run: unexpected argument '%s' (see "
                        "--help)\n",
                argv[optind]);
        return 2;
    }
    sigset_t sigs;
    if (tw_signals_block(&sigs) != 0) {
        fprintf(stderr, "trainwatch run: cannot block signals: %s\n",
                strerror(errno));
        return 1;
    }
    char err[1024];
    int status = 2;
    tw_run r;
    memset(&r, 0, sizeof(r));
    tw_config *cfg = NULL;
    tw_store *store = NULL;
    tw_registry *reg = tw_registry_new();
    if (reg == NULL) {
        fprintf(stderr, "trainwatch run: out of memory\n");
        return 1;
    }
    int rc = config_path != NULL
                 ? tw_config_load(config_path, &cfg, err, sizeof(err))
                 : tw_config_default(reg, &cfg, err, sizeof(err));
    if (rc == TW_OK && cfg->nrules == 0)
        rc = tw_config_default_rules(cfg, reg, err, sizeof(err));
    if (rc == TW_OK)
        rc = tw_run_settings_load(cfg, &r.s, err, sizeof(err));
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        goto out;
    }
    if (brokers != NULL)
        r.s.brokers = brokers;
    if (r.s.brokers == NULL || r.s.brokers[0] == '\0') {
        fprintf(stderr, "trainwatch run: no brokers: set kafka.brokers in "
                        "the configuration or give --brokers\n");
        goto out;
    }
    if (tw_store_open(&cfg->state, &store, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        goto out;
    }
    r.store = store;
    /* The plain memory store's checkpoints hold no job state, only where
     * a next owner must start: engine.commit_interval paces those. */
    int64_t commit_every = tw_store_durable(store)
                               ? tw_store_checkpoint_interval_us(store)
                               : r.s.commit_interval_us;
    if (commit_every <= 0)
        commit_every = 1;
    tw_job_config jc = cfg->job;
    jc.external_watermark = 0; /* the data's own clock */
    tw_router_config rc_cfg = {.job = jc,
                               .reg = reg,
                               .rules = cfg->rules,
                               .nrules = cfg->nrules,
                               .job_idle_us = r.s.job_idle_us,
                               .results_dir = r.s.results_dir,
                               .store = r.store,
                               .topic = r.s.metrics_topic,
                               .on_data_loss = r.s.on_data_loss};
    if (tw_router_new(&rc_cfg, tw_run_alert, &r, &r.router, err,
                      sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        goto out;
    }
    /* Rules are checked before connecting: a bad plugin or parameter is a
     * start-up error, not a failure at the first job. */
    tw_job *probe = NULL;
    if (tw_job_new("(check)", &jc, reg, cfg->rules, cfg->nrules, &probe, err,
                   sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch run: %s%s%s\n",
                config_path ? config_path : "", config_path ? ": " : "", err);
        goto out;
    }
    /* A persistent store restores jobs: every rule must checkpoint. */
    for (size_t i = 0; tw_store_durable(store) && i < tw_job_nrules(probe);
         i++) {
        if (tw_rule_checkpointable(tw_job_rule(probe, i), err, sizeof(err)) !=
            TW_OK) {
            fprintf(stderr, "trainwatch run: %s%s%s (state.store: %s)\n",
                    config_path ? config_path : "", config_path ? ": " : "",
                    err, tw_store_kind(store));
            tw_job_free(probe);
            goto out;
        }
    }
    rc = tw_run_actions_new(cfg, probe, r.s.results_dir, &r.actions, err,
                            sizeof(err));
    tw_job_free(probe);
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        goto out;
    }
    tw_source_config sc = {.brokers = r.s.brokers,
                           .group = r.s.group,
                           .topic = r.s.metrics_topic,
                           .client_id = r.s.client_id,
                           .props = r.s.props,
                           .nprops = r.s.nprops};
    tw_source_handler sh = {
        .assign = tw_run_on_assign, .revoke = tw_run_on_revoke, .ud = &r};
    if (tw_source_new(&sc, &sh, &r.source, err, sizeof(err)) != 0) {
        fprintf(stderr, "trainwatch run: %s\n", err);
        goto out;
    }
    status = 1;
    if (tw_producer_new(r.s.brokers, (const char *const *)r.s.prop_kv,
                        r.s.nprops, &r.producer, err, sizeof(err)) != 0) {
        tw_log(TW_LOG_ERROR, "run: %s", err);
        goto out;
    }
    /* Learn the output topics now: the first alert or dead letter would
     * otherwise wait for a metadata round trip (about a second when the
     * cluster has to create the topic). */
    const char *outputs[] = {r.s.alerts_topic, r.s.deadletter_topic};
    for (size_t i = 0; i < 2; i++)
        if (tw_producer_prepare_topic(r.producer, outputs[i], 5000, err,
                                      sizeof(err)) != 0)
            tw_log(TW_LOG_WARN, "run: %s (sending will retry)", err);
    tw_log(TW_LOG_INFO,
           "run: group '%s' on '%s' via %s; alerts to '%s', dead letters to "
           "'%s'; %zu rule(s); state: %s%s",
           r.s.group, r.s.metrics_topic, r.s.brokers, r.s.alerts_topic,
           r.s.deadletter_topic, cfg->nrules, tw_store_kind(store),
           tw_store_durable(store) ? " (durable checkpoints)"
                                   : " (volatile: offsets only)");

    int64_t now = tw_run_mono_us();
    int64_t next_commit = now + commit_every;
    int64_t next_progress = now + r.s.progress_interval_us;
    unsigned since_signal_check = 0;
    int stop = 0;
    while (!stop && !r.failed) {
        tw_source_msg m;
        int got = tw_source_poll(r.source, TW_RUN_POLL_MS, &m, err,
                                 sizeof(err));
        if (got < 0) {
            tw_log(TW_LOG_ERROR, "run: %s", err);
            goto out;
        }
        if (got == 1 && r.paused) {
            /* fetched before the pause: read again after the resume */
            tw_source_release(r.source, &m);
        } else if (got == 1) {
            int mrc = tw_run_message(&r, &m);
            tw_source_release(r.source, &m);
            if (mrc != TW_OK) {
                tw_log(TW_LOG_ERROR, "run: stopping without committing "
                                     "past the failed message");
                goto out;
            }
        }
        /* Checking for a signal costs a system call: not per message. */
        if (r.paused && tw_run_try_resume(&r) != TW_OK)
            goto out;
        if (got == 0 || ++since_signal_check >= 64) {
            since_signal_check = 0;
            int sig = tw_signals_wait(&sigs, 0);
            if (sig != 0) {
                tw_log(TW_LOG_INFO, "run: %s received, stopping",
                       tw_signals_name(sig));
                stop = 1;
            }
            now = tw_run_mono_us();
            if (now >= next_commit) {
                if (tw_router_expire(r.router, now) != TW_OK)
                    goto out;
                tw_run_commit_all(&r);
                next_commit = now + commit_every;
            }
            if (r.s.progress_interval_us > 0 && now >= next_progress) {
                tw_run_stats_line(r.router, r.actions, "progress:",
                                  stderr);
                next_progress = now + r.s.progress_interval_us;
            }
            tw_producer_poll(r.producer, 0);
        }
    }
    if (r.failed)
        goto out;
    /* Graceful stop: results held for a retry get one last try (what is
     * still held keeps its checkpoint, so the next run re-evaluates it),
     * commit, leave the group (the revoke commits again), deliver
     * everything. */
    size_t held = tw_router_retry_results(r.router);
    if (held > 0)
        tw_log(TW_LOG_ERROR,
               "run: %zu job(s)' results could not be written; their "
               "partitions keep the previous checkpoint and the next run "
               "evaluates them again",
               held);
    tw_run_commit_all(&r);
    tw_source_close(r.source);
    if (tw_producer_flush(r.producer, TW_RUN_FLUSH_MS, err, sizeof(err)) !=
        0) {
        tw_log(TW_LOG_ERROR, "run: %s", err);
        goto out;
    }
    if (tw_run_actions_drain(r.actions, TW_RUN_ACTIONS_DRAIN_MS) != TW_OK)
        tw_log(TW_LOG_WARN, "run: actions still pending after %d ms were "
                            "abandoned", TW_RUN_ACTIONS_DRAIN_MS);
    status = 0;
out:
    if (r.router != NULL)
        tw_run_stats_line(r.router, r.actions, "run:", stdout);
    tw_source_free(r.source);
    tw_producer_free(r.producer);
    tw_router_free(r.router);
    tw_run_actions_free(r.actions);
    tw_store_close(store);
    tw_run_settings_free(&r.s);
    tw_config_free(cfg);
    tw_registry_free(reg);
    return status;
}
