/*
 * corpus_gen_wire.c - writes the seed corpus of fuzz_wire: a few valid
 * encoded batches and some damaged copies of them. Run by hand when the
 * schema changes:  build/tests/corpus_gen_wire tests/fuzz/corpus/wire
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static int write_file(const char *dir, const char *name, const uint8_t *buf,
                      size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t put = fwrite(buf, 1, len, f);
    if (fclose(f) != 0 || put != len) {
        fprintf(stderr, "%s: write failed\n", path);
        return -1;
    }
    return 0;
}

/* Encodes b as NAME.twm plus, when cut > 0, its first `cut` bytes as
 * NAME.cutCUT.twm. */
static int emit(const char *dir, const char *name, const tw_batch *b,
                const size_t *cuts, size_t ncuts)
{
    uint8_t *buf;
    size_t len;
    tw_wire_status st = tw_wire_encode(b, &buf, &len);
    if (st != TW_WIRE_OK) {
        fprintf(stderr, "%s: encode: %s\n", name, tw_wire_status_name(st));
        return -1;
    }
    char file[256];
    snprintf(file, sizeof(file), "%s.twm", name);
    int rc = write_file(dir, file, buf, len);
    for (size_t i = 0; rc == 0 && i < ncuts; i++) {
        size_t cut = cuts[i] < len ? cuts[i] : len / 2;
        snprintf(file, sizeof(file), "%s.cut%zu.twm", name, cut);
        rc = write_file(dir, file, buf, cut);
    }
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 1;
    }
    const char *dir = argv[1];
    int rc = 0;

    tw_batch minimal = {.job = "job", .node = "algo-1", .seq = 1};
    rc |= emit(dir, "minimal", &minimal, NULL, 0);

    tw_batch_series series[] = {
        {"cpu", "cpu0", "CPUUtilization"},
        {"gpu", "gpu0", "GPUUtilization"},
        {"memory", NULL, "MemoryUsedPercent"},
    };
    tw_sample samples[] = {
        {1591748109.2321954, 51.1, 0, 0},
        {1591748109.2331020, 41.0, 1, TW_SAMPLE_INTEGRAL},
        {1591748109.2331020, 12.5, 2, 0},
        {1591748110.2331020, 99.0, 1, TW_SAMPLE_INTEGRAL},
    };
    tw_batch system = {.job = "job",
                       .node = "algo-1",
                       .seq = 2,
                       .file_ts_us = 1591748100000000,
                       .file_path = "system/incremental/2020061000/"
                                    "1591748100.algo-1.json",
                       .series = series,
                       .nseries = 3,
                       .samples = samples,
                       .nsamples = 4};
    const size_t system_cuts[] = {12, 40, 100};
    rc |= emit(dir, "system", &system, system_cuts, 3);

    tw_arg args[] = {
        {"name", "conv2d", TW_ARG_STRING}, {"step_num", "17", TW_ARG_NUMBER},
        {"ok", "true", TW_ARG_BOOL},       {"p", "null", TW_ARG_NULL},
        {"shape", "[1,2]", TW_ARG_JSON},
    };
    tw_fw_event events[] = {
        {"Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", NULL, 1000, 2000, 1, 2,
         TW_SOURCE_PYTHONTIMELINE, TW_MODE_TRAIN, args, 5, 0},
        {"MatMul", "GPU", NULL, 1500, 1600, 1, 3, TW_SOURCE_TF_PROFILER,
         TW_MODE_NONE, args, 0, 0},
        {"allreduce", "", NULL, 1700, 1800, 4, 4, TW_SOURCE_HOROVOD,
         TW_MODE_GLOBAL, NULL, 0, 0},
    };
    tw_marker markers[] = {
        {TW_MARKER_JOB_START, 900, 500, 0, NULL},
        {TW_MARKER_JOB_END, 3000, 0, 2900, NULL},
    };
    tw_batch framework = {.job = "job",
                          .node = "algo-1-0",
                          .seq = 3,
                          .events = events,
                          .nevents = 3,
                          .markers = markers,
                          .nmarkers = 2};
    const size_t framework_cuts[] = {64, 200};
    rc |= emit(dir, "framework", &framework, framework_cuts, 2);

    tw_batch mixed = system;
    mixed.seq = 4;
    mixed.events = events;
    mixed.nevents = 1;
    mixed.markers = markers;
    mixed.nmarkers = 1;
    rc |= emit(dir, "mixed", &mixed, NULL, 0);

    /* the training hook's debugging tensors: a NaN loss, a gradient with
     * every field, the per-step heartbeat */
    static const char *const colls[] = {"gradients", "weights"};
    static const int64_t shape[] = {4, 3};
    static const tw_tensor_reduction loss_red[] = {{"value", 0.0 / 0.0}};
    static const tw_tensor_reduction grad_red[] = {{"abs_mean", 1.5e-9},
                                                   {"nan_count", 0},
                                                   {"inf_count", 2},
                                                   {"l2", 3.25},
                                                   {"update_l2", 0}};
    static const double raw[] = {1, 0, -1, 2};
    tw_tensor tensors[] = {
        {"worker_0", "CrossEntropyLoss_output_0", NULL, 0, TW_MODE_TRAIN, 17,
         17, 1591748109232195, -1, "float32", 1, NULL, 0, loss_red, 1, NULL, 0},
        {"worker_0", "gradient/Net_fc1.weight", colls, 2, TW_MODE_TRAIN, 17, 17,
         1591748109233102, 16, "float32", 12, shape, 2, grad_red, 5, raw, 4},
        {"worker_0", "heartbeat", NULL, 0, TW_MODE_EVAL, 18, 2,
         1591748109300000, -1, "", 0, NULL, 0, NULL, 0, NULL, 0},
    };
    tw_batch debug = {.job = "job",
                      .node = "worker_0",
                      .seq = 5,
                      .tensors = tensors,
                      .ntensors = 3};
    const size_t debug_cuts[] = {80, 300};
    rc |= emit(dir, "tensors", &debug, debug_cuts, 2);

    uint8_t *buf;
    size_t len;
    if (tw_wire_encode(&minimal, &buf, &len) == TW_WIRE_OK) {
        memcpy(buf + 4, "TWM0", 4);
        rc |= write_file(dir, "minimal.bad_identifier.twm", buf, len);
        free(buf);
    } else {
        rc = -1;
    }
    return rc == 0 ? 0 : 1;
}
