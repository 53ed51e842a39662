/*
 * job_state.c - benchmark: size and speed of job checkpoints (job.h,
 * tw_job_save) for the default ProfilerReport rule set, by part and by
 * sub-rule, at chosen points of a long job.
 *
 *   bench_job_state [--preset NAME] [--nodes N] [--cores N] [--gpus N]
 *                   [--interval MS] [--duration D] [--at D,D,...]
 *                   [--semantics fixed|reference] [--segment D]
 *                   [--seed N] [--reps N] [--segmented] [--system-only]
 *
 * Durations D are seconds or take a suffix s, m, h. The job is synthesized
 * (synth.h) in segments of --segment event time (default 1 h; the last may
 * be shorter) written one at a time to a temporary folder, read in feed
 * order straight into a job with the daemon's clock (internal watermark,
 * per-node sequence numbers) and deleted, so a 24-hour 96-core job at
 * 100 ms never needs its 23 GB of JSON on disk at once. Segment k is the
 * preset started k segments later with seed + k: values continue to vary,
 * but each segment's trace restarts its step numbers and has its own
 * DataLoader initialization (a few steps in 10 000 per hour).
 *
 * At every --at point (default: half the duration and the end) it prints
 * the bytes of every part, bytes per node, the ProfilerReport part split
 * by sub-rule, what the core holds (aggregator windows, buffered batches),
 * the time of a full save and of a restore (µs, median of --reps; wall,
 * and thread CPU for the core and the rules apart) and of an only-dirty
 * save after the next batch. --segmented: the job saves as the daemon's
 * do (job.h, segmented checkpoints); the dictionary and batch segments are
 * summed per kind, and the state without the buffered batches is shown.
 * --system-only: no framework traces (the scale benchmark's agents).
 */
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "checkpoint.h" /* tw_checkpoint_part_cmp */
#include "ckpt_codec.h" /* a state snapshot's entries */
#include "job.h"
#include "job_internal.h" /* series and buffered-batch counts for the figures */
#include "log.h"
#include "reader.h"
#include "synth.h"

/* Names of ProfilerReport's sub-rules in its checkpoint order
 * (rules/profiler_report.c, pr_rules); reference semantics keeps the
 * first eleven. */
static const char *const sub_names[] = {
    "CPUBottleneck",           "IOBottleneck",
    "LowGPUUtilization",       "StepOutlier",
    "GPUMemoryIncrease",       "BatchSize",
    "MaxInitializationTime",   "LoadBalancing",
    "OverallSystemUsage",      "Dataloader",
    "OverallFrameworkMetrics", "Straggler",
};
#define NSUB_NAMES (sizeof(sub_names) / sizeof(sub_names[0]))
#define MAX_SUBS 64 /* sub-rules appended later print as "sub-rule <i>" */
#define MAX_AT 32
#define MAX_NODES 4096

typedef struct bench bench;

/* Streams batches into the job as the reader yields them. */
typedef struct feed {
    bench *be;
    tw_job *j;
    char (*nodes)[64];
    uint64_t *next_seq;
    size_t nnodes;
    uint64_t batches;
    int dirty_save_pending; /* time an only-dirty save after this batch */
    int failed;
} feed;

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

/* CPU time of this thread: the figure that a loaded machine disturbs
 * least (wall time also counts waiting for a core). */
static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Keeps the parts of one save (the newest blob of each). */
#define MAX_PARTS 4096 /* segmented: a chunks.<n> part per save */

typedef struct parts {
    char name[MAX_PARTS][32];
    unsigned char *data[MAX_PARTS];
    size_t len[MAX_PARTS];
    size_t n;
} parts;

static int keep(void *ud, const char *part, const void *data, size_t len)
{
    parts *p = ud;
    size_t i;
    for (i = 0; i < p->n; i++)
        if (strcmp(p->name[i], part) == 0)
            break;
    if (data == NULL) { /* a segment removed */
        if (i < p->n) {
            free(p->data[i]);
            p->n--;
            memmove(p->name[i], p->name[i + 1],
                    (p->n - i) * sizeof(p->name[0]));
            memmove(&p->data[i], &p->data[i + 1],
                    (p->n - i) * sizeof(p->data[0]));
            memmove(&p->len[i], &p->len[i + 1], (p->n - i) * sizeof(p->len[0]));
        }
        return TW_OK;
    }
    if (i == p->n) {
        if (p->n == MAX_PARTS)
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

/* Times a save part by part: each part is built, then emitted, so the CPU
 * time between two emits is the next part's encoding. */
typedef struct part_clock {
    double last;
    double core, rules; /* µs of CPU */
} part_clock;

static int clock_part(void *ud, const char *part, const void *data, size_t len)
{
    part_clock *c = ud;
    (void)data;
    (void)len;
    double now = cpu_us();
    if (strncmp(part, "rule.", 5) != 0) /* the engine's parts */
        c->core += now - c->last;
    else
        c->rules += now - c->last;
    c->last = cpu_us();
    return TW_OK;
}

struct bench {
    tw_registry *reg;
    tw_job_config cfg;
    tw_rule_spec spec;
    int reps;
    int segmented; /* tw_job_set_segmented, as the daemon's jobs */
};

typedef struct part_ref {
    const char *name;
    const unsigned char *data;
    size_t len;
} part_ref;

static int ref_cmp(const void *a, const void *b)
{
    return tw_checkpoint_part_cmp(((const part_ref *)a)->name,
                                  ((const part_ref *)b)->name);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Splits the ProfilerReport part by sub-rule: its blob starts with the
 * magic "PERP", u32 version, u32 sub-rule count, and ends with each
 * sub-rule's checkpoint followed by its u64 length (profiler_report.c). */
static void print_subrules(const unsigned char *d, size_t len, size_t nnodes)
{
    const unsigned char *m = NULL;
    for (size_t i = 0; i + 12 <= len && i < 512 && m == NULL; i++)
        if (memcmp(d + i, "PERP", 4) == 0)
            m = d + i;
    if (m == NULL) {
        printf("    (not a ProfilerReport part)\n");
        return;
    }
    size_t nsub = (size_t)le(m + 8, 4);
    size_t blen[MAX_SUBS], end = len;
    if (nsub > MAX_SUBS) {
        printf("    (%zu sub-rules: unknown layout)\n", nsub);
        return;
    }
    for (size_t r = nsub; r-- > 0;) {
        if (end < (size_t)(m - d) + 8) {
            printf("    (truncated)\n");
            return;
        }
        uint64_t n = le(d + end - 8, 8);
        end -= 8;
        if (n > end) {
            printf("    (truncated)\n");
            return;
        }
        end -= (size_t)n;
        blen[r] = (size_t)n;
    }
    for (size_t r = 0; r < nsub; r++) {
        char other[32];
        snprintf(other, sizeof(other), "sub-rule %zu", r);
        printf("    %-24s %11zu bytes %11.0f bytes/node\n",
               r < NSUB_NAMES ? sub_names[r] : other, blen[r],
               (double)blen[r] / (double)nnodes);
    }
}

/* A whole state snapshot ("state.<id>.0" of one slice, job_state.c):
 * its entries as the parts they were before snapshots, "windows" and
 * "rule.<i>", each with its bytes (and ProfilerReport's sub-rules). */
static void print_snapshot(const unsigned char *d, size_t len, size_t nnodes)
{
    tw_ckr r;
    unsigned char *raw = NULL;
    size_t pn = len > 20 ? len - 20 : 0;
    if (len > 20 && d[6] == 1) { /* stored compressed (PART_ZSTD) */
        unsigned long long rn = ZSTD_getFrameContentSize(d + 20, pn);
        if (rn < ((unsigned long long)1 << 32) && (raw = malloc(rn + 1)) &&
            ZSTD_decompress(raw, rn, d + 20, pn) == rn) {
            printf("    (stored compressed: %zu bytes, %llu before)\n", pn, rn);
            pn = (size_t)rn;
        } else {
            printf("    (compressed, and not readable here)\n");
            free(raw);
            return;
        }
    }
    tw_ckr_init(&r, raw != NULL ? raw : d + 20, pn);
    (void)tw_ckr_uv(&r); /* id */
    uint64_t i = tw_ckr_uv(&r), n = tw_ckr_uv(&r), total = tw_ckr_uv(&r);
    if (r.why != NULL || i != 0 || n != 1 || tw_ckr_left(&r) != total) {
        printf("    (a snapshot in %llu slices: not split)\n",
               (unsigned long long)n);
        free(raw);
        return;
    }
    while (tw_ckr_left(&r) > 0 && r.why == NULL) {
        uint8_t kind = tw_ckr_u8(&r);
        uint64_t idx = tw_ckr_uv(&r);
        size_t blen = tw_ckr_count(&r, 1);
        const uint8_t *blob = tw_ckr_bytes(&r, blen);
        if (r.why != NULL)
            break;
        char name[32];
        snprintf(name, sizeof(name), kind == 0 ? "windows" : "rule.%llu",
                 (unsigned long long)idx);
        printf("  %-8s %11zu bytes %11.0f bytes/node\n", name, blen,
               (double)blen / (double)nnodes);
        if (kind == 1)
            print_subrules(blob, blen, nnodes);
    }
    free(raw);
}

static int report(const bench *be, tw_job *j, const char *label)
{
    char err[1024];
    parts p;
    memset(&p, 0, sizeof(p));
    if (tw_job_save(j, 0, keep, &p, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_job_state: %s\n", err);
        return TW_ERR;
    }
    size_t total = 0, nnodes = j->nnodes ? j->nnodes : 1;
    for (size_t i = 0; i < p.n; i++)
        total += p.len[i];
    size_t nsamples = 0, nevents = 0, held = 0;
    for (size_t i = 0; i < j->nchunks; i++) {
        nsamples += chunk_nsamples(&j->chunks[i]);
        nevents += j->chunks[i].batch->nevents;
        held += tw_arena_capacity(&j->chunks[i].batch->arena);
    }
    tw_buf *wb = tw_buf_new();
    if (wb == NULL || tw_windows_save(j->windows, wb, 0) != TW_OK)
        return TW_ERR;
    tw_job_stats st;
    tw_job_get_stats(j, &st);
    printf("\n== %s: %llu batches in (%llu samples, %llu events), %llu scans "
           "closed\n",
           label, (unsigned long long)st.batches,
           (unsigned long long)st.samples, (unsigned long long)st.events,
           (unsigned long long)st.scans);
    printf("state: %zu bytes = %.0f bytes/node (%zu nodes), %.0f bytes/series "
           "(%zu series)\n",
           total, (double)total / (double)nnodes, j->nnodes,
           (double)total / (double)(j->nseries ? j->nseries : 1), j->nseries);
    /* in restore order (tw_checkpoint_load's), data with its name */
    part_ref *ref = calloc(p.n ? p.n : 1, sizeof(*ref));
    if (ref == NULL)
        return TW_ERR;
    for (size_t i = 0; i < p.n; i++)
        ref[i] = (part_ref){p.name[i], p.data[i], p.len[i]};
    qsort(ref, p.n, sizeof(*ref), ref_cmp);
    size_t buffered = 0;
    for (size_t i = 0; i < p.n; i++) {
        const char *pre = strncmp(ref[i].name, "dict.", 5) == 0     ? "dict.*"
                          : strncmp(ref[i].name, "chunks.", 7) == 0 ? "chunks.*"
                                                                    : NULL;
        if (pre != NULL) { /* one line for all segments of a kind */
            size_t bytes = 0, n = 0;
            while (i < p.n && strncmp(ref[i].name, pre, strlen(pre) - 1) == 0) {
                bytes += p.len[i++];
                n++;
            }
            i--;
            if (pre[0] == 'c')
                buffered = bytes;
            printf("  %-8s %11zu bytes %11.0f bytes/node (%zu parts)\n", pre,
                   bytes, (double)bytes / (double)nnodes, n);
            continue;
        }
        printf("  %-8s %11zu bytes %11.0f bytes/node\n", ref[i].name,
               ref[i].len, (double)ref[i].len / (double)nnodes);
        if (strncmp(ref[i].name, "rule.", 5) == 0)
            print_subrules(ref[i].data, ref[i].len, nnodes);
        if (strncmp(ref[i].name, "state.", 6) == 0)
            print_snapshot(ref[i].data, ref[i].len, nnodes);
    }
    if (be->segmented)
        printf("  without the buffered batches (chunks.*): %zu bytes = %.0f "
               "bytes/node\n",
               total - buffered, (double)(total - buffered) / (double)nnodes);
    printf("  core holds: aggregator windows %zu bytes; %zu buffered batches "
           "(%zu samples, %zu events) for open scans, %zu bytes in memory "
           "(%.0f/node)\n",
           tw_buf_len(wb), j->nchunks, nsamples, nevents, held,
           (double)held / (double)nnodes);
    tw_buf_free(wb);

    int reps = be->reps;
    double *t = malloc((size_t)reps * 3 * sizeof(double));
    if (t == NULL)
        return TW_ERR;
    double *tcore = t + reps, *trules = t + 2 * reps;
    size_t restored = 0;
    for (int r = 0; r < reps; r++) {
        part_clock pc = {cpu_us(), 0, 0};
        double t0 = now_us();
        if (tw_job_save(j, 0, clock_part, &pc, err, sizeof(err)) != TW_OK)
            return TW_ERR;
        t[r] = now_us() - t0;
        tcore[r] = pc.core;
        trules[r] = pc.rules;
    }
    printf("  full save: %.1f us wall; CPU: core %.1f us, rules %.1f us "
           "(medians of %d)\n",
           median(t, reps), median(tcore, reps), median(trules, reps), reps);
    for (int r = 0; r < reps; r++) {
        tw_job *c = NULL;
        if (tw_job_new("bench", &be->cfg, be->reg, &be->spec, 1, &c, err,
                       sizeof(err)) != TW_OK)
            return TW_ERR;
        if (be->segmented)
            tw_job_set_segmented(c);
        double t0 = now_us();
        tcore[r] = trules[r] = 0;
        for (size_t i = 0; i < p.n; i++) {
            double c0 = cpu_us();
            if (tw_job_restore_part(c, ref[i].name, ref[i].data, ref[i].len,
                                    err, sizeof(err)) != TW_OK) {
                fprintf(stderr, "bench_job_state: %s\n", err);
                return TW_ERR;
            }
            if (strncmp(ref[i].name, "rule.", 5) != 0)
                tcore[r] += cpu_us() - c0;
            else
                trules[r] += cpu_us() - c0;
        }
        t[r] = now_us() - t0;
        restored = 0;
        for (size_t i = 0; i < c->nchunks; i++)
            restored += tw_arena_capacity(&c->chunks[i].batch->arena);
        tw_job_free(c);
    }
    printf("  restore (all parts into a new job): %.1f us wall; CPU: core "
           "%.1f us, rules %.1f us (medians of %d); buffered batches %zu "
           "bytes in memory after it\n",
           median(t, reps), median(tcore, reps), median(trules, reps), reps,
           restored);
    free(t);
    free(ref);
    parts_clear(&p);
    fflush(stdout);
    return TW_OK;
}

/* The daemon's tick after a report: one more batch, then an only-dirty
 * save. */
static int dirty_save(tw_job *j)
{
    char err[1024];
    size_t bytes = 0;
    tw_job_stats st;
    tw_job_get_stats(j, &st);
    double t0 = now_us();
    if (tw_job_save(j, 1, discard, &bytes, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_job_state: %s\n", err);
        return TW_ERR;
    }
    printf("  only-dirty save after one more batch: %.1f us, %zu bytes\n",
           now_us() - t0, bytes);
    fflush(stdout);
    return TW_OK;
}

static int ingest(void *ud, tw_batch *b)
{
    feed *f = ud;
    const char *node = b->node ? b->node : "";
    size_t i;
    for (i = 0; i < f->nnodes; i++)
        if (strcmp(f->nodes[i], node) == 0)
            break;
    if (i == f->nnodes) {
        if (f->nnodes == MAX_NODES) {
            tw_batch_free(b);
            return TW_ERR;
        }
        snprintf(f->nodes[i], sizeof(f->nodes[i]), "%s", node);
        f->next_seq[i] = 1;
        f->nnodes++;
    }
    b->seq = f->next_seq[i]++;
    f->batches++;
    if (tw_job_ingest(f->j, b) != TW_OK) {
        fprintf(stderr, "bench_job_state: ingest of batch %llu failed\n",
                (unsigned long long)f->batches);
        f->failed = 1;
        return TW_ERR;
    }
    if (f->dirty_save_pending) {
        f->dirty_save_pending = 0;
        if (dirty_save(f->j) != TW_OK) {
            f->failed = 1;
            return TW_ERR;
        }
    }
    return TW_OK;
}

/* Seconds, or a number with suffix s, m or h; -1 when malformed. */
static double parse_duration(const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    if (*end == 'h')
        v *= 3600, end++;
    else if (*end == 'm')
        v *= 60, end++;
    else if (*end == 's')
        end++;
    return *end == '\0' ? v : -1;
}

/* Writes one segment, streams it into the job, deletes it. */
static int run_segment(const tw_synth_opts *base, unsigned k, double from_s,
                       double len_s, const char *dir, feed *f)
{
    char out[512], err[1024];
    snprintf(out, sizeof(out), "%s/seg%u", dir, k);
    tw_synth_opts o = *base;
    o.out_dir = out;
    o.duration_s = len_s;
    o.seed = base->seed + k;
    o.start_us = base->start_us + (int64_t)(from_s * 1e6);
    tw_folder *folder = NULL;
    tw_trace_state *ts = tw_trace_state_new();
    int rc = TW_ERR;
    if (ts == NULL)
        goto out;
    if (tw_synth_write(&o, NULL, err, sizeof(err)) != 0 ||
        tw_folder_list(out, &folder, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_job_state: segment %u: %s\n", k, err);
        goto out;
    }
    for (size_t i = 0; i < folder->nfiles; i++)
        if (tw_folder_read_file(&folder->files[i], "bench", ts, ingest, f, NULL,
                                NULL, NULL) != TW_OK ||
            f->failed) {
            fprintf(stderr, "bench_job_state: segment %u: reading %s failed\n",
                    k, folder->files[i].path);
            goto out;
        }
    rc = TW_OK;
out:
    tw_folder_free(folder);
    tw_trace_state_free(ts);
    nftw(out, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: bench_job_state [--preset NAME] [--nodes N] [--cores N] "
            "[--gpus N] [--interval MS] [--duration D] [--at D,D,...] "
            "[--semantics fixed|reference] [--segment D] [--seed N] "
            "[--reps N] [--segmented] [--system-only]\n");
    return 2;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"preset", required_argument, NULL, 'p'},
        {"nodes", required_argument, NULL, 'n'},
        {"cores", required_argument, NULL, 'c'},
        {"gpus", required_argument, NULL, 'g'},
        {"interval", required_argument, NULL, 'i'},
        {"duration", required_argument, NULL, 'd'},
        {"at", required_argument, NULL, 'a'},
        {"semantics", required_argument, NULL, 'm'},
        {"segment", required_argument, NULL, 'S'},
        {"seed", required_argument, NULL, 's'},
        {"reps", required_argument, NULL, 'r'},
        {"segmented", no_argument, NULL, 'G'},
        {"system-only", no_argument, NULL, 'Y'},
        {NULL, 0, NULL, 0},
    };
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.nodes = 4;
    o.duration_s = 7200;
    double at[MAX_AT], segment = 3600;
    size_t nat = 0;
    tw_semantics sem = TW_SEMANTICS_FIXED;
    int reps = 5, c, segmented = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            o.preset = optarg;
            break;
        case 'n':
            o.nodes = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'c':
            o.cores = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'g':
            o.gpus = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'i':
            o.interval_ms = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'd':
            o.duration_s = parse_duration(optarg);
            if (o.duration_s <= 0)
                return usage();
            break;
        case 'a': {
            char *copy = strdup(optarg), *save = NULL;
            if (copy == NULL)
                return 1;
            for (char *t = strtok_r(copy, ",", &save); t != NULL;
                 t = strtok_r(NULL, ",", &save)) {
                if (nat == MAX_AT || (at[nat] = parse_duration(t)) <= 0) {
                    free(copy);
                    return usage();
                }
                nat++;
            }
            free(copy);
            break;
        }
        case 'm':
            if (strcmp(optarg, "fixed") == 0)
                sem = TW_SEMANTICS_FIXED;
            else if (strcmp(optarg, "reference") == 0)
                sem = TW_SEMANTICS_REFERENCE;
            else
                return usage();
            break;
        case 'S':
            segment = parse_duration(optarg);
            if (segment <= 0)
                return usage();
            break;
        case 's':
            o.seed = strtoull(optarg, NULL, 10);
            break;
        case 'r':
            reps = atoi(optarg);
            break;
        case 'G':
            segmented = 1;
            break;
        case 'Y':
            o.framework = 0; /* agents' system metrics only */
            break;
        default:
            return usage();
        }
    }
    if (reps < 1)
        reps = 1;
    if (nat == 0) {
        at[nat++] = o.duration_s / 2;
        at[nat++] = o.duration_s;
    }
    qsort(at, nat, sizeof(double), cmp_double);
    tw_log_set_level(TW_LOG_ERROR);
    char err[1024];
    if (tw_synth_opts_resolve(&o, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench_job_state: %s\n", err);
        return 2;
    }
    if (o.nodes > MAX_NODES) {
        fprintf(stderr, "bench_job_state: --nodes at most %d\n", MAX_NODES);
        return 2;
    }
    char dir[] = "/tmp/tw_bench_state_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    int status = 1;
    bench be;
    memset(&be, 0, sizeof(be));
    be.reps = reps;
    be.segmented = segmented;
    be.reg = tw_registry_new();
    feed f;
    memset(&f, 0, sizeof(f));
    f.be = &be;
    f.nodes = calloc(MAX_NODES, sizeof(*f.nodes));
    f.next_seq = calloc(MAX_NODES, sizeof(*f.next_seq));
    if (be.reg == NULL || f.nodes == NULL || f.next_seq == NULL)
        goto out;
    printf("bench_job_state: preset %s, %u nodes, %u cores, %u GPUs, %.0f s at "
           "%u ms in segments of %.0f s, %s semantics; rules: ProfilerReport "
           "(defaults), tick 60 s, lateness 60 s\n",
           o.preset, o.nodes, o.cores, o.gpus, o.duration_s, o.interval_ms,
           segment, sem == TW_SEMANTICS_FIXED ? "fixed" : "reference");
    tw_job_config_default(&be.cfg);
    be.cfg.semantics = sem;
    be.spec.rule = "ProfilerReport";
    if (tw_job_new("bench", &be.cfg, be.reg, &be.spec, 1, &f.j, err,
                   sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_job_state: %s\n", err);
        goto out;
    }
    if (be.segmented)
        tw_job_set_segmented(f.j);
    double done = 0, t0 = now_us();
    size_t next_at = 0;
    for (unsigned k = 0; done < o.duration_s; k++) {
        /* a segment never crosses a report point */
        double len = segment;
        if (done + len > o.duration_s)
            len = o.duration_s - done;
        if (next_at < nat && done + len > at[next_at] && at[next_at] > done)
            len = at[next_at] - done;
        if (run_segment(&o, k, done, len, dir, &f) != TW_OK)
            goto out;
        done += len;
        while (next_at < nat && at[next_at] <= done + 1e-9) {
            char label[128];
            snprintf(label, sizeof(label), "at %.2f h of job (%.0f s wall)",
                     done / 3600, (now_us() - t0) / 1e6);
            if (report(&be, f.j, label) != TW_OK)
                goto out;
            f.dirty_save_pending = 1;
            next_at++;
        }
    }
    status = 0;
out:
    tw_job_free(f.j);
    free(f.nodes);
    free(f.next_seq);
    tw_registry_free(be.reg);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return status;
}
