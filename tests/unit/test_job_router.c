/* test_job_router.c - the daemon's job router (job_router.h) driven
 * directly with decoded batches, no Kafka: routing by job, job lifecycle
 * (start marker / seq 1, end marker, idle expiry, joined mid-stream),
 * commit points and their metadata, dead letters, alert ids and their
 * determinism, checkpoint -> new router -> resume on the memory store
 * (with its snapshot file), revoke and reassign, duplicates, and an
 * assignment while a real redis-server is down (loaded once it is back).
 *
 * Streams: two synth jobs (tw_synth_write) read by the agent-file reader,
 * numbered per node as replay numbers them, framed by a JOB_START and a
 * JOB_END marker from node "replay", and kept wire-encoded so every feed
 * decodes its own copy (the router takes the batches it routes). The
 * reference for each job is the same messages evaluated alone by a tw_job
 * and an alert tracker, its results written by job_results.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alert.h"
#include "job_results.h"
#include "job_router.h"
#include "json_writer.h"
#include "log.h"
#include "reader.h"
#include "redis_test_util.h"
#include "synth.h"
#include "wire.h"

#define IDLE_US 600000000LL /* engine.job_idle in these tests: 10 min */

/* ---- streams ------------------------------------------------------------ */

typedef struct msg {
    uint8_t *data;
    size_t len;
} msg;

typedef struct jobstream {
    char id[16];
    msg *m;
    size_t n, cap;
    char nodes[8][32];
    uint64_t next_seq[8];
    size_t nnodes;
} jobstream;

static void add_msg(jobstream *s, const tw_batch *b)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->m = realloc(s->m, s->cap * sizeof(msg));
        assert_non_null(s->m);
    }
    msg *x = &s->m[s->n++];
    tw_wire_status st = tw_wire_encode(b, &x->data, &x->len);
    if (st != TW_WIRE_OK)
        fail_msg("encode: %s", tw_wire_status_name(st));
}

static int collect(void *ud, tw_batch *b)
{
    jobstream *s = ud;
    size_t i;
    for (i = 0; i < s->nnodes; i++)
        if (strcmp(s->nodes[i], b->node) == 0)
            break;
    if (i == s->nnodes) {
        assert_true(s->nnodes < 8);
        snprintf(s->nodes[i], sizeof(s->nodes[i]), "%s", b->node);
        s->next_seq[i] = 1;
        s->nnodes++;
    }
    b->seq = s->next_seq[i]++;
    add_msg(s, b);
    tw_batch_free(b);
    return TW_OK;
}

/* A batch of its own holding one marker, as replay sends it. */
static void add_marker(jobstream *s, tw_marker_kind kind, uint64_t seq,
                       int64_t time_us, int64_t latest_us)
{
    tw_marker m = {.kind = kind, .time_us = time_us, .latest_us = latest_us};
    tw_batch b;
    memset(&b, 0, sizeof(b));
    b.job = s->id;
    b.node = "replay";
    b.seq = seq;
    b.file_ts_us = time_us;
    b.markers = &m;
    b.nmarkers = 1;
    add_msg(s, &b);
}

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* START, the folder's batches in feed order, END (L from the listing). */
static void stream_load(jobstream *s, const char *id, const char *preset,
                        uint32_t nodes, uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", id);
    char dir[] = "/tmp/tw_router_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[sizeof(dir) + 8];
    snprintf(out, sizeof(out), "%s/out", dir);
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = out;
    o.preset = preset;
    o.nodes = nodes;
    o.framework = 0;
    o.cores = 1; /* fewer series: quicker under valgrind */
    o.seed = seed;
    char err[512];
    if (tw_synth_opts_resolve(&o, err, sizeof(err)) != 0 ||
        tw_synth_write(&o, NULL, err, sizeof(err)) != 0)
        fail_msg("synth %s: %s", preset, err);
    tw_folder *f;
    if (tw_folder_list(out, &f, err, sizeof(err)) != TW_OK)
        fail_msg("list: %s", err);
    add_marker(s, TW_MARKER_JOB_START, 1, f->first_system_ts_us, 0);
    tw_trace_state *ts = tw_trace_state_new();
    assert_non_null(ts);
    for (size_t i = 0; i < f->nfiles; i++)
        assert_int_equal(tw_folder_read_file(&f->files[i], id, ts, collect, s,
                                             NULL, NULL, NULL),
                         TW_OK);
    add_marker(s, TW_MARKER_JOB_END, 2, f->latest_system_ts_us,
               f->latest_system_ts_us);
    tw_trace_state_free(ts);
    tw_folder_free(f);
    rm_tree(dir);
    assert_true(s->n > 10);
}

static void stream_free(jobstream *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->m[i].data);
    free(s->m);
}

static tw_batch *decode(const msg *x)
{
    tw_batch *b = NULL;
    char err[256];
    if (tw_wire_decode(x->data, x->len, &b, err, sizeof(err)) != TW_WIRE_OK)
        fail_msg("decode: %s", err);
    return b;
}

/* ---- alerts as the callback sees them ----------------------------------- */

typedef struct alert {
    char job[16];
    char id[TW_ALERT_ID_LEN + 1];
    char *json;
    int32_t partition;
    int64_t offset;
} alert;

typedef struct sink {
    alert *a;
    size_t n, cap;
} sink;

static void sink_add(sink *k, const char *job, const char *id, const char *json,
                     size_t len, int32_t partition, int64_t offset)
{
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 64;
        k->a = realloc(k->a, k->cap * sizeof(alert));
        assert_non_null(k->a);
    }
    alert *a = &k->a[k->n++];
    snprintf(a->job, sizeof(a->job), "%s", job);
    snprintf(a->id, sizeof(a->id), "%s", id);
    a->json = malloc(len + 1);
    assert_non_null(a->json);
    memcpy(a->json, json, len);
    a->json[len] = '\0';
    a->partition = partition;
    a->offset = offset;
}

static void sink_clear(sink *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->a[i].json);
    free(k->a);
    memset(k, 0, sizeof(*k));
}

static int on_alert(void *ud, const char *job, const char *id, const char *json,
                    size_t len, int32_t partition, int64_t offset,
                    const tw_alert_facts *facts)
{
    (void)facts;
    sink_add(ud, job, id, json, len, partition, offset);
    return TW_OK;
}

static int on_tracker_alert(void *ud, const char *job, const char *id,
                            const char *json, size_t len,
                            const tw_alert_facts *facts)
{
    (void)facts;
    sink_add(ud, job, id, json, len, -1, -1);
    return TW_OK;
}

static size_t count_job(const sink *k, const char *job)
{
    size_t n = 0;
    for (size_t i = 0; i < k->n; i++)
        n += strcmp(k->a[i].job, job) == 0;
    return n;
}

/* The alerts of `job` in got, in order, are exactly want's (which holds
 * only that job's alerts), starting at want's alert `from`. */
static void assert_job_alerts(const sink *got, const char *job,
                              const sink *want, size_t from)
{
    size_t w = from;
    for (size_t i = 0; i < got->n; i++) {
        if (strcmp(got->a[i].job, job) != 0)
            continue;
        if (w >= want->n)
            fail_msg("job %s: alert %zu (%s) beyond the %zu expected", job, w,
                     got->a[i].id, want->n);
        assert_string_equal(got->a[i].id, want->a[w].id);
        assert_string_equal(got->a[i].json, want->a[w].json);
        w++;
    }
    if (w != want->n)
        fail_msg("job %s: %zu alerts, %zu expected", job, w - from,
                 want->n - from);
}

static void assert_ids_distinct(const sink *k)
{
    for (size_t i = 0; i < k->n; i++)
        for (size_t j = i + 1; j < k->n; j++)
            if (strcmp(k->a[i].id, k->a[j].id) == 0)
                fail_msg("alert id %s sent twice (%zu and %zu)", k->a[i].id, i,
                         j);
}

/* ---- fixture: two jobs and their references ----------------------------- */

/* The jobs are system metrics only: init_grace 0 judges them from their
 * start (fixed semantics would wait 30 minutes for a first step). */
static const char *const grace_key[] = {"init_grace"};
static const char *const grace_zero[] = {"0"};
static const tw_rule_spec rules[] = {{.rule = "LowGPUUtilization",
                                      .keys = grace_key,
                                      .values = grace_zero,
                                      .nparams = 1},
                                     {.rule = "CPUBottleneck",
                                      .keys = grace_key,
                                      .values = grace_zero,
                                      .nparams = 1}};
#define NRULES (sizeof(rules) / sizeof(rules[0]))

typedef struct reference {
    char *results; /* the results file's bytes */
    sink alerts;
} reference;

typedef struct fixture {
    tw_registry *reg;
    tw_job_config jcfg;
    jobstream a, b;
    reference ref_a, ref_b;
    reference ref_a_bare; /* a's data without its markers, idle finish */
} fixture;

typedef struct ref_ctx {
    tw_alert_tracker *t;
} ref_ctx;

static void ref_on_scan(void *ud, tw_job *job, const tw_scan *scan)
{
    ref_ctx *c = ud;
    assert_int_equal(tw_alert_tracker_scan(c->t, job, scan), TW_OK);
}

static char *results_text(tw_job *job)
{
    tw_json *j = tw_json_new();
    assert_non_null(j);
    assert_int_equal(tw_job_results_write(j, job), TW_OK);
    size_t len = tw_json_len(j);
    char *s = malloc(len + 2);
    assert_non_null(s);
    memcpy(s, tw_json_str(j), len);
    s[len] = '\n';
    s[len + 1] = '\0';
    tw_json_free(j);
    return s;
}

/* Messages [from, to) of s evaluated by one job alone, as the router
 * evaluates a job: F from the start marker, finish at the end marker (or
 * with L = 0 when there is none, as the idle expiry does). */
static void reference_eval(const fixture *fx, const jobstream *s, size_t from,
                           size_t to, reference *out)
{
    memset(out, 0, sizeof(*out));
    tw_job *job = NULL;
    char err[1024];
    if (tw_job_new(s->id, &fx->jcfg, fx->reg, rules, NRULES, &job, err,
                   sizeof(err)) != TW_OK)
        fail_msg("tw_job_new: %s", err);
    ref_ctx c = {.t = tw_alert_tracker_new(on_tracker_alert, &out->alerts)};
    assert_non_null(c.t);
    tw_job_on_scan(job, ref_on_scan, &c);
    int ended = 0;
    for (size_t i = from; i < to; i++) {
        tw_batch *b = decode(&s->m[i]);
        int64_t latest = 0;
        int end = 0;
        for (size_t k = 0; k < b->nmarkers; k++) {
            if (b->markers[k].kind == TW_MARKER_JOB_START &&
                b->markers[k].time_us > 0)
                tw_job_set_first_timestamp(job, b->markers[k].time_us);
            if (b->markers[k].kind == TW_MARKER_JOB_END) {
                end = 1;
                latest = b->markers[k].latest_us;
            }
        }
        assert_int_equal(tw_job_ingest(job, b), TW_OK);
        if (end) {
            assert_int_equal(tw_job_finish(job, latest), TW_OK);
            ended = 1;
            break;
        }
    }
    if (!ended)
        assert_int_equal(tw_job_finish(job, 0), TW_OK);
    assert_int_equal(tw_alert_tracker_finish(c.t, job), TW_OK);
    out->results = results_text(job);
    tw_alert_tracker_free(c.t);
    tw_job_free(job);
}

static void reference_free(reference *r)
{
    free(r->results);
    sink_clear(&r->alerts);
}

static int kinds_in(const sink *k, const char *kind)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"kind\":\"%s\"", kind);
    int n = 0;
    for (size_t i = 0; i < k->n; i++)
        n += strstr(k->a[i].json, pat) != NULL;
    return n;
}

static int group_setup(void **state)
{
    fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    fx->reg = tw_registry_new();
    assert_non_null(fx->reg);
    tw_job_config_default(&fx->jcfg);
    stream_load(&fx->a, "job-a", "low_gpu", 2, 3);
    stream_load(&fx->b, "job-b", "cpu_bottleneck", 1, 4);
    reference_eval(fx, &fx->a, 0, fx->a.n, &fx->ref_a);
    reference_eval(fx, &fx->b, 0, fx->b.n, &fx->ref_b);
    reference_eval(fx, &fx->a, 1, fx->a.n - 1, &fx->ref_a_bare);
    /* the references hold both kinds of alert, or the comparisons below
     * would prove little */
    assert_true(kinds_in(&fx->ref_a.alerts, "finding") > 0);
    assert_true(kinds_in(&fx->ref_b.alerts, "finding") > 0);
    assert_true(kinds_in(&fx->ref_a.alerts, "status") > (int)NRULES);
    *state = fx;
    return 0;
}

static int group_teardown(void **state)
{
    fixture *fx = *state;
    reference_free(&fx->ref_a);
    reference_free(&fx->ref_b);
    reference_free(&fx->ref_a_bare);
    stream_free(&fx->a);
    stream_free(&fx->b);
    tw_registry_free(fx->reg);
    free(fx);
    return 0;
}

/* ---- a partition log ---------------------------------------------------- */

/* One message of a partition: a job's message, or a dead letter. */
typedef struct entry {
    const jobstream *s; /* NULL: a dead letter */
    size_t i;
} entry;

typedef struct plog {
    entry e[1024];
    size_t n;
    int64_t base; /* offset of e[0] */
} plog;

static void plog_add(plog *l, const jobstream *s, size_t i)
{
    assert_true(l->n < sizeof(l->e) / sizeof(l->e[0]));
    l->e[l->n++] = (entry){.s = s, .i = i};
}

/* a and b alternating, b starting `lag` messages after a. */
static void plog_interleave(plog *l, const jobstream *a, const jobstream *b,
                            size_t lag, int64_t base)
{
    memset(l, 0, sizeof(*l));
    l->base = base;
    size_t i = 0, j = 0;
    while (i < a->n || j < b->n) {
        if (i < a->n)
            plog_add(l, a, i++);
        if (i > lag && j < b->n)
            plog_add(l, b, j++);
    }
}

/* ---- routers ------------------------------------------------------------ */

typedef struct run {
    tw_router *r;
    sink alerts;
    char dir[64]; /* results folder */
    int64_t now;
} run;

static void run_open_with(run *x, const fixture *fx, tw_store *store,
                          tw_on_data_loss on_loss)
{
    memset(x, 0, sizeof(*x));
    snprintf(x->dir, sizeof(x->dir), "/tmp/tw_router_res_XXXXXX");
    assert_non_null(mkdtemp(x->dir));
    x->now = 1000000;
    tw_router_config c = {.job = fx->jcfg,
                          .reg = fx->reg,
                          .rules = rules,
                          .nrules = NRULES,
                          .job_idle_us = IDLE_US,
                          .results_dir = x->dir,
                          .store = store,
                          .topic = "metrics",
                          .on_data_loss = on_loss};
    char err[512];
    if (tw_router_new(&c, on_alert, &x->alerts, &x->r, err, sizeof(err)) !=
        TW_OK)
        fail_msg("tw_router_new: %s", err);
}

static void run_open(run *x, const fixture *fx, tw_store *store)
{
    run_open_with(x, fx, store, TW_ON_DATA_LOSS_EVALUATE);
}

/* Frees the router (a crash, as far as the store is concerned). */
static void run_drop_router(run *x)
{
    tw_router_free(x->r);
    x->r = NULL;
}

static void run_close(run *x)
{
    tw_router_free(x->r);
    sink_clear(&x->alerts);
    rm_tree(x->dir);
}

static tw_router_stats stats(const run *x)
{
    tw_router_stats s;
    tw_router_get_stats(x->r, &s);
    return s;
}

/* <dir>/<job>.json, malloc'd, or NULL when there is none. */
static char *results_file(const run *x, const char *job)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s.json", x->dir, job);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (len + n + 1 > cap) {
            cap = 2 * (len + n + 1);
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf == NULL)
        buf = calloc(1, 1);
    else
        buf[len] = '\0';
    return buf;
}

static void assert_results(const run *x, const char *job, const reference *ref)
{
    char *got = results_file(x, job);
    if (got == NULL)
        fail_msg("no results file for %s", job);
    assert_string_equal(got, ref->results);
    free(got);
}

static void assert_no_results(const run *x, const char *job)
{
    char *got = results_file(x, job);
    if (got != NULL) {
        free(got);
        fail_msg("job %s has a results file", job);
    }
}

/* <dir>/<job>.html exists (1) or not (0). */
static int report_exists(const run *x, const char *job)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s.html", x->dir, job);
    return access(path, F_OK) == 0;
}

static void assert_no_report(const run *x, const char *job)
{
    if (report_exists(x, job))
        fail_msg("job %s has an HTML report though report_html is off", job);
}

/* Routes log entry k (with a store, flushes the alerts it queued). */
static int feed_rc(run *x, int32_t part, const plog *l, size_t k)
{
    int64_t off = l->base + (int64_t)k;
    x->now += 1000;
    if (l->e[k].s == NULL) {
        tw_router_dead_letter(x->r, part, off);
        return TW_OK;
    }
    int rc = tw_router_batch(x->r, part, off, decode(&l->e[k].s->m[l->e[k].i]),
                             x->now);
    if (rc == TW_OK) {
        char err[512];
        if (tw_router_flush_alerts(x->r, err, sizeof(err)) != TW_OK)
            fail_msg("flush: %s", err);
    }
    return rc;
}

/* Idle finalization, then what the daemon does next: send its alerts. */
static int expire(run *x, int64_t now)
{
    int rc = tw_router_expire(x->r, now);
    char err[512];
    if (rc == TW_OK && tw_router_flush_alerts(x->r, err, sizeof(err)) != TW_OK)
        fail_msg("flush: %s", err);
    return rc;
}

static void feed(run *x, int32_t part, const plog *l, size_t from, size_t to)
{
    for (size_t k = from; k < to; k++)
        assert_int_equal(feed_rc(x, part, l, k), TW_OK);
}

static void assign(run *x, int32_t part, const char *meta, int64_t committed,
                   int64_t *start)
{
    char err[512];
    int64_t s;
    if (tw_router_assign(x->r, part, meta, committed, &s, err, sizeof(err)) !=
        TW_OK)
        fail_msg("assign: %s", err);
    if (start != NULL)
        *start = s;
}

/* Every alert was sent on `part` at an offset of a message of its own job
 * in l, or with -1/-1 (idle finalization) when idle_ok. */
static void assert_alert_sources(const sink *k, int32_t part, const plog *l,
                                 int idle_ok)
{
    for (size_t i = 0; i < k->n; i++) {
        const alert *a = &k->a[i];
        if (a->offset == -1 && idle_ok) {
            assert_int_equal(a->partition, -1);
            continue;
        }
        assert_int_equal(a->partition, part);
        assert_true(a->offset >= l->base &&
                    a->offset < l->base + (int64_t)l->n);
        const entry *e = &l->e[a->offset - l->base];
        assert_non_null(e->s);
        assert_string_equal(e->s->id, a->job);
    }
}

/* ---- routing by job ----------------------------------------------------- */

/* Two jobs interleaved on one partition: each job's results and alerts are
 * what evaluating it alone gives; statistics add up. */
static void test_two_jobs_interleaved(void **state)
{
    fixture *fx = *state;
    plog l;
    plog_interleave(&l, &fx->a, &fx->b, 3, 500);
    run x;
    run_open(&x, fx, NULL);
    int64_t start;
    assign(&x, 0, NULL, -1, &start);
    assert_int_equal(start, -2); /* nothing committed: the beginning */
    feed(&x, 0, &l, 0, l.n);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.batches, l.n);
    assert_int_equal(st.jobs_started, 2);
    assert_int_equal(st.jobs_finished, 2);
    assert_int_equal(st.jobs_idle, 0);
    assert_int_equal(st.jobs_active, 0);
    assert_int_equal(st.duplicates, 0);
    assert_int_equal(st.alerts_sent, x.alerts.n);
    assert_int_equal(x.alerts.n, fx->ref_a.alerts.n + fx->ref_b.alerts.n);
    assert_results(&x, "job-a", &fx->ref_a);
    assert_results(&x, "job-b", &fx->ref_b);
    assert_no_report(&x, "job-a"); /* report_html off in this router */
    assert_job_alerts(&x.alerts, "job-a", &fx->ref_a.alerts, 0);
    assert_job_alerts(&x.alerts, "job-b", &fx->ref_b.alerts, 0);
    assert_alert_sources(&x.alerts, 0, &l, 0);
    /* the final alerts of a job carry its end marker's offset */
    const alert *last = &x.alerts.a[x.alerts.n - 1];
    const entry *e = &l.e[last->offset - l.base];
    assert_int_equal(e->i, e->s->n - 1);
    assert_non_null(strstr(last->json, "\"final\":true"));
    run_close(&x);
}

/* report_html on: each finished job's <name>.html lies next to its
 * results file and names the job; the results file is unchanged. */
static void test_report_html_written(void **state)
{
    fixture *fx = *state;
    plog l;
    plog_interleave(&l, &fx->a, &fx->b, 3, 500);
    run x;
    memset(&x, 0, sizeof(x));
    snprintf(x.dir, sizeof(x.dir), "/tmp/tw_router_res_XXXXXX");
    assert_non_null(mkdtemp(x.dir));
    x.now = 1000000;
    tw_router_config c = {.job = fx->jcfg,
                          .reg = fx->reg,
                          .rules = rules,
                          .nrules = NRULES,
                          .job_idle_us = IDLE_US,
                          .results_dir = x.dir,
                          .report_html = 1,
                          .topic = "metrics"};
    char err[512];
    if (tw_router_new(&c, on_alert, &x.alerts, &x.r, err, sizeof(err)) != TW_OK)
        fail_msg("tw_router_new: %s", err);
    int64_t start;
    assign(&x, 0, NULL, -1, &start);
    feed(&x, 0, &l, 0, l.n);
    assert_int_equal(stats(&x).jobs_finished, 2);
    assert_results(&x, "job-a", &fx->ref_a);
    assert_true(report_exists(&x, "job-a"));
    assert_true(report_exists(&x, "job-b"));
    char path[128];
    snprintf(path, sizeof(path), "%s/job-b.html", x.dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char head[4096];
    size_t n = fread(head, 1, sizeof(head) - 1, f);
    head[n] = '\0';
    fclose(f);
    assert_non_null(strstr(head, "Training job report: job-b"));
    run_close(&x);
}

/* Alert ids are distinct, and the same batches through a new router give
 * byte-identical alerts in the same order (with the same sources). */
static void test_alerts_deterministic(void **state)
{
    fixture *fx = *state;
    plog l;
    plog_interleave(&l, &fx->a, &fx->b, 5, 0);
    run x, y;
    run_open(&x, fx, NULL);
    feed(&x, 7, &l, 0, l.n);
    run_open(&y, fx, NULL);
    feed(&y, 7, &l, 0, l.n);
    assert_true(x.alerts.n > 2 * NRULES);
    assert_ids_distinct(&x.alerts);
    assert_int_equal(x.alerts.n, y.alerts.n);
    for (size_t i = 0; i < x.alerts.n; i++) {
        assert_string_equal(x.alerts.a[i].job, y.alerts.a[i].job);
        assert_string_equal(x.alerts.a[i].id, y.alerts.a[i].id);
        assert_string_equal(x.alerts.a[i].json, y.alerts.a[i].json);
        assert_int_equal(x.alerts.a[i].partition, y.alerts.a[i].partition);
        assert_int_equal(x.alerts.a[i].offset, y.alerts.a[i].offset);
        /* the id in the JSON is the id handed over */
        char pat[64];
        snprintf(pat, sizeof(pat), "{\"id\":\"%s\"", x.alerts.a[i].id);
        assert_true(strncmp(x.alerts.a[i].json, pat, strlen(pat)) == 0);
    }
    /* the partition a message came on is the unassigned one it named */
    int32_t parts[4];
    assert_int_equal(tw_router_partitions(x.r, parts, 4), 1);
    assert_int_equal(parts[0], 7);
    run_close(&x);
    run_close(&y);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void assert_no_alerts_for(const sink *k, const char *job)
{
    assert_int_equal(count_job(k, job), 0);
}

/* A job is created by its first message with seq 1 even without a start
 * marker; without an end marker it lives until job_idle of wall time has
 * passed since its newest message, then finishes as evaluated alone with
 * L from the data. */
static void test_created_by_seq1_expired_idle(void **state)
{
    fixture *fx = *state;
    plog l;
    memset(&l, 0, sizeof(l));
    for (size_t i = 1; i + 1 < fx->a.n; i++)
        plog_add(&l, &fx->a, i);
    run x;
    run_open(&x, fx, NULL);
    feed(&x, 0, &l, 0, 1);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.jobs_started, 1);
    assert_int_equal(st.jobs_active, 1);
    feed(&x, 0, &l, 1, l.n);
    int64_t last = x.now;
    assert_int_equal(expire(&x, last + IDLE_US - 1), TW_OK);
    st = stats(&x);
    assert_int_equal(st.jobs_active, 1);
    assert_int_equal(st.jobs_finished, 0);
    assert_no_results(&x, "job-a");
    size_t before = x.alerts.n;
    assert_int_equal(expire(&x, last + IDLE_US), TW_OK);
    st = stats(&x);
    assert_int_equal(st.jobs_active, 0);
    assert_int_equal(st.jobs_finished, 1);
    assert_int_equal(st.jobs_idle, 1);
    assert_results(&x, "job-a", &fx->ref_a_bare);
    assert_job_alerts(&x.alerts, "job-a", &fx->ref_a_bare.alerts, 0);
    /* the finalization's alerts name no message */
    assert_true(x.alerts.n > before);
    for (size_t i = before; i < x.alerts.n; i++) {
        assert_int_equal(x.alerts.a[i].partition, -1);
        assert_int_equal(x.alerts.a[i].offset, -1);
    }
    assert_alert_sources(&x.alerts, 0, &l, 1);
    /* a later message of the finished job is not a new job */
    assert_int_equal(tw_router_batch(x.r, 0, l.base + (int64_t)l.n,
                                     decode(&fx->a.m[1]), x.now + 1),
                     TW_OK);
    st = stats(&x);
    assert_int_equal(st.jobs_started, 1);
    assert_int_equal(st.after_end, 1);
    run_close(&x);
}

/* A start marker creates the job whatever its seq; the end marker
 * finalizes it at once. */
static void test_created_by_start_marker(void **state)
{
    fixture *fx = *state;
    jobstream s;
    memset(&s, 0, sizeof(s));
    snprintf(s.id, sizeof(s.id), "job-m");
    add_marker(&s, TW_MARKER_JOB_START, 41, 1700000000000000LL, 0);
    add_marker(&s, TW_MARKER_JOB_END, 42, 1700000100000000LL,
               1700000100000000LL);
    plog l;
    memset(&l, 0, sizeof(l));
    plog_add(&l, &s, 0);
    plog_add(&l, &s, 1);
    run x;
    run_open(&x, fx, NULL);
    feed(&x, 0, &l, 0, 1);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.jobs_started, 1);
    assert_int_equal(st.jobs_skipped_partial, 0);
    assert_int_equal(st.jobs_active, 1);
    feed(&x, 0, &l, 1, 2);
    st = stats(&x);
    assert_int_equal(st.jobs_finished, 1);
    assert_int_equal(st.jobs_idle, 0);
    assert_int_equal(st.jobs_active, 0);
    char *res = results_file(&x, "job-m");
    assert_non_null(res);
    assert_non_null(strstr(res, "\"job\""));
    free(res);
    /* one final status alert per rule, nothing else */
    assert_int_equal(x.alerts.n, NRULES);
    for (size_t i = 0; i < x.alerts.n; i++)
        assert_non_null(strstr(x.alerts.a[i].json, "\"final\":true"));
    run_close(&x);
    stream_free(&s);
}

/* a's second half interleaved with all of b, on partition 0. */
static void plog_a_from_middle(plog *l, const fixture *fx, size_t *cut)
{
    *cut = fx->a.n / 2;
    memset(l, 0, sizeof(*l));
    size_t j = 0;
    for (size_t i = *cut; i < fx->a.n; i++) {
        plog_add(l, &fx->a, i);
        if (j < fx->b.n)
            plog_add(l, &fx->b, j++);
    }
    while (j < fx->b.n)
        plog_add(l, &fx->b, j++);
}

/* A job first seen with seq != 1 and no start marker, read from the log's
 * beginning (nothing committed): its start was lost (the broker truncated
 * the log), not finished by anyone. With engine.on_data_loss: skip all its
 * messages, end marker included, are skipped and counted; no results, no
 * alerts. Another job on the partition is unaffected. */
static void test_joined_mid_stream_skipped(void **state)
{
    fixture *fx = *state;
    size_t cut;
    plog l;
    plog_a_from_middle(&l, fx, &cut);
    run x;
    run_open_with(&x, fx, NULL, TW_ON_DATA_LOSS_SKIP);
    feed(&x, 0, &l, 0, l.n);
    assert_int_equal(expire(&x, x.now + 2 * IDLE_US), TW_OK);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.jobs_data_loss, 1);
    assert_int_equal(st.jobs_skipped_partial, 1);
    assert_int_equal(st.jobs_finished_before, 0);
    assert_int_equal(st.skipped_messages, fx->a.n - cut);
    assert_int_equal(st.jobs_started, 1);
    assert_int_equal(st.jobs_finished, 1);
    assert_int_equal(st.samples + st.events > 0, 1);
    assert_no_results(&x, "job-a");
    assert_no_alerts_for(&x.alerts, "job-a");
    assert_results(&x, "job-b", &fx->ref_b);
    assert_job_alerts(&x.alerts, "job-b", &fx->ref_b.alerts, 0);
    run_close(&x);
}

/* The same stream with the default (evaluate): job-a is evaluated from
 * what is left and marked partial - results name the lost beginning and
 * the node's missing sequence numbers, its final alerts say partial - and
 * job-b is complete and unmarked. */
static void test_joined_mid_stream_partial(void **state)
{
    fixture *fx = *state;
    size_t cut;
    plog l;
    plog_a_from_middle(&l, fx, &cut);
    run x;
    run_open(&x, fx, NULL);
    feed(&x, 0, &l, 0, l.n);
    assert_int_equal(expire(&x, x.now + 2 * IDLE_US), TW_OK);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.jobs_data_loss, 1);
    assert_int_equal(st.jobs_skipped_partial, 0);
    assert_int_equal(st.jobs_partial, 1);
    assert_int_equal(st.jobs_finished, 2);
    char *res = results_file(&x, "job-a");
    assert_non_null(res);
    assert_non_null(strstr(res, "\"partial\": true"));
    assert_non_null(strstr(res, "\"kind\": \"joined_mid_stream\""));
    assert_non_null(strstr(res, "\"kind\": \"sequence_gap\""));
    free(res);
    size_t finals = 0;
    for (size_t i = 0; i < x.alerts.n; i++) {
        const alert *a = &x.alerts.a[i];
        int final = strstr(a->json, "\"final\":true") != NULL;
        int partial = strstr(a->json, "\"partial\":true") != NULL;
        if (strcmp(a->job, "job-a") == 0 && final) {
            assert_true(partial);
            finals++;
        } else {
            assert_false(partial);
        }
    }
    assert_true(finals > 0);
    assert_results(&x, "job-b", &fx->ref_b);
    run_close(&x);
}

/* Read from a committed offset (this protocol never commits past an
 * unfinished job's first message), a job met mid-stream started before it
 * and was finished by the previous owner: skipped, no data loss. After an
 * offset gap the same proof no longer holds. */
static void test_mid_stream_covered_by_commit(void **state)
{
    fixture *fx = *state;
    size_t cut;
    plog l;
    plog_a_from_middle(&l, fx, &cut);
    l.base = 500;
    run x;
    run_open(&x, fx, NULL);
    assign(&x, 0, NULL, l.base, NULL);
    feed(&x, 0, &l, 0, l.n);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.jobs_finished_before, 1);
    assert_int_equal(st.jobs_data_loss, 0);
    assert_int_equal(st.after_end, fx->a.n - cut);
    assert_int_equal(st.offset_gaps, 0);
    assert_no_results(&x, "job-a");
    assert_results(&x, "job-b", &fx->ref_b);
    run_close(&x);

    /* reading starts at 490: offsets 490..499 are gone (truncated) */
    run y;
    run_open(&y, fx, NULL);
    assign(&y, 0, NULL, l.base - 10, NULL);
    feed(&y, 0, &l, 0, l.n);
    st = stats(&y);
    assert_int_equal(st.offset_gaps, 1);
    assert_int_equal(st.offsets_lost, 10);
    assert_int_equal(st.jobs_finished_before, 0);
    assert_int_equal(st.jobs_data_loss, 1);
    assert_int_equal(st.jobs_partial, 1);
    char *res = results_file(&y, "job-a");
    assert_non_null(res);
    assert_non_null(strstr(res, "\"partial\": true"));
    free(res);
    run_close(&y);
}

/* Offsets skipped while jobs are in flight (a position reset after the
 * log was truncated under the consumer): counted, and each job in flight
 * is marked partial with the lost range and its own sequence gaps. */
static void test_offset_gap_marks_jobs_partial(void **state)
{
    fixture *fx = *state;
    plog l;
    plog_interleave(&l, &fx->a, &fx->b, 2, 10);
    size_t from = l.n / 3, to = l.n / 3 + 6;
    run x;
    run_open(&x, fx, NULL);
    assign(&x, 0, NULL, -1, NULL);
    feed(&x, 0, &l, 0, from);
    feed(&x, 0, &l, to, l.n);
    assert_int_equal(expire(&x, x.now + 2 * IDLE_US), TW_OK);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.offset_gaps, 1);
    assert_int_equal(st.offsets_lost, to - from);
    assert_int_equal(st.jobs_partial, 2);
    char want[96];
    snprintf(want, sizeof(want), "\"from\": %" PRId64 ", \"to\": %" PRId64,
             l.base + (int64_t)from, l.base + (int64_t)to - 1);
    char *res = results_file(&x, "job-a");
    assert_non_null(res);
    assert_non_null(strstr(res, "\"kind\": \"offsets_lost\""));
    assert_non_null(strstr(res, want));
    assert_non_null(strstr(res, "\"kind\": \"sequence_gap\""));
    free(res);
    run_close(&x);
}

/* ---- commit points ------------------------------------------------------ */

/* b's start, a dead letter, all of a, a dead letter, the rest of b. */
static void plog_commit_case(plog *l, const fixture *fx, size_t *a_from,
                             size_t *a_to)
{
    memset(l, 0, sizeof(*l));
    l->base = 100;
    plog_add(l, &fx->b, 0);
    plog_add(l, NULL, 0);
    *a_from = l->n;
    for (size_t i = 0; i < fx->a.n; i++)
        plog_add(l, &fx->a, i);
    *a_to = l->n;
    plog_add(l, NULL, 0);
    for (size_t i = 1; i < fx->b.n; i++)
        plog_add(l, &fx->b, i);
}

/* Checkpoint, then commit: the daemon's order. */
static int64_t commit_of(run *x, int32_t part, char *meta, size_t metalen)
{
    tw_source_commit_entry c;
    memset(&c, 0, sizeof(c));
    char err[512];
    if (tw_router_checkpoint(x->r, part, err, sizeof(err)) != TW_OK)
        fail_msg("checkpoint: %s", err);
    assert_int_equal(tw_router_commit_point(x->r, part, &c), 1);
    assert_int_equal(c.partition, part);
    snprintf(meta, metalen, "%s", c.metadata != NULL ? c.metadata : "");
    return c.offset;
}

/* The metadata a commit carries: {"next_offset":N} first, then the
 * finished jobs' ids (jobs: "" or ",\"id\"..."). */
static const char *meta_of(char *buf, size_t len, int64_t next,
                           const char *jobs)
{
    snprintf(buf, len, "[{\"next_offset\":%" PRId64 "}%s]", next, jobs);
    return buf;
}

/* commit = min(first offset of each unfinished job, last processed + 1);
 * dead letters are processed messages; a job finished past the commit
 * offset rides along in the metadata, and a next owner given that
 * metadata does not evaluate it again. */
static void test_commit_points(void **state)
{
    fixture *fx = *state;
    plog l;
    size_t a_from, a_to;
    plog_commit_case(&l, fx, &a_from, &a_to);
    run x;
    run_open(&x, fx, NULL);
    int64_t start;
    assign(&x, 0, NULL, -1, &start);
    assert_int_equal(start, -2); /* nothing committed: the beginning */
    tw_source_commit_entry c;
    assert_int_equal(tw_router_commit_point(x.r, 0, &c), 0); /* nothing yet */
    assert_int_equal(tw_router_commit_point(x.r, 9, &c), 0); /* not ours */

    char meta[TW_ROUTER_META_MAX + 1];
    feed(&x, 0, &l, 0, 2); /* b's start, a dead letter */
    assert_int_equal(stats(&x).dead_letters, 1);
    char want[256];
    assert_int_equal(commit_of(&x, 0, meta, sizeof(meta)), 100); /* b open */
    assert_string_equal(meta, meta_of(want, sizeof(want), l.base + 2, ""));
    feed(&x, 0, &l, 2, a_to); /* all of a: finished */
    assert_int_equal(stats(&x).jobs_finished, 1);
    assert_int_equal(commit_of(&x, 0, meta, sizeof(meta)), 100);
    assert_string_equal(meta, meta_of(want, sizeof(want),
                                      l.base + (int64_t)a_to, ",\"job-a\""));
    int64_t committed = 100;
    char committed_meta[sizeof(meta)];
    snprintf(committed_meta, sizeof(committed_meta), "%s", meta);

    feed(&x, 0, &l, a_to, l.n - 1); /* all but b's end marker */
    assert_int_equal(stats(&x).dead_letters, 2);
    assert_int_equal(commit_of(&x, 0, meta, sizeof(meta)), 100);
    assert_string_equal(meta, meta_of(want, sizeof(want),
                                      l.base + (int64_t)l.n - 1, ",\"job-a\""));
    feed(&x, 0, &l, l.n - 1, l.n); /* b ends: everything is processed */
    assert_int_equal(commit_of(&x, 0, meta, sizeof(meta)),
                     l.base + (int64_t)l.n);
    /* both started before the commit */
    assert_string_equal(meta,
                        meta_of(want, sizeof(want), l.base + (int64_t)l.n, ""));
    assert_results(&x, "job-a", &fx->ref_a);
    assert_results(&x, "job-b", &fx->ref_b);

    /* a dead letter on a partition with nothing else advances it alone */
    tw_router_dead_letter(x.r, 3, 50);
    assert_int_equal(stats(&x).dead_letters, 3);
    assert_int_equal(commit_of(&x, 3, meta, sizeof(meta)), 51);
    assert_string_equal(meta, meta_of(want, sizeof(want), 51, ""));
    tw_router_dead_letter(x.r, 3, 40); /* older: no step back */
    assert_int_equal(commit_of(&x, 3, meta, sizeof(meta)), 51);
    run_close(&x);

    /* The next owner, from the commit taken while b was open: a is not
     * evaluated again (no results, no alerts, counted after_end), b is
     * evaluated whole. */
    run y;
    run_open(&y, fx, NULL);
    assign(&y, 0, committed_meta, committed, &start);
    assert_int_equal(start, committed);
    feed(&y, 0, &l, (size_t)(committed - l.base), l.n);
    tw_router_stats st = stats(&y);
    assert_int_equal(st.jobs_started, 1);
    assert_int_equal(st.after_end, a_to - a_from);
    assert_no_results(&y, "job-a");
    assert_no_alerts_for(&y.alerts, "job-a");
    assert_results(&y, "job-b", &fx->ref_b);
    assert_job_alerts(&y.alerts, "job-b", &fx->ref_b.alerts, 0);
    /* a seen again: it leaves the metadata once the commit passes it */
    assert_int_equal(commit_of(&y, 0, meta, sizeof(meta)),
                     l.base + (int64_t)l.n);
    assert_string_equal(meta,
                        meta_of(want, sizeof(want), l.base + (int64_t)l.n, ""));
    run_close(&y);

    /* Without the metadata the next owner would evaluate a again: the
     * metadata is what prevents it. */
    run z;
    run_open(&z, fx, NULL);
    assign(&z, 0, NULL, committed, &start);
    feed(&z, 0, &l, 0, a_to);
    assert_int_equal(stats(&z).jobs_started, 2);
    assert_int_equal(stats(&z).jobs_finished, 1);
    run_close(&z);

    /* Metadata that is not a list is ignored, not fatal. */
    run w;
    run_open(&w, fx, NULL);
    assign(&w, 0, "{\"x\":1", committed, &start);
    feed(&w, 0, &l, 0, 1);
    assert_int_equal(stats(&w).jobs_started, 1);
    run_close(&w);
}

/* Many jobs finished past the commit offset: the metadata stays within
 * TW_ROUTER_META_MAX and is a valid list of some of them. */
static void test_commit_metadata_limit(void **state)
{
    fixture *fx = *state;
    enum { NJOBS = 300 };
    jobstream *s = calloc(NJOBS, sizeof(*s));
    assert_non_null(s);
    plog l;
    memset(&l, 0, sizeof(l));
    plog_add(&l, &fx->b, 0); /* stays open: holds the commit at 0 */
    for (int i = 0; i < NJOBS; i++) {
        snprintf(s[i].id, sizeof(s[i].id), "job-%04d-xxxx", i);
        add_marker(&s[i], TW_MARKER_JOB_START, 1, 1700000000000000LL, 0);
        add_marker(&s[i], TW_MARKER_JOB_END, 2, 1700000060000000LL,
                   1700000060000000LL);
        plog_add(&l, &s[i], 0);
        plog_add(&l, &s[i], 1);
    }
    run x;
    run_open(&x, fx, NULL);
    feed(&x, 0, &l, 0, l.n);
    assert_int_equal(stats(&x).jobs_finished, NJOBS);
    char meta[TW_ROUTER_META_MAX + 64];
    assert_int_equal(commit_of(&x, 0, meta, sizeof(meta)), 0);
    assert_true(strlen(meta) <= TW_ROUTER_META_MAX);
    assert_true(strlen(meta) > TW_ROUTER_META_MAX / 2);
    assert_int_equal(strncmp(meta, "[{\"next_offset\":", 16), 0);
    assert_non_null(strstr(meta, "\"job-0000-xxxx\""));
    assert_null(strstr(meta, "\"job-0299-xxxx\""));
    run_close(&x);
    for (int i = 0; i < NJOBS; i++)
        stream_free(&s[i]);
    free(s);
}

/* ---- duplicates --------------------------------------------------------- */

/* A batch delivered twice (a producer retry: same node and seq, a new
 * offset) is counted and dropped; results and alerts are unchanged. */
static void test_duplicates(void **state)
{
    fixture *fx = *state;
    plog l;
    memset(&l, 0, sizeof(l));
    size_t dups = 0;
    for (size_t i = 0; i < fx->a.n; i++) {
        plog_add(&l, &fx->a, i);
        if (i > 0 && i + 1 < fx->a.n && i % 5 == 0) {
            plog_add(&l, &fx->a, i);
            dups++;
        }
    }
    assert_true(dups >= 2);
    run x;
    run_open(&x, fx, NULL);
    feed(&x, 0, &l, 0, l.n);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.duplicates, dups);
    assert_int_equal(st.batches, l.n);
    assert_int_equal(st.late_samples, 0);
    /* the results count them; everything else is as without them */
    const char *zero = "\"duplicate_batches\": 0";
    char *at = strstr(fx->ref_a.results, zero);
    assert_non_null(at);
    reference want = {.results = malloc(strlen(fx->ref_a.results) + 32)};
    assert_non_null(want.results);
    sprintf(want.results, "%.*s\"duplicate_batches\": %zu%s",
            (int)(at - fx->ref_a.results), fx->ref_a.results, dups,
            at + strlen(zero));
    assert_results(&x, "job-a", &want);
    free(want.results);
    assert_job_alerts(&x.alerts, "job-a", &fx->ref_a.alerts, 0);
    run_close(&x);
}

/* ---- revoke without a store --------------------------------------------- */

/* Revoked mid-job: the unfinished jobs are dropped (no results), the
 * commit taken before the revoke points at their start, and assigning
 * again and reading from there evaluates them completely. The volatile
 * store's claims live as long as the process: the second pass does not
 * repeat the first pass's alerts. */
static void test_revoke_reassign(void **state)
{
    fixture *fx = *state;
    plog l;
    plog_interleave(&l, &fx->a, &fx->b, 2, 10);
    size_t mid = l.n * 2 / 3;
    run x;
    run_open(&x, fx, NULL);
    int64_t start;
    assign(&x, 0, NULL, -1, &start);
    feed(&x, 0, &l, 0, mid);
    size_t first_pass = x.alerts.n;
    assert_true(first_pass > 0);
    char meta[TW_ROUTER_META_MAX + 1];
    int64_t committed = commit_of(&x, 0, meta, sizeof(meta));
    assert_int_equal(committed, l.base); /* a's first message */
    tw_router_revoke(x.r, 0);
    tw_router_stats st = stats(&x);
    assert_int_equal(st.jobs_dropped, 2);
    assert_int_equal(st.jobs_active, 0);
    assert_int_equal(st.jobs_finished, 0);
    int32_t parts[2];
    assert_int_equal(tw_router_partitions(x.r, parts, 2), 0);
    tw_source_commit_entry c;
    assert_int_equal(tw_router_commit_point(x.r, 0, &c), 0);
    assert_no_results(&x, "job-a");
    assert_no_results(&x, "job-b");

    assign(&x, 0, meta, committed, &start);
    feed(&x, 0, &l, (size_t)(committed - l.base), l.n);
    st = stats(&x);
    assert_int_equal(st.jobs_started, 4);
    assert_int_equal(st.jobs_finished, 2);
    assert_results(&x, "job-a", &fx->ref_a);
    assert_results(&x, "job-b", &fx->ref_b);
    /* the first pass's alerts are a prefix of each job's reference; the
     * second pass sends each job's reference whole */
    sink pass1 = {0}, pass2 = {0};
    for (size_t i = 0; i < x.alerts.n; i++) {
        alert *a = &x.alerts.a[i];
        sink_add(i < first_pass ? &pass1 : &pass2, a->job, a->id, a->json,
                 strlen(a->json), a->partition, a->offset);
    }
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < pass1.n; i++) {
        const reference *ref =
            strcmp(pass1.a[i].job, "job-a") == 0 ? &fx->ref_a : &fx->ref_b;
        size_t *k = ref == &fx->ref_a ? &na : &nb;
        assert_true(*k < ref->alerts.n);
        assert_string_equal(pass1.a[i].json, ref->alerts.a[*k].json);
        (*k)++;
    }
    /* the second pass evaluates both jobs whole, and the store's claims
     * (this process's) keep it from sending what the first pass sent */
    assert_job_alerts(&pass2, "job-a", &fx->ref_a.alerts, na);
    assert_job_alerts(&pass2, "job-b", &fx->ref_b.alerts, nb);
    assert_int_equal(stats(&x).alerts_deduped, first_pass);
    sink_clear(&pass1);
    sink_clear(&pass2);
    run_close(&x);
}

/* ---- with a store: checkpoint, crash or revoke, resume ------------------- */

static tw_store *open_store(const char *snapshot)
{
    tw_setting items[1] = {{"snapshot", snapshot, 2}};
    tw_settings s = {.path = "test.yaml",
                     .what = "state",
                     .line = 1,
                     .items = items,
                     .n = 1};
    tw_store *st = NULL;
    char err[512];
    if (tw_store_open(&s, &st, err, sizeof(err)) != TW_OK)
        fail_msg("tw_store_open: %s", err);
    return st;
}

static void checkpoint(run *x, int32_t part)
{
    char err[512];
    if (tw_router_checkpoint(x->r, part, err, sizeof(err)) != TW_OK)
        fail_msg("checkpoint: %s", err);
}

/* The interleaved jobs through a router on a store, uninterrupted. */
static void store_reference(const fixture *fx, const plog *l, int32_t part,
                            const char *dir, sink *alerts)
{
    char snap[256];
    snprintf(snap, sizeof(snap), "%s/ref.snap", dir);
    tw_store *st = open_store(snap);
    run x;
    run_open(&x, fx, st);
    int64_t start;
    assign(&x, part, NULL, -1, &start);
    assert_int_equal(start, -2); /* no checkpoint, no commit: beginning */
    for (size_t k = 0; k < l->n; k++) {
        feed(&x, part, l, k, k + 1);
        if (k % 4 == 3 || tw_router_checkpoint_due(x.r, part))
            checkpoint(&x, part);
    }
    assert_results(&x, "job-a", &fx->ref_a);
    assert_results(&x, "job-b", &fx->ref_b);
    assert_int_equal(stats(&x).alerts_deduped, 0);
    *alerts = x.alerts;
    memset(&x.alerts, 0, sizeof(x.alerts));
    run_close(&x);
    tw_store_close(st);
}

/* Checkpoint mid-job, go on a little (alerts sent after the checkpoint),
 * then crash (free the router and reopen the store from its snapshot) or
 * revoke the partition; the next owner restores both jobs from the
 * checkpoint, reads from its offset, and together the two owners send
 * exactly the uninterrupted run's alerts, none twice. */
static void resume_case(void **state, int revoke)
{
    fixture *fx = *state;
    const int32_t part = 2;
    plog l;
    plog_interleave(&l, &fx->a, &fx->b, 4, 0);
    char dir[] = "/tmp/tw_router_store_XXXXXX";
    assert_non_null(mkdtemp(dir));
    sink want;
    store_reference(fx, &l, part, dir, &want);
    /* the store does not change what is sent */
    assert_job_alerts(&want, "job-a", &fx->ref_a.alerts, 0);
    assert_job_alerts(&want, "job-b", &fx->ref_b.alerts, 0);

    char snap[256];
    snprintf(snap, sizeof(snap), "%s/run.snap", dir);
    tw_store *st = open_store(snap);
    run x;
    run_open(&x, fx, st);
    int64_t start;
    assign(&x, part, NULL, -1, &start);
    assert_int_equal(start, -2);
    /* the checkpoint: a little after the first alert, both jobs open */
    size_t k = (size_t)want.a[0].offset + 2;
    assert_true(k + 4 < l.n);
    feed(&x, part, &l, 0, k);
    assert_int_equal(stats(&x).jobs_active, 2);
    size_t before_ckpt = x.alerts.n;
    assert_true(before_ckpt > 0);
    checkpoint(&x, part);
    tw_source_commit_entry c;
    assert_int_equal(tw_router_commit_point(x.r, part, &c), 1);
    /* the commit stays at the open jobs' first message (the checkpoint is
     * at k): a next owner without this store re-reads them whole */
    assert_int_equal(c.offset, l.base);
    char want_meta[64];
    snprintf(want_meta, sizeof(want_meta), "[{\"next_offset\":%zu}]", k);
    assert_string_equal(c.metadata, want_meta); /* read up to k, none done */
    assert_int_equal(stats(&x).checkpoints, 1);
    /* go on until some alert was sent after the checkpoint */
    size_t m = k;
    while (m < l.n - 2 && x.alerts.n == before_ckpt) {
        feed(&x, part, &l, m, m + 1);
        m++;
    }
    size_t after_ckpt = x.alerts.n - before_ckpt;
    assert_true(after_ckpt > 0);
    assert_int_equal(tw_router_position(x.r, part), (int64_t)m);

    sink sent = x.alerts;
    memset(&x.alerts, 0, sizeof(x.alerts));
    if (revoke) {
        uint64_t open = stats(&x).jobs_active;
        tw_router_revoke(x.r, part);
        assert_int_equal(stats(&x).jobs_dropped, open);
        assert_int_equal(tw_router_position(x.r, part),
                         TW_SOURCE_OFFSET_DEFAULT);
    } else {
        run_drop_router(&x);
        tw_store_close(st);
        st = open_store(snap); /* what the snapshot file kept */
        tw_router_config cfg = {.job = fx->jcfg,
                                .reg = fx->reg,
                                .rules = rules,
                                .nrules = NRULES,
                                .job_idle_us = IDLE_US,
                                .results_dir = x.dir,
                                .store = st,
                                .topic = "metrics"};
        char err[512];
        if (tw_router_new(&cfg, on_alert, &x.alerts, &x.r, err, sizeof(err)) !=
            TW_OK)
            fail_msg("tw_router_new: %s", err);
    }
    tw_router_stats st0 = stats(&x);
    assign(&x, part, NULL, -1, &start);
    assert_int_equal(start, (int64_t)k);
    assert_int_equal(tw_router_position(x.r, part), (int64_t)k);
    tw_router_stats st1 = stats(&x);
    assert_int_equal(st1.jobs_restored - st0.jobs_restored, 2);
    assert_int_equal(st1.jobs_active, 2);
    /* a message from before the checkpoint (already in it) is ignored */
    assert_int_equal(feed_rc(&x, part, &l, k - 1), TW_OK);
    tw_router_stats st2 = stats(&x);
    assert_int_equal(st2.batches, st1.batches);
    assert_int_equal(st2.duplicates, st1.duplicates);
    feed(&x, part, &l, k, l.n);
    tw_router_stats st3 = stats(&x);
    assert_int_equal(st3.alerts_deduped - st0.alerts_deduped, after_ckpt);
    assert_int_equal(st3.jobs_finished - st0.jobs_finished, 2);
    assert_int_equal(st3.jobs_active, 0);
    assert_results(&x, "job-a", &fx->ref_a);
    assert_results(&x, "job-b", &fx->ref_b);
    for (size_t i = 0; i < x.alerts.n; i++)
        sink_add(&sent, x.alerts.a[i].job, x.alerts.a[i].id, x.alerts.a[i].json,
                 strlen(x.alerts.a[i].json), x.alerts.a[i].partition,
                 x.alerts.a[i].offset);
    assert_ids_distinct(&sent);
    assert_int_equal(sent.n, want.n);
    for (size_t i = 0; i < want.n; i++) {
        assert_string_equal(sent.a[i].id, want.a[i].id);
        assert_string_equal(sent.a[i].json, want.a[i].json);
        assert_int_equal(sent.a[i].offset, want.a[i].offset);
    }
    run_close(&x);
    sink_clear(&sent);
    sink_clear(&want);
    tw_store_close(st);
    rm_tree(dir);
}

static void test_checkpoint_crash_resume(void **state)
{
    resume_case(state, 0);
}

static void test_checkpoint_revoke_resume(void **state)
{
    resume_case(state, 1);
}

/* With a store, a job finished and checkpointed (tombstone) is not
 * created again by a new router that sees its messages (e.g. the topic
 * re-read from the beginning). */
static void test_tombstone_skips(void **state)
{
    fixture *fx = *state;
    char dir[] = "/tmp/tw_router_store_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char snap[256];
    snprintf(snap, sizeof(snap), "%s/t.snap", dir);
    tw_store *st = open_store(snap);
    plog l;
    memset(&l, 0, sizeof(l));
    for (size_t i = 0; i < fx->a.n; i++)
        plog_add(&l, &fx->a, i);
    run x;
    run_open(&x, fx, st);
    feed(&x, 0, &l, 0, l.n);
    assert_true(tw_router_checkpoint_due(x.r, 0));
    checkpoint(&x, 0);
    assert_false(tw_router_checkpoint_due(x.r, 0));
    run_close(&x);

    run y;
    run_open(&y, fx, st);
    /* partition 1: no checkpoint there, the job's tombstone still counts */
    int64_t start;
    assign(&y, 1, NULL, -1, &start);
    assert_int_equal(start, -2);
    feed(&y, 1, &l, 0, l.n);
    tw_router_stats s = stats(&y);
    assert_int_equal(s.jobs_started, 0);
    assert_int_equal(s.after_end, l.n);
    assert_no_results(&y, "job-a");
    assert_int_equal(y.alerts.n, 0);
    run_close(&y);
    tw_store_close(st);
    rm_tree(dir);
}

/* A Redis store (a real redis-server with its AOF) that goes down between
 * one owner's checkpoint and the next owner's assignment: the assignment
 * leaves the load pending, batches are refused (TW_UNAVAILABLE) instead of
 * evaluated without their checkpoint, and once Redis is back the load
 * restores both jobs at the checkpoint's offset; the rest of the stream
 * then gives the reference results, and no alert is sent twice. */
static void test_assign_while_redis_down(void **state)
{
    fixture *fx = *state;
    const int32_t part = 3;
    tw_test_redis rs;
    assert_int_equal(tw_test_redis_start(&rs, NULL, 1), 0);
    char port[16];
    snprintf(port, sizeof(port), "%d", rs.port);
    tw_setting items[] = {{"store", "redis", 2},
                          {"redis.port", port, 3},
                          {"redis.retry_initial", "10ms", 4},
                          {"redis.retry_max", "100ms", 5}};
    tw_settings set = {.path = "test.yaml",
                       .what = "state",
                       .line = 1,
                       .items = items,
                       .n = 4};
    tw_store *st = NULL;
    char err[512];
    if (tw_store_open(&set, &st, err, sizeof(err)) != TW_OK)
        fail_msg("tw_store_open: %s", err);
    plog l;
    plog_interleave(&l, &fx->a, &fx->b, 4, 0);

    /* owner 1: checkpoint a little after the first alert, then crash */
    run x;
    run_open(&x, fx, st);
    int64_t start;
    assign(&x, part, NULL, -1, &start);
    size_t k = 0;
    while (x.alerts.n == 0 && k + 4 < l.n) {
        feed(&x, part, &l, k, k + 1);
        k++;
    }
    feed(&x, part, &l, k, k + 2);
    k += 2;
    assert_true(x.alerts.n > 0);
    assert_int_equal(tw_router_position(x.r, part), (int64_t)k);
    assert_int_equal(stats(&x).jobs_active, 2);
    checkpoint(&x, part);
    sink sent = x.alerts;
    memset(&x.alerts, 0, sizeof(x.alerts));
    run_drop_router(&x);

    /* Redis goes down; owner 2 is assigned the partition meanwhile */
    tw_test_redis_stop(&rs, 1);
    run_open(&x, fx, st);
    assign(&x, part, NULL, -1, &start);
    assert_int_equal(start, -2); /* nothing known yet: not the checkpoint */
    assert_int_equal(tw_router_load_pending(x.r, err, sizeof(err)),
                     TW_UNAVAILABLE);
    assert_int_equal(feed_rc(&x, part, &l, 0), TW_UNAVAILABLE);
    assert_int_equal(stats(&x).jobs_started, 0);
    assert_int_equal(stats(&x).batches, 0);

    /* back on the same port, with what the AOF kept */
    assert_int_equal(tw_test_redis_spawn(&rs), 0);
    int rc = TW_UNAVAILABLE;
    double deadline = tw_test_now() + 30;
    while (rc == TW_UNAVAILABLE && tw_test_now() < deadline) {
        rc = tw_router_load_pending(x.r, err, sizeof(err));
        if (rc == TW_UNAVAILABLE)
            tw_test_sleep_ms(20);
    }
    if (rc != TW_OK)
        fail_msg("load after Redis came back: %s", err);
    assert_int_equal(tw_router_position(x.r, part), (int64_t)k);
    assert_int_equal(stats(&x).jobs_restored, 2);
    assert_int_equal(stats(&x).jobs_active, 2);
    feed(&x, part, &l, k, l.n);
    assert_results(&x, "job-a", &fx->ref_a);
    assert_results(&x, "job-b", &fx->ref_b);
    /* both owners together: each job's reference alerts, none twice */
    for (size_t i = 0; i < x.alerts.n; i++)
        sink_add(&sent, x.alerts.a[i].job, x.alerts.a[i].id, x.alerts.a[i].json,
                 strlen(x.alerts.a[i].json), x.alerts.a[i].partition,
                 x.alerts.a[i].offset);
    assert_ids_distinct(&sent);
    assert_int_equal(count_job(&sent, "job-a"), fx->ref_a.alerts.n);
    assert_int_equal(count_job(&sent, "job-b"), fx->ref_b.alerts.n);
    sink_clear(&sent);
    run_close(&x);
    tw_store_close(st);
    tw_test_redis_cleanup(&rs);
}

int main(void)
{
    tw_log_set_level(TW_LOG_ERROR);
    /* TW_TEST_FILTER=test_commit_points runs one test (e.g. under valgrind) */
    if (getenv("TW_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("TW_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_jobs_interleaved),
        cmocka_unit_test(test_report_html_written),
        cmocka_unit_test(test_alerts_deterministic),
        cmocka_unit_test(test_created_by_seq1_expired_idle),
        cmocka_unit_test(test_created_by_start_marker),
        cmocka_unit_test(test_joined_mid_stream_skipped),
        cmocka_unit_test(test_joined_mid_stream_partial),
        cmocka_unit_test(test_mid_stream_covered_by_commit),
        cmocka_unit_test(test_offset_gap_marks_jobs_partial),
        cmocka_unit_test(test_commit_points),
        cmocka_unit_test(test_commit_metadata_limit),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_revoke_reassign),
        cmocka_unit_test(test_checkpoint_crash_resume),
        cmocka_unit_test(test_checkpoint_revoke_resume),
        cmocka_unit_test(test_tombstone_skips),
        cmocka_unit_test(test_assign_while_redis_down),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
