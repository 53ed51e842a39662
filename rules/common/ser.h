/*
 * ser.h - checkpoint encoding shared by the built-in rules: a writer over
 * host->buf_write and a bounds-checked reader. Little-endian fixed-width
 * integers, doubles as their IEEE bit pattern (so restore is bit exact),
 * strings as u32 length + bytes (0xFFFFFFFF = NULL).
 *
 * Errors are sticky: after the first failure every call is a no-op and
 * tw_ser_ok()/tw_deser_ok() return 0, so callers check once at the end.
 *
 * Ownership: tw_ser borrows the host and buffer; tw_deser borrows the
 * bytes. tw_deser_str() returns a malloc'd string owned by the caller.
 */
#ifndef TW_RULES_SER_H
#define TW_RULES_SER_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

typedef struct tw_ser {
    const tw_host *host;
    tw_buf *buf;
    int err;
} tw_ser;

typedef struct tw_deser {
    const uint8_t *p;
    size_t left;
    int err;
} tw_deser;

void tw_ser_init(tw_ser *s, const tw_host *host, tw_buf *buf);
void tw_ser_bytes(tw_ser *s, const void *data, size_t len);
void tw_ser_u8(tw_ser *s, uint8_t v);
void tw_ser_u32(tw_ser *s, uint32_t v);
void tw_ser_u64(tw_ser *s, uint64_t v);
void tw_ser_i64(tw_ser *s, int64_t v);
void tw_ser_f64(tw_ser *s, double v);
void tw_ser_str(tw_ser *s, const char *str); /* NULL allowed */
int tw_ser_ok(const tw_ser *s);

void tw_deser_init(tw_deser *d, const void *data, size_t len);
void tw_deser_bytes(tw_deser *d, void *out, size_t len);
uint8_t tw_deser_u8(tw_deser *d);
uint32_t tw_deser_u32(tw_deser *d);
uint64_t tw_deser_u64(tw_deser *d);
int64_t tw_deser_i64(tw_deser *d);
double tw_deser_f64(tw_deser *d);
/* A malloc'd copy (caller frees); NULL for a NULL string or on error
 * (tell them apart with tw_deser_ok()). */
char *tw_deser_str(tw_deser *d);
/* Reads a u64 element count and checks that at least count*min_bytes
 * bytes remain, so a corrupt count cannot drive a huge allocation. */
uint64_t tw_deser_count(tw_deser *d, size_t min_bytes);
/* Marks the reader failed (e.g. a semantic check of the caller). */
void tw_deser_fail(tw_deser *d);
int tw_deser_ok(const tw_deser *d);
/* Non-zero when every byte was consumed without error. */
int tw_deser_done(const tw_deser *d);

#endif /* TW_RULES_SER_H */
