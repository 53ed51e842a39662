/* test_alert.c - alert ids and the per-job alert tracker (alert.h): the id
 * against an independent FNV-1a 128 over the documented byte string, its
 * sensitivity to every input; the tracker against a model of when it must
 * publish (every status change, a finding when violations grow, one final
 * alert per rule); save -> restore into a new tracker after every batch
 * publishes exactly what an uninterrupted tracker does; truncated and
 * corrupt blobs are refused with a message and change nothing.
 *
 * The job: a synth low_gpu folder (LowGPUUtilization fires, findings
 * grow) evaluated by ProfilerReport (a composite: sub-rules carry a
 * parent) and the FailingRule fixture (tests/plugins/failing_rule.c),
 * whose scan 6 fails, a change to Error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alert.h"
#include "log.h"
#include "reader.h"
#include "synth.h"

/* ---- tw_alert_id -------------------------------------------------------- */

/* FNV-1a 128 with 32-bit limbs (little-endian limb order), written from
 * the FNV specification: prime = 2^88 + 0x13b. */
static void fnv_mul(uint32_t h[4])
{
    /* h * (2^88 + 0x13b) mod 2^128 */
    uint32_t r[4] = {0, 0, 0, 0};
    uint64_t carry = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t v = (uint64_t)h[i] * 0x13bu + carry;
        r[i] = (uint32_t)v;
        carry = v >> 32;
    }
    /* + h << 88: limb shift 2, bit shift 24 */
    uint32_t s[4] = {0, 0, h[0] << 24, (h[1] << 24) | (h[0] >> 8)};
    carry = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t v = (uint64_t)r[i] + s[i] + carry;
        h[i] = (uint32_t)v;
        carry = v >> 32;
    }
}

static void ref_id(const char *const *parts, size_t n, char *out)
{
    /* offset basis 6c62272e07bb0142 62b821756295c58d */
    uint32_t h[4] = {0x6295c58du, 0x62b82175u, 0x07bb0142u, 0x6c62272eu};
    for (size_t p = 0; p < n; p++) {
        size_t len = strlen(parts[p]) + (p + 1 < n); /* NUL separators */
        for (size_t i = 0; i < len; i++) {
            h[0] ^= (uint8_t)parts[p][i];
            fnv_mul(h);
        }
    }
    snprintf(out, TW_ALERT_ID_LEN + 1,
             "%08" PRIx32 "%08" PRIx32 "%08" PRIx32 "%08" PRIx32, h[3], h[2],
             h[1], h[0]);
}

static void test_id_matches_spec(void **st)
{
    (void)st;
    struct {
        const char *job, *parent, *rule;
        tw_alert_kind kind;
        uint64_t scan;
        const char *status;
    } cases[] = {
        {"job", NULL, "LowGPUUtilization", TW_ALERT_STATUS, 0, "IssuesFound"},
        {"job", "ProfilerReport", "LowGPUUtilization", TW_ALERT_STATUS, 0,
         "IssuesFound"},
        {"j-1", NULL, "CPUBottleneck", TW_ALERT_FINDING, 17, "IssuesFound"},
        {"", "", "", TW_ALERT_STATUS, UINT64_MAX, ""},
        {"ünïcode job", NULL, "Rule", TW_ALERT_FINDING, 1234567890123ull,
         "Error"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char got[TW_ALERT_ID_LEN + 1], want[TW_ALERT_ID_LEN + 1], scan[32];
        snprintf(scan, sizeof(scan), "%" PRIu64, cases[i].scan);
        const char *parts[] = {"tw-alert-2",
                               cases[i].job,
                               cases[i].parent ? cases[i].parent : "",
                               cases[i].rule,
                               tw_alert_kind_name(cases[i].kind),
                               scan,
                               cases[i].status};
        ref_id(parts, 7, want);
        memset(got, 'x', sizeof(got));
        tw_alert_id(cases[i].job, cases[i].parent, cases[i].rule, cases[i].kind,
                    cases[i].scan, cases[i].status, got);
        assert_string_equal(got, want);
        assert_int_equal(strlen(got), TW_ALERT_ID_LEN);
        for (size_t k = 0; k < TW_ALERT_ID_LEN; k++)
            assert_non_null(strchr("0123456789abcdef", got[k]));
    }
    assert_string_equal(tw_alert_kind_name(TW_ALERT_STATUS), "status");
    assert_string_equal(tw_alert_kind_name(TW_ALERT_FINDING), "finding");
}

static void test_id_sensitivity(void **st)
{
    (void)st;
    char base[TW_ALERT_ID_LEN + 1], again[TW_ALERT_ID_LEN + 1];
    tw_alert_id("job", NULL, "Rule", TW_ALERT_STATUS, 3, "IssuesFound", base);
    tw_alert_id("job", NULL, "Rule", TW_ALERT_STATUS, 3, "IssuesFound", again);
    assert_string_equal(base, again);
    /* no parent and an empty parent are the same thing */
    tw_alert_id("job", "", "Rule", TW_ALERT_STATUS, 3, "IssuesFound", again);
    assert_string_equal(base, again);
    char v[10][TW_ALERT_ID_LEN + 1];
    tw_alert_id("job2", NULL, "Rule", TW_ALERT_STATUS, 3, "IssuesFound", v[0]);
    tw_alert_id("job", NULL, "Rule2", TW_ALERT_STATUS, 3, "IssuesFound", v[1]);
    tw_alert_id("job", NULL, "Rule", TW_ALERT_FINDING, 3, "IssuesFound", v[2]);
    tw_alert_id("job", NULL, "Rule", TW_ALERT_STATUS, 4, "IssuesFound", v[3]);
    tw_alert_id("job", NULL, "Rule", TW_ALERT_STATUS, 3, "NoIssuesFound", v[4]);
    /* the separators keep fields apart */
    tw_alert_id("jobR", NULL, "ule", TW_ALERT_STATUS, 3, "IssuesFound", v[5]);
    tw_alert_id("job", NULL, "Rule", TW_ALERT_STATUS, 31, "ssuesFound", v[6]);
    tw_alert_id("job", NULL, "Rule", TW_ALERT_STATUS, 30, "IssuesFound", v[7]);
    /* a sub-rule is not the rule of the same name configured beside it */
    tw_alert_id("job", "ProfilerReport", "Rule", TW_ALERT_STATUS, 3,
                "IssuesFound", v[8]);
    tw_alert_id("job", "Rule", "", TW_ALERT_STATUS, 3, "IssuesFound", v[9]);
    for (int i = 0; i < 10; i++) {
        assert_string_not_equal(v[i], base);
        for (int k = i + 1; k < 10; k++)
            assert_string_not_equal(v[i], v[k]);
    }
}

/* ---- the job ------------------------------------------------------------ */

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

/* The synth folder, written once; a job takes the batches it ingests, so
 * each run reads the files again from this listing. */
typedef struct folder {
    char dir[64];
    tw_folder *f;
} folder;

static folder the_folder;
static char failing_path[1024];

typedef struct alert {
    char id[TW_ALERT_ID_LEN + 1];
    char *json;
} alert;

typedef struct sink {
    alert *a;
    size_t n, cap;
} sink;

static void sink_clear(sink *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->a[i].json);
    free(k->a);
    memset(k, 0, sizeof(*k));
}

static int on_alert(void *ud, const char *job, const char *id, const char *json,
                    size_t len, const tw_alert_facts *facts)
{
    (void)facts;
    sink *k = ud;
    assert_string_equal(job, "job");
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 64;
        k->a = realloc(k->a, k->cap * sizeof(alert));
        assert_non_null(k->a);
    }
    alert *a = &k->a[k->n++];
    snprintf(a->id, sizeof(a->id), "%s", id);
    a->json = malloc(len + 1);
    assert_non_null(a->json);
    memcpy(a->json, json, len);
    a->json[len] = '\0';
    return TW_OK;
}

/* The model: what the tracker must publish, from the rules themselves. */
#define MAXR 32
typedef struct model {
    tw_rule_status status[MAXR];
    int64_t violations[MAXR];
    size_t nrules;
    char expect[512][160]; /* "kind rule previous->status scan final" */
    size_t nexpect;
    size_t status_changes, findings;
    int64_t every;      /* tw_alert_tracker_set_finding_every */
    int64_t fend[MAXR]; /* 1 + the last published finding's scan end */
    size_t held;        /* findings the tracker must hold back */
} model;

static void model_add(model *m, const char *kind, tw_rule *r,
                      tw_rule_status prev, uint64_t scan, int final)
{
    assert_true(m->nexpect < 512);
    snprintf(m->expect[m->nexpect++], sizeof(m->expect[0]),
             "%s %s %s->%s %" PRIu64 " %d", kind, tw_rule_name(r),
             tw_rule_status_name(prev),
             tw_rule_status_name(tw_rule_get_status(r)), scan, final);
}

static void model_walk(model *m, tw_rule *r, size_t *idx, const tw_scan *scan,
                       uint64_t final_scan)
{
    size_t i = (*idx)++;
    assert_true(i < MAXR);
    if (i >= m->nrules) {
        m->status[i] = TW_STATUS_IN_PROGRESS;
        m->violations[i] = 0;
        m->nrules = i + 1;
    }
    tw_rule_status now = tw_rule_get_status(r);
    const tw_scan_result *res = tw_rule_last_result(r);
    if (scan == NULL) {
        model_add(m, "status", r, m->status[i], final_scan, 1);
        m->status[i] = now;
    } else {
        if (now != m->status[i]) {
            model_add(m, "status", r, m->status[i], scan->index, 0);
            m->status_changes++;
        }
        if (res->condition_met && res->violations > m->violations[i]) {
            if (m->every > 0 && m->fend[i] != 0 &&
                scan->end_us - (m->fend[i] - 1) < m->every) {
                m->held++;
            } else {
                model_add(m, "finding", r, now, scan->index, 0);
                m->findings++;
                m->fend[i] = scan->end_us + 1;
            }
        }
        m->status[i] = now;
        m->violations[i] = res->violations;
    }
    for (size_t c = 0; c < tw_rule_nchildren(r); c++)
        model_walk(m, tw_rule_child(r, c), idx, scan, final_scan);
}

static void model_step(model *m, tw_job *job, const tw_scan *scan,
                       uint64_t final_scan)
{
    size_t idx = 0;
    for (size_t i = 0; i < tw_job_nrules(job); i++)
        model_walk(m, tw_job_rule(job, i), &idx, scan, final_scan);
}

/* What one run does at each batch boundary with its tracker. */
enum { KEEP, RESTORE_EVERY_BATCH, FRESH_AT_MIDDLE };

typedef struct runctx {
    tw_alert_tracker *t;
    sink alerts;
    model *m;         /* NULL: no model */
    size_t max_bytes; /* tw_alert_tracker_set_max_bytes; 0 = none */
    int64_t every;    /* tw_alert_tracker_set_finding_every */
} runctx;

static void on_scan(void *ud, tw_job *job, const tw_scan *scan)
{
    runctx *c = ud;
    if (c->m != NULL)
        model_step(c->m, job, scan, 0);
    assert_int_equal(tw_alert_tracker_scan(c->t, job, scan), TW_OK);
}

typedef struct batches {
    tw_batch **b;
    size_t n, cap;
} batches;

static int collect(void *ud, tw_batch *b)
{
    batches *s = ud;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->b = realloc(s->b, s->cap * sizeof(*s->b));
        assert_non_null(s->b);
    }
    b->seq = s->n + 1; /* one node */
    s->b[s->n++] = b;
    return TW_OK;
}

static void read_batches(batches *s)
{
    memset(s, 0, sizeof(*s));
    tw_trace_state *ts = tw_trace_state_new();
    assert_non_null(ts);
    for (size_t i = 0; i < the_folder.f->nfiles; i++)
        assert_int_equal(tw_folder_read_file(&the_folder.f->files[i], "job", ts,
                                             collect, s, NULL, NULL, NULL),
                         TW_OK);
    tw_trace_state_free(ts);
    assert_true(s->n > 5);
}

static tw_job *new_job(tw_registry *reg)
{
    static const char *const keys[] = {"fail_at_scan"};
    static const char *const vals[] = {"6"};
    /* system metrics only: judged from the job's start (init_grace 0) */
    static const char *const pr_keys[] = {"LowGPUUtilization_init_grace"};
    static const char *const pr_vals[] = {"0"};
    tw_rule_spec specs[] = {
        {.rule = "ProfilerReport",
         .keys = pr_keys,
         .values = pr_vals,
         .nparams = 1},
        {.source = failing_path,
         .entry = "failing_rule",
         .keys = keys,
         .values = vals,
         .nparams = 1},
    };
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    tw_job *j = NULL;
    char err[1024];
    if (tw_job_new("job", &cfg, reg, specs, 2, &j, err, sizeof(err)) != TW_OK)
        fail_msg("tw_job_new: %s", err);
    return j;
}

static tw_alert_tracker *swap_tracker(runctx *c, int restore)
{
    tw_buf *blob = tw_buf_new();
    assert_non_null(blob);
    assert_int_equal(tw_alert_tracker_save(c->t, blob), TW_OK);
    uint64_t sent = tw_alert_tracker_sent(c->t);
    tw_alert_tracker_free(c->t);
    c->t = tw_alert_tracker_new(on_alert, &c->alerts);
    assert_non_null(c->t);
    tw_alert_tracker_set_max_bytes(c->t, c->max_bytes);
    tw_alert_tracker_set_finding_every(c->t, c->every);
    if (restore) {
        char err[256];
        if (tw_alert_tracker_restore(c->t, tw_buf_data(blob), tw_buf_len(blob),
                                     err, sizeof(err)) != TW_OK)
            fail_msg("restore: %s", err);
        assert_int_equal(tw_alert_tracker_sent(c->t), sent);
        /* and it saves the bytes it was restored from */
        tw_buf *again = tw_buf_new();
        assert_non_null(again);
        assert_int_equal(tw_alert_tracker_save(c->t, again), TW_OK);
        assert_int_equal(tw_buf_len(again), tw_buf_len(blob));
        assert_memory_equal(tw_buf_data(again), tw_buf_data(blob),
                            tw_buf_len(blob));
        tw_buf_free(again);
    }
    tw_buf_free(blob);
    return c->t;
}

/* Runs the job; the tracker's final blob into *final_blob when given. */
static void run_job_full(tw_registry *reg, int mode, model *m, sink *out,
                         tw_buf *final_blob, size_t max_bytes, int64_t every,
                         uint64_t *held)
{
    batches s;
    read_batches(&s);
    tw_job *job = new_job(reg);
    runctx c = {.m = m, .max_bytes = max_bytes, .every = every};
    if (m != NULL)
        m->every = every;
    c.t = tw_alert_tracker_new(on_alert, &c.alerts);
    assert_non_null(c.t);
    tw_alert_tracker_set_max_bytes(c.t, max_bytes);
    tw_alert_tracker_set_finding_every(c.t, every);
    tw_job_on_scan(job, on_scan, &c);
    for (size_t i = 0; i < s.n; i++) {
        if (mode == RESTORE_EVERY_BATCH)
            swap_tracker(&c, 1);
        else if (mode == FRESH_AT_MIDDLE && i == s.n * 3 / 4)
            swap_tracker(&c, 0);
        assert_int_equal(tw_job_ingest(job, s.b[i]), TW_OK);
    }
    assert_int_equal(tw_job_finish(job, 0), TW_OK);
    if (mode == RESTORE_EVERY_BATCH)
        swap_tracker(&c, 1);
    if (m != NULL) {
        tw_job_stats js;
        tw_job_get_stats(job, &js);
        model_step(m, job, NULL, js.scans);
    }
    assert_int_equal(tw_alert_tracker_finish(c.t, job), TW_OK);
    if (mode != FRESH_AT_MIDDLE)
        assert_int_equal(tw_alert_tracker_sent(c.t), c.alerts.n);
    if (final_blob != NULL)
        assert_int_equal(tw_alert_tracker_save(c.t, final_blob), TW_OK);
    if (held != NULL)
        *held = tw_alert_tracker_held(c.t);
    tw_alert_tracker_free(c.t);
    tw_job_free(job);
    free(s.b);
    *out = c.alerts;
}

static void run_job_bounded(tw_registry *reg, int mode, model *m, sink *out,
                            tw_buf *final_blob, size_t max_bytes)
{
    run_job_full(reg, mode, m, out, final_blob, max_bytes, 0, NULL);
}

static void run_job(tw_registry *reg, int mode, model *m, sink *out,
                    tw_buf *final_blob)
{
    run_job_bounded(reg, mode, m, out, final_blob, 0);
}

static int group_setup(void **state)
{
    (void)state;
    const char *bd = getenv("TW_BUILD_DIR");
    snprintf(failing_path, sizeof(failing_path),
             "%s/tests/plugins/failing_rule.so", bd ? bd : ".");
    snprintf(the_folder.dir, sizeof(the_folder.dir), "/tmp/tw_alert_XXXXXX");
    if (mkdtemp(the_folder.dir) == NULL)
        return -1;
    char out[128];
    snprintf(out, sizeof(out), "%s/out", the_folder.dir);
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = out;
    o.preset = "low_gpu";
    o.nodes = 1;
    o.framework = 0;
    o.seed = 7;
    char err[512];
    if (tw_synth_opts_resolve(&o, err, sizeof(err)) != 0 ||
        tw_synth_write(&o, NULL, err, sizeof(err)) != 0 ||
        tw_folder_list(out, &the_folder.f, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "synth: %s\n", err);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tw_folder_free(the_folder.f);
    nftw(the_folder.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* One alert's "kind rule previous->status scan final" from its JSON; also
 * checks the id in it is the documented one. */
static void describe(const char *json, const char *id, char *out, size_t len)
{
    json_error_t e;
    json_t *a = json_loads(json, 0, &e);
    if (a == NULL)
        fail_msg("alert is not JSON: %s", e.text);
    const char *kind = json_string_value(json_object_get(a, "kind"));
    const char *rule = json_string_value(json_object_get(a, "rule"));
    const char *status = json_string_value(json_object_get(a, "status"));
    const char *prev = json_string_value(json_object_get(a, "previous_status"));
    json_t *scan = json_object_get(a, "scan");
    assert_non_null(kind);
    assert_non_null(rule);
    assert_non_null(status);
    assert_non_null(prev);
    assert_true(json_is_integer(scan));
    assert_string_equal(json_string_value(json_object_get(a, "id")), id);
    assert_string_equal(json_string_value(json_object_get(a, "job")), "job");
    char want[TW_ALERT_ID_LEN + 1];
    /* sub-rules of ProfilerReport name it as their parent */
    json_t *parent = json_object_get(a, "parent");
    tw_alert_id("job", json_string_value(parent), rule,
                strcmp(kind, "finding") == 0 ? TW_ALERT_FINDING
                                             : TW_ALERT_STATUS,
                (uint64_t)json_integer_value(scan), status, want);
    assert_string_equal(id, want);
    if (strcmp(rule, "ProfilerReport") == 0 || strcmp(rule, "FailingRule") == 0)
        assert_null(parent);
    else
        assert_string_equal(json_string_value(parent), "ProfilerReport");
    snprintf(out, len, "%s %s %s->%s %" PRId64 " %d", kind, rule, prev, status,
             (int64_t)json_integer_value(scan),
             json_is_true(json_object_get(a, "final")));
    json_decref(a);
}

/* The tracker publishes exactly what the model says, in that order. */
static void test_tracker_publishes_changes_and_findings(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    sink got;
    run_job(reg, KEEP, m, &got, NULL);
    /* the job exercises every branch: changes to IssuesFound and Error,
     * findings, finals for every rule (ProfilerReport and its sub-rules) */
    assert_true(m->status_changes >= 2);
    assert_true(m->findings >= 2);
    assert_true(m->nrules > 3);
    int saw_error = 0, saw_issues = 0;
    for (size_t i = 0; i < m->nexpect; i++) {
        saw_error |= strstr(m->expect[i], "->Error") != NULL;
        saw_issues |= strstr(m->expect[i], "InProgress->IssuesFound") != NULL;
    }
    assert_true(saw_error);
    assert_true(saw_issues);
    assert_int_equal(got.n, m->nexpect);
    for (size_t i = 0; i < got.n; i++) {
        char d[160];
        describe(got.a[i].json, got.a[i].id, d, sizeof(d));
        assert_string_equal(d, m->expect[i]);
    }
    sink_clear(&got);
    free(m);
    tw_registry_free(reg);
}

/* finding_every (run: engine.finding_every): a rule's first finding is
 * published, later ones only when their scan ends that much event time
 * after the last published one; status alerts are untouched. The job's
 * scans are 60 s apart and its rules find at most scans, so 150 s holds
 * some. The same alerts when the tracker is saved and restored at every
 * batch, held or not (held counts restart with a restored tracker). */
static void test_finding_every_holds_findings(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    model *all = calloc(1, sizeof(*all)), *m = calloc(1, sizeof(*m)),
          *m2 = calloc(1, sizeof(*m2));
    assert_non_null(all);
    assert_non_null(m);
    assert_non_null(m2);
    sink every_scan, held, restored;
    uint64_t nheld = 0;
    run_job_full(reg, KEEP, all, &every_scan, NULL, 0, 0, NULL);
    run_job_full(reg, KEEP, m, &held, NULL, 0, 150 * 1000000LL, &nheld);
    run_job_full(reg, RESTORE_EVERY_BATCH, m2, &restored, NULL, 0,
                 150 * 1000000LL, NULL);
    assert_int_equal(all->held, 0);
    assert_true(m->held > 0);
    assert_int_equal(nheld, m->held);
    /* fewer findings, but not none: the first of each rule goes */
    assert_true(m->findings > 0);
    assert_int_equal(m->findings + m->held, all->findings);
    assert_int_equal(m->status_changes, all->status_changes);
    assert_int_equal(held.n, m->nexpect);
    assert_int_equal(held.n, every_scan.n - m->held);
    assert_int_equal(restored.n, held.n);
    for (size_t i = 0; i < held.n; i++) {
        char d[160];
        describe(held.a[i].json, held.a[i].id, d, sizeof(d));
        assert_string_equal(d, m->expect[i]);
        assert_string_equal(held.a[i].id, restored.a[i].id);
        assert_string_equal(held.a[i].json, restored.a[i].json);
    }
    sink_clear(&every_scan);
    sink_clear(&held);
    sink_clear(&restored);
    free(all);
    free(m);
    free(m2);
    tw_registry_free(reg);
}

/* A size bound (run: the producer's message.max.bytes) changes no id and
 * no decision: the same alerts in the same order; each fits; one that was
 * longer is the same alert without its report (a sub-rule's) or without
 * its parameters (ProfilerReport's, over 1 KB; its one node still fits),
 * marked with what was cut; the others are byte-identical. (0202 covers
 * shortened node lists.) */
static void test_bounded_alerts_truncated_with_marker(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    sink full, cut;
    run_job(reg, KEEP, NULL, &full, NULL);
    const size_t max = 1000;
    run_job_bounded(reg, KEEP, NULL, &cut, NULL, max);
    assert_int_equal(full.n, cut.n);
    size_t truncated = 0, no_params = 0;
    for (size_t i = 0; i < full.n; i++) {
        assert_string_equal(full.a[i].id, cut.a[i].id);
        size_t len = strlen(cut.a[i].json);
        assert_true(len <= max);
        if (strlen(full.a[i].json) <= max) {
            assert_string_equal(full.a[i].json, cut.a[i].json);
            continue;
        }
        truncated++;
        json_error_t e;
        json_t *a = json_loads(cut.a[i].json, 0, &e);
        json_t *f = json_loads(full.a[i].json, 0, &e);
        assert_non_null(a);
        assert_non_null(f);
        assert_true(json_is_true(json_object_get(a, "truncated")));
        json_t *t = json_object_get(a, "truncation");
        assert_int_equal(json_integer_value(json_object_get(t, "max_bytes")),
                         max);
        assert_int_equal(json_integer_value(json_object_get(t, "full_bytes")),
                         strlen(full.a[i].json));
        assert_int_equal(json_integer_value(json_object_get(t, "nodes_total")),
                         1);
        size_t listed =
            (size_t)json_integer_value(json_object_get(t, "nodes_listed"));
        assert_int_equal(json_array_size(json_object_get(a, "nodes")), listed);
        assert_int_equal(listed, 1);
        json_t *fd = json_object_get(f, "details");
        json_t *ad = json_object_get(a, "details");
        assert_null(json_object_get(ad, "report"));
        json_t *rep = json_object_get(fd, "report");
        assert_int_equal(
            json_integer_value(json_object_get(t, "report_bytes_omitted")) > 0,
            rep != NULL);
        /* everything else as in the full alert */
        json_object_del(f, "nodes");
        json_object_del(a, "nodes");
        json_object_del(fd, "report");
        if (json_integer_value(json_object_get(t, "parameters_omitted")) > 0) {
            no_params++;
            assert_int_equal(json_object_size(json_object_get(a, "parameters")),
                             0);
            assert_int_equal(
                json_integer_value(json_object_get(t, "parameters_omitted")),
                json_object_size(json_object_get(f, "parameters")));
            json_object_del(f, "parameters");
            json_object_del(a, "parameters");
            /* the finding goes with the parameters */
            assert_null(json_object_get(a, "finding"));
            json_object_del(f, "finding");
        }
        json_object_del(a, "truncated");
        json_object_del(a, "truncation");
        assert_true(json_equal(a, f));
        json_decref(a);
        json_decref(f);
    }
    assert_true(truncated > no_params);
    assert_true(no_params > 0);
    assert_true(truncated < full.n);
    sink_clear(&full);
    sink_clear(&cut);
    tw_registry_free(reg);
}

/* ProfilerReport's LowGPUUtilization and a LowGPUUtilization configured
 * beside it publish the same rule, kind, scan and status: the parent in
 * the id keeps them apart (a store de-duplicating by id would otherwise
 * drop one of them). */
static void test_subrule_beside_same_rule(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    static const char *const pr_keys[] = {"LowGPUUtilization_init_grace"};
    static const char *const keys[] = {"init_grace"};
    static const char *const zero[] = {"0"};
    tw_rule_spec specs[] = {{.rule = "ProfilerReport",
                             .keys = pr_keys,
                             .values = zero,
                             .nparams = 1},
                            {.rule = "LowGPUUtilization",
                             .keys = keys,
                             .values = zero,
                             .nparams = 1}};
    tw_job_config cfg;
    tw_job_config_default(&cfg);
    tw_job *job = NULL;
    char err[1024];
    if (tw_job_new("job", &cfg, reg, specs, 2, &job, err, sizeof(err)) != TW_OK)
        fail_msg("tw_job_new: %s", err);
    batches s;
    read_batches(&s);
    runctx c = {.m = NULL};
    c.t = tw_alert_tracker_new(on_alert, &c.alerts);
    assert_non_null(c.t);
    tw_job_on_scan(job, on_scan, &c);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal(tw_job_ingest(job, s.b[i]), TW_OK);
    assert_int_equal(tw_job_finish(job, 0), TW_OK);
    assert_int_equal(tw_alert_tracker_finish(c.t, job), TW_OK);
    size_t twins = 0;
    for (size_t i = 0; i < c.alerts.n; i++) {
        json_t *a = json_loads(c.alerts.a[i].json, 0, NULL);
        assert_non_null(a);
        for (size_t k = i + 1; k < c.alerts.n; k++) {
            assert_string_not_equal(c.alerts.a[i].id, c.alerts.a[k].id);
            json_t *b = json_loads(c.alerts.a[k].json, 0, NULL);
            assert_non_null(b);
            static const char *const same[] = {"rule", "kind", "status"};
            int twin = json_equal(json_object_get(a, "scan"),
                                  json_object_get(b, "scan")) &&
                       (json_object_get(a, "parent") == NULL) !=
                           (json_object_get(b, "parent") == NULL);
            for (size_t f = 0; f < 3; f++)
                twin = twin && json_equal(json_object_get(a, same[f]),
                                          json_object_get(b, same[f]));
            twins += twin;
            json_decref(b);
        }
        json_decref(a);
    }
    /* low_gpu: both LowGPUUtilizations go to IssuesFound, find, finish */
    assert_true(twins >= 3);
    tw_alert_tracker_free(c.t);
    sink_clear(&c.alerts);
    tw_job_free(job);
    free(s.b);
    tw_registry_free(reg);
}

/* save -> free -> new -> restore before every batch and before finish:
 * byte-identical alerts, none repeated or lost. A fresh (unrestored)
 * tracker swapped in instead repeats alerts: the comparison notices. */
static void test_save_restore_continues_exactly(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    sink want, got, fresh;
    run_job(reg, KEEP, NULL, &want, NULL);
    run_job(reg, RESTORE_EVERY_BATCH, NULL, &got, NULL);
    assert_int_equal(got.n, want.n);
    for (size_t i = 0; i < want.n; i++) {
        assert_string_equal(got.a[i].id, want.a[i].id);
        assert_string_equal(got.a[i].json, want.a[i].json);
    }
    run_job(reg, FRESH_AT_MIDDLE, NULL, &fresh, NULL);
    int differs = fresh.n != want.n;
    for (size_t i = 0; !differs && i < want.n; i++)
        differs = strcmp(fresh.a[i].json, want.a[i].json) != 0;
    assert_true(differs);
    sink_clear(&want);
    sink_clear(&got);
    sink_clear(&fresh);
    tw_registry_free(reg);
}

/* Every truncation of a real blob, a trailing byte, and flipped bytes:
 * refused with "alerts: <why> at byte <n>" (or, for a flip that still
 * parses, accepted), never a crash, and a refused restore leaves the
 * tracker as it was. */
static void test_restore_corrupt(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    sink alerts;
    tw_buf *blob = tw_buf_new();
    assert_non_null(blob);
    run_job(reg, KEEP, NULL, &alerts, blob);
    const uint8_t *data = tw_buf_data(blob);
    size_t len = tw_buf_len(blob);
    assert_true(len > 12);
    assert_memory_equal(data, "TWAT", 4);

    /* a tracker holding other state: a refused restore must keep it */
    sink dummy = {0};
    tw_alert_tracker *t = tw_alert_tracker_new(on_alert, &dummy);
    assert_non_null(t);
    char err[256];
    /* version 3: per rule {status, violations, 1 + IssuesFound scan,
     * 1 + the last finding's scan end} */
    uint8_t before_state[] = {'T', 'W', 'A', 'T', 3, 1,   2,
                              6,   4,   14,  1,   2, 'n', 5};
    /* version 1 (no IssuesFound scan) and 2 (no finding end) still read */
    uint8_t v1_state[] = {'T', 'W', 'A', 'T', 1, 1, 2, 6, 1, 2, 'n', 5};
    uint8_t v2_state[] = {'T', 'W', 'A', 'T', 2, 1, 2, 6, 4, 1, 2, 'n', 5};
    assert_int_equal(tw_alert_tracker_restore(t, v1_state, sizeof(v1_state),
                                              err, sizeof(err)),
                     TW_OK);
    assert_int_equal(tw_alert_tracker_restore(t, v2_state, sizeof(v2_state),
                                              err, sizeof(err)),
                     TW_OK);
    assert_int_equal(tw_alert_tracker_restore(t, before_state,
                                              sizeof(before_state), err,
                                              sizeof(err)),
                     TW_OK);
    tw_buf *ref = tw_buf_new(), *now = tw_buf_new();
    assert_non_null(ref);
    assert_non_null(now);
    assert_int_equal(tw_alert_tracker_save(t, ref), TW_OK);
    assert_int_equal(tw_buf_len(ref), sizeof(before_state));
    assert_memory_equal(tw_buf_data(ref), before_state, sizeof(before_state));
    assert_int_equal(tw_alert_tracker_sent(t), 5);

    for (size_t n = 0; n < len; n++) {
        err[0] = '\0';
        if (tw_alert_tracker_restore(t, data, n, err, sizeof(err)) != TW_ERR)
            fail_msg("blob cut to %zu of %zu bytes was accepted", n, len);
        assert_true(strncmp(err, "alerts: ", 8) == 0);
        assert_non_null(strstr(err, " at byte "));
    }
    uint8_t *buf = malloc(len + 1);
    assert_non_null(buf);
    memcpy(buf, data, len);
    buf[len] = 0;
    assert_int_equal(
        tw_alert_tracker_restore(t, buf, len + 1, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "trailing bytes"));

    static const uint8_t flips[] = {0x01, 0x80, 0xff, 0x7f};
    size_t refused = 0;
    for (size_t i = 0; i < len; i++) {
        for (size_t f = 0; f < sizeof(flips); f++) {
            memcpy(buf, data, len);
            buf[i] ^= flips[f];
            err[0] = '\0';
            tw_alert_tracker *u = tw_alert_tracker_new(on_alert, &dummy);
            assert_non_null(u);
            if (tw_alert_tracker_restore(u, buf, len, err, sizeof(err)) ==
                TW_ERR) {
                refused++;
                assert_true(strncmp(err, "alerts: ", 8) == 0);
                if (i < 4)
                    assert_non_null(strstr(err, "magic"));
                /* (3 ^ 0x01 is version 2, read as such and refused
                 * further on) */
                if (i == 4 && (buf[4] == 0 || buf[4] > 3))
                    assert_non_null(strstr(err, "version"));
            } else {
                assert_true(i > 4); /* header damage is always refused */
            }
            tw_alert_tracker_free(u);
            /* and into the tracker that holds state: kept when refused */
            if (tw_alert_tracker_restore(t, buf, len, err, sizeof(err)) ==
                TW_ERR) {
                tw_buf_clear(now);
                assert_int_equal(tw_alert_tracker_save(t, now), TW_OK);
                assert_int_equal(tw_buf_len(now), tw_buf_len(ref));
                assert_memory_equal(tw_buf_data(now), tw_buf_data(ref),
                                    tw_buf_len(ref));
            } else {
                assert_int_equal(tw_alert_tracker_restore(t, before_state,
                                                          sizeof(before_state),
                                                          err, sizeof(err)),
                                 TW_OK);
            }
        }
    }
    assert_true(refused >= 4 * 5);
    /* named reasons */
    uint8_t bad_status[] = {'T', 'W', 'A', 'T', 1, 1, 9, 0, 0, 0};
    assert_int_equal(tw_alert_tracker_restore(t, bad_status, sizeof(bad_status),
                                              err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "bad rule status"));
    uint8_t huge_count[] = {'T', 'W', 'A', 'T', 1, 0xff, 0xff, 0x03, 0, 0};
    assert_int_equal(tw_alert_tracker_restore(t, huge_count, sizeof(huge_count),
                                              err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "count larger"));
    uint8_t null_node[] = {'T', 'W', 'A', 'T', 1, 0, 1, 0, 0};
    assert_int_equal(tw_alert_tracker_restore(t, null_node, sizeof(null_node),
                                              err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "NULL node id"));
    /* the real blob still restores after all that */
    assert_int_equal(tw_alert_tracker_restore(t, data, len, err, sizeof(err)),
                     TW_OK);
    assert_int_equal(tw_alert_tracker_sent(t), alerts.n);

    free(buf);
    tw_buf_free(ref);
    tw_buf_free(now);
    tw_buf_free(blob);
    tw_alert_tracker_free(t);
    sink_clear(&alerts);
    sink_clear(&dummy);
    tw_registry_free(reg);
}

int main(void)
{
    tw_log_set_level(TW_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_matches_spec),
        cmocka_unit_test(test_id_sensitivity),
        cmocka_unit_test(test_tracker_publishes_changes_and_findings),
        cmocka_unit_test(test_save_restore_continues_exactly),
        cmocka_unit_test(test_finding_every_holds_findings),
        cmocka_unit_test(test_subrule_beside_same_rule),
        cmocka_unit_test(test_restore_corrupt),
        cmocka_unit_test(test_bounded_alerts_truncated_with_marker),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
