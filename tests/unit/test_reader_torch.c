/*
 * test_reader_torch.c - PyTorch profiler traces (reader.h): listing and
 * anchoring (Kineto base time, epoch ts, mtime, tw_folder_anchor_traces),
 * the node from distributedInfo or the name, and the mapping of events
 * (ProfilerStep#N, cpu_functions, gpu_functions-dev:<n>).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include "reader.h"

static char g_tmp[512];

static const char *tmp_path(const char *rel)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof(buf[0]), "%s/%s", g_tmp, rel);
    return p;
}

/* Writes text to path with the given mtime (µs since the epoch). */
static void write_at(const char *path, const char *text, int64_t mtime_us)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    struct timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = (time_t)(mtime_us / 1000000);
    ts[0].tv_nsec = ts[1].tv_nsec = (long)(mtime_us % 1000000) * 1000;
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static tw_folder *list(const char *path)
{
    tw_folder *f = NULL;
    char err[512] = "";
    assert_int_equal(tw_folder_list(path, &f, err, sizeof(err)), TW_OK);
    assert_non_null(f);
    return f;
}

typedef struct events {
    tw_batch *batches[8];
    size_t n;
    uint64_t errors;
} events;

static int sink(void *ud, tw_batch *b)
{
    events *e = ud;
    if (e->n == 8) {
        tw_batch_free(b);
        return TW_ERR;
    }
    e->batches[e->n++] = b;
    return TW_OK;
}

static void on_err(void *ud, const char *path, uint64_t line,
                   const char *reason)
{
    (void)path;
    (void)line;
    (void)reason;
    ((events *)ud)->errors++;
}

static void read_file(const tw_agent_file *af, events *e)
{
    memset(e, 0, sizeof(*e));
    tw_trace_state *ts = tw_trace_state_new();
    assert_non_null(ts);
    assert_int_equal(
        tw_folder_read_file(af, "job", ts, sink, e, on_err, e, NULL), TW_OK);
    tw_trace_state_free(ts);
    assert_int_equal(e->n, 1);
}

static void events_free(events *e)
{
    for (size_t i = 0; i < e->n; i++)
        tw_batch_free(e->batches[i]);
}

static const char legacy[] =
    "[{\"name\": \"aten::mm\", \"ph\": \"X\", \"ts\": 100, \"dur\": 20, "
    "\"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}, "
    "{\"name\": \"ProfilerStep#4\", \"ph\": \"X\", \"ts\": 90, \"dur\": 400, "
    "\"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}, "
    "{\"name\": \"gemm\", \"ph\": \"X\", \"ts\": 150, \"dur\": 30, "
    "\"tid\": 2, \"pid\": \"CUDA functions\", \"args\": {}}, "
    "{\"name\": \"ProfilerStep#4x\", \"ph\": \"X\", \"ts\": 500, \"dur\": 10, "
    "\"tid\": 1, \"pid\": \"CPU functions\", \"args\": {}}]";

/* Relative ts: the file's mtime is the end of its newest event. */
static void test_legacy_array_mtime(void **state)
{
    (void)state;
    const char *path = tmp_path("w1.pt.trace.json");
    write_at(path, legacy, 1700000000123456LL);
    tw_folder *f = list(path);
    assert_int_equal(f->nfiles, 1);
    const tw_agent_file *af = &f->files[0];
    assert_true(af->torch && af->kind == TW_FILE_FRAMEWORK);
    assert_int_equal(af->torch_anchor, TW_TORCH_MTIME);
    assert_string_equal(af->node, "w1");
    /* newest end: 500 + 10 */
    assert_int_equal(af->torch_offset_us, 1700000000123456LL - 510);
    assert_int_equal(af->file_ts_us, 1700000000123456LL);
    assert_int_equal(f->first_framework_ts_us, 1700000000123456LL - 510 + 90);
    assert_int_equal(f->latest_framework_ts_us, 1700000000123456LL);

    events e;
    read_file(af, &e);
    const tw_batch *b = e.batches[0];
    assert_int_equal(b->nevents, 4);
    int64_t off = af->torch_offset_us;
    assert_string_equal(b->events[0].phase, "cpu_functions");
    assert_int_equal(b->events[0].start_us, off + 100);
    assert_int_equal(b->events[0].end_us, off + 120);
    const tw_fw_event *step = &b->events[1];
    assert_string_equal(step->name, "Step:ModeKeys.TRAIN");
    assert_string_equal(step->phase, "Step:ModeKeys.TRAIN");
    assert_int_equal(step->mode, TW_MODE_TRAIN);
    assert_int_equal(step->nargs, 1);
    assert_string_equal(step->args[0].key, "step_num");
    assert_string_equal(step->args[0].value, "4");
    assert_int_equal(step->args[0].kind, TW_ARG_STRING);
    assert_int_equal(step->start_us, off + 90);
    assert_string_equal(b->events[2].phase, "gpu_functions-dev:0");
    /* not a step name: an operator */
    assert_string_equal(b->events[3].name, "ProfilerStep#4x");
    assert_int_equal(b->events[3].mode, TW_MODE_NONE);
    assert_int_equal(e.errors, 0);
    events_free(&e);

    /* --trace-start: ts 0 is the given time */
    tw_folder_anchor_traces(f, 1600000000000000LL);
    assert_int_equal(f->files[0].torch_anchor, TW_TORCH_GIVEN);
    assert_int_equal(f->files[0].file_ts_us, 1600000000000000LL + 510);
    assert_int_equal(f->first_framework_ts_us, 1600000000000000LL + 90);
    read_file(&f->files[0], &e);
    assert_int_equal(e.batches[0]->events[1].start_us, 1600000000000000LL + 90);
    events_free(&e);
    tw_folder_free(f);
}

/* Kineto: the base time (before or after the events), rank, device. */
static void test_kineto_object(void **state)
{
    (void)state;
    const char *path = tmp_path("k.pt.trace.json");
    write_at(path,
             "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0}],\n"
             " \"distributedInfo\": {\"backend\": \"nccl\", \"ranks\": [5], "
             "\"rank\": 3, \"world_size\": 4},\n"
             " \"traceEvents\": [\n"
             "  {\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch "
             "Profiler (0)\", \"pid\": \"Spans\", \"tid\": \"x\", \"ts\": 0, "
             "\"dur\": 99999},\n"
             "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
             "\"ProfilerStep#12\", \"pid\": 7, \"tid\": 7, \"ts\": 10.4, "
             "\"dur\": 100.2},\n"
             "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": "
             "1, \"tid\": 9, \"ts\": 20, \"dur\": 5, \"args\": {\"device\": "
             "2}},\n"
             "  {\"ph\": \"X\", \"cat\": \"gpu_memset\", \"name\": \"m\", "
             "\"pid\": 3, \"tid\": 9, \"ts\": 30, \"dur\": 5},\n"
             "  {\"ph\": \"i\", \"name\": \"Record Window End\", \"pid\": "
             "\"\", \"tid\": \"\", \"ts\": 200}\n"
             " ],\n"
             " \"traceName\": \"k\", \"baseTimeNanoseconds\": "
             "1700000000000000999}\n",
             1);
    tw_folder *f = list(g_tmp);
    const tw_agent_file *af = NULL;
    for (size_t i = 0; i < f->nfiles; i++)
        if (strstr(f->files[i].path, "/k.pt.trace.json") != NULL)
            af = &f->files[i];
    assert_non_null(af);
    assert_int_equal(af->torch_anchor, TW_TORCH_BASE);
    assert_int_equal(af->torch_offset_us, 1700000000000000LL);
    assert_string_equal(af->node, "rank-3");
    /* the profiler's own span is no event: the newest end is 110.6 */
    assert_int_equal(af->file_ts_us, 1700000000000000LL + 111);
    events e;
    read_file(af, &e);
    const tw_batch *b = e.batches[0];
    assert_int_equal(b->nevents, 3);
    assert_string_equal(b->node, "rank-3");
    assert_string_equal(b->events[0].name, "Step:ModeKeys.TRAIN");
    assert_string_equal(b->events[0].args[0].value, "12");
    assert_int_equal(b->events[0].start_us, 1700000000000010LL);
    assert_int_equal(b->events[0].end_us, 1700000000000111LL);
    assert_string_equal(b->events[1].phase, "gpu_functions-dev:2");
    assert_string_equal(b->events[2].phase, "gpu_functions-dev:3");
    events_free(&e);
    /* an absolute base is kept by tw_folder_anchor_traces */
    tw_folder_anchor_traces(f, 5);
    for (size_t i = 0; i < f->nfiles; i++)
        if (strstr(f->files[i].path, "/k.pt.trace.json") != NULL)
            assert_int_equal(f->files[i].torch_offset_us, 1700000000000000LL);
    tw_folder_free(f);
    unlink(path);
}

/* Older Kineto: ts are µs since the epoch already. Other .json files of
 * a folder are not traces. */
static void test_epoch_ts_and_names(void **state)
{
    (void)state;
    const char *dir = tmp_path("epoch");
    assert_int_equal(mkdir(dir, 0755), 0);
    char path[1100], other[1100];
    snprintf(path, sizeof(path), "%s/host_12.1700000000000.pt.trace.json", dir);
    snprintf(other, sizeof(other), "%s/results.json", dir);
    write_at(path,
             "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"ProfilerStep#0\", "
             "\"pid\": 1, \"tid\": 1, \"ts\": 1700000000000000, \"dur\": "
             "5}]}",
             1);
    write_at(other, "[]", 1);
    tw_folder *f = list(dir);
    assert_int_equal(f->nfiles, 1);
    assert_int_equal(f->files[0].torch_anchor, TW_TORCH_EPOCH);
    assert_int_equal(f->files[0].torch_offset_us, 0);
    assert_string_equal(f->files[0].node, "host_12");
    assert_int_equal(f->files[0].file_ts_us, 1700000000000005LL);
    tw_folder_free(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/tw_test_reader_torch.XXXXXX");
    assert_non_null(mkdtemp(g_tmp));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
    assert_int_equal(system(cmd), 0);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legacy_array_mtime),
        cmocka_unit_test(test_kineto_object),
        cmocka_unit_test(test_epoch_ts_and_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
