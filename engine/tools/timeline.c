/* timeline.c - the merged Chrome trace of a folder (timeline.h). */
#include "timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "folder_pass.h"
#include "grow.h"
#include "json_writer.h"
#include "sorted_spill.h"
#include "strmap.h"

/* A process track: a framework node or a system node. */
typedef struct track {
    const char *node; /* owned by the track map */
    int system;
    uint32_t nthreads; /* framework: phases seen (tid = 1 + index) */
} track;

/* One input file's counts of what was written. */
typedef struct file_count {
    const char *path; /* owned by the file map */
    uint64_t events, samples;
} file_count;

typedef struct timeline_ctx {
    const tw_timeline_opts *o;
    int has_sel;
    int64_t from_us, to_us;
    tw_json *j; /* renders one record at a time */
    tw_spill *spill;
    tw_strmap track_map; /* "f:<node>" / "s:<node>" -> tracks index */
    track *tracks;
    size_t ntracks, cap_tracks;
    tw_strmap thread_map; /* "<track>\x1f<phase>" -> tid */
    tw_strmap file_map;   /* path -> files index */
    file_count *files;
    size_t nfiles, cap_files;
    tw_strmap metric_ok; /* the --system-metrics tokens */
    char err[512];
    int failed;
} timeline_ctx;

static int track_of(timeline_ctx *c, const char *node, int system,
                    uint32_t *pid)
{
    char key[600];
    int len = snprintf(key, sizeof(key), "%c:%s", system ? 's' : 'f', node);
    if (len < 0 || (size_t)len >= sizeof(key))
        len = (int)sizeof(key) - 1;
    uint32_t i;
    if (tw_strmap_get(&c->track_map, key, (size_t)len, &i)) {
        *pid = i + 1;
        return TW_OK;
    }
    if (tw_grow((void **)&c->tracks, &c->cap_tracks, c->ntracks + 1,
                sizeof(*c->tracks), 16) != TW_OK ||
        tw_strmap_put(&c->track_map, key, (size_t)len, (uint32_t)c->ntracks) !=
            TW_OK)
        return TW_ERR;
    c->tracks[c->ntracks] =
        (track){tw_strmap_key(&c->track_map, key, (size_t)len) + 2, system, 0};
    *pid = (uint32_t)++c->ntracks;
    return TW_OK;
}

static int thread_of(timeline_ctx *c, uint32_t pid, const char *phase,
                     uint32_t *tid)
{
    char key[600];
    int len = snprintf(key, sizeof(key), "%u\x1f%s", pid, phase);
    if (len < 0 || (size_t)len >= sizeof(key))
        len = (int)sizeof(key) - 1;
    if (tw_strmap_get(&c->thread_map, key, (size_t)len, tid))
        return TW_OK;
    *tid = ++c->tracks[pid - 1].nthreads;
    return tw_strmap_put(&c->thread_map, key, (size_t)len, *tid);
}

static int file_of(timeline_ctx *c, const char *path, uint32_t *idx)
{
    if (path == NULL)
        path = "";
    size_t len = strlen(path);
    if (tw_strmap_get(&c->file_map, path, len, idx))
        return TW_OK;
    if (tw_grow((void **)&c->files, &c->cap_files, c->nfiles + 1,
                sizeof(*c->files), 64) != TW_OK ||
        tw_strmap_put(&c->file_map, path, len, (uint32_t)c->nfiles) != TW_OK)
        return TW_ERR;
    c->files[c->nfiles] =
        (file_count){tw_strmap_key(&c->file_map, path, len), 0, 0};
    *idx = (uint32_t)c->nfiles++;
    return TW_OK;
}

static int spill_rendered(timeline_ctx *c, int64_t key)
{
    if (tw_json_failed(c->j)) {
        snprintf(c->err, sizeof(c->err), "out of memory rendering an event");
        return TW_ERR;
    }
    return tw_spill_add(c->spill, key, tw_json_str(c->j), tw_json_len(c->j),
                        c->err, sizeof(c->err));
}

static void render_args(tw_json *j, const tw_fw_event *ev, uint32_t file)
{
    tw_json_key(j, "args");
    tw_json_object_begin(j);
    for (uint32_t i = 0; i < ev->nargs; i++) {
        tw_json_key(j, ev->args[i].key);
        if (ev->args[i].kind == TW_ARG_STRING)
            tw_json_string(j, ev->args[i].value);
        else
            tw_json_raw(j, ev->args[i].value);
    }
    /* which input file: otherData.files[tw_file] */
    tw_json_key(j, "tw_file");
    tw_json_int(j, file);
    tw_json_object_end(j);
}

static int add_events(timeline_ctx *c, const tw_batch *b, uint32_t file)
{
    for (size_t i = 0; i < b->nevents; i++) {
        const tw_fw_event *ev = &b->events[i];
        if (c->has_sel && (ev->end_us < c->from_us || ev->start_us > c->to_us))
            continue;
        uint32_t pid, tid;
        const char *phase = ev->phase ? ev->phase : "Unknown";
        if (track_of(c, ev->node ? ev->node : "", 0, &pid) != TW_OK ||
            thread_of(c, pid, phase, &tid) != TW_OK) {
            snprintf(c->err, sizeof(c->err), "out of memory (tracks)");
            return TW_ERR;
        }
        tw_json_reset(c->j);
        tw_json_object_begin(c->j);
        tw_json_key(c->j, "name");
        tw_json_string(c->j, ev->name ? ev->name : "");
        tw_json_key(c->j, "cat");
        tw_json_string(c->j, phase);
        tw_json_key(c->j, "ph");
        tw_json_string(c->j, "X");
        tw_json_key(c->j, "ts");
        tw_json_int(c->j, ev->start_us);
        tw_json_key(c->j, "dur");
        tw_json_int(c->j, ev->end_us - ev->start_us);
        tw_json_key(c->j, "pid");
        tw_json_int(c->j, pid);
        tw_json_key(c->j, "tid");
        tw_json_int(c->j, tid);
        render_args(c->j, ev, file);
        tw_json_object_end(c->j);
        if (spill_rendered(c, ev->start_us) != TW_OK)
            return TW_ERR;
        c->files[file].events++;
    }
    return TW_OK;
}

static int metric_selected(const timeline_ctx *c, const tw_batch_series *s)
{
    if (c->o->system_metrics == NULL)
        return 1;
    const char *f[3] = {s->type, s->name, s->dimension};
    uint32_t v;
    for (size_t i = 0; i < 3; i++)
        if (f[i] != NULL && *f[i] != '\0' &&
            tw_strmap_get(&c->metric_ok, f[i], strlen(f[i]), &v))
            return 1;
    return 0;
}

static int add_samples(timeline_ctx *c, const tw_batch *b, uint32_t file)
{
    uint32_t pid = 0;
    for (size_t i = 0; i < b->nsamples; i++) {
        const tw_sample *s = &b->samples[i];
        if (s->series >= b->nseries)
            continue;
        const tw_batch_series *se = &b->series[s->series];
        int64_t ts = llround(s->ts * 1e6);
        if ((c->has_sel && (ts < c->from_us || ts > c->to_us)) ||
            !metric_selected(c, se))
            continue;
        if (pid == 0 && track_of(c, b->node ? b->node : "", 1, &pid) != TW_OK) {
            snprintf(c->err, sizeof(c->err), "out of memory (tracks)");
            return TW_ERR;
        }
        /* one counter per series: "gpu0 GPUUtilization", "IOPS" */
        char name[512];
        const char *nm = se->name ? se->name : "";
        const char *dim = se->dimension ? se->dimension : "";
        if (*dim != '\0' && strcmp(dim, nm) != 0)
            snprintf(name, sizeof(name), "%s %s", nm, dim);
        else
            snprintf(name, sizeof(name), "%s", nm);
        tw_json_reset(c->j);
        tw_json_object_begin(c->j);
        tw_json_key(c->j, "name");
        tw_json_string(c->j, name);
        tw_json_key(c->j, "cat");
        tw_json_string(c->j, se->type ? se->type : "");
        tw_json_key(c->j, "ph");
        tw_json_string(c->j, "C");
        tw_json_key(c->j, "ts");
        tw_json_int(c->j, ts);
        tw_json_key(c->j, "pid");
        tw_json_int(c->j, pid);
        tw_json_key(c->j, "args");
        tw_json_object_begin(c->j);
        tw_json_key(c->j, "value");
        tw_json_double(c->j, s->value);
        tw_json_object_end(c->j);
        tw_json_object_end(c->j);
        if (spill_rendered(c, ts) != TW_OK)
            return TW_ERR;
        c->files[file].samples++;
    }
    return TW_OK;
}

static int sink(void *ud, tw_batch *b)
{
    timeline_ctx *c = ud;
    uint32_t file;
    int rc = file_of(c, b->file_path, &file);
    if (rc != TW_OK)
        snprintf(c->err, sizeof(c->err), "out of memory (files)");
    if (rc == TW_OK)
        rc = add_events(c, b, file);
    if (rc == TW_OK)
        rc = add_samples(c, b, file);
    tw_batch_free(b);
    if (rc != TW_OK)
        c->failed = 1;
    return rc;
}

/* ---- the step range -------------------------------------------------------
 */

typedef struct step_span {
    const tw_timeline_opts *o;
    int found;
    int64_t from_us, to_us;
} step_span;

static int sink_steps(void *ud, tw_batch *b)
{
    step_span *s = ud;
    for (size_t i = 0; i < b->nevents; i++) {
        const tw_fw_event *ev = &b->events[i];
        if (ev->mode != TW_MODE_TRAIN && ev->mode != TW_MODE_GLOBAL)
            continue;
        for (uint32_t a = 0; a < ev->nargs; a++) {
            if (strcmp(ev->args[a].key, "step_num") != 0)
                continue;
            char *end;
            long long step = strtoll(ev->args[a].value, &end, 10);
            if (end == ev->args[a].value || *end != '\0' ||
                step < s->o->step_a || step > s->o->step_b)
                break;
            if (!s->found || ev->start_us < s->from_us)
                s->from_us = ev->start_us;
            if (!s->found || ev->end_us > s->to_us)
                s->to_us = ev->end_us;
            s->found = 1;
            break;
        }
    }
    tw_batch_free(b);
    return TW_OK;
}

/* ---- output ----------------------------------------------------------------
 */

typedef struct writer {
    FILE *out;
    uint64_t n;
} writer;

static int write_record(void *ud, int64_t key, const char *bytes, size_t len)
{
    (void)key;
    writer *w = ud;
    if ((w->n++ > 0 && fputs(",\n", w->out) < 0) ||
        fwrite(bytes, 1, len, w->out) != len)
        return TW_ERR;
    return TW_OK;
}

/* "algo-1-0" -> "algo-1 rank 0"; other names as they are. */
static void track_label(const track *t, char *buf, size_t len)
{
    const char *dash = strrchr(t->node, '-');
    if (t->system) {
        snprintf(buf, len, "%s system metrics", t->node);
    } else if (strncmp(t->node, "algo-", 5) == 0 && dash != NULL &&
               dash > t->node + 5 && dash[1] != '\0' &&
               strspn(dash + 1, "0123456789") == strlen(dash + 1)) {
        snprintf(buf, len, "%.*s rank %s", (int)(dash - t->node), t->node,
                 dash + 1);
    } else {
        snprintf(buf, len, "%s", t->node);
    }
}

static void meta(tw_json *j, const char *name, uint32_t pid, uint32_t tid,
                 const char *key, const char *sval, int64_t ival)
{
    tw_json_object_begin(j);
    tw_json_key(j, "name");
    tw_json_string(j, name);
    tw_json_key(j, "ph");
    tw_json_string(j, "M");
    tw_json_key(j, "pid");
    tw_json_int(j, pid);
    if (tid > 0) {
        tw_json_key(j, "tid");
        tw_json_int(j, tid);
    }
    tw_json_key(j, "args");
    tw_json_object_begin(j);
    tw_json_key(j, key);
    if (sval != NULL)
        tw_json_string(j, sval);
    else
        tw_json_int(j, ival);
    tw_json_object_end(j);
    tw_json_object_end(j);
}

static int cmp_track(const void *a, const void *b, void *ud)
{
    const track *t = ud;
    const track *x = &t[*(const size_t *)a], *y = &t[*(const size_t *)b];
    int r = strcmp(x->node, y->node);
    return r != 0 ? r : x->system - y->system;
}

/* Process and thread names (metadata events: no time, so after the merged
 * events), then the end of the array and otherData. Processes are shown
 * by node name, so a host's system metrics sit beside its ranks. */
static int write_tail(timeline_ctx *c, writer *w, const char *dir)
{
    tw_json *j = c->j;
    size_t *order = malloc((c->ntracks + 1) * sizeof(*order));
    size_t *rank = malloc((c->ntracks + 1) * sizeof(*rank));
    if (order == NULL || rank == NULL) {
        free(order);
        free(rank);
        return TW_ERR;
    }
    for (size_t i = 0; i < c->ntracks; i++)
        order[i] = i;
    if (c->ntracks > 1)
        qsort_r(order, c->ntracks, sizeof(*order), cmp_track, c->tracks);
    for (size_t k = 0; k < c->ntracks; k++)
        rank[order[k]] = k;
    free(order);
    int rc = TW_OK;
    for (size_t i = 0; i < c->ntracks && rc == TW_OK; i++) {
        const track *t = &c->tracks[i];
        uint32_t pid = (uint32_t)i + 1;
        char label[600];
        track_label(t, label, sizeof(label));
        tw_json_reset(j);
        meta(j, "process_name", pid, 0, "name", label, 0);
        rc = write_record(w, 0, tw_json_str(j), tw_json_len(j));
        tw_json_reset(j);
        meta(j, "process_sort_index", pid, 0, "sort_index", NULL,
             (int64_t)rank[i]);
        if (rc == TW_OK)
            rc = write_record(w, 0, tw_json_str(j), tw_json_len(j));
    }
    free(rank);
    if (rc != TW_OK)
        return TW_ERR;
    /* thread names: the keys of thread_map are "<pid>\x1f<phase>" */
    for (size_t s = 0; s < c->thread_map.cap; s++) {
        const tw_strmap_slot *sl = &c->thread_map.slots[s];
        if (sl->key == NULL)
            continue;
        char *end;
        unsigned long pid = strtoul(sl->key, &end, 10);
        tw_json_reset(j);
        meta(j, "thread_name", (uint32_t)pid, sl->value, "name", end + 1, 0);
        if (write_record(w, 0, tw_json_str(j), tw_json_len(j)) != TW_OK)
            return TW_ERR;
    }
    tw_json_reset(j);
    tw_json_object_begin(j);
    tw_json_key(j, "source");
    tw_json_string(j, dir);
    tw_json_key(j, "generator");
    tw_json_string(j, "trainwatch timeline " TW_VERSION);
    tw_json_key(j, "time_unit");
    tw_json_string(j, "us since the epoch");
    tw_json_key(j, "files");
    tw_json_array_begin(j);
    for (size_t i = 0; i < c->nfiles; i++) {
        tw_json_object_begin(j);
        tw_json_key(j, "path");
        tw_json_string(j, c->files[i].path);
        tw_json_key(j, "events");
        tw_json_int(j, (int64_t)c->files[i].events);
        tw_json_key(j, "samples");
        tw_json_int(j, (int64_t)c->files[i].samples);
        tw_json_object_end(j);
    }
    tw_json_array_end(j);
    tw_json_object_end(j);
    if (tw_json_failed(j) ||
        fprintf(w->out,
                "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": "
                "%s}\n",
                tw_json_str(j)) < 0)
        return TW_ERR;
    return TW_OK;
}

static int parse_metrics(timeline_ctx *c)
{
    const char *p = c->o->system_metrics;
    while (p != NULL && *p != '\0') {
        size_t n = strcspn(p, ",");
        if (n > 0 && tw_strmap_put(&c->metric_ok, p, n, 1) != TW_OK)
            return TW_ERR;
        p += n;
        if (*p == ',')
            p++;
    }
    return TW_OK;
}

int tw_timeline_write(const char *dir, const tw_timeline_opts *o, FILE *out,
                      tw_timeline_counts *counts, char *err, size_t errlen)
{
    memset(counts, 0, sizeof(*counts));
    tw_folder *folder = NULL;
    if (tw_folder_list(dir, &folder, err, errlen) != TW_OK)
        return TW_ERR;
    for (size_t i = 0; i < folder->nproblems; i++)
        fprintf(stderr, "timeline: WARN folder not read: %s: %s\n",
                folder->problems[i].path, folder->problems[i].reason);
    timeline_ctx c;
    memset(&c, 0, sizeof(c));
    c.o = o;
    tw_strmap_init(&c.track_map);
    tw_strmap_init(&c.thread_map);
    tw_strmap_init(&c.file_map);
    tw_strmap_init(&c.metric_ok);
    c.j = tw_json_new();
    c.spill = tw_spill_new(o->buffer_bytes, o->tmpdir);
    tw_reader_stats rs;
    memset(&rs, 0, sizeof(rs));
    int rc = TW_ERR;
    if (c.j == NULL || c.spill == NULL || parse_metrics(&c) != TW_OK) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    tw_json_set_compact(c.j, 1);
    tw_json_set_strict(c.j, 1);
    if (o->has_time) {
        c.has_sel = 1;
        c.from_us = o->from_us;
        c.to_us = o->to_us;
    }
    if (o->has_steps) {
        step_span sp = {o, 0, 0, 0};
        if (tw_folder_pass(folder, TW_PASS_FRAMEWORK, "timeline", 1, sink_steps,
                           &sp, NULL, err, errlen) != TW_OK)
            goto out;
        if (!sp.found) {
            snprintf(err, errlen,
                     "no TRAIN or GLOBAL step event with a step number in "
                     "%lld:%lld",
                     (long long)o->step_a, (long long)o->step_b);
            goto out;
        }
        if (!c.has_sel || sp.from_us > c.from_us)
            c.from_us = sp.from_us;
        if (!c.has_sel || sp.to_us < c.to_us)
            c.to_us = sp.to_us;
        c.has_sel = 1;
    }
    unsigned kinds =
        TW_PASS_FRAMEWORK | (o->framework_only ? 0 : TW_PASS_SYSTEM);
    if (tw_folder_pass(folder, kinds, "timeline", o->quiet, sink, &c, &rs, err,
                       errlen) != TW_OK) {
        if (c.failed)
            snprintf(err, errlen, "%s", c.err);
        goto out;
    }
    writer w = {out, 0};
    if (fputs("{\"traceEvents\": [\n", out) < 0 ||
        tw_spill_finish(c.spill, write_record, &w, err, errlen) != TW_OK ||
        write_tail(&c, &w, dir) != TW_OK || fflush(out) != 0) {
        if (err[0] == '\0')
            snprintf(err, errlen, "writing the output failed");
        goto out;
    }
    counts->files = rs.files;
    counts->bad_lines = rs.bad_lines;
    for (size_t i = 0; i < c.nfiles; i++) {
        counts->events += c.files[i].events;
        counts->samples += c.files[i].samples;
    }
    counts->from_us = c.has_sel ? c.from_us : 0;
    counts->to_us = c.has_sel ? c.to_us : 0;
    counts->runs = tw_spill_runs(c.spill);
    rc = TW_OK;
out:
    tw_spill_free(c.spill);
    tw_json_free(c.j);
    tw_strmap_free(&c.track_map);
    tw_strmap_free(&c.thread_map);
    tw_strmap_free(&c.file_map);
    tw_strmap_free(&c.metric_ok);
    free(c.tracks);
    free(c.files);
    tw_folder_free(folder);
    return rc;
}
