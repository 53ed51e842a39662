/*
 * debug_index.h - one index file of a debug-output folder (DEBUG_RULES.md
 * §6.4), parsed with jansson, and the step and worker its name carries
 * (§6.1: `<12-digit step>_<worker>.json`).
 *
 * Checks beyond the reference's (which requires a non-empty meta and one
 * payload key): the mode is one of TRAIN/EVAL/PREDICT/GLOBAL, mode_step
 * and every start_idx/length are non-negative integers, and
 * event_file_name is relative without `..` (it is joined to the folder).
 * A file with entries but no event_file_name is an error; one with only
 * shapes has none to read.
 */
#ifndef TW_DEBUG_INDEX_H
#define TW_DEBUG_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

typedef struct tw_debug_index_entry {
    const char *name; /* owned by the index */
    int64_t start;    /* offset of the framed record in the event file */
    int64_t length;   /* the whole framed record                       */
} tw_debug_index_entry;

typedef struct tw_debug_index {
    tw_mode mode;
    int64_t mode_step;
    const char *event_file; /* relative to the folder; NULL when none */
    tw_debug_index_entry *entries;
    size_t nentries;
    void *json; /* the parsed document, owner of the strings */
} tw_debug_index;

/* Parses an index file's bytes. TW_OK, or TW_ERR with a sentence (and
 * nothing to free). */
int tw_debug_index_parse(const char *text, size_t len, tw_debug_index *out,
                         char *err, size_t errlen);
void tw_debug_index_free(tw_debug_index *ix);

/* Splits an index or event file's base name "<digits>_<worker>.<ext>":
 * TW_OK with the step and the worker (into worker, NUL-terminated), TW_ERR
 * when the name is not of that form or the worker does not fit. */
int tw_debug_file_name(const char *base, int64_t *step, char *worker,
                       size_t worker_len);

/* "TRAIN" ... "GLOBAL" for a tw_mode, "" for TW_MODE_NONE. */
const char *tw_debug_mode_name(tw_mode mode);

#endif /* TW_DEBUG_INDEX_H */
