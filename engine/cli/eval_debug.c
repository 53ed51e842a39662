/*
 * eval_debug.c - `trainwatch eval DIR` of a legacy debug-output folder
 * (reader_debug.h): the folder's tensors, one batch per (worker, step),
 * through a job with the debugging rules, as the streaming engine runs
 * them. With --rules the configured rules run; without, the built-in
 * debugging rules whose tensors are present, with their defaults (as a
 * profiler folder gets ProfilerReport), and each rule left out is named
 * with what it lacked.
 *
 * Ownership: the batches are the job's once ingested; the rule specs and
 * their parameter arrays are static or live in the caller's eval_debug.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug_batches.h"
#include "eval_debug.h"

/* The folder's batches, kept until the rules are known. */
typedef struct collect {
    tw_batch **batches;
    size_t n, cap;
    int quiet;
} collect;

static int keep_batch(void *ud, tw_batch *b)
{
    collect *c = ud;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        tw_batch **v = realloc(c->batches, cap * sizeof(*v));
        if (v == NULL) {
            tw_batch_free(b);
            return TW_ERR;
        }
        c->batches = v;
        c->cap = cap;
    }
    c->batches[c->n++] = b;
    return TW_OK;
}

static void on_error(void *ud, const char *msg)
{
    const collect *c = ud;
    if (!c->quiet)
        fprintf(stderr, "eval: bad input: %s\n", msg);
}

/* The default debugging rules: those whose tensors are present. */
static size_t default_rules(const tw_debug_summary *p, tw_rule_spec *specs,
                            size_t max, char *skipped, size_t skiplen)
{
    static const char *const unchanged_keys[] = {"collection_names"};
    static const char *const unchanged_vals[] = {"losses,weights"};
    struct {
        const char *rule;
        int have;
        const char *lacks;
    } table[] = {
        {"ExplodingTensor", 1, NULL},
        {"LossNotDecreasing", p->losses, "no losses"},
        {"VanishingGradient", p->gradients, "no gradients"},
        {"UnchangedTensor", p->losses || p->weights, "no losses or weights"},
        {"WeightUpdateRatio", p->weights && p->update_l2,
         "no weights saved at two steps"},
        {"DeadRelu", p->relu_output, "no relu_output"},
        {"Overfit", p->eval_losses, "no losses in EVAL mode"},
        {"Overtraining", p->eval_losses, "no losses in EVAL mode"},
        {"CheckInputImages", p->input_images,
         "no input_image tensor of 2 to 64 channels"},
    };
    size_t n = 0, at = 0;
    skipped[0] = '\0';
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (!table[i].have) {
            int w = snprintf(skipped + at, skiplen - at, "%s%s (%s)",
                             at ? ", " : "", table[i].rule, table[i].lacks);
            if (w > 0 && (size_t)w < skiplen - at)
                at += (size_t)w;
            continue;
        }
        if (n == max)
            break;
        specs[n] = (tw_rule_spec){.rule = table[i].rule};
        if (strcmp(table[i].rule, "UnchangedTensor") == 0) {
            specs[n].keys = unchanged_keys;
            specs[n].values = unchanged_vals;
            specs[n].nparams = 1;
        }
        n++;
    }
    return n;
}

int tw_eval_debug_job(const tw_eval_debug_args *a, tw_job **out,
                      tw_reader_stats *rs)
{
    *out = NULL;
    memset(rs, 0, sizeof(*rs));
    collect c = {.quiet = a->quiet};
    tw_debug_summary sum;
    char err[1024];
    int rc = TW_ERR;
    tw_job *job = NULL;
    if (tw_debug_folder_batches(a->dir, a->id, keep_batch, &c, on_error, &c,
                                &sum, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s\n", err);
        goto out;
    }
    const tw_debug_counts counts = sum.counts;
    rs->files = counts.index_files;
    rs->bad_files = counts.bad_files;
    rs->lines = counts.records;
    rs->bad_lines = counts.bad_records;
    if (c.n == 0) {
        fprintf(stderr,
                "trainwatch eval: '%s' is a debug-output folder without a "
                "readable tensor\n",
                a->dir);
        goto out;
    }
    tw_rule_spec specs[16];
    const tw_rule_spec *use = a->rules;
    size_t nuse = a->nrules;
    if (!a->have_rules_file) {
        char skipped[1024];
        nuse = default_rules(&sum, specs, 16, skipped, sizeof(skipped));
        use = specs;
        if (!a->quiet) {
            fprintf(stderr, "eval: debug-output folder: %zu tensors, ",
                    (size_t)counts.tensors);
            for (size_t i = 0; i < nuse; i++)
                fprintf(stderr, "%s%s", i ? ", " : "the debugging rules ",
                        specs[i].rule);
            fprintf(stderr, "%s%s\n", skipped[0] ? "; skipped: " : "", skipped);
        }
    }
    tw_job_config jc = *a->jc;
    jc.external_watermark = 1;
    if (tw_job_new(a->id, &jc, a->reg, use, nuse, &job, err, sizeof(err)) !=
        TW_OK) {
        fprintf(stderr, "trainwatch eval: %s\n", err);
        goto out;
    }
    tw_job_set_first_timestamp(job, sum.first_us);
    for (size_t i = 0; i < c.n; i++) {
        tw_batch *b = c.batches[i];
        c.batches[i] = NULL;
        if (tw_job_ingest(job, b) != TW_OK) {
            fprintf(stderr, "trainwatch eval: out of memory\n");
            goto out;
        }
    }
    if (tw_job_finish(job, sum.last_us) != TW_OK) {
        fprintf(stderr, "trainwatch eval: out of memory\n");
        goto out;
    }
    *out = job;
    job = NULL;
    rc = TW_OK;
out:
    tw_job_free(job);
    for (size_t i = 0; i < c.n; i++)
        tw_batch_free(c.batches[i]);
    free(c.batches);
    return rc;
}
