/*
 * quarantine.h - how `run` stops one bad input from stopping every job.
 *
 * A metrics message whose processing fails (tw_run_message: the router
 * could not ingest it or finish its job, an alert or dead letter could not
 * be queued) makes the engine exit without committing past it, so a
 * restart re-reads it: a transient failure (broker away, out of memory)
 * gets a clean retry. A failure that depends on the input comes back at
 * the same offset every time. So each failure is counted per (partition,
 * offset) in a small ledger file that outlives the process; the
 * `max_attempts`-th failure at the same offset quarantines the message
 * instead of exiting: it goes to the dead-letter topic (reason
 * "quarantined", the failure as the error), its job is finished as
 * quarantined (results file marked, later messages skipped) and the
 * engine goes on with the next message. The same mechanism serves any
 * other per-message failure (e.g. a rule plugin that crashes).
 *
 * Ledger: text, one "partition offset attempts" line per message that has
 * failed and not been quarantined yet; rewritten atomically (temporary
 * file, fsync, rename) at each failure and quarantine, never per message.
 * Without a ledger path the counts live in the process only (a restart
 * forgets them).
 *
 * Ownership: the quarantine owns its ledger copy and path.
 */
#ifndef TW_QUARANTINE_H
#define TW_QUARANTINE_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "json_writer.h"

/* Default of engine.quarantine_after. */
#define TW_QUARANTINE_DEFAULT_ATTEMPTS 3

typedef struct tw_quarantine tw_quarantine;

/* Loads the ledger at `path` (NULL: in memory only; absent file: empty).
 * TW_ERR with err naming the file and line when it cannot be read. */
int tw_quarantine_new(const char *path, unsigned max_attempts,
                      tw_quarantine **out, char *err, size_t errlen);
void tw_quarantine_free(tw_quarantine *q);

/* 1 when the message at (partition, offset) has failed max_attempts - 1
 * times before, so this attempt is its last: quarantine it if it fails
 * (for callers that must decide before processing, e.g. to run a rule
 * plugin isolated; `run` decides after a failure). */
int tw_quarantine_last_attempt(const tw_quarantine *q, int32_t partition,
                               int64_t offset);

/* Counts a failure at (partition, offset) and writes the ledger; the
 * number of failures there so far. A ledger that cannot be written is
 * logged (the count still holds in memory). */
unsigned tw_quarantine_failed(tw_quarantine *q, int32_t partition,
                              int64_t offset);

/* The message was quarantined (or got through): its count is dropped
 * (nothing written when it had none). */
void tw_quarantine_forget(tw_quarantine *q, int32_t partition, int64_t offset);

unsigned tw_quarantine_max_attempts(const tw_quarantine *q);

/* Why a job was quarantined, for its results file. */
typedef struct tw_quarantine_mark {
    const char *reason; /* a sentence */
    int32_t partition;
    int64_t offset; /* the message that failed */
    unsigned attempts;
} tw_quarantine_mark;

/* Writes job's results object (job_results.h) as the next value of out,
 * with "quarantined": {"reason", "partition", "offset", "attempts"} as its
 * last key. TW_ERR on out-of-memory. */
int tw_quarantine_results_write(tw_json *out, tw_job *job,
                                const tw_quarantine_mark *mark);

#endif /* TW_QUARANTINE_H */
