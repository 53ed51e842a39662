/*
 * watermark.h - a job's streaming watermark, kept incrementally: the
 * smallest newest event time among its producers that are not idle, i.e.
 * within `idle_us` of the newest time of all (job.h, "Time").
 *
 * Recomputing it from every producer at every batch made a job's cost
 * grow with the square of its nodes. Here the producers' newest times sit
 * in a min-heap; a producer found idle at its top is evicted and comes
 * back with its next newer time. Newest times only grow, and so does the
 * newest of all, so each update costs O(log producers), amortized.
 *
 * Producers are named by a dense index (the job's producer array); a
 * producer that never had a time (sequence-only entries) is not in it.
 * Ownership: the watermark owns its arrays.
 */
#ifndef TW_WATERMARK_H
#define TW_WATERMARK_H

#include <stddef.h>
#include <stdint.h>

typedef struct tw_watermark {
    int64_t idle_us;
    int64_t newest; /* newest time of all; INT64_MIN before the first */
    int64_t *val;   /* by index: newest time; 0 = none */
    uint32_t *pos;  /* by index: heap position + 1; 0 = not in the heap */
    uint32_t *heap; /* indexes, min-heap by val */
    size_t n, cap;  /* indexes known */
    size_t nheap;
} tw_watermark;

void tw_watermark_init(tw_watermark *w, int64_t idle_us);
void tw_watermark_free(tw_watermark *w);

/* Producer idx's newest time is now t (t > 0, and not older than the
 * last t given for idx: older ones are ignored). TW_ERR: out of memory. */
int tw_watermark_set(tw_watermark *w, size_t idx, int64_t t);

/* The watermark: the smallest newest time among the producers within
 * idle_us of the newest; INT64_MAX when no producer has a time. */
int64_t tw_watermark_get(tw_watermark *w);

#endif /* TW_WATERMARK_H */
