/*
 * sample_pack.h - a batch's samples in the compact form of checkpoints
 * (job_state.c, "chunks" of version 4 and later). Per sample:
 *   uv header = series << 3 | has_flags << 2 | same_ts << 1 | hundredths
 *   the ts's 8 bytes, unless the bits equal the previous sample's
 *   the value as a zigzag varint of hundredths (k with k / 100.0 equal
 *     to it bit for bit) or as its 8 bytes
 *   uv flags, if has_flags
 * With delta_series the header's series is the zigzag difference from the
 * previous sample's (an agent's batch lists its series in id order: one
 * byte). An agent's percentages take 2-4 bytes a sample instead of the
 * 24 of a tw_sample, so segmented jobs keep buffered batches packed
 * (job.c) and a checkpoint copies the bytes (job_state.c).
 *
 * A cursor carries the previous sample between calls; start each batch
 * with a zeroed one.
 */
#ifndef TW_SAMPLE_PACK_H
#define TW_SAMPLE_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_codec.h"
#include "trainwatch/plugin.h"

typedef struct tw_sample_cursor {
    uint64_t prev_ts_bits;
    uint64_t prev_series;
    int delta_series;
} tw_sample_cursor;

static inline void tw_sample_cursor_init(tw_sample_cursor *c, int delta_series)
{
    c->prev_ts_bits = 0;
    c->prev_series = 0;
    c->delta_series = delta_series;
}

/* Appends one sample (w->failed on out of memory). */
void tw_sample_pack(tw_ckw *w, tw_sample_cursor *c, const tw_sample *s);

/* Reads one sample into *out. Returns NULL, or a static message for a
 * series id >= nseries or flags over 32 bits; syntax problems (truncated,
 * overlong varints) are left in r->why and return "malformed". */
const char *tw_sample_unpack(tw_ckr *r, tw_sample_cursor *c, size_t nseries,
                             tw_sample *out);

/* Reads n samples into out (NULL: only checks them); as tw_sample_unpack. */
const char *tw_sample_unpack_n(tw_ckr *r, size_t n, int delta_series,
                               size_t nseries, tw_sample *out);

#endif
