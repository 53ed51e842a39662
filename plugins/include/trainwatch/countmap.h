/*
 * trainwatch/countmap.h - an exact multiset of doubles (value -> count) giving
 * the count, min, max and numpy-exact quantiles of every value ever added, in
 * memory proportional to the number of DISTINCT values, independent of the
 * insertion order. This is how whole-history box plots and maxima stay
 * bounded: utilisation percentages with two decimals have at
 * most 10 001 distinct values per series.
 *
 * Quantiles: numpy's default ("linear") quantile: with n values,
 * h = (n-1)*q; if h >= n-1 the answer is the maximum, otherwise i = floor(h),
 * t = h - i and the answer is numpy's _lerp of the i-th and (i+1)-th
 * smallest values (a + (b-a)*t if t < 0.5 else b - (b-a)*(1-t)). The sorted
 * view of the distinct keys and their cumulative counts is rebuilt lazily
 * (O(K log K) after new keys, O(K) after new counts), then each quantile
 * is a binary search. Results are bit-identical to numpy over the list.
 *
 * Cap (`max_keys`, 0 = none). With a cap, when an insertion would exceed
 * it the map is coarsened: every key (present and future) is rounded to a
 * multiple of a quantum, first 0.01 (rint(v*100)/100), then doubled
 * (0.02, 0.04, ...) each time the cap is hit again, merging counts. From
 * then on quantiles are approximate (error <= quantum/2 per order
 * statistic) but min, max and count stay exact (the extremes of the order
 * statistics are served from the exact min/max). Rules use no cap in
 * `reference` semantics and a cap in `fixed` (TW_COUNTMAP_DEFAULT_CAP).
 *
 * NaN values are counted apart: while any NaN was added, quantiles, min
 * and max are NaN (numpy propagates NaN).
 *
 * Memory: tw_countmap_memory(); about 24-48 bytes per distinct key in the
 * map plus 16 bytes per distinct key for the sorted view, i.e. <= ~0.7 MB
 * for the default cap.
 *
 * Ownership: the struct is embedded by its user; tw_countmap_free()
 * releases its arrays.
 *
 * Header-only (every function static inline): a plugin needs nothing
 * beyond the trainwatch/ headers and libc (libm for countmap).
 */
#ifndef TRAINWATCH_COUNTMAP_H
#define TRAINWATCH_COUNTMAP_H

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/dmap.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Distinct keys kept in `fixed` semantics before coarsening: all values
 * 0.00 .. 100.00 of a percentage with two decimals fit. */
#define TW_COUNTMAP_DEFAULT_CAP 10001u

typedef struct tw_countmap {
    tw_dmap map; /* key -> count                                     */
    uint64_t n;  /* values added (NaNs excluded)                     */
    uint64_t nnan;
    double min, max; /* exact, even after coarsening                     */
    size_t max_keys; /* 0 = no cap                                       */
    double quantum;  /* 0 = exact keys; else keys are multiples of it    */
    /* lazily rebuilt sorted view */
    double *skeys;
    uint64_t *cum; /* cum[i] = number of values <= skeys[i]            */
    size_t scap;
    size_t sn;
    int keys_dirty;   /* a key was added since the view was built         */
    int counts_dirty; /* a count changed since the view was built         */
} tw_countmap;

/* A box plot: quartiles, p95 and the whiskers (tw_countmap_box). */
typedef struct tw_box {
    double p25, p50, p75, p95, upper, lower;
} tw_box;

static inline void tw_countmap_init(tw_countmap *m, size_t max_keys);
static inline void tw_countmap_free(tw_countmap *m);
/* Forget every value (keeps the cap and the memory). */
static inline void tw_countmap_clear(tw_countmap *m);

/* Add `count` copies of v. TW_OK, or TW_ERR when memory runs out (the
 * value is then not counted). */
static inline int tw_countmap_add_n(tw_countmap *m, double v, uint64_t count);
static inline int tw_countmap_add(tw_countmap *m, double v);

static inline uint64_t
tw_countmap_count(const tw_countmap *m); /* NaNs included */
static inline size_t tw_countmap_distinct(const tw_countmap *m);
/* Non-zero while no coarsening happened (all answers exact). */
static inline int tw_countmap_exact(const tw_countmap *m);
/* NaN when empty. */
static inline double tw_countmap_min(const tw_countmap *m);
static inline double tw_countmap_max(const tw_countmap *m);

/* Q(v, q) into *out. TW_ERR when empty or out of memory. */
static inline int tw_countmap_quantile(tw_countmap *m, double q, double *out);
/* BOX(v): p25, p50, p75, p95, upper = min(p75 + 1.5*iqr, max),
 * lower = max(p25 - 1.5*iqr, min). TW_ERR when empty or out of memory. */
static inline int tw_countmap_box(tw_countmap *m, tw_box *out);

/* Bytes held by the map and its sorted view. */
static inline size_t tw_countmap_memory(const tw_countmap *m);

/* Checkpoint: the distinct keys with their counts, the exact min/max and
 * the coarsening state. Lossless and compact ("CMA2"): keys that are exact
 * hundredths (or exact multiples of the quantum) are written as varint
 * deltas of those integers, counts as varints, so a map of percentages
 * takes about 3-4 bytes per distinct key instead of 16; keys near
 * hundredths (sums of them) add their distance in ulps; other keys keep
 * their f64 bits. restore() also reads the older fixed-width "CMAP" form,
 * and replaces the content of an initialised map (its cap is kept). */
static inline void tw_countmap_save(const tw_countmap *m, tw_ser *s);
static inline int tw_countmap_restore(tw_countmap *m, tw_deser *d);

/* ---- implementation ---------------------------------------------------- */

static inline void tw_countmap_init(tw_countmap *m, size_t max_keys)
{
    memset(m, 0, sizeof(*m));
    tw_dmap_init(&m->map);
    m->max_keys = max_keys;
    m->min = NAN;
    m->max = NAN;
}

static inline void tw_countmap_free(tw_countmap *m)
{
    tw_dmap_free(&m->map);
    free(m->skeys);
    free(m->cum);
    size_t cap = m->max_keys;
    tw_countmap_init(m, cap);
}

static inline void tw_countmap_clear(tw_countmap *m)
{
    tw_dmap_clear(&m->map);
    m->n = 0;
    m->nnan = 0;
    m->min = NAN;
    m->max = NAN;
    m->quantum = 0.0;
    m->sn = 0;
    m->keys_dirty = 0;
    m->counts_dirty = 0;
}

static inline double tw_countmap_quantize_(double v, double quantum)
{
    if (quantum == 0.0 || !isfinite(v))
        return v;
    if (quantum == 0.01)
        return rint(v * 100.0) / 100.0;
    return rint(v / quantum) * quantum;
}

/* Re-key every entry with the next quantum until the cap holds. */
static inline int tw_countmap_coarsen_(tw_countmap *m)
{
    while (m->map.n > m->max_keys) {
        double q = m->quantum == 0.0 ? 0.01 : m->quantum * 2.0;
        tw_dmap next;
        tw_dmap_init(&next);
        for (size_t i = 0; i < m->map.n; i++) {
            double k = tw_countmap_quantize_(m->map.ent[i].key, q);
            uint64_t *c = tw_dmap_put(&next, k, 0, NULL);
            if (c == NULL) {
                tw_dmap_free(&next);
                return TW_ERR;
            }
            *c += m->map.ent[i].val;
        }
        tw_dmap_free(&m->map);
        m->map = next;
        m->quantum = q;
        m->keys_dirty = 1;
    }
    return TW_OK;
}

static inline int tw_countmap_add_n(tw_countmap *m, double v, uint64_t count)
{
    if (count == 0)
        return TW_OK;
    if (isnan(v)) {
        m->nnan += count;
        return TW_OK;
    }
    double k = tw_countmap_quantize_(v, m->quantum);
    int inserted = 0;
    uint64_t *c = tw_dmap_put(&m->map, k, 0, &inserted);
    if (c == NULL)
        return TW_ERR;
    *c += count;
    if (m->n == 0 || v < m->min)
        m->min = v;
    if (m->n == 0 || v > m->max)
        m->max = v;
    m->n += count;
    m->counts_dirty = 1;
    if (inserted) {
        m->keys_dirty = 1;
        if (m->max_keys > 0 && m->map.n > m->max_keys)
            return tw_countmap_coarsen_(m);
    }
    return TW_OK;
}

static inline int tw_countmap_add(tw_countmap *m, double v)
{
    return tw_countmap_add_n(m, v, 1);
}

static inline uint64_t tw_countmap_count(const tw_countmap *m)
{
    return m->n + m->nnan;
}

static inline size_t tw_countmap_distinct(const tw_countmap *m)
{
    return m->map.n;
}

static inline int tw_countmap_exact(const tw_countmap *m)
{
    return m->quantum == 0.0;
}

static inline double tw_countmap_min(const tw_countmap *m)
{
    return m->nnan > 0 ? NAN : m->min;
}

static inline double tw_countmap_max(const tw_countmap *m)
{
    return m->nnan > 0 ? NAN : m->max;
}

static inline int tw_countmap_cmp_double_(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Build the sorted keys and cumulative counts. */
static inline int tw_countmap_build_view_(tw_countmap *m)
{
    if (!m->keys_dirty && !m->counts_dirty)
        return TW_OK;
    size_t k = m->map.n;
    if (k > m->scap) {
        double *sk = (double *)realloc(m->skeys, k * sizeof(*sk));
        if (sk == NULL)
            return TW_ERR;
        m->skeys = sk;
        uint64_t *cu = (uint64_t *)realloc(m->cum, k * sizeof(*cu));
        if (cu == NULL)
            return TW_ERR;
        m->cum = cu;
        m->scap = k;
    }
    if (m->keys_dirty) {
        for (size_t i = 0; i < k; i++)
            m->skeys[i] = m->map.ent[i].key;
        qsort(m->skeys, k, sizeof(double), tw_countmap_cmp_double_);
    }
    uint64_t acc = 0;
    for (size_t i = 0; i < k; i++) {
        acc += *tw_dmap_get(&m->map, m->skeys[i]);
        m->cum[i] = acc;
    }
    m->sn = k;
    m->keys_dirty = 0;
    m->counts_dirty = 0;
    return TW_OK;
}

/* The value of rank r (0-based) in the sorted multiset. */
static inline double tw_countmap_at_rank_(const tw_countmap *m, uint64_t r)
{
    if (r == 0)
        return m->min;
    if (r == m->n - 1)
        return m->max;
    size_t lo = 0, hi = m->sn - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->cum[mid] > r)
            hi = mid;
        else
            lo = mid + 1;
    }
    return m->skeys[lo];
}

/* numpy's _lerp (numpy >= 1.22), as in engine/base/numeric.c. */
static inline double tw_countmap_lerp_(double a, double b, double t)
{
    double d = b - a;
    return t < 0.5 ? a + d * t : b - d * (1.0 - t);
}

static inline int tw_countmap_quantile(tw_countmap *m, double q, double *out)
{
    if (m->n + m->nnan == 0)
        return TW_ERR;
    if (m->nnan > 0) {
        *out = NAN;
        return TW_OK;
    }
    if (tw_countmap_build_view_(m) != TW_OK)
        return TW_ERR;
    double last = (double)(m->n - 1);
    double h = last * q;
    if (h >= last) {
        *out = m->max;
        return TW_OK;
    }
    if (h < 0)
        h = 0;
    double fi = floor(h);
    uint64_t i = (uint64_t)fi;
    *out = tw_countmap_lerp_(tw_countmap_at_rank_(m, i),
                             tw_countmap_at_rank_(m, i + 1), h - fi);
    return TW_OK;
}

static inline int tw_countmap_box(tw_countmap *m, tw_box *out)
{
    if (tw_countmap_quantile(m, 0.25, &out->p25) != TW_OK ||
        tw_countmap_quantile(m, 0.5, &out->p50) != TW_OK ||
        tw_countmap_quantile(m, 0.75, &out->p75) != TW_OK ||
        tw_countmap_quantile(m, 0.95, &out->p95) != TW_OK)
        return TW_ERR;
    double iqr = out->p75 - out->p25;
    double up = out->p75 + 1.5 * iqr;
    double lo = out->p25 - 1.5 * iqr;
    double mx = tw_countmap_max(m), mn = tw_countmap_min(m);
    /* Python's min(a, b)/max(a, b): the first unless the second wins. */
    out->upper = mx < up ? mx : up;
    out->lower = mn > lo ? mn : lo;
    return TW_OK;
}

static inline size_t tw_countmap_memory(const tw_countmap *m)
{
    return tw_dmap_memory(&m->map) +
           m->scap * (sizeof(*m->skeys) + sizeof(*m->cum));
}

#define COUNTMAP_TAG 0x434d4150u   /* "CMAP": f64 keys, u64 counts (read) */
#define COUNTMAP_TAG_2 0x32414d43u /* "CMA2": compact keys, varint counts */

/* Key encodings of "CMA2", chosen per map at save time. Keys stay in the
 * map's own order (restore re-inserts them in that order, so a restored
 * map is the same map), each as the zigzag delta of its integer from the
 * previous key's. */
enum {
    TW_COUNTMAP_KEYS_F64 = 0,        /* f64 bit patterns                  */
    TW_COUNTMAP_KEYS_HUNDREDTHS = 1, /* key == h / 100.0 for an integer h */
    TW_COUNTMAP_KEYS_QUANTA = 2,     /* key == h * quantum               */
    /* key's bits == the bits of h / 100.0 plus a residual r (zigzag
     * varint after the delta): sums and averages of hundredths that
     * rounding moved a few ulps off them */
    TW_COUNTMAP_KEYS_NEAR_HUNDREDTHS = 3,
};

/* The integer of key k in encoding mode; *ok = 0 when k is not exactly
 * (bit for bit) that integer's value. */
static inline double tw_countmap_key_of_(int64_t h, int mode, double quantum)
{
    return mode == TW_COUNTMAP_KEYS_QUANTA ? (double)h * quantum
                                           : (double)h / 100.0;
}

/* The key's bits minus its integer's key's bits (two's complement). */
static inline int64_t tw_countmap_residual_(double k, double approx)
{
    uint64_t a, b;
    memcpy(&a, &k, sizeof(a));
    memcpy(&b, &approx, sizeof(b));
    return (int64_t)(a - b);
}

static inline double tw_countmap_apply_residual_(double approx, int64_t r)
{
    uint64_t b;
    memcpy(&b, &approx, sizeof(b));
    b += (uint64_t)r;
    double k;
    memcpy(&k, &b, sizeof(k));
    return k;
}

/* The integer of key k in encoding mode; *ok = 0 when k has none (not
 * finite, too large) or, except for NEAR_HUNDREDTHS, when k is not
 * exactly (bit for bit) that integer's key. */
static inline int64_t tw_countmap_key_int_(double k, int mode, double quantum,
                                           int *ok)
{
    *ok = 0;
    if (!isfinite(k))
        return 0;
    double x = mode == TW_COUNTMAP_KEYS_QUANTA ? k / quantum : k * 100.0;
    if (!(fabs(x) < 9007199254740992.0)) /* 2^53: every integer exact */
        return 0;
    int64_t h = (int64_t)llrint(x);
    double back = tw_countmap_key_of_(h, mode, quantum);
    *ok = mode == TW_COUNTMAP_KEYS_NEAR_HUNDREDTHS ||
          memcmp(&back, &k, sizeof(k)) == 0;
    return h;
}

/* The first exact mode that fits every key; else NEAR_HUNDREDTHS when it
 * fits and is shorter than the f64 bits. */
static inline int tw_countmap_key_mode_(const tw_countmap *m)
{
    static const int modes[2] = {TW_COUNTMAP_KEYS_HUNDREDTHS,
                                 TW_COUNTMAP_KEYS_QUANTA};
    for (int t = 0; t < 2; t++) {
        if (modes[t] == TW_COUNTMAP_KEYS_QUANTA && !(m->quantum > 0.0))
            continue;
        int ok = 1;
        for (size_t i = 0; ok && i < m->map.n; i++)
            tw_countmap_key_int_(m->map.ent[i].key, modes[t], m->quantum, &ok);
        if (ok)
            return modes[t];
    }
    const int near = TW_COUNTMAP_KEYS_NEAR_HUNDREDTHS;
    size_t bytes = 0;
    int64_t prev = 0;
    for (size_t i = 0; i < m->map.n; i++) {
        int ok;
        double k = m->map.ent[i].key;
        int64_t h = tw_countmap_key_int_(k, near, 0.0, &ok);
        if (!ok)
            return TW_COUNTMAP_KEYS_F64;
        bytes += tw_ser_sv_len(h - prev) +
                 tw_ser_sv_len(tw_countmap_residual_(
                     k, tw_countmap_key_of_(h, near, 0.0)));
        prev = h;
    }
    return bytes < 8 * m->map.n ? near : TW_COUNTMAP_KEYS_F64;
}

static inline void tw_countmap_save(const tw_countmap *m, tw_ser *s)
{
    int mode = tw_countmap_key_mode_(m);
    tw_ser_u32(s, COUNTMAP_TAG_2);
    tw_ser_uv(s, m->n);
    tw_ser_uv(s, m->nnan);
    tw_ser_f64(s, m->min);
    tw_ser_f64(s, m->max);
    tw_ser_f64(s, m->quantum);
    tw_ser_u8(s, (uint8_t)mode);
    tw_ser_uv(s, m->map.n);
    int64_t prev = 0;
    for (size_t i = 0; i < m->map.n; i++) {
        if (mode == TW_COUNTMAP_KEYS_F64) {
            tw_ser_f64(s, m->map.ent[i].key);
        } else {
            int ok;
            int64_t h =
                tw_countmap_key_int_(m->map.ent[i].key, mode, m->quantum, &ok);
            tw_ser_sv(s, h - prev); /* |h| < 2^53: no overflow */
            prev = h;
            if (mode == TW_COUNTMAP_KEYS_NEAR_HUNDREDTHS)
                tw_ser_sv(s, tw_countmap_residual_(
                                 m->map.ent[i].key,
                                 tw_countmap_key_of_(h, mode, m->quantum)));
        }
        tw_ser_uv(s, m->map.ent[i].val);
    }
}

static inline int tw_countmap_restore(tw_countmap *m, tw_deser *d)
{
    tw_countmap_clear(m);
    uint32_t tag = tw_deser_u32(d);
    int compact = tag == COUNTMAP_TAG_2;
    if (tag != COUNTMAP_TAG && !compact)
        tw_deser_fail(d);
    uint64_t n = compact ? tw_deser_uv(d) : tw_deser_u64(d);
    uint64_t nnan = compact ? tw_deser_uv(d) : tw_deser_u64(d);
    double mn = tw_deser_f64(d);
    double mx = tw_deser_f64(d);
    double quantum = tw_deser_f64(d);
    int mode = compact ? (int)tw_deser_u8(d) : (int)TW_COUNTMAP_KEYS_F64;
    uint64_t k;
    if (compact) {
        k = tw_deser_uv(d);
        /* at least one byte of key and one of count per entry */
        if (mode > TW_COUNTMAP_KEYS_NEAR_HUNDREDTHS ||
            (mode == TW_COUNTMAP_KEYS_QUANTA && !(quantum > 0.0)) ||
            k > d->left / 2)
            tw_deser_fail(d);
    } else {
        k = tw_deser_count(d, 16);
    }
    if (!tw_deser_ok(d))
        return TW_ERR;
    if (tw_dmap_reserve(&m->map, (size_t)k) != TW_OK) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    uint64_t total = 0;
    int64_t prev = 0;
    for (uint64_t i = 0; i < k; i++) {
        double key;
        if (mode == TW_COUNTMAP_KEYS_F64) {
            key = tw_deser_f64(d);
        } else {
            int64_t delta = tw_deser_sv(d);
            if (delta > 0 ? prev > INT64_MAX - delta : prev < INT64_MIN - delta)
                tw_deser_fail(d);
            else
                prev += delta;
            key = tw_countmap_key_of_(prev, mode, quantum);
            if (mode == TW_COUNTMAP_KEYS_NEAR_HUNDREDTHS)
                key = tw_countmap_apply_residual_(key, tw_deser_sv(d));
        }
        uint64_t c = compact ? tw_deser_uv(d) : tw_deser_u64(d);
        if (!tw_deser_ok(d))
            return TW_ERR;
        int inserted = 0;
        uint64_t *slot = tw_dmap_put(&m->map, key, c, &inserted);
        if (slot == NULL || !inserted || c == 0 || c > UINT64_MAX - total) {
            tw_deser_fail(d);
            return TW_ERR;
        }
        total += c;
    }
    if (total != n) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    m->n = n;
    m->nnan = nnan;
    m->min = mn;
    m->max = mx;
    m->quantum = quantum;
    m->keys_dirty = 1;
    m->counts_dirty = 1;
    return TW_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_COUNTMAP_H */
