/*
 * fuzz_reader.c - the agent-file readers (engine/io/reader.h) on arbitrary
 * bytes: the input is written to a temporary file (tmpfs if any) that is then
 * read as a system-metrics file, as a pevents trace file, as a PyTorch profiler
 * trace (listed, which surveys and anchors it, then read), and as a gzip TF
 * profiler trace. Nothing may crash, leak or trip a sanitizer; the batches are
 * checked for basic invariants.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "reader.h"

static int fuzz_sink(void *ud, tw_batch *b)
{
    (void)ud;
    for (size_t i = 0; i < b->nsamples; i++)
        if (b->samples[i].series >= b->nseries)
            abort();
    for (size_t i = 0; i < b->nevents; i++)
        if (b->events[i].name == NULL || b->events[i].phase == NULL ||
            (b->events[i].nargs > 0 && b->events[i].args == NULL))
            abort();
    tw_batch_free(b);
    return TW_OK;
}

static void fuzz_error(void *ud, const char *path, uint64_t line,
                       const char *reason)
{
    (void)ud;
    (void)path;
    (void)line;
    if (reason == NULL)
        abort();
}

static void fuzz_read(const char *path, tw_file_kind kind, tw_source source)
{
    tw_agent_file af;
    memset(&af, 0, sizeof(af));
    af.path = (char *)path;
    af.kind = kind;
    af.source = source;
    af.node = "fuzz";
    af.has_metadata = 1;
    tw_trace_state *ts = tw_trace_state_new();
    if (ts == NULL)
        return;
    tw_reader_stats st;
    memset(&st, 0, sizeof(st));
    /* Twice with one state: base time and B stacks carry over. */
    for (int k = 0; k < 2; k++)
        tw_folder_read_file(&af, "fuzz", ts, fuzz_sink, NULL, fuzz_error, NULL,
                            &st);
    tw_trace_state_free(ts);
}

/* The file given to the listing as one PyTorch trace (reader.h). */
static void fuzz_torch(const char *path)
{
    tw_folder *f = NULL;
    char err[256];
    if (tw_folder_list(path, &f, err, sizeof(err)) != TW_OK)
        return;
    if (f->nfiles != 1 || !f->files[0].torch)
        abort();
    tw_trace_state *ts = tw_trace_state_new();
    tw_reader_stats st;
    memset(&st, 0, sizeof(st));
    if (ts != NULL)
        tw_folder_read_file(&f->files[0], "fuzz", ts, fuzz_sink, NULL,
                            fuzz_error, NULL, &st);
    /* the other anchor, read again */
    tw_folder_anchor_traces(f, 1700000000000000LL);
    if (ts != NULL)
        tw_folder_read_file(&f->files[0], "fuzz", ts, fuzz_sink, NULL,
                            fuzz_error, NULL, &st);
    tw_trace_state_free(ts);
    tw_folder_free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* On tmpfs when there is one: on a disk, creating, closing and
     * unlinking a file per input took a fifth of the time. */
    struct stat sb;
    char path[64];
    snprintf(path, sizeof(path), "%s/tw_fuzz_reader.XXXXXX",
             stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) &&
                     access("/dev/shm", W_OK) == 0
                 ? "/dev/shm"
                 : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    close(fd);
    fuzz_read(path, TW_FILE_SYSTEM, TW_SOURCE_PYTHONTIMELINE);
    fuzz_read(path, TW_FILE_FRAMEWORK, TW_SOURCE_PYTHONTIMELINE);
    fuzz_read(path, TW_FILE_FRAMEWORK, TW_SOURCE_HOROVOD);
    fuzz_torch(path);

    gzFile gz = gzopen(path, "wb");
    if (gz != NULL) {
        if (size > 0)
            gzwrite(gz, data, (unsigned)size);
        gzclose(gz);
        fuzz_read(path, TW_FILE_FRAMEWORK, TW_SOURCE_TF_PROFILER);
    }
    unlink(path);
    return 0;
}
