/*
 * rel_hist.h - a relative-error histogram of doubles: bounded memory for a
 * whole history whose quantiles need only be close, not exact.
 *
 * A value x != 0 goes to the bucket i = ceil(log|x| / log g) of its sign,
 * g = (1 + alpha) / (1 - alpha); the bucket holds (g^(i-1), g^i] and is
 * represented by 2 g^i / (g + 1), which lies within alpha (relative) of
 * every value of the bucket. So every order statistic read off the
 * buckets is within alpha of the exact one (alpha 0.005: 0.5 %), and the
 * number of buckets depends on the values' range, not their number:
 * ln(max/min) / (2 alpha) buckets, ~230 per decade at 0.5 %.
 *
 * Limits: |x| < TW_REL_HIST_TINY counts as 0 (exactly 0 comes back);
 * |x| > 1/TW_REL_HIST_TINY goes to the outermost bucket, so at most
 * ~4 150 buckets per sign at 0.5 %. NaN is counted apart and ignored.
 * The count, min and max are exact.
 *
 * Buckets are visited in ascending value order with a key that is
 * monotone in the value (tw_rel_hist_key), so a caller can tell which
 * bucket holds a value it also keeps exactly.
 *
 * Ownership: the struct is embedded by its user; tw_rel_hist_free()
 * releases its arrays. Memory: 8 bytes per bucket between the smallest
 * and the largest magnitude seen, per sign.
 */
#ifndef TW_RULES_REL_HIST_H
#define TW_RULES_REL_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/ser.h"

#define TW_REL_HIST_TINY 1e-9

/* Counts of the buckets lo .. lo + n - 1 of one sign. */
typedef struct tw_rel_span {
    int32_t lo;
    uint32_t n;
    uint64_t *c;
} tw_rel_span;

typedef struct tw_rel_hist {
    double alpha;
    double lg;    /* log(g) */
    int32_t imax; /* largest bucket index (|x| = 1 / TINY) */
    tw_rel_span pos, neg;
    uint64_t zeros; /* |x| < TINY */
    uint64_t n;     /* values counted (NaN excluded) */
    uint64_t nnan;
    double min, max; /* exact; NaN while empty */
} tw_rel_hist;

/* 0 < alpha < 0.5. */
void tw_rel_hist_init(tw_rel_hist *h, double alpha);
void tw_rel_hist_free(tw_rel_hist *h);

/* Counts `count` copies of x. TW_OK, or TW_ERR when memory runs out (x is
 * then not counted). */
int tw_rel_hist_add_n(tw_rel_hist *h, double x, uint64_t count);

/* Non-decreasing in x; equal for two values exactly when they share a
 * bucket (the key passed to tw_rel_hist_each's callback). */
int64_t tw_rel_hist_key(const tw_rel_hist *h, double x);

/* Calls fn(ctx, key, representative, count) for each non-empty bucket in
 * ascending value order; stops at and returns the first non-zero return. */
typedef int (*tw_rel_hist_fn)(void *ctx, int64_t key, double rep,
                              uint64_t count);
int tw_rel_hist_each(const tw_rel_hist *h, tw_rel_hist_fn fn, void *ctx);

/* numpy's linear quantile over the representatives, clamped to the exact
 * min and max: within alpha of the exact quantile. TW_ERR when empty. */
int tw_rel_hist_quantile(const tw_rel_hist *h, double q, double *out);

/* Non-empty buckets (zero lane included). */
size_t tw_rel_hist_buckets(const tw_rel_hist *h);

/* Checkpoint: counts, min/max and the non-empty buckets as varint gaps
 * and counts (~2-4 bytes a bucket). restore() replaces the content of an
 * initialised histogram (same alpha) and checks its consistency. */
void tw_rel_hist_save(const tw_rel_hist *h, tw_ser *s);
int tw_rel_hist_restore(tw_rel_hist *h, tw_deser *d);

#endif /* TW_RULES_REL_HIST_H */
