/* replay.c - publishing a profiler-output folder to Kafka (replay.h). */
#include "replay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "debug_batches.h"
#include "event_time.h"
#include "log.h"
#include "signals.h"
#include "tw_assert.h"
#include "wire.h"

/* Sleeps until the monotonic time `until_us`; 0, or -1 on a signal. */
static int tw_replay_sleep_until(tw_replay *r, int64_t until_us)
{
    for (;;) {
        int64_t now = tw_mono_us();
        if (now >= until_us)
            return 0;
        int64_t left_ms = (until_us - now + 999) / 1000;
        if (left_ms > 200)
            left_ms = 200; /* serve delivery reports meanwhile */
        int sig = tw_signals_wait(&r->sigs, (long)left_ms);
        if (sig != 0) {
            tw_log(TW_LOG_INFO, "replay: %s received, stopping",
                   tw_signals_name(sig));
            r->interrupted = 1;
            return -1;
        }
        tw_producer_poll(r->producer, 0);
    }
}

/* Event-time range of a batch, in seconds; 0 when it has no data. */
static int tw_replay_batch_times(const tw_batch *b, double *lo, double *hi)
{
    int any = 0;
    for (size_t i = 0; i < b->nsamples; i++) {
        double t = b->samples[i].ts;
        if (!any || t < *lo)
            *lo = t;
        if (!any || t > *hi)
            *hi = t;
        any = 1;
    }
    for (size_t i = 0; i < b->nevents; i++) {
        double s = (double)b->events[i].start_us / 1e6;
        double e = (double)b->events[i].end_us / 1e6;
        if (!any || s < *lo)
            *lo = s;
        if (!any || e > *hi)
            *hi = e;
        any = 1;
    }
    for (size_t i = 0; i < b->ntensors; i++) {
        double t = (double)b->tensors[i].wall_us / 1e6;
        if (!any || t < *lo)
            *lo = t;
        if (!any || t > *hi)
            *hi = t;
        any = 1;
    }
    return any;
}

/* Waits as --rate asks before the next batch, whose newest event time is
 * hi_s. 0, or -1 on a signal. */
static int tw_replay_pace(tw_replay *r, int has_time, double hi_s)
{
    if (r->rate_mode == TW_RATE_RECORDS) {
        /* Records sent so far may not run ahead of rate * elapsed. */
        uint64_t sent = r->samples + r->events;
        int64_t due =
            r->start_mono_us + (int64_t)((double)sent / r->rate * 1e6);
        return tw_replay_sleep_until(r, due);
    }
    if (r->rate_mode == TW_RATE_SPEED && has_time) {
        if (!r->have_first_event) {
            r->have_first_event = 1;
            r->first_event_s = hi_s;
            r->start_mono_us = tw_mono_us();
            return 0;
        }
        double ahead = (hi_s - r->first_event_s) / r->rate;
        if (ahead <= 0)
            return 0;
        return tw_replay_sleep_until(r,
                                     r->start_mono_us + (int64_t)(ahead * 1e6));
    }
    return 0;
}

static uint64_t *tw_replay_seq(tw_replay *r, const char *node)
{
    uint32_t idx;
    size_t len = strlen(node);
    if (tw_strmap_get(&r->seq_index, node, len, &idx))
        return &r->seqs[idx];
    if (r->nseqs == r->capseqs) {
        size_t cap = r->capseqs == 0 ? 16 : r->capseqs * 2;
        uint64_t *ns = realloc(r->seqs, cap * sizeof(*ns));
        if (ns == NULL)
            return NULL;
        r->seqs = ns;
        r->capseqs = cap;
    }
    if (tw_strmap_put(&r->seq_index, node, len, (uint32_t)r->nseqs) != TW_OK)
        return NULL;
    r->seqs[r->nseqs] = 1;
    return &r->seqs[r->nseqs++];
}

/* Waits while flow control says the group has too much of this replay
 * unread to publish len more bytes. 0, or -1 on a signal (r->interrupted)
 * or a failed delivery (logged). */
static int tw_replay_throttle(tw_replay *r, size_t len)
{
    if (r->flow == NULL)
        return 0;
    tw_producer_poll(r->producer, 0);
    if (!tw_replay_flow_blocked(r->flow, len))
        return 0;
    int rc = 0;
    for (;;) {
        tw_replay_flow_refresh(r->flow);
        if (!tw_replay_flow_blocked(r->flow, len))
            break;
        tw_replay_flow_report(r->flow, 1, tw_mono_us());
        tw_producer_stats ps;
        tw_producer_get_stats(r->producer, &ps);
        if (ps.failed > 0) {
            tw_log(TW_LOG_ERROR, "replay: a delivery failed while waiting for "
                                 "the consumer group; stopping");
            rc = -1;
            break;
        }
        int sig = tw_signals_wait(&r->sigs, TW_REPLAY_FLOW_POLL_MS);
        if (sig != 0) {
            tw_log(TW_LOG_INFO, "replay: %s received, stopping",
                   tw_signals_name(sig));
            r->interrupted = 1;
            rc = -1;
            break;
        }
        tw_producer_poll(r->producer, 0);
    }
    tw_replay_flow_report(r->flow, 0, tw_mono_us());
    return rc;
}

/* Publishes one encoded message (and its duplicate when due); frees buf. */
static int tw_replay_publish(tw_replay *r, uint8_t *buf, size_t len)
{
    char err[512];
    int copies = 1;
    r->published++;
    if (r->duplicate_every > 0 && r->published % r->duplicate_every == 0)
        copies = 2;
    int rc = 0;
    for (int i = 0; i < copies && rc == 0; i++) {
        if (tw_replay_throttle(r, len) != 0) {
            free(buf);
            return -1;
        }
        if (r->flow != NULL)
            tw_replay_flow_queued(r->flow, len);
        rc = tw_producer_send(r->producer, r->topic,
                              !r->key_set         ? r->job
                              : r->key[0] == '\0' ? NULL
                                                  : r->key,
                              buf, len, NULL, 0, err, sizeof(err));
    }
    free(buf);
    if (rc != 0) {
        tw_log(TW_LOG_ERROR, "replay: %s", err);
        return -1;
    }
    r->duplicates += (uint64_t)(copies - 1);
    return 0;
}

/* Publishes the held block, newest first. */
static int tw_replay_flush_held(tw_replay *r)
{
    int rc = 0;
    for (size_t i = r->nheld; i-- > 0;) {
        if (rc == 0)
            rc = tw_replay_publish(r, r->held[i].buf, r->held[i].len);
        else
            free(r->held[i].buf);
    }
    r->nheld = 0;
    return rc;
}

/* Publishes buf now, or holds it for --reorder; takes buf. */
static int tw_replay_emit(tw_replay *r, uint8_t *buf, size_t len, int is_marker)
{
    if (!is_marker && r->drop_every > 0 &&
        ++r->data_emitted % r->drop_every == 0) {
        free(buf); /* lost on the way, as far as the engine can tell */
        r->dropped++;
        return 0;
    }
    if (r->reorder <= 1 || is_marker) {
        if (tw_replay_flush_held(r) != 0) {
            free(buf);
            return -1;
        }
        return tw_replay_publish(r, buf, len);
    }
    r->held[r->nheld].buf = buf;
    r->held[r->nheld].len = len;
    r->nheld++;
    return r->nheld == r->reorder ? tw_replay_flush_held(r) : 0;
}

static int tw_replay_send(tw_replay *r, tw_batch *b);

/* The records of a part of a batch: samples [s0, s0 + ns), events [e0,
 * e0 + ne), tensors [t0, t0 + nt). */
typedef struct tw_replay_range {
    size_t s0, ns, e0, ne, t0, nt;
} tw_replay_range;

/* Sends the records `g` of b as a batch of their own (markers only with
 * `markers`), whose series dictionary holds only the series those samples
 * use. 0, or -1 (logged). */
static int tw_replay_send_part(tw_replay *r, const tw_batch *b,
                               const tw_replay_range *g, int markers)
{
    size_t s0 = g->s0, ns = g->ns;
    tw_batch part = *b; /* a view: nothing of it is freed */
    part.samples = b->samples + s0;
    part.nsamples = ns;
    part.events = b->events + g->e0;
    part.nevents = g->ne;
    part.tensors = b->tensors + g->t0;
    part.ntensors = g->nt;
    if (!markers) {
        part.markers = NULL;
        part.nmarkers = 0;
    }
    part.series = NULL;
    part.nseries = 0;
    uint32_t *map = NULL;
    tw_batch_series *series = NULL;
    tw_sample *samples = NULL;
    if (ns > 0) {
        map = malloc(b->nseries * sizeof(*map));
        series = malloc((ns < b->nseries ? ns : b->nseries) * sizeof(*series));
        samples = malloc(ns * sizeof(*samples));
        if (map == NULL || series == NULL || samples == NULL) {
            free(map);
            free(series);
            free(samples);
            tw_log(TW_LOG_ERROR, "replay: out of memory");
            return -1;
        }
        for (size_t i = 0; i < b->nseries; i++)
            map[i] = UINT32_MAX;
        for (size_t i = 0; i < ns; i++) {
            const tw_sample *in = &b->samples[s0 + i];
            TW_ASSERT(in->series < b->nseries);
            if (map[in->series] == UINT32_MAX) {
                map[in->series] = (uint32_t)part.nseries;
                series[part.nseries++] = b->series[in->series];
            }
            samples[i] = *in;
            samples[i].series = map[in->series];
        }
        part.series = series;
        part.samples = samples;
    }
    int rc = tw_replay_send(r, &part);
    free(map);
    free(series);
    free(samples);
    return rc;
}

/* Encodes and sends b (a view: nothing is freed), splitting it when its
 * encoding is too large. 0, or -1 (logged). */
static int tw_replay_send(tw_replay *r, tw_batch *b)
{
    const char *node = b->node != NULL ? b->node : "";
    uint64_t *seq = tw_replay_seq(r, node);
    if (seq == NULL) {
        tw_log(TW_LOG_ERROR, "replay: out of memory");
        return -1;
    }
    b->seq = *seq;
    uint8_t *buf = NULL;
    size_t len = 0;
    tw_wire_status st = tw_wire_encode(b, &buf, &len);
    size_t records = b->nsamples + b->nevents + b->ntensors;
    int too_big = (st == TW_WIRE_OK && len > TW_REPLAY_MAX_MESSAGE) ||
                  st == TW_WIRE_NO_MEMORY;
    if (too_big && records > 1) {
        free(buf);
        size_t fs = b->nsamples / 2, fe = b->nevents / 2, ft = b->ntensors / 2;
        if (fs + fe + ft == 0) {
            /* at most one record of each kind: the first kind goes first */
            if (b->nsamples > 0)
                fs = b->nsamples;
            else if (b->nevents > 0)
                fe = b->nevents;
            else
                ft = b->ntensors;
        }
        tw_replay_range first = {0, fs, 0, fe, 0, ft};
        tw_replay_range rest = {fs, b->nsamples - fs, fe, b->nevents - fe,
                                ft, b->ntensors - ft};
        if (tw_replay_send_part(r, b, &first, 1) != 0)
            return -1;
        return tw_replay_send_part(r, b, &rest, 0);
    }
    if (too_big && b->nseries > 1) {
        /* one record: perhaps only the dictionary is large */
        free(buf);
        tw_replay_range all = {0, b->nsamples, 0, b->nevents, 0, b->ntensors};
        return tw_replay_send_part(r, b, &all, 1);
    }
    if (st == TW_WIRE_OK && len > TW_REPLAY_MAX_MESSAGE) {
        if (len > TW_REPLAY_MAX_RECORD_MESSAGE) {
            free(buf);
            tw_log(TW_LOG_ERROR,
                   "replay: one record of node '%s' from %s encodes to %zu "
                   "bytes, more than a message may hold (%u)",
                   node, b->file_path != NULL ? b->file_path : "?", len,
                   TW_REPLAY_MAX_RECORD_MESSAGE);
            return -1;
        }
        tw_log(TW_LOG_WARN,
               "replay: one record of node '%s' from %s encodes to %zu "
               "bytes, more than the %u a message normally holds: sent "
               "alone in a message of its own (the broker must accept "
               "messages this large: the embedded broker does, Kafka's "
               "default limit is 1 MB)",
               node, b->file_path != NULL ? b->file_path : "?", len,
               TW_REPLAY_MAX_MESSAGE);
        r->oversized++;
    }
    if (st != TW_WIRE_OK) {
        tw_log(TW_LOG_ERROR,
               "replay: cannot encode a batch of node '%s' "
               "from %s: %s",
               node, b->file_path != NULL ? b->file_path : "?",
               tw_wire_status_name(st));
        return -1;
    }
    if (tw_replay_emit(r, buf, len, b->nmarkers > 0) != 0)
        return -1;
    (*seq)++;
    r->batches++;
    r->markers += b->nmarkers;
    r->samples += b->nsamples;
    r->events += b->nevents;
    r->bytes += len;
    return 0;
}

static int tw_replay_marker(tw_replay *r, tw_marker_kind kind, int64_t time_us,
                            uint32_t interval_ms, int64_t latest_us)
{
    tw_marker m = {.kind = kind,
                   .time_us = time_us,
                   .sampling_interval_ms = interval_ms,
                   .latest_us = latest_us};
    tw_batch b;
    memset(&b, 0, sizeof(b));
    b.job = r->job;
    b.node = TW_REPLAY_MARKER_NODE;
    b.file_ts_us = time_us;
    b.markers = &m;
    b.nmarkers = 1;
    return tw_replay_send(r, &b);
}

/* The agent's sampling interval as the data shows it (see the top). */
static uint32_t tw_replay_infer_interval(const tw_batch *b)
{
    static const uint32_t allowed[] = {100, 200, 500, 1000, 5000, 60000};
    if (b->nsamples < 2)
        return 0;
    uint32_t series = b->samples[0].series;
    double prev = b->samples[0].ts, step = 0;
    for (size_t i = 1; i < b->nsamples; i++) {
        if (b->samples[i].series != series)
            continue;
        double d = b->samples[i].ts - prev;
        prev = b->samples[i].ts;
        if (d > 0 && (step == 0 || d < step))
            step = d;
    }
    if (step == 0)
        return 0;
    uint32_t best = allowed[0];
    double ms = step * 1000.0;
    for (size_t i = 1; i < sizeof(allowed) / sizeof(allowed[0]); i++)
        if (fabs(log((double)allowed[i] / ms)) < fabs(log((double)best / ms)))
            best = allowed[i];
    return best;
}

static int tw_replay_send_start(tw_replay *r, const tw_batch *first_data)
{
    uint32_t interval =
        first_data != NULL ? tw_replay_infer_interval(first_data) : 0;
    int64_t t = r->first_ts_us != 0 ? r->first_ts_us : tw_wall_us();
    r->start_sent = 1;
    return tw_replay_marker(r, TW_MARKER_JOB_START, t, interval, 0);
}

/* The reader's sink: paces, publishes and frees each batch. */
static int tw_replay_sink(void *ud, tw_batch *b)
{
    tw_replay *r = ud;
    int rc = TW_ERR;
    if (r->cur_path != NULL) {
        char *p = tw_arena_strdup(&b->arena, r->cur_path);
        if (p == NULL)
            goto out;
        b->file_path = p;
    }
    if (!r->start_sent &&
        tw_replay_send_start(r, b->nsamples > 0 ? b : NULL) != 0) {
        r->failed = !r->interrupted;
        goto out;
    }
    double lo = 0, hi = 0;
    int has_time = tw_replay_batch_times(b, &lo, &hi);
    if (tw_replay_pace(r, has_time, hi) != 0)
        goto out;
    if (tw_replay_send(r, b) != 0) {
        r->failed = !r->interrupted;
        goto out;
    }
    int64_t hi_us;
    if (has_time && tw_time_s_to_us(hi, &hi_us) && hi_us > r->newest_event_us)
        r->newest_event_us = hi_us;
    /* Stop promptly on a signal even when no pacing sleeps. */
    int sig = tw_signals_wait(&r->sigs, 0);
    if (sig != 0) {
        tw_log(TW_LOG_INFO, "replay: %s received, stopping",
               tw_signals_name(sig));
        r->interrupted = 1;
        goto out;
    }
    rc = TW_OK;
out:
    tw_batch_free(b);
    return rc;
}

static void tw_replay_on_error(void *ud, const char *path, uint64_t line,
                               const char *reason)
{
    tw_replay *r = ud;
    if (r->bad_reported++ >= TW_REPLAY_LOGGED_BAD_LINES) {
        if (r->bad_reported == TW_REPLAY_LOGGED_BAD_LINES + 1)
            tw_log(TW_LOG_WARN, "replay: more bad input; only counted from "
                                "now on");
        return;
    }
    const char *shown = r->cur_path != NULL ? r->cur_path : path;
    if (line == 0)
        tw_log(TW_LOG_WARN, "replay: %s: %s", shown, reason);
    else
        tw_log(TW_LOG_WARN, "replay: %s:%" PRIu64 ": %s", shown,
               line + r->cur_line_offset, reason);
}

static void tw_replay_add_stats(tw_reader_stats *to, const tw_reader_stats *s)
{
    to->files += s->files;
    to->bad_files += s->bad_files;
    to->lines += s->lines;
    to->bad_lines += s->bad_lines;
    to->samples += s->samples;
    to->events += s->events;
    to->bytes += s->bytes;
}

/* Reads a whole file of the listing and publishes it. */
static int tw_replay_read_whole(tw_replay *r, const tw_agent_file *f)
{
    tw_reader_stats st;
    memset(&st, 0, sizeof(st));
    r->cur_path = NULL;
    r->cur_line_offset = 0;
    int rc = tw_folder_read_file(f, r->job, r->trace, tw_replay_sink, r,
                                 tw_replay_on_error, r, &st);
    tw_replay_add_stats(&r->rstats, &st);
    r->files_read++;
    return rc == TW_OK ? 0 : -1;
}

static int tw_replay_tmpdir(tw_replay *r)
{
    if (r->tmpdir != NULL)
        return 0;
    const char *base = getenv("TMPDIR");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof(tmpl), "%s/trainwatch-replay-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(tmpl) == NULL) {
        tw_log(TW_LOG_ERROR, "replay: cannot create a temporary folder %s: %s",
               tmpl, strerror(errno));
        return -1;
    }
    r->tmpdir = strdup(tmpl);
    if (r->tmpdir == NULL) {
        rmdir(tmpl);
        tw_log(TW_LOG_ERROR, "replay: out of memory");
        return -1;
    }
    return 0;
}

/* Reads bytes [offset, EOF) of path into a malloc'd buffer. */
static int tw_replay_read_tail(const char *path, uint64_t offset, char **out,
                               size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size < offset) {
        close(fd);
        return -1;
    }
    size_t cap = (size_t)((uint64_t)sb.st_size - offset) + 1;
    char *buf = malloc(cap);
    if (buf == NULL) {
        close(fd);
        return -1;
    }
    size_t len = 0;
    while (len < cap - 1) {
        ssize_t n = pread(fd, buf + len, cap - 1 - len, (off_t)(offset + len));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    *out = buf;
    *outlen = len;
    return 0;
}

/* Publishes what was appended to a system file since the last time:
 * complete lines only unless `finished`. */
static int tw_replay_system_piece(tw_replay *r, const tw_agent_file *f,
                                  tw_replay_file *st, int finished)
{
    if (finished && st->offset == 0)
        return tw_replay_read_whole(r, f);
    char *buf;
    size_t len;
    if (tw_replay_read_tail(f->path, st->offset, &buf, &len) != 0) {
        tw_log(TW_LOG_WARN, "replay: cannot read %s: %s", f->path,
               strerror(errno));
        return 0; /* perhaps being rotated: try again next poll */
    }
    size_t use = len;
    if (!finished) {
        while (use > 0 && buf[use - 1] != '\n')
            use--;
    }
    if (use == 0) {
        free(buf);
        if (finished) {
            r->rstats.files++;
            r->files_read++;
        }
        return 0;
    }
    if (tw_replay_tmpdir(r) != 0) {
        free(buf);
        return -1;
    }
    const char *slash = strrchr(f->path, '/');
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/%s", r->tmpdir,
             slash != NULL ? slash + 1 : f->path);
    FILE *out = fopen(tmp, "w");
    int bad = out == NULL;
    if (!bad) {
        bad |= fwrite(buf, 1, use, out) != use;
        bad |= fclose(out) != 0;
    }
    uint64_t lines = 0;
    for (size_t i = 0; i < use; i++)
        lines += buf[i] == '\n';
    free(buf);
    if (bad) {
        tw_log(TW_LOG_ERROR, "replay: cannot write %s: %s", tmp,
               strerror(errno));
        unlink(tmp);
        return -1;
    }
    tw_agent_file piece = *f;
    piece.path = tmp;
    tw_reader_stats rs;
    memset(&rs, 0, sizeof(rs));
    r->cur_path = f->path;
    r->cur_line_offset = st->lines;
    int rc = tw_folder_read_file(&piece, r->job, r->trace, tw_replay_sink, r,
                                 tw_replay_on_error, r, &rs);
    r->cur_path = NULL;
    r->cur_line_offset = 0;
    unlink(tmp);
    rs.files = 0; /* counted once, when the file is finished */
    tw_replay_add_stats(&r->rstats, &rs);
    st->offset += use;
    st->lines += lines;
    if (finished) {
        r->rstats.files++;
        r->files_read++;
    }
    return rc == TW_OK ? 0 : -1;
}

static tw_replay_file *tw_replay_file_state(tw_replay *r, const char *path)
{
    uint32_t idx;
    size_t len = strlen(path);
    if (tw_strmap_get(&r->file_index, path, len, &idx))
        return &r->files[idx];
    if (r->nfiles == r->capfiles) {
        size_t cap = r->capfiles == 0 ? 64 : r->capfiles * 2;
        tw_replay_file *nf = realloc(r->files, cap * sizeof(*nf));
        if (nf == NULL)
            return NULL;
        r->files = nf;
        r->capfiles = cap;
    }
    if (tw_strmap_put(&r->file_index, path, len, (uint32_t)r->nfiles) != TW_OK)
        return NULL;
    r->files[r->nfiles] =
        (tw_replay_file){.done = 0, .offset = 0, .lines = 0, .last_size = -1};
    return &r->files[r->nfiles++];
}

/* One pass over a listing. `final`: publish everything (a one-shot replay
 * or the job has ended). */
static int tw_replay_pass(tw_replay *r, const tw_folder *folder, int final)
{
    /* Newest system file per node: older ones are finished. */
    tw_strmap newest;
    tw_strmap_init(&newest);
    int64_t *newest_ts = calloc(folder->nfiles + 1, sizeof(*newest_ts));
    int rc = -1;
    if (newest_ts == NULL)
        goto out;
    size_t nnodes = 0;
    for (size_t i = 0; i < folder->nfiles; i++) {
        const tw_agent_file *f = &folder->files[i];
        if (f->kind != TW_FILE_SYSTEM)
            continue;
        const char *node = f->node != NULL ? f->node : "";
        uint32_t k;
        if (!tw_strmap_get(&newest, node, strlen(node), &k)) {
            k = (uint32_t)nnodes++;
            if (tw_strmap_put(&newest, node, strlen(node), k) != TW_OK)
                goto out;
            newest_ts[k] = f->file_ts_us;
        } else if (f->file_ts_us > newest_ts[k]) {
            newest_ts[k] = f->file_ts_us;
        }
    }
    for (size_t i = 0; i < folder->nfiles; i++) {
        const tw_agent_file *f = &folder->files[i];
        tw_replay_file *st = tw_replay_file_state(r, f->path);
        if (st == NULL) {
            tw_log(TW_LOG_ERROR, "replay: out of memory");
            goto out;
        }
        if (st->done)
            continue;
        if (f->kind == TW_FILE_SYSTEM) {
            const char *node = f->node != NULL ? f->node : "";
            uint32_t k = 0;
            tw_strmap_get(&newest, node, strlen(node), &k);
            int finished = final || f->file_ts_us < newest_ts[k];
            if (tw_replay_system_piece(r, f, st, finished) != 0)
                goto out;
            if (finished)
                st->done = 1;
        } else {
            struct stat sb;
            if (!final) {
                if (stat(f->path, &sb) != 0)
                    continue;
                int stable = (int64_t)sb.st_size == st->last_size;
                st->last_size = (int64_t)sb.st_size;
                if (!stable)
                    continue;
            }
            st->done = 1;
            if (tw_replay_read_whole(r, f) != 0)
                goto out;
        }
    }
    rc = 0;
out:
    free(newest_ts);
    tw_strmap_free(&newest);
    return rc;
}

static int64_t tw_replay_first_ts(const tw_folder *f)
{
    int64_t t = f->first_system_ts_us;
    if (f->first_framework_ts_us != 0 &&
        (t == 0 || f->first_framework_ts_us < t))
        t = f->first_framework_ts_us;
    return t;
}

/* L as offline evaluation computes it (cmd_eval.c). */
static int64_t tw_replay_latest_ts(const tw_folder *f)
{
    int64_t t = f->latest_system_ts_us;
    if (t == 0 ||
        (f->latest_framework_ts_us != 0 && f->latest_framework_ts_us < t))
        t = f->latest_framework_ts_us;
    return t;
}

/* A legacy debug-output folder's batch: the job starts at its first
 * tensor's time, as the hook's would. */
static int tw_replay_debug_sink(void *ud, tw_batch *b)
{
    tw_replay *r = ud;
    if (r->first_ts_us == 0)
        for (size_t i = 0; i < b->ntensors; i++)
            if (r->first_ts_us == 0 || b->tensors[i].wall_us < r->first_ts_us)
                r->first_ts_us = b->tensors[i].wall_us;
    return tw_replay_sink(r, b);
}

static void tw_replay_debug_error(void *ud, const char *msg)
{
    tw_replay *r = ud;
    r->rstats.bad_lines++;
    if (!r->quiet)
        tw_log(TW_LOG_WARN, "replay: bad input: %s", msg);
}

/* A legacy debug-output folder (debug_batches.h): its tensors as the
 * hook sends them, one batch per (worker, step), paced by their times.
 * Read once (no --follow: the reference's hook finalizes a step's file
 * only at the next step). */
static int tw_replay_debug_folder(tw_replay *r)
{
    char err[512];
    tw_debug_summary sum;
    if (!r->quiet)
        tw_log(TW_LOG_INFO,
               "replay: %s: a legacy debug-output folder "
               "(tensors)%s",
               r->dir, r->follow ? "; --follow does not apply to it" : "");
    int rc = tw_debug_folder_batches(r->dir, r->job, tw_replay_debug_sink, r,
                                     tw_replay_debug_error, r, &sum, err,
                                     sizeof(err));
    r->rstats.files += sum.counts.index_files;
    r->rstats.bad_files += sum.counts.bad_files;
    r->latest_ts_us = sum.last_us;
    if (rc != TW_OK) {
        if (r->interrupted && !r->failed)
            return 0;
        tw_log(TW_LOG_ERROR, "replay: %s", err);
        return -1;
    }
    return 0;
}

static int tw_replay_folder(tw_replay *r)
{
    char err[512];
    for (int pass = 0;; pass++) {
        tw_folder *folder = NULL;
        if (tw_folder_list(r->dir, &folder, err, sizeof(err)) != 0) {
            tw_log(TW_LOG_ERROR, "replay: %s", err);
            return -1;
        }
        if (r->has_trace_start)
            tw_folder_anchor_traces(folder, r->trace_start_us);
        if (r->first_ts_us == 0)
            r->first_ts_us = tw_replay_first_ts(folder);
        int final = !r->follow || folder->job_finished;
        r->latest_ts_us = tw_replay_latest_ts(folder);
        if (pass == 0 && !r->quiet)
            tw_log(TW_LOG_INFO, "replay: %s: %zu file(s)%s", r->dir,
                   folder->nfiles,
                   r->follow ? (folder->job_finished ? ", job already ended"
                                                     : ", following")
                             : "");
        /* Folders not walked: named at the start, and again in follow
         * mode whenever the set changes (one became readable, ...). */
        if (pass == 0 || folder->unreadable_dirs != r->unreadable_dirs ||
            folder->skipped_dirs != r->skipped_dirs) {
            for (size_t i = 0; i < folder->nproblems; i++)
                tw_log(TW_LOG_WARN, "replay: folder not read: %s: %s",
                       folder->problems[i].path, folder->problems[i].reason);
        }
        r->unreadable_dirs = folder->unreadable_dirs;
        r->skipped_dirs = folder->skipped_dirs;
        if (folder->nfiles == 0 && tw_debug_folder_detect(r->dir)) {
            tw_folder_free(folder);
            return tw_replay_debug_folder(r);
        }
        if (pass == 0 && folder->nfiles == 0 && !r->follow)
            tw_log(TW_LOG_WARN,
                   "replay: %s: no agent files: the job is sent with no data",
                   r->dir);
        int rc = tw_replay_pass(r, folder, final);
        tw_folder_free(folder);
        if (rc != 0)
            return r->interrupted && !r->failed ? 0 : -1;
        if (final)
            return 0;
        int64_t next = tw_mono_us() + TW_REPLAY_POLL_MS * 1000;
        if (tw_replay_sleep_until(r, next) != 0)
            return 0;
    }
}

static void tw_replay_rmtmp(tw_replay *r)
{
    if (r->tmpdir == NULL)
        return;
    if (rmdir(r->tmpdir) != 0)
        tw_log(TW_LOG_WARN, "replay: cannot remove %s: %s", r->tmpdir,
               strerror(errno));
    free(r->tmpdir);
    r->tmpdir = NULL;
}

int tw_replay_open(tw_replay *r, const char *brokers, const char *const *props,
                   size_t nprops, const char *group, uint64_t max_lag,
                   char *err, size_t errlen)
{
    tw_strmap_init(&r->seq_index);
    tw_strmap_init(&r->file_index);
    r->start_mono_us = tw_mono_us();
    if (tw_producer_new(brokers, props, nprops, &r->producer, err, errlen) != 0)
        return -1;
    r->trace = tw_trace_state_new();
    if (r->reorder > 1)
        r->held = calloc(r->reorder, sizeof(*r->held));
    if (r->trace == NULL || (r->reorder > 1 && r->held == NULL)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (group == NULL)
        return 0;
    tw_replay_flow_config fc = {.brokers = brokers,
                                .props = props + 1,
                                .nprops = nprops - 1,
                                .group = group,
                                .topic = r->topic,
                                .max_bytes = max_lag,
                                .max_messages = TW_REPLAY_MAX_LAG_MESSAGES};
    if (tw_replay_flow_new(&fc, &r->flow, err, errlen) != 0)
        return -1;
    tw_producer_set_delivery_cb(r->producer, tw_replay_flow_on_delivery,
                                r->flow);
    if (!r->quiet)
        tw_log(TW_LOG_INFO,
               "replay: flow control: waiting whenever consumer group "
               "'%s' has more than %.2f MB of this replay unread "
               "(--group none: no flow control)",
               group, (double)max_lag / 1e6);
    return 0;
}

int tw_replay_run(tw_replay *r)
{
    char err[512];
    if (tw_replay_folder(r) != 0 || tw_replay_flush_held(r) != 0)
        return -1;
    if (!r->interrupted) {
        if (!r->start_sent && tw_replay_send_start(r, NULL) != 0 &&
            !r->interrupted)
            return -1;
        if (!r->interrupted && r->end_marker &&
            tw_replay_marker(r, TW_MARKER_JOB_END,
                             r->newest_event_us != 0 ? r->newest_event_us
                                                     : tw_wall_us(),
                             0, r->latest_ts_us) != 0 &&
            !r->interrupted)
            return -1;
    }
    if (tw_producer_flush(r->producer, TW_REPLAY_FLUSH_MS, err, sizeof(err)) !=
        0) {
        tw_log(TW_LOG_ERROR, "replay: %s", err);
        return -1;
    }
    return 0;
}

void tw_replay_summary(const tw_replay *r, FILE *out)
{
    double secs = (double)(tw_mono_us() - r->start_mono_us) / 1e6;
    tw_producer_stats ps;
    memset(&ps, 0, sizeof(ps));
    if (r->producer != NULL)
        tw_producer_get_stats(r->producer, &ps);
    tw_replay_flow_stats fs;
    memset(&fs, 0, sizeof(fs));
    if (r->flow != NULL)
        tw_replay_flow_get_stats(r->flow, &fs);
    fprintf(out,
            "replay: job=%s batches=%" PRIu64 " markers=%" PRIu64
            " samples=%" PRIu64 " events=%" PRIu64 " files=%" PRIu64
            " bad_lines=%" PRIu64 " mb=%.3f seconds=%.2f delivered=%" PRIu64
            " failed=%" PRIu64 " duplicates=%" PRIu64 " dropped=%" PRIu64
            " oversized=%" PRIu64 " flow_waits=%" PRIu64 " flow_wait_s=%.2f"
            " unreadable_dirs=%" PRIu64 " skipped_dirs=%" PRIu64 "%s\n",
            r->job, r->batches, r->markers, r->samples, r->events,
            r->files_read, r->rstats.bad_lines, (double)r->bytes / 1e6, secs,
            ps.delivered, ps.failed, r->duplicates, r->dropped, r->oversized,
            fs.waits, (double)fs.waited_us / 1e6, r->unreadable_dirs,
            r->skipped_dirs, r->interrupted ? " interrupted" : "");
    fflush(out);
}

void tw_replay_close(tw_replay *r)
{
    tw_replay_rmtmp(r);
    for (size_t i = 0; i < r->nheld; i++)
        free(r->held[i].buf);
    free(r->held);
    /* its purge reports into the flow, freed after it */
    tw_producer_free(r->producer);
    tw_replay_flow_free(r->flow);
    tw_trace_state_free(r->trace);
    tw_strmap_free(&r->seq_index);
    tw_strmap_free(&r->file_index);
    free(r->seqs);
    free(r->files);
}
