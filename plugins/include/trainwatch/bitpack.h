/*
 * trainwatch/bitpack.h - fixed-width bit packing for checkpoints.
 *
 * A run of n unsigned integers that all fit in `width` bits is written as
 * ceil(n * width / 8) bytes, least significant bit first. Used with a
 * base ("frame of reference"): a ring of 500 utilisations between 85.00
 * and 97.00 % is 500 offsets of at most 1 200 hundredths, 11 bits each,
 * instead of a 2-3 byte varint each.
 *
 * Header-only, libc-free. The caller checks that a block of
 * tw_bitpack_bytes(n, width) bytes is present before reading n values;
 * the reader never reads past that block.
 */
#ifndef TRAINWATCH_BITPACK_H
#define TRAINWATCH_BITPACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Widths above this are not packed (the 64-bit accumulator needs 8 spare
 * bits); callers keep another form for such ranges. */
#define TW_BITPACK_MAX_WIDTH 56u

/* Bits needed for every value in 0..max (0 for max == 0). */
static inline unsigned tw_bitpack_width(uint64_t max)
{
    unsigned w = 0;
    while (max != 0) {
        w++;
        max >>= 1;
    }
    return w;
}

/* Bytes of a block of n values of `width` bits (width <= 56, n < 2^32). */
static inline size_t tw_bitpack_bytes(size_t n, unsigned width)
{
    return (n * width + 7) / 8;
}

typedef struct tw_bitpack_writer {
    uint64_t acc;   /* bits not yet written, lowest first */
    unsigned nbits; /* how many (< 8 between calls) */
} tw_bitpack_writer;

/* Appends the low `width` bits of v (v < 2^width); the whole bytes that
 * became ready are copied to out (0..7 of them), their count returned. */
static inline unsigned tw_bitpack_put(tw_bitpack_writer *w, uint64_t v,
                                      unsigned width, uint8_t out[8])
{
    unsigned k = 0;
    w->acc |= v << w->nbits;
    w->nbits += width;
    while (w->nbits >= 8) {
        out[k++] = (uint8_t)w->acc;
        w->acc >>= 8;
        w->nbits -= 8;
    }
    return k;
}

/* The last, partial byte (0 or 1 of them; unused high bits are zero). */
static inline unsigned tw_bitpack_flush(tw_bitpack_writer *w, uint8_t out[8])
{
    if (w->nbits == 0)
        return 0;
    out[0] = (uint8_t)w->acc;
    w->acc = 0;
    w->nbits = 0;
    return 1;
}

typedef struct tw_bitpack_reader {
    const uint8_t *p, *end;
    uint64_t acc;
    unsigned nbits;
} tw_bitpack_reader;

static inline void tw_bitpack_reader_init(tw_bitpack_reader *r,
                                          const uint8_t *block, size_t len)
{
    r->p = block;
    r->end = block != NULL ? block + len : block; /* NULL for an empty one */
    r->acc = 0;
    r->nbits = 0;
}

/* The next value of `width` bits (0 past the block's end, which a caller
 * that checked the block's length never reaches). */
static inline uint64_t tw_bitpack_get(tw_bitpack_reader *r, unsigned width)
{
    while (r->nbits < width) {
        uint64_t b = r->p < r->end ? *r->p++ : 0;
        r->acc |= b << r->nbits;
        r->nbits += 8;
    }
    uint64_t v = width ? r->acc & (~0ull >> (64 - width)) : 0;
    r->acc = width < 64 ? r->acc >> width : 0;
    r->nbits -= width;
    return v;
}

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_BITPACK_H */
