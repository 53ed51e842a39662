/*
 * trainwatch/dmap.h - an insertion-ordered hash map from a double to a
 * uint64_t, with open addressing (linear probing) over a dense entry array.
 *
 * Keys compare like Python dict keys of floats: by value, so 0.0 and -0.0
 * are one key (the first inserted spelling is kept); all NaNs are one key.
 * Iterate in insertion order with `for (i = 0; i < m->n; i++) m->ent[i]`.
 * There is no single-key delete; tw_dmap_clear() empties the map and keeps
 * its memory.
 *
 * Memory: 16 bytes per entry slot (capacity grows by doubling) plus 4
 * bytes per index slot (index kept at most half full): about 24-48 bytes
 * per key. Ownership: the map owns its arrays (tw_dmap_free).
 *
 * Header-only (every function static inline): a plugin needs nothing
 * beyond the trainwatch/ headers and libc (libm for countmap).
 */
#ifndef TRAINWATCH_DMAP_H
#define TRAINWATCH_DMAP_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tw_dmap_entry {
    double key;
    uint64_t val;
} tw_dmap_entry;

typedef struct tw_dmap {
    tw_dmap_entry *ent; /* n used, cap allocated; insertion order */
    size_t n;
    size_t cap;
    uint32_t *slots; /* entry index + 1; 0 = empty                  */
    size_t nslots;   /* power of two (or 0)                          */
} tw_dmap;

static inline void tw_dmap_init(tw_dmap *m);
static inline void tw_dmap_free(tw_dmap *m);
static inline void tw_dmap_clear(tw_dmap *m);
/* The value of `key`, or NULL when absent. The pointer is valid until the
 * next insertion. */
static inline uint64_t *tw_dmap_get(const tw_dmap *m, double key);
/* The value of `key`, inserted with `init` when absent (*inserted says
 * which, may be NULL). NULL when memory runs out (the map is unchanged). */
static inline uint64_t *tw_dmap_put(tw_dmap *m, double key, uint64_t init,
                                    int *inserted);
/* Reserve room for `n` keys in total. TW_OK / TW_ERR. */
static inline int tw_dmap_reserve(tw_dmap *m, size_t n);
static inline size_t tw_dmap_memory(const tw_dmap *m);

/* ---- implementation ---------------------------------------------------- */

static inline void tw_dmap_init(tw_dmap *m)
{
    memset(m, 0, sizeof(*m));
}

static inline void tw_dmap_free(tw_dmap *m)
{
    free(m->ent);
    free(m->slots);
    tw_dmap_init(m);
}

static inline void tw_dmap_clear(tw_dmap *m)
{
    m->n = 0;
    if (m->slots != NULL)
        memset(m->slots, 0, m->nslots * sizeof(*m->slots));
}

static inline uint64_t tw_dmap_key_hash_(double k)
{
    uint64_t b;
    if (k == 0.0)
        k = 0.0; /* -0.0 hashes like 0.0 */
    if (isnan(k))
        k = NAN;
    memcpy(&b, &k, sizeof(b));
    /* splitmix64 finaliser: spreads the low-entropy mantissa bits. */
    b ^= b >> 30;
    b *= 0xbf58476d1ce4e5b9ull;
    b ^= b >> 27;
    b *= 0x94d049bb133111ebull;
    b ^= b >> 31;
    return b;
}

static inline int tw_dmap_key_eq_(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static inline size_t tw_dmap_find_slot_(const tw_dmap *m, double key)
{
    size_t mask = m->nslots - 1;
    size_t i = (size_t)tw_dmap_key_hash_(key) & mask;
    for (;;) {
        uint32_t s = m->slots[i];
        if (s == 0 || tw_dmap_key_eq_(m->ent[s - 1].key, key))
            return i;
        i = (i + 1) & mask;
    }
}

static inline int tw_dmap_rehash_(tw_dmap *m, size_t nslots)
{
    uint32_t *slots = (uint32_t *)calloc(nslots, sizeof(*slots));
    if (slots == NULL)
        return TW_ERR;
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    for (size_t e = 0; e < m->n; e++) {
        size_t i = tw_dmap_find_slot_(m, m->ent[e].key);
        m->slots[i] = (uint32_t)(e + 1);
    }
    return TW_OK;
}

static inline int tw_dmap_reserve(tw_dmap *m, size_t n)
{
    if (n >= UINT32_MAX / 2)
        return TW_ERR;
    if (n > m->cap) {
        tw_dmap_entry *e = (tw_dmap_entry *)realloc(m->ent, n * sizeof(*e));
        if (e == NULL)
            return TW_ERR;
        m->ent = e;
        m->cap = n;
    }
    size_t want = 16;
    while (want < 2 * n)
        want *= 2;
    if (want > m->nslots)
        return tw_dmap_rehash_(m, want);
    return TW_OK;
}

static inline uint64_t *tw_dmap_get(const tw_dmap *m, double key)
{
    if (m->n == 0)
        return NULL;
    uint32_t s = m->slots[tw_dmap_find_slot_(m, key)];
    return s != 0 ? &m->ent[s - 1].val : NULL;
}

static inline uint64_t *tw_dmap_put(tw_dmap *m, double key, uint64_t init,
                                    int *inserted)
{
    if (inserted != NULL)
        *inserted = 0;
    if (m->n > 0) {
        uint32_t s = m->slots[tw_dmap_find_slot_(m, key)];
        if (s != 0)
            return &m->ent[s - 1].val;
    }
    if (m->n + 1 > m->cap || 2 * (m->n + 1) > m->nslots) {
        size_t want = m->cap < 8 ? 8 : m->cap * 2;
        if (tw_dmap_reserve(m, want) != TW_OK)
            return NULL;
    }
    size_t i = tw_dmap_find_slot_(m, key);
    m->ent[m->n].key = key;
    m->ent[m->n].val = init;
    m->n++;
    m->slots[i] = (uint32_t)m->n;
    if (inserted != NULL)
        *inserted = 1;
    return &m->ent[m->n - 1].val;
}

static inline size_t tw_dmap_memory(const tw_dmap *m)
{
    return m->cap * sizeof(*m->ent) + m->nslots * sizeof(*m->slots);
}

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_DMAP_H */
