/*
 * trainwatch/ser.h - checkpoint encoding shared by the built-in rules: a writer
 * over host->buf_write and a bounds-checked reader. Little-endian fixed-width
 * integers, doubles as their IEEE bit pattern (so restore is bit exact),
 * strings as u32 length + bytes (0xFFFFFFFF = NULL); compact encodings use
 * varints (LEB128: 7 bits a byte, low first; signed values zigzag-mapped).
 *
 * Errors are sticky: after the first failure every call is a no-op and
 * tw_ser_ok()/tw_deser_ok() return 0, so callers check once at the end.
 *
 * Ownership: tw_ser borrows the host and buffer; tw_deser borrows the
 * bytes. tw_deser_str() returns a malloc'd string owned by the caller.
 *
 * Header-only (every function static inline): a plugin needs nothing
 * beyond the trainwatch/ headers and libc (libm for countmap).
 */
#ifndef TRAINWATCH_SER_H
#define TRAINWATCH_SER_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

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

static inline void tw_ser_init(tw_ser *s, const tw_host *host, tw_buf *buf);
static inline void tw_ser_bytes(tw_ser *s, const void *data, size_t len);
static inline void tw_ser_u8(tw_ser *s, uint8_t v);
static inline void tw_ser_u32(tw_ser *s, uint32_t v);
static inline void tw_ser_u64(tw_ser *s, uint64_t v);
static inline void tw_ser_i64(tw_ser *s, int64_t v);
static inline void tw_ser_f64(tw_ser *s, double v);
static inline void tw_ser_str(tw_ser *s, const char *str); /* NULL allowed */
static inline void tw_ser_uv(tw_ser *s, uint64_t v);       /* varint */
static inline void tw_ser_sv(tw_ser *s, int64_t v);        /* zigzag varint */
/* Bytes tw_ser_uv / tw_ser_sv write for v (to choose a compact form). */
static inline size_t tw_ser_uv_len(uint64_t v);
static inline size_t tw_ser_sv_len(int64_t v);
static inline int tw_ser_ok(const tw_ser *s);

static inline void tw_deser_init(tw_deser *d, const void *data, size_t len);
static inline void tw_deser_bytes(tw_deser *d, void *out, size_t len);
/* The next len bytes in place (consumed), or NULL and a failed reader when
 * fewer remain. */
static inline const uint8_t *tw_deser_view(tw_deser *d, size_t len);
static inline uint8_t tw_deser_u8(tw_deser *d);
static inline uint32_t tw_deser_u32(tw_deser *d);
static inline uint64_t tw_deser_u64(tw_deser *d);
static inline int64_t tw_deser_i64(tw_deser *d);
static inline double tw_deser_f64(tw_deser *d);
/* A malloc'd copy (caller frees); NULL for a NULL string or on error
 * (tell them apart with tw_deser_ok()). */
static inline char *tw_deser_str(tw_deser *d);
/* Varints; more than 10 bytes or a value past 64 bits fails the reader. */
static inline uint64_t tw_deser_uv(tw_deser *d);
static inline int64_t tw_deser_sv(tw_deser *d);
/* Reads a u64 element count and checks that at least count*min_bytes
 * bytes remain, so a corrupt count cannot drive a huge allocation. */
static inline uint64_t tw_deser_count(tw_deser *d, size_t min_bytes);
/* Marks the reader failed (e.g. a semantic check of the caller). */
static inline void tw_deser_fail(tw_deser *d);
static inline int tw_deser_ok(const tw_deser *d);
/* Non-zero when every byte was consumed without error. */
static inline int tw_deser_done(const tw_deser *d);

/* ---- implementation ---------------------------------------------------- */

static inline void tw_ser_init(tw_ser *s, const tw_host *host, tw_buf *buf)
{
    s->host = host;
    s->buf = buf;
    s->err = 0;
}

static inline void tw_ser_bytes(tw_ser *s, const void *data, size_t len)
{
    if (s->err || len == 0)
        return;
    if (s->host->buf_write(s->buf, data, len) != TW_OK)
        s->err = 1;
}

static inline void tw_ser_u8(tw_ser *s, uint8_t v)
{
    tw_ser_bytes(s, &v, 1);
}

static inline void tw_ser_u32(tw_ser *s, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    tw_ser_bytes(s, b, sizeof(b));
}

static inline void tw_ser_u64(tw_ser *s, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    tw_ser_bytes(s, b, sizeof(b));
}

static inline void tw_ser_i64(tw_ser *s, int64_t v)
{
    tw_ser_u64(s, (uint64_t)v);
}

static inline void tw_ser_f64(tw_ser *s, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    tw_ser_u64(s, bits);
}

static inline void tw_ser_uv(tw_ser *s, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    tw_ser_bytes(s, b, n);
}

static inline void tw_ser_sv(tw_ser *s, int64_t v)
{
    tw_ser_uv(s, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static inline size_t tw_ser_uv_len(uint64_t v)
{
    size_t n = 1;
    for (v >>= 7; v != 0; v >>= 7)
        n++;
    return n;
}

static inline size_t tw_ser_sv_len(int64_t v)
{
    return tw_ser_uv_len(((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static inline void tw_ser_str(tw_ser *s, const char *str)
{
    if (str == NULL) {
        tw_ser_u32(s, UINT32_MAX);
        return;
    }
    size_t n = strlen(str);
    if (n >= UINT32_MAX) {
        s->err = 1;
        return;
    }
    tw_ser_u32(s, (uint32_t)n);
    tw_ser_bytes(s, str, n);
}

static inline int tw_ser_ok(const tw_ser *s)
{
    return !s->err;
}

static inline void tw_deser_init(tw_deser *d, const void *data, size_t len)
{
    d->p = (const uint8_t *)data;
    d->left = data != NULL ? len : 0;
    d->err = 0;
}

static inline void tw_deser_bytes(tw_deser *d, void *out, size_t len)
{
    if (d->err || len > d->left) {
        d->err = 1;
        if (len > 0)
            memset(out, 0, len);
        return;
    }
    if (len > 0)
        memcpy(out, d->p, len);
    d->p += len;
    d->left -= len;
}

static inline const uint8_t *tw_deser_view(tw_deser *d, size_t len)
{
    if (d->err || len > d->left) {
        d->err = 1;
        return NULL;
    }
    const uint8_t *at = d->p;
    d->p += len;
    d->left -= len;
    return at;
}

static inline uint8_t tw_deser_u8(tw_deser *d)
{
    uint8_t v;
    tw_deser_bytes(d, &v, 1);
    return v;
}

static inline uint32_t tw_deser_u32(tw_deser *d)
{
    uint8_t b[4];
    tw_deser_bytes(d, b, sizeof(b));
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)b[i] << (8 * i);
    return v;
}

static inline uint64_t tw_deser_u64(tw_deser *d)
{
    uint8_t b[8];
    tw_deser_bytes(d, b, sizeof(b));
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static inline int64_t tw_deser_i64(tw_deser *d)
{
    return (int64_t)tw_deser_u64(d);
}

static inline double tw_deser_f64(tw_deser *d)
{
    uint64_t bits = tw_deser_u64(d);
    double v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

static inline uint64_t tw_deser_uv(tw_deser *d)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (d->err || d->left == 0)
            break;
        uint8_t b = *d->p++;
        d->left--;
        if (shift == 63 && b > 1)
            break; /* past 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0)
            return v;
    }
    d->err = 1;
    return 0;
}

static inline int64_t tw_deser_sv(tw_deser *d)
{
    uint64_t u = tw_deser_uv(d);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static inline char *tw_deser_str(tw_deser *d)
{
    uint32_t n = tw_deser_u32(d);
    if (d->err || n == UINT32_MAX)
        return NULL;
    if (n > d->left) {
        d->err = 1;
        return NULL;
    }
    char *s = (char *)malloc((size_t)n + 1);
    if (s == NULL) {
        d->err = 1;
        return NULL;
    }
    tw_deser_bytes(d, s, n);
    s[n] = '\0';
    return s;
}

static inline uint64_t tw_deser_count(tw_deser *d, size_t min_bytes)
{
    uint64_t n = tw_deser_u64(d);
    if (d->err)
        return 0;
    if (min_bytes > 0 && n > d->left / min_bytes) {
        d->err = 1;
        return 0;
    }
    return n;
}

static inline void tw_deser_fail(tw_deser *d)
{
    d->err = 1;
}

static inline int tw_deser_ok(const tw_deser *d)
{
    return !d->err;
}

static inline int tw_deser_done(const tw_deser *d)
{
    return !d->err && d->left == 0;
}

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_SER_H */
