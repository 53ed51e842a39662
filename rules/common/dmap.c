/* dmap.c - insertion-ordered double -> uint64 hash map (see dmap.h). */
#include "dmap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"

void tw_dmap_init(tw_dmap *m)
{
    memset(m, 0, sizeof(*m));
}

void tw_dmap_free(tw_dmap *m)
{
    free(m->ent);
    free(m->slots);
    tw_dmap_init(m);
}

void tw_dmap_clear(tw_dmap *m)
{
    m->n = 0;
    if (m->slots != NULL)
        memset(m->slots, 0, m->nslots * sizeof(*m->slots));
}

static uint64_t key_hash(double k)
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

static int key_eq(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static size_t find_slot(const tw_dmap *m, double key)
{
    size_t mask = m->nslots - 1;
    size_t i = (size_t)key_hash(key) & mask;
    for (;;) {
        uint32_t s = m->slots[i];
        if (s == 0 || key_eq(m->ent[s - 1].key, key))
            return i;
        i = (i + 1) & mask;
    }
}

static int rehash(tw_dmap *m, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof(*slots));
    if (slots == NULL)
        return TW_ERR;
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    for (size_t e = 0; e < m->n; e++) {
        size_t i = find_slot(m, m->ent[e].key);
        m->slots[i] = (uint32_t)(e + 1);
    }
    return TW_OK;
}

int tw_dmap_reserve(tw_dmap *m, size_t n)
{
    if (n >= UINT32_MAX / 2)
        return TW_ERR;
    if (n > m->cap) {
        tw_dmap_entry *e = realloc(m->ent, n * sizeof(*e));
        if (e == NULL)
            return TW_ERR;
        m->ent = e;
        m->cap = n;
    }
    size_t want = 16;
    while (want < 2 * n)
        want *= 2;
    if (want > m->nslots)
        return rehash(m, want);
    return TW_OK;
}

uint64_t *tw_dmap_get(const tw_dmap *m, double key)
{
    if (m->n == 0)
        return NULL;
    uint32_t s = m->slots[find_slot(m, key)];
    return s != 0 ? &m->ent[s - 1].val : NULL;
}

uint64_t *tw_dmap_put(tw_dmap *m, double key, uint64_t init, int *inserted)
{
    if (inserted != NULL)
        *inserted = 0;
    if (m->n > 0) {
        uint32_t s = m->slots[find_slot(m, key)];
        if (s != 0)
            return &m->ent[s - 1].val;
    }
    if (m->n + 1 > m->cap || 2 * (m->n + 1) > m->nslots) {
        size_t want = m->cap < 8 ? 8 : m->cap * 2;
        if (tw_dmap_reserve(m, want) != TW_OK)
            return NULL;
    }
    size_t i = find_slot(m, key);
    m->ent[m->n].key = key;
    m->ent[m->n].val = init;
    m->n++;
    m->slots[i] = (uint32_t)m->n;
    if (inserted != NULL)
        *inserted = 1;
    return &m->ent[m->n - 1].val;
}

size_t tw_dmap_memory(const tw_dmap *m)
{
    return m->cap * sizeof(*m->ent) + m->nslots * sizeof(*m->slots);
}
