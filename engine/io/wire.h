/*
 * wire.h - the C API over the FlatBuffers wire format (schemas/metrics.fbs).
 * The FlatBuffers runtime does all parsing and verification; this layer
 * only copies between the generated accessors and plain C structs.
 *
 * Ownership: tw_wire_encode() returns a malloc'd buffer owned by the caller
 * (free()). tw_wire_decode() returns a tw_batch owned by the caller
 * (tw_batch_free); it copies everything, so the input buffer may be freed
 * right after.
 */
#ifndef TW_WIRE_H
#define TW_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tw_wire_status {
    TW_WIRE_OK = 0,
    TW_WIRE_TOO_SHORT,           /* shorter than a FlatBuffer header          */
    TW_WIRE_BAD_IDENTIFIER,      /* file_identifier is not "TWM1"             */
    TW_WIRE_VERIFY_FAILED,       /* the FlatBuffers verifier rejected it      */
    TW_WIRE_MISSING_FIELD,       /* a required field is absent                */
    TW_WIRE_BAD_REFERENCE,       /* a sample names a series that is not there */
    TW_WIRE_UNSUPPORTED_VERSION, /* version 0 (no writer emits it)          */
    TW_WIRE_NO_MEMORY,
    TW_WIRE_BAD_VALUE,  /* an enum value this reader does not know,
                           or fields that contradict each other      */
    TW_WIRE_ID_TOO_LONG /* a job or node id over TW_WIRE_ID_MAX bytes */
} tw_wire_status;

/* Longest job or node id decoding accepts, in bytes: ids name files, keys
 * and every alert, and a real one (a host name, an orchestrator's job
 * name) fits in 253. */
#define TW_WIRE_ID_MAX 256

/* A short, stable name for a status ("bad_identifier"): used as the
 * dead-letter reason and as a counter label. */
const char *tw_wire_status_name(tw_wire_status st);

/* Encodes b (b->arena is not needed). On success *out and *outlen receive a
 * malloc'd buffer; on failure *out is NULL. It refuses what a reader would
 * reject: TW_WIRE_MISSING_FIELD for a NULL job, node, series type or
 * dimension, event name or phase, arg key or value (or a NULL array with a
 * non-zero count); TW_WIRE_BAD_REFERENCE for a sample whose series is not
 * < nseries; TW_WIRE_BAD_VALUE for an enum out of range or an event whose
 * node is neither NULL nor b->node (the wire has one node per batch);
 * TW_WIRE_NO_MEMORY also when the result would pass FlatBuffers' 2 GiB
 * limit. An event with args == NULL is written as "had no args"; one with
 * args != NULL and nargs == 0 as "had an empty args object". */
tw_wire_status tw_wire_encode(const tw_batch *b, uint8_t **out, size_t *outlen);

/* Verifies and decodes. On failure *out is NULL and err (if given) holds a
 * sentence naming what is wrong. The buffer needs no particular alignment.
 * Decoded events point at the batch's node; args is NULL exactly when the
 * event had no args. Versions above 1 are accepted (fields are only ever
 * appended; a field this reader does not know is ignored). Tables that
 * outnumber one per 8 bytes of buf (subtables referenced repeatedly) are
 * refused as verify_failed, so a decoded batch stays proportional to len. */
tw_wire_status tw_wire_decode(const uint8_t *buf, size_t len, tw_batch **out,
                              char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* TW_WIRE_H */
