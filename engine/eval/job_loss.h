/*
 * job_loss.h - what a job is known to be missing: the record behind its
 * `partial` mark. Three kinds of evidence:
 *  - seq: a node's batches whose sequence numbers never arrived (a gap in
 *    the per-node sequence that outlived the de-duplication window, or is
 *    still open when the job finishes);
 *  - offsets: Kafka offsets of the job's partition that were never read
 *    while the job was in flight (the log was truncated under the consumer,
 *    or its position was reset);
 *  - joined: the job was first met mid-stream (neither its JOB_START nor
 *    sequence 1) with nothing proving that a previous owner finished it,
 *    so its beginning was lost.
 * Ranges are inclusive. At most TW_LOSS_MAX_RANGES are kept (the first
 * ones); the rest are counted in `more` and summed in `missing`.
 *
 * Ownership: the record owns its range strings; tw_job_loss_free frees
 * them. Not thread-safe (one job, one thread).
 */
#ifndef TW_JOB_LOSS_H
#define TW_JOB_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_codec.h"
#include "json_writer.h"

#define TW_LOSS_MAX_RANGES 64

typedef enum tw_loss_kind {
    TW_LOSS_SEQ = 1,
    TW_LOSS_OFFSETS = 2,
    TW_LOSS_JOINED = 3,
} tw_loss_kind;

typedef struct tw_loss_range {
    tw_loss_kind kind;
    char *where; /* seq: the node; offsets and joined: the partition */
    uint64_t from, to;
} tw_loss_range;

typedef struct tw_job_loss {
    tw_loss_range *ranges;
    size_t n, cap;
    uint64_t more;    /* ranges beyond TW_LOSS_MAX_RANGES, not kept */
    uint64_t missing; /* batches (seq) plus offsets (offsets, joined) */
} tw_job_loss;

void tw_job_loss_init(tw_job_loss *l);
void tw_job_loss_free(tw_job_loss *l);

/* Records one range and logs it (WARN, naming job and where) while fewer
 * than TW_LOSS_MAX_RANGES are kept. TW_ERR on out-of-memory. */
int tw_job_loss_add(tw_job_loss *l, const char *job, tw_loss_kind kind,
                    const char *where, uint64_t from, uint64_t to);

static inline int tw_job_loss_any(const tw_job_loss *l)
{
    return l->n > 0 || l->more > 0;
}

const char *tw_loss_kind_name(tw_loss_kind k);

/* "data_loss": {"missing": N, "ranges": [{"kind","where","from","to"}...],
 * "more_ranges": M} as the value of a key the caller wrote. */
void tw_job_loss_json(const tw_job_loss *l, tw_json *j);

/* Checkpoint encoding (ckpt_codec.h): uv n, per range u8 kind, str where,
 * uv from, uv to; uv more; uv missing. */
void tw_job_loss_save(const tw_job_loss *l, tw_ckw *w);
/* Reads what tw_job_loss_save wrote into a fresh record (apply = 0: only
 * checks). Problems are left in r->why; TW_ERR only on out-of-memory. */
int tw_job_loss_restore(tw_job_loss *l, tw_ckr *r, int apply);

#endif /* TW_JOB_LOSS_H */
