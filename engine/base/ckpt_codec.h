/*
 * ckpt_codec.h - the byte-level encoding of engine checkpoint blobs
 * (job_state.c, windows.c): LEB128 varints (zigzag for signed values),
 * doubles as their 8 IEEE bytes little-endian, strings as varint(len + 1)
 * then the bytes (0 = NULL). Portable across hosts of either byte order.
 *
 * Writer: appends to a caller's tw_buf and remembers a failed append, so a
 * sequence of puts is checked once at the end (tw_ckw.failed).
 * Reader: never reads past `end`; the first problem is kept in `why` (a
 * static string) and every later get returns 0, so a parser checks
 * tw_ckr.why once per item instead of after every field.
 *
 * Ownership: neither owns anything. tw_ckr_str() returns a pointer into the
 * input (not NUL-terminated); the caller copies what it keeps.
 */
#ifndef TW_CKPT_CODEC_H
#define TW_CKPT_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

typedef struct tw_ckw {
    tw_buf *b;
    int failed;
} tw_ckw;

static inline void tw_ckw_bytes(tw_ckw *w, const void *p, size_t n)
{
    if (!w->failed && tw_buf_append(w->b, p, n) != TW_OK)
        w->failed = 1;
}

static inline void tw_ckw_u8(tw_ckw *w, uint8_t v)
{
    tw_ckw_bytes(w, &v, 1);
}

static inline void tw_ckw_uv(tw_ckw *w, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    tw_ckw_bytes(w, t, n);
}

static inline void tw_ckw_iv(tw_ckw *w, int64_t v)
{
    uint64_t u = (uint64_t)v;
    tw_ckw_uv(w, (u << 1) ^ (v < 0 ? UINT64_MAX : 0));
}

static inline void tw_ckw_u64(tw_ckw *w, uint64_t v)
{
    uint8_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    tw_ckw_bytes(w, t, 8);
}

static inline void tw_ckw_f64(tw_ckw *w, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    tw_ckw_u64(w, u);
}

static inline void tw_ckw_str(tw_ckw *w, const char *s)
{
    if (s == NULL) {
        tw_ckw_uv(w, 0);
        return;
    }
    size_t n = strlen(s);
    tw_ckw_uv(w, (uint64_t)n + 1);
    tw_ckw_bytes(w, s, n);
}

typedef struct tw_ckr {
    const uint8_t *p, *start, *end;
    const char *why; /* NULL while everything read was well formed */
} tw_ckr;

static inline void tw_ckr_init(tw_ckr *r, const void *data, size_t len)
{
    r->start = r->p = (const uint8_t *)data;
    r->end = r->p + len;
    r->why = NULL;
}

static inline size_t tw_ckr_left(const tw_ckr *r)
{
    return (size_t)(r->end - r->p);
}

static inline size_t tw_ckr_offset(const tw_ckr *r)
{
    return (size_t)(r->p - r->start);
}

static inline void tw_ckr_fail(tw_ckr *r, const char *why)
{
    if (r->why == NULL)
        r->why = why; /* p stays at the offending item, for messages */
}

static inline const uint8_t *tw_ckr_bytes(tw_ckr *r, size_t n)
{
    if (r->why != NULL)
        return NULL;
    if (tw_ckr_left(r) < n) {
        tw_ckr_fail(r, "truncated");
        return NULL;
    }
    const uint8_t *q = r->p;
    r->p += n;
    return q;
}

static inline uint8_t tw_ckr_u8(tw_ckr *r)
{
    const uint8_t *q = tw_ckr_bytes(r, 1);
    return q != NULL ? q[0] : 0;
}

static inline uint64_t tw_ckr_uv_checked(tw_ckr *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        const uint8_t *q = tw_ckr_bytes(r, 1);
        if (q == NULL)
            return 0;
        if (shift == 63 && (*q & 0x7e) != 0) {
            tw_ckr_fail(r, "varint overflows 64 bits");
            return 0;
        }
        v |= (uint64_t)(*q & 0x7f) << shift;
        if ((*q & 0x80) == 0)
            return v;
    }
    tw_ckr_fail(r, "varint longer than 10 bytes");
    return 0;
}

/* Most varints are read far from the end: there, without a bounds check
 * per byte (restores read tens of millions). Anything unusual (the end
 * near, an overflow, over 10 bytes) takes the checked path, which says
 * what is wrong. */
static inline uint64_t tw_ckr_uv(tw_ckr *r)
{
    if (r->why == NULL && tw_ckr_left(r) >= 10) {
        const uint8_t *q = r->p;
        if ((q[0] & 0x80) == 0) {
            r->p = q + 1;
            return q[0];
        }
        uint64_t v = q[0] & 0x7f;
        for (unsigned i = 1; i < 9; i++) {
            v |= (uint64_t)(q[i] & 0x7f) << (7 * i);
            if ((q[i] & 0x80) == 0) {
                r->p = q + i + 1;
                return v;
            }
        }
    }
    return tw_ckr_uv_checked(r);
}

static inline int64_t tw_ckr_iv(tw_ckr *r)
{
    uint64_t u = tw_ckr_uv(r);
    return (int64_t)((u >> 1) ^ (0 - (u & 1)));
}

static inline uint64_t tw_ckr_u64(tw_ckr *r)
{
    const uint8_t *q = tw_ckr_bytes(r, 8);
    uint64_t v = 0;
    if (q != NULL)
        for (int i = 0; i < 8; i++)
            v |= (uint64_t)q[i] << (8 * i);
    return v;
}

static inline double tw_ckr_f64(tw_ckr *r)
{
    uint64_t u = tw_ckr_u64(r);
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

/* A count of items each at least `min_item` bytes long: refused when the
 * rest of the blob cannot hold that many, so a corrupt count never turns
 * into a huge allocation. */
static inline size_t tw_ckr_count(tw_ckr *r, size_t min_item)
{
    uint64_t n = tw_ckr_uv(r);
    if (r->why == NULL && min_item > 0 && n > tw_ckr_left(r) / min_item) {
        tw_ckr_fail(r, "count larger than the rest of the blob");
        return 0;
    }
    return (size_t)n;
}

/* *s = the bytes (not NUL-terminated), *n their length; *s = NULL for a
 * NULL string. Returns 0 on a malformed blob (r->why set). A string holding
 * a NUL byte is malformed: the engine's strings are C strings. */
static inline int tw_ckr_str(tw_ckr *r, const char **s, size_t *n)
{
    *s = NULL;
    *n = 0;
    uint64_t v = tw_ckr_uv(r);
    if (r->why != NULL)
        return 0;
    if (v == 0)
        return 1;
    if (v - 1 > tw_ckr_left(r)) {
        tw_ckr_fail(r, "truncated");
        return 0;
    }
    if (v == 1) {
        *s = "";
        return 1;
    }
    const uint8_t *q = tw_ckr_bytes(r, (size_t)(v - 1));
    if (memchr(q, 0, (size_t)(v - 1)) != NULL) {
        tw_ckr_fail(r, "string holds a NUL byte");
        return 0;
    }
    *s = (const char *)q;
    *n = (size_t)(v - 1);
    return 1;
}

#endif /* TW_CKPT_CODEC_H */
