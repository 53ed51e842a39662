/*
 * test_reader.c - the agent-file reader (engine/io/reader.h) on the project's
 * agent-format fixtures (tests/fixtures/agent), on fixture folders made in
 * a temporary directory and, when ../shared/data/smdebug is there, on its
 * real sample files (those tests are skipped with a message otherwise).
 *
 * Expected counts were taken from the files with Python's json module
 * (RULES.md §1 semantics; B/E per pid stack; ts+dur rounded half away from
 * zero when written with fractions).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "reader.h"

/* ------------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

typedef struct err_rec {
    char path[512];
    uint64_t line;
    char reason[256];
} err_rec;

typedef struct collect {
    tw_batch *batches[64];
    size_t nbatches;
    err_rec errs[64];
    size_t nerrs;
    tw_reader_stats st;
} collect;

static int sink(void *ud, tw_batch *b)
{
    collect *c = ud;
    if (c->nbatches == sizeof(c->batches) / sizeof(*c->batches)) {
        tw_batch_free(b);
        return TW_ERR;
    }
    c->batches[c->nbatches++] = b;
    return TW_OK;
}

static void on_err(void *ud, const char *path, uint64_t line,
                   const char *reason)
{
    collect *c = ud;
    if (c->nerrs == sizeof(c->errs) / sizeof(*c->errs))
        return;
    err_rec *e = &c->errs[c->nerrs++];
    snprintf(e->path, sizeof(e->path), "%s", path);
    e->line = line;
    snprintf(e->reason, sizeof(e->reason), "%s", reason);
}

static void collect_free(collect *c)
{
    for (size_t i = 0; i < c->nbatches; i++)
        tw_batch_free(c->batches[i]);
    memset(c, 0, sizeof(*c));
}

static size_t total_samples(const collect *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nbatches; i++)
        n += c->batches[i]->nsamples;
    return n;
}

static size_t total_events(const collect *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nbatches; i++)
        n += c->batches[i]->nevents;
    return n;
}

static const tw_fw_event *event_at(const collect *c, size_t k)
{
    for (size_t i = 0; i < c->nbatches; i++) {
        if (k < c->batches[i]->nevents)
            return &c->batches[i]->events[k];
        k -= c->batches[i]->nevents;
    }
    return NULL;
}

static const char *arg_of(const tw_fw_event *e, const char *key,
                          tw_arg_kind *kind)
{
    for (uint32_t i = 0; i < e->nargs; i++) {
        if (strcmp(e->args[i].key, key) == 0) {
            if (kind != NULL)
                *kind = e->args[i].kind;
            return e->args[i].value;
        }
    }
    return NULL;
}

static char g_data[1024];
static char g_fixtures[1024];
static char g_tmp[512];
static int g_have_shared; /* ../shared/data/smdebug is readable */

/* The tests of the shared sample files are extra: without them the
 * fixture tests cover the same formats. */
#define SKIP_WITHOUT_SHARED()                                                  \
    do {                                                                       \
        if (!g_have_shared) {                                                  \
            print_message("skipped: no shared sample data at %s\n", g_data);   \
            skip();                                                            \
        }                                                                      \
    } while (0)

static const char *fixture_path(const char *rel)
{
    static char buf[8][1536];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof(buf[0]), "%s/%s", g_fixtures, rel);
    return p;
}

static const char *data_path(const char *rel)
{
    static char buf[8][1536];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof(buf[0]), "%s/%s", g_data, rel);
    return p;
}

static const char *tmp_path(const char *rel)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof(buf[0]), "%s/%s", g_tmp, rel);
    return p;
}

/* mkdir -p of the folder part of path. */
static void make_parents(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
}

static void write_file(const char *path, const char *text)
{
    make_parents(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void rm_rf(const char *path)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

/* Reads one file with a fresh trace state. */
static int read_one(collect *c, const char *path, tw_file_kind kind,
                    tw_source source, const char *node, int64_t file_ts)
{
    tw_agent_file af;
    memset(&af, 0, sizeof(af));
    af.path = (char *)path;
    af.kind = kind;
    af.source = source;
    af.node = (char *)node;
    af.file_ts_us = file_ts;
    af.feed_key_us = file_ts;
    af.has_metadata = 1;
    tw_trace_state *ts = tw_trace_state_new();
    assert_non_null(ts);
    int rc = tw_folder_read_file(&af, "job-1", ts, sink, c, on_err, c, &c->st);
    tw_trace_state_free(ts);
    return rc;
}

static int setup(void **state)
{
    (void)state;
    const char *shared = getenv("TW_SHARED_DIR");
    if (shared == NULL)
        shared = "../shared";
    snprintf(g_data, sizeof(g_data), "%s/data/smdebug", shared);
    char probe[1100];
    snprintf(probe, sizeof(probe), "%s/1591160699.algo-1.json", g_data);
    g_have_shared = access(probe, R_OK) == 0;
    const char *source = getenv("TW_SOURCE_DIR");
    snprintf(g_fixtures, sizeof(g_fixtures), "%s/tests/fixtures/agent",
             source != NULL ? source : ".");
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/tw_test_reader.XXXXXX");
    assert_non_null(mkdtemp(g_tmp));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rm_rf(g_tmp);
    return 0;
}

/* ------------------------------------------------------------------------
 * System files
 * --------------------------------------------------------------------- */

static void test_system_sample_file(void **state)
{
    (void)state;
    SKIP_WITHOUT_SHARED();
    collect c = {0};
    assert_int_equal(read_one(&c, data_path("1591160699.algo-1.json"),
                              TW_FILE_SYSTEM, 0, "algo-1", 1591160699000000),
                     TW_OK);
    assert_int_equal(c.nerrs, 0);
    assert_int_equal(c.nbatches, 1);
    tw_batch *b = c.batches[0];
    assert_int_equal(b->nsamples, 14);
    assert_int_equal(b->nseries, 6);
    assert_string_equal(b->node, "algo-1");
    assert_string_equal(b->job, "job-1");
    assert_true(b->file_ts_us == 1591160699000000);
    assert_string_equal(b->file_path, data_path("1591160699.algo-1.json"));
    assert_true(b->samples[0].ts == 1591160699.4570894);
    assert_true(b->samples[0].value == 4.76);
    assert_int_equal(b->samples[0].flags, 0);
    assert_string_equal(b->series[0].type, "cpu");
    assert_string_equal(b->series[0].name, "cpu0");
    assert_string_equal(b->series[0].dimension, "CPUUtilization");
    /* line 3: gpu0 GPUUtilization 8.00 (a decimal, not integral) */
    assert_true(b->samples[2].value == 8.0);
    assert_int_equal(b->samples[2].flags, 0);
    assert_string_equal(b->series[b->samples[2].series].name, "gpu0");
    /* line 14: the last sample */
    assert_true(b->samples[13].ts == 1591170699.45708);
    assert_true(b->samples[13].value == 47.76);
    assert_int_equal(c.st.lines, 14);
    assert_int_equal(c.st.bad_lines, 0);
    assert_int_equal(c.st.samples, 14);
    assert_int_equal(c.st.bytes, 1797);
    collect_free(&c);

    static const struct {
        const char *rel;
        int64_t ts;
        size_t samples, series;
        double first_ts;
    } files[] = {
        {"test_traces/system/incremental/1591160699.algo-1.json",
         1591160699000000, 14, 6, 1591160699.4570894},
        {"test_traces/system/incremental/1591748100.algo-1.json",
         1591748100000000, 32, 32, 1591748109.2321954},
        {"test_traces/system/incremental/1591748160.algo-1.json",
         1591748160000000, 32, 32, 1591748169.2323716},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
        assert_int_equal(read_one(&c, data_path(files[i].rel), TW_FILE_SYSTEM,
                                  0, "algo-1", files[i].ts),
                         TW_OK);
        assert_int_equal(c.nerrs, 0);
        assert_int_equal(c.nbatches, 1);
        assert_int_equal(c.batches[0]->nsamples, files[i].samples);
        assert_int_equal(c.batches[0]->nseries, files[i].series);
        assert_true(c.batches[0]->samples[0].ts == files[i].first_ts);
        collect_free(&c);
    }
}

static void test_system_corrupt_sample(void **state)
{
    (void)state;
    SKIP_WITHOUT_SHARED();
    collect c = {0};
    const char *p = data_path("1591160699.algo-1.json.corrupt");
    assert_int_equal(
        read_one(&c, p, TW_FILE_SYSTEM, 0, "algo-1", 1591160699000000), TW_OK);
    /* Line 14 is cut off before "Timestamp" and the closing brace. */
    assert_int_equal(c.nerrs, 1);
    assert_string_equal(c.errs[0].path, p);
    assert_int_equal(c.errs[0].line, 14);
    assert_int_equal(c.st.lines, 14);
    assert_int_equal(c.st.bad_lines, 1);
    assert_int_equal(c.st.bad_files, 0);
    assert_int_equal(total_samples(&c), 13);
    assert_true(c.batches[0]->samples[12].ts == 1591169699.4579994);
    collect_free(&c);
}

static void test_system_bad_lines(void **state)
{
    (void)state;
    const char *p = tmp_path("bad/system/x/1600000000.algo-3.json");
    write_file(p,
               /* 1 */
               "{\"Type\":\"gpu\",\"Name\":\"gpu0\",\"Dimension\":"
               "\"GPUUtilization\",\"Value\":97,\"NodeId\":\"algo-3\","
               "\"Timestamp\":1600000001.25}\n"
               /* 2 */ "not json at all\n"
               /* 3 */ "\n"
               /* 4 */ "{\"Type\":\"memory\",\"Name\":\"MemoryUsedPercent\","
               "\"Value\":6.75,\"NodeId\":\"algo-3\",\"Timestamp\":1}\n"
               /* 5 */ "{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":\"\","
               "\"Value\":\"5\",\"NodeId\":\"algo-3\",\"Timestamp\":1}\n"
               /* 6 */ "{\"Type\":\"i/o\",\"Name\":null,\"Dimension\":\"\","
               "\"Value\":1e3,\"NodeId\":\"algo-3\","
               "\"Timestamp\":1600000002.5}\r\n"
               /* 7 */ "{\"Type\":\"i/o\",\"Dimension\":\"\",\"Value\":-2,"
               "\"NodeId\":\"algo-3\",\"Timestamp\":1600000003} x\n"
               /* 8 */ "[1,2]\n"
               /* 9 */ "{\"Type\":\"i/o\",\"Dimension\":\"\",\"Value\":-2,"
               "\"NodeId\":\"algo-3\",\"Timestamp\":1600000003}");
    collect c = {0};
    assert_int_equal(
        read_one(&c, p, TW_FILE_SYSTEM, 0, "algo-3", 1600000000000000), TW_OK);
    assert_int_equal(c.nerrs, 5);
    uint64_t lines[] = {2, 4, 5, 7, 8};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(c.errs[i].line, lines[i]);
    assert_non_null(strstr(c.errs[1].reason, "Dimension"));
    assert_non_null(strstr(c.errs[2].reason, "Value"));
    assert_int_equal(c.st.lines, 8); /* the blank line is not counted */
    assert_int_equal(c.st.bad_lines, 5);
    assert_int_equal(c.nbatches, 1);
    tw_batch *b = c.batches[0];
    assert_int_equal(b->nsamples, 3);
    /* gpu0 97 (integral), i/o null-name 1e3 (not), i/o missing name -2 */
    assert_true(b->samples[0].value == 97.0);
    assert_int_equal(b->samples[0].flags, TW_SAMPLE_INTEGRAL);
    assert_true(b->samples[0].ts == 1600000001.25);
    assert_true(b->samples[1].value == 1000.0);
    assert_int_equal(b->samples[1].flags, 0);
    assert_true(b->samples[2].value == -2.0);
    assert_int_equal(b->samples[2].flags, TW_SAMPLE_INTEGRAL);
    assert_true(b->samples[2].ts == 1600000003.0);
    /* Name null and Name missing are the same series (NULL name). */
    assert_int_equal(b->nseries, 2);
    assert_null(b->series[1].name);
    assert_string_equal(b->series[1].dimension, "");
    assert_int_equal(b->samples[1].series, b->samples[2].series);
    collect_free(&c);
}

static void test_system_nodes_and_split(void **state)
{
    (void)state;
    /* Two NodeIds in one file: one batch each, in order of appearance. */
    const char *p = tmp_path("split/1600000000.algo-1.json");
    make_parents(p);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    const size_t n1 = TW_READER_BATCH_MAX + 10;
    for (size_t i = 0; i < n1; i++) {
        fprintf(f,
                "{\"Type\":\"cpu\",\"Name\":\"cpu%zu\",\"Dimension\":"
                "\"CPUUtilization\",\"Value\":%zu.5,\"NodeId\":\"algo-1\","
                "\"Timestamp\":1600000000.%07zu}\n",
                i % 8, i % 100, i);
        if (i % 1000 == 0)
            fprintf(f, "{\"Type\":\"gpu\",\"Name\":\"gpu0\",\"Dimension\":"
                       "\"GPUUtilization\",\"Value\":1,\"NodeId\":\"algo-2\","
                       "\"Timestamp\":1600000000.5}\n");
    }
    fclose(f);
    collect c = {0};
    assert_int_equal(
        read_one(&c, p, TW_FILE_SYSTEM, 0, "algo-1", 1600000000000000), TW_OK);
    assert_int_equal(c.nerrs, 0);
    /* algo-1: 65536 + 10 samples; algo-2: 66 (i = 0, 1000, ..., 65000). */
    assert_int_equal(c.nbatches, 3);
    assert_string_equal(c.batches[0]->node, "algo-1");
    assert_int_equal(c.batches[0]->nsamples, TW_READER_BATCH_MAX);
    assert_int_equal(c.batches[0]->nseries, 8);
    assert_string_equal(c.batches[1]->node, "algo-1");
    assert_int_equal(c.batches[1]->nsamples, 10);
    assert_int_equal(c.batches[1]->nseries, 8);
    assert_string_equal(c.batches[2]->node, "algo-2");
    assert_int_equal(c.batches[2]->nsamples, 66);
    assert_int_equal(c.batches[2]->nseries, 1);
    /* The second algo-1 batch starts at i = 65536 with its own dictionary. */
    tw_batch *b = c.batches[1];
    assert_string_equal(b->series[b->samples[0].series].name, "cpu0");
    assert_true(b->samples[0].ts == 1600000000.0065536);
    assert_int_equal(c.st.samples, n1 + 66);
    collect_free(&c);
}

/* ------------------------------------------------------------------------
 * Trace files
 * --------------------------------------------------------------------- */

static void test_trace_sample_files(void **state)
{
    (void)state;
    SKIP_WITHOUT_SHARED();
    static const struct {
        const char *rel;
        tw_source source;
        size_t elements, events;
    } files[] = {
        {"1589314018481947000_1234-testhost_model_timeline.json",
         TW_SOURCE_MODEL_TIMELINE, 53, 49},
        {"horovod_timeline_small.json", TW_SOURCE_HOROVOD, 57, 21},
        {"horovod_timeline_traces/framework/pevents/2020070206/"
         "1593673051472361_88359-8c859046be41.ant.amazon.com_horovod_"
         "timeline.json",
         TW_SOURCE_HOROVOD, 3, 0},
        {"merge_traces/framework/pevents/2020071317/"
         "1594662614815222_905-b88ab1bb8259_model_timeline.json",
         TW_SOURCE_MODEL_TIMELINE, 5, 1},
        {"merge_traces/framework/pevents/2020071317/"
         "1594662624558411_905-b88ab1bb8259_model_timeline.json",
         TW_SOURCE_MODEL_TIMELINE, 665, 661},
        {"merge_traces/framework/pevents/2020071317/"
         "1594662624718694_905-b88ab1bb8259_pythontimeline.json",
         TW_SOURCE_PYTHONTIMELINE, 46, 40},
        {"model_timeline_traces/framework/pevents/2020052602/"
         "1590461127873222_0001_model_timeline.json",
         TW_SOURCE_MODEL_TIMELINE, 60, 56},
        {"model_timeline_traces/framework/pevents/2020052602/"
         "1590461139923994_0001_model_timeline.json",
         TW_SOURCE_MODEL_TIMELINE, 5, 1},
        {"model_timeline_traces/framework/pevents/2020052602/"
         "1590461139949971_0001_model_timeline.json",
         TW_SOURCE_MODEL_TIMELINE, 60, 52},
        {"test_traces/framework/pevents/2020051923/"
         "1589930988000000_4487_0000_pythontimeline.json",
         TW_SOURCE_PYTHONTIMELINE, 5, 1},
        {"test_traces/framework/pevents/2020051923/"
         "1589930989000000_4487_0000_pythontimeline.json",
         TW_SOURCE_PYTHONTIMELINE, 5, 1},
        {"test_traces/framework/pevents/2020051923/"
         "1589930990000000_4487_0000_pythontimeline.json",
         TW_SOURCE_PYTHONTIMELINE, 5, 1},
        {"test_traces/framework/pevents/2020051923/"
         "1589930991000000_4487_0000_pythontimeline.json",
         TW_SOURCE_PYTHONTIMELINE, 5, 1},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
        collect c = {0};
        assert_int_equal(read_one(&c, data_path(files[i].rel),
                                  TW_FILE_FRAMEWORK, files[i].source, "n", 1),
                         TW_OK);
        assert_int_equal(c.nerrs, 0);
        assert_int_equal(c.st.lines, files[i].elements);
        assert_int_equal(c.st.bad_lines, 0);
        assert_int_equal(total_events(&c), files[i].events);
        assert_int_equal(c.nbatches, files[i].events ? 1 : 0);
        collect_free(&c);
    }

    /* X event: start = ts + base, end = start + dur, phase from its pid. */
    collect c = {0};
    assert_int_equal(read_one(&c, data_path(files[9].rel), TW_FILE_FRAMEWORK,
                              TW_SOURCE_PYTHONTIMELINE, "4487",
                              1589930988000000),
                     TW_OK);
    const tw_fw_event *e = event_at(&c, 0);
    assert_string_equal(e->name, "event1");
    assert_string_equal(e->phase, "RotationPolicyTest_file_size");
    assert_string_equal(e->node, "4487");
    assert_true(e->start_us == 1589930987655184 + 1008335);
    assert_true(e->end_us == 1589930988663519 + 1000000);
    assert_int_equal(e->pid, 1);
    assert_int_equal(e->tid, 0);
    assert_int_equal(e->source, TW_SOURCE_PYTHONTIMELINE);
    assert_int_equal(e->mode, TW_MODE_NONE);
    assert_int_equal(e->nargs, 1);
    tw_arg_kind kind;
    assert_string_equal(arg_of(e, "step_num", &kind), "1");
    assert_int_equal(kind, TW_ARG_NUMBER);
    assert_true(c.batches[0]->file_ts_us == 1589930988000000);
    collect_free(&c);

    /* Step events: mode from the name, string args, phases per pid. */
    assert_int_equal(read_one(&c, data_path(files[5].rel), TW_FILE_FRAMEWORK,
                              TW_SOURCE_PYTHONTIMELINE, "905-b88ab1bb8259",
                              1594662624718694),
                     TW_OK);
    e = event_at(&c, 0);
    assert_string_equal(e->name, "Step:ModeKeys.TRAIN");
    assert_string_equal(e->phase, "Step:ModeKeys.TRAIN");
    assert_int_equal(e->mode, TW_MODE_TRAIN);
    assert_true(e->start_us == 1594662608090195);
    assert_true(e->end_us == 1594662617110920);
    assert_string_equal(arg_of(e, "step_num", &kind), "0");
    assert_int_equal(kind, TW_ARG_STRING);
    assert_string_equal(arg_of(e, "pid", &kind), "905");
    assert_int_equal(kind, TW_ARG_NUMBER);
    e = event_at(&c, 39);
    assert_string_equal(e->name, "Step:ModeKeys.EVAL");
    assert_int_equal(e->mode, TW_MODE_EVAL);
    assert_int_equal(e->pid, 2);
    assert_true(e->end_us == 1594662624718694);
    assert_string_equal(arg_of(e, "step_num", NULL), "9");
    collect_free(&c);

    /* Events without args have args == NULL. */
    assert_int_equal(read_one(&c, data_path(files[0].rel), TW_FILE_FRAMEWORK,
                              TW_SOURCE_MODEL_TIMELINE, "1234-testhost", 1),
                     TW_OK);
    e = event_at(&c, 0);
    assert_string_equal(e->name, "dataset::GetNext");
    assert_string_equal(e->phase, "DataIterator");
    assert_true(e->start_us == 1589314018458743);
    assert_true(e->end_us == 1589314018459783);
    assert_null(e->args);
    assert_int_equal(e->nargs, 0);
    collect_free(&c);
}

static void test_trace_horovod_be(void **state)
{
    (void)state;
    SKIP_WITHOUT_SHARED();
    collect c = {0};
    /* B/E pairs on pids 1 and 2; the E events (lines 49, 51) yield them. */
    assert_int_equal(read_one(&c, data_path("horovod_timeline_small.json"),
                              TW_FILE_FRAMEWORK, TW_SOURCE_HOROVOD, "h", 1),
                     TW_OK);
    assert_int_equal(total_events(&c), 21);
    size_t npairs = 0;
    for (size_t i = 0; i < 21; i++) {
        const tw_fw_event *e = event_at(&c, i);
        if (strcmp(e->name, "NEGOTIATE_ALLREDUCE") == 0) {
            npairs++;
            assert_string_equal(e->phase, "");
            assert_int_equal(e->source, TW_SOURCE_HOROVOD);
            if (e->pid == 1) {
                assert_true(e->start_us == 77575718041);
                assert_true(e->end_us == 77576058946);
            } else {
                assert_int_equal(e->pid, 2);
                assert_true(e->start_us == 77575718047);
                assert_true(e->end_us == 77576058948);
            }
        }
    }
    assert_int_equal(npairs, 2);
    collect_free(&c);

    /* The real rotated file: two E events of pid 14 have no B. */
    const char *p =
        data_path("horovod_timeline_traces/framework/pevents/2020070206/"
                  "1593673051473228_88359-8c859046be41.ant.amazon.com_horovod_"
                  "timeline.json");
    assert_int_equal(read_one(&c, p, TW_FILE_FRAMEWORK, TW_SOURCE_HOROVOD,
                              "88359-8c859046be41.ant.amazon.com",
                              1593673051473228),
                     TW_OK);
    assert_int_equal(total_events(&c), 19);
    assert_int_equal(c.nerrs, 2);
    assert_int_equal(c.errs[0].line, 50);
    assert_int_equal(c.errs[1].line, 52);
    assert_string_equal(c.errs[0].path, p);
    assert_int_equal(c.st.bad_lines, 2);
    const tw_fw_event *e = event_at(&c, 0);
    assert_string_equal(e->name, "4");
    assert_true(e->start_us == 1592860687560103 + 8440610);
    assert_true(e->end_us == 1592860687560103 + 8440610 + 812355471858);
    collect_free(&c);
}

static void test_trace_be_pairing(void **state)
{
    (void)state;
    const char *p = tmp_path("be/trace_pythontimeline.json");
    write_file(p,
               "[\n"
               "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 7, "
               "\"args\": {\"start_time_since_epoch_in_micros\": 1000000}},\n"
               "{\"name\": \"outer\", \"ph\": \"B\", \"pid\": 1, \"tid\": 4, "
               "\"ts\": 10},\n"
               "{\"name\": \"inner\", \"ph\": \"B\", \"pid\": 1, \"tid\": 5, "
               "\"ts\": 20},\n"
               "{\"name\": \"other\", \"ph\": \"B\", \"pid\": 2, \"ts\": 25},\n"
               "{\"ph\": \"E\", \"pid\": 1, \"tid\": 5, \"ts\": 30, "
               "\"args\": {\"k\": \"inner-end\"}},\n"
               "{\"ph\": \"E\", \"pid\": 1, \"ts\": 40},\n"
               "{\"ph\": \"E\", \"pid\": 1, \"ts\": 41},\n"
               "{\"ph\": \"E\", \"pid\": 2, \"ts\": 24},\n"
               "{\"ph\": \"E\", \"pid\": 3, \"ts\": 50},\n"
               "{\"name\": \"late\", \"ph\": \"B\", \"pid\": 9, \"ts\": 60}\n"
               "]\n");
    const char *p2 = tmp_path("be/trace2_pythontimeline.json");
    write_file(p2, "[{\"ph\": \"E\", \"pid\": 9, \"ts\": 70}]");
    tw_agent_file af[2];
    memset(af, 0, sizeof(af));
    af[0].path = (char *)p;
    af[1].path = (char *)p2;
    for (int i = 0; i < 2; i++) {
        af[i].kind = TW_FILE_FRAMEWORK;
        af[i].source = TW_SOURCE_PYTHONTIMELINE;
        af[i].node = "n";
    }
    tw_trace_state *ts = tw_trace_state_new();
    collect c = {0};
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            tw_folder_read_file(&af[i], NULL, ts, sink, &c, on_err, &c, &c.st),
            TW_OK);
    tw_trace_state_free(ts);
    /* inner (yielded first, at its E), outer, then late across files. */
    assert_int_equal(total_events(&c), 3);
    const tw_fw_event *e = event_at(&c, 0);
    assert_string_equal(e->name, "inner");
    assert_true(e->start_us == 1000020 && e->end_us == 1000030);
    assert_int_equal(e->tid, 5);
    assert_string_equal(arg_of(e, "k", NULL), "inner-end");
    e = event_at(&c, 1);
    assert_string_equal(e->name, "outer");
    assert_true(e->start_us == 1000010 && e->end_us == 1000040);
    assert_int_equal(e->tid, 0); /* the E has no tid (reference) */
    assert_null(e->args);
    e = event_at(&c, 2);
    assert_string_equal(e->name, "late");
    assert_true(e->start_us == 1000060 && e->end_us == 1000070);
    /* line 8: extra E of pid 1; line 9: negative (24 < 25);
       line 10: E of a pid that never had a B. */
    assert_int_equal(c.nerrs, 3);
    assert_int_equal(c.errs[0].line, 8);
    assert_int_equal(c.errs[1].line, 9);
    assert_non_null(strstr(c.errs[1].reason, "negative"));
    assert_int_equal(c.errs[2].line, 10);
    assert_int_equal(c.st.bad_lines, 3);
    collect_free(&c);
}

static void test_trace_base_persistence(void **state)
{
    (void)state;
    const char *a = tmp_path("base/a_pythontimeline.json");
    const char *b = tmp_path("base/b_pythontimeline.json");
    const char *m = tmp_path("base/c_model_timeline.json");
    write_file(a, "[{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, "
                  "\"args\": {\"start_time_since_epoch_in_micros\": 5000000}},"
                  "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, "
                  "\"args\": {\"name\": \"Step:ModeKeys.TRAIN\"}},"
                  "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 2},"
                  "{\"name\": \"x\", \"ph\": \"X\", \"pid\": 2, \"ts\": 1, "
                  "\"dur\": 1}]");
    write_file(b, "[{\"name\": \"Step:ModeKeys.GLOBAL\", \"ph\": \"X\", "
                  "\"pid\": 1, \"ts\": 7, \"dur\": 3, \"args\": {}}]");
    write_file(m, "[{\"name\": \"y\", \"ph\": \"X\", \"pid\": 1, \"ts\": 7, "
                  "\"dur\": 3}]");
    tw_agent_file af[3];
    memset(af, 0, sizeof(af));
    const char *paths[3] = {a, b, m};
    tw_source src[3] = {TW_SOURCE_PYTHONTIMELINE, TW_SOURCE_PYTHONTIMELINE,
                        TW_SOURCE_MODEL_TIMELINE};
    tw_trace_state *ts = tw_trace_state_new();
    collect c = {0};
    for (int i = 0; i < 3; i++) {
        af[i].path = (char *)paths[i];
        af[i].kind = TW_FILE_FRAMEWORK;
        af[i].source = src[i];
        af[i].node = "n";
        assert_int_equal(
            tw_folder_read_file(&af[i], "j", ts, sink, &c, on_err, &c, &c.st),
            TW_OK);
    }
    tw_trace_state_free(ts);
    assert_int_equal(c.nerrs, 0);
    assert_int_equal(total_events(&c), 3);
    const tw_fw_event *e = event_at(&c, 0);
    assert_string_equal(e->phase, "Unknown"); /* process_name without args */
    assert_true(e->start_us == 5000001);
    e = event_at(&c, 1); /* next file of the same source: base and phases */
    assert_string_equal(e->phase, "Step:ModeKeys.TRAIN");
    assert_int_equal(e->mode, TW_MODE_GLOBAL);
    assert_true(e->start_us == 5000007 && e->end_us == 5000010);
    assert_non_null(e->args);
    assert_int_equal(e->nargs, 0);
    e = event_at(&c, 2); /* another source type: its own state */
    assert_string_equal(e->phase, "Unknown");
    assert_true(e->start_us == 7 && e->end_us == 10);
    collect_free(&c);
}

static void test_trace_args_kinds(void **state)
{
    (void)state;
    const char *p = tmp_path("args/t_model_timeline.json");
    write_file(p, "[{\"name\": \"a\\\"b\", \"ph\": \"X\", \"pid\": \"3\", "
                  "\"tid\": 12345678901, \"ts\": 1.5, \"dur\": 2.25, "
                  "\"args\": {\"s\": \"x\\u00e9\\n\", \"n\": 1.50, "
                  "\"i\": -7, \"t\": true, \"f\": false, \"z\": null, "
                  "\"o\": {\"a\": [1, 2]}, \"l\": [1, {\"b\": 2}]}}]");
    collect c = {0};
    assert_int_equal(
        read_one(&c, p, TW_FILE_FRAMEWORK, TW_SOURCE_MODEL_TIMELINE, "n", 1),
        TW_OK);
    assert_int_equal(c.nerrs, 0);
    const tw_fw_event *e = event_at(&c, 0);
    assert_non_null(e);
    assert_string_equal(e->name, "a\"b");
    assert_int_equal(e->pid, 3);
    assert_true(e->tid == 12345678901);
    assert_true(e->start_us == 2); /* llround(1.5) */
    assert_true(e->end_us == 4);   /* llround(3.75) */
    assert_int_equal(e->nargs, 8);
    static const struct {
        const char *key, *value;
        tw_arg_kind kind;
    } want[] = {
        {"s", "x\xc3\xa9\n", TW_ARG_STRING},
        {"n", "1.50", TW_ARG_NUMBER},
        {"i", "-7", TW_ARG_NUMBER},
        {"t", "true", TW_ARG_BOOL},
        {"f", "false", TW_ARG_BOOL},
        {"z", "null", TW_ARG_NULL},
        {"o", "{\"a\": [1, 2]}", TW_ARG_JSON},
        {"l", "[1, {\"b\": 2}]", TW_ARG_JSON},
    };
    for (size_t i = 0; i < 8; i++) {
        assert_string_equal(e->args[i].key, want[i].key);
        assert_string_equal(e->args[i].value, want[i].value);
        assert_int_equal(e->args[i].kind, want[i].kind);
    }
    collect_free(&c);
}

static int same_str(const char *a, const char *b)
{
    return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

/* Everything a read produced, but the bytes read, is the same. */
static void assert_same_read(const collect *a, const collect *b)
{
    assert_int_equal(total_events(a), total_events(b));
    for (size_t k = 0; k < total_events(a); k++) {
        const tw_fw_event *x = event_at(a, k), *y = event_at(b, k);
        assert_true(same_str(x->name, y->name));
        assert_true(same_str(x->phase, y->phase));
        assert_true(same_str(x->node, y->node));
        assert_int_equal(x->start_us, y->start_us);
        assert_int_equal(x->end_us, y->end_us);
        assert_int_equal(x->pid, y->pid);
        assert_int_equal(x->tid, y->tid);
        assert_int_equal(x->mode, y->mode);
        assert_int_equal(x->flags, y->flags);
        assert_int_equal(x->nargs, y->nargs);
        for (uint32_t i = 0; i < x->nargs; i++) {
            assert_string_equal(x->args[i].key, y->args[i].key);
            assert_string_equal(x->args[i].value, y->args[i].value);
            assert_int_equal(x->args[i].kind, y->args[i].kind);
        }
    }
    assert_int_equal(a->nerrs, b->nerrs);
    for (size_t i = 0; i < a->nerrs; i++) {
        assert_int_equal(a->errs[i].line, b->errs[i].line);
        assert_string_equal(a->errs[i].reason, b->errs[i].reason);
    }
    assert_int_equal(a->st.lines, b->st.lines);
    assert_int_equal(a->st.bad_lines, b->st.bad_lines);
    assert_int_equal(a->st.bad_files, b->st.bad_files);
    assert_int_equal(a->st.incomplete_files, b->st.incomplete_files);
    assert_int_equal(a->st.events, b->st.events);
}

/* The trace reader takes a whole event array in one simdjson pass and
 * falls back to its element-by-element scan where that pass stops. Each
 * text is read as is and with an unclosed string after its end, which
 * the scan never reads (it stops at the closing ']' or '}') but which
 * makes the text as a whole invalid, so that the second read is the
 * scan alone: both must give the same events, reports and counts. */
static void test_trace_fast_path_same_as_scan(void **state)
{
    (void)state;
#define EV(name, ts)                                                           \
    "{\"name\": \"" name "\", \"ph\": \"X\", \"pid\": 1, "                     \
    "\"tid\": 7, \"ts\": " #ts ", \"dur\": 2, "                                \
    "\"args\": {\"step_num\": \"3\", \"k\": [1, {\"a\": 2}]}}"
    const char *texts[] = {
        /* all clean: B/E pairs, metadata, escapes, a repeated key */
        "[\n" EV("a", 10) ",\n"
                          "{\"name\": \"process_name\", \"ph\": \"M\", "
                          "\"pid\": 1, \"args\": "
                          "{\"name\": \"Step:ModeKeys.TRAIN\"}},\n"
                          "{\"name\": \"b\\\"q\\u00e9\", \"ph\": \"B\", "
                          "\"pid\": 2, \"ts\": 20},\n"
                          "{\"name\": \"b\\\"q\\u00e9\", \"ph\": \"E\", "
                          "\"pid\": 2, \"ts\": 29, "
                          "\"ts\": 30},\n" EV("c", 40) "\n]",
        /* an element that is not an object, in the middle */
        "[" EV("a", 1) ",\n 5,\n" EV("b", 2) ", \"str\", [1]," EV("c", 3) "]",
        /* args that are not an object, pid of the wrong type */
        "[" EV("a",
               1) ",\n{\"name\": \"x\", \"ph\": \"X\", \"ts\": 1, "
                  "\"dur\": 1, \"args\": 3},\n{\"name\": \"y\", \"ph\": \"X\", "
                  "\"pid\": 1.5, \"ts\": 2, \"dur\": 1}," EV("b", 2) "]",
        /* a missing comma: the file is malformed from there */
        "[" EV("a", 1) ",\n" EV("b", 2) "\n" EV("c", 3) "]",
        /* a trailing comma before ']' */
        "[" EV("a", 1) ",\n" EV("b", 2) ",\n]",
        /* ':' where ',' belongs */
        "[" EV("a", 1) ":" EV("b", 2) "]",
        /* empty, whitespace only, one element */
        "[]",
        " [ \n\t ] ",
        "[" EV("a", 1) "]",
        /* the object form, other members before and after */
        "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [" EV("a", 1) ",\n" EV(
            "b", 2) "], \"otherData\": {\"x\": [1, 2]}}",
        /* a key that is not a string inside an element */
        "[" EV("a", 1) ",\n{\"name\": \"x\", 5: 1}," EV("b", 2) "]",
    };
#undef EV
    for (size_t t = 0; t < sizeof(texts) / sizeof(*texts); t++) {
        const char *pa = tmp_path("fast/a/1_pythontimeline.json");
        const char *pb = tmp_path("fast/b/1_pythontimeline.json");
        write_file(pa, texts[t]);
        char *junk = malloc(strlen(texts[t]) + 8);
        assert_non_null(junk);
        sprintf(junk, "%s\n\"\xff", texts[t]);
        write_file(pb, junk);
        free(junk);
        collect a = {0}, b = {0};
        assert_int_equal(read_one(&a, pa, TW_FILE_FRAMEWORK,
                                  TW_SOURCE_PYTHONTIMELINE, "n", 1),
                         TW_OK);
        assert_int_equal(read_one(&b, pb, TW_FILE_FRAMEWORK,
                                  TW_SOURCE_PYTHONTIMELINE, "n", 1),
                         TW_OK);
        print_message("text %zu: %zu events, %zu reports\n", t,
                      total_events(&a), a.nerrs);
        for (size_t i = 0; i < b.nerrs; i++) /* paths differ: a/ vs b/ */
            assert_non_null(strstr(b.errs[i].path, "fast/b/"));
        assert_same_read(&a, &b);
        collect_free(&a);
        collect_free(&b);
    }
}

static void test_trace_truncated(void **state)
{
    (void)state;
    const char *p = tmp_path("trunc/1_pythontimeline.json");
    write_file(p, "[\n"
                  "{\"name\": \"a\", \"ph\": \"X\", \"pid\": 1, \"ts\": 1, "
                  "\"dur\": 2},\n"
                  "{\"name\": \"b\", \"ph\": \"X\", \"pid\": 1, \"ts\": 5, "
                  "\"dur\": 2},\n"
                  "{\"name\": \"c\", \"ph\": \"X\", \"pid\": 1, \"ts\": 9, "
                  "\"du");
    collect c = {0};
    assert_int_equal(
        read_one(&c, p, TW_FILE_FRAMEWORK, TW_SOURCE_PYTHONTIMELINE, "n", 1),
        TW_OK);
    assert_int_equal(total_events(&c), 2);
    assert_int_equal(c.nerrs, 1);
    assert_int_equal(c.errs[0].line, 4);
    assert_non_null(strstr(c.errs[0].reason, "truncated"));
    assert_int_equal(c.st.incomplete_files, 1);
    assert_int_equal(c.st.bad_files, 0);
    assert_int_equal(c.st.bad_lines, 0);
    collect_free(&c);

    /* Cut after a complete event, before ']'. */
    write_file(p, "[{\"name\": \"a\", \"ph\": \"X\", \"pid\": 1, \"ts\": 1, "
                  "\"dur\": 2},\n");
    assert_int_equal(
        read_one(&c, p, TW_FILE_FRAMEWORK, TW_SOURCE_PYTHONTIMELINE, "n", 1),
        TW_OK);
    assert_int_equal(total_events(&c), 1);
    assert_int_equal(c.nerrs, 1);
    assert_int_equal(c.errs[0].line, 2);
    assert_int_equal(c.st.incomplete_files, 1);
    collect_free(&c);

    /* A gzip stream cut short: the complete events still come out. */
    const char *gzp = tmp_path("trunc/x.trace.json.gz");
    char text[8192];
    size_t len = 0;
    len +=
        (size_t)snprintf(text + len, sizeof(text) - len, "{\"traceEvents\": [");
    for (int i = 0; i < 40; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "%s{\"name\": \"e%d\", \"ph\": \"X\", "
                                "\"pid\": 1, \"ts\": %d, \"dur\": 1}",
                                i ? ",\n" : "", i, i * 10);
    len += (size_t)snprintf(text + len, sizeof(text) - len, "]}");
    uLongf zlen = compressBound(len) + 32;
    unsigned char *z = malloc(zlen);
    assert_non_null(z);
    /* gzip framing via gzopen/gzwrite, then keep only part of it. */
    gzFile gz = gzopen(gzp, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, text, (unsigned)len), (int)len);
    gzclose(gz);
    FILE *f = fopen(gzp, "rb");
    assert_non_null(f);
    size_t zn = fread(z, 1, zlen, f);
    fclose(f);
    f = fopen(gzp, "wb");
    fwrite(z, 1, zn / 2, f);
    fclose(f);
    free(z);
    assert_int_equal(
        read_one(&c, gzp, TW_FILE_FRAMEWORK, TW_SOURCE_TF_PROFILER, "x", 1),
        TW_OK);
    assert_true(total_events(&c) > 0);
    assert_true(total_events(&c) < 40);
    assert_int_equal(c.st.incomplete_files, 1);
    assert_int_equal(c.st.bad_files, 0);
    assert_true(c.nerrs >= 1);
    collect_free(&c);
}

/* A small compressed file that inflates far past its own size: the read
 * buffer starts at the file's size (reader_input.c) and must grow by
 * doubling, also inside one record longer than 1 MB. */
static void test_trace_small_gzip_inflates(void **state)
{
    (void)state;
    const char *gzp = tmp_path("inflate/x.trace.json.gz");
    make_parents(gzp);
    gzFile gz = gzopen(gzp, "wb9");
    assert_non_null(gz);
    assert_true(gzputs(gz, "{\"traceEvents\": [{\"name\": \"") > 0);
    char run[4096];
    memset(run, 'n', sizeof(run));
    for (int i = 0; i < 384; i++) /* a 1.5 MB name */
        assert_int_equal(gzwrite(gz, run, sizeof(run)), (int)sizeof(run));
    assert_true(gzputs(gz, "\", \"ph\": \"X\", \"pid\": 1, \"ts\": 1, "
                           "\"dur\": 1}") > 0);
    for (int i = 0; i < 20000; i++)
        assert_true(gzprintf(gz,
                             ",\n{\"name\": \"e\", \"ph\": \"X\", "
                             "\"pid\": 1, \"ts\": %d, \"dur\": 1}",
                             10 + i) > 0);
    assert_true(gzputs(gz, "]}") > 0);
    assert_int_equal(gzclose(gz), Z_OK);
    struct stat sb;
    assert_int_equal(stat(gzp, &sb), 0);
    assert_true(sb.st_size < 256 * 1024); /* smaller than the first buffer */

    collect c = {0};
    assert_int_equal(
        read_one(&c, gzp, TW_FILE_FRAMEWORK, TW_SOURCE_TF_PROFILER, "x", 1),
        TW_OK);
    assert_int_equal(total_events(&c), 20001);
    assert_int_equal(c.nerrs, 0);
    assert_int_equal(c.st.incomplete_files, 0);
    assert_int_equal(c.st.bad_files, 0);
    collect_free(&c);
}

static void test_trace_bad_files(void **state)
{
    (void)state;
    collect c = {0};
    const char *p = tmp_path("badf/empty_pythontimeline.json");
    write_file(p, "  \n");
    assert_int_equal(
        read_one(&c, p, TW_FILE_FRAMEWORK, TW_SOURCE_PYTHONTIMELINE, "n", 1),
        TW_OK);
    assert_int_equal(c.st.bad_files, 1);
    assert_int_equal(c.nerrs, 1);
    assert_int_equal(c.errs[0].line, 0);
    collect_free(&c);

    write_file(p, "[{\"name\": \"a\", \"ph\": \"X\", \"pid\": 1, \"ts\": 1, "
                  "\"dur\": 2} {\"name\": \"b\"}]");
    assert_int_equal(
        read_one(&c, p, TW_FILE_FRAMEWORK, TW_SOURCE_PYTHONTIMELINE, "n", 1),
        TW_OK);
    assert_int_equal(total_events(&c), 1);
    assert_int_equal(c.st.bad_files, 1);
    assert_non_null(strstr(c.errs[0].reason, "malformed"));
    collect_free(&c);

    /* Bad events spoil only themselves. */
    write_file(p,
               "[\n1,\n{\"ph\": \"X\", \"pid\": 1, \"ts\": 1},\n"
               "{\"ph\": \"X\", \"name\": \"ok\", \"pid\": 1, \"ts\": 1, "
               "\"dur\": 1},\n{\"ph\": \"X\", \"name\": \"bad\" \"pid\": 1},\n"
               "{\"ph\": \"X\", \"name\": \"no-pid\", \"ts\": 1, \"dur\": 1}"
               "\n]");
    assert_int_equal(
        read_one(&c, p, TW_FILE_FRAMEWORK, TW_SOURCE_PYTHONTIMELINE, "n", 1),
        TW_OK);
    assert_int_equal(total_events(&c), 1);
    assert_int_equal(c.nerrs, 4);
    assert_int_equal(c.errs[0].line, 2);
    assert_int_equal(c.errs[1].line, 3);
    assert_int_equal(c.errs[2].line, 5);
    assert_int_equal(c.errs[3].line, 6);
    assert_int_equal(c.st.bad_lines, 4);
    assert_int_equal(c.st.bad_files, 0);
    collect_free(&c);

    /* A file that is not there. */
    assert_int_equal(read_one(&c, tmp_path("nope_pythontimeline.json"),
                              TW_FILE_FRAMEWORK, TW_SOURCE_PYTHONTIMELINE, "n",
                              1),
                     TW_OK);
    assert_int_equal(c.st.bad_files, 1);
    assert_int_equal(c.nerrs, 1);
    assert_non_null(strstr(c.errs[0].reason, "No such file"));
    collect_free(&c);
}

/* ------------------------------------------------------------------------
 * TF profiler traces
 * --------------------------------------------------------------------- */

static const char *k_tf_missing =
    "tfprofiler_local_missing_metadata/framework/tensorflow/"
    "detailed_profiling/2020080513/000000000/plugins/profile/"
    "2020_08_05_13_37_44/ip-172-31-19-241.trace.json.gz";
static const char *k_tf_timeline =
    "tfprofiler_timeline_traces/framework/tensorflow/detailed_profiling/"
    "2020080513/000000000/plugins/profile/2020_08_05_13_37_44/"
    "8c859046be41.ant.amazon.com.trace.json.gz";

static void sum_times(const collect *c, int64_t *s, int64_t *e)
{
    *s = *e = 0;
    for (size_t i = 0; i < total_events(c); i++) {
        *s += event_at(c, i)->start_us;
        *e += event_at(c, i)->end_us;
    }
}

static void test_tf_traces(void **state)
{
    (void)state;
    SKIP_WITHOUT_SHARED();
    tw_folder *f = NULL;
    char err[512];
    assert_int_equal(
        tw_folder_list(data_path("tfprofiler_local_missing_metadata"), &f, err,
                       sizeof(err)),
        TW_OK);
    assert_int_equal(f->nfiles, 1);
    tw_agent_file *af = &f->files[0];
    assert_string_equal(af->path, data_path(k_tf_missing));
    assert_int_equal(af->source, TW_SOURCE_TF_PROFILER);
    assert_string_equal(af->node, "ip-172-31-19-241");
    assert_int_equal(af->has_metadata, 0);
    assert_true(af->file_ts_us == 0 && af->base_time_us == 0);
    assert_true(f->first_framework_ts_us == 0);
    collect c = {0};
    tw_trace_state *ts = tw_trace_state_new();
    assert_int_equal(
        tw_folder_read_file(af, "j", ts, sink, &c, on_err, &c, &c.st), TW_OK);
    tw_trace_state_free(ts);
    assert_int_equal(c.nerrs, 1); /* the missing metadata, nothing else */
    assert_int_equal(c.errs[0].line, 0);
    assert_non_null(strstr(c.errs[0].reason, ".metadata"));
    assert_int_equal(c.st.incomplete_files, 1);
    assert_int_equal(c.st.lines, 367);
    assert_int_equal(c.st.bad_lines, 0);
    assert_int_equal(total_events(&c), 256);
    const tw_fw_event *e = event_at(&c, 0);
    assert_string_equal(e->name, "train_function");
    assert_string_equal(e->phase, "/host:CPU");
    assert_string_equal(e->node, "ip-172-31-19-241");
    assert_true(e->start_us == 116); /* ts 116.457 */
    assert_true(e->end_us == 64046); /* 116.457 + 63929.222 */
    assert_int_equal(e->pid, 49);
    assert_int_equal(e->tid, 376039232);
    assert_string_equal(arg_of(e, "tracing_count", NULL), "2");
    int64_t ss, se;
    sum_times(&c, &ss, &se);
    assert_true(ss == 215606 && se == 407446);
    collect_free(&c);
    tw_folder_free(f);

    assert_int_equal(read_one(&c, data_path(k_tf_timeline), TW_FILE_FRAMEWORK,
                              TW_SOURCE_TF_PROFILER, "8c859046be41", 1),
                     TW_OK);
    assert_int_equal(c.nerrs, 0);
    assert_int_equal(c.st.lines, 816);
    assert_int_equal(total_events(&c), 798);
    sum_times(&c, &ss, &se);
    assert_true(ss == 76678171 && se == 77661924);
    collect_free(&c);

    /* With a .metadata file in the step folder: file ts and base time. */
    char cmd[4096];
    const char *step = tmp_path("tf/framework/tensorflow/detailed_profiling/"
                                "2020080513/000000001");
    snprintf(cmd, sizeof(cmd),
             "mkdir -p '%s/plugins/profile/d' && cp '%s' "
             "'%s/plugins/profile/d/' && touch "
             "'%s/algo-1_1596634664000000_1596634725000000.metadata'",
             step, data_path(k_tf_timeline), step, step);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tw_folder_list(tmp_path("tf"), &f, err, sizeof(err)),
                     TW_OK);
    assert_int_equal(f->nfiles, 1);
    af = &f->files[0];
    assert_int_equal(af->has_metadata, 1);
    assert_true(af->file_ts_us == 1596634725000000);
    assert_true(af->base_time_us == 1596634664000000);
    assert_string_equal(af->node, "8c859046be41");
    assert_true(f->first_framework_ts_us == 1596634725000000);
    assert_true(f->latest_framework_ts_us == 1596634725000000);
    ts = tw_trace_state_new();
    assert_int_equal(
        tw_folder_read_file(af, "j", ts, sink, &c, on_err, &c, &c.st), TW_OK);
    tw_trace_state_free(ts);
    assert_int_equal(c.nerrs, 0);
    assert_int_equal(total_events(&c), 798);
    e = event_at(&c, 0);
    assert_string_equal(e->name, "ExecutorState::Process");
    assert_true(e->start_us == 1596634664000000 + 21307);
    assert_true(e->end_us == 1596634664000000 + 21335);
    assert_true(c.batches[0]->file_ts_us == 1596634725000000);
    collect_free(&c);
    tw_folder_free(f);
}

/* ------------------------------------------------------------------------
 * The project's fixtures (tests/fixtures/agent/README.md)
 * --------------------------------------------------------------------- */

#define FX_SYSTEM "job/system/incremental/2021030410/1614852000.algo-1.json"
#define FX_PEVENTS "job/framework/pevents/2021030410/"

static void test_fixture_system_file(void **state)
{
    (void)state;
    collect c = {0};
    const char *p = fixture_path(FX_SYSTEM);
    assert_int_equal(
        read_one(&c, p, TW_FILE_SYSTEM, 0, "algo-1", 1614852000000000), TW_OK);
    assert_int_equal(c.nerrs, 0);
    assert_int_equal(c.nbatches, 1);
    tw_batch *b = c.batches[0];
    assert_int_equal(b->nsamples, 12);
    assert_int_equal(b->nseries, 4);
    assert_string_equal(b->node, "algo-1");
    assert_string_equal(b->file_path, p);
    assert_true(b->file_ts_us == 1614852000000000);
    assert_true(b->samples[0].ts == 1614852000.25);
    assert_true(b->samples[0].value == 12.5);
    assert_string_equal(b->series[0].type, "cpu");
    assert_string_equal(b->series[0].name, "cpu0");
    assert_string_equal(b->series[0].dimension, "CPUUtilization");
    /* line 3: gpu0 GPUUtilization 55.0 (written with a '.') */
    assert_true(b->samples[2].value == 55.0);
    assert_int_equal(b->samples[2].flags, 0);
    assert_string_equal(b->series[b->samples[2].series].dimension,
                        "GPUUtilization");
    /* line 12: the last sample */
    assert_true(b->samples[11].ts == 1614852002.25);
    assert_true(b->samples[11].value == 31.0);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(c.st.lines, 12);
    assert_int_equal(c.st.bad_lines, 0);
    assert_int_equal(c.st.samples, 12);
    assert_int_equal(c.st.bytes, (uint64_t)sb.st_size);
    collect_free(&c);

    /* The same file with line 7 cut short: one error, 11 samples. */
    p = fixture_path("1614852000.algo-1.json.corrupt");
    assert_int_equal(
        read_one(&c, p, TW_FILE_SYSTEM, 0, "algo-1", 1614852000000000), TW_OK);
    assert_int_equal(c.nerrs, 1);
    assert_string_equal(c.errs[0].path, p);
    assert_int_equal(c.errs[0].line, 7);
    assert_int_equal(c.st.lines, 12);
    assert_int_equal(c.st.bad_lines, 1);
    assert_int_equal(c.st.bad_files, 0);
    assert_int_equal(total_samples(&c), 11);
    collect_free(&c);
}

static void test_fixture_trace_files(void **state)
{
    (void)state;
    collect c = {0};
    tw_arg_kind kind;
    /* X events: start = ts + base, end = start + dur, phase from the pid's
     * process_name, step_num as written (number or string). */
    const char *py =
        fixture_path(FX_PEVENTS "1614852001000000_77_0000_pythontimeline.json");
    assert_int_equal(read_one(&c, py, TW_FILE_FRAMEWORK,
                              TW_SOURCE_PYTHONTIMELINE, "77", 1614852001000000),
                     TW_OK);
    assert_int_equal(c.nerrs, 0);
    assert_int_equal(c.st.lines, 6);
    assert_int_equal(total_events(&c), 3);
    const tw_fw_event *e = event_at(&c, 0);
    assert_string_equal(e->name, "Step:ModeKeys.TRAIN");
    assert_string_equal(e->phase, "Step:ModeKeys.TRAIN");
    assert_int_equal(e->mode, TW_MODE_TRAIN);
    assert_int_equal(e->pid, 1);
    assert_true(e->start_us == 1614852000500000 + 100000);
    assert_true(e->end_us == 1614852000500000 + 100000 + 250000);
    assert_string_equal(arg_of(e, "step_num", &kind), "1");
    assert_int_equal(kind, TW_ARG_NUMBER);
    e = event_at(&c, 1);
    assert_string_equal(arg_of(e, "step_num", &kind), "2");
    assert_int_equal(kind, TW_ARG_STRING);
    e = event_at(&c, 2);
    assert_string_equal(e->name, "fetch_batch");
    assert_string_equal(e->phase, "DataLoader");
    assert_int_equal(e->mode, TW_MODE_NONE);
    assert_null(e->args);
    assert_int_equal(e->nargs, 0);
    assert_true(c.batches[0]->file_ts_us == 1614852001000000);
    collect_free(&c);

    /* Horovod: a B/E pair yields one event at its E; an E without its B
     * is reported by file and line (6) and counted. */
    const char *hv = fixture_path(
        FX_PEVENTS "1614852002000000_77-node-1_horovod_timeline.json");
    assert_int_equal(read_one(&c, hv, TW_FILE_FRAMEWORK, TW_SOURCE_HOROVOD,
                              "77-node-1", 1614852002000000),
                     TW_OK);
    assert_int_equal(c.st.lines, 5);
    assert_int_equal(total_events(&c), 1);
    assert_int_equal(c.nerrs, 1);
    assert_string_equal(c.errs[0].path, hv);
    assert_int_equal(c.errs[0].line, 6);
    assert_int_equal(c.st.bad_lines, 1);
    e = event_at(&c, 0);
    assert_string_equal(e->name, "NEGOTIATE_ALLREDUCE");
    assert_int_equal(e->source, TW_SOURCE_HOROVOD);
    assert_true(e->start_us == 1614852000500000 + 1200000);
    assert_true(e->end_us == 1614852000500000 + 1200700);
    collect_free(&c);

    /* Model timeline: events without args. */
    const char *mt = fixture_path(
        FX_PEVENTS "1614852003000000_77-node-1_model_timeline.json");
    assert_int_equal(read_one(&c, mt, TW_FILE_FRAMEWORK,
                              TW_SOURCE_MODEL_TIMELINE, "77-node-1", 1),
                     TW_OK);
    assert_int_equal(c.nerrs, 0);
    assert_int_equal(c.st.lines, 4);
    assert_int_equal(total_events(&c), 2);
    e = event_at(&c, 1);
    assert_string_equal(e->name, "relu1");
    assert_string_equal(e->phase, "Forward");
    assert_true(e->start_us == 1614852000500000 + 2001600);
    assert_true(e->end_us == 1614852000500000 + 2001800);
    assert_null(e->args);
    collect_free(&c);
}

/* The fixture job folder lists its four files with their kinds, sources,
 * nodes and timestamps. */
static void test_fixture_listing(void **state)
{
    (void)state;
    tw_folder *f = NULL;
    char err[512];
    assert_int_equal(tw_folder_list(fixture_path("job"), &f, err, sizeof(err)),
                     TW_OK);
    assert_int_equal(f->nfiles, 4);
    size_t system = 0, framework = 0;
    for (size_t i = 0; i < f->nfiles; i++) {
        const tw_agent_file *af = &f->files[i];
        if (af->kind == TW_FILE_SYSTEM) {
            system++;
            assert_string_equal(af->node, "algo-1");
            assert_true(af->file_ts_us == 1614852000000000);
        } else {
            framework++;
            assert_true(af->file_ts_us >= 1614852001000000 &&
                        af->file_ts_us <= 1614852003000000);
            assert_string_equal(af->node, af->source == TW_SOURCE_PYTHONTIMELINE
                                              ? "77"
                                              : "77-node-1");
        }
    }
    assert_int_equal(system, 1);
    assert_int_equal(framework, 3);
    assert_true(f->first_system_ts_us == 1614852000000000);
    assert_true(f->first_framework_ts_us == 1614852001000000);
    assert_true(f->latest_framework_ts_us == 1614852003000000);
    tw_folder_free(f);
}

/* A TF profiler trace (gzip, written here) without its .metadata file:
 * listed with its node, read with base time 0, the missing metadata
 * reported once. */
static void test_fixture_tf_trace(void **state)
{
    (void)state;
    static const char text[] =
        "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n"
        "{\"ph\": \"M\", \"pid\": 3, \"name\": \"process_name\", "
        "\"args\": {\"name\": \"/host:CPU\"}},\n"
        "{\"ph\": \"X\", \"pid\": 3, \"tid\": 9, \"name\": \"train_step\", "
        "\"ts\": 250.4, \"dur\": 1000.2, \"args\": {\"count\": \"5\"}}\n"
        "]}\n";
    const char *gzp = tmp_path("tfjob/framework/tensorflow/detailed_profiling/"
                               "2021030410/000000001/plugins/profile/"
                               "2021_03_04_10_00_00/host-a.trace.json.gz");
    make_parents(gzp);
    gzFile gz = gzopen(gzp, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, text, sizeof(text) - 1),
                     (int)sizeof(text) - 1);
    assert_int_equal(gzclose(gz), Z_OK);
    tw_folder *f = NULL;
    char err[512];
    assert_int_equal(tw_folder_list(tmp_path("tfjob"), &f, err, sizeof(err)),
                     TW_OK);
    assert_int_equal(f->nfiles, 1);
    tw_agent_file *af = &f->files[0];
    assert_int_equal(af->source, TW_SOURCE_TF_PROFILER);
    assert_string_equal(af->node, "host-a");
    assert_int_equal(af->has_metadata, 0);
    collect c = {0};
    tw_trace_state *ts = tw_trace_state_new();
    assert_int_equal(
        tw_folder_read_file(af, "j", ts, sink, &c, on_err, &c, &c.st), TW_OK);
    tw_trace_state_free(ts);
    assert_int_equal(c.nerrs, 1);
    assert_non_null(strstr(c.errs[0].reason, ".metadata"));
    assert_int_equal(c.st.incomplete_files, 1);
    assert_int_equal(total_events(&c), 1);
    const tw_fw_event *e = event_at(&c, 0);
    assert_string_equal(e->name, "train_step");
    assert_string_equal(e->phase, "/host:CPU");
    assert_true(e->start_us == 250); /* 250.4 */
    assert_true(e->end_us == 1251);  /* 250.4 + 1000.2, rounded */
    assert_string_equal(arg_of(e, "count", NULL), "5");
    collect_free(&c);
    tw_folder_free(f);
}

/* ------------------------------------------------------------------------
 * Listing
 * --------------------------------------------------------------------- */

static void test_list_shared_data(void **state)
{
    (void)state;
    SKIP_WITHOUT_SHARED();
    tw_folder *f = NULL;
    char err[512];
    assert_int_equal(tw_folder_list(g_data, &f, err, sizeof(err)), TW_OK);
    static const struct {
        const char *suffix;
        tw_file_kind kind;
        tw_source source;
        int64_t ts;
        const char *node;
    } want[] = {
        {"ip-172-31-19-241.trace.json.gz", TW_FILE_FRAMEWORK,
         TW_SOURCE_TF_PROFILER, 0, "ip-172-31-19-241"},
        {"8c859046be41.ant.amazon.com.trace.json.gz", TW_FILE_FRAMEWORK,
         TW_SOURCE_TF_PROFILER, 0, "8c859046be41"},
        {"1589930988000000_4487_0000_pythontimeline.json", TW_FILE_FRAMEWORK,
         TW_SOURCE_PYTHONTIMELINE, 1589930988000000, "4487"},
        {"1589930989000000_4487_0000_pythontimeline.json", TW_FILE_FRAMEWORK,
         TW_SOURCE_PYTHONTIMELINE, 1589930989000000, "4487"},
        {"1589930990000000_4487_0000_pythontimeline.json", TW_FILE_FRAMEWORK,
         TW_SOURCE_PYTHONTIMELINE, 1589930990000000, "4487"},
        {"1589930991000000_4487_0000_pythontimeline.json", TW_FILE_FRAMEWORK,
         TW_SOURCE_PYTHONTIMELINE, 1589930991000000, "4487"},
        {"1590461127873222_0001_model_timeline.json", TW_FILE_FRAMEWORK,
         TW_SOURCE_MODEL_TIMELINE, 1590461127873222, "0001"},
        {"1590461139923994_0001_model_timeline.json", TW_FILE_FRAMEWORK,
         TW_SOURCE_MODEL_TIMELINE, 1590461139923994, "0001"},
        {"1590461139949971_0001_model_timeline.json", TW_FILE_FRAMEWORK,
         TW_SOURCE_MODEL_TIMELINE, 1590461139949971, "0001"},
        {"smdebug/1591160699.algo-1.json", TW_FILE_SYSTEM, 0, 1591160699000000,
         "algo-1"},
        {"incremental/1591160699.algo-1.json", TW_FILE_SYSTEM, 0,
         1591160699000000, "algo-1"},
        {"incremental/1591748100.algo-1.json", TW_FILE_SYSTEM, 0,
         1591748100000000, "algo-1"},
        {"incremental/1591748160.algo-1.json", TW_FILE_SYSTEM, 0,
         1591748160000000, "algo-1"},
        {"1593673051472361_88359-8c859046be41.ant.amazon.com_horovod_"
         "timeline.json",
         TW_FILE_FRAMEWORK, TW_SOURCE_HOROVOD, 1593673051472361,
         "88359-8c859046be41.ant.amazon.com"},
        {"1593673051473228_88359-8c859046be41.ant.amazon.com_horovod_"
         "timeline.json",
         TW_FILE_FRAMEWORK, TW_SOURCE_HOROVOD, 1593673051473228,
         "88359-8c859046be41.ant.amazon.com"},
        {"1594662614815222_905-b88ab1bb8259_model_timeline.json",
         TW_FILE_FRAMEWORK, TW_SOURCE_MODEL_TIMELINE, 1594662614815222,
         "905-b88ab1bb8259"},
        {"1594662624558411_905-b88ab1bb8259_model_timeline.json",
         TW_FILE_FRAMEWORK, TW_SOURCE_MODEL_TIMELINE, 1594662624558411,
         "905-b88ab1bb8259"},
        {"1594662624718694_905-b88ab1bb8259_pythontimeline.json",
         TW_FILE_FRAMEWORK, TW_SOURCE_PYTHONTIMELINE, 1594662624718694,
         "905-b88ab1bb8259"},
    };
    size_t n = sizeof(want) / sizeof(*want);
    assert_int_equal(f->nfiles, n);
    for (size_t i = 0; i < n; i++) {
        const tw_agent_file *af = &f->files[i];
        size_t pl = strlen(af->path), sl = strlen(want[i].suffix);
        assert_true(pl > sl);
        assert_string_equal(af->path + pl - sl, want[i].suffix);
        assert_int_equal(af->kind, want[i].kind);
        if (af->kind == TW_FILE_FRAMEWORK)
            assert_int_equal(af->source, want[i].source);
        assert_true(af->file_ts_us == want[i].ts);
        assert_true(af->feed_key_us == want[i].ts);
        assert_string_equal(af->node, want[i].node);
    }
    assert_true(f->first_system_ts_us == 1591160699000000);
    assert_true(f->latest_system_ts_us == 1591748160000000);
    assert_true(f->first_framework_ts_us == 1589930988000000);
    assert_true(f->latest_framework_ts_us == 1594662624718694);
    assert_int_equal(f->job_finished, 0);

    /* Read the whole folder in feed order with one state. */
    collect c = {0};
    tw_trace_state *ts = tw_trace_state_new();
    for (size_t i = 0; i < f->nfiles; i++) {
        assert_int_equal(tw_folder_read_file(&f->files[i], "j", ts, sink, &c,
                                             on_err, &c, &c.st),
                         TW_OK);
        for (size_t k = 0; k < c.nbatches; k++)
            tw_batch_free(c.batches[k]);
        c.nbatches = 0;
    }
    tw_trace_state_free(ts);
    assert_int_equal(c.st.files, 18);
    assert_int_equal(c.st.samples, 14 + 14 + 32 + 32);
    /* 256 + 798 + 4 + 56 + 1 + 52 + 0 + 19 + 1 + 661 + 40 */
    assert_int_equal(c.st.events, 1888);
    assert_int_equal(c.st.bad_lines, 2);        /* the horovod E events */
    assert_int_equal(c.st.incomplete_files, 2); /* both TF: no .metadata */
    assert_int_equal(c.st.bad_files, 0);
    assert_int_equal(c.nerrs, 4);
    tw_folder_free(f);
}

static void test_list_fixture_layout(void **state)
{
    (void)state;
    const char *root = tmp_path("layout");
    static const char *files[] = {
        "system/incremental/2020060500/1591160760.algo-2.json",
        "system/incremental/2020060500/1591160760.algo-10.json",
        "system/incremental/2020060500/1591160700.algo-1.json",
        "system/incremental/2020060500/1591160700.algo-1.json.tmp",
        "system/incremental/2020060500/1591160700.algo-1.json.corrupt",
        "system/incremental/2020060500/159116070.algo-1.json",
        "system/incremental/2020060500/1591160700.node-1.json",
        "system/training_job_end.ts",
        "1591160820.algo-1.json",
        "framework/pevents/2020060500/"
        "1591160760000000_0-algo-1_pythontimeline.json",
        "framework/pevents/2020060500/"
        "1591160760000000_1234-algo-2_model_timeline.json",
        "framework/pevents/2020060500/"
        "1591160760000000_7_smdataparallel_timeline.json",
        "framework/pevents/2020060500/1591160760000000_7_horovod_timeline.json",
        "framework/pevents/2020060500/1591160700000001_7_unknown.json",
        "framework/pevents/2020060500/abc_7_pythontimeline.json",
        "framework/pevents/2020060500/1591160700000001_pythontimeline.json",
        "framework/other/1591160700000001_7_pythontimeline.json",
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", root, files[i]);
        write_file(p, "");
    }
    tw_folder *f = NULL;
    char err[512];
    char rootslash[1024];
    snprintf(rootslash, sizeof(rootslash), "%s/", root);
    assert_int_equal(tw_folder_list(rootslash, &f, err, sizeof(err)), TW_OK);
    static const struct {
        const char *rel;
        const char *node;
    } want[] = {
        {"system/incremental/2020060500/1591160700.algo-1.json", "algo-1"},
        {"system/incremental/2020060500/1591160760.algo-10.json", "algo-10"},
        {"system/incremental/2020060500/1591160760.algo-2.json", "algo-2"},
        {"framework/pevents/2020060500/"
         "1591160760000000_0-algo-1_pythontimeline.json",
         "algo-1-0"},
        {"framework/pevents/2020060500/"
         "1591160760000000_1234-algo-2_model_timeline.json",
         "algo-2-1234"},
        {"framework/pevents/2020060500/"
         "1591160760000000_7_horovod_timeline.json",
         "7"},
        {"framework/pevents/2020060500/"
         "1591160760000000_7_smdataparallel_timeline.json",
         "7"},
        {"1591160820.algo-1.json", "algo-1"},
    };
    size_t n = sizeof(want) / sizeof(*want);
    assert_int_equal(f->nfiles, n);
    for (size_t i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", root, want[i].rel);
        assert_string_equal(f->files[i].path, p);
        assert_string_equal(f->files[i].node, want[i].node);
    }
    assert_string_equal(f->root, root);
    assert_int_equal(f->job_finished, 1);
    assert_true(f->first_system_ts_us == 1591160700000000);
    assert_true(f->latest_system_ts_us == 1591160820000000);
    assert_true(f->first_framework_ts_us == 1591160760000000);
    assert_true(f->latest_framework_ts_us == 1591160760000000);
    tw_folder_free(f);
}

static void test_list_empty_and_missing(void **state)
{
    (void)state;
    const char *empty = tmp_path("empty");
    mkdir(empty, 0755);
    tw_folder *f = NULL;
    char err[512] = "";
    assert_int_equal(tw_folder_list(empty, &f, err, sizeof(err)), TW_OK);
    assert_non_null(f);
    assert_int_equal(f->nfiles, 0);
    assert_true(f->first_system_ts_us == 0 && f->latest_system_ts_us == 0);
    assert_true(f->first_framework_ts_us == 0 &&
                f->latest_framework_ts_us == 0);
    assert_int_equal(f->job_finished, 0);
    tw_folder_free(f);

    const char *missing = tmp_path("does-not-exist");
    f = (tw_folder *)1;
    assert_int_equal(tw_folder_list(missing, &f, err, sizeof(err)), TW_ERR);
    assert_null(f);
    assert_non_null(strstr(err, missing));
    assert_non_null(strstr(err, "No such file or directory"));

    /* a file is listed as one PyTorch trace (test_reader_torch.c) */
    const char *plain = tmp_path("plain-file");
    write_file(plain, "not a folder\n");
    assert_int_equal(tw_folder_list(plain, &f, err, sizeof(err)), TW_OK);
    assert_int_equal(f->nfiles, 1);
    assert_true(f->files[0].torch && f->files[0].file_ts_us == 0);
    tw_folder_free(f);

    f = (tw_folder *)1;
    assert_int_equal(tw_folder_list("/dev/null", &f, err, sizeof(err)), TW_ERR);
    assert_null(f);
    assert_non_null(strstr(err, "neither a profiler-output folder nor"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_system_sample_file),
        cmocka_unit_test(test_system_corrupt_sample),
        cmocka_unit_test(test_system_bad_lines),
        cmocka_unit_test(test_system_nodes_and_split),
        cmocka_unit_test(test_trace_sample_files),
        cmocka_unit_test(test_trace_horovod_be),
        cmocka_unit_test(test_trace_be_pairing),
        cmocka_unit_test(test_trace_base_persistence),
        cmocka_unit_test(test_trace_args_kinds),
        cmocka_unit_test(test_trace_truncated),
        cmocka_unit_test(test_trace_small_gzip_inflates),
        cmocka_unit_test(test_trace_bad_files),
        cmocka_unit_test(test_tf_traces),
        cmocka_unit_test(test_list_shared_data),
        cmocka_unit_test(test_list_fixture_layout),
        cmocka_unit_test(test_list_empty_and_missing),
        cmocka_unit_test(test_fixture_system_file),
        cmocka_unit_test(test_fixture_trace_files),
        cmocka_unit_test(test_fixture_listing),
        cmocka_unit_test(test_fixture_tf_trace),
        cmocka_unit_test(test_trace_fast_path_same_as_scan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
