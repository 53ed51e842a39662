/*
 * pstats_marshal.h - the function statistics of a cProfile/pstats file:
 * Python `marshal` data (the format pstats.Stats.dump_stats and the hook's
 * legacy writer produce) of one dict
 *     {(file, line, function): (cc, nc, tt, ct, callers)}
 * with callers {(file, line, function): (nc, cc, tt, ct)}.
 *
 * The reader is bounded: nesting depth, object count and string lengths
 * are limited by TW_PSTATS_MAX_DEPTH and by the input's own size, a
 * reference (marshal's FLAG_REF / 'r') may only name an object already
 * read in full, and any input that is not such a dict is an error with
 * its byte offset. Fuzzed by tests/fuzz/fuzz_pstats.c.
 */
#ifndef TW_PSTATS_MARSHAL_H
#define TW_PSTATS_MARSHAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TW_PSTATS_MAX_DEPTH 16
/* the largest file tw_pstats_read_file accepts */
#define TW_PSTATS_MAX_FILE (256u * 1024u * 1024u)

typedef struct tw_pstats_caller {
    const char *file; /* owned by the tw_pstats (its string pool) */
    int64_t line;
    const char *function;
    int64_t nc, cc; /* total and primitive calls from this caller */
    double tt, ct;
} tw_pstats_caller;

typedef struct tw_pstats_func {
    const char *file;
    int64_t line;
    const char *function;
    int64_t cc, nc; /* primitive calls, total calls */
    double tt, ct;  /* total (own) time, cumulative time, seconds */
    size_t ncallers;
    tw_pstats_caller *callers; /* into the tw_pstats' caller array */
} tw_pstats_func;

typedef struct tw_pstats {
    size_t nfuncs;
    tw_pstats_func *funcs;
    tw_pstats_caller *callers_pool;
    char *strings; /* NUL-terminated copies of every name */
} tw_pstats;

/* Parses len bytes. TW_OK with *out (free with tw_pstats_free), or TW_ERR
 * with a sentence naming the offset and what was wrong in err. */
int tw_pstats_parse(const uint8_t *data, size_t len, tw_pstats **out, char *err,
                    size_t errlen);

/* Reads and parses the file at path (at most TW_PSTATS_MAX_FILE bytes). */
int tw_pstats_read_file(const char *path, tw_pstats **out, char *err,
                        size_t errlen);

void tw_pstats_free(tw_pstats *s);

#ifdef __cplusplus
}
#endif

#endif /* TW_PSTATS_MARSHAL_H */
