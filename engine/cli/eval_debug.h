/*
 * eval_debug.h - `trainwatch eval` of a legacy debug-output folder: its
 * tensors through a job with the debugging rules (eval_debug.c).
 *
 * Ownership: the caller owns every argument; *out is the caller's
 * (tw_job_free).
 */
#ifndef TW_EVAL_DEBUG_H
#define TW_EVAL_DEBUG_H

#include <stddef.h>

#include "job.h"
#include "reader.h"

typedef struct tw_eval_debug_args {
    const char *dir;
    const char *id; /* the job id */
    tw_registry *reg;
    const tw_job_config *jc;
    int have_rules_file;       /* 0: the debugging rules whose tensors exist */
    const tw_rule_spec *rules; /* with a rules file: its rules */
    size_t nrules;
    int quiet;
} tw_eval_debug_args;

/* Reads the folder, evaluates it and finishes the job. TW_ERR after a
 * message on stderr (no tensor, a rule that cannot start, out of memory).
 * rs gets the folder's counts: files = index files, lines = records. */
int tw_eval_debug_job(const tw_eval_debug_args *a, tw_job **out,
                      tw_reader_stats *rs);

#endif /* TW_EVAL_DEBUG_H */
