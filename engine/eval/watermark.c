/* watermark.c - incremental watermark over a min-heap (watermark.h). */
#include "watermark.h"

#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"
#include "tw_assert.h"

void tw_watermark_init(tw_watermark *w, int64_t idle_us)
{
    memset(w, 0, sizeof(*w));
    w->idle_us = idle_us;
    w->newest = INT64_MIN;
}

void tw_watermark_free(tw_watermark *w)
{
    free(w->val);
    free(w->pos);
    free(w->heap);
    tw_watermark_init(w, w->idle_us);
}

static int tw_watermark_grow(tw_watermark *w, size_t need)
{
    if (need <= w->cap)
        return TW_OK;
    size_t cap = w->cap ? w->cap : 16;
    while (cap < need)
        cap *= 2;
    int64_t *val = realloc(w->val, cap * sizeof(*val));
    if (val == NULL)
        return TW_ERR;
    w->val = val;
    uint32_t *pos = realloc(w->pos, cap * sizeof(*pos));
    if (pos == NULL)
        return TW_ERR;
    w->pos = pos;
    uint32_t *heap = realloc(w->heap, cap * sizeof(*heap));
    if (heap == NULL)
        return TW_ERR;
    w->heap = heap;
    memset(w->val + w->cap, 0, (cap - w->cap) * sizeof(*val));
    memset(w->pos + w->cap, 0, (cap - w->cap) * sizeof(*pos));
    w->cap = cap;
    return TW_OK;
}

static void tw_watermark_place(tw_watermark *w, size_t at, uint32_t idx)
{
    w->heap[at] = idx;
    w->pos[idx] = (uint32_t)at + 1;
}

static void tw_watermark_up(tw_watermark *w, size_t at)
{
    uint32_t idx = w->heap[at];
    while (at > 0) {
        size_t parent = (at - 1) / 2;
        if (w->val[w->heap[parent]] <= w->val[idx])
            break;
        tw_watermark_place(w, at, w->heap[parent]);
        at = parent;
    }
    tw_watermark_place(w, at, idx);
}

static void tw_watermark_down(tw_watermark *w, size_t at)
{
    uint32_t idx = w->heap[at];
    for (;;) {
        size_t child = 2 * at + 1;
        if (child >= w->nheap)
            break;
        if (child + 1 < w->nheap &&
            w->val[w->heap[child + 1]] < w->val[w->heap[child]])
            child++;
        if (w->val[w->heap[child]] >= w->val[idx])
            break;
        tw_watermark_place(w, at, w->heap[child]);
        at = child;
    }
    tw_watermark_place(w, at, idx);
}

int tw_watermark_set(tw_watermark *w, size_t idx, int64_t t)
{
    TW_ASSERT(t > 0);
    if (idx >= UINT32_MAX || tw_watermark_grow(w, idx + 1) != TW_OK)
        return TW_ERR;
    if (idx >= w->n)
        w->n = idx + 1;
    if (t <= w->val[idx])
        return TW_OK;
    w->val[idx] = t;
    if (t > w->newest)
        w->newest = t;
    if (w->pos[idx] != 0) {
        tw_watermark_down(w, w->pos[idx] - 1); /* its key grew */
    } else {
        w->heap[w->nheap] = (uint32_t)idx;
        w->nheap++;
        tw_watermark_up(w, w->nheap - 1);
    }
    return TW_OK;
}

int64_t tw_watermark_get(tw_watermark *w)
{
    /* Evict the idle ones from the top; they return with a newer time. */
    while (w->nheap > 0 && w->newest - w->val[w->heap[0]] > w->idle_us) {
        w->pos[w->heap[0]] = 0;
        w->nheap--;
        if (w->nheap > 0) {
            tw_watermark_place(w, 0, w->heap[w->nheap]);
            tw_watermark_down(w, 0);
        }
    }
    return w->nheap > 0 ? w->val[w->heap[0]] : INT64_MAX;
}
