/*
 * bench reader - reads a profiler-output folder with the agent-file reader
 * (engine/io/reader.h) and prints what it read and how fast.
 *
 * Usage: bench_reader DIR [REPEAT]
 * Prints files, lines, bad lines, samples, events, MB parsed (after gzip),
 * MB/s, samples/s, events/s and peak memory (max RSS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "reader.h"

static int bench_sink(void *ud, tw_batch *b)
{
    (void)ud;
    tw_batch_free(b);
    return TW_OK;
}

static void bench_error(void *ud, const char *path, uint64_t line,
                        const char *reason)
{
    uint64_t *n = ud;
    if ((*n)++ < 5)
        fprintf(stderr, "%s:%llu: %s\n", path, (unsigned long long)line,
                reason);
}

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [REPEAT]\n", argv[0]);
        return 2;
    }
    int repeat = argc > 2 ? atoi(argv[2]) : 1;
    if (repeat < 1)
        repeat = 1;
    char err[512];
    tw_reader_stats st = {0};
    uint64_t nerrors = 0;
    size_t nfiles = 0;
    double t0 = bench_now();
    for (int k = 0; k < repeat; k++) {
        tw_folder *f = NULL;
        if (tw_folder_list(argv[1], &f, err, sizeof(err)) != TW_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        nfiles = f->nfiles;
        tw_trace_state *ts = tw_trace_state_new();
        if (ts == NULL) {
            tw_folder_free(f);
            return 1;
        }
        for (size_t i = 0; i < f->nfiles; i++) {
            if (tw_folder_read_file(&f->files[i], "bench", ts, bench_sink, NULL,
                                    bench_error, &nerrors, &st) != TW_OK) {
                fprintf(stderr, "reading %s failed\n", f->files[i].path);
                return 1;
            }
        }
        tw_trace_state_free(ts);
        tw_folder_free(f);
    }
    double dt = bench_now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double mb = (double)st.bytes / 1e6;
    printf("files          %zu (x%d)\n", nfiles, repeat);
    printf("lines          %llu (bad %llu, reports %llu)\n",
           (unsigned long long)st.lines, (unsigned long long)st.bad_lines,
           (unsigned long long)nerrors);
    printf("samples        %llu\n", (unsigned long long)st.samples);
    printf("events         %llu\n", (unsigned long long)st.events);
    printf("MB parsed      %.1f in %.3f s\n", mb, dt);
    printf("MB/s           %.1f\n", dt > 0 ? mb / dt : 0.0);
    printf("samples/s      %.0f\n", dt > 0 ? (double)st.samples / dt : 0.0);
    printf("events/s       %.0f\n", dt > 0 ? (double)st.events / dt : 0.0);
    printf("peak RSS (MB)  %.1f\n", (double)ru.ru_maxrss / 1024.0);
    return 0;
}
