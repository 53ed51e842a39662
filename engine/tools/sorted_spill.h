/*
 * sorted_spill.h - an external merge sort of byte records by a 64-bit key,
 * in memory bounded by its configuration, not by how much goes through it:
 * records collect in a buffer; a full buffer is sorted (key, then arrival
 * order) and written as a run to one temporary file (unlinked at once);
 * tw_spill_finish() then k-way merges the runs (a binary heap, one small
 * read buffer per run) and hands every record to a callback in order.
 *
 * Memory: buffer_bytes for the buffer, plus about 16 KiB per run (a run
 * holds buffer_bytes of records, so a 2 GB output with the default 16 MiB
 * buffer makes ~128 runs: ~2 MiB of read buffers).
 *
 * Ownership: tw_spill_new() returns a spill owned by the caller
 * (tw_spill_free); records are copied in.
 */
#ifndef TW_SORTED_SPILL_H
#define TW_SORTED_SPILL_H

#include <stddef.h>
#include <stdint.h>

typedef struct tw_spill tw_spill;

/* buffer_bytes: 0 = 16 MiB. tmpdir: NULL = $TMPDIR or /tmp. NULL on
 * out-of-memory. */
tw_spill *tw_spill_new(size_t buffer_bytes, const char *tmpdir);
void tw_spill_free(tw_spill *s);

/* Adds one record. TW_ERR (err filled) when a run cannot be written. */
int tw_spill_add(tw_spill *s, int64_t key, const char *bytes, size_t len,
                 char *err, size_t errlen);

/* Receives each record in (key, arrival) order; return TW_OK to go on. */
typedef int (*tw_spill_out_fn)(void *ud, int64_t key, const char *bytes,
                               size_t len);

/* Hands every record to out in order. Call once. TW_ERR on a read error
 * (err filled) or when out fails. */
int tw_spill_finish(tw_spill *s, tw_spill_out_fn out, void *ud, char *err,
                    size_t errlen);

/* Runs written so far (0 when everything fitted in the buffer). */
size_t tw_spill_runs(const tw_spill *s);

#endif /* TW_SORTED_SPILL_H */
