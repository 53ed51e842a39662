/*
 * trainwatch/smap.h - an insertion-ordered hash map from a string to an int64_t
 * total (and optionally a nested smap), the C form of the reference's Python
 * dicts of µs totals (`cpu_ops[phase][name]`, `general[phase]`, ...).
 * Iterate in insertion order over `m->ent[0 .. m->n-1]`.
 *
 * Memory: per key, the key's bytes + 1, a 24-byte entry and ~8 bytes of
 * index (tw_smap_memory() counts all of it, nested maps included).
 * Ownership: the map owns copies of its keys and its nested maps.
 *
 * Header-only (every function static inline): a plugin needs nothing
 * beyond the trainwatch/ headers and libc (libm for countmap).
 */
#ifndef TRAINWATCH_SMAP_H
#define TRAINWATCH_SMAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

#ifdef __cplusplus
extern "C" {
#endif

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

static inline void tw_smap_init(tw_smap *m);
static inline void tw_smap_free(tw_smap *m);
/* Entry of `key`, or NULL when absent. Valid until the next insertion. */
static inline tw_smap_entry *tw_smap_get(const tw_smap *m, const char *key);
/* Entry of `key`, inserted with value 0 when absent; NULL on OOM. */
static inline tw_smap_entry *tw_smap_put(tw_smap *m, const char *key);
/* m[key] += v. TW_OK / TW_ERR (OOM). */
static inline int tw_smap_add(tw_smap *m, const char *key, int64_t v);
/* The nested map of `key` (created empty when absent); NULL on OOM. */
static inline tw_smap *tw_smap_sub(tw_smap *m, const char *key);
/* Python's sum() of the values (0 for an empty map). */
static inline int64_t tw_smap_sum(const tw_smap *m);
static inline size_t tw_smap_memory(const tw_smap *m);

/* Checkpoint with `depth` levels (1 = flat, 2 = one nesting level). */
static inline void tw_smap_save(const tw_smap *m, int depth, tw_ser *s);
static inline int tw_smap_restore(tw_smap *m, int depth, tw_deser *d);

/* ---- implementation ---------------------------------------------------- */

static inline void tw_smap_init(tw_smap *m)
{
    memset(m, 0, sizeof(*m));
}

static inline void tw_smap_free(tw_smap *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->ent[i].key);
        if (m->ent[i].sub != NULL) {
            tw_smap_free(m->ent[i].sub);
            free(m->ent[i].sub);
        }
    }
    free(m->ent);
    free(m->slots);
    tw_smap_init(m);
}

static inline uint64_t tw_smap_str_hash_(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static inline size_t tw_smap_find_slot_(const tw_smap *m, const char *key)
{
    size_t mask = m->nslots - 1;
    size_t i = (size_t)tw_smap_str_hash_(key) & mask;
    for (;;) {
        uint32_t s = m->slots[i];
        if (s == 0 || strcmp(m->ent[s - 1].key, key) == 0)
            return i;
        i = (i + 1) & mask;
    }
}

static inline tw_smap_entry *tw_smap_get(const tw_smap *m, const char *key)
{
    if (m->n == 0)
        return NULL;
    uint32_t s = m->slots[tw_smap_find_slot_(m, key)];
    return s != 0 ? &m->ent[s - 1] : NULL;
}

static inline int tw_smap_grow_(tw_smap *m)
{
    size_t cap = m->cap < 8 ? 8 : m->cap * 2;
    if (cap >= UINT32_MAX / 2)
        return TW_ERR;
    tw_smap_entry *e = (tw_smap_entry *)realloc(m->ent, cap * sizeof(*e));
    if (e == NULL)
        return TW_ERR;
    m->ent = e;
    m->cap = cap;
    size_t nslots = 2 * cap;
    uint32_t *slots = (uint32_t *)calloc(nslots, sizeof(*slots));
    if (slots == NULL)
        return TW_ERR;
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    for (size_t i = 0; i < m->n; i++)
        m->slots[tw_smap_find_slot_(m, m->ent[i].key)] = (uint32_t)(i + 1);
    return TW_OK;
}

static inline tw_smap_entry *tw_smap_put(tw_smap *m, const char *key)
{
    tw_smap_entry *e = tw_smap_get(m, key);
    if (e != NULL)
        return e;
    if (m->n + 1 > m->cap && tw_smap_grow_(m) != TW_OK)
        return NULL;
    size_t len = strlen(key);
    char *copy = (char *)malloc(len + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, key, len + 1);
    size_t i = tw_smap_find_slot_(m, key);
    e = &m->ent[m->n];
    e->key = copy;
    e->val = 0;
    e->sub = NULL;
    m->n++;
    m->slots[i] = (uint32_t)m->n;
    m->keybytes += len + 1;
    return e;
}

static inline int tw_smap_add(tw_smap *m, const char *key, int64_t v)
{
    tw_smap_entry *e = tw_smap_put(m, key);
    if (e == NULL)
        return TW_ERR;
    e->val += v;
    return TW_OK;
}

static inline tw_smap *tw_smap_sub(tw_smap *m, const char *key)
{
    tw_smap_entry *e = tw_smap_put(m, key);
    if (e == NULL)
        return NULL;
    if (e->sub == NULL) {
        e->sub = (tw_smap *)malloc(sizeof(*e->sub));
        if (e->sub == NULL)
            return NULL;
        tw_smap_init(e->sub);
    }
    return e->sub;
}

static inline int64_t tw_smap_sum(const tw_smap *m)
{
    int64_t s = 0;
    for (size_t i = 0; i < m->n; i++)
        s += m->ent[i].val;
    return s;
}

static inline size_t tw_smap_memory(const tw_smap *m)
{
    size_t b =
        m->cap * sizeof(*m->ent) + m->nslots * sizeof(*m->slots) + m->keybytes;
    for (size_t i = 0; i < m->n; i++)
        if (m->ent[i].sub != NULL)
            b += sizeof(tw_smap) + tw_smap_memory(m->ent[i].sub);
    return b;
}

static inline void tw_smap_save(const tw_smap *m, int depth, tw_ser *s)
{
    tw_ser_u64(s, m->n);
    for (size_t i = 0; i < m->n; i++) {
        tw_ser_str(s, m->ent[i].key);
        if (depth > 1) {
            if (m->ent[i].sub != NULL)
                tw_smap_save(m->ent[i].sub, depth - 1, s);
            else
                tw_ser_u64(s, 0); /* what an empty map saves */
        } else {
            tw_ser_i64(s, m->ent[i].val);
        }
    }
}

static inline int tw_smap_restore(tw_smap *m, int depth, tw_deser *d)
{
    tw_smap_free(m);
    uint64_t n = tw_deser_count(d, 4);
    for (uint64_t i = 0; i < n && tw_deser_ok(d); i++) {
        char *key = tw_deser_str(d);
        if (key == NULL) {
            tw_deser_fail(d);
            return TW_ERR;
        }
        if (tw_smap_get(m, key) != NULL) { /* duplicate key: corrupt */
            free(key);
            tw_deser_fail(d);
            return TW_ERR;
        }
        if (depth > 1) {
            tw_smap *sub = tw_smap_sub(m, key);
            free(key);
            if (sub == NULL || tw_smap_restore(sub, depth - 1, d) != TW_OK) {
                tw_deser_fail(d);
                return TW_ERR;
            }
        } else {
            tw_smap_entry *e = tw_smap_put(m, key);
            free(key);
            if (e == NULL) {
                tw_deser_fail(d);
                return TW_ERR;
            }
            e->val = tw_deser_i64(d);
        }
    }
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_SMAP_H */
