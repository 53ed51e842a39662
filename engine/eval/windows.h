/*
 * windows.h - the windowed aggregator: per (job, node, series) bounded ring
 * windows of the newest values plus online statistics (count, Welford
 * mean/std, min, max). Rules read it through tw_host window_read() and
 * series_stats().
 *
 * Memory per series is bounded by the largest window any loaded rule asked
 * for (tw_windows_request) for that series' metric: a series whose metric
 * no rule windows costs only its statistics (~48 bytes).
 *
 * Ownership: the job owns its tw_windows (tw_windows_free).
 */
#ifndef TW_WINDOWS_H
#define TW_WINDOWS_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

typedef struct tw_windows tw_windows;

tw_windows *tw_windows_new(void);
void tw_windows_free(tw_windows *w);

/* Keep at least the newest n values of every series of `metric`. Only
 * before the first tw_windows_add_series() of that metric takes effect for
 * existing series too (rings grow; values already dropped stay dropped). */
int tw_windows_request(tw_windows *w, tw_metric metric, uint32_t n);
uint32_t tw_windows_requested(const tw_windows *w, tw_metric metric);

/* Series ids are dense and assigned by the job; add them in id order. */
int tw_windows_add_series(tw_windows *w, uint32_t id, tw_metric metric);

void tw_windows_push(tw_windows *w, uint32_t series, double v);

/* Registers any series of scan->series not yet known, then pushes every
 * sample of the scan in order. The job calls this before running rules on
 * a scan; rule tests that build scans by hand call it too. */
int tw_windows_feed_scan(tw_windows *w, const tw_scan *scan);

/* Newest min(n, kept) values of a series, oldest first; returns the count. */
size_t tw_windows_read(const tw_windows *w, uint32_t series, double *out,
                       size_t n);
int tw_windows_stats(const tw_windows *w, uint32_t series,
                     tw_series_stats *out);

/* Checkpoint: every series' metric, statistics and kept values (oldest
 * first), appended to `out` in the ckpt_codec.h encoding. compact: a
 * series whose min, max and kept values are all exact hundredths writes
 * them as varints (2 bytes for a utilization instead of 8); restore with
 * the same flag. TW_ERR only on out-of-memory. */
int tw_windows_save(const tw_windows *w, tw_buf *out, int compact);

/* Restores what tw_windows_save wrote into `w`, which must already hold the
 * blob's series (the job re-creates them from its dictionary; any series
 * beyond them, added since the save, stay empty), with the same requested
 * window sizes, and no value pushed yet. The whole blob is checked before
 * anything is changed: on TW_ERR (truncated, trailing bytes, more series
 * than `w`, a metric that differs, more values than the ring holds) `w` is
 * as it was and err says why. */
int tw_windows_restore(tw_windows *w, const void *data, size_t len, int compact,
                       char *err, size_t errlen);

/* Bytes held (rings + statistics), for accounting and the benchmarks. */
size_t tw_windows_memory(const tw_windows *w);

#endif /* TW_WINDOWS_H */
