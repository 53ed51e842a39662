/*
 * corpus_gen_state.c - writes the seed corpus of fuzz_state
 * (tests/fuzz/corpus/state/): the checkpoint parts of a real job (the
 * fuzz_state.h job fed a one-minute synthetic run of one node, sampled every 5
 * s), saved half way and after finish, in the sealed form (payload only), and
 * after finish also as the whole stored value. The corpus keeps the seeds
 * of earlier generations under their names (mid., end.: version 2, 13
 * rules; compact-end.: the compact rule forms) for test_state_compat; the
 * newest generation is prefixed v4- (core version 4, 31 built-in rules);
 * later rule forms add only the parts they change (so3-: StepOutlier
 * "SO03"; osub-: BatchSize's CPU ring of averages, LoadBalancing "LBL2",
 * and ProfilerReport holding both; pk-: bit-packed and run-length rings,
 * StepOutlier "SO04", Dataloader "DL02"); seg6- are the segmented parts
 * (version 5, the core 6) of fuzz_state.h's prelude; zstd- are stored
 * values of that generation whose header says zstd (parts of 4 KiB or
 * more, and the state slice).
 * Run by hand (then prefix the files):
 *   TRAINWATCH_RULES_DIR=build/rules build/tests/corpus_gen_state \
 *       tests/fuzz/corpus/state
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_state.h"
#include "reader.h"
#include "synth.h"

typedef struct gen {
    const char *out;
    const char *when;
    fuzz_state_setup *su;
    tw_job *job;
} gen;

static int write_seed(const gen *g, const char *part, int sealed,
                      const uint8_t *d, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.%s.%s", g->out, g->when, part,
             sealed ? "payload" : "stored");
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        return TW_ERR;
    }
    uint8_t head[2];
    head[0] = strcmp(part, "core") == 0
                  ? 0
                  : (uint8_t)(1 + strtoul(part + 5, NULL, 10));
    /* sealed (bit 0) as the version it was written in (bits 1-2: the
     * version - 1, fuzz_state.c), or raw */
    head[1] = sealed ? (uint8_t)(1u | (((d[4] - 1u) & 3u) << 1)) : 0;
    size_t skip = sealed ? 20 : 0;
    int ok = fwrite(head, 1, 2, f) == 2 &&
             fwrite(d + skip, 1, len - skip, f) == len - skip;
    if (fclose(f) != 0 || !ok) {
        perror(path);
        return TW_ERR;
    }
    return TW_OK;
}

/* The segmented parts of fuzz_state.h's prelude, as seg6-<part>.payload
 * (sealed: selector, 1, payload) and seg6-<part>.stored (the value). */
static int write_segment_seeds(const gen *g)
{
    fuzz_prelude p;
    if (fuzz_state_prelude(g->su, &p) != 0)
        return -1;
    const struct {
        const char *name;
        uint8_t sel;
        const fuzz_blob *b;
    } seg[] = {{"state.1.0", FUZZ_SEL_STATE, &p.state},
               {"dict.1", FUZZ_SEL_DICT, &p.dict},
               {"chunks.1", FUZZ_SEL_CHUNKS, &p.chunks}};
    int rc = 0;
    /* the version 6 core only as stored: a sealed core seed is sealed
     * again as versions 1-4 by fuzz_state */
    {
        char path[4096];
        snprintf(path, sizeof(path), "%s/seg6-core.stored", g->out);
        FILE *f = fopen(path, "wb");
        uint8_t head[2] = {0, 0};
        if (f == NULL || fwrite(head, 1, 2, f) != 2 ||
            fwrite(p.core.data, 1, p.core.len, f) != p.core.len) {
            perror(path);
            rc = -1;
        }
        if (f != NULL && fclose(f) != 0)
            rc = -1;
    }
    for (size_t i = 0; i < 3 && rc == 0; i++)
        for (int sealed = 0; sealed <= 1 && rc == 0; sealed++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/seg6-%s.%s", g->out, seg[i].name,
                     sealed ? "payload" : "stored");
            FILE *f = fopen(path, "wb");
            if (f == NULL) {
                perror(path);
                rc = -1;
                break;
            }
            uint8_t head[2] = {seg[i].sel, (uint8_t)sealed};
            size_t skip = sealed ? 20 : 0;
            int ok = fwrite(head, 1, 2, f) == 2 &&
                     fwrite(seg[i].b->data + skip, 1, seg[i].b->len - skip,
                            f) == seg[i].b->len - skip;
            if (fclose(f) != 0 || !ok) {
                perror(path);
                rc = -1;
            }
        }
    fuzz_prelude_free(&p);
    return rc;
}

static int emit(void *ud, const char *part, const void *data, size_t len)
{
    const gen *g = ud;
    if (len < 20)
        return TW_ERR;
    /* the whole stored value once (the header checks), payloads twice */
    if (write_seed(g, part, 1, data, len) != TW_OK ||
        (strcmp(g->when, "end") == 0 &&
         write_seed(g, part, 0, data, len) != TW_OK))
        return TW_ERR;
    return TW_OK;
}

static int ingest(void *ud, tw_batch *b)
{
    gen *g = ud;
    return tw_job_ingest(g->job, b);
}

static int remove_entry(const char *path, const struct stat *st, int type,
                        struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

static void on_error(void *ud, const char *path, uint64_t line,
                     const char *reason)
{
    (void)ud;
    fprintf(stderr, "%s:%llu: %s\n", path, (unsigned long long)line, reason);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    char err[1024];
    char dir[] = "/tmp/tw_corpus_state.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char run[sizeof(dir) + 8];
    snprintf(run, sizeof(run), "%s/run", dir);
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = run;
    o.preset = "low_gpu";
    o.nodes = 1;
    o.duration_s = 60;
    o.interval_ms = 5000;
    o.framework = 1;
    o.seed = 15;
    if (tw_synth_opts_resolve(&o, err, sizeof(err)) != TW_OK ||
        tw_synth_write(&o, NULL, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "synth: %s\n", err);
        return 1;
    }
    fuzz_state_setup su;
    if (fuzz_state_setup_init(&su) != 0)
        return 1;
    gen g = {.out = argv[1], .su = &su};
    if (tw_job_new(FUZZ_STATE_JOB, &su.cfg, su.reg, su.specs, su.nspecs, &g.job,
                   err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "job: %s\n", err);
        return 1;
    }
    tw_folder *f = NULL;
    if (tw_folder_list(run, &f, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "list: %s\n", err);
        return 1;
    }
    tw_trace_state *ts = tw_trace_state_new();
    tw_reader_stats st;
    memset(&st, 0, sizeof(st));
    int rc = 0;
    for (size_t i = 0; i < f->nfiles && rc == 0; i++) {
        if (tw_folder_read_file(&f->files[i], FUZZ_STATE_JOB, ts, ingest, &g,
                                on_error, NULL, &st) != TW_OK)
            rc = 1;
        if (i == f->nfiles / 2) {
            g.when = "mid";
            if (tw_job_save(g.job, 0, emit, &g, err, sizeof(err)) != TW_OK)
                rc = 1;
        }
    }
    if (rc == 0 && tw_job_finish(g.job, 0) != TW_OK)
        rc = 1;
    g.when = "end";
    if (rc == 0 && tw_job_save(g.job, 0, emit, &g, err, sizeof(err)) != TW_OK)
        rc = 1;
    if (rc == 0 && write_segment_seeds(&g) != 0)
        rc = 1;
    if (rc != 0)
        fprintf(stderr, "corpus_gen_state: failed (%s)\n", err);
    tw_trace_state_free(ts);
    tw_folder_free(f);
    tw_job_free(g.job);
    tw_registry_free(su.reg);
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "corpus_gen_state: could not remove %s\n", dir);
    return rc;
}
