/*
 * fw_strmap.c - insertion-ordered string map (see fw_strmap.h).
 */
#include "fw_strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fwsm_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

void fwsm_init(fwsm *m)
{
    memset(m, 0, sizeof(*m));
}

void fwsm_free(fwsm *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
    free(m->ptrs);
    free(m->slots);
    fwsm_init(m);
}

void fwsm_clear(fwsm *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->keys[i]);
    m->n = 0;
    if (m->slots)
        memset(m->slots, 0, m->nslots * sizeof(*m->slots));
}

long fwsm_find(const fwsm *m, const char *key)
{
    if (m->nslots == 0)
        return -1;
    size_t mask = m->nslots - 1;
    for (size_t i = (size_t)fwsm_hash(key) & mask;; i = (i + 1) & mask) {
        uint32_t v = m->slots[i];
        if (v == 0)
            return -1;
        if (strcmp(m->keys[v - 1], key) == 0)
            return (long)(v - 1);
    }
}

static void fwsm_place(uint32_t *slots, size_t nslots, const char *key,
                       uint32_t v)
{
    size_t mask = nslots - 1;
    size_t i = (size_t)fwsm_hash(key) & mask;
    while (slots[i] != 0)
        i = (i + 1) & mask;
    slots[i] = v;
}

static int fwsm_grow(fwsm *m)
{
    size_t cap = m->cap ? m->cap * 2 : 8;
    if (cap > UINT32_MAX / 4)
        return -1;
    char **keys = realloc(m->keys, cap * sizeof(*keys));
    if (!keys)
        return -1;
    m->keys = keys;
    int64_t *vals = realloc(m->vals, cap * sizeof(*vals));
    if (!vals)
        return -1;
    m->vals = vals;
    void **ptrs = realloc(m->ptrs, cap * sizeof(*ptrs));
    if (!ptrs)
        return -1;
    m->ptrs = ptrs;
    size_t nslots = cap * 2;
    uint32_t *slots = calloc(nslots, sizeof(*slots));
    if (!slots)
        return -1;
    for (size_t i = 0; i < m->n; i++)
        fwsm_place(slots, nslots, m->keys[i], (uint32_t)(i + 1));
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    m->cap = cap;
    return 0;
}

long fwsm_intern(fwsm *m, const char *key)
{
    long at = fwsm_find(m, key);
    if (at >= 0)
        return at;
    if (m->n == m->cap && fwsm_grow(m) != 0)
        return -1;
    char *copy = strdup(key);
    if (!copy)
        return -1;
    size_t i = m->n++;
    m->keys[i] = copy;
    m->vals[i] = 0;
    m->ptrs[i] = NULL;
    fwsm_place(m->slots, m->nslots, copy, (uint32_t)(i + 1));
    return (long)i;
}
