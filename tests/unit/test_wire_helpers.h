/*
 * test_wire_helpers.h - test-only FlatBuffers builders for test_wire.c.
 *
 * They produce buffers the C encoder deliberately cannot (absent required
 * fields, unknown enum values, other versions) with the FlatBuffers C++
 * builder, and answer questions about a buffer through the generated
 * accessors. Buffers are malloc'd and owned by the caller (free()).
 */
#ifndef TEST_WIRE_HELPERS_H
#define TEST_WIRE_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum twt_case {
    TWT_VALID = 0, /* one of everything, all well-formed      */
    TWT_NO_JOB,    /* required fields left out ...            */
    TWT_NO_NODE,
    TWT_NO_SERIES_TYPE,
    TWT_NO_SERIES_DIMENSION,
    TWT_NO_EVENT_NAME,
    TWT_NO_EVENT_PHASE,
    TWT_NO_ARG_KEY,
    TWT_NO_ARG_VALUE,
    TWT_NO_JOB_BAD_SAMPLES,  /* no job, and the samples vector overruns */
    TWT_SERIES_OUT_OF_RANGE, /* a sample names series 2 of 2            */
    TWT_VERSION_0,
    TWT_VERSION_ABSENT,     /* no version field: reads as the default 1 */
    TWT_VERSION_2_APPENDED, /* version 2 with a field this reader lacks */
    TWT_BAD_SOURCE,         /* enum values past the schema's ...        */
    TWT_BAD_MODE,
    TWT_BAD_ARG_KIND,
    TWT_BAD_MARKER_KIND,
    TWT_ARGS_WITHOUT_HAS_ARGS,
    TWT_SHARED_TABLES,      /* one event referenced 1000 times          */
    TWT_MISALIGNED_SAMPLES, /* sample structs at 4 mod 8                */
    TWT_PYTHON_PROFILE,     /* a hook's PythonProfile beside the events */
    TWT_CASE_COUNT
} twt_case;

/* NULL only on out-of-memory. */
uint8_t *twt_build(twt_case c, size_t *len);

/* Byte offset of the length word of a verified buffer's samples vector;
 * 0 when the buffer does not verify or has no samples. */
size_t twt_samples_length_offset(const uint8_t *buf, size_t len);

/* 1 when a verified buffer stores its version explicitly (copied to
 * *version), 0 when it leaves it to the default, -1 when it does not
 * verify. */
int twt_stored_version(const uint8_t *buf, size_t len, unsigned *version);

#ifdef __cplusplus
}
#endif

#endif /* TEST_WIRE_HELPERS_H */
