/*
 * fw_strmap.h - an insertion-ordered map from strings to an int64 value
 * plus an optional payload pointer: the Python dict the reference's
 * framework rules use for nodes, phases, operator names and step numbers
 * (iteration order = first insertion, RULES.md "insertion order").
 *
 * Ownership: the map copies every key and owns the copies, its arrays and
 * its hash table (fwsm_free). Payload pointers (`ptrs[i]`) belong to the
 * caller, who frees them before fwsm_free()/fwsm_clear().
 *
 * Memory: n keys cost their bytes + ~40 bytes each (key pointer, value,
 * payload pointer, two hash slots).
 */
#ifndef TW_RULES_FW_STRMAP_H
#define TW_RULES_FW_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct fwsm {
    char **keys;   /* insertion order */
    int64_t *vals; /* 0 for a new key */
    void **ptrs;   /* NULL for a new key */
    size_t n;
    size_t cap;
    uint32_t *slots; /* open addressing: entry index + 1, 0 = empty */
    size_t nslots;   /* power of two, >= 2 * cap */
} fwsm;

void fwsm_init(fwsm *m);
void fwsm_free(fwsm *m);
/* Drops every key (payloads must already be freed); keeps the capacity. */
void fwsm_clear(fwsm *m);
/* Index of `key`, or -1. */
long fwsm_find(const fwsm *m, const char *key);
/* Index of `key`, inserted at the end (value 0, payload NULL) when new;
 * -1 when out of memory. */
long fwsm_intern(fwsm *m, const char *key);

#endif /* TW_RULES_FW_STRMAP_H */
