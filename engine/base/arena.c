/* arena.c - bump allocator (see arena.h). */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TW_ARENA_MIN_BLOCK (64u * 1024u)

struct tw_arena_block {
    tw_arena_block *next;
    size_t size;
    _Alignas(16) unsigned char data[];
};

void tw_arena_init(tw_arena *a)
{
    a->head = NULL;
    a->used = 0;
    a->total = 0;
}

void tw_arena_free(tw_arena *a)
{
    tw_arena_block *b = a->head;
    while (b != NULL) {
        tw_arena_block *next = b->next;
        free(b);
        b = next;
    }
    tw_arena_init(a);
}

/* A new head block of bsize bytes; NULL when out of memory. */
static tw_arena_block *tw_arena_push(tw_arena *a, size_t bsize)
{
    tw_arena_block *b = malloc(sizeof(*b) + bsize);
    if (b == NULL)
        return NULL;
    b->size = bsize;
    b->next = a->head;
    a->head = b;
    a->used = 0;
    return b;
}

size_t tw_arena_size(size_t n)
{
    return (n + 15u) & ~(size_t)15u;
}

int tw_arena_reserve(tw_arena *a, size_t size)
{
    size_t bsize = tw_arena_size(size);
    if (a->head != NULL || bsize < size)
        return a->head != NULL ? 0 : -1;
    return tw_arena_push(a, bsize) != NULL ? 0 : -1;
}

size_t tw_arena_capacity(const tw_arena *a)
{
    size_t n = 0;
    for (const tw_arena_block *b = a->head; b != NULL; b = b->next)
        n += b->size;
    return n;
}

void *tw_arena_alloc_uninit(tw_arena *a, size_t size)
{
    size_t need = tw_arena_size(size);
    if (need < size)
        return NULL; /* overflow */
    if (a->head == NULL || a->head->size - a->used < need) {
        size_t bsize = need > TW_ARENA_MIN_BLOCK ? need : TW_ARENA_MIN_BLOCK;
        if (tw_arena_push(a, bsize) == NULL)
            return NULL;
    }
    void *p = a->head->data + a->used;
    a->used += need;
    a->total += need;
    return p;
}

void *tw_arena_alloc(tw_arena *a, size_t size)
{
    void *p = tw_arena_alloc_uninit(a, size);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

char *tw_arena_strndup(tw_arena *a, const char *s, size_t len)
{
    if (s == NULL)
        return NULL;
    char *p = tw_arena_alloc(a, len + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *tw_arena_strdup(tw_arena *a, const char *s)
{
    return s == NULL ? NULL : tw_arena_strndup(a, s, strlen(s));
}
