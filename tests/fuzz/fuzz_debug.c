/*
 * fuzz_debug.c - the legacy debug-output folder's parsers on arbitrary
 * bytes (engine/io/reader_debug.h): the input as one framed event record
 * (and its payload decoded when the framing holds), as a bare Event
 * protobuf, as an index file and as a collections file; then as the event
 * file of a one-step folder whose index points at the whole input under a
 * tensor, a stored reduction and a ReLU-output name, read by the folder
 * reader. Nothing may crash, leak or trip a sanitizer; a failure must say
 * why, and a decoded event must point inside the input.
 *
 * Seed corpus (tests/fuzz/corpus/debug/): records cut from the golden
 * reference-written folder (tests/debug_legacy/golden/ref_small) and its
 * index and collections files.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "debug_collections.h"
#include "debug_index.h"
#include "debug_proto.h"
#include "debug_record.h"
#include "reader_debug.h"
#include "trainwatch/plugin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_event(const uint8_t *p, size_t n, const tw_debug_event *ev)
{
    if (ev->tag != NULL &&
        ((const uint8_t *)ev->tag < p ||
         (const uint8_t *)ev->tag + ev->tag_len > p + n))
        abort();
    if (ev->content != NULL &&
        (ev->content < p || ev->content + ev->content_len > p + n))
        abort();
    if (ev->ndims > TW_DEBUG_MAX_DIMS || (ev->mode != 0 && (ev->mode < 1 ||
                                                           ev->mode > 4)))
        abort();
    for (uint32_t i = 0; i < ev->ndims; i++)
        if (ev->dims[i] < 0)
            abort();
}

static void decode(const uint8_t *p, size_t n)
{
    char err[256] = "";
    tw_debug_event ev;
    if (tw_debug_event_decode(p, n, &ev, err, sizeof(err)) == TW_OK)
        check_event(p, n, &ev);
    else if (err[0] == '\0')
        abort();
}

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
             "\"length\": %zu}]}",
             size, size, size);
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
        n != counts.tensors || n > 6)
        abort();
    for (int step = 0; step < 2; step++) {
        snprintf(p, sizeof(p), "%s/index/000000000/00000000000%d_worker_0.json",
                 root, step);
        unlink(p);
    }
    snprintf(p, sizeof(p), "%s/events/e.tfevents", root);
    unlink(p);
    const char *dirs[] = {"index/000000000", "index", "events", ""};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
        rmdir(p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    const uint8_t *payload;
    size_t plen;
    tw_debug_footer footer;
    if (tw_debug_record_check(data, size, &payload, &plen, &footer, err,
                              sizeof(err)) == TW_OK) {
        if (payload != data + 12 || plen + 16 != size)
            abort();
        decode(payload, plen);
    } else if (err[0] == '\0') {
        abort();
    }
    decode(data, size);

    tw_debug_index ix;
    err[0] = '\0';
    if (tw_debug_index_parse((const char *)data, size, &ix, err,
                             sizeof(err)) == TW_OK) {
        for (size_t i = 0; i < ix.nentries; i++)
            if (ix.entries[i].start < 0 || ix.entries[i].length < 0 ||
                ix.entries[i].name == NULL)
                abort();
        tw_debug_index_free(&ix);
    } else if (err[0] == '\0' || ix.json != NULL) {
        abort();
    }

    tw_debug_collections c;
    tw_debug_collections_init(&c);
    err[0] = '\0';
    if (tw_debug_collections_add(&c, (const char *)data, size, err,
                                 sizeof(err)) != TW_OK &&
        err[0] == '\0')
        abort();
    tw_debug_collections_free(&c);

    read_folder(data, size);
    return 0;
}
