/*
 * debug_collections.h - the collections files of a debug-output folder
 * (DEBUG_RULES.md §6.3: collections/000000000/<worker>_collections.json):
 * which collections each tensor was saved for, and _meta.num_workers.
 *
 * Membership comes from each collection's tensor_names (the reference's
 * hook exports the file again at close, so the last export names every
 * tensor it saw); include_regex is not applied. Several workers' files are
 * merged. A tensor's collection names are sorted.
 */
#ifndef TW_DEBUG_COLLECTIONS_H
#define TW_DEBUG_COLLECTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "strmap.h"

typedef struct tw_debug_name_list {
    const char **names;
    uint32_t n;
    uint32_t cap;
} tw_debug_name_list;

typedef struct tw_debug_collections {
    tw_strmap tensors; /* tensor name -> index in lists */
    tw_debug_name_list *lists;
    size_t nlists;
    size_t cap;
    tw_arena strings;
    int64_t num_workers; /* the largest _meta.num_workers; 0 when none */
    size_t files;        /* collections files read */
} tw_debug_collections;

void tw_debug_collections_init(tw_debug_collections *c);
void tw_debug_collections_free(tw_debug_collections *c);

/* Adds one collections file's bytes. TW_OK, or TW_ERR with a sentence
 * (what was wrong; the caller names the file). */
int tw_debug_collections_add(tw_debug_collections *c, const char *text,
                             size_t len, char *err, size_t errlen);

/* The sorted collection names of a tensor (NULL and 0 when none). */
const char *const *tw_debug_collections_of(const tw_debug_collections *c,
                                           const char *tensor, uint32_t *n);

#endif /* TW_DEBUG_COLLECTIONS_H */
