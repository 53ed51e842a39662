/* smap.c - insertion-ordered string -> int64 map (see smap.h). */
#include "smap.h"

#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"

void tw_smap_init(tw_smap *m)
{
    memset(m, 0, sizeof(*m));
}

void tw_smap_free(tw_smap *m)
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

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static size_t find_slot(const tw_smap *m, const char *key)
{
    size_t mask = m->nslots - 1;
    size_t i = (size_t)str_hash(key) & mask;
    for (;;) {
        uint32_t s = m->slots[i];
        if (s == 0 || strcmp(m->ent[s - 1].key, key) == 0)
            return i;
        i = (i + 1) & mask;
    }
}

tw_smap_entry *tw_smap_get(const tw_smap *m, const char *key)
{
    if (m->n == 0)
        return NULL;
    uint32_t s = m->slots[find_slot(m, key)];
    return s != 0 ? &m->ent[s - 1] : NULL;
}

static int grow(tw_smap *m)
{
    size_t cap = m->cap < 8 ? 8 : m->cap * 2;
    if (cap >= UINT32_MAX / 2)
        return TW_ERR;
    tw_smap_entry *e = realloc(m->ent, cap * sizeof(*e));
    if (e == NULL)
        return TW_ERR;
    m->ent = e;
    m->cap = cap;
    size_t nslots = 2 * cap;
    uint32_t *slots = calloc(nslots, sizeof(*slots));
    if (slots == NULL)
        return TW_ERR;
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    for (size_t i = 0; i < m->n; i++)
        m->slots[find_slot(m, m->ent[i].key)] = (uint32_t)(i + 1);
    return TW_OK;
}

tw_smap_entry *tw_smap_put(tw_smap *m, const char *key)
{
    tw_smap_entry *e = tw_smap_get(m, key);
    if (e != NULL)
        return e;
    if (m->n + 1 > m->cap && grow(m) != TW_OK)
        return NULL;
    size_t len = strlen(key);
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, key, len + 1);
    size_t i = find_slot(m, key);
    e = &m->ent[m->n];
    e->key = copy;
    e->val = 0;
    e->sub = NULL;
    m->n++;
    m->slots[i] = (uint32_t)m->n;
    m->keybytes += len + 1;
    return e;
}

int tw_smap_add(tw_smap *m, const char *key, int64_t v)
{
    tw_smap_entry *e = tw_smap_put(m, key);
    if (e == NULL)
        return TW_ERR;
    e->val += v;
    return TW_OK;
}

tw_smap *tw_smap_sub(tw_smap *m, const char *key)
{
    tw_smap_entry *e = tw_smap_put(m, key);
    if (e == NULL)
        return NULL;
    if (e->sub == NULL) {
        e->sub = malloc(sizeof(*e->sub));
        if (e->sub == NULL)
            return NULL;
        tw_smap_init(e->sub);
    }
    return e->sub;
}

int64_t tw_smap_sum(const tw_smap *m)
{
    int64_t s = 0;
    for (size_t i = 0; i < m->n; i++)
        s += m->ent[i].val;
    return s;
}

size_t tw_smap_memory(const tw_smap *m)
{
    size_t b =
        m->cap * sizeof(*m->ent) + m->nslots * sizeof(*m->slots) + m->keybytes;
    for (size_t i = 0; i < m->n; i++)
        if (m->ent[i].sub != NULL)
            b += sizeof(tw_smap) + tw_smap_memory(m->ent[i].sub);
    return b;
}

void tw_smap_save(const tw_smap *m, int depth, tw_ser *s)
{
    tw_ser_u64(s, m->n);
    for (size_t i = 0; i < m->n; i++) {
        tw_ser_str(s, m->ent[i].key);
        if (depth > 1) {
            static const tw_smap empty;
            tw_smap_save(m->ent[i].sub != NULL ? m->ent[i].sub : &empty,
                         depth - 1, s);
        } else {
            tw_ser_i64(s, m->ent[i].val);
        }
    }
}

int tw_smap_restore(tw_smap *m, int depth, tw_deser *d)
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
