/*
 * hash.h - 64-bit FNV-1a (offset basis and prime from the FNV
 * specification), the engine's one hash for tables and short names.
 * Incremental: h = tw_fnv1a64_update(TW_FNV64_BASIS, p, n) over any number
 * of pieces equals tw_fnv1a64 of their concatenation. Not for anything an
 * adversary may choose to collide on purpose where that matters (tables
 * here are sized for the engine's own keys). Alert ids use their own
 * 128-bit FNV-1a (alert.c), whose bytes are a published contract.
 */
#ifndef TW_HASH_H
#define TW_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TW_FNV64_BASIS 1469598103934665603ULL
#define TW_FNV64_PRIME 1099511628211ULL

static inline uint64_t tw_fnv1a64_update(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= TW_FNV64_PRIME;
    }
    return h;
}

static inline uint64_t tw_fnv1a64(const void *p, size_t n)
{
    return tw_fnv1a64_update(TW_FNV64_BASIS, p, n);
}

#endif /* TW_HASH_H */
