/*
 * arena.h - a bump allocator: many small allocations, freed all at once.
 *
 * Used for everything whose lifetime is "this batch" or "this job's
 * dictionary". Allocations are 16-byte aligned. Ownership: the arena owns
 * every block it handed out; tw_arena_free() releases them all.
 */
#ifndef TW_ARENA_H
#define TW_ARENA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tw_arena_block tw_arena_block;

typedef struct tw_arena {
    tw_arena_block *head; /* newest block first */
    size_t used;          /* bytes used in head */
    size_t total;         /* bytes handed out, for accounting */
} tw_arena;

void tw_arena_init(tw_arena *a);
void tw_arena_free(tw_arena *a);

/* Makes the first block `size` bytes (rounded up to 16) when the arena is
 * still empty, for a caller that knows about how much it will allocate:
 * a small decoded batch then holds no 64 KB block while it is buffered.
 * Allocations past it take new blocks as usual. A non-empty arena is left
 * as it is. 0, or -1 when out of memory. */
int tw_arena_reserve(tw_arena *a, size_t size);

/* Bytes of all its blocks (what it holds from malloc). */
size_t tw_arena_capacity(const tw_arena *a);

/* Bytes an allocation of n takes in an arena (n rounded up to 16), for a
 * caller sizing tw_arena_reserve; smaller than n only on overflow. */
size_t tw_arena_size(size_t n);

/* NULL on out-of-memory. Memory is zeroed. */
void *tw_arena_alloc(tw_arena *a, size_t size);
/* The same, not zeroed: for a caller that writes every byte (restored
 * samples, copies). */
void *tw_arena_alloc_uninit(tw_arena *a, size_t size);
/* Copy of s (len bytes, NUL added). NULL in -> NULL out. */
char *tw_arena_strndup(tw_arena *a, const char *s, size_t len);
char *tw_arena_strdup(tw_arena *a, const char *s);

#ifdef __cplusplus
}
#endif

#endif /* TW_ARENA_H */
