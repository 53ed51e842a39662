/*
 * job_internal.h - the tw_job structure and the few job.c helpers that
 * job_state.c (checkpoint/restore) needs. Not for other modules: use job.h.
 *
 * Ownership is as in job.h: the job owns its chunks (and their batches),
 * dictionary arena, producers, windows, rules and checkpoint buffer.
 */
#ifndef TW_JOB_INTERNAL_H
#define TW_JOB_INTERNAL_H

#include "arena.h"
#include "job.h"
#include "job_loss.h"
#include "strmap.h"
#include "wallclock.h"
#include "watermark.h"

/* A buffered batch and what scan assembly needs to order and select it. */
typedef struct chunk {
    tw_batch *batch;
    uint64_t arrival;
    int64_t order_ts;       /* the file's timestamp (or its minute)      */
    const char *order_name; /* system: node; framework: path or node     */
    int source;             /* framework source rank                     */
    int64_t min_ns, max_ns; /* system samples (ts in ns), if any         */
    int64_t min_start_us, max_end_us;     /* framework events, if any        */
    int64_t min_tensor_us, max_tensor_us; /* tensors' wall_us, if any    */
    uint64_t seg; /* segmented checkpoints: the "chunks.<seg>" part that
                     holds it; 0 = not saved yet (job_state.c)         */
    /* Segmented jobs buffer a samples-only batch packed (sample_pack.h,
     * series as differences): npacked samples in packed_len bytes of the
     * batch's arena, batch->nsamples 0. NULL: the samples are unpacked. */
    const uint8_t *packed;
    size_t packed_len, npacked;
    uint64_t released_by; /* retired (job_state.c): 1 + its releasing scan */
} chunk;

static inline size_t chunk_nsamples(const chunk *c)
{
    return c->packed != NULL ? c->npacked : c->batch->nsamples;
}

/* Segmented checkpoints (job_state.c): a saved "chunks.<seq>" part and how
 * many of its batches are still buffered (0: remove it at the next save),
 * and a saved "dict.<seq>" part and the first node and series it holds. */
typedef struct chunk_seg {
    uint64_t seq;
    size_t live;
    uint64_t released_by; /* 1 + the newest scan that released one of its
                             batches (0: none): a replay may need it */
} chunk_seg;

/* A scan run since the stored snapshot of the scan-fed state (deferred
 * state, job_state.c): what a restore needs to run it again over the
 * same batches. */
typedef struct pend_scan {
    uint64_t k;
    int64_t start_us, end_us;
    uint64_t cutoff; /* the job's arrivals when it ran: it saw batches
                        with a lower arrival number only */
    uint64_t nseries, nnodes;
    uint8_t start_inclusive, final;
} pend_scan;

/* Where a segmented job's stored scan-fed state (windows and the rules
 * without a wall-clock hook) is: none yet (fresh), in "state.<gen>.<i>"
 * slices, or in "windows" and "rule.<i>" parts (version 5 checkpoints). */
enum { SNAP_NONE = 0, SNAP_SLICES = 1, SNAP_LEGACY = 2 };

typedef struct dict_seg {
    uint64_t seq;
    size_t first_node, first_series;
} dict_seg;

#define SEQ_WINDOW 4096
/* Released batches a segmented job keeps for a replay (job_state.c,
 * deferred state) before it gives up and writes the state whole. */
#define TW_JOB_RETIRED_MAX 65536u

/* A producer of events (system or framework node) for the watermark. */
typedef struct producer {
    const char *name; /* owned by the job's dictionary arena */
    int64_t newest_us;
    /* Redelivery detection: the highest sequence number seen and which of
     * the SEQ_WINDOW numbers below it were seen, so batches reordered
     * within the window are accepted once each. */
    uint64_t max_seq;
    uint64_t seen[SEQ_WINDOW / 64];
    /* Series ids of this node's previous batch, by dictionary position:
     * agents send the same dictionary every time, so a string compare
     * replaces the hash lookup (owned by the job). */
    uint32_t *dict_ids;
    size_t ndict, dict_cap;
    /* Clock skew (job.h), kept on the node's "sys" (else "fw") entry and
     * not checkpointed: whole batches beyond the bound in a row, and
     * whether the node's first refused time was logged. */
    uint32_t skew_run;
    int skew_warned;
} producer;

struct tw_job {
    char *id;
    tw_job_config cfg;
    tw_registry *reg;
    tw_windows *windows;
    tw_host_ctx *host;
    tw_rule **rules;
    size_t nrules;
    tw_job_scan_fn on_scan;
    void *on_scan_ud;
    tw_job_wallclock_fn on_wallclock;
    void *on_wallclock_ud;
    /* producers' last-seen record; NULL when no rule judges on the wall
     * clock (wallclock.h) */
    tw_wallclock_tracker *wallclock;

    /* dictionary */
    tw_arena dict;        /* series strings, node names */
    tw_strmap series_ids; /* key -> series id */
    tw_series *series;
    size_t nseries, series_cap;
    tw_strmap node_ids; /* system node -> index */
    const char **nodes;
    size_t nnodes, nodes_cap;
    tw_strmap producer_ids;
    producer *producers;
    size_t nproducers, producers_cap;
    tw_watermark wm; /* over producers' newest_us (producer_newest_) */

    /* clock */
    int64_t first_us; /* F; 0 = not known yet */
    int first_fixed;
    int64_t first_candidate_us;
    int64_t latest_system_us, latest_framework_us;
    uint64_t next_scan;    /* index of the first scan not yet closed */
    int64_t next_start_us; /* continuous mode: start of the next scan */
    int64_t scan_limit_us; /* 0 = none, see tw_job_set_scan_limit */
    int started;           /* a scan has closed (F frozen) */
    int finished;
    int end_marker;
    int64_t newest_us;        /* max producer newest_us; 0 = recompute
                                 (fresh or restored job), see job.c     */
    int finish_begun;         /* tw_job_finish ran (maybe stopped): its */
    int64_t finish_latest_us; /* L, skew-checked once                 */

    /* buffered input */
    chunk *chunks;
    size_t nchunks, chunks_cap;
    uint64_t arrivals;

    /* scan assembly buffers, reused */
    tw_sample *scan_samples;
    size_t scan_samples_cap;
    tw_fw_event *scan_events;
    size_t scan_events_cap;
    tw_tensor *scan_tensors;
    size_t scan_tensors_cap;
    void *tensor_order; /* tensor sort keys (job.c), reused */
    size_t tensor_order_cap;
    chunk **order;
    size_t order_cap;

    tw_job_stats stats;
    tw_job_loss loss; /* missing input: the job's `partial` mark */

    /* checkpoint bookkeeping (job_state.c): change counters bumped by the
     * pipeline, and their values at the last successful tw_job_save */
    uint64_t core_changes, rules_changes;
    uint64_t core_saved, rules_saved;
    tw_buf *ckpt; /* reusable save buffer, owned; NULL until first save */
    tw_buf *pack; /* reusable packing buffer (buffer_tight), owned */

    /* Segmented checkpoints (tw_job_set_segmented): the dictionary, the
     * aggregator windows and the buffered batches leave "core" for parts
     * written when they change: append-only "dict.<seq>", "windows", and
     * append-only "chunks.<seq>" removed once all their batches are
     * released. Each save's new segments share one seq (from 1). */
    int segmented;
    uint64_t seg_next;  /* seq of the next save's segments     */
    uint64_t seg_tried; /* seq of a failed save's chunk segment */
    chunk_seg *csegs;   /* saved chunk segments, oldest first  */
    size_t ncsegs, csegs_cap;
    dict_seg *dsegs; /* saved dictionary segments, in order */
    size_t ndsegs, dsegs_cap;
    size_t nodes_saved, series_saved; /* dictionary entries in dsegs    */
    int windows_saved; /* a version 5 "windows" part is in the store */
    /* changes of the scan-fed state (scans, the rules' finish), and
     * their count in the stored snapshot */
    uint64_t windows_changes;
    uint64_t windows_saved_changes;

    /* Deferred state (segmented jobs, job_state.c): after a scan the
     * windows and the scan-fed rules change for every node at once, so
     * they are saved as one snapshot written in slices of slice_bytes
     * over the next saves. Until its last slice lands, the store keeps the
     * previous snapshot and every batch the scans since then saw; a
     * restore runs those scans again (tw_job_replay_). */
    size_t slice_bytes;    /* 0: a snapshot is written whole      */
    size_t target_bytes;   /* a save's bytes that slices fill up to;
                              0: one slice per save               */
    int snap_kind;         /* SNAP_*: the stored snapshot         */
    uint64_t snap_id;      /* its parts' id                       */
    uint64_t snap_gen;     /* scans reflected in it               */
    uint64_t snap_nslices; /* its "state.<id>.<i>" parts          */
    uint64_t snap_last_id; /* highest id used or seen             */
    pend_scan *pend;       /* scans run since snap_gen, in order  */
    /* the last scan closed: a restore releases what it released, even
     * from a kept segment (else a restored job buffers them again) */
    pend_scan last_scan;
    int has_last_scan;
    size_t npend, pend_cap;
    int force_whole; /* pend or retired incomplete: the next
                        save writes a snapshot whole        */
    /* the snapshot being written, or NULL: its slices, sealed (and
     * compressed) when it was taken, slice i at [snap_off[i],
     * snap_off[i + 1]) */
    tw_buf *snap;
    size_t *snap_off;
    size_t snap_slice;     /* its slice size before compression   */
    uint64_t snap_min;     /* slices a save writes at least       */
    int64_t snap_taken_us; /* monotonic time it was taken (a log line) */
    uint64_t snap_saves;   /* saves that wrote its slices           */
    /* pacing: saves between scans, so a snapshot lands before the next
     * scan's (job_state.c, start_snapshot) */
    uint64_t pace_scan, pace_saves, saves_per_scan;
    /* bytes a "chunks.<n>" part took per byte of packed samples at the
     * last save (compression), in 1/1024ths; 0 = not measured yet */
    uint64_t chunk_ratio;
    uint64_t snap_next_id, snap_next_gen, snap_next_n;
    uint64_t snap_next_changes; /* windows_changes when it was built */
    uint64_t snap_next_sent;    /* slices of it in the store         */
    uint64_t snap_next_tried;   /* slices of it emitted at all       */
    /* batches released by a scan before any save wrote them: a replay
     * of that scan needs them, so the next save writes them (owned) */
    chunk *retired;
    size_t nretired, retired_cap;
    /* restore: slices of the stored snapshot as they arrive (owned),
     * leftover slices of an unfinished one to remove at the next save,
     * and whether the pending scans still have to be run again */
    uint8_t **rs_slice;
    size_t *rs_slice_len;
    char (*stale)[48];
    size_t nstale, stale_cap;
    int replay_due;
    /* payloads a restore call decompressed (owned; freed as it returns) */
    uint8_t **unsealed;
    size_t nunsealed, unsealed_cap;
};

/* Dictionary access for restore: the same paths ingest takes, so the maps,
 * the windows' series and the ids stay consistent. */
int tw_job_node_index_(tw_job *j, const char *node, uint32_t *out);
int tw_job_series_id_(tw_job *j, uint32_t node, const char *node_name,
                      const tw_batch_series *bs, uint32_t *out);
/* key = "<kind>:<node>" as producer_get builds it; NULL on OOM. */
producer *tw_job_producer_get_(tw_job *j, const char *kind, const char *node);
/* p->newest_us := t when newer, and the watermark with it. TW_ERR: OOM. */
int tw_job_producer_newest_(tw_job *j, producer *p, int64_t t);
/* job.c calls this for every buffered batch it releases (job_state.c):
 * the batch's checkpoint segment loses one live batch; `scans` is 1 + the
 * index of the scan that released it. */
void tw_job_chunk_released_(tw_job *j, const chunk *c, uint64_t scans);
/* Runs the pending scans again over the restored batches, feeding the
 * windows and the rules without a wall-clock hook only (job.c): the state
 * the restored snapshot lacks. TW_ERR: out of memory. */
int tw_job_replay_(tw_job *j);
/* 1 when rule i's state is part of the deferred snapshot (job_state.c). */
int tw_job_rule_deferred_(const tw_job *j, size_t i);
/* After scans (job.c, tw_job_advance): a segmented job that writes its
 * state in slices takes the snapshot now, with the scans' work, so the
 * checkpoint that follows only writes a slice (job_state.c). */
void tw_job_snapshot_early_(tw_job *j);
/* Frees what a restore collected and did not use (job_state.c). */
void tw_job_restore_drop_(tw_job *j);

#endif /* TW_JOB_INTERNAL_H */
