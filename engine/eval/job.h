/*
 * job.h - one training job's evaluation context: its series dictionary,
 * event-time clock, buffered events, windowed aggregator and rule
 * instances. Batches go in (tw_job_ingest); scans come out when the
 * watermark passes a tick boundary, and each scan is run through every rule.
 *
 * Time (RULES.md §2.1, DESIGN.md "Time"): F = the job's first timestamp
 * (earliest agent-file timestamp); scan k covers [F + kS, F + (k+1)S], both
 * ends inclusive. A scan closes when the watermark reaches its end plus the
 * allowed lateness. The watermark is the minimum over the job's active
 * producers (system and framework nodes) of the newest event time each has
 * sent; a producer that lags the newest one by more than `idle_node_us`
 * stops holding it back. Offline evaluation drives the watermark itself
 * (tw_job_advance) from the file listing. Events that would fall into an
 * already closed scan are late: counted and dropped, never merged.
 * tw_job_finish() evaluates the remaining scans that start before the
 * job's latest timestamp L (the reference never evaluates the last partial
 * interval).
 *
 * Clock skew (internal watermark only): a sample or event whose time lies
 * more than clock_skew_us ahead of the job's newest accepted time (before
 * any, its JOB_START time or the batch's earliest time), or whose time is
 * not representable (NaN, ±Inf, past year 2262), is refused and counted
 * (skewed_samples / skewed_events), so one bad clock cannot drag the
 * watermark ahead; so is a JOB_END latest time beyond the bound
 * (skewed_markers; L is then derived from the data). One WARN per node
 * names the first one. A node whose whole batches are beyond the bound
 * TW_JOB_SKEW_CONFIRM times in a row jumped for real and is accepted.
 * Unrepresentable times are refused with an external watermark too.
 *
 * Debugging tensors (tw_tensor, from the hook's TensorRecords) count as
 * framework input of their node for the clock (their wall_us). Each
 * belongs to exactly one scan: tick mode, the scan whose [start, end)
 * holds its wall_us (the final scan also takes its end); continuous mode,
 * (start, end]; scan 0 also takes any before F. A scan hands them to the
 * rules ordered by (node, step, name), ties in arrival order.
 *
 * Ownership: the job owns the batches it ingests, its rules and windows; it
 * borrows the registry, which must outlive it.
 */
#ifndef TW_JOB_H
#define TW_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "job_loss.h"
#include "plugin_host.h"

typedef struct tw_job_config {
    int64_t tick_us;        /* scan interval; 0 = continuous (a scan per
                               watermark advance)                           */
    int64_t lateness_us;    /* allowed lateness beyond a tick boundary      */
    int64_t idle_node_us;   /* a producer lagging more than this is idle    */
    int external_watermark; /* only tw_job_advance moves the clock        */
    tw_semantics semantics; /* default for rules that do not set theirs   */
    tw_isolation isolation; /* which rules run guarded, and the limits    */
    /* Internal watermark only (see "Clock skew" below): how far ahead of
     * the job's newest accepted time a sample, event or JOB_END latest
     * time may be. TW_JOB_SKEW_DEFAULT = 10 ticks (10 min when
     * continuous); 0 = no bound. */
    int64_t clock_skew_us;
    /* Most scans one tw_job_advance call runs (0 = no cap); the rest wait
     * for the next call (counted in scan_cap_hits). */
    uint64_t max_scans_per_advance;
    /* Polled before every scan of tw_job_advance and tw_job_finish; when
     * it returns nonzero they return TW_JOB_STOPPED at once (NULL = never).
     * Lets a daemon honour SIGTERM whatever one message costs. */
    int (*stop_requested)(void *ud);
    void *stop_ud;
    /* The engine's wall clock (µs since the epoch) for rules that judge
     * on it (plugin.h, `<entry>_wallclock`): set (`run`), batches are
     * stamped with it as they arrive and the daemon calls
     * tw_job_wallclock(); NULL (`eval`, the default), event time stands
     * in: those rules are called after each scan with now = its end. */
    int64_t (*wall_now)(void);
} tw_job_config;

#define TW_JOB_SKEW_DEFAULT (-1)
#define TW_JOB_SKEW_TICKS 10
/* A node whose batches lie wholly beyond the bound this many times in a
 * row has jumped ahead for real (a job paused and resumed): accepted. */
#define TW_JOB_SKEW_CONFIRM 3

/* Returned by tw_job_ingest/advance/finish when stop_requested said so:
 * the job is consistent (whole scans only) and a later call goes on. */
enum { TW_JOB_STOPPED = -3 };

/* tick 60 s, lateness 60 s, idle 300 s, internal watermark, fixed,
 * clock skew 10 ticks, no scan cap, no stop callback. */
void tw_job_config_default(tw_job_config *c);

/* One configured rule. Either `rule` (a built-in name) or `source` (a .so
 * path, with `entry` = rule_to_invoke, NULL for the default). */
typedef struct tw_rule_spec {
    const char *name; /* display name; NULL = the plugin's name */
    const char *rule;
    const char *source;
    const char *entry;
    const char *const *keys;
    const char *const *values;
    size_t nparams;
    int has_semantics;
    tw_semantics semantics;
    /* actions also fire for findings another explains (finding_cause.h);
     * read by the daemon's actions, not by the job */
    int act_on_consequences;
} tw_rule_spec;

typedef struct tw_job_stats {
    uint64_t batches;
    uint64_t duplicate_batches; /* same (node, seq) seen before */
    uint64_t samples;           /* accepted */
    uint64_t events;            /* accepted */
    uint64_t late_samples;      /* dropped: their scan had closed */
    uint64_t late_events;
    uint64_t scans;
    size_t buffered_batches; /* held for scans not yet closed */
    uint64_t skewed_samples; /* refused: beyond the clock-skew bound */
    uint64_t skewed_events;  /* or not a representable time          */
    uint64_t skewed_markers; /* JOB_END latest times refused         */
    uint64_t scan_cap_hits;  /* advances cut short by the scan cap   */
    uint64_t tensors;        /* debugging tensors accepted           */
    uint64_t late_tensors;   /* dropped: their scan had closed       */
    uint64_t skewed_tensors; /* refused like skewed events           */
} tw_job_stats;

typedef struct tw_job tw_job;

/* Called after every scan with the rules' new results. */
typedef void (*tw_job_scan_fn)(void *ud, tw_job *job, const tw_scan *scan);

int tw_job_new(const char *job_id, const tw_job_config *cfg, tw_registry *reg,
               const tw_rule_spec *specs, size_t nspecs, tw_job **out,
               char *err, size_t errlen);
void tw_job_free(tw_job *j);

void tw_job_on_scan(tw_job *j, tw_job_scan_fn fn, void *ud);

/* Called after a tw_job_wallclock() call that ran a rule, with its now. */
typedef void (*tw_job_wallclock_fn)(void *ud, tw_job *job, int64_t now_us);
void tw_job_on_wallclock(tw_job *j, tw_job_wallclock_fn fn, void *ud);

/* Online (cfg.wall_now set): runs every rule that judges on the wall
 * clock with the producers' last-seen record at now_us (the daemon calls
 * it about once a second per live job), then, when one of them changed
 * its status or counters, the on_wallclock callback; those rules then
 * count as changed for the next tw_job_save (a quiet call's state is
 * saved with the next scan's). A no-op for a finished job, offline, or
 * without such rules. */
void tw_job_wallclock(tw_job *j, int64_t now_us);

/* Fix F (offline evaluation knows it from the file names). Must be called
 * before the first scan closes; otherwise F is derived from the data. A
 * time past year 2262 (not representable in ns) is ignored. Called again
 * (one JOB_START per producer), F is the earliest of the times. */
void tw_job_set_first_timestamp(tw_job *j, int64_t first_us);

/* Never close a scan that starts at or after `limit_us` before
 * tw_job_finish (offline evaluation knows L from the file names, and the
 * reference evaluates no scan beyond it). 0 = no limit. */
void tw_job_set_scan_limit(tw_job *j, int64_t limit_us);

/* Takes ownership of b in every case. TW_ERR only on out-of-memory;
 * TW_JOB_STOPPED when the advance it triggers was stopped (b is in). */
int tw_job_ingest(tw_job *j, tw_batch *b);

/* Offer a watermark (µs): scans whose end + lateness <= watermark close.
 * With an internal watermark this is also called after each ingest. */
int tw_job_advance(tw_job *j, int64_t watermark_us);

/* The job ended: evaluate remaining scans that start before L (0 = the L
 * derived from the data) and finalize every rule's status. Idempotent.
 * TW_JOB_STOPPED: stopped before the end, not finished; call it again. */
int tw_job_finish(tw_job *j, int64_t latest_us);

const char *tw_job_id(const tw_job *j);
/* Records input the job is known to miss (job_loss.h; sequence gaps are
 * found by the job itself): its results and final alerts are then marked
 * partial. TW_ERR on out-of-memory. */
int tw_job_note_loss(tw_job *j, tw_loss_kind kind, const char *where,
                     uint64_t from, uint64_t to);
const tw_job_loss *tw_job_loss_of(const tw_job *j);
int tw_job_finished(const tw_job *j);
/* 1 once the job's end markers say it ended: every node that sent a
 * JOB_START marker (an agent per host, or replay's single "replay" node)
 * has sent JOB_END; with no JOB_START seen, the first JOB_END. */
int tw_job_end_marker_seen(const tw_job *j);
int64_t tw_job_first_timestamp(const tw_job *j);
int64_t tw_job_latest_timestamp(const tw_job *j);
void tw_job_get_stats(const tw_job *j, tw_job_stats *out);
size_t tw_job_nrules(const tw_job *j);
tw_rule *tw_job_rule(tw_job *j, size_t i);
size_t tw_job_memory(const tw_job *j); /* bytes of buffered batches + windows */

/* ---- checkpoints (job_state.c) ---------------------------------------------
 * A job's state is saved as parts: "core" (clock, de-duplication windows,
 * dictionary, statistics, aggregator windows and the batches buffered for
 * scans not yet closed) and "rule.<i>" for the i-th configured rule
 * (0-based). Every part is a versioned blob (magic, version, length, CRC-32)
 * the store keeps under its part name; restoring them into a job made with
 * the same job id, configuration and rule specs continues exactly where the
 * save was. Blob layout: docs in job_state.c. */

/* Segmented checkpoints, for a job whose saves go to a store that keeps
 * parts (the daemon): call before the first save or restore. Then "core"
 * keeps only the clock, statistics, producers and data-loss record; the
 * rest is in parts written only when they change:
 *   "dict.<seq>"    nodes and series added since the previous save;
 *   "windows"       the aggregator windows (rewritten after a scan or
 *                   when the dictionary grew);
 *   "chunks.<seq>"  the batches that arrived since the previous save,
 *                   removed (data NULL) once a scan released all of them.
 * So a save after a second of input writes that second's batches, not
 * every buffered one. Restore order: "core", "dict.*" and "chunks.*" by
 * increasing seq with "windows" after the last dict, then the rules
 * (tw_checkpoint_load's order). Without it a save is "core" (everything)
 * plus the rules, as tests and tools expect. */
void tw_job_set_segmented(tw_job *j);

/* Deferred state (segmented jobs): after a scan the windows and the rules
 * without a wall-clock hook change for every node, so a save does not
 * write them at once. It starts a snapshot of them and writes it in
 * "state.<id>.<i>" slices of `bytes` (0, the default: whole), one slice
 * per save (more with tw_job_set_checkpoint_target); the save that
 * writes the last one commits it. Until then the core lists the scans run
 * since the stored snapshot and the store keeps the batches they saw, so
 * a restore runs those scans again (feeding the windows and those rules
 * only; tw_job_restore_end). A full save, the first save, a finished job,
 * or a snapshot more than 8 scans behind write a fresh snapshot whole.
 * Parts of 4 KiB or more are stored zstd-compressed when that saves an
 * eighth (a header flag; slices are compressed one by one). */
void tw_job_set_slice_bytes(tw_job *j, size_t bytes);

/* A save writes as many slices as fit in `bytes` (0, the default: one a
 * save) beside its other parts, and at least enough that the snapshot is
 * written within three quarters of the saves the last scan interval had,
 * so it lands before the next scan's. */
void tw_job_set_checkpoint_target(tw_job *j, size_t bytes);

/* Called once per part by tw_job_save. `part` is "core", "rule.<i>" or,
 * segmented, one of the parts above; data NULL (len 0) means the part is
 * gone: remove it from the store. Data is valid only during the call; the
 * callback must not call into the job. Returns TW_OK, or TW_ERR to abort
 * the save. */
typedef int (*tw_job_part_fn)(void *ud, const char *part, const void *data,
                              size_t len);

/* Nonzero when anything changed since the last successful tw_job_save
 * (ingest, a scan, finish, F or the scan limit set). */
int tw_job_dirty(const tw_job *j);

/* Emits the job's state as parts, one at a time from one reusable buffer:
 * all of them, or with only_dirty only those changed since the last
 * successful save ("core" after any ingest/scan/finish, every "rule.<i>"
 * after a scan or finish). Clears the dirty marks only when every emit
 * returned TW_OK. TW_ERR (out of memory, a rule that cannot save, an emit
 * that failed) names the part in err. */
int tw_job_save(tw_job *j, int only_dirty, tw_job_part_fn emit, void *ud,
                char *err, size_t errlen);

/* Restores one part into a job freshly made by tw_job_new with the same id,
 * configuration and rule specs, before anything was ingested: "core" first,
 * then the rules in any order. Values set by tw_job_set_first_timestamp /
 * tw_job_set_scan_limit are replaced by the checkpoint's. Errors (unknown
 * part, truncated or corrupt blob, wrong version, other job id or
 * configuration, wrong rule count or name) name the part and the reason.
 * The core blob is checked whole before the job is changed; after any
 * error the job stays safe to use and free, but should be discarded. */
int tw_job_restore_part(tw_job *j, const char *part, const void *data,
                        size_t len, char *err, size_t errlen);

/* After the last part: puts a segmented job's state snapshot together and
 * runs the scans since it again. Called by itself at the job's next use
 * (ingest, advance, finish, wall clock, save); the daemon calls it right
 * after loading, to report errors there. TW_OK at once for other jobs.
 * Errors (a missing or inconsistent slice, a dictionary too short for a
 * scan, out of memory) name the job and part; the job should be
 * discarded. */
int tw_job_restore_end(tw_job *j, char *err, size_t errlen);

/* The metric kind of a series from its strings (RULES.md §1.2 table). */
tw_metric tw_metric_classify(const char *type, const char *name,
                             const char *dimension);

#endif /* TW_JOB_H */
