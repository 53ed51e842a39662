/* test_job_state.c - exact checkpoint/restore of a whole job (job.h,
 * job_state.c): synth jobs streamed through the real rules uninterrupted
 * and with save -> free -> new -> restore at seeded split points must end
 * byte-identical; only-dirty saves, corrupt/truncated parts, configuration
 * mismatches and out-of-order/redelivered batches across a checkpoint.
 *
 * Streams: a synth folder (tw_synth_write) read by the agent-file reader in
 * feed order, each batch given a per-node sequence number as replay does,
 * and kept wire-encoded so every run decodes its own copy (the job takes
 * and rewrites the batches it ingests). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "checkpoint.h" /* tw_checkpoint_part_cmp: the restore order */
#include "job.h"
#include "job_internal.h"
#include "json_writer.h"
#include "log.h"
#include "reader.h"
#include "sample_pack.h"
#include "synth.h"
#include "wire.h"

/* ---- streams ------------------------------------------------------------ */

typedef struct blob {
    uint8_t *data;
    size_t len;
    int64_t feed_key_us; /* the file's feed key (external-watermark runs) */
} blob;

typedef struct stream {
    blob *b;
    size_t n, cap;
    int64_t first_us, latest_us; /* F and L from the file names */
    /* sequence numbers per node, as replay assigns them */
    char nodes[64][64];
    uint64_t next_seq[64];
    size_t nnodes;
    int64_t cur_feed_key;
} stream;

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static int collect(void *ud, tw_batch *b)
{
    stream *s = ud;
    const char *node = b->node ? b->node : "";
    size_t i;
    for (i = 0; i < s->nnodes; i++)
        if (strcmp(s->nodes[i], node) == 0)
            break;
    if (i == s->nnodes) {
        assert_true(s->nnodes < 64);
        snprintf(s->nodes[i], sizeof(s->nodes[i]), "%s", node);
        s->next_seq[i] = 1;
        s->nnodes++;
    }
    b->seq = s->next_seq[i]++;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->b = realloc(s->b, s->cap * sizeof(blob));
        assert_non_null(s->b);
    }
    blob *x = &s->b[s->n++];
    x->feed_key_us = s->cur_feed_key;
    tw_wire_status st = tw_wire_encode(b, &x->data, &x->len);
    if (st != TW_WIRE_OK)
        fail_msg("encode: %s", tw_wire_status_name(st));
    tw_batch_free(b);
    return TW_OK;
}

/* cores 0 = the preset's; framework 0 = system metrics only */
static void stream_load(stream *s, const char *preset, uint32_t nodes,
                        uint32_t cores, int framework, double duration_s,
                        uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    char dir[] = "/tmp/tw_jobstate_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[sizeof(dir) + 8];
    snprintf(out, sizeof(out), "%s/out", dir);
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = out;
    o.preset = preset;
    o.nodes = nodes;
    if (cores != 0)
        o.cores = cores;
    o.framework = framework;
    o.duration_s = duration_s;
    o.seed = seed;
    char err[512];
    if (tw_synth_opts_resolve(&o, err, sizeof(err)) != 0 ||
        tw_synth_write(&o, NULL, err, sizeof(err)) != 0)
        fail_msg("synth %s: %s", preset, err);
    tw_folder *f;
    if (tw_folder_list(out, &f, err, sizeof(err)) != TW_OK)
        fail_msg("list: %s", err);
    tw_trace_state *ts = tw_trace_state_new();
    assert_non_null(ts);
    for (size_t i = 0; i < f->nfiles; i++) {
        s->cur_feed_key = f->files[i].feed_key_us;
        assert_int_equal(tw_folder_read_file(&f->files[i], "job", ts, collect,
                                             s, NULL, NULL, NULL),
                         TW_OK);
    }
    s->first_us = f->first_system_ts_us;
    if (f->first_framework_ts_us != 0 &&
        (s->first_us == 0 || f->first_framework_ts_us < s->first_us))
        s->first_us = f->first_framework_ts_us;
    s->latest_us = f->latest_system_ts_us;
    if (s->latest_us == 0 || (f->latest_framework_ts_us != 0 &&
                              f->latest_framework_ts_us < s->latest_us))
        s->latest_us = f->latest_framework_ts_us;
    tw_trace_state_free(ts);
    tw_folder_free(f);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    assert_true(s->n > 10);
}

static void stream_free(stream *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->b[i].data);
    free(s->b);
}

static tw_batch *decode(const blob *x)
{
    tw_batch *b = NULL;
    char err[256];
    if (tw_wire_decode(x->data, x->len, &b, err, sizeof(err)) != TW_WIRE_OK)
        fail_msg("decode: %s", err);
    return b;
}

/* ---- jobs --------------------------------------------------------------- */

typedef struct setup {
    tw_registry *reg;
    tw_job_config cfg;
    const tw_rule_spec *specs;
    size_t nspecs;
    int eval_mode; /* external watermark driven by feed keys, F and L set */
    int segmented; /* tw_job_set_segmented, as the daemon's jobs */
    size_t slice_bytes;  /* segmented: tw_job_set_slice_bytes */
    size_t target_bytes; /* segmented: tw_job_set_checkpoint_target */
    size_t save_every;   /* save after every n-th batch (0, 1: each) */
    /* set when a restore ran scans again / found a dropped snapshot's
     * slices (deferred state) */
    int saw_replay, saw_stale;
} setup;

static const tw_rule_spec profiler_report[] = {{.rule = "ProfilerReport"}};

/* Every built-in rule on its own (not ProfilerReport): many rule parts. */
static const tw_rule_spec separate_rules[] = {
    {.rule = "LowGPUUtilization"},
    {.rule = "CPUBottleneck"},
    {.rule = "IOBottleneck"},
    {.rule = "GPUMemoryIncrease"},
    {.rule = "BatchSize"},
    {.rule = "StepOutlier"},
    {.rule = "LoadBalancing"},
    {.rule = "MaxInitializationTime"},
    {.rule = "Dataloader"},
    {.rule = "OverallSystemUsage"},
    {.rule = "OverallFrameworkMetrics"},
};

static tw_job *job_new(const setup *su)
{
    tw_job *j = NULL;
    char err[1024];
    if (tw_job_new("job", &su->cfg, su->reg, su->specs, su->nspecs, &j, err,
                   sizeof(err)) != TW_OK)
        fail_msg("tw_job_new: %s", err);
    if (su->segmented) {
        tw_job_set_segmented(j);
        tw_job_set_slice_bytes(j, su->slice_bytes);
        tw_job_set_checkpoint_target(j, su->target_bytes);
    }
    return j;
}

static void job_start(const setup *su, tw_job *j, const stream *s)
{
    if (su->eval_mode) {
        tw_job_set_first_timestamp(j, s->first_us);
        tw_job_set_scan_limit(j, s->latest_us);
    }
}

static void feed(const setup *su, tw_job *j, const stream *s, size_t i)
{
    if (su->eval_mode)
        assert_int_equal(tw_job_advance(j, s->b[i].feed_key_us), TW_OK);
    assert_int_equal(tw_job_ingest(j, decode(&s->b[i])), TW_OK);
}

static void finish(const setup *su, tw_job *j, const stream *s)
{
    assert_int_equal(tw_job_finish(j, su->eval_mode ? s->latest_us : 0), TW_OK);
}

/* Everything a job reports: per rule (recursively) status, counters,
 * error and report JSON; the job's statistics and clock. */
static void rule_result(tw_json *out, tw_json *scratch, tw_rule *r)
{
    const tw_scan_result *res = tw_rule_last_result(r);
    tw_json_object_begin(out);
    tw_json_key(out, "name");
    tw_json_string(out, tw_rule_name(r));
    tw_json_key(out, "status");
    tw_json_string(out, tw_rule_status_name(tw_rule_get_status(r)));
    tw_json_key(out, "scans");
    tw_json_int(out, (int64_t)tw_rule_scans(r));
    tw_json_key(out, "conditions");
    tw_json_int(out, (int64_t)tw_rule_conditions_met(r));
    tw_json_key(out, "last");
    tw_json_array_begin(out);
    tw_json_int(out, res->condition_met);
    tw_json_int(out, res->rule_triggered);
    tw_json_int(out, res->violations);
    tw_json_int(out, res->datapoints);
    tw_json_array_end(out);
    tw_json_key(out, "error");
    tw_json_string(out, tw_rule_error(r));
    tw_json_reset(scratch);
    assert_int_equal(tw_rule_report(r, scratch), TW_OK);
    assert_false(tw_json_failed(scratch));
    tw_json_key(out, "report");
    tw_json_raw(out, tw_json_str(scratch));
    tw_json_key(out, "children");
    tw_json_array_begin(out);
    for (size_t i = 0; i < tw_rule_nchildren(r); i++)
        rule_result(out, scratch, tw_rule_child(r, i));
    tw_json_array_end(out);
    tw_json_object_end(out);
}

static char *results(tw_job *j)
{
    tw_json *out = tw_json_new(), *scratch = tw_json_new();
    assert_non_null(out);
    assert_non_null(scratch);
    tw_job_stats st;
    tw_job_get_stats(j, &st);
    tw_json_object_begin(out);
    tw_json_key(out, "stats");
    tw_json_array_begin(out);
    tw_json_int(out, (int64_t)st.batches);
    tw_json_int(out, (int64_t)st.duplicate_batches);
    tw_json_int(out, (int64_t)st.samples);
    tw_json_int(out, (int64_t)st.events);
    tw_json_int(out, (int64_t)st.late_samples);
    tw_json_int(out, (int64_t)st.late_events);
    tw_json_int(out, (int64_t)st.scans);
    tw_json_int(out, (int64_t)st.buffered_batches);
    tw_json_int(out, tw_job_first_timestamp(j));
    tw_json_int(out, tw_job_latest_timestamp(j));
    tw_json_int(out, tw_job_finished(j));
    tw_json_int(out, tw_job_end_marker_seen(j));
    tw_json_array_end(out);
    tw_json_key(out, "rules");
    tw_json_array_begin(out);
    for (size_t i = 0; i < tw_job_nrules(j); i++)
        rule_result(out, scratch, tw_job_rule(j, i));
    tw_json_array_end(out);
    tw_json_object_end(out);
    assert_false(tw_json_failed(out));
    char *s = tw_json_take(out);
    tw_json_free(out);
    tw_json_free(scratch);
    return s;
}

/* ---- a checkpoint store: the newest blob of each part ------------------- */

#define MAX_PARTS 4096

typedef struct store {
    char name[MAX_PARTS][32];
    uint8_t *data[MAX_PARTS];
    size_t len[MAX_PARTS];
    size_t n;
    size_t emitted; /* parts received by the last save */
    size_t emitted_bytes;
    char emitted_names[65536];
    int fail_at; /* emit number (1-based) that fails; 0 = none */
} store;

static int store_put(void *ud, const char *part, const void *data, size_t len)
{
    store *s = ud;
    s->emitted++;
    size_t o = strlen(s->emitted_names);
    snprintf(s->emitted_names + o, sizeof(s->emitted_names) - o, "%s%s",
             o ? "," : "", part);
    if (s->fail_at != 0 && (int)s->emitted == s->fail_at)
        return TW_ERR;
    s->emitted_bytes += len;
    size_t i;
    for (i = 0; i < s->n; i++)
        if (strcmp(s->name[i], part) == 0)
            break;
    if (data == NULL) { /* removed (segmented checkpoints) */
        if (i < s->n) {
            free(s->data[i]);
            s->n--;
            memmove(s->name[i], s->name[i + 1],
                    (s->n - i) * sizeof(s->name[0]));
            memmove(&s->data[i], &s->data[i + 1],
                    (s->n - i) * sizeof(s->data[0]));
            memmove(&s->len[i], &s->len[i + 1], (s->n - i) * sizeof(s->len[0]));
        }
        return TW_OK;
    }
    if (i == s->n) {
        assert_true(s->n < MAX_PARTS);
        snprintf(s->name[i], sizeof(s->name[i]), "%s", part);
        s->data[i] = NULL;
        s->n++;
    }
    free(s->data[i]);
    s->data[i] = malloc(len ? len : 1);
    assert_non_null(s->data[i]);
    memcpy(s->data[i], data, len);
    s->len[i] = len;
    return TW_OK;
}

static void store_clear(store *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->data[i]);
    memset(s, 0, sizeof(*s));
}

static int save(tw_job *j, int only_dirty, store *s)
{
    char err[512];
    s->emitted = 0;
    s->emitted_bytes = 0;
    s->emitted_names[0] = '\0';
    int rc = tw_job_save(j, only_dirty, store_put, s, err, sizeof(err));
    if (rc != TW_OK && s->fail_at == 0)
        fail_msg("save: %s", err);
    return rc;
}

static const uint8_t *store_get(const store *s, const char *part, size_t *len)
{
    *len = 0;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->name[i], part) == 0) {
            *len = s->len[i];
            return s->data[i];
        }
    *len = 0;
    fail_msg("no part %s in the store", part);
    return NULL;
}

static int name_cmp(const void *a, const void *b)
{
    return tw_checkpoint_part_cmp(a, b);
}

/* A fresh job restored from the store: core first, rules last to first;
 * segmented, every part in tw_checkpoint_load's order. */
static tw_job *restore(setup *su, const store *s)
{
    tw_job *j = job_new(su);
    char err[1024];
    size_t len;
    if (su->segmented) {
        char(*names)[32] = malloc(s->n * sizeof(*names) + 1);
        assert_non_null(names);
        memcpy(names, s->name, s->n * sizeof(*names));
        qsort(names, s->n, sizeof(*names), name_cmp);
        assert_string_equal(names[0], "core");
        for (size_t i = 0; i < s->n; i++) {
            const uint8_t *d = store_get(s, names[i], &len);
            if (tw_job_restore_part(j, names[i], d, len, err, sizeof(err)) !=
                TW_OK)
                fail_msg("restore %s: %s", names[i], err);
        }
        free(names);
        if (j->nstale > 0)
            su->saw_stale = 1;
        if (tw_job_restore_end(j, err, sizeof(err)) != TW_OK)
            fail_msg("restore end: %s", err);
        if (j->npend > 0)
            su->saw_replay = 1;
        return j;
    }
    const uint8_t *d = store_get(s, "core", &len);
    if (tw_job_restore_part(j, "core", d, len, err, sizeof(err)) != TW_OK)
        fail_msg("restore core: %s", err);
    for (size_t i = tw_job_nrules(j); i-- > 0;) {
        char part[32];
        snprintf(part, sizeof(part), "rule.%zu", i);
        d = store_get(s, part, &len);
        if (tw_job_restore_part(j, part, d, len, err, sizeof(err)) != TW_OK)
            fail_msg("restore %s: %s", part, err);
    }
    assert_false(tw_job_dirty(j));
    return j;
}

static void assert_same_store(const store *a, const store *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        size_t len;
        const uint8_t *d = store_get(b, a->name[i], &len);
        if (len != a->len[i] || memcmp(d, a->data[i], len) != 0)
            fail_msg("part %s differs after save -> restore -> save "
                     "(%zu vs %zu bytes)",
                     a->name[i], a->len[i], len);
    }
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static char *run_uninterrupted(const setup *su, const stream *s)
{
    tw_job *j = job_new(su);
    job_start(su, j, s);
    for (size_t i = 0; i < s->n; i++)
        feed(su, j, s, i);
    finish(su, j, s);
    char *r = results(j);
    tw_job_free(j);
    return r;
}

/* The same stream, saving only dirty parts after every batch into a store
 * (as the daemon does each tick) and replacing the job by one restored
 * from the store before every batch whose index is in `split`. Also checks
 * that a restored job saves exactly the blobs it was restored from. */
static char *run_with_restarts(setup *su, const stream *s,
                               const uint8_t *split_in, int *saw_buffered,
                               int *saw_after_scan)
{
    store st;
    memset(&st, 0, sizeof(st));
    tw_job *j = job_new(su);
    job_start(su, j, s);
    save(j, 0, &st);
    /* su->save_every > 1: a restart loses the batches since the last save
     * and feeds them again, as the daemon reads again from the
     * checkpoint's offset */
    size_t every = su->save_every > 1 ? su->save_every : 1, saved_upto = 0;
    uint8_t *split = malloc(s->n + 1);
    assert_non_null(split);
    memcpy(split, split_in, s->n + 1);
    uint64_t prev_scans = 0, scans_before_prev = 0;
    for (size_t i = 0;;) {
        if (split[i]) {
            split[i] = 0;
            store full;
            memset(&full, 0, sizeof(full));
            save(j, 0, &full);
            /* dirty-only saves kept up; a segmented store may hold an
             * older state snapshot and the scans since (deferred state) */
            if (!su->segmented)
                assert_same_store(&full, &st);
            tw_job_stats js;
            tw_job_get_stats(j, &js);
            if (js.buffered_batches > 0)
                *saw_buffered = 1;
            if (prev_scans > scans_before_prev)
                *saw_after_scan = 1;
            tw_job_free(j);
            j = restore(su, &st);
            store again;
            memset(&again, 0, sizeof(again));
            /* a full save moves a segmented job's bookkeeping to the
             * store it writes: a second restore takes it */
            tw_job *probe = su->segmented ? restore(su, &st) : j;
            save(probe, 0, &again);
            if (saved_upto == i)
                assert_same_store(&full, &again);
            if (probe != j)
                tw_job_free(probe);
            store_clear(&again);
            store_clear(&full);
            /* nothing changed since the restore: nothing to save, but a
             * segmented job's snapshot of the scans it replayed */
            int dirty = tw_job_dirty(j);
            save(j, 1, &st);
            if (!dirty)
                assert_int_equal(st.emitted, 0);
            if (saved_upto < i) {
                i = saved_upto; /* the lost batches come again */
                continue;
            }
        }
        if (i == s->n)
            break;
        feed(su, j, s, i);
        tw_job_stats js;
        tw_job_get_stats(j, &js);
        scans_before_prev = prev_scans;
        prev_scans = js.scans;
        if ((i + 1) % every == 0 || i + 1 == s->n) {
            save(j, 1, &st);
            saved_upto = i + 1;
        }
        i++;
    }
    free(split);
    finish(su, j, s);
    save(j, 1, &st);
    /* and once more after finish: the finished job restores identically */
    char *r1 = results(j);
    tw_job_free(j);
    j = restore(su, &st);
    char *r2 = results(j);
    assert_string_equal(r1, r2);
    finish(su, j, s); /* idempotent on a restored finished job */
    char *r3 = results(j);
    assert_string_equal(r1, r3);
    free(r2);
    free(r3);
    tw_job_free(j);
    store_clear(&st);
    return r1;
}

/* Values the compact chunk encoding (job_state.c, version 4) must carry bit
 * for bit: not hundredths, -0.0, extremes, NaN and infinities. */
static const double edge_values[] = {
    -0.0,  0.1 + 0.2,    1e300, -1e-300,  12.34,     99.99, 1e15,  -1e15 - 0.25,
    0.005, 123456789.01, NAN,   INFINITY, -INFINITY, 0.0,   100.0, 3.0};

/* Rewrites every batch of s: edge values for the samples; tids at the
 * int64 limits (wrapping deltas); a distinct argument value per event, so
 * a chunk holds more strings than its dictionary. */
static void stream_mutate(stream *s)
{
    size_t nedge = sizeof(edge_values) / sizeof(edge_values[0]), uniq = 0;
    size_t most = 0; /* distinct values in one batch */
    for (size_t i = 0; i < s->n; i++) {
        tw_batch *b = decode(&s->b[i]);
        size_t before = uniq;
        for (size_t k = 0; k < b->nsamples; k++)
            b->samples[k].value = edge_values[(i + k) % nedge];
        for (size_t k = 0; k < b->nevents; k++) {
            tw_fw_event *e = &b->events[k];
            e->tid = k % 3 == 0 ? INT64_MIN : k % 3 == 1 ? INT64_MAX : -1;
            if (e->args != NULL && e->nargs > 0) {
                char *v = tw_arena_alloc(&b->arena, 24);
                assert_non_null(v);
                snprintf(v, 24, "v%zu", uniq++);
                ((tw_arg *)(uintptr_t)e->args)[0].value = v;
            }
        }
        if (uniq - before > most)
            most = uniq - before;
        free(s->b[i].data);
        tw_wire_status st = tw_wire_encode(b, &s->b[i].data, &s->b[i].len);
        if (st != TW_WIRE_OK)
            fail_msg("encode: %s", tw_wire_status_name(st));
        tw_batch_free(b);
    }
    if (most <= 256)
        fail_msg("no batch overflows a chunk's dictionary (%zu values)", most);
}

static void check_preset_ex(const char *preset, uint32_t nodes, double dur,
                            const tw_rule_spec *specs, size_t nspecs,
                            int eval_mode, int mutate)
{
    stream s;
    stream_load(&s, preset, nodes, 0, 1, dur, 7);
    if (mutate)
        stream_mutate(&s);
    setup su;
    memset(&su, 0, sizeof(su));
    su.reg = tw_registry_new();
    assert_non_null(su.reg);
    tw_job_config_default(&su.cfg);
    su.cfg.external_watermark = eval_mode;
    su.eval_mode = eval_mode;
    su.specs = specs;
    su.nspecs = nspecs;
    char *want = run_uninterrupted(&su, &s);
    /* the rules did something: scans ran and reports are there */
    assert_non_null(strstr(want, "\"status\": \""));
    assert_null(strstr(want, "\"status\": \"InProgress\""));

    uint8_t *split = calloc(s.n + 1, 1);
    assert_non_null(split);
    rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)strlen(preset) * 131 ^ nodes;
    for (int k = 0; k < 6; k++)
        split[rnd() % (s.n + 1)] = 1;
    split[0] = 1;   /* nothing ingested yet */
    split[s.n] = 1; /* everything ingested, not finished */
    int saw_buffered = 0, saw_after_scan = 0;
    /* also right after each of the first scans closed */
    {
        tw_job *j = job_new(&su);
        job_start(&su, j, &s);
        uint64_t prev = 0;
        int marked = 0;
        for (size_t i = 0; i < s.n && marked < 3; i++) {
            feed(&su, j, &s, i);
            tw_job_stats js;
            tw_job_get_stats(j, &js);
            if (js.scans > prev) {
                split[i + 1] = 1;
                marked++;
            }
            prev = js.scans;
        }
        tw_job_free(j);
    }
    /* whole cores (tools, tests), segmented checkpoints (the daemon) with
     * the state snapshot whole, and in slices so small that restores land
     * while several scans wait for it (they run again); mode 4: several
     * slices a save, up to a byte target, and paced */
    for (int mode = 0; mode <= 4; mode++) {
        su.segmented = mode > 0;
        su.slice_bytes = mode >= 2 ? 200 : 0;
        su.target_bytes = mode == 4 ? 3000 : 0;
        /* saves far apart: scans release batches no save wrote yet */
        su.save_every = mode == 3 ? 20 : 1;
        uint8_t *at = split;
        uint8_t *dense = NULL;
        if (mode >= 2) { /* and a restore every few batches */
            dense = malloc(s.n + 1);
            assert_non_null(dense);
            for (size_t i = 0; i <= s.n; i++)
                dense[i] = split[i] || i % 5 == 2;
            at = dense;
        }
        char *got =
            run_with_restarts(&su, &s, at, &saw_buffered, &saw_after_scan);
        free(dense);
        if (strcmp(want, got) != 0) {
            size_t d = 0;
            while (want[d] == got[d])
                d++;
            fail_msg("%s%s: results differ at byte %zu:\n  want ...%.200s\n"
                     "  got  ...%.200s",
                     preset,
                     mode == 4   ? " (segmented, sliced to a byte target)"
                     : mode == 3 ? " (segmented, sliced, saves 20 apart)"
                     : mode == 2 ? " (segmented, sliced)"
                     : mode == 1 ? " (segmented)"
                                 : "",
                     d, want + (d > 80 ? d - 80 : 0),
                     got + (d > 80 ? d - 80 : 0));
        }
        free(got);
    }
    /* the sliced runs restored with scans waiting for the snapshot */
    assert_true(su.saw_replay);
    assert_true(saw_buffered);
    assert_true(saw_after_scan);
    free(want);
    free(split);
    tw_registry_free(su.reg);
    stream_free(&s);
}

static void check_preset(const char *preset, uint32_t nodes, double dur,
                         const tw_rule_spec *specs, size_t nspecs,
                         int eval_mode)
{
    check_preset_ex(preset, nodes, dur, specs, nspecs, eval_mode, 0);
}

static void assert_same_str(const char *a, const char *b, const char *what)
{
    if ((a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0))
        fail_msg("restored %s: '%s' instead of '%s'", what, b ? b : "(null)",
                 a ? a : "(null)");
}

/* A setup with the default job configuration and ProfilerReport; the
 * caller frees su->reg. */
static void setup_profiler_report(setup *su)
{
    memset(su, 0, sizeof(*su));
    su->reg = tw_registry_new();
    assert_non_null(su->reg);
    tw_job_config_default(&su->cfg);
    su->specs = profiler_report;
    su->nspecs = 1;
}

/* A buffered batch's samples, unpacked when the job keeps them packed
 * (the caller frees). */
static tw_sample *chunk_samples(const chunk *c)
{
    size_t n = chunk_nsamples(c);
    tw_sample *s = malloc((n > 0 ? n : 1) * sizeof(*s));
    assert_non_null(s);
    if (c->packed != NULL) {
        tw_ckr r;
        tw_ckr_init(&r, c->packed, c->packed_len);
        assert_null(tw_sample_unpack_n(&r, n, 1, SIZE_MAX, s));
        assert_int_equal(tw_ckr_left(&r), 0);
    } else if (n > 0) {
        memcpy(s, c->batch->samples, n * sizeof(*s));
    }
    return s;
}

/* Every buffered sample and event of b, bit for bit as in a; a restored
 * segmented job keeps packed what the saved one kept packed. */
static void assert_same_chunks(const tw_job *a, const tw_job *b)
{
    assert_int_equal(a->nchunks, b->nchunks);
    for (size_t c = 0; c < a->nchunks; c++) {
        const tw_batch *x = a->chunks[c].batch, *y = b->chunks[c].batch;
        size_t n = chunk_nsamples(&a->chunks[c]);
        assert_int_equal(n, chunk_nsamples(&b->chunks[c]));
        assert_int_equal(a->chunks[c].packed != NULL,
                         b->chunks[c].packed != NULL);
        tw_sample *xs = chunk_samples(&a->chunks[c]),
                  *ys = chunk_samples(&b->chunks[c]);
        if (n > 0 && memcmp(xs, ys, n * sizeof(tw_sample)))
            fail_msg("chunk %zu: restored samples differ", c);
        free(xs);
        free(ys);
        assert_int_equal(x->nevents, y->nevents);
        for (size_t k = 0; k < x->nevents; k++) {
            const tw_fw_event *e = &x->events[k], *f = &y->events[k];
            assert_same_str(e->name, f->name, "event name");
            assert_same_str(e->phase, f->phase, "event phase");
            assert_same_str(e->node, f->node, "event node");
            assert_true(e->start_us == f->start_us && e->end_us == f->end_us &&
                        e->pid == f->pid && e->tid == f->tid &&
                        e->source == f->source && e->mode == f->mode &&
                        e->flags == f->flags && e->nargs == f->nargs &&
                        (e->args == NULL) == (f->args == NULL));
            for (uint32_t i = 0; e->args != NULL && i < e->nargs; i++) {
                assert_same_str(e->args[i].key, f->args[i].key, "arg key");
                assert_same_str(e->args[i].value, f->args[i].value,
                                "arg value");
                assert_int_equal(e->args[i].kind, f->args[i].kind);
            }
        }
    }
}

/* The compact chunk encoding restores what was buffered bit for bit (the
 * results comparison alone would miss -0.0 turned into 0.0), and the job
 * then ends as the uninterrupted one. */
static void test_compact_edge_values(void **st)
{
    (void)st;
    check_preset_ex("dataloader", 1, 0, profiler_report, 1, 0, 1);

    stream s;
    stream_load(&s, "dataloader", 1, 0, 1, 0, 7);
    stream_mutate(&s);
    setup su;
    setup_profiler_report(&su);
    tw_job *j = job_new(&su);
    int checked = 0;
    for (size_t i = 0; i < s.n; i++) {
        feed(&su, j, &s, i);
        if (i % 7 != 3)
            continue;
        store full;
        memset(&full, 0, sizeof(full));
        save(j, 0, &full);
        tw_job *r = restore(&su, &full);
        assert_same_chunks(j, r);
        checked += j->nchunks > 0;
        tw_job_free(r);
        store_clear(&full);
    }
    assert_true(checked > 0);
    tw_job_free(j);
    tw_registry_free(su.reg);
    stream_free(&s);
}

/* Distinct name and phase pointers among a batch's events. */
static size_t distinct_strings(const tw_batch *b)
{
    const char **seen = calloc(2 * b->nevents + 1, sizeof(*seen));
    assert_non_null(seen);
    size_t n = 0;
    for (size_t k = 0; k < b->nevents; k++) {
        const char *p[2] = {b->events[k].name, b->events[k].phase};
        for (int f = 0; f < 2; f++) {
            size_t i = 0;
            while (i < n && seen[i] != p[f])
                i++;
            if (i == n)
                seen[n++] = p[f];
        }
    }
    free(seen);
    return n;
}

/* A restored chunk's events share their strings as the trace reader's
 * batch did (one copy per distinct name or phase), in both the whole-core
 * and the segmented form. */
static void test_restored_events_share_strings(void **st)
{
    (void)st;
    stream s;
    stream_load(&s, "dataloader", 1, 0, 1, 0, 7);
    setup su;
    setup_profiler_report(&su);
    for (su.segmented = 0; su.segmented <= 1; su.segmented++) {
        tw_job *j = job_new(&su);
        size_t checked = 0;
        for (size_t i = 0; i < s.n && checked == 0; i++) {
            feed(&su, j, &s, i);
            store full;
            memset(&full, 0, sizeof(full));
            save(j, 0, &full);
            tw_job *r = restore(&su, &full);
            assert_int_equal(j->nchunks, r->nchunks);
            for (size_t c = 0; c < j->nchunks; c++) {
                const tw_batch *x = j->chunks[c].batch, *y = r->chunks[c].batch;
                if (x->nevents < 16)
                    continue;
                size_t want = distinct_strings(x);
                assert_true(want < x->nevents); /* names do repeat */
                assert_int_equal(distinct_strings(y), want);
                checked++;
            }
            tw_job_free(r);
            store_clear(&full);
        }
        assert_true(checked > 0);
        tw_job_free(j);
    }
    tw_registry_free(su.reg);
    stream_free(&s);
}

static size_t store_bytes(const store *s, const char *prefix)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(s->name[i], prefix, strlen(prefix)) == 0)
            n += s->len[i];
    return n;
}

static size_t store_count(const store *s, const char *prefix)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += strncmp(s->name[i], prefix, strlen(prefix)) == 0;
    return n;
}

/* Segmented: a save after one batch without a scan writes the small core
 * and that batch's segment only; a scan's save removes the segments whose
 * batches it released; the store never keeps a segment nothing needs. */
/* A batch of node n1 (sequence seq): one CPU series, a sample at each of
 * the n times (seconds) with the given values. */
static tw_batch *cpu_batch(uint64_t seq, const double *ts, const double *v,
                           size_t n)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = tw_arena_strdup(&b->arena, "job");
    b->node = tw_arena_strdup(&b->arena, "n1");
    b->seq = seq;
    b->series = tw_arena_alloc(&b->arena, sizeof(tw_batch_series));
    b->samples = tw_arena_alloc(&b->arena, n * sizeof(tw_sample));
    assert_non_null(b->job);
    assert_non_null(b->node);
    assert_non_null(b->series);
    assert_non_null(b->samples);
    b->series[0] = (tw_batch_series){"cpu", "cpu0", "CPUUtilization"};
    b->nseries = 1;
    for (size_t i = 0; i < n; i++)
        b->samples[i] = (tw_sample){.ts = ts[i], .value = v[i], .series = 0};
    b->nsamples = n;
    return b;
}

/* A batch that arrives after its scan closed, with a sample exactly at
 * the scan's end (the next scan's first, a repeat): a restore that runs
 * that scan again must not give it to the scan (the pending scan's
 * arrival cutoff). External watermark, no lateness, a snapshot in
 * 64-byte slices, so the restore lands while scan 0 is pending. */
static void test_replay_skips_later_batches(void **st)
{
    (void)st;
    setup su;
    setup_profiler_report(&su);
    su.cfg.external_watermark = 1;
    su.cfg.lateness_us = 0;
    su.segmented = 1;
    su.slice_bytes = 64;
    const double F = 1.6e9;
    char *want = NULL;
    for (int restart = 0; restart <= 1; restart++) {
        tw_job *j = job_new(&su);
        store sto;
        memset(&sto, 0, sizeof(sto));
        tw_job_set_first_timestamp(j, (int64_t)(F * 1e6));
        assert_int_equal(
            tw_job_ingest(j, cpu_batch(1, (double[]){F, F + 30, F + 59},
                                       (double[]){10, 20, 30}, 3)),
            TW_OK);
        save(j, 1, &sto); /* the store has a core: scans are tracked */
        assert_int_equal(tw_job_advance(j, (int64_t)((F + 60) * 1e6)), TW_OK);
        assert_int_equal(j->npend, 1);
        assert_int_equal(
            tw_job_ingest(j, cpu_batch(2, (double[]){F + 60, F + 90},
                                       (double[]){99, 50}, 2)),
            TW_OK);
        save(j, 1, &sto);
        assert_non_null(j->snap); /* scan 0 still waits for its snapshot */
        if (restart) {
            tw_job_free(j);
            j = restore(&su, &sto);
            assert_int_equal(j->npend, 1);
        }
        assert_int_equal(tw_job_advance(j, (int64_t)((F + 120) * 1e6)), TW_OK);
        assert_int_equal(tw_job_finish(j, (int64_t)((F + 120) * 1e6)), TW_OK);
        char *got = results(j);
        if (want == NULL)
            want = got;
        else {
            assert_string_equal(want, got);
            free(got);
        }
        tw_job_free(j);
        store_clear(&sto);
    }
    assert_true(su.saw_replay);
    free(want);
    tw_registry_free(su.reg);
}

static void test_segmented_incremental(void **st)
{
    (void)st;
    stream s;
    stream_load(&s, "healthy", 2, 0, 1, 0, 5);
    setup su;
    setup_profiler_report(&su);
    su.segmented = 1;
    tw_job *j = job_new(&su);
    store sto;
    memset(&sto, 0, sizeof(sto));
    save(j, 0, &sto);
    size_t quiet = 0, removals_seen = 0, small = 0;
    for (size_t i = 0; i < s.n; i++) {
        tw_job_stats before, after;
        tw_job_get_stats(j, &before);
        size_t nseries = j->nseries, segs = j->ncsegs;
        feed(&su, j, &s, i);
        tw_job_get_stats(j, &after);
        save(j, 1, &sto);
        /* what the store holds is what the job tracks, nothing released */
        assert_int_equal(store_count(&sto, "chunks."), j->ncsegs);
        for (size_t k = 0; k < j->ncsegs; k++)
            assert_true(j->csegs[k].live > 0);
        if (after.scans != before.scans) {
            if (j->ncsegs < segs + 1)
                removals_seen++;
            continue;
        }
        if (j->nseries != nseries ||
            after.buffered_batches == before.buffered_batches)
            continue;
        quiet++;
        char want[64];
        snprintf(want, sizeof(want), "core,chunks.%llu",
                 (unsigned long long)j->csegs[j->ncsegs - 1].seq);
        assert_string_equal(sto.emitted_names, want);
        assert_int_equal(j->csegs[j->ncsegs - 1].live, 1);
        size_t held = store_bytes(&sto, "chunks.");
        if (j->ncsegs >= 4 && sto.emitted_bytes * 2 < held)
            small++;
    }
    assert_true(quiet > 10);
    assert_true(removals_seen > 0);
    assert_true(small > 0);
    finish(&su, j, &s);
    save(j, 1, &sto);
    assert_int_equal(store_count(&sto, "chunks."), 0);
    tw_job_free(j);
    store_clear(&sto);
    tw_registry_free(su.reg);
    stream_free(&s);
}

static void test_cpu_bottleneck(void **st)
{
    (void)st;
    check_preset("cpu_bottleneck", 1, 0, profiler_report, 1, 0);
}

static void test_low_gpu_two_nodes(void **st)
{
    (void)st;
    check_preset("low_gpu", 2, 0, profiler_report, 1, 0);
}

static void test_healthy_eval_mode(void **st)
{
    (void)st;
    check_preset("healthy", 1, 0, profiler_report, 1, 1);
}

static void test_dataloader_framework(void **st)
{
    (void)st;
    check_preset("dataloader", 1, 0, profiler_report, 1, 0);
}

static void test_step_outliers_separate_rules(void **st)
{
    (void)st;
    check_preset("step_outliers", 1, 0, separate_rules,
                 sizeof(separate_rules) / sizeof(separate_rules[0]), 0);
}

/* ---- only_dirty -----------------------------------------------------------
 */

static void test_only_dirty(void **st)
{
    (void)st;
    stream s;
    stream_load(&s, "cpu_bottleneck", 1, 0, 1, 0, 3);
    setup su;
    memset(&su, 0, sizeof(su));
    su.reg = tw_registry_new();
    tw_job_config_default(&su.cfg);
    su.specs = separate_rules;
    su.nspecs = 3; /* LowGPUUtilization, CPUBottleneck, IOBottleneck */
    tw_job *j = job_new(&su);
    store sto;
    memset(&sto, 0, sizeof(sto));

    /* a fresh job has nothing to save; a full save has every part */
    assert_false(tw_job_dirty(j));
    save(j, 1, &sto);
    assert_int_equal(sto.emitted, 0);
    save(j, 0, &sto);
    assert_string_equal(sto.emitted_names, "core,rule.0,rule.1,rule.2");
    save(j, 1, &sto);
    assert_int_equal(sto.emitted, 0);

    /* the first batch closes no scan: only the core changed */
    feed(&su, j, &s, 0);
    tw_job_stats js;
    tw_job_get_stats(j, &js);
    assert_int_equal(js.scans, 0);
    assert_true(tw_job_dirty(j));
    save(j, 1, &sto);
    assert_string_equal(sto.emitted_names, "core");
    assert_false(tw_job_dirty(j));
    save(j, 1, &sto);
    assert_int_equal(sto.emitted, 0);

    /* a redelivered batch changes the core only (duplicate counter) */
    feed(&su, j, &s, 0);
    save(j, 1, &sto);
    assert_string_equal(sto.emitted_names, "core");

    /* batches until a scan closes: every part is dirty */
    size_t i = 1;
    for (; i < s.n; i++) {
        feed(&su, j, &s, i);
        tw_job_get_stats(j, &js);
        if (js.scans > 0)
            break;
        save(j, 1, &sto);
        assert_string_equal(sto.emitted_names, "core");
    }
    assert_true(js.scans > 0);
    /* a failing store: the save fails naming the part, marks stay */
    sto.fail_at = 2;
    char err[512];
    sto.emitted = 0;
    sto.emitted_names[0] = '\0';
    assert_int_equal(tw_job_save(j, 1, store_put, &sto, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "'rule.0'"));
    assert_true(tw_job_dirty(j));
    sto.fail_at = 0;
    save(j, 1, &sto);
    assert_string_equal(sto.emitted_names, "core,rule.0,rule.1,rule.2");
    save(j, 1, &sto);
    assert_int_equal(sto.emitted, 0);

    /* an advance that closes nothing changes nothing */
    assert_int_equal(tw_job_advance(j, 0), TW_OK);
    assert_false(tw_job_dirty(j));

    /* finish: every part */
    assert_int_equal(tw_job_finish(j, 0), TW_OK);
    save(j, 1, &sto);
    assert_string_equal(sto.emitted_names, "core,rule.0,rule.1,rule.2");
    assert_int_equal(tw_job_finish(j, 0), TW_OK); /* idempotent: no change */
    assert_false(tw_job_dirty(j));

    store_clear(&sto);
    tw_job_free(j);
    tw_registry_free(su.reg);
    stream_free(&s);
}

/* ---- corrupt and truncated parts -------------------------------------------
 */

static void reseal(uint8_t *d, size_t len)
{
    uint64_t n = len - 20;
    for (int i = 0; i < 8; i++)
        d[8 + i] = (uint8_t)(n >> (8 * i));
    uint32_t crc = (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), d + 20, n);
    for (int i = 0; i < 4; i++)
        d[16 + i] = (uint8_t)(crc >> (8 * i));
}

/* The part's payload inflated and sealed again without the flag: what
 * an engine before compression wrote. Caller frees. */
static uint8_t *plain_part(const uint8_t *d, size_t len, size_t *out_len)
{
    assert_true(len > 20);
    assert_int_equal(d[6], 1); /* PART_ZSTD */
    unsigned long long raw = ZSTD_getFrameContentSize(d + 20, len - 20);
    assert_true(raw < ((unsigned long long)1 << 30));
    uint8_t *p = malloc(20 + (size_t)raw);
    assert_non_null(p);
    memcpy(p, d, 20);
    p[6] = 0;
    assert_int_equal(ZSTD_decompress(p + 20, (size_t)raw, d + 20, len - 20),
                     raw);
    reseal(p, 20 + (size_t)raw);
    *out_len = 20 + (size_t)raw;
    return p;
}

/* A mid-stream checkpoint (batches buffered, scans closed) of a
 * ProfilerReport job over a framework-heavy preset. */
static void midstream(setup *su, stream *s, store *sto, const char *preset,
                      uint32_t cores, int framework)
{
    stream_load(s, preset, 1, cores, framework, 0, 5);
    memset(su, 0, sizeof(*su));
    su->reg = tw_registry_new();
    tw_job_config_default(&su->cfg);
    su->specs = profiler_report;
    su->nspecs = 1;
    tw_job *j = job_new(su);
    for (size_t i = 0; i < s->n / 2; i++)
        feed(su, j, s, i);
    tw_job_stats js;
    tw_job_get_stats(j, &js);
    assert_true(js.scans > 0);
    assert_true(js.buffered_batches > 0);
    memset(sto, 0, sizeof(*sto));
    save(j, 0, sto);
    tw_job_free(j);
    /* the parts plain (as before compression), so that the cuts and
     * flips below reach the parsers, not zstd (test_compressed_parts) */
    for (size_t i = 0; i < sto->n; i++)
        if (sto->len[i] > 20 && sto->data[i][6] == 1) {
            size_t plen;
            uint8_t *p = plain_part(sto->data[i], sto->len[i], &plen);
            free(sto->data[i]);
            sto->data[i] = p;
            sto->len[i] = plen;
        }
}

/* Framing: every truncation of a real mid-stream checkpoint (a
 * framework-heavy job with batches buffered) fails naming the part, and so
 * does a flipped bit anywhere (sampled: the blob is large). A failed core
 * restore leaves the job fresh, so one job serves all attempts. */
static void test_truncated_and_flipped(void **st)
{
    (void)st;
    setup su;
    stream s;
    store sto;
    midstream(&su, &s, &sto, "dataloader", 0, 1);
    char err[1024];
    size_t clen, rlen;
    const uint8_t *core = store_get(&sto, "core", &clen);
    const uint8_t *rule = store_get(&sto, "rule.0", &rlen);
    tw_job *j = job_new(&su);
    for (size_t n = 0; n < clen; n++) {
        assert_int_equal(
            tw_job_restore_part(j, "core", core, n, err, sizeof(err)), TW_ERR);
        assert_non_null(strstr(err, "'core'"));
    }
    for (size_t n = 0; n < rlen; n++) {
        assert_int_equal(
            tw_job_restore_part(j, "rule.0", rule, n, err, sizeof(err)),
            TW_ERR);
        assert_non_null(strstr(err, "'rule.0'"));
    }
    uint8_t *buf = malloc(clen);
    assert_non_null(buf);
    memcpy(buf, core, clen);
    size_t step = clen / 2000 + 1;
    for (size_t n = 0; n < clen; n += n < 64 ? 1 : step) {
        buf[n] ^= (uint8_t)(1u << (n % 8));
        assert_int_equal(
            tw_job_restore_part(j, "core", buf, clen, err, sizeof(err)),
            TW_ERR);
        assert_non_null(strstr(err, "'core'"));
        buf[n] ^= (uint8_t)(1u << (n % 8));
    }
    assert_false(tw_job_dirty(j));
    tw_job_stats js;
    tw_job_get_stats(j, &js);
    assert_int_equal(js.batches, 0);
    /* after all that the real blob still restores */
    assert_int_equal(
        tw_job_restore_part(j, "core", core, clen, err, sizeof(err)), TW_OK);
    assert_int_equal(
        tw_job_restore_part(j, "rule.0", rule, rlen, err, sizeof(err)), TW_OK);
    tw_job_free(j);
    free(buf);
    store_clear(&sto);
    tw_registry_free(su.reg);
    stream_free(&s);
}

/* Past the framing: a smaller job's core payload cut at every length and
 * resealed (valid length and CRC) is refused by the parser's own bounds
 * checks; random byte changes, resealed, are refused or yield a job that
 * runs on; version, magic and part names are checked. */
static void test_corrupt_payload(void **st)
{
    (void)st;
    setup su;
    stream s;
    store sto;
    midstream(&su, &s, &sto, "cpu_bottleneck", 1, 0);
    char err[1024];
    size_t clen, rlen;
    const uint8_t *core = store_get(&sto, "core", &clen);
    const uint8_t *rule = store_get(&sto, "rule.0", &rlen);
    uint8_t *buf = malloc(clen > rlen ? clen : rlen);
    assert_non_null(buf);

    tw_job *j = job_new(&su);
    store fresh;
    memset(&fresh, 0, sizeof(fresh));
    save(j, 0, &fresh);
    for (size_t n = 20; n < clen; n++) {
        memcpy(buf, core, n);
        reseal(buf, n);
        if (tw_job_restore_part(j, "core", buf, n, err, sizeof(err)) != TW_ERR)
            fail_msg("core payload cut to %zu of %zu bytes was accepted",
                     n - 20, clen - 20);
        assert_non_null(strstr(err, "'core'"));
    }
    store after;
    memset(&after, 0, sizeof(after));
    save(j, 0, &after);
    assert_same_store(&fresh, &after); /* still fresh */
    store_clear(&after);
    store_clear(&fresh);
    tw_job_free(j);

    rng = 12345;
    int accepted = 0;
    for (int k = 0; k < 200; k++) {
        memcpy(buf, core, clen);
        size_t at = 20 + (size_t)(rnd() % (clen - 20));
        buf[at] = (uint8_t)rnd();
        reseal(buf, clen);
        j = job_new(&su);
        if (tw_job_restore_part(j, "core", buf, clen, err, sizeof(err)) ==
            TW_OK) {
            accepted++;
            for (size_t i = s.n / 2; i < s.n / 2 + 3 && i < s.n; i++)
                feed(&su, j, &s, i);
            assert_int_equal(tw_job_finish(j, 0), TW_OK);
        } else {
            assert_non_null(strstr(err, "'core'"));
        }
        tw_job_free(j);
    }
    assert_true(accepted < 200); /* most changes hit structure */

    /* The rule part cut short inside the plugins' own bytes and resealed:
     * the host and plugins refuse it (sampled cut points, one fresh job
     * each, as a refused plugin may hold half its state). */
    size_t rstep = rlen / 150 + 1;
    for (size_t n = 20; n < rlen; n += rstep) {
        memcpy(buf, rule, n);
        reseal(buf, n);
        j = job_new(&su);
        int rc = tw_job_restore_part(j, "rule.0", buf, n, err, sizeof(err));
        if (rc == TW_OK)
            fail_msg("rule payload cut to %zu of %zu bytes was accepted",
                     n - 20, rlen - 20);
        assert_non_null(strstr(err, "'rule.0'"));
        tw_job_free(j);
    }

    /* Wrong version, wrong magic, unknown parts: named. */
    memcpy(buf, core, clen);
    buf[4] = 7; /* this engine reads versions 1 to 6 */
    j = job_new(&su);
    assert_int_equal(
        tw_job_restore_part(j, "core", buf, clen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "version 7"));
    assert_int_equal(
        tw_job_restore_part(j, "rule.0", core, clen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "'rule.0'"));
    assert_non_null(strstr(err, "magic"));
    assert_int_equal(
        tw_job_restore_part(j, "rule.1", rule, rlen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "only 1 rules"));
    assert_int_equal(
        tw_job_restore_part(j, "rule.01", rule, rlen, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "unknown part"));
    assert_int_equal(
        tw_job_restore_part(j, "windows", rule, rlen, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "'windows'"));
    assert_non_null(strstr(err, "magic"));
    assert_int_equal(
        tw_job_restore_part(j, "chunks.01", rule, rlen, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "unknown part"));
    /* Core twice: the second is refused (the job is no longer fresh). */
    assert_int_equal(
        tw_job_restore_part(j, "core", core, clen, err, sizeof(err)), TW_OK);
    assert_int_equal(
        tw_job_restore_part(j, "core", core, clen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "not fresh"));
    tw_job_free(j);

    free(buf);
    store_clear(&sto);
    tw_registry_free(su.reg);
    stream_free(&s);
}

static void test_mismatched_job(void **st)
{
    (void)st;
    setup su;
    stream s;
    store sto;
    midstream(&su, &s, &sto, "dataloader", 0, 1);
    char err[1024];
    size_t clen, rlen;
    const uint8_t *core = store_get(&sto, "core", &clen);
    const uint8_t *rule = store_get(&sto, "rule.0", &rlen);

    /* another job id */
    tw_job *j = NULL;
    assert_int_equal(
        tw_job_new("other", &su.cfg, su.reg, su.specs, 1, &j, err, sizeof(err)),
        TW_OK);
    assert_int_equal(
        tw_job_restore_part(j, "core", core, clen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "of job 'job'"));
    tw_job_free(j);

    /* another tick */
    tw_job_config cfg = su.cfg;
    cfg.tick_us = 30000000;
    assert_int_equal(
        tw_job_new("job", &cfg, su.reg, su.specs, 1, &j, err, sizeof(err)),
        TW_OK);
    assert_int_equal(
        tw_job_restore_part(j, "core", core, clen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "tick_us is 60000000 in the checkpoint"));
    tw_job_free(j);

    /* other rules: count in the core, name in the rule part */
    const tw_rule_spec two[] = {{.rule = "LowGPUUtilization"},
                                {.rule = "CPUBottleneck"}};
    assert_int_equal(
        tw_job_new("job", &su.cfg, su.reg, two, 2, &j, err, sizeof(err)),
        TW_OK);
    assert_int_equal(
        tw_job_restore_part(j, "core", core, clen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "rule count is 1 in the checkpoint, 2"));
    assert_int_equal(
        tw_job_restore_part(j, "rule.0", rule, rlen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "'rule.0'"));
    tw_job_free(j);
    const tw_rule_spec one[] = {{.rule = "LowGPUUtilization"}};
    assert_int_equal(
        tw_job_new("job", &su.cfg, su.reg, one, 1, &j, err, sizeof(err)),
        TW_OK);
    assert_int_equal(
        tw_job_restore_part(j, "rule.0", rule, rlen, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "holds rule 'ProfilerReport'"));
    assert_non_null(strstr(err, "'LowGPUUtilization'"));
    tw_job_free(j);

    /* a different window size for the aggregator: the core is refused
     * whole, before anything changed */
    const char *k[] = {"LowGPUUtilization_window"};
    const char *v[] = {"20"};
    tw_rule_spec small = {
        .rule = "ProfilerReport", .keys = k, .values = v, .nparams = 1};
    assert_int_equal(
        tw_job_new("job", &su.cfg, su.reg, &small, 1, &j, err, sizeof(err)),
        TW_OK);
    int rc = tw_job_restore_part(j, "core", core, clen, err, sizeof(err));
    if (rc == TW_ERR) {
        assert_non_null(strstr(err, "'core'"));
        assert_non_null(strstr(err, "ring holds 20"));
        tw_job_stats js;
        tw_job_get_stats(j, &js);
        assert_int_equal(js.batches, 0);
        assert_false(tw_job_dirty(j));
    }
    tw_job_free(j);

    store_clear(&sto);
    tw_registry_free(su.reg);
    stream_free(&s);
}

/* ---- out of order and redelivered across a checkpoint ----------------------
 */

static void test_out_of_order_across_checkpoint(void **st)
{
    (void)st;
    stream s;
    stream_load(&s, "low_gpu", 2, 0, 1, 0, 11);
    setup su;
    memset(&su, 0, sizeof(su));
    su.reg = tw_registry_new();
    tw_job_config_default(&su.cfg);
    su.specs = profiler_report;
    su.nspecs = 1;
    /* Find two consecutive system batches of one node in the middle, swap
     * them (within the 60 s lateness: adjacent minutes), and redeliver the
     * later one after both. */
    size_t a = s.n / 2, b;
    tw_batch *x = decode(&s.b[a]);
    while (x->nsamples == 0 && a + 1 < s.n) {
        tw_batch_free(x);
        x = decode(&s.b[++a]);
    }
    for (b = a + 1; b < s.n; b++) {
        tw_batch *y = decode(&s.b[b]);
        int same =
            y->nsamples > 0 && x->nsamples > 0 && strcmp(y->node, x->node) == 0;
        tw_batch_free(y);
        if (same)
            break;
    }
    tw_batch_free(x);
    assert_true(b < s.n);
    size_t n = s.n + 1;
    size_t *order = calloc(n, sizeof(size_t));
    assert_non_null(order);
    size_t o = 0, cut = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (i == a)
            continue; /* a comes after b */
        order[o++] = i;
        if (i == b) {
            cut = o; /* the checkpoint: b in, a not yet */
            order[o++] = a;
            order[o++] = b; /* redelivery */
        }
    }
    assert_int_equal(o, n);

    char *want = NULL;
    for (int pass = 0; pass < 2; pass++) {
        tw_job *j = job_new(&su);
        store sto;
        memset(&sto, 0, sizeof(sto));
        for (size_t i = 0; i < n; i++) {
            if (pass == 1 && i == cut) {
                save(j, 0, &sto);
                tw_job_free(j);
                j = restore(&su, &sto);
                store_clear(&sto);
            }
            assert_int_equal(tw_job_ingest(j, decode(&s.b[order[i]])), TW_OK);
        }
        tw_job_stats js;
        tw_job_get_stats(j, &js);
        assert_int_equal(js.duplicate_batches, 1);
        assert_int_equal(js.late_samples, 0);
        assert_int_equal(js.late_events, 0);
        finish(&su, j, &s);
        char *r = results(j);
        tw_job_free(j);
        if (pass == 0)
            want = r;
        else {
            assert_string_equal(want, r);
            free(r);
        }
    }
    /* and the swap mattered not at all versus the in-order stream */
    char *inorder = run_uninterrupted(&su, &s);
    char *p = strstr(inorder, "\"rules\"");
    char *q = strstr(want, "\"rules\"");
    assert_non_null(p);
    assert_non_null(q);
    assert_string_equal(p, q);
    free(inorder);
    free(want);
    free(order);
    tw_registry_free(su.reg);
    stream_free(&s);
}

/* ---- compressed parts and slices to a byte target ---------------------- */

/* A segmented ProfilerReport job over half of a 2-node healthy job, saved
 * after each batch (sto), with the given slices and target. */
static tw_job *half_job(setup *su, stream *s, store *sto, size_t slice,
                        size_t target, size_t *max_pend)
{
    stream_load(s, "healthy", 2, 0, 1, 0, 5);
    setup_profiler_report(su);
    su->segmented = 1;
    su->slice_bytes = slice;
    su->target_bytes = target;
    tw_job *j = job_new(su);
    memset(sto, 0, sizeof(*sto));
    save(j, 0, sto);
    *max_pend = 0;
    for (size_t i = 0; i < s->n / 2; i++) {
        feed(su, j, s, i);
        save(j, 1, sto);
        if (j->npend > *max_pend)
            *max_pend = j->npend;
    }
    return j;
}

/* Large parts are stored compressed (header flag 1) and restore to the
 * same job; the same payload stored plain restores too; a damaged frame,
 * one announcing more than 1 GiB and an unknown flag are refused, naming
 * the part. */
static void test_compressed_parts(void **st)
{
    (void)st;
    setup su;
    stream s;
    store sto;
    size_t max_pend;
    tw_job *j = half_job(&su, &s, &sto, 256, 0, &max_pend);
    store full;
    memset(&full, 0, sizeof(full));
    save(j, 0, &full);
    size_t compressed = 0, saved = 0, raw_total = 0;
    const char *zpart = NULL;
    for (size_t i = 0; i < full.n; i++) {
        if (full.data[i][6] != 1)
            continue;
        compressed++;
        size_t plen;
        uint8_t *p = plain_part(full.data[i], full.len[i], &plen);
        assert_true(plen > full.len[i] + full.len[i] / 8);
        saved += plen - full.len[i];
        raw_total += plen;
        if (strncmp(full.name[i], "chunks.", 7) == 0 || zpart == NULL)
            zpart = full.name[i];
        free(p);
    }
    assert_true(compressed > 0);
    assert_non_null(zpart);
    print_message("compressed parts: %zu, %zu of %zu bytes saved\n", compressed,
                  saved, raw_total);

    char *want = results(j);
    /* the compressed store and the same store with every part plain */
    store plain;
    memset(&plain, 0, sizeof(plain));
    for (size_t i = 0; i < full.n; i++) {
        size_t plen = full.len[i];
        uint8_t *p = full.data[i][6] == 1
                         ? plain_part(full.data[i], full.len[i], &plen)
                         : NULL;
        store_put(&plain, full.name[i], p != NULL ? p : full.data[i], plen);
        free(p);
    }
    for (int k = 0; k < 2; k++) {
        tw_job *r = restore(&su, k == 0 ? &full : &plain);
        char *got = results(r);
        assert_string_equal(want, got);
        free(got);
        tw_job_free(r);
    }

    /* damage inside the frame (CRC made right again): named, refused */
    size_t zlen;
    const uint8_t *z = store_get(&full, zpart, &zlen);
    uint8_t *bad = malloc(zlen);
    assert_non_null(bad);
    char err[1024];
    int refused = 0;
    for (size_t at = 20 + 4; at < zlen; at += zlen / 40 + 1) {
        tw_job *r = job_new(&su);
        memcpy(bad, z, zlen);
        bad[at] ^= 0x5a;
        reseal(bad, zlen);
        /* a fresh job: the part's own checks run after the core's */
        const uint8_t *core;
        size_t clen;
        core = store_get(&full, "core", &clen);
        assert_int_equal(
            tw_job_restore_part(r, "core", core, clen, err, sizeof(err)),
            TW_OK);
        if (tw_job_restore_part(r, zpart, bad, zlen, err, sizeof(err)) !=
            TW_OK) {
            refused++;
            assert_non_null(strstr(err, zpart));
        }
        tw_job_free(r);
    }
    assert_true(refused > 0);

    /* a frame that announces 2 GiB: refused before any allocation */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    assert_non_null(cc);
    assert_false(ZSTD_isError(
        ZSTD_CCtx_setPledgedSrcSize(cc, (unsigned long long)2 << 30)));
    uint8_t frame[256];
    ZSTD_outBuffer ob = {frame, sizeof(frame), 0};
    ZSTD_inBuffer ib = {"abcd", 4, 0};
    assert_false(
        ZSTD_isError(ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_flush)));
    ZSTD_freeCCtx(cc);
    uint8_t bomb[20 + sizeof(frame)];
    memcpy(bomb, z, 20);
    memcpy(bomb + 20, frame, ob.pos);
    reseal(bomb, 20 + ob.pos);
    tw_job *r = job_new(&su);
    assert_int_equal(
        tw_job_restore_part(r, zpart, bomb, 20 + ob.pos, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "announces 2147483648 bytes"));
    assert_non_null(strstr(err, zpart));
    /* an unknown header flag */
    memcpy(bad, z, zlen);
    bad[6] = 3;
    assert_int_equal(tw_job_restore_part(r, zpart, bad, zlen, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "header flags 3 unknown"));
    tw_job_free(r);

    free(bad);
    free(want);
    store_clear(&plain);
    store_clear(&full);
    store_clear(&sto);
    tw_job_free(j);
    tw_registry_free(su.reg);
    stream_free(&s);
}

/* Slices per save: one without a target; with one, as many as fit beside
 * the save's other parts; and paced, so a snapshot lands before the next
 * scan's (without pacing, 64-byte slices one a save fall scans behind). */
static void test_slices_to_target(void **st)
{
    (void)st;
    size_t most[3] = {0, 0, 0}, pend[3];
    const size_t target[3] = {0, 16384, 1};
    for (int mode = 0; mode < 3; mode++) {
        setup su;
        stream s;
        store sto;
        stream_load(&s, "healthy", 2, 0, 1, 0, 5);
        setup_profiler_report(&su);
        su.segmented = 1;
        su.slice_bytes = 64;
        su.target_bytes = target[mode];
        tw_job *j = job_new(&su);
        memset(&sto, 0, sizeof(sto));
        save(j, 0, &sto);
        pend[mode] = 0;
        for (size_t i = 0; i < s.n; i++) {
            feed(&su, j, &s, i);
            save(j, 1, &sto);
            size_t k = 0, sliced = 0;
            for (const char *p = sto.emitted_names; (p = strstr(p, "state."));
                 p++) {
                char name[32];
                size_t n = strcspn(p, ",");
                snprintf(name, sizeof(name), "%.*s", (int)n, p);
                for (size_t q = 0; q < sto.n; q++)
                    if (strcmp(sto.name[q], name) == 0) { /* not removed */
                        sliced += sto.len[q];
                        k++;
                    }
            }
            if (k > most[mode])
                most[mode] = k;
            if (mode == 0)
                assert_true(k <= 1 || j->snap == NULL); /* or a whole one */
            /* the slices beyond the first fit in the target (beside the
             * input the save estimated) */
            if (mode == 1 && k > 1 && k > j->snap_min)
                assert_true(sliced <= target[mode]);
            if (j->npend > pend[mode])
                pend[mode] = j->npend;
        }
        print_message("target %zu: at most %zu slices a save, %zu scans "
                      "waiting for a snapshot\n",
                      target[mode], most[mode], pend[mode]);
        tw_job_free(j);
        store_clear(&sto);
        tw_registry_free(su.reg);
        stream_free(&s);
    }
    assert_true(most[1] > 1);
    /* paced (mode 2) the snapshot keeps up; one slice a save it does not */
    assert_true(pend[2] <= 2);
    assert_true(pend[0] > pend[2]);
}

int main(void)
{
    tw_log_set_level(TW_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_dirty),
        cmocka_unit_test(test_truncated_and_flipped),
        cmocka_unit_test(test_corrupt_payload),
        cmocka_unit_test(test_mismatched_job),
        cmocka_unit_test(test_out_of_order_across_checkpoint),
        cmocka_unit_test(test_cpu_bottleneck),
        cmocka_unit_test(test_compact_edge_values),
        cmocka_unit_test(test_segmented_incremental),
        cmocka_unit_test(test_compressed_parts),
        cmocka_unit_test(test_slices_to_target),
        cmocka_unit_test(test_replay_skips_later_batches),
        cmocka_unit_test(test_restored_events_share_strings),
        cmocka_unit_test(test_low_gpu_two_nodes),
        cmocka_unit_test(test_healthy_eval_mode),
        cmocka_unit_test(test_dataloader_framework),
        cmocka_unit_test(test_step_outliers_separate_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
