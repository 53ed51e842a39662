/*
 * fuzz_debug_folder.c - the legacy debug-output folder reader
 * (engine/io/reader_debug.h) on arbitrary event-file bytes: the input is
 * the event file of a two-step folder whose index files point at the
 * whole input under a tensor, a stored reduction of it, a parameter
 * name and an input image (collection input_image, from a collections
 * file), so framing, decoding, dtype checks, the derived reductions, the
 * channel sums and update_l2 across steps all run. Nothing may crash,
 * leak or trip a sanitizer; every error has a message; the tensors
 * counted are those handed out.
 *
 * Speed: the folder is made once per process, on tmpfs (/dev/shm) when
 * there is one, and each input only rewrites its three files in place
 * (it made, wrote and removed a fresh folder per input before: 68
 * inputs/s). It is removed at exit; a crash leaves it for the next run's
 * mkdtemp to step around.
 *
 * Seed corpus (tests/fuzz/corpus/debug_folder/): records cut from the
 * golden reference-written folder (tests/debug_legacy/golden/ref_small);
 * image_nchw, a (2, 3, 2, 2) float32 record written by
 * trainwatch/debug_writer.py.
 */
#include <fcntl.h>
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

/* Replaces file `path`'s bytes (created if missing). */
static int write_file(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        p += n;
        size -= (size_t)n;
    }
    return close(fd);
}

/* The folder of this process: made by the first input, kept until exit.
 * libFuzzer calls the target from one thread. */
typedef struct folder {
    char root[64]; /* "%.63s" below: at most its 63 bytes */
    char event[256], step[2][256], colls[256];
} folder;

static folder the_folder;

static void folder_remove(void)
{
    folder *f = &the_folder;
    unlink(f->step[0]);
    unlink(f->step[1]);
    unlink(f->event);
    unlink(f->colls);
    const char *dirs[] = {"index/000000000",       "index",       "events",
                          "collections/000000000", "collections", ""};
    char p[256];
    for (size_t i = 0; i < 6; i++) {
        snprintf(p, sizeof(p), "%.63s/%s", f->root, dirs[i]);
        rmdir(p);
    }
}

/* 0: the_folder is ready; -1: it could not be made (abort: the target
 * would test nothing). */
static int folder_ready(void)
{
    folder *f = &the_folder;
    if (f->root[0] != '\0')
        return 0;
    struct stat sb;
    const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) &&
                               access("/dev/shm", W_OK) == 0
                           ? "/dev/shm"
                           : "/tmp";
    snprintf(f->root, sizeof(f->root), "%s/tw_fuzz_debug_XXXXXX", base);
    if (mkdtemp(f->root) == NULL)
        return -1;
    char p[256];
    const char *dirs[] = {"index", "index/000000000", "events", "collections",
                          "collections/000000000"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "%.63s/%s", f->root, dirs[i]);
        if (mkdir(p, 0700) != 0)
            return -1;
    }
    snprintf(f->event, sizeof(f->event), "%.63s/events/e.tfevents", f->root);
    for (int step = 0; step < 2; step++)
        snprintf(f->step[step], sizeof(f->step[step]),
                 "%.63s/index/000000000/00000000000%d_worker_0.json", f->root,
                 step);
    static const char colls[] =
        "{\"collections\": {\"input_image\": {\"name\": \"input_image\", "
        "\"tensor_names\": [\"Net_input_0\"]}}, "
        "\"_meta\": {\"num_workers\": 1}}";
    snprintf(f->colls, sizeof(f->colls),
             "%.63s/collections/000000000/worker_0_collections.json", f->root);
    atexit(folder_remove);
    return write_file(f->colls, colls, strlen(colls));
}

/* A two-step folder whose event file is the input. */
static void read_folder(const uint8_t *data, size_t size)
{
    folder *f = &the_folder;
    if (folder_ready() != 0)
        abort();
    char idx[1024];
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
    if (write_file(f->event, data, size) != 0 ||
        write_file(f->step[0], idx, strlen(idx)) != 0 ||
        write_file(f->step[1], idx, strlen(idx)) != 0)
        abort();
    size_t n = 0;
    tw_debug_counts counts;
    char err[256];
    tw_debug_opts o = {0, 64};
    if (tw_debug_folder_read(f->root, &o, count_tensor, count_error, &n,
                             &counts, err, sizeof(err)) != TW_OK ||
        n != counts.tensors || n > 8)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_folder(data, size);
    return 0;
}
