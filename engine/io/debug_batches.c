/*
 * debug_batches.c - debug_batches.h: the folder reader's tensors grouped
 * into batches, one per (worker, step).
 */
#include <stdio.h>
#include <string.h>

#include "debug_batches.h"

typedef struct grouping {
    const char *job;
    tw_batch_sink_fn sink;
    void *ud;
    tw_debug_error_fn on_error;
    void *errud;
    tw_batch *cur;
    size_t cur_cap;
    tw_debug_summary *sum;
    int oom, sink_failed;
} grouping;

static int in_collection(const tw_tensor *t, const char *name)
{
    for (uint32_t i = 0; i < t->ncollections; i++)
        if (strcmp(t->collections[i], name) == 0)
            return 1;
    return 0;
}

static void note(tw_debug_summary *s, const tw_tensor *t)
{
    int loss = in_collection(t, "losses");
    s->losses |= loss;
    s->eval_losses |= loss && t->mode == TW_MODE_EVAL;
    s->gradients |= in_collection(t, "gradients");
    s->weights |= in_collection(t, "weights");
    s->relu_output |= in_collection(t, "relu_output");
    int image = in_collection(t, "input_image");
    for (uint32_t i = 0; i < t->nreductions; i++) {
        s->update_l2 |= strcmp(t->reductions[i].op, "update_l2") == 0;
        s->input_images |=
            image && strcmp(t->reductions[i].op, "channel_count") == 0;
    }
    if (s->first_us == 0 || t->wall_us < s->first_us)
        s->first_us = t->wall_us;
    if (t->wall_us > s->last_us)
        s->last_us = t->wall_us;
}

static int flush(grouping *g)
{
    if (g->cur == NULL)
        return TW_OK;
    tw_batch *b = g->cur;
    g->cur = NULL;
    g->sum->batches++;
    if (g->sink(g->ud, b) != TW_OK) {
        g->sink_failed = 1;
        return TW_ERR;
    }
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
    grouping *g = ud;
    tw_batch *b = g->cur;
    if (b != NULL && (strcmp(b->node, t->node) != 0 ||
                      b->tensors[b->ntensors - 1].step != t->step)) {
        if (flush(g) != TW_OK)
            return 1;
        b = NULL;
    }
    if (b == NULL) {
        if ((b = g->cur = tw_batch_new()) == NULL)
            goto oom;
        b->job = tw_arena_strdup(&b->arena, g->job);
        b->node = tw_arena_strdup(&b->arena, t->node);
        b->seq = g->sum->batches + 1;
        g->cur_cap = 64;
        b->tensors = tw_arena_alloc(&b->arena, g->cur_cap * sizeof(tw_tensor));
        if (b->job == NULL || b->node == NULL || b->tensors == NULL)
            goto oom;
    }
    if (b->ntensors == g->cur_cap) { /* arena memory: copy to a larger one */
        tw_tensor *v =
            tw_arena_alloc(&b->arena, 2 * g->cur_cap * sizeof(tw_tensor));
        if (v == NULL)
            goto oom;
        memcpy(v, b->tensors, b->ntensors * sizeof(tw_tensor));
        b->tensors = v;
        g->cur_cap *= 2;
    }
    if (copy_tensor(b, &b->tensors[b->ntensors], t) != TW_OK)
        goto oom;
    b->ntensors++;
    note(g->sum, t);
    return 0;
oom:
    g->oom = 1;
    return 1;
}

static void forward_error(void *ud, const char *msg)
{
    grouping *g = ud;
    if (g->on_error != NULL)
        g->on_error(g->errud, msg);
}

int tw_debug_folder_batches(const char *dir, const char *job,
                            tw_batch_sink_fn sink, void *ud,
                            tw_debug_error_fn on_error, void *errud,
                            tw_debug_summary *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    grouping g = {.job = job,
                  .sink = sink,
                  .ud = ud,
                  .on_error = on_error,
                  .errud = errud,
                  .sum = out};
    int rc = tw_debug_folder_read(dir, NULL, on_tensor, forward_error, &g,
                                  &out->counts, err, errlen);
    if (rc == TW_OK && !g.oom && !g.sink_failed)
        rc = flush(&g);
    tw_batch_free(g.cur);
    if (g.oom) {
        snprintf(err, errlen, "out of memory reading the tensors of %s", dir);
        return TW_ERR;
    }
    if (g.sink_failed) {
        snprintf(err, errlen, "stopped while sending the tensors of %s", dir);
        return TW_ERR;
    }
    return rc;
}
