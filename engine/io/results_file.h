/*
 * results_file.h - a job's results file: its name, and a writer that owns
 * each job's results until they are on disk.
 *
 * Names (tw_results_file_name). One job id, one name, and two ids never
 * share one:
 *  - bytes [A-Za-z0-9._-] are kept, except a leading '.' (no hidden files,
 *    no "." or ".."); every other byte is percent-encoded as '%' and two
 *    upper-case hex digits: "col/x" -> "col%2Fx", "col_x" -> "col_x",
 *    "50%" -> "50%25". The empty id is "~". Decoding is unambiguous, so
 *    the mapping is injective, and ids made of the kept bytes keep the
 *    names they always had;
 *  - a name longer than TW_RESULTS_NAME_MAX bytes is cut (never inside an
 *    escape) and ends with "~h" and the 64-bit FNV-1a hash of the whole id
 *    as 16 lower-case hex digits. '~' is always escaped, so it cannot
 *    occur in a name that is not cut. Two cut ids share a name only if
 *    both their first ~180 bytes and their hashes agree (odds 2^-64);
 *    the rule below then keeps both files;
 *  - the results file is <name>.json; a second version of it (see below)
 *    <name>~v<n>.json, n >= 2. The file's "job" key holds the full id.
 *    On a case-insensitive file system two ids differing in case share
 *    a name; the rule below then writes the second as a version.
 *
 * Writes (tw_results_put). The bytes go to a temporary file in the
 * folder (".<name>.tmp-<pid>-<n>": never matched by *.json), fsync'ed,
 * then linked to the results file's name, which fails rather than replace
 * an existing file, then unlinked; the temporary files of the same name
 * that a crash left (any pid, any n) are removed, and the folder is
 * fsync'ed. Never a silent overwrite:
 * when the file exists with the same bytes the results are already on
 * disk (a re-evaluation of the same job); with other bytes (another
 * evaluation of the same job id, e.g. a fragment of a split job, a run
 * with other rules, or another id with the same hash) the results go to
 * the first free <name>~v<n>.json and a WARN names both files.
 *
 * Results never lost: a write that fails (folder full, read-only, gone)
 * keeps the results in the writer, logs one WARN per job (path and
 * errno text), and is tried again by tw_results_retry with exponential
 * backoff (TW_RESULTS_BACKOFF_MIN_US doubling to TW_RESULTS_BACKOFF_MAX_US).
 * tw_results_pending_job tells the caller whether a job's results are
 * still held: until they are not, the job must not be forgotten (no
 * tombstone, no commit past its messages), so that a crash lets the next
 * owner evaluate it again. Results still held when the writer is freed
 * are lost from this process: one ERROR each.
 *
 * Ownership: the writer owns copies of the ids and bytes it is given.
 * One writer is used from one thread.
 */
#ifndef TW_RESULTS_FILE_H
#define TW_RESULTS_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of a name at most, before ".json" / "~v<n>.json": NAME_MAX (255)
 * leaves room for the version, the extension and the temporary prefix. */
#define TW_RESULTS_NAME_MAX 200
#define TW_RESULTS_NAME_LEN (TW_RESULTS_NAME_MAX + 1)

#define TW_RESULTS_BACKOFF_MIN_US 100000LL   /* 100 ms */
#define TW_RESULTS_BACKOFF_MAX_US 30000000LL /* 30 s   */
#define TW_RESULTS_VERSIONS_MAX 10000        /* <name>~v2 .. ~v9999 */

/* The file name (without ".json") of job id `id` into out. */
void tw_results_file_name(const char *id, char out[TW_RESULTS_NAME_LEN]);

typedef struct tw_results_stats {
    uint64_t written;       /* results on disk (new file, or same bytes) */
    uint64_t versions;      /* of those, as <name>~v<n>.json           */
    uint64_t failures;      /* write attempts that failed              */
    uint64_t retries;       /* attempts after a failure                */
    uint64_t pending;       /* results held, not on disk yet           */
    uint64_t pending_bytes; /* their bytes                             */
} tw_results_stats;

typedef struct tw_results_writer tw_results_writer;

/* A writer into folder `dir` (which need not be writable yet). TW_ERR:
 * out of memory (err says so). */
int tw_results_writer_new(const char *dir, tw_results_writer **out, char *err,
                          size_t errlen);
/* Frees the writer; results still pending are lost (one ERROR each). */
void tw_results_writer_free(tw_results_writer *w);

/* tw_results_put's answer when the results could not be written yet. */
enum { TW_RESULTS_HELD = 1 };

/* Takes a copy of job `id`'s results (`len` bytes of JSON; a newline is
 * appended in the file) and writes them now, unless earlier results of
 * the same id are still held (they land first). TW_OK: on disk (the path
 * is logged at INFO); TW_RESULTS_HELD: kept, tried again by
 * tw_results_retry; TW_ERR: out of memory (nothing kept). */
int tw_results_put(tw_results_writer *w, const char *id, const char *json,
                   size_t len, int64_t now_us);

/* Tries again every held result whose backoff has passed at now_us
 * (a monotonic clock, the one given to tw_results_put; INT64_MAX tries
 * every one, e.g. before exiting). Returns how many are still held. */
size_t tw_results_retry(tw_results_writer *w, int64_t now_us);

/* Nonzero while some results of job `id` are held (not on disk yet). */
int tw_results_pending_job(const tw_results_writer *w, const char *id);

/* When tw_results_retry next has something to try; INT64_MAX: nothing. */
int64_t tw_results_next_retry_us(const tw_results_writer *w);

void tw_results_get_stats(const tw_results_writer *w, tw_results_stats *out);

#endif /* TW_RESULTS_FILE_H */
