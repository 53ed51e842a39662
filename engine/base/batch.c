/* batch.c - lifetime of a tw_batch (see batch.h). */
#include "batch.h"

#include <stdlib.h>
#include <string.h>

tw_batch *tw_batch_new(void)
{
    tw_batch *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    tw_arena_init(&b->arena);
    return b;
}

void tw_batch_free(tw_batch *b)
{
    if (b == NULL)
        return;
    tw_arena_free(&b->arena);
    free(b);
}

static size_t str_share(const char *s)
{
    return s != NULL ? tw_arena_size(strlen(s) + 1) : 0;
}

/* job, node, path, seq and file time in one block of their size plus
 * `extra` bytes (reserved, not allocated) */
static tw_batch *shell(const tw_batch *b, size_t extra)
{
    size_t need = str_share(b->job) + str_share(b->node) +
                  str_share(b->file_path) + extra;
    tw_batch *c = tw_batch_new();
    if (c == NULL || tw_arena_reserve(&c->arena, need ? need : 16) != 0)
        goto oom;
    c->job = tw_arena_strdup(&c->arena, b->job);
    c->node = tw_arena_strdup(&c->arena, b->node);
    c->file_path = tw_arena_strdup(&c->arena, b->file_path);
    if ((b->job != NULL && c->job == NULL) ||
        (b->node != NULL && c->node == NULL) ||
        (b->file_path != NULL && c->file_path == NULL))
        goto oom;
    c->seq = b->seq;
    c->file_ts_us = b->file_ts_us;
    return c;
oom:
    tw_batch_free(c);
    return NULL;
}

static int samples_only(const tw_batch *b)
{
    return b->nevents == 0 && b->nmarkers == 0 && b->ntensors == 0 &&
           b->npython_profiles == 0;
}

tw_batch *tw_batch_shell_copy(const tw_batch *b, size_t extra,
                              uint8_t **extra_at)
{
    *extra_at = NULL;
    if (!samples_only(b))
        return NULL;
    tw_batch *c = shell(b, tw_arena_size(extra));
    if (c == NULL)
        return NULL;
    if (extra > 0 &&
        (*extra_at = tw_arena_alloc_uninit(&c->arena, extra)) == NULL) {
        tw_batch_free(c);
        return NULL;
    }
    return c;
}

tw_batch *tw_batch_samples_copy(const tw_batch *b)
{
    uint8_t *at;
    size_t bytes = b->nsamples * sizeof(tw_sample);
    tw_batch *c = tw_batch_shell_copy(b, bytes, &at);
    if (c == NULL)
        return NULL;
    if (bytes > 0) {
        memcpy(at, b->samples, bytes);
        c->samples = (tw_sample *)(void *)at;
    }
    c->nsamples = b->nsamples;
    return c;
}
