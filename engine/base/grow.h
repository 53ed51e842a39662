/*
 * grow.h - room in a growable array: makes *items (capacity *cap elements
 * of elem_size bytes) hold at least `need` elements, doubling from
 * `first`. TW_OK, or TW_ERR on out-of-memory or overflow with *items and
 * *cap unchanged (the caller still owns the old array). The one
 * definition for the engine's arrays of jobs, parts, alerts, ranges...
 *
 * Use: if (tw_grow((void **)&v, &cap, n + 1, sizeof(*v), 8) != TW_OK) ...
 */
#ifndef TW_GROW_H
#define TW_GROW_H

#include <stddef.h>

int tw_grow(void **items, size_t *cap, size_t need, size_t elem_size,
            size_t first);

#endif /* TW_GROW_H */
