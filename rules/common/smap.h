/*
 * smap.h - an insertion-ordered hash map from a string to an int64_t total
 * (and optionally a nested smap), the C form of the reference's Python
 * dicts of µs totals (`cpu_ops[phase][name]`, `general[phase]`, ...).
 * Iterate in insertion order over `m->ent[0 .. m->n-1]`.
 *
 * Memory: per key, the key's bytes + 1, a 24-byte entry and ~8 bytes of
 * index (tw_smap_memory() counts all of it, nested maps included).
 * Ownership: the map owns copies of its keys and its nested maps.
 */
#ifndef TW_RULES_SMAP_H
#define TW_RULES_SMAP_H

#include <stddef.h>
#include <stdint.h>

#include "ser.h"

typedef struct tw_smap tw_smap;

typedef struct tw_smap_entry {
    char *key;
    int64_t val;
    tw_smap *sub; /* nested map (NULL unless tw_smap_sub() created one) */
} tw_smap_entry;

struct tw_smap {
    tw_smap_entry *ent;
    size_t n;
    size_t cap;
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t nslots;
    size_t keybytes;
};

void tw_smap_init(tw_smap *m);
void tw_smap_free(tw_smap *m);
/* Entry of `key`, or NULL when absent. Valid until the next insertion. */
tw_smap_entry *tw_smap_get(const tw_smap *m, const char *key);
/* Entry of `key`, inserted with value 0 when absent; NULL on OOM. */
tw_smap_entry *tw_smap_put(tw_smap *m, const char *key);
/* m[key] += v. TW_OK / TW_ERR (OOM). */
int tw_smap_add(tw_smap *m, const char *key, int64_t v);
/* The nested map of `key` (created empty when absent); NULL on OOM. */
tw_smap *tw_smap_sub(tw_smap *m, const char *key);
/* Python's sum() of the values (0 for an empty map). */
int64_t tw_smap_sum(const tw_smap *m);
size_t tw_smap_memory(const tw_smap *m);

/* Checkpoint with `depth` levels (1 = flat, 2 = one nesting level). */
void tw_smap_save(const tw_smap *m, int depth, tw_ser *s);
int tw_smap_restore(tw_smap *m, int depth, tw_deser *d);

#endif /* TW_RULES_SMAP_H */
