/*
 * fuzz_state.h - what fuzz_state.c and corpus_gen_state.c share: the job
 * whose checkpoint parts are fuzzed (every built-in rule on its own, in the
 * registry's order) and the input layout
 *
 *   u8 part selector (0: "core", 1-252: "rule.<(k-1) mod rule count>",
 *            253 "windows", 254 "dict.1", 255 "chunks.1": segmented
 *            parts, restored after the prelude below)
 *   u8 mode: bit 0 set: the rest is a payload that the target seals with a
 *            correct header and CRC (version 1 + bits 1-2; version 5 for
 *            the segmented parts), so mutations reach the payload parsers;
 *            clear: the rest is the whole stored value
 *   bytes
 */
#ifndef TW_FUZZ_STATE_H
#define TW_FUZZ_STATE_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "batch.h"
#include "job.h"

#define FUZZ_STATE_JOB "fuzz-job"
#define FUZZ_STATE_MAX_RULES 64

typedef struct fuzz_state_setup {
    tw_registry *reg;
    tw_job_config cfg;
    tw_rule_spec specs[FUZZ_STATE_MAX_RULES];
    size_t nspecs;
    size_t filler; /* the spec cheapest to create (fuzz_state.c) */
} fuzz_state_setup;

/* 0 when the registry found at least one built-in rule. */
static inline int fuzz_state_setup_init(fuzz_state_setup *su)
{
    su->reg = tw_registry_new();
    if (su->reg == NULL)
        return -1;
    tw_job_config_default(&su->cfg);
    const char *const *names;
    size_t n = tw_registry_list(su->reg, &names);
    su->nspecs = 0;
    su->filler = 0;
    /* Debugging rules that need a tensor selection get one: every rule
     * must be creatable from this table alone. */
    static const char *const sel_key[] = {"collection_names"};
    static const char *const sel_val[] = {"weights"};
    for (size_t i = 0; i < n && su->nspecs < FUZZ_STATE_MAX_RULES; i++) {
        tw_rule_spec s = {0};
        s.rule = names[i];
        const tw_plugin *p;
        char why[256];
        if (tw_registry_find(su->reg, names[i], &p, why, sizeof(why)) ==
            TW_OK) {
            const tw_rule_descriptor *d = tw_plugin_descriptor(p);
            for (size_t k = 0; k < d->nparams; k++)
                if (strcmp(d->params[k].name, sel_key[0]) == 0) {
                    s.keys = sel_key;
                    s.values = sel_val;
                    s.nparams = 1;
                }
        }
        if (strcmp(names[i], "MaxInitializationTime") == 0)
            su->filler = su->nspecs; /* small state, two parameters */
        su->specs[su->nspecs++] = s;
    }
    if (su->nspecs == 0) {
        fprintf(stderr, "fuzz_state: no built-in rules found; set "
                        "TRAINWATCH_RULES_DIR\n");
        return -1;
    }
    return 0;
}

/* ---- segmented parts (job.h): the prelude --------------------------------
 * A segmented job (the filler rule everywhere) fed one batch of one node
 * with FUZZ_PRELUDE_SERIES series, saved whole: "core" (next seq 2),
 * "dict.1", "state.1.0" (the windows and rules snapshot in one slice) and
 * "chunks.1". A fuzzed part replaces its own in that set; the job is then
 * finished restoring (tw_job_restore_end) and saved. */
#define FUZZ_PRELUDE_SERIES 64
#define FUZZ_SEL_STATE 253
#define FUZZ_SEL_DICT 254
#define FUZZ_SEL_CHUNKS 255

typedef struct fuzz_blob {
    uint8_t *data;
    size_t len;
} fuzz_blob;

typedef struct fuzz_prelude {
    fuzz_blob core, dict, state, chunks;
} fuzz_prelude;

static inline int fuzz_prelude_keep(void *ud, const char *part,
                                    const void *data, size_t len)
{
    fuzz_prelude *p = ud;
    fuzz_blob *b = strcmp(part, "core") == 0        ? &p->core
                   : strcmp(part, "dict.1") == 0    ? &p->dict
                   : strcmp(part, "state.1.0") == 0 ? &p->state
                   : strcmp(part, "chunks.1") == 0  ? &p->chunks
                                                    : NULL;
    if (b == NULL || data == NULL)
        return TW_OK; /* the rules */
    free(b->data);
    if ((b->data = malloc(len ? len : 1)) == NULL)
        return TW_ERR;
    memcpy(b->data, data, len);
    b->len = len;
    return TW_OK;
}

static inline void fuzz_prelude_free(fuzz_prelude *p)
{
    free(p->core.data);
    free(p->dict.data);
    free(p->state.data);
    free(p->chunks.data);
}

/* A fresh segmented job with the filler rule everywhere; NULL: abort. */
static inline tw_job *fuzz_state_segmented_job(fuzz_state_setup *su)
{
    tw_rule_spec specs[FUZZ_STATE_MAX_RULES];
    for (size_t i = 0; i < su->nspecs; i++)
        specs[i] = su->specs[su->filler];
    tw_job *j = NULL;
    char err[1024];
    if (tw_job_new(FUZZ_STATE_JOB, &su->cfg, su->reg, specs, su->nspecs, &j,
                   err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "fuzz_state: tw_job_new: %s\n", err);
        return NULL;
    }
    tw_job_set_segmented(j);
    return j;
}

/* 0 when *p holds all four parts. */
static inline int fuzz_state_prelude(fuzz_state_setup *su, fuzz_prelude *p)
{
    static const char *const types[] = {"gpu", "cpu", "memory", "i/o",
                                        "network"};
    static const char *const dims[] = {"GPUUtilization", "CPUUtilization",
                                       "MemoryUsedPercent", "ReadBytes",
                                       "SentBytes"};
    memset(p, 0, sizeof(*p));
    tw_job *j = fuzz_state_segmented_job(su);
    tw_batch *b = tw_batch_new();
    if (j == NULL || b == NULL)
        goto fail;
    b->job = tw_arena_strdup(&b->arena, FUZZ_STATE_JOB);
    b->node = tw_arena_strdup(&b->arena, "n0");
    b->seq = 1;
    b->series = tw_arena_alloc(&b->arena,
                               FUZZ_PRELUDE_SERIES * sizeof(tw_batch_series));
    b->samples =
        tw_arena_alloc(&b->arena, FUZZ_PRELUDE_SERIES * sizeof(tw_sample));
    if (b->job == NULL || b->node == NULL || b->series == NULL ||
        b->samples == NULL)
        goto fail;
    for (size_t k = 0; k < FUZZ_PRELUDE_SERIES; k++) {
        char name[16];
        snprintf(name, sizeof(name), "x%zu", k);
        b->series[k] = (tw_batch_series){
            types[k % 5], tw_arena_strdup(&b->arena, name), dims[k % 5]};
        b->samples[k] = (tw_sample){.ts = 1.6e9 + (double)(k % 3),
                                    .value = (double)k * 1.25 + 0.001 * (k % 2),
                                    .series = (uint32_t)k};
    }
    b->nseries = b->nsamples = FUZZ_PRELUDE_SERIES;
    char err[1024];
    tw_batch *in = b;
    b = NULL;
    if (tw_job_ingest(j, in) != TW_OK ||
        tw_job_save(j, 0, fuzz_prelude_keep, p, err, sizeof(err)) != TW_OK ||
        p->core.data == NULL || p->dict.data == NULL || p->state.data == NULL ||
        p->chunks.data == NULL)
        goto fail;
    tw_job_free(j);
    return 0;
fail:
    fprintf(stderr, "fuzz_state: cannot build the segmented prelude\n");
    tw_batch_free(b);
    tw_job_free(j);
    fuzz_prelude_free(p);
    return -1;
}

#endif /* TW_FUZZ_STATE_H */
