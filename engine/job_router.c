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
#include "job_results.h"
#include "json_writer.h"
#include "log.h"
#include "strmap.h"

/* What a partition remembers of a job that is not being evaluated. */
#define TW_JOB_FINISHED 1u /* finished here or by a previous owner */
#define TW_JOB_SKIPPED 2u  /* joined mid-stream                    */

typedef struct tw_rpart tw_rpart;

typedef struct tw_rjob {
    tw_router *router;
    tw_job *job;
    tw_alert_tracker *alerts;
    int64_t first_offset;
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

struct tw_rpart {
    int32_t id;
    int64_t next_offset; /* last processed + 1; -1 = none since assignment */
    tw_rjob **jobs;      /* unfinished jobs; few per partition: a list */
    size_t njobs, jobs_cap;
    tw_done_job *done;
    size_t ndone, done_cap;
    tw_strmap known; /* job id -> TW_JOB_FINISHED / TW_JOB_SKIPPED */
    char *meta;      /* the last commit's metadata */
};

struct tw_router {
    tw_router_config cfg;
    char *results_dir;
    tw_router_alert_fn alert;
    void *alert_ud;
    tw_rpart **parts;
    size_t nparts, parts_cap;
    /* the message in hand, for alerts' source headers */
    int32_t cur_partition;
    int64_t cur_offset;
    tw_router_stats stats;
};

static int64_t tw_router_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

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
    }
    r->cfg.results_dir = r->results_dir;
    *out = r;
    return TW_OK;
}

static void tw_rjob_free(tw_rjob *j)
{
    if (j == NULL)
        return;
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
    free(p);
}

void tw_router_free(tw_router *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->nparts; i++)
        tw_rpart_free(r->parts[i]);
    free(r->parts);
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
    if (p->ndone == p->done_cap) {
        size_t cap = p->done_cap ? p->done_cap * 2 : 8;
        tw_done_job *n = realloc(p->done, cap * sizeof(*n));
        if (n == NULL)
            return TW_ERR;
        p->done = n;
        p->done_cap = cap;
    }
    char *copy = strdup(id);
    if (copy == NULL)
        return TW_ERR;
    p->done[p->ndone++] = (tw_done_job){.id = copy, .first_offset = first};
    return tw_strmap_put(&p->known, id, strlen(id), TW_JOB_FINISHED);
}

int tw_router_assign(tw_router *r, int32_t partition, const char *metadata)
{
    if (tw_router_part(r, partition) != NULL)
        return TW_OK;
    if (r->nparts == r->parts_cap) {
        size_t cap = r->parts_cap ? r->parts_cap * 2 : 8;
        tw_rpart **n = realloc(r->parts, cap * sizeof(*n));
        if (n == NULL)
            return TW_ERR;
        r->parts = n;
        r->parts_cap = cap;
    }
    tw_rpart *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return TW_ERR;
    p->id = partition;
    p->next_offset = -1;
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
        r->stats.jobs_dropped += p->njobs;
        r->stats.jobs_active -= p->njobs;
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
}

/* ---- jobs ---------------------------------------------------------------- */

static int tw_router_emit(void *ud, const char *job, const char *id,
                          const char *json, size_t len)
{
    tw_rjob *j = ud;
    tw_router *r = j->router;
    if (r->alert(r->alert_ud, job, id, json, len, r->cur_partition,
                 r->cur_offset) != TW_OK)
        return TW_ERR;
    r->stats.alerts_sent++;
    return TW_OK;
}

static void tw_router_on_scan(void *ud, tw_job *job, const tw_scan *scan)
{
    tw_rjob *j = ud;
    j->router->stats.scans++;
    if (tw_alert_tracker_scan(j->alerts, job, scan) != TW_OK)
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
    j->seen = s;
}

/* A job id as a file name: anything but [A-Za-z0-9._-] becomes '_'. */
static void tw_router_file_name(const char *id, char *out, size_t len)
{
    size_t o = 0;
    for (const char *c = id; *c != '\0' && o + 1 < len; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                 (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' ||
                 *c == '_';
        out[o++] = ok ? *c : '_';
    }
    out[o] = '\0';
    if (o == 0 || strcmp(out, ".") == 0 || strcmp(out, "..") == 0)
        snprintf(out, len, "_");
}

/* Writes <results_dir>/<job>.json through a temporary file, so a reader
 * never sees half of it. */
static void tw_router_write_results(tw_router *r, tw_job *job)
{
    if (r->results_dir == NULL)
        return;
    tw_json *j = tw_json_new();
    if (j == NULL || tw_job_results_write(j, job) != TW_OK) {
        tw_log(TW_LOG_ERROR, "job %s: out of memory writing its results",
               tw_job_id(job));
        tw_json_free(j);
        return;
    }
    char name[256], path[PATH_MAX], tmp[PATH_MAX + 8];
    tw_router_file_name(tw_job_id(job), name, sizeof(name));
    snprintf(path, sizeof(path), "%s/%s.json", r->results_dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int bad = f == NULL;
    if (!bad) {
        bad |= fwrite(tw_json_str(j), 1, tw_json_len(j), f) != tw_json_len(j);
        bad |= fputc('\n', f) == EOF;
        bad |= fclose(f) != 0;
    }
    if (bad || rename(tmp, path) != 0) {
        tw_log(TW_LOG_ERROR, "job %s: cannot write %s: %s", tw_job_id(job),
               path, strerror(errno));
        unlink(tmp);
    }
    tw_json_free(j);
}

/* Finalizes job i of p: remaining scans, final alerts, results file. */
static int tw_router_finish(tw_router *r, tw_rpart *p, size_t i,
                            int64_t latest_us, const char *why)
{
    tw_rjob *j = p->jobs[i];
    int rc = tw_job_finish(j->job, latest_us);
    if (rc == TW_OK && !j->failed)
        rc = tw_alert_tracker_finish(j->alerts, j->job);
    if (rc != TW_OK || j->failed) {
        tw_log(TW_LOG_ERROR, "job %s: cannot finish it (out of memory or "
                             "an alert could not be queued)",
               tw_job_id(j->job));
        return TW_ERR;
    }
    tw_router_account(r, j);
    tw_router_write_results(r, j->job);
    tw_job_stats s;
    tw_job_get_stats(j->job, &s);
    double secs = (double)(tw_router_mono_us() - j->started_us) / 1e6;
    tw_log(TW_LOG_INFO,
           "job %s finished (%s): samples=%" PRIu64 " events=%" PRIu64
           " scans=%" PRIu64 " duplicates=%" PRIu64 " late=%" PRIu64
           " alerts=%" PRIu64 " seconds=%.3f",
           tw_job_id(j->job), why, s.samples, s.events, s.scans,
           s.duplicate_batches, s.late_samples + s.late_events,
           tw_alert_tracker_sent(j->alerts), secs);
    if (tw_rpart_add_done(p, tw_job_id(j->job), j->first_offset) != TW_OK)
        return TW_ERR;
    r->stats.jobs_finished++;
    r->stats.jobs_active--;
    tw_rjob_free(j);
    p->jobs[i] = p->jobs[--p->njobs];
    return TW_OK;
}

static int tw_router_new_job(tw_router *r, tw_rpart *p, const char *id,
                             int64_t offset, tw_rjob **out)
{
    char err[1024];
    tw_rjob *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return TW_ERR;
    j->router = r;
    j->first_offset = offset;
    j->started_us = tw_router_mono_us();
    j->alerts = tw_alert_tracker_new(tw_router_emit, j);
    if (j->alerts == NULL ||
        tw_job_new(id, &r->cfg.job, r->cfg.reg, r->cfg.rules, r->cfg.nrules,
                   &j->job, err, sizeof(err)) != TW_OK) {
        if (j->alerts != NULL)
            tw_log(TW_LOG_ERROR, "job %s: %s", id, err);
        tw_rjob_free(j);
        return TW_ERR;
    }
    tw_job_on_scan(j->job, tw_router_on_scan, j);
    if (p->njobs == p->jobs_cap) {
        size_t cap = p->jobs_cap ? p->jobs_cap * 2 : 4;
        tw_rjob **n = realloc(p->jobs, cap * sizeof(*n));
        if (n == NULL) {
            tw_rjob_free(j);
            return TW_ERR;
        }
        p->jobs = n;
        p->jobs_cap = cap;
    }
    p->jobs[p->njobs++] = j;
    r->stats.jobs_started++;
    r->stats.jobs_active++;
    tw_log(TW_LOG_INFO, "job %s started (partition %" PRId32 ", offset %" PRId64
                        ")",
           id, p->id, offset);
    *out = j;
    return TW_OK;
}

static tw_rpart *tw_router_part_or_assign(tw_router *r, int32_t partition)
{
    tw_rpart *p = tw_router_part(r, partition);
    if (p == NULL && tw_router_assign(r, partition, NULL) == TW_OK)
        p = tw_router_part(r, partition);
    return p;
}

void tw_router_dead_letter(tw_router *r, int32_t partition, int64_t offset)
{
    r->stats.dead_letters++;
    tw_rpart *p = tw_router_part_or_assign(r, partition);
    if (p != NULL && offset + 1 > p->next_offset)
        p->next_offset = offset + 1;
}

int tw_router_batch(tw_router *r, int32_t partition, int64_t offset,
                    tw_batch *b, int64_t now_us)
{
    tw_rpart *p = tw_router_part_or_assign(r, partition);
    if (p == NULL) {
        tw_batch_free(b);
        return TW_ERR;
    }
    if (offset + 1 > p->next_offset)
        p->next_offset = offset + 1;
    r->stats.batches++;
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
        } else if (b->markers[i].kind == TW_MARKER_JOB_END) {
            has_end = 1;
            latest_us = b->markers[i].latest_us;
        }
    }
    if (j == NULL) {
        uint32_t known = 0;
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
            tw_log(TW_LOG_INFO,
                   "job %s joined mid-stream at partition %" PRId32
                   " offset %" PRId64 " (node %s seq %" PRIu64
                   "): a previous owner finished it; skipping its messages",
                   id, p->id, offset, b->node != NULL ? b->node : "",
                   b->seq);
            r->stats.jobs_skipped_partial++;
            r->stats.skipped_messages++;
            tw_batch_free(b);
            return tw_strmap_put(&p->known, id, strlen(id), TW_JOB_SKIPPED);
        }
        if (tw_router_new_job(r, p, id, offset, &j) != TW_OK) {
            tw_batch_free(b);
            return TW_ERR;
        }
        ji = p->njobs - 1;
    }
    if (has_start && start_us > 0)
        tw_job_set_first_timestamp(j->job, start_us);
    j->last_active_us = now_us;
    r->cur_partition = partition;
    r->cur_offset = offset;
    int rc = tw_job_ingest(j->job, b);
    tw_router_account(r, j);
    if (rc == TW_OK && j->failed)
        rc = TW_ERR;
    if (rc == TW_OK && has_end)
        rc = tw_router_finish(r, p, ji, latest_us, "end marker");
    r->cur_partition = -1;
    r->cur_offset = -1;
    return rc;
}

int tw_router_expire(tw_router *r, int64_t now_us)
{
    for (size_t pi = 0; pi < r->nparts; pi++) {
        tw_rpart *p = r->parts[pi];
        for (size_t i = 0; i < p->njobs;) {
            tw_rjob *j = p->jobs[i];
            if (now_us - j->last_active_us < r->cfg.job_idle_us) {
                i++;
                continue;
            }
            r->stats.jobs_idle++;
            if (tw_router_finish(r, p, i, 0, "idle") != TW_OK)
                return TW_ERR;
        }
    }
    return TW_OK;
}

int tw_router_commit_point(tw_router *r, int32_t partition,
                           tw_source_commit_entry *out)
{
    tw_rpart *p = tw_router_part(r, partition);
    if (p == NULL || p->next_offset < 0)
        return 0;
    int64_t off = p->next_offset;
    for (size_t i = 0; i < p->njobs; i++)
        if (p->jobs[i]->first_offset < off)
            off = p->jobs[i]->first_offset;
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
    if (p->ndone > 0) {
        json_t *a = json_array();
        size_t bytes = 2;
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
    }
    out->partition = p->id;
    out->offset = off;
    out->metadata = p->meta;
    return 1;
}
