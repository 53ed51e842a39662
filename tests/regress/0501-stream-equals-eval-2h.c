/* 0501-stream-equals-eval-2h.c - edge-case issue, defect 5: streaming !=
 * eval on a 2-hour job with framework events.
 *
 * How it showed: `synth --duration 2h --nodes 2` replayed into `run` (100x
 * or 500x, nothing late) and `eval` on the same folder disagreed, always
 * the same way: StepOutlier and MaxInitializationTime datapoints 32 769 vs
 * 32 766, Dataloader 128 678 vs 128 657, phase percentages in the 5th
 * digit; 8-30-minute jobs agreed. The cause was eval's clock: it advanced
 * to a trace file's own timestamp (the end of its newest event) before
 * reading it, so where that timestamp fell just past a scan's end +
 * lateness - trace files rotated at a UTC hour change line up with the
 * scan grid for a while - the scan closed without the file's events that
 * overlap its end (RULES.md §1.3 delivers an event to every scan it
 * overlaps); run's watermark waited for them, as the reference does.
 *
 * What it asserts: on a generated 2-hour job with framework events that
 * crosses two UTC hours (1 node, 1 core: the smallest job that shows it,
 * quick under valgrind), the results `trainwatch eval --json` prints and
 * the results file the daemon's router writes have the same "rules" array
 * byte for byte, and the same scans, timestamps and input counts (nothing
 * late). The streaming side is `run`'s path without Kafka: the batches
 * `replay` publishes (a JOB_START and a JOB_END marker from node "replay",
 * the folder's batches in listing order numbered per node), each
 * wire-encoded and decoded, routed by tw_router_batch with run's job
 * configuration. A 2-hour 2-node job (60 MB on the wire) is far more than
 * the test broker keeps per partition (~5 MB), hence in-process here;
 * 0502 does the same end to end through broker, replay and run on a short
 * job across an hour. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "job_router.h"
#include "log.h"
#include "reader.h"
#include "synth.h"
#include "wire.h"

#define JOB_ID "long2h"
/* replay's largest message (cmd_replay.c): no batch here needs a split */
#define MAX_MESSAGE 900000u

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

static char *read_all(FILE *f)
{
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    return buf;
}

/* ---- the streaming side: replay's messages through run's router -------- */

typedef struct stream {
    tw_router *router;
    int64_t offset; /* of the next message on partition 0 */
    char nodes[8][64];
    uint64_t next_seq[8];
    size_t nnodes;
    uint64_t messages;
} stream;

static int no_alert(void *ud, const char *job, const char *id, const char *json,
                    size_t len, int32_t partition, int64_t offset)
{
    (void)job, (void)id, (void)json, (void)len, (void)partition;
    (void)offset;
    (*(uint64_t *)ud)++;
    return TW_OK;
}

/* Numbers b as replay does (per node from 1), encodes it, and routes the
 * decoded copy as run would after reading it from the partition. */
static void publish(stream *s, tw_batch *b)
{
    const char *node = b->node != NULL ? b->node : "";
    size_t i;
    for (i = 0; i < s->nnodes; i++)
        if (strcmp(s->nodes[i], node) == 0)
            break;
    if (i == s->nnodes) {
        assert_true(s->nnodes < 8);
        snprintf(s->nodes[i], sizeof(s->nodes[i]), "%s", node);
        s->next_seq[i] = 1;
        s->nnodes++;
    }
    b->seq = s->next_seq[i]++;
    uint8_t *buf = NULL;
    size_t len = 0;
    tw_wire_status st = tw_wire_encode(b, &buf, &len);
    if (st != TW_WIRE_OK)
        fail_msg("encode: %s", tw_wire_status_name(st));
    assert_true(len <= MAX_MESSAGE);
    tw_batch *d = NULL;
    char err[256];
    if (tw_wire_decode(buf, len, &d, err, sizeof(err)) != TW_WIRE_OK)
        fail_msg("decode: %s", err);
    free(buf);
    assert_int_equal(tw_router_batch(s->router, 0, s->offset++, d, 1000000),
                     TW_OK);
    s->messages++;
}

static int publish_sink(void *ud, tw_batch *b)
{
    publish(ud, b);
    tw_batch_free(b);
    return TW_OK;
}

static void publish_marker(stream *s, tw_marker_kind kind, int64_t time_us,
                           int64_t latest_us)
{
    tw_marker m = {.kind = kind, .time_us = time_us, .latest_us = latest_us};
    tw_batch b;
    memset(&b, 0, sizeof(b));
    b.job = JOB_ID;
    b.node = "replay";
    b.file_ts_us = time_us;
    b.markers = &m;
    b.nmarkers = 1;
    publish(s, &b);
}

/* Streams the folder into a router made as `run` makes it; returns the
 * results file the router wrote (malloc'd text). */
static char *run_results(const char *dir, const char *res_dir)
{
    char err[1024];
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    tw_config *cfg = NULL;
    if (tw_config_default(reg, &cfg, err, sizeof(err)) != TW_OK ||
        (cfg->nrules == 0 &&
         tw_config_default_rules(cfg, reg, err, sizeof(err)) != TW_OK))
        fail_msg("config: %s", err);
    tw_job_config jc = cfg->job;
    jc.external_watermark = 0; /* as cmd_run.c: the data's own clock */
    tw_router_config rc = {.job = jc,
                           .reg = reg,
                           .rules = cfg->rules,
                           .nrules = cfg->nrules,
                           .job_idle_us = 3600 * 1000000LL,
                           .results_dir = res_dir,
                           .topic = "trainwatch.metrics"};
    uint64_t alerts = 0;
    stream s;
    memset(&s, 0, sizeof(s));
    if (tw_router_new(&rc, no_alert, &alerts, &s.router, err, sizeof(err)) !=
        TW_OK)
        fail_msg("tw_router_new: %s", err);
    int64_t start = 0;
    if (tw_router_assign(s.router, 0, NULL, -1, &start, err, sizeof(err)) !=
        TW_OK)
        fail_msg("tw_router_assign: %s", err);

    tw_folder *f = NULL;
    if (tw_folder_list(dir, &f, err, sizeof(err)) != TW_OK)
        fail_msg("list: %s", err);
    /* F and L as replay derives them from the listing (RULES.md §1.4) */
    int64_t F = f->first_system_ts_us, L = f->latest_system_ts_us;
    if (f->first_framework_ts_us != 0 && f->first_framework_ts_us < F)
        F = f->first_framework_ts_us;
    if (f->latest_framework_ts_us != 0 && f->latest_framework_ts_us < L)
        L = f->latest_framework_ts_us;
    publish_marker(&s, TW_MARKER_JOB_START, F, 0);
    tw_trace_state *ts = tw_trace_state_new();
    assert_non_null(ts);
    for (size_t i = 0; i < f->nfiles; i++)
        assert_int_equal(tw_folder_read_file(&f->files[i], JOB_ID, ts,
                                             publish_sink, &s, NULL, NULL,
                                             NULL),
                         TW_OK);
    publish_marker(&s, TW_MARKER_JOB_END, L, L);
    tw_trace_state_free(ts);
    tw_folder_free(f);

    tw_router_stats st;
    tw_router_get_stats(s.router, &st);
    assert_int_equal(st.jobs_finished, 1);
    assert_int_equal(st.jobs_active, 0);
    assert_int_equal(st.late_samples + st.late_events, 0);
    tw_router_free(s.router);
    tw_config_free(cfg);
    tw_registry_free(reg);

    char path[512];
    snprintf(path, sizeof(path), "%s/%s.json", res_dir, JOB_ID);
    FILE *rf = fopen(path, "r");
    if (rf == NULL)
        fail_msg("no results file %s", path);
    char *text = read_all(rf);
    fclose(rf);
    return text;
}

/* ---- the offline side: the eval command -----------------------------------
 */

static char *eval_results(const char *dir)
{
    const char *build = getenv("TW_BUILD_DIR");
    if (build == NULL)
        fail_msg("TW_BUILD_DIR is not set (ctest sets it)");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "'%s/trainwatch' eval '%s' --json --quiet "
             "--job " JOB_ID,
             build, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *text = read_all(p);
    if (pclose(p) != 0)
        fail_msg("%s failed", cmd);
    return text;
}

/* The "rules" array as raw text: from its key to the end of the top-level
 * object (it is the last member in both documents). */
static const char *rules_text(const char *doc, size_t *len)
{
    const char *r = strstr(doc, "\"rules\": [");
    if (r == NULL)
        fail_msg("no rules array in %.200s", doc);
    const char *end = doc + strlen(doc);
    while (end > r && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    assert_true(end > r && end[-1] == '}');
    *len = (size_t)(end - 1 - r);
    return r;
}

static json_int_t number(json_t *doc, const char *outer, const char *key)
{
    json_t *o = outer != NULL ? json_object_get(doc, outer) : doc;
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        fail_msg("no integer %s%s%s", outer ? outer : "", outer ? "." : "",
                 key);
    return json_integer_value(v);
}

static void two_hour_job_run_equals_eval(void **state)
{
    (void)state;
    tw_log_set_level(TW_LOG_ERROR);
    char tmp[] = "/tmp/tw_0501_XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char dir[64], res[64];
    snprintf(dir, sizeof(dir), "%s/" JOB_ID, tmp);
    snprintf(res, sizeof(res), "%s/results", tmp);
    assert_int_equal(mkdir(res, 0700), 0);

    /* Starts 22:13:20 UTC: trace files rotate at 23:00 and 00:00. */
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = dir;
    o.nodes = 1;
    o.cores = 1;
    o.duration_s = 7200;
    char err[512];
    if (tw_synth_opts_resolve(&o, err, sizeof(err)) != 0 ||
        tw_synth_write(&o, NULL, err, sizeof(err)) != 0)
        fail_msg("synth: %s", err);

    char *ev = eval_results(dir);
    char *rn = run_results(dir, res);
    json_error_t jerr;
    json_t *e = json_loads(ev, 0, &jerr), *r = json_loads(rn, 0, &jerr);
    assert_non_null(e);
    assert_non_null(r);
    assert_int_equal(number(e, NULL, "scans"), 120);
    assert_true(number(e, "input", "events") > 250000);
    static const char *const top[] = {"scans", "first_timestamp_us",
                                      "latest_timestamp_us"};
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
        assert_int_equal(number(r, NULL, top[i]), number(e, NULL, top[i]));
    static const char *const input[] = {"samples", "events", "late_samples",
                                        "late_events"};
    for (size_t i = 0; i < sizeof(input) / sizeof(input[0]); i++)
        assert_int_equal(number(r, "input", input[i]),
                         number(e, "input", input[i]));
    size_t elen, rlen;
    const char *er = rules_text(ev, &elen), *rr = rules_text(rn, &rlen);
    if (elen != rlen || memcmp(er, rr, elen) != 0) {
        size_t at = 0;
        while (at < elen && at < rlen && er[at] == rr[at])
            at++;
        size_t from = at > 300 ? at - 300 : 0;
        fail_msg("rules differ at byte %zu:\n  eval: ...%.400s\n  run:  "
                 "...%.400s",
                 at, er + from, rr + from);
    }
    json_decref(e);
    json_decref(r);
    free(ev);
    free(rn);
    rm_tree(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_hour_job_run_equals_eval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
