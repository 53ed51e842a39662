/*
 * wire_pyprofile.h - the Python profiles of one wire batch
 * (schemas/metrics.fbs Batch.python_profiles): the training hook's cProfile
 * statistics per profiled interval, read for `trainwatch pystats --job`.
 * The engine's batch decoder (wire.h) only counts these tables; this
 * decoder copies them, after the same FlatBuffers verification.
 *
 * Every table is checked for what no honest hook writes (an unknown mode,
 * a negative step, an interval that ends before it starts, a function
 * without a name, a name with a NUL byte inside, more primitive than total
 * calls, a time that is NaN or infinite); one such table refuses the whole
 * message with a sentence naming it. Callers of each function are not copied
 * (pystats prints none).
 *
 * Ownership: the result and everything it points to belong to the caller
 * (tw_wire_pyprofiles_free); the input buffer may be freed right after.
 */
#ifndef TW_WIRE_PYPROFILE_H
#define TW_WIRE_PYPROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "pstats_marshal.h"
#include "wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tw_wire_pyprofile {
    char *profiler;    /* "cprofile" */
    char *timer;       /* "" when absent */
    const char *mode;  /* "TRAIN", "EVAL", "PREDICT", "GLOBAL"; "" = None */
    char *start_phase; /* as written (START, STEP_START, ...) */
    char *end_phase;
    int64_t start_step, end_step;
    int64_t start_us, end_us; /* wall clock, us since the epoch */
    int64_t pid;
    uint32_t functions_cut;
    tw_pstats *stats; /* the functions, callers left out */
} tw_wire_pyprofile;

typedef struct tw_wire_pyprofiles {
    char *job;
    char *node;
    size_t n;
    tw_wire_pyprofile *items;
} tw_wire_pyprofiles;

/* Verifies buf as a Batch and copies its Python profiles (n may be 0).
 * On failure *out is NULL and err holds a sentence; the status is one of
 * wire.h's (bad_value for a table as above). */
tw_wire_status tw_wire_decode_pyprofiles(const uint8_t *buf, size_t len,
                                         tw_wire_pyprofiles **out, char *err,
                                         size_t errlen);

void tw_wire_pyprofiles_free(tw_wire_pyprofiles *p);

#ifdef __cplusplus
}
#endif

#endif /* TW_WIRE_PYPROFILE_H */
