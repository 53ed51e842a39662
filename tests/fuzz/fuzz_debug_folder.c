/*
 * fuzz_debug_folder.c - the legacy debug-output folder reader
 * (engine/io/reader_debug.h) on arbitrary event-file bytes: the input is
 * the event file of a two-step folder whose index files point at the
 * whole input under a tensor, a stored reduction of it, a parameter
 * name and an input image (collection input_image, from a collections
 * file), so framing, decoding, dtype checks, the derived reductions,
 * the channel sums and update_l2 across steps all run. Nothing may crash, leak
 * or trip a sanitizer; every error has a message; the tensors counted are those
 * handed out. Slower than fuzz_debug (files per input).
 *
 * Seed corpus (tests/fuzz/corpus/debug_folder/): records cut from the
 * golden reference-written folder (tests/debug_legacy/golden/ref_small);
 * image_nchw, a (2, 3, 2, 2) float32 record written by
 * trainwatch/debug_writer.py.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader_debug.h"
#include "trainwatch/plugin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_tensor(void *ctx, const tw_tensor *t)
{
    size_t *n = ctx;
    volatile size_t touch = strlen(t->name) + strlen(t->node);
    for (uint32_t i = 0; i < t->nreductions; i++)
        touch += strlen(t->reductions[i].op);
    for (uint32_t i = 0; i < t->nraw; i++)
        touch += t->raw[i] == t->raw[i];
    (void)touch;
    ++*n;
    return 0;
}

static void count_error(void *ctx, const char *msg)
{
    (void)ctx;
    if (msg[0] == '\0')
        abort();
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A one-step folder whose event file is the input. */
static void read_folder(const uint8_t *data, size_t size)
{
    char root[] = "/tmp/tw_fuzz_debug_XXXXXX";
    if (mkdtemp(root) == NULL)
        return;
    char p[256], idx[1024];
    snprintf(p, sizeof(p), "%s/index", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/index/000000000", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/events", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/collections", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/collections/000000000", root);
    mkdir(p, 0700);
    static const char colls[] =
        "{\"collections\": {\"input_image\": {\"name\": \"input_image\", "
        "\"tensor_names\": [\"Net_input_0\"]}}, "
        "\"_meta\": {\"num_workers\": 1}}";
    snprintf(p, sizeof(p), "%s/collections/000000000/worker_0_collections.json",
             root);
    write_file(p, colls, strlen(colls));
    snprintf(p, sizeof(p), "%s/events/e.tfevents", root);
    write_file(p, data, size);
    snprintf(idx, sizeof(idx),
             "{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 3, "
             "\"event_file_name\": \"events/e.tfevents\"}, "
             "\"tensor_payload\": ["
             "{\"tensorname\": \"relu_output_0\", \"start_idx\": 0, "
             "\"length\": %zu},"
             "{\"tensorname\": \"smdebug/reductions/abs_mean/relu_output_0\","
             " \"start_idx\": 0, \"length\": %zu},"
             "{\"tensorname\": \"Net_fc1.weight\", \"start_idx\": 0, "
             "\"length\": %zu},"
             "{\"tensorname\": \"Net_input_0\", \"start_idx\": 0, "
             "\"length\": %zu}]}",
             size, size, size, size);
    for (int step = 0; step < 2; step++) {
        snprintf(p, sizeof(p), "%s/index/000000000/00000000000%d_worker_0.json",
                 root, step);
        write_file(p, idx, strlen(idx));
    }
    size_t n = 0;
    tw_debug_counts counts;
    char err[256];
    tw_debug_opts o = {0, 64};
    if (tw_debug_folder_read(root, &o, count_tensor, count_error, &n, &counts,
                             err, sizeof(err)) != TW_OK ||
        n != counts.tensors || n > 8)
        abort();
    for (int step = 0; step < 2; step++) {
        snprintf(p, sizeof(p), "%s/index/000000000/00000000000%d_worker_0.json",
                 root, step);
        unlink(p);
    }
    snprintf(p, sizeof(p), "%s/events/e.tfevents", root);
    unlink(p);
    snprintf(p, sizeof(p), "%s/collections/000000000/worker_0_collections.json",
             root);
    unlink(p);
    const char *dirs[] = {"index/000000000",       "index",       "events",
                          "collections/000000000", "collections", ""};
    for (size_t i = 0; i < 6; i++) {
        snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
        rmdir(p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_folder(data, size);
    return 0;
}
