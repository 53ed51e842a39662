/* strmap.c - string -> uint32 hash map (strmap.h). */
#include "strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "trainwatch/plugin.h"

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = tw_fnv1a64(s, len);
    return h ^ (h >> 29); /* the low bits index the table: mix the high */
}

void tw_strmap_init(tw_strmap *m)
{
    memset(m, 0, sizeof(*m));
    tw_arena_init(&m->keys);
}

void tw_strmap_free(tw_strmap *m)
{
    free(m->slots);
    tw_arena_free(&m->keys);
    memset(m, 0, sizeof(*m));
}

static tw_strmap_slot *find(const tw_strmap *m, const char *key, size_t len,
                            uint64_t h)
{
    if (m->cap == 0)
        return NULL;
    size_t i = h & (m->cap - 1);
    for (;;) {
        tw_strmap_slot *s = &m->slots[i];
        if (s->key == NULL ||
            (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0))
            return s;
        i = (i + 1) & (m->cap - 1);
    }
}

int tw_strmap_get(const tw_strmap *m, const char *key, size_t len,
                  uint32_t *value)
{
    tw_strmap_slot *s = find(m, key, len, hash_bytes(key, len));
    if (s == NULL || s->key == NULL)
        return 0;
    *value = s->value;
    return 1;
}

const char *tw_strmap_key(const tw_strmap *m, const char *key, size_t len)
{
    tw_strmap_slot *s = find(m, key, len, hash_bytes(key, len));
    return s != NULL ? s->key : NULL;
}

static int grow_to(tw_strmap *m, size_t ncap)
{
    tw_strmap_slot *ns = calloc(ncap, sizeof(*ns));
    if (ns == NULL)
        return TW_ERR;
    for (size_t i = 0; i < m->cap; i++) {
        tw_strmap_slot *o = &m->slots[i];
        if (o->key == NULL)
            continue;
        size_t k = o->hash & (ncap - 1);
        while (ns[k].key != NULL)
            k = (k + 1) & (ncap - 1);
        ns[k] = *o;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return TW_OK;
}

static int grow(tw_strmap *m)
{
    return grow_to(m, m->cap ? m->cap * 2 : 64);
}

int tw_strmap_reserve(tw_strmap *m, size_t n)
{
    size_t cap = m->cap ? m->cap : 64;
    while (n * 4 > cap * 3) {
        if (cap > SIZE_MAX / 2 / sizeof(tw_strmap_slot))
            return TW_ERR;
        cap *= 2;
    }
    return cap > m->cap ? grow_to(m, cap) : TW_OK;
}

int tw_strmap_put(tw_strmap *m, const char *key, size_t len, uint32_t value)
{
    if ((m->count + 1) * 4 > m->cap * 3 && grow(m) != TW_OK)
        return TW_ERR;
    uint64_t h = hash_bytes(key, len);
    tw_strmap_slot *s = find(m, key, len, h);
    if (s->key == NULL) {
        char *copy = tw_arena_strndup(&m->keys, key, len);
        if (copy == NULL)
            return TW_ERR;
        s->key = copy;
        s->len = len;
        s->hash = h;
        m->count++;
    }
    s->value = value;
    return TW_OK;
}
