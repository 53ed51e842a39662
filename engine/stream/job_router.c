/* job_router.c - per-partition jobs, their lifecycle and offsets
 * (job_router.h). */
#include "job_router.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alert.h"
#include "checkpoint.h"
#include "claim_pending.h"
#include "clock.h"
#include "grow.h"
#include "job_results.h"
#include "json_writer.h"
#include "log.h"
#include "profiler_config.h"
#include "quarantine.h"
#include "report_file.h"
#include "results_file.h"
#include "strmap.h"
#include "tw_assert.h"
#include "wire.h"

/* What a partition remembers of a job that is not being evaluated. */
#define TW_JOB_FINISHED 1u /* finished here or by a previous owner       */
#define TW_JOB_SKIPPED 2u  /* its beginning was lost: skipped (on_data_loss) */

typedef struct tw_rpart tw_rpart;

typedef struct tw_rjob {
    tw_router *router;
    int32_t partition;
    tw_job *job;
    tw_alert_tracker *alerts;
    int64_t first_offset;   /* of its first message (kept in "origin") */
    int origin_saved;       /* the "origin" part is in a checkpoint    */
    int64_t last_active_us; /* wall time of its newest message */
    int64_t started_us;     /* wall time of its first message  */
    tw_job_stats seen;      /* what the router's totals already hold */
    int failed;             /* an alert could not be queued */
} tw_rjob;

/* A finished job whose first message may still be re-read by a next owner
 * (its first offset is at or after the partition's commit offset). */
typedef struct tw_done_job {
    char *id;
    int64_t first_offset; /* INT64_MAX: inherited, not seen here yet */
} tw_done_job;

/* A part saved for the partition's next checkpoint, owned (data malloc'd).
 * Kept until a checkpoint commits it, so a retry after TW_UNAVAILABLE
 * writes it again although the job's dirty marks are already cleared. */
typedef struct tw_pending_part {
    char *job, *part;
    void *data;
    size_t len;
} tw_pending_part;

/* An alert scanned but not yet claimed and sent (store only). */
typedef struct tw_outbox_alert {
    char *job, *json;
    size_t len;
    tw_alert_facts facts; /* owned copy (tw_alert_facts_copy) */
    char id[TW_ALERT_ID_LEN + 1];
    int32_t partition;
    int64_t offset;
} tw_outbox_alert;

struct tw_rpart {
    int32_t id;
    int64_t next_offset;  /* last processed + 1; -1 = none since assignment */
    int64_t start_offset; /* where reading started (-2 the beginning)   */
    int64_t ckpt_offset;  /* next offset of the last checkpoint         */
    /* Every job whose first message lies before `covered` was finished, or
     * is restored, when reading started (the checkpoint's offset, or the
     * committed one: commits never pass an unfinished job's start); -1
     * when reading started at the log's beginning, which proves nothing. */
    int64_t covered;
    int gap;       /* offsets were lost since: `covered` proves nothing */
    int need_load; /* checkpoint not loaded yet (store unavailable)     */
    tw_pending_part *pend;
    size_t npend, pend_cap;
    char **fin; /* store: finished since the last checkpoint  */
    size_t nfin, fin_cap;
    tw_rjob **jobs; /* unfinished jobs; few per partition: a list */
    size_t njobs, jobs_cap;
    tw_done_job *done;
    size_t ndone, done_cap;
    tw_strmap known; /* job id -> TW_JOB_FINISHED / TW_JOB_SKIPPED */
    char *meta;      /* the last commit's metadata */
};

struct tw_router {
    tw_router_config cfg;
    char *results_dir;
    tw_results_writer *results; /* NULL = no results files */
    tw_router_alert_fn alert;
    void *alert_ud;
    tw_rpart **parts;
    size_t nparts, parts_cap;
    /* the message in hand, for alerts' source headers */
    int32_t cur_partition;
    int64_t cur_offset;
    tw_router_stats stats;
    tw_store *own_store;     /* the volatile store made when none is given */
    int durable;             /* the store outlives this process            */
    tw_outbox_alert *outbox; /* alerts to claim and send, in order */
    size_t nout, out_cap;
    tw_claim_list unconfirmed; /* claimed and queued, not yet confirmed */
    tw_buf *scratch;           /* alert tracker blobs */
};

int tw_router_new(const tw_router_config *cfg, tw_router_alert_fn alert,
                  void *ud, tw_router **out, char *err, size_t errlen)
{
    *out = NULL;
    tw_router *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    r->cfg = *cfg;
    r->alert = alert;
    r->alert_ud = ud;
    r->cur_partition = -1;
    r->cur_offset = -1;
    if (cfg->results_dir != NULL && cfg->results_dir[0] != '\0') {
        r->results_dir = strdup(cfg->results_dir);
        if (r->results_dir == NULL) {
            free(r);
            snprintf(err, errlen, "out of memory");
            return TW_ERR;
        }
        if (access(r->results_dir, W_OK) != 0) {
            snprintf(err, errlen, "results folder '%s': %s", r->results_dir,
                     strerror(errno));
            free(r->results_dir);
            free(r);
            return TW_ERR;
        }
        if (tw_results_writer_new(r->results_dir, &r->results, err, errlen) !=
            TW_OK) {
            free(r->results_dir);
            free(r);
            return TW_ERR;
        }
    }
    r->cfg.results_dir = r->results_dir;
    if (r->cfg.topic == NULL || r->cfg.topic[0] == 0)
        r->cfg.topic = "trainwatch.metrics";
    /* No store given: a private volatile one, so there is one protocol */
    if (r->cfg.store == NULL) {
        if (tw_store_open(NULL, &r->own_store, err, errlen) != TW_OK) {
            tw_results_writer_free(r->results);
            free(r->results_dir);
            free(r);
            return TW_ERR;
        }
        r->cfg.store = r->own_store;
    }
    r->durable = tw_store_durable(r->cfg.store);
    if ((r->scratch = tw_buf_new()) == NULL) {
        snprintf(err, errlen, "out of memory");
        tw_store_close(r->own_store);
        tw_results_writer_free(r->results);
        free(r->results_dir);
        free(r);
        return TW_ERR;
    }
    *out = r;
    return TW_OK;
}

static void tw_pending_free(tw_rpart *p)
{
    for (size_t i = 0; i < p->npend; i++) {
        free(p->pend[i].job);
        free(p->pend[i].part);
        free(p->pend[i].data);
    }
    p->npend = 0;
    for (size_t i = 0; i < p->nfin; i++)
        free(p->fin[i]);
    p->nfin = 0;
}

static void tw_outbox_drop(tw_router *r, int32_t partition, int all)
{
    size_t kept = 0;
    for (size_t i = 0; i < r->nout; i++) {
        if (all || r->outbox[i].partition == partition) {
            free(r->outbox[i].job);
            free(r->outbox[i].json);
            tw_alert_facts_release(&r->outbox[i].facts);
        } else {
            r->outbox[kept++] = r->outbox[i];
        }
    }
    r->nout = kept;
}

static void tw_rjob_free(tw_rjob *j)
{
    if (j == NULL)
        return;
    if (j->alerts != NULL) {
        j->router->stats.alerts_truncated +=
            tw_alert_tracker_truncated(j->alerts);
        j->router->stats.findings_held += tw_alert_tracker_held(j->alerts);
    }
    tw_job_free(j->job);
    tw_alert_tracker_free(j->alerts);
    free(j);
}

static void tw_rpart_free(tw_rpart *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->njobs; i++)
        tw_rjob_free(p->jobs[i]);
    free(p->jobs);
    for (size_t i = 0; i < p->ndone; i++)
        free(p->done[i].id);
    free(p->done);
    tw_strmap_free(&p->known);
    free(p->meta);
    tw_pending_free(p);
    free(p->pend);
    free(p->fin);
    free(p);
}

void tw_router_free(tw_router *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->nparts; i++)
        tw_rpart_free(r->parts[i]);
    free(r->parts);
    tw_outbox_drop(r, -1, 1);
    free(r->outbox);
    tw_claim_list_free(&r->unconfirmed);
    tw_buf_free(r->scratch);
    tw_store_close(r->own_store);
    tw_results_writer_free(r->results);
    free(r->results_dir);
    free(r);
}

static tw_rpart *tw_router_part(const tw_router *r, int32_t id)
{
    for (size_t i = 0; i < r->nparts; i++)
        if (r->parts[i]->id == id)
            return r->parts[i];
    return NULL;
}

static int tw_rpart_add_done(tw_rpart *p, const char *id, int64_t first)
{
    if (tw_grow((void **)&p->done, &p->done_cap, p->ndone + 1, sizeof(*p->done),
                8) != TW_OK) {
        return TW_ERR;
    }
    char *copy = strdup(id);
    if (copy == NULL)
        return TW_ERR;
    p->done[p->ndone++] = (tw_done_job){.id = copy, .first_offset = first};
    return tw_strmap_put(&p->known, id, strlen(id), TW_JOB_FINISHED);
}

static int tw_router_add_part(tw_router *r, int32_t partition,
                              const char *metadata)
{
    if (tw_router_part(r, partition) != NULL)
        return TW_OK;
    if (tw_grow((void **)&r->parts, &r->parts_cap, r->nparts + 1,
                sizeof(*r->parts), 8) != TW_OK) {
        return TW_ERR;
    }
    tw_rpart *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return TW_ERR;
    p->id = partition;
    p->next_offset = -1;
    p->start_offset = TW_SOURCE_OFFSET_DEFAULT;
    p->ckpt_offset = -1;
    p->covered = -1;
    tw_strmap_init(&p->known);
    size_t inherited = 0;
    if (metadata != NULL && metadata[0] != '\0') {
        json_error_t je;
        json_t *a = json_loads(metadata, 0, &je);
        if (!json_is_array(a)) {
            tw_log(TW_LOG_WARN,
                   "partition %" PRId32 ": committed metadata is not a list "
                   "of finished jobs; ignored",
                   partition);
        } else {
            for (size_t i = 0; i < json_array_size(a); i++) {
                const char *id = json_string_value(json_array_get(a, i));
                if (id == NULL)
                    continue;
                if (tw_rpart_add_done(p, id, INT64_MAX) != TW_OK) {
                    json_decref(a);
                    tw_rpart_free(p);
                    return TW_ERR;
                }
                inherited++;
            }
        }
        json_decref(a);
    }
    r->parts[r->nparts++] = p;
    tw_log(TW_LOG_INFO,
           "partition %" PRId32 " assigned (%zu finished job(s) past the "
           "committed offset)",
           partition, inherited);
    return TW_OK;
}

void tw_router_revoke(tw_router *r, int32_t partition)
{
    for (size_t i = 0; i < r->nparts; i++) {
        tw_rpart *p = r->parts[i];
        if (p->id != partition)
            continue;
        tw_log(TW_LOG_INFO,
               "partition %" PRId32 " revoked: %zu unfinished job(s) left "
               "to its next owner",
               partition, p->njobs);
        TW_ASSERT(r->stats.jobs_active >= p->njobs);
        r->stats.jobs_dropped += p->njobs;
        r->stats.jobs_active -= p->njobs;
        /* A volatile store's checkpoint holds no jobs: its offset must not
         * survive into a later assignment of this partition here. */
        char err[512];
        if (!r->durable &&
            tw_checkpoint_forget(r->cfg.store, r->cfg.topic, partition, err,
                                 sizeof(err)) != TW_OK)
            tw_log(TW_LOG_WARN, "partition %" PRId32 ": %s", partition, err);
        /* Alerts not claimed yet: the next owner evaluates those scans
         * again from the checkpoint and claims them itself. */
        tw_outbox_drop(r, partition, 0);
        tw_rpart_free(p);
        r->parts[i] = r->parts[--r->nparts];
        return;
    }
}

size_t tw_router_partitions(const tw_router *r, int32_t *parts, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nparts && n < max; i++)
        parts[n++] = r->parts[i]->id;
    return n;
}

void tw_router_get_stats(const tw_router *r, tw_router_stats *out)
{
    *out = r->stats;
    if (r->results != NULL) {
        tw_results_stats rs;
        tw_results_get_stats(r->results, &rs);
        out->results_written = rs.written;
        out->results_versions = rs.versions;
        out->results_failures = rs.failures;
        out->results_retries = rs.retries;
        out->results_pending = rs.pending;
    }
}

/* ---- jobs ---------------------------------------------------------------- */

static int tw_router_emit(void *ud, const char *job, const char *id,
                          const char *json, size_t len,
                          const tw_alert_facts *facts)
{
    tw_rjob *j = ud;
    tw_router *r = j->router;
    /* claimed and sent by tw_router_flush_alerts, in this order */
    if (tw_grow((void **)&r->outbox, &r->out_cap, r->nout + 1,
                sizeof(*r->outbox), 16) != TW_OK) {
        return TW_ERR;
    }
    tw_outbox_alert *a = &r->outbox[r->nout];
    a->job = strdup(job);
    a->json = malloc(len + 1);
    if (a->job == NULL || a->json == NULL ||
        tw_alert_facts_copy(&a->facts, facts) != TW_OK) {
        free(a->job);
        free(a->json);
        return TW_ERR;
    }
    memcpy(a->json, json, len);
    a->json[len] = 0;
    a->len = len;
    snprintf(a->id, sizeof(a->id), "%s", id);
    a->partition = j->partition;
    a->offset = r->cur_offset;
    r->nout++;
    return TW_OK;
}

int tw_router_flush_alerts(tw_router *r, char *err, size_t errlen)
{
    size_t done = 0;
    int rc = TW_OK;
    for (; done < r->nout; done++) {
        tw_outbox_alert *a = &r->outbox[done];
        char label[1024];
        snprintf(label, sizeof(label), "alert %s of job '%s', rule %s", a->id,
                 a->job, a->facts.rule ? a->facts.rule : "?");
        rc = tw_checkpoint_claim(r->cfg.store, a->id, label, err, errlen);
        if (rc < 0)
            break;
        if (rc == 0) {
            r->stats.alerts_deduped++;
            tw_log(TW_LOG_DEBUG, "alert %s of job %s was sent before", a->id,
                   a->job);
        } else if (r->alert(r->alert_ud, a->job, a->id, a->json, a->len,
                            a->offset >= 0 ? a->partition : -1, a->offset,
                            &a->facts) != TW_OK) {
            snprintf(err, errlen, "alert %s of job %s could not be queued",
                     a->id, a->job);
            rc = TW_ERR;
            free(a->job);
            free(a->json);
            tw_alert_facts_release(&a->facts);
            done++; /* claimed: never again */
            break;
        } else {
            r->stats.alerts_sent++;
            if (tw_claim_list_add(&r->unconfirmed, a->id) != TW_OK)
                tw_log(TW_LOG_WARN,
                       "alert %s of job %s: out of memory; its claim stays "
                       "pending and is reported as unconfirmed later",
                       a->id, a->job);
        }
        rc = TW_OK;
        free(a->job);
        free(a->json);
        tw_alert_facts_release(&a->facts);
    }
    if (done > 0 && done < r->nout)
        memmove(r->outbox, r->outbox + done,
                (r->nout - done) * sizeof(*r->outbox));
    r->nout -= done;
    return rc;
}

int tw_router_confirm_alerts(tw_router *r, char *err, size_t errlen)
{
    return tw_claim_list_confirm(&r->unconfirmed, r->cfg.store, err, errlen);
}

int tw_router_sweep_claims(tw_router *r, char *err, size_t errlen)
{
    int n = tw_claims_sweep(r->cfg.store, err, errlen);
    if (n > 0)
        r->stats.claims_unconfirmed += (uint64_t)n;
    return n < 0 ? n : TW_OK;
}

static void tw_router_on_scan(void *ud, tw_job *job, const tw_scan *scan)
{
    tw_rjob *j = ud;
    j->router->stats.scans++;
    if (tw_alert_tracker_scan(j->alerts, job, scan) != TW_OK)
        j->failed = 1;
}

static void tw_router_on_wallclock(void *ud, tw_job *job, int64_t now_us)
{
    tw_rjob *j = ud;
    if (tw_alert_tracker_wallclock(j->alerts, job, now_us) != TW_OK)
        j->failed = 1;
}

/* Adds what the job counted since the last call to the router's totals. */
static void tw_router_account(tw_router *r, tw_rjob *j)
{
    tw_job_stats s;
    tw_job_get_stats(j->job, &s);
    r->stats.duplicates += s.duplicate_batches - j->seen.duplicate_batches;
    r->stats.samples += s.samples - j->seen.samples;
    r->stats.events += s.events - j->seen.events;
    r->stats.late_samples += s.late_samples - j->seen.late_samples;
    r->stats.late_events += s.late_events - j->seen.late_events;
    r->stats.tensors += s.tensors - j->seen.tensors;
    r->stats.late_tensors += s.late_tensors - j->seen.late_tensors;
    r->stats.skewed += (s.skewed_samples - j->seen.skewed_samples) +
                       (s.skewed_events - j->seen.skewed_events) +
                       (s.skewed_markers - j->seen.skewed_markers) +
                       (s.skewed_tensors - j->seen.skewed_tensors);
    r->stats.scan_cap_hits += s.scan_cap_hits - j->seen.scan_cap_hits;
    j->seen = s;
}

/* Hands the job's results to the results writer (results_file.h), which
 * writes <results_dir>/<name>.json or keeps them and retries; marked when
 * the job was quarantined (mark). */
static void tw_router_write_results(tw_router *r, tw_job *job,
                                    const tw_quarantine_mark *mark)
{
    if (r->results == NULL)
        return;
    tw_json *j = tw_json_new();
    if (j == NULL || (mark != NULL ? tw_quarantine_results_write(j, job, mark)
                                   : tw_job_results_write(j, job)) != TW_OK) {
        tw_log(TW_LOG_ERROR, "job %s: out of memory writing its results",
               tw_job_id(job));
        tw_json_free(j);
        return;
    }
    /* held results are retried by tw_router_expire; out of memory is
     * logged by the writer */
    (void)tw_results_put(r->results, tw_job_id(job), tw_json_str(j),
                         tw_json_len(j), tw_mono_us());
    char err[1024];
    if (r->cfg.report_html && mark == NULL &&
        tw_report_file_write(r->results_dir, tw_job_id(job), tw_json_str(j),
                             r->cfg.reg, err, sizeof(err)) != TW_OK)
        tw_log(TW_LOG_ERROR, "job %s: HTML report not written: %s",
               tw_job_id(job), err);
    tw_json_free(j);
}

static int tw_rpart_add_fin(tw_rpart *p, const char *id)
{
    if (tw_grow((void **)&p->fin, &p->fin_cap, p->nfin + 1, sizeof(*p->fin),
                8) != TW_OK) {
        return TW_ERR;
    }
    if ((p->fin[p->nfin] = strdup(id)) == NULL)
        return TW_ERR;
    p->nfin++;
    /* its saved parts are obsolete: the tombstone replaces them */
    size_t kept = 0;
    for (size_t i = 0; i < p->npend; i++) {
        if (strcmp(p->pend[i].job, id) == 0) {
            free(p->pend[i].job);
            free(p->pend[i].part);
            free(p->pend[i].data);
        } else {
            p->pend[kept++] = p->pend[i];
        }
    }
    p->npend = kept;
    return tw_strmap_put(&p->known, id, strlen(id), TW_JOB_FINISHED);
}

/* Finalizes job i of p: remaining scans, final alerts, results file. */
static int tw_router_finish(tw_router *r, tw_rpart *p, size_t i,
                            int64_t latest_us, const char *why)
{
    TW_ASSERT(i < p->njobs && r->stats.jobs_active >= p->njobs);
    tw_rjob *j = p->jobs[i];
    int rc = tw_job_finish(j->job, latest_us);
    if (rc == TW_JOB_STOPPED && !j->failed) {
        tw_router_account(r, j);
        return rc; /* not finished: finish it again later */
    }
    if (rc == TW_OK && !j->failed)
        rc = tw_alert_tracker_finish(j->alerts, j->job);
    if (rc != TW_OK || j->failed) {
        tw_log(TW_LOG_ERROR,
               "job %s: cannot finish it (out of memory or "
               "an alert could not be queued)",
               tw_job_id(j->job));
        return TW_ERR;
    }
    tw_router_account(r, j);
    tw_router_write_results(r, j->job, NULL);
    tw_job_stats s;
    tw_job_get_stats(j->job, &s);
    double secs = (double)(tw_mono_us() - j->started_us) / 1e6;
    tw_log(TW_LOG_INFO,
           "job %s finished (%s): samples=%" PRIu64 " events=%" PRIu64
           " scans=%" PRIu64 " duplicates=%" PRIu64 " late=%" PRIu64
           " skewed=%" PRIu64 " alerts=%" PRIu64 " seconds=%.3f",
           tw_job_id(j->job), why, s.samples, s.events, s.scans,
           s.duplicate_batches, s.late_samples + s.late_events,
           s.skewed_samples + s.skewed_events + s.skewed_markers,
           tw_alert_tracker_sent(j->alerts), secs);
    /* The next checkpoint writes its tombstone, and commits carry it while
     * its first message lies past the committed offset (the results file
     * above is already written, so a crash now cannot lose it). */
    if (tw_rpart_add_fin(p, tw_job_id(j->job)) != TW_OK ||
        tw_rpart_add_done(p, tw_job_id(j->job), j->first_offset) != TW_OK)
        return TW_ERR;
    if (tw_job_loss_any(tw_job_loss_of(j->job)))
        r->stats.jobs_partial++;
    if (r->cfg.job_finished != NULL)
        r->cfg.job_finished(r->cfg.job_finished_ud, tw_job_id(j->job));
    r->stats.jobs_finished++;
    r->stats.jobs_active--;
    tw_rjob_free(j);
    p->jobs[i] = p->jobs[--p->njobs];
    return TW_OK;
}

static int tw_router_new_job(tw_router *r, tw_rpart *p, const char *id,
                             int64_t offset, int restored, tw_rjob **out)
{
    char err[1024];
    tw_rjob *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return TW_ERR;
    j->router = r;
    j->partition = p->id;
    j->first_offset = offset;
    j->started_us = tw_mono_us();
    /* the idle clock starts now (a restored job has no message yet) */
    j->last_active_us = j->started_us;
    j->alerts = tw_alert_tracker_new(tw_router_emit, j);
    if (j->alerts != NULL) {
        tw_alert_tracker_set_max_bytes(j->alerts, r->cfg.max_alert_bytes);
        tw_alert_tracker_set_finding_every(j->alerts, r->cfg.finding_every_us);
    }
    if (j->alerts == NULL ||
        tw_job_new(id, &r->cfg.job, r->cfg.reg, r->cfg.rules, r->cfg.nrules,
                   &j->job, err, sizeof(err)) != TW_OK) {
        if (j->alerts != NULL)
            tw_log(TW_LOG_ERROR, "job %s: %s", id, err);
        tw_rjob_free(j);
        return TW_ERR;
    }
    tw_job_on_scan(j->job, tw_router_on_scan, j);
    tw_job_on_wallclock(j->job, tw_router_on_wallclock, j);
    /* a checkpoint writes what arrived since the last one, not every
     * buffered batch (job.h, segmented checkpoints) */
    tw_job_set_segmented(j->job);
    /* and the scan-fed state in slices, not all of it after each scan */
    tw_job_set_slice_bytes(j->job,
                           tw_store_checkpoint_slice_bytes(r->cfg.store));
    tw_job_set_checkpoint_target(
        j->job, tw_store_checkpoint_target_bytes(r->cfg.store));
    if (tw_grow((void **)&p->jobs, &p->jobs_cap, p->njobs + 1, sizeof(*p->jobs),
                4) != TW_OK) {
        tw_rjob_free(j);
        return TW_ERR;
    }
    p->jobs[p->njobs++] = j;
    r->stats.jobs_active++;
    if (restored) {
        r->stats.jobs_restored++;
    } else {
        r->stats.jobs_started++;
        tw_log(TW_LOG_INFO,
               "job %s started (partition %" PRId32 ", offset %" PRId64 ")", id,
               p->id, offset);
    }
    *out = j;
    return TW_OK;
}

static tw_rpart *tw_router_part_or_assign(tw_router *r, int32_t partition)
{
    tw_rpart *p = tw_router_part(r, partition);
    if (p == NULL && tw_router_add_part(r, partition, NULL) == TW_OK)
        p = tw_router_part(r, partition);
    return p;
}

/* Offsets [from, to] of p will never be read: the broker truncated the
 * log under the consumer, or its position was reset. The jobs in flight
 * may have lost messages there: they are marked partial (their per-node
 * sequence gaps, found at their end, say which nodes lost what), and no
 * job met mid-stream from now on is taken as finished by a previous
 * owner. */
static int tw_router_offsets_lost(tw_router *r, tw_rpart *p, int64_t from,
                                  int64_t to)
{
    TW_ASSERT(from <= to);
    r->stats.offset_gaps++;
    r->stats.offsets_lost += (uint64_t)(to - from + 1);
    p->gap = 1;
    tw_log(TW_LOG_WARN,
           "partition %" PRId32 ": offsets %" PRId64 "..%" PRId64
           " were never read (the broker truncated its log under the "
           "consumer, or the position was reset): data lost; %zu job(s) in "
           "flight marked partial",
           p->id, from, to, p->njobs);
    char where[48];
    snprintf(where, sizeof(where), "%" PRId32, p->id);
    for (size_t i = 0; i < p->njobs; i++)
        if (tw_job_note_loss(p->jobs[i]->job, TW_LOSS_OFFSETS, where,
                             (uint64_t)from, (uint64_t)to) != TW_OK)
            return TW_ERR;
    return TW_OK;
}

/* Where p's next message is expected: after the last one processed, else
 * where reading started; -1 when unknown (the log's beginning). */
static int64_t tw_rpart_expected(const tw_rpart *p)
{
    return p->next_offset >= 0 ? p->next_offset : p->start_offset;
}

void tw_router_key_mismatch(tw_router *r)
{
    r->stats.key_mismatches++;
}

void tw_router_dead_letter(tw_router *r, int32_t partition, int64_t offset)
{
    r->stats.dead_letters++;
    tw_rpart *p = tw_router_part_or_assign(r, partition);
    if (p == NULL)
        return;
    int64_t want = tw_rpart_expected(p);
    if (want >= 0 && offset > want &&
        tw_router_offsets_lost(r, p, want, offset - 1) != TW_OK)
        tw_log(TW_LOG_ERROR, "partition %" PRId32 ": out of memory", p->id);
    if (offset + 1 > p->next_offset)
        p->next_offset = offset + 1;
}

int tw_router_quarantine(tw_router *r, int32_t partition, int64_t offset,
                         const char *job, const char *reason, unsigned attempts)
{
    tw_rpart *p = tw_router_part_or_assign(r, partition);
    if (p == NULL)
        return TW_ERR;
    if (offset >= 0) { /* a message; -1: the job's idle finalization */
        r->stats.messages_quarantined++;
        if (offset + 1 > p->next_offset)
            p->next_offset = offset + 1;
    }
    if (job == NULL)
        return TW_OK;
    size_t i = 0;
    while (i < p->njobs && strcmp(tw_job_id(p->jobs[i]->job), job) != 0)
        i++;
    if (i == p->njobs)
        return TW_OK; /* finished or never started here: nothing to mark */
    tw_rjob *j = p->jobs[i];
    tw_quarantine_mark mark = {.reason = reason,
                               .partition = partition,
                               .offset = offset,
                               .attempts = attempts};
    tw_router_account(r, j);
    tw_router_write_results(r, j->job, &mark);
    tw_log(TW_LOG_ERROR,
           "job %.200s quarantined at partition %" PRId32 " offset %" PRId64
           " after %u failed attempt(s): %s; its later messages are skipped",
           job, partition, offset, attempts, reason);
    /* Like a finished job from here on (tw_router_finish's bookkeeping),
     * so a restart does not evaluate it again either. */
    int rc = tw_rpart_add_fin(p, job);
    if (rc == TW_OK)
        rc = tw_rpart_add_done(p, job, j->first_offset);
    r->stats.jobs_quarantined++;
    r->stats.jobs_active--;
    tw_rjob_free(j);
    p->jobs[i] = p->jobs[--p->njobs];
    return rc;
}

/* A training hook's JOB_START carries its profiler configuration: one the
 * managed service would refuse is named in a WARN (the job still runs). */
static void tw_router_check_profiler_config(const tw_batch *b,
                                            const tw_marker *m)
{
    if (m->profiler_config == NULL)
        return;
    char err[512];
    if (tw_profiler_config_check(m->profiler_config, strlen(m->profiler_config),
                                 err, sizeof(err)) != 0)
        tw_log(TW_LOG_WARN,
               "job %s node %s: JOB_START's profiler configuration is "
               "invalid: %s",
               b->job != NULL ? b->job : "", b->node != NULL ? b->node : "",
               err);
}

int tw_router_batch(tw_router *r, int32_t partition, int64_t offset,
                    tw_batch *b, int64_t now_us)
{
    tw_rpart *p = tw_router_part_or_assign(r, partition);
    if (p == NULL) {
        tw_batch_free(b);
        return TW_ERR;
    }
    if (p->need_load) {
        tw_batch_free(b);
        return TW_UNAVAILABLE;
    }
    /* Before the position (tw_router_position: after the last message
     * processed, else where reading started): redelivered, and already in
     * this instance's jobs or in the checkpoint. */
    int64_t pos = tw_rpart_expected(p);
    if (offset < pos) {
        tw_batch_free(b);
        return TW_OK;
    }
    const char *id = b->job != NULL ? b->job : "";
    tw_rjob *j = NULL;
    size_t ji = 0;
    for (; ji < p->njobs; ji++) {
        if (strcmp(tw_job_id(p->jobs[ji]->job), id) == 0) {
            j = p->jobs[ji];
            break;
        }
    }
    int has_start = 0, has_end = 0;
    int64_t start_us = 0, latest_us = 0;
    for (size_t i = 0; i < b->nmarkers; i++) {
        if (b->markers[i].kind == TW_MARKER_JOB_START) {
            has_start = 1;
            start_us = b->markers[i].time_us;
            tw_router_check_profiler_config(b, &b->markers[i]);
        } else if (b->markers[i].kind == TW_MARKER_JOB_END) {
            has_end = 1;
            latest_us = b->markers[i].latest_us;
        }
    }
    uint32_t known = 0;
    if (j == NULL && !tw_strmap_get(&p->known, id, strlen(id), &known)) {
        /* a job finished here before (its tombstone) is not re-created */
        char err[512];
        int done = tw_checkpoint_job_done(r->cfg.store, id, err, sizeof(err));
        if (done == TW_UNAVAILABLE) {
            tw_batch_free(b);
            return TW_UNAVAILABLE;
        }
        if (done < 0) {
            tw_log(TW_LOG_ERROR, "job %s: %s", id, err);
            tw_batch_free(b);
            return TW_ERR;
        }
        if (done == 1) {
            tw_log(TW_LOG_INFO,
                   "job %s finished before (tombstone in the store): "
                   "skipping its messages",
                   id);
            if (tw_strmap_put(&p->known, id, strlen(id), TW_JOB_FINISHED) !=
                TW_OK) {
                tw_batch_free(b);
                return TW_ERR;
            }
        }
    }
    if (pos >= 0 && offset > pos &&
        tw_router_offsets_lost(r, p, pos, offset - 1) != TW_OK) {
        tw_batch_free(b);
        return TW_ERR;
    }
    if (offset + 1 > p->next_offset)
        p->next_offset = offset + 1;
    r->stats.batches++;
    r->stats.python_profiles += b->npython_profiles;
    int joined_lost = 0;
    if (j == NULL) {
        if (tw_strmap_get(&p->known, id, strlen(id), &known)) {
            if (known == TW_JOB_FINISHED) {
                r->stats.after_end++;
                for (size_t i = 0; i < p->ndone; i++)
                    if (p->done[i].first_offset == INT64_MAX &&
                        strcmp(p->done[i].id, id) == 0)
                        p->done[i].first_offset = offset;
            } else {
                r->stats.skipped_messages++;
            }
            tw_batch_free(b);
            return TW_OK;
        }
        if (!has_start && b->seq != 1) {
            /* Met mid-stream. Finished by a previous owner only when the
             * point where reading started covers its start and no offset
             * was lost since; anything else is data loss. */
            if (p->covered >= 0 && !p->gap) {
                tw_log(TW_LOG_INFO,
                       "job %s met mid-stream at partition %" PRId32
                       " offset %" PRId64 " (node %s seq %" PRIu64
                       "): it started before offset %" PRId64
                       ", where reading resumed, so a previous owner "
                       "finished it; skipping its messages",
                       id, p->id, offset, b->node != NULL ? b->node : "",
                       b->seq, p->covered);
                r->stats.jobs_finished_before++;
                r->stats.after_end++;
                /* id points into b: remember it before b goes */
                int rc =
                    tw_strmap_put(&p->known, id, strlen(id), TW_JOB_FINISHED);
                tw_batch_free(b);
                return rc;
            }
            r->stats.jobs_data_loss++;
            if (r->cfg.on_data_loss == TW_ON_DATA_LOSS_SKIP) {
                tw_log(TW_LOG_WARN,
                       "job %s met mid-stream at partition %" PRId32
                       " offset %" PRId64 " (node %s seq %" PRIu64
                       ") and nothing proves a previous owner finished it: "
                       "its beginning was lost; skipping it "
                       "(engine.on_data_loss: skip)",
                       id, p->id, offset, b->node != NULL ? b->node : "",
                       b->seq);
                r->stats.jobs_skipped_partial++;
                r->stats.skipped_messages++;
                int rc =
                    tw_strmap_put(&p->known, id, strlen(id), TW_JOB_SKIPPED);
                tw_batch_free(b);
                return rc;
            }
            joined_lost = 1;
        }
        if (tw_router_new_job(r, p, id, offset, 0, &j) != TW_OK) {
            tw_batch_free(b);
            return TW_ERR;
        }
        ji = p->njobs - 1;
        char where[48];
        snprintf(where, sizeof(where), "%" PRId32, p->id);
        if (joined_lost &&
            tw_job_note_loss(j->job, TW_LOSS_JOINED, where, (uint64_t)offset,
                             (uint64_t)offset) != TW_OK) {
            tw_batch_free(b);
            return TW_ERR;
        }
    }
    if (has_start && start_us > 0)
        tw_job_set_first_timestamp(j->job, start_us);
    j->last_active_us = now_us;
    r->cur_partition = partition;
    r->cur_offset = offset;
    uint64_t skewed = r->stats.skewed;
    int rc = tw_job_ingest(j->job, b);
    tw_router_account(r, j);
    if (rc == TW_OK && j->failed)
        rc = TW_ERR;
    /* With several agents each node sends its own JOB_END: the job ends
     * with the last of the nodes that sent JOB_START (tw_job_ingest). */
    if (rc == TW_OK && has_end && tw_job_end_marker_seen(j->job))
        rc = tw_router_finish(r, p, ji, latest_us, "end marker");
    if (r->stats.skewed != skewed)
        r->stats.skewed_batches++;
    if (rc == TW_JOB_STOPPED)
        p->next_offset = offset; /* read it again */
    r->cur_partition = -1;
    r->cur_offset = -1;
    return rc;
}

int tw_router_expire(tw_router *r, int64_t now_us)
{
    if (r->results != NULL) /* its clock: the one tw_results_put was given */
        tw_results_retry(r->results, tw_mono_us());
    for (size_t pi = 0; pi < r->nparts; pi++) {
        tw_rpart *p = r->parts[pi];
        for (size_t i = 0; i < p->njobs;) {
            tw_rjob *j = p->jobs[i];
            if (now_us - j->last_active_us < r->cfg.job_idle_us) {
                i++;
                continue;
            }
            int rc = tw_router_finish(r, p, i, 0, "idle");
            if (rc == TW_ERR) {
                /* No message to retry or quarantine: exiting would meet
                 * the same job again after a restart (a crash loop), so
                 * the job itself is quarantined (results marked). */
                char id[TW_WIRE_ID_MAX + 1];
                snprintf(id, sizeof(id), "%s", tw_job_id(j->job));
                rc = tw_router_quarantine(r, p->id, -1, id,
                                          "its idle finalization failed (an "
                                          "alert could not be built or queued, "
                                          "or out of memory)",
                                          1);
                if (rc != TW_OK)
                    return rc;
                continue; /* job i is gone */
            }
            if (rc != TW_OK)
                return rc;
            r->stats.jobs_idle++;
        }
    }
    return TW_OK;
}

void tw_router_wallclock(tw_router *r, int64_t now_us)
{
    r->cur_partition = -1;
    r->cur_offset = -1; /* its alerts belong to no message */
    for (size_t pi = 0; pi < r->nparts; pi++) {
        tw_rpart *p = r->parts[pi];
        for (size_t i = 0; i < p->njobs; i++)
            tw_job_wallclock(p->jobs[i]->job, now_us);
    }
}

int tw_router_commit_point(tw_router *r, int32_t partition,
                           tw_source_commit_entry *out)
{
    tw_rpart *p = tw_router_part(r, partition);
    /* Only what a checkpoint holds is committed; and never past the first
     * message of a job still unfinished, so that a next owner without
     * this checkpoint (a volatile store, or one emptied while the engine
     * was down) re-reads every unfinished job from its start. */
    if (p == NULL || p->ckpt_offset < 0)
        return 0;
    int64_t off = p->ckpt_offset;
    for (size_t i = 0; i < p->njobs; i++)
        if (p->jobs[i]->first_offset < off)
            off = p->jobs[i]->first_offset;
    TW_ASSERT(off <= p->ckpt_offset); /* never past the checkpoint */
    /* Finished jobs before the commit offset are never re-read: forget
     * them; the others go into the metadata. */
    size_t kept = 0;
    for (size_t i = 0; i < p->ndone; i++) {
        if (p->done[i].first_offset < off)
            free(p->done[i].id);
        else
            p->done[kept++] = p->done[i];
    }
    p->ndone = kept;
    free(p->meta);
    p->meta = NULL;
    /* First element {"next_offset":N}: how far this consumer has read,
     * which the committed offset (held at the oldest unfinished job)
     * does not say; replay's flow control reads it. Readers of the
     * finished-job list skip what is not a string. */
    json_t *a = json_array();
    size_t bytes = 48;
    if (a != NULL)
        json_array_append_new(
            a, json_pack("{sI}", "next_offset", (json_int_t)p->next_offset));
    for (size_t i = 0; a != NULL && i < p->ndone; i++) {
        bytes += strlen(p->done[i].id) + 3;
        if (bytes > TW_ROUTER_META_MAX) {
            tw_log(TW_LOG_WARN,
                   "partition %" PRId32 ": %zu finished jobs past the "
                   "commit offset do not fit the offset metadata; a "
                   "next owner may evaluate some again",
                   p->id, p->ndone);
            break;
        }
        json_array_append_new(a, json_string(p->done[i].id));
    }
    p->meta = a != NULL ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    out->partition = p->id;
    out->offset = off;
    out->metadata = p->meta;
    return 1;
}

/* ---- checkpoints (store only) ------------------------------------------ */

/* Restores the parts tw_checkpoint_load hands over: per job "core" first
 * (which creates the job), rule parts, then "alerts". */
typedef struct tw_restore_ctx {
    tw_router *r;
    tw_rpart *p;
    tw_rjob *cur;
    char *err;
    size_t errlen;
    size_t nparts; /* read so far, for the log line */
    uint64_t bytes;
    int64_t batches_us, parts_us; /* restoring chunks.*, and every part */
} tw_restore_ctx;

/* "origin": the job's first Kafka offset, decimal. Commits must never pass
 * it while the job is unfinished, restored or not. */
static int tw_router_restore_origin(tw_restore_ctx *c, const uint8_t *data,
                                    size_t len)
{
    char text[24];
    char *end = NULL;
    long long v = -1;
    if (len > 0 && len < sizeof(text)) {
        memcpy(text, data, len);
        text[len] = 0;
        errno = 0;
        v = strtoll(text, &end, 10);
    }
    if (v < 0 || end == NULL || *end != 0 || errno != 0) {
        snprintf(c->err, c->errlen,
                 "checkpoint of job '%s': part 'origin' is not an offset",
                 tw_job_id(c->cur->job));
        return TW_ERR;
    }
    c->cur->first_offset = v;
    c->cur->origin_saved = 1;
    return TW_OK;
}

static int tw_router_restore_part(void *ud, const char *job, const char *part,
                                  const uint8_t *data, size_t len)
{
    tw_restore_ctx *c = ud;
    c->nparts++;
    c->bytes += len;
    if (c->cur == NULL || strcmp(tw_job_id(c->cur->job), job) != 0) {
        c->cur = NULL;
        if (strcmp(part, "core") != 0) {
            snprintf(c->err, c->errlen,
                     "checkpoint of job '%s' has no core part", job);
            return TW_ERR;
        }
        if (tw_router_new_job(c->r, c->p, job, c->p->start_offset, 1,
                              &c->cur) != TW_OK) {
            snprintf(c->err, c->errlen, "job '%s': cannot create it", job);
            return TW_ERR;
        }
    }
    char why[512];
    if (strcmp(part, "origin") == 0)
        return tw_router_restore_origin(c, data, len);
    int64_t t0 = tw_mono_us();
    int rc = strcmp(part, "alerts") == 0
                 ? tw_alert_tracker_restore(c->cur->alerts, data, len, why,
                                            sizeof(why))
                 : tw_job_restore_part(c->cur->job, part, data, len, why,
                                       sizeof(why));
    int64_t took = tw_mono_us() - t0;
    c->parts_us += took;
    if (strncmp(part, "chunks.", 7) == 0)
        c->batches_us += took;
    if (rc != TW_OK) {
        snprintf(c->err, c->errlen, "job '%s' part '%s': %s", job, part, why);
        return TW_ERR;
    }
    tw_job_get_stats(c->cur->job, &c->cur->seen);
    return TW_OK;
}

/* Loads p's checkpoint. On anything but TW_OK the jobs restored so far are
 * dropped again, so a later retry starts clean. */
static int tw_router_load(tw_router *r, tw_rpart *p, char *err, size_t errlen)
{
    int64_t next = -1;
    tw_restore_ctx c = {.r = r, .p = p, .err = err, .errlen = errlen};
    err[0] = 0;
    int64_t t0 = tw_mono_us();
    int rc = tw_checkpoint_load(r->cfg.store, r->cfg.topic, p->id, &next,
                                tw_router_restore_part, &c, err, errlen);
    /* each job's state snapshot, and the scans since it run again */
    int64_t t_end = tw_mono_us();
    for (size_t i = 0; rc == TW_OK && i < p->njobs; i++)
        rc = tw_job_restore_end(p->jobs[i]->job, err, errlen);
    int64_t replay_us = tw_mono_us() - t_end;
    if (rc != TW_OK) {
        r->stats.jobs_restored -= p->njobs;
        r->stats.jobs_active -= p->njobs;
        for (size_t i = 0; i < p->njobs; i++)
            tw_rjob_free(p->jobs[i]);
        p->njobs = 0;
        return rc;
    }
    p->need_load = 0;
    if (next >= 0) {
        p->start_offset = next;
        p->ckpt_offset = next;
    }
    p->covered = p->start_offset >= 0 ? p->start_offset : -1;
    for (size_t i = 0; i < p->njobs; i++) {
        tw_job_stats st;
        tw_job_get_stats(p->jobs[i]->job, &st);
        /* a checkpoint from before "origin" parts: the best known bound */
        if (!p->jobs[i]->origin_saved)
            p->jobs[i]->first_offset = p->start_offset;
        tw_log(TW_LOG_INFO,
               "job %s restored from checkpoint (partition %" PRId32
               ", offset %" PRId64 ", samples=%" PRIu64 " scans=%" PRIu64 ")",
               tw_job_id(p->jobs[i]->job), p->id, p->start_offset, st.samples,
               st.scans);
    }
    int64_t total_us = tw_mono_us() - t0;
    tw_log(TW_LOG_INFO,
           "partition %" PRId32 ": checkpoint %s, %zu job(s) restored "
           "(%zu part(s), %" PRIu64 " bytes, %.1f ms: store %.1f, batches "
           "%.1f, scans run again %.1f, rest %.1f), reading from offset "
           "%" PRId64,
           p->id, next >= 0 ? "loaded" : "absent", p->njobs, c.nparts, c.bytes,
           (double)total_us / 1e3,
           (double)(total_us - c.parts_us - replay_us) / 1e3,
           (double)c.batches_us / 1e3, (double)replay_us / 1e3,
           (double)(c.parts_us - c.batches_us) / 1e3, p->start_offset);
    return TW_OK;
}

int tw_router_assign(tw_router *r, int32_t partition, const char *metadata,
                     int64_t committed, int64_t *start_offset, char *err,
                     size_t errlen)
{
    *start_offset = TW_SOURCE_OFFSET_DEFAULT;
    int existed = tw_router_part(r, partition) != NULL;
    if (tw_router_add_part(r, partition, metadata) != TW_OK) {
        snprintf(err, errlen, "out of memory assigning a partition");
        return TW_ERR;
    }
    if (existed)
        return TW_OK;
    tw_rpart *p = tw_router_part(r, partition);
    /* without a checkpoint: the committed offset, else the beginning */
    p->start_offset = committed >= 0 ? committed : -2;
    p->covered = committed >= 0 ? committed : -1;
    int rc = tw_router_load(r, p, err, errlen);
    if (rc == TW_UNAVAILABLE) {
        p->need_load = 1;
        tw_log(TW_LOG_WARN,
               "partition %" PRId32 ": state store unavailable, loading its "
               "checkpoint later",
               partition);
        rc = TW_OK;
    }
    *start_offset = p->start_offset;
    return rc;
}

int tw_router_load_pending(tw_router *r, char *err, size_t errlen)
{
    for (size_t i = 0; i < r->nparts; i++) {
        tw_rpart *p = r->parts[i];
        if (!p->need_load)
            continue;
        int rc = tw_router_load(r, p, err, errlen);
        if (rc != TW_OK)
            return rc;
    }
    return TW_OK;
}

int64_t tw_router_position(const tw_router *r, int32_t partition)
{
    const tw_rpart *p = tw_router_part(r, partition);
    if (p == NULL)
        return TW_SOURCE_OFFSET_DEFAULT;
    return p->next_offset >= 0 ? p->next_offset : p->start_offset;
}

size_t tw_router_retry_results(tw_router *r)
{
    return r->results != NULL ? tw_results_retry(r->results, INT64_MAX) : 0;
}

int tw_router_checkpoint_due(const tw_router *r, int32_t partition)
{
    const tw_rpart *p = tw_router_part(r, partition);
    return p != NULL && p->nfin > 0;
}

/* tw_job_save's emit: replaces or adds (job, part) in the pending list. */
typedef struct tw_save_ctx {
    tw_rpart *p;
    const char *job;
} tw_save_ctx;

static int tw_pending_put(void *ud, const char *part, const void *data,
                          size_t len)
{
    tw_save_ctx *c = ud;
    tw_rpart *p = c->p;
    tw_pending_part *e = NULL;
    for (size_t i = 0; i < p->npend && e == NULL; i++)
        if (strcmp(p->pend[i].job, c->job) == 0 &&
            strcmp(p->pend[i].part, part) == 0)
            e = &p->pend[i];
    void *copy = NULL; /* data NULL: the part is to be removed */
    if (data != NULL) {
        if ((copy = malloc(len ? len : 1)) == NULL)
            return TW_ERR;
        memcpy(copy, data, len);
    }
    if (e == NULL) {
        if (tw_grow((void **)&p->pend, &p->pend_cap, p->npend + 1,
                    sizeof(*p->pend), 16) != TW_OK) {
            free(copy);
            return TW_ERR;
        }
        e = &p->pend[p->npend];
        e->job = strdup(c->job);
        e->part = strdup(part);
        e->data = NULL;
        if (e->job == NULL || e->part == NULL) {
            free(e->job);
            free(e->part);
            free(copy);
            return TW_ERR;
        }
        p->npend++;
    }
    free(e->data);
    e->data = copy;
    e->len = len;
    return TW_OK;
}

int tw_router_checkpoint(tw_router *r, int32_t partition, char *err,
                         size_t errlen)
{
    tw_rpart *p = tw_router_part(r, partition);
    if (p == NULL || p->need_load)
        return TW_OK;
    int64_t t_start = tw_mono_us(); /* for the DEBUG line: save, store */
    /* A finished job whose results are not on disk yet (held for a retry)
     * keeps the partition's last checkpoint: no tombstone, no commit past
     * its messages, so a crash now re-evaluates it instead of losing it. */
    for (size_t i = 0; r->results != NULL && i < p->nfin; i++)
        if (tw_results_pending_job(r->results, p->fin[i])) {
            r->stats.checkpoints_held++;
            return TW_OK;
        }
    for (size_t i = 0; i < r->nout; i++)
        if (r->outbox[i].partition == partition) {
            snprintf(err, errlen,
                     "alerts of partition %" PRId32 " are not sent yet",
                     partition);
            return TW_UNAVAILABLE;
        }
    /* Save what changed since the last save into the pending list; the
     * alert tracker changes only with a scan, i.e. when the job is dirty.
     * A volatile store keeps no job state: a next owner re-reads the
     * unfinished jobs (see tw_router_commit_point). */
    for (size_t i = 0; r->durable && i < p->njobs; i++) {
        tw_rjob *j = p->jobs[i];
        if (!tw_job_dirty(j->job))
            continue;
        tw_save_ctx c = {.p = p, .job = tw_job_id(j->job)};
        if (!j->origin_saved) {
            char origin[24];
            int n =
                snprintf(origin, sizeof(origin), "%" PRId64, j->first_offset);
            if (tw_pending_put(&c, "origin", origin, (size_t)n) != TW_OK) {
                snprintf(err, errlen, "job %s: out of memory", c.job);
                return TW_ERR;
            }
            j->origin_saved = 1; /* pending until a checkpoint commits it */
        }
        tw_buf_clear(r->scratch);
        if (tw_alert_tracker_save(j->alerts, r->scratch) != TW_OK ||
            tw_pending_put(&c, "alerts", tw_buf_data(r->scratch),
                           tw_buf_len(r->scratch)) != TW_OK) {
            snprintf(err, errlen, "job %s: out of memory saving its alerts",
                     c.job);
            return TW_ERR;
        }
        if (tw_job_save(j->job, 1, tw_pending_put, &c, err, errlen) != TW_OK)
            return TW_ERR;
    }
    int64_t next = p->next_offset >= 0 ? p->next_offset : p->ckpt_offset;
    if (next < 0 || (next == p->ckpt_offset && p->npend == 0 && p->nfin == 0))
        return TW_OK; /* nothing new */
    int64_t t_saved = tw_mono_us();
    tw_checkpoint_part *parts = calloc(p->npend ? p->npend : 1, sizeof(*parts));
    if (parts == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < p->npend; i++) {
        parts[i] = (tw_checkpoint_part){.job = p->pend[i].job,
                                        .part = p->pend[i].part,
                                        .data = p->pend[i].data,
                                        .len = p->pend[i].len};
        bytes += p->pend[i].len;
    }
    int rc = tw_checkpoint_commit(r->cfg.store, r->cfg.topic, p->id, next,
                                  parts, p->npend, (const char *const *)p->fin,
                                  p->nfin, err, errlen);
    free(parts);
    if (rc != TW_OK)
        return rc;
    int64_t t_end = tw_mono_us();
    tw_log(TW_LOG_DEBUG,
           "checkpoint partition %" PRId32 ": offset %" PRId64
           ", %zu part(s), %" PRIu64 " bytes, %zu finished, %.3f ms (save "
           "%.3f ms, store %.3f ms)",
           p->id, next, p->npend, bytes, p->nfin,
           (double)(t_end - t_start) / 1e3, (double)(t_saved - t_start) / 1e3,
           (double)(t_end - t_saved) / 1e3);
    tw_pending_free(p);
    p->ckpt_offset = next;
    r->stats.checkpoints++;
    r->stats.checkpoint_bytes += bytes;
    return TW_OK;
}
