/*
 * debug_proto.h - the protobuf subset of a debug-output event record
 * (DEBUG_RULES.md §6.6): Event{wall_time, step, summary{value{tag, tensor,
 * metadata{plugin_data{plugin_name, content}}}}} and TensorProto{dtype,
 * tensor_shape{dim{size}}, tensor_content, string_val}. A hand-written
 * wire decoder: varints and length-delimited fields, unknown fields
 * skipped by wire type, proto3 defaults (step 0, dtype 0 and a 0-d shape
 * are absent on the wire).
 *
 * The decoded event points into the caller's payload buffer.
 */
#ifndef TW_DEBUG_PROTO_H
#define TW_DEBUG_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define TW_DEBUG_MAX_DIMS 16

typedef struct tw_debug_event {
    double wall_time; /* seconds since the epoch; 0 when absent */
    int64_t step;     /* the global step; 0 when absent         */
    const char *tag;  /* Summary.Value.tag, not NUL-terminated  */
    size_t tag_len;
    int has_value; /* a Summary.Value was present            */
    int mode;      /* plugin_data "mode" (1..4); 0 = absent  */
    int64_t mode_step;
    int has_mode_step;
    int has_tensor; /* Summary.Value.tensor was present       */
    int dtype;      /* DataType enum; 0 = absent (strings)    */
    int64_t dims[TW_DEBUG_MAX_DIMS];
    uint32_t ndims;
    const uint8_t *content; /* tensor_content; NULL when absent */
    size_t content_len;
    uint32_t nstrings; /* string_val entries                  */
} tw_debug_event;

/* Decodes one record payload. TW_OK, or TW_ERR with a sentence naming the
 * byte offset within the payload (a varint longer than 10 bytes, a length
 * past the end, a group or unknown wire type, a negative dimension, more
 * than TW_DEBUG_MAX_DIMS dimensions, a mode that is not 1..4). */
int tw_debug_event_decode(const uint8_t *p, size_t n, tw_debug_event *ev,
                          char *err, size_t errlen);

#endif /* TW_DEBUG_PROTO_H */
