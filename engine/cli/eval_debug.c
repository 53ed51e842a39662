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

#include "eval_debug.h"
#include "reader_debug.h"

/* What the folder holds, for choosing the default rules. */
typedef struct present {
    int losses, gradients, weights, relu_output, eval_losses, update_l2;
} present;

typedef struct collect {
    const char *job;
    tw_batch **batches;
    size_t n, cap;
    tw_batch *cur; /* the (worker, step) being filled */
    size_t cur_cap;
    uint64_t seq;
    present seen;
    int64_t first_us, last_us;
    int quiet;
    uint64_t errors;
    int oom;
} collect;

static int in_collection(const tw_tensor *t, const char *name)
{
    for (uint32_t i = 0; i < t->ncollections; i++)
        if (strcmp(t->collections[i], name) == 0)
            return 1;
    return 0;
}

static void note_present(present *p, const tw_tensor *t)
{
    int loss = in_collection(t, "losses");
    p->losses |= loss;
    p->eval_losses |= loss && t->mode == TW_MODE_EVAL;
    p->gradients |= in_collection(t, "gradients");
    p->weights |= in_collection(t, "weights");
    p->relu_output |= in_collection(t, "relu_output");
    for (uint32_t i = 0; i < t->nreductions; i++)
        p->update_l2 |= strcmp(t->reductions[i].op, "update_l2") == 0;
}

static int flush_batch(collect *c)
{
    if (c->cur == NULL)
        return TW_OK;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        tw_batch **v = realloc(c->batches, cap * sizeof(*v));
        if (v == NULL)
            return TW_ERR;
        c->batches = v;
        c->cap = cap;
    }
    c->batches[c->n++] = c->cur;
    c->cur = NULL;
    return TW_OK;
}

/* A deep copy of t into b's arena (t's strings and arrays live only
 * during the reader's callback). */
static int copy_tensor(tw_batch *b, tw_tensor *dst, const tw_tensor *t)
{
    tw_arena *a = &b->arena;
    *dst = *t;
    dst->node = b->node;
    dst->name = tw_arena_strdup(a, t->name);
    dst->dtype = tw_arena_strdup(a, t->dtype ? t->dtype : "");
    const char **colls =
        tw_arena_alloc(a, (t->ncollections + 1) * sizeof(*colls));
    int64_t *shape = tw_arena_alloc(a, (t->nshape + 1) * sizeof(*shape));
    tw_tensor_reduction *red =
        tw_arena_alloc(a, (t->nreductions + 1) * sizeof(*red));
    double *raw = tw_arena_alloc(a, (t->nraw + 1) * sizeof(*raw));
    if (dst->name == NULL || dst->dtype == NULL || colls == NULL ||
        shape == NULL || red == NULL || raw == NULL)
        return TW_ERR;
    for (uint32_t i = 0; i < t->ncollections; i++)
        if ((colls[i] = tw_arena_strdup(a, t->collections[i])) == NULL)
            return TW_ERR;
    for (uint32_t i = 0; i < t->nreductions; i++) {
        red[i].op = tw_arena_strdup(a, t->reductions[i].op);
        red[i].value = t->reductions[i].value;
        if (red[i].op == NULL)
            return TW_ERR;
    }
    if (t->nshape > 0)
        memcpy(shape, t->shape, t->nshape * sizeof(*shape));
    if (t->nraw > 0)
        memcpy(raw, t->raw, t->nraw * sizeof(*raw));
    dst->collections = colls;
    dst->shape = shape;
    dst->reductions = red;
    dst->raw = t->nraw > 0 ? raw : NULL;
    return TW_OK;
}

static int on_tensor(void *ud, const tw_tensor *t)
{
    collect *c = ud;
    tw_batch *b = c->cur;
    if (b != NULL && (strcmp(b->node, t->node) != 0 ||
                      b->tensors[b->ntensors - 1].step != t->step)) {
        if (flush_batch(c) != TW_OK)
            goto oom;
        b = NULL;
    }
    if (b == NULL) {
        if ((b = c->cur = tw_batch_new()) == NULL)
            goto oom;
        b->job = c->job;
        b->node = tw_arena_strdup(&b->arena, t->node);
        b->seq = ++c->seq;
        c->cur_cap = 64;
        b->tensors = tw_arena_alloc(&b->arena, c->cur_cap * sizeof(tw_tensor));
        if (b->node == NULL || b->tensors == NULL)
            goto oom;
    }
    if (b->ntensors == c->cur_cap) { /* arena memory: copy to a larger one */
        tw_tensor *v =
            tw_arena_alloc(&b->arena, 2 * c->cur_cap * sizeof(tw_tensor));
        if (v == NULL)
            goto oom;
        memcpy(v, b->tensors, b->ntensors * sizeof(tw_tensor));
        b->tensors = v;
        c->cur_cap *= 2;
    }
    if (copy_tensor(b, &b->tensors[b->ntensors], t) != TW_OK)
        goto oom;
    b->ntensors++;
    note_present(&c->seen, t);
    if (c->first_us == 0 || t->wall_us < c->first_us)
        c->first_us = t->wall_us;
    if (t->wall_us > c->last_us)
        c->last_us = t->wall_us;
    return 0;
oom:
    c->oom = 1;
    return 1;
}

static void on_error(void *ud, const char *msg)
{
    collect *c = ud;
    c->errors++;
    if (!c->quiet)
        fprintf(stderr, "eval: bad input: %s\n", msg);
}

/* The default debugging rules: those whose tensors are present. */
static size_t default_rules(const present *p, tw_rule_spec *specs, size_t max,
                            char *skipped, size_t skiplen)
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
    collect c = {.job = a->id, .quiet = a->quiet};
    tw_debug_counts counts;
    char err[1024];
    int rc = TW_ERR;
    tw_job *job = NULL;
    if (tw_debug_folder_read(a->dir, NULL, on_tensor, on_error, &c, &counts,
                             err, sizeof(err)) != TW_OK ||
        flush_batch(&c) != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s\n",
                c.oom ? "out of memory reading the tensors" : err);
        goto out;
    }
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
        nuse = default_rules(&c.seen, specs, 16, skipped, sizeof(skipped));
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
    tw_job_set_first_timestamp(job, c.first_us);
    for (size_t i = 0; i < c.n; i++) {
        tw_batch *b = c.batches[i];
        c.batches[i] = NULL;
        if (tw_job_ingest(job, b) != TW_OK) {
            fprintf(stderr, "trainwatch eval: out of memory\n");
            goto out;
        }
    }
    if (tw_job_finish(job, c.last_us) != TW_OK) {
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
    tw_batch_free(c.cur);
    free(c.batches);
    return rc;
}
