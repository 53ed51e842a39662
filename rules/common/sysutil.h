/*
 * sysutil.h - small containers shared by the system-metric rules
 * (GPUMemoryIncrease, BatchSize, LoadBalancing, OverallSystemUsage):
 *
 *  - tw_dring:  the newest `cap` doubles of a series (ring buffer);
 *  - tw_namemap: string -> dense index in insertion order (NULL is a key of
 *               its own, like Python's None), used for node ids, GPU and
 *               core names;
 *  - tw_seriestab: the series of one metric keyed like the reference's
 *               nested dicts, (node id, series name), with dense ids in
 *               first-seen order and a cache from the host's series ids.
 *
 * All of them save to / load from the checkpoint encoding of ser.h.
 * Errors are allocation failures (TW_ERR); nothing is changed then.
 *
 * Ownership: each container owns its storage (tw_*_free); tw_namemap owns
 * copies of its keys, and tw_namemap_key() returns a pointer owned by the
 * map, valid until the map is freed or cleared.
 */
#ifndef TW_RULES_SYSUTIL_H
#define TW_RULES_SYSUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

/* Distinct values kept, in `fixed` semantics, by the count maps that only
 * feed a report (OverallSystemUsage's statistics, BatchSize's box plots
 * when its verdict reads the ring): past it the map coarsens
 * (trainwatch/countmap.h), so each reported order statistic is within
 * quantum/2 <= max(R/(K-1), 0.005) of the exact one, R = max - min of the
 * values, K = this cap (more than K keys at quantum q/2 means
 * R/(q/2) + 2 > K + 1), while min, max and counts stay exact. 256 keeps a map
 * under ~1 KB saved; at 10 001 (TW_COUNTMAP_DEFAULT_CAP) it took up to
 * ~30 KB, and its unrounded sums ~8 bytes a key until coarsened. */
#define TW_SYS_REPORT_CAP 256u

/* ---- ring of doubles ------------------------------------------------ */

typedef struct tw_dring {
    double *v;
    uint32_t cap;
    uint32_t len;  /* values held, <= cap */
    uint32_t head; /* index of the next write */
} tw_dring;

/* cap may be 0 (the ring then holds nothing). */
int tw_dring_init(tw_dring *r, uint32_t cap);
void tw_dring_free(tw_dring *r);
void tw_dring_clear(tw_dring *r);
void tw_dring_push(tw_dring *r, double x);
/* Copies the values from the `skip_newest`+n-th newest to the
 * `skip_newest`+1-th newest, oldest first, into out. Returns how many
 * were copied (fewer when the ring holds fewer). */
size_t tw_dring_copy(const tw_dring *r, size_t skip_newest, size_t n,
                     double *out);
/* Oldest first; values that are all exact hundredths (utilisation with two
 * decimals) as varint deltas, ~1-3 bytes each, else their f64 bits. */
void tw_dring_save(const tw_dring *r, tw_ser *s);
/* The same for a ring of averages over `divisor` (> 1) values with two
 * decimals (a node's CPU average over its cores): ~3 bytes a value
 * instead of 8, still lossless (falls back to the other forms). */
void tw_dring_save_avg(const tw_dring *r, tw_ser *s, uint32_t divisor);
/* Restores into an initialised ring of the same capacity; reads both the
 * compact form and the older plain one. */
int tw_dring_load(tw_dring *r, tw_deser *d);

/* ---- string -> index (named apart from engine/base/strmap.h's tw_strmap,
 * which rules cannot use: rules build against plugin.h only) ---------- */

typedef struct tw_namemap {
    char **keys; /* insertion order; NULL entry = the None key */
    uint32_t count;
    uint32_t keys_cap;
    uint32_t *slots; /* open addressing: index + 1, 0 = empty */
    uint32_t nslots; /* power of two */
} tw_namemap;

void tw_namemap_init(tw_namemap *m);
void tw_namemap_free(tw_namemap *m);
/* Index of `key` (may be NULL) or UINT32_MAX when absent. */
uint32_t tw_namemap_find(const tw_namemap *m, const char *key);
/* Index of `key`, adding a copy when absent (*added = 1 then). */
int tw_namemap_add(tw_namemap *m, const char *key, uint32_t *idx, int *added);
const char *tw_namemap_key(const tw_namemap *m, uint32_t idx);
void tw_namemap_save(const tw_namemap *m, tw_ser *s);
int tw_namemap_load(tw_namemap *m, tw_deser *d); /* into an empty map */

/* ---- (node, name) series table ------------------------------------ */

typedef struct tw_seriestab {
    tw_namemap keys;   /* "<node>\x1f<name>" (or "<node>\x1e" for a None
                         name) -> dense id, first-seen order           */
    tw_namemap nodes;  /* node ids, first-seen order within this table */
    uint32_t *node_of; /* dense id -> index in `nodes`                 */
    uint32_t node_cap;
    uint32_t *cache; /* host series id -> dense id + 1; 0 = unknown,
                        UINT32_MAX = not in this table               */
    uint32_t cache_cap;
} tw_seriestab;

#define TW_SERIES_NONE UINT32_MAX

void tw_seriestab_init(tw_seriestab *t);
void tw_seriestab_free(tw_seriestab *t);
uint32_t tw_seriestab_count(const tw_seriestab *t);
uint32_t tw_seriestab_nnodes(const tw_seriestab *t);
/* Dense id of host series `sid` of `scan`, adding it when it is new and
 * `wanted(series)` holds; TW_SERIES_NONE in *id when it does not. *added
 * (may be NULL) says whether the id is new. TW_ERR: out of memory. */
int tw_seriestab_resolve(tw_seriestab *t, const tw_scan *scan, uint32_t sid,
                         int (*wanted)(const tw_series *s), uint32_t *id,
                         int *added);
/* Dense id of (node, name), or TW_SERIES_NONE. */
uint32_t tw_seriestab_find(const tw_seriestab *t, const char *node,
                           const char *name);
/* Adds (node, name) directly (restore, tests). */
int tw_seriestab_add(tw_seriestab *t, const char *node, const char *name,
                     uint32_t *id, int *added);
uint32_t tw_seriestab_node(const tw_seriestab *t, uint32_t id);
const char *tw_seriestab_node_name(const tw_seriestab *t, uint32_t node);
/* The series name; NULL for a None name. Owned by the table. */
const char *tw_seriestab_name(const tw_seriestab *t, uint32_t id);
/* Checkpoint: the (node, name) pairs in id order; load into an empty
 * table gives the same ids. */
void tw_seriestab_save(const tw_seriestab *t, tw_ser *s);
int tw_seriestab_load(tw_seriestab *t, tw_deser *d);

/* ---- misc ------------------------------------------------------------ */

/* String equality where NULL (a JSON null) equals nothing. */
int tw_sys_str_eq(const char *a, const char *b);

/* Grows *arr (elements of `size` bytes, capacity *cap) to hold at least
 * `need` elements, zeroing the new tail. */
int tw_sys_grow(void **arr, size_t size, uint32_t *cap, uint32_t need);

#endif /* TW_RULES_SYSUTIL_H */
