/*
 * strmap.h - an open-addressing hash map from strings to uint32 values.
 * Keys are copied into the map's own arena; the map owns them.
 */
#ifndef TW_STRMAP_H
#define TW_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"

typedef struct tw_strmap_slot {
    const char *key; /* NULL = empty */
    size_t len;
    uint64_t hash;
    uint32_t value;
} tw_strmap_slot;

typedef struct tw_strmap {
    tw_strmap_slot *slots;
    size_t cap; /* power of two */
    size_t count;
    tw_arena keys;
} tw_strmap;

void tw_strmap_init(tw_strmap *m);
void tw_strmap_free(tw_strmap *m);
/* 1 and *value when found, 0 otherwise. */
int tw_strmap_get(const tw_strmap *m, const char *key, size_t len,
                  uint32_t *value);
/* Inserts or overwrites. TW_ERR on out-of-memory. */
int tw_strmap_put(tw_strmap *m, const char *key, size_t len, uint32_t value);
/* Room for n keys in all without growing again (a restore knows how many
 * come). TW_ERR on out-of-memory. */
int tw_strmap_reserve(tw_strmap *m, size_t n);
/* The copy of `key` the map holds (NULL when absent). */
const char *tw_strmap_key(const tw_strmap *m, const char *key, size_t len);

#endif /* TW_STRMAP_H */
