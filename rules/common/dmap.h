/*
 * dmap.h - an insertion-ordered hash map from a double to a uint64_t,
 * with open addressing (linear probing) over a dense entry array.
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
 */
#ifndef TW_RULES_DMAP_H
#define TW_RULES_DMAP_H

#include <stddef.h>
#include <stdint.h>

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

void tw_dmap_init(tw_dmap *m);
void tw_dmap_free(tw_dmap *m);
void tw_dmap_clear(tw_dmap *m);
/* The value of `key`, or NULL when absent. The pointer is valid until the
 * next insertion. */
uint64_t *tw_dmap_get(const tw_dmap *m, double key);
/* The value of `key`, inserted with `init` when absent (*inserted says
 * which, may be NULL). NULL when memory runs out (the map is unchanged). */
uint64_t *tw_dmap_put(tw_dmap *m, double key, uint64_t init, int *inserted);
/* Reserve room for `n` keys in total. TW_OK / TW_ERR. */
int tw_dmap_reserve(tw_dmap *m, size_t n);
size_t tw_dmap_memory(const tw_dmap *m);

#endif /* TW_RULES_DMAP_H */
