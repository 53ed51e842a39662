/*
 * job_state.c - benchmark: size and speed of job checkpoints (job.h,
 * tw_job_save) for the default ProfilerReport rule set.
 *
 *   bench_job_state [--preset NAME] [--nodes N] [--duration S] [--seed N]
 *                   [--reps N]
 *
 * Writes a synth job (default: healthy, 4 nodes, 2 h) to a temporary
 * folder, streams it in feed order through a job with the daemon's clock
 * (internal watermark, per-node sequence numbers), and at the middle, at
 * the end of the stream and after finish prints the bytes of every part,
 * bytes per node and per series, what the core holds (aggregator windows,
 * buffered batches) and the time of a full save, an only-dirty save after
 * one more batch, and a restore (µs, median of --reps).
 */
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "job.h"
#include "job_internal.h" /* series and buffered-batch counts for the figures */
#include "log.h"
#include "reader.h"
#include "synth.h"

typedef struct feed {
    tw_batch **b;
    size_t n, cap;
    char nodes[256][64];
    uint64_t next_seq[256];
    size_t nnodes;
} feed;

static int collect(void *ud, tw_batch *b)
{
    feed *f = ud;
    const char *node = b->node ? b->node : "";
    size_t i;
    for (i = 0; i < f->nnodes; i++)
        if (strcmp(f->nodes[i], node) == 0)
            break;
    if (i == f->nnodes) {
        if (f->nnodes == 256)
            return TW_ERR;
        snprintf(f->nodes[i], sizeof(f->nodes[i]), "%s", node);
        f->next_seq[i] = 1;
        f->nnodes++;
    }
    b->seq = f->next_seq[i]++;
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 1024;
        tw_batch **nb = realloc(f->b, cap * sizeof(*nb));
        if (nb == NULL)
            return TW_ERR;
        f->b = nb;
        f->cap = cap;
    }
    f->b[f->n++] = b;
    return TW_OK;
}

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *w)
{
    (void)sb;
    (void)flag;
    (void)w;
    return remove(p);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Keeps the parts of one save (the newest blob of each). */
typedef struct parts {
    char name[32][16];
    unsigned char *data[32];
    size_t len[32];
    size_t n;
} parts;

static int keep(void *ud, const char *part, const void *data, size_t len)
{
    parts *p = ud;
    size_t i;
    for (i = 0; i < p->n; i++)
        if (strcmp(p->name[i], part) == 0)
            break;
    if (i == p->n) {
        if (p->n == 32)
            return TW_ERR;
        snprintf(p->name[i], sizeof(p->name[i]), "%s", part);
        p->data[i] = NULL;
        p->n++;
    }
    free(p->data[i]);
    p->data[i] = malloc(len ? len : 1);
    if (p->data[i] == NULL)
        return TW_ERR;
    memcpy(p->data[i], data, len);
    p->len[i] = len;
    return TW_OK;
}

static void parts_clear(parts *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->data[i]);
    memset(p, 0, sizeof(*p));
}

static int discard(void *ud, const char *part, const void *data, size_t len)
{
    (void)part;
    (void)data;
    *(size_t *)ud += len;
    return TW_OK;
}

typedef struct bench {
    tw_registry *reg;
    tw_job_config cfg;
    tw_rule_spec spec;
    int reps;
} bench;

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

static int report(const bench *be, tw_job *j, const char *label, tw_batch *next)
{
    char err[1024];
    parts p;
    memset(&p, 0, sizeof(p));
    if (tw_job_save(j, 0, keep, &p, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_job_state: %s\n", err);
        return TW_ERR;
    }
    size_t total = 0;
    for (size_t i = 0; i < p.n; i++)
        total += p.len[i];
    size_t nsamples = 0, nevents = 0;
    for (size_t i = 0; i < j->nchunks; i++) {
        nsamples += j->chunks[i].batch->nsamples;
        nevents += j->chunks[i].batch->nevents;
    }
    tw_buf *wb = tw_buf_new();
    if (wb == NULL || tw_windows_save(j->windows, wb) != TW_OK)
        return TW_ERR;
    tw_job_stats st;
    tw_job_get_stats(j, &st);
    printf("\n== %s: %llu batches in, %llu scans closed\n", label,
           (unsigned long long)st.batches, (unsigned long long)st.scans);
    printf("state: %zu bytes = %.0f bytes/node (%zu nodes), %.0f bytes/series "
           "(%zu series)\n",
           total, (double)total / (double)(j->nnodes ? j->nnodes : 1),
           j->nnodes, (double)total / (double)(j->nseries ? j->nseries : 1),
           j->nseries);
    for (size_t i = 0; i < p.n; i++)
        printf("  %-8s %9zu bytes\n", p.name[i], p.len[i]);
    printf("  core holds: aggregator windows %zu bytes; %zu buffered batches "
           "(%zu samples, %zu events) for open scans\n",
           tw_buf_len(wb), j->nchunks, nsamples, nevents);
    tw_buf_free(wb);

    int reps = be->reps;
    double *t = malloc((size_t)reps * sizeof(double));
    if (t == NULL)
        return TW_ERR;
    for (int r = 0; r < reps; r++) {
        size_t bytes = 0;
        double t0 = now_us();
        if (tw_job_save(j, 0, discard, &bytes, err, sizeof(err)) != TW_OK)
            return TW_ERR;
        t[r] = now_us() - t0;
    }
    printf("  full save: %.1f us (median of %d)\n", median(t, reps), reps);
    for (int r = 0; r < reps; r++) {
        tw_job *c = NULL;
        if (tw_job_new("bench", &be->cfg, be->reg, &be->spec, 1, &c, err,
                       sizeof(err)) != TW_OK)
            return TW_ERR;
        double t0 = now_us();
        for (size_t i = 0; i < p.n; i++)
            if (tw_job_restore_part(c, p.name[i], p.data[i], p.len[i], err,
                                    sizeof(err)) != TW_OK) {
                fprintf(stderr, "bench_job_state: %s\n", err);
                return TW_ERR;
            }
        t[r] = now_us() - t0;
        tw_job_free(c);
    }
    printf("  restore (all parts into a new job): %.1f us (median of %d)\n",
           median(t, reps), reps);
    if (next != NULL) {
        /* the daemon's tick: one more batch, then an only-dirty save */
        size_t bytes = 0;
        if (tw_job_ingest(j, next) != TW_OK)
            return TW_ERR;
        tw_job_get_stats(j, &st);
        double t0 = now_us();
        if (tw_job_save(j, 1, discard, &bytes, err, sizeof(err)) != TW_OK)
            return TW_ERR;
        printf("  only-dirty save after one more batch (%s): %.1f us, %zu "
               "bytes\n",
               st.scans > 0 ? "core and/or rules" : "core", now_us() - t0,
               bytes);
    }
    free(t);
    parts_clear(&p);
    return TW_OK;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"preset", required_argument, NULL, 'p'},
        {"nodes", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},
        {"seed", required_argument, NULL, 's'},
        {"reps", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    const char *preset = "healthy";
    unsigned nodes = 4;
    double duration = 7200;
    unsigned long long seed = 1;
    int reps = 21, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            preset = optarg;
            break;
        case 'n':
            nodes = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'd':
            duration = strtod(optarg, NULL);
            break;
        case 's':
            seed = strtoull(optarg, NULL, 10);
            break;
        case 'r':
            reps = atoi(optarg);
            break;
        default:
            fprintf(stderr,
                    "usage: bench_job_state [--preset NAME] [--nodes N] "
                    "[--duration S] [--seed N] [--reps N]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    tw_log_set_level(TW_LOG_ERROR);
    char dir[] = "/tmp/tw_bench_state_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char out[sizeof(dir) + 8];
    snprintf(out, sizeof(out), "%s/out", dir);
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = out;
    o.preset = preset;
    o.nodes = nodes;
    o.duration_s = duration;
    o.seed = seed;
    char err[1024];
    int status = 1;
    feed f;
    memset(&f, 0, sizeof(f));
    tw_folder *folder = NULL;
    tw_trace_state *ts = tw_trace_state_new();
    bench be;
    memset(&be, 0, sizeof(be));
    be.reps = reps;
    be.reg = tw_registry_new();
    tw_job *j = NULL;
    if (ts == NULL || be.reg == NULL)
        goto out;
    if (tw_synth_opts_resolve(&o, err, sizeof(err)) != 0 ||
        tw_synth_write(&o, NULL, err, sizeof(err)) != 0 ||
        tw_folder_list(out, &folder, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_job_state: %s\n", err);
        goto out;
    }
    for (size_t i = 0; i < folder->nfiles; i++)
        if (tw_folder_read_file(&folder->files[i], "bench", ts, collect, &f,
                                NULL, NULL, NULL) != TW_OK)
            goto out;
    printf("bench_job_state: preset %s, %u nodes, %u cores, %u GPUs, %.0f s at "
           "%u ms, %zu batches; rules: ProfilerReport (defaults), tick 60 s, "
           "lateness 60 s\n",
           preset, o.nodes, o.cores, o.gpus, o.duration_s, o.interval_ms, f.n);
    tw_job_config_default(&be.cfg);
    be.spec.rule = "ProfilerReport";
    if (tw_job_new("bench", &be.cfg, be.reg, &be.spec, 1, &j, err,
                   sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_job_state: %s\n", err);
        goto out;
    }
    size_t half = f.n / 2, i = 0;
    for (; i < half; i++) {
        if (tw_job_ingest(j, f.b[i]) != TW_OK)
            goto out;
        f.b[i] = NULL;
    }
    if (report(&be, j, "mid-way", f.b[i]) != TW_OK)
        goto out;
    f.b[i++] = NULL;
    for (; i + 1 < f.n; i++) {
        if (tw_job_ingest(j, f.b[i]) != TW_OK)
            goto out;
        f.b[i] = NULL;
    }
    if (report(&be, j, "end of stream (not finished)",
               i < f.n ? f.b[i] : NULL) != TW_OK)
        goto out;
    if (i < f.n)
        f.b[i] = NULL;
    if (tw_job_finish(j, 0) != TW_OK ||
        report(&be, j, "finished", NULL) != TW_OK)
        goto out;
    status = 0;
out:
    tw_job_free(j);
    for (size_t k = 0; k < f.n; k++)
        if (f.b[k] != NULL)
            tw_batch_free(f.b[k]);
    free(f.b);
    tw_folder_free(folder);
    tw_trace_state_free(ts);
    tw_registry_free(be.reg);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return status;
}
