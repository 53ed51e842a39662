/*
 * rel_hist.c - relative-error log-bucket histogram (rel_hist.h).
 */
#include "rel_hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"

/* Keys: positive buckets above KEY_OFF, negative ones below -KEY_OFF,
 * zero 0; KEY_OFF exceeds any bucket index. */
#define KEY_OFF ((int64_t)1 << 32)

void tw_rel_hist_init(tw_rel_hist *h, double alpha)
{
    memset(h, 0, sizeof(*h));
    h->alpha = alpha;
    h->lg = log((1.0 + alpha) / (1.0 - alpha));
    h->imax = (int32_t)ceil(-log(TW_REL_HIST_TINY) / h->lg);
    h->min = h->max = NAN;
}

void tw_rel_hist_free(tw_rel_hist *h)
{
    free(h->pos.c);
    free(h->neg.c);
    h->pos.c = h->neg.c = NULL;
    h->pos.n = h->neg.n = 0;
}

/* Bucket index of a magnitude >= TINY, clamped to the outermost. */
static int32_t bucket_of(const tw_rel_hist *h, double mag)
{
    double i = ceil(log(mag) / h->lg);
    if (!(i <= (double)h->imax)) /* also +inf */
        return h->imax;
    if (i < -(double)h->imax)
        return -h->imax;
    return (int32_t)i;
}

/* Makes span cover bucket i (with some slack so extremes that creep
 * outwards do not reallocate every time). */
static int span_cover(const tw_rel_hist *h, tw_rel_span *s, int32_t i)
{
    if (s->n > 0 && i >= s->lo && i < s->lo + (int32_t)s->n)
        return TW_OK;
    int32_t lo = s->n ? (i < s->lo ? i - 16 : s->lo) : i - 16;
    int32_t hi =
        s->n ? (i >= s->lo + (int32_t)s->n ? i + 16 : s->lo + (int32_t)s->n - 1)
             : i + 16;
    lo = lo < -h->imax ? -h->imax : lo;
    hi = hi > h->imax ? h->imax : hi;
    uint32_t n = (uint32_t)(hi - lo + 1);
    uint64_t *c = calloc(n, sizeof(*c));
    if (!c)
        return TW_ERR;
    if (s->n)
        memcpy(c + (s->lo - lo), s->c, s->n * sizeof(*c));
    free(s->c);
    s->c = c;
    s->lo = lo;
    s->n = n;
    return TW_OK;
}

int tw_rel_hist_add_n(tw_rel_hist *h, double x, uint64_t count)
{
    if (count == 0)
        return TW_OK;
    if (isnan(x)) {
        h->nnan += count;
        return TW_OK;
    }
    double mag = fabs(x);
    if (mag < TW_REL_HIST_TINY) {
        h->zeros += count;
    } else {
        tw_rel_span *s = x > 0 ? &h->pos : &h->neg;
        int32_t i = bucket_of(h, mag);
        if (span_cover(h, s, i) != TW_OK)
            return TW_ERR;
        s->c[i - s->lo] += count;
    }
    if (h->n == 0 || x < h->min)
        h->min = x;
    if (h->n == 0 || x > h->max)
        h->max = x;
    h->n += count;
    return TW_OK;
}

int64_t tw_rel_hist_key(const tw_rel_hist *h, double x)
{
    double mag = fabs(x);
    if (!(mag >= TW_REL_HIST_TINY)) /* NaN too */
        return 0;
    int64_t i = bucket_of(h, mag);
    return x > 0 ? KEY_OFF + i : -(KEY_OFF + i);
}

static double rep_of(const tw_rel_hist *h, int32_t i)
{
    /* 2 g^i / (g + 1) = g^i (1 - alpha) */
    return exp((double)i * h->lg) * (1.0 - h->alpha);
}

int tw_rel_hist_each(const tw_rel_hist *h, tw_rel_hist_fn fn, void *ctx)
{
    int rc;
    for (uint32_t k = h->neg.n; k-- > 0;) {
        if (h->neg.c[k] == 0)
            continue;
        int32_t i = h->neg.lo + (int32_t)k;
        if ((rc = fn(ctx, -(KEY_OFF + i), -rep_of(h, i), h->neg.c[k])) != 0)
            return rc;
    }
    if (h->zeros && (rc = fn(ctx, 0, 0.0, h->zeros)) != 0)
        return rc;
    for (uint32_t k = 0; k < h->pos.n; k++) {
        if (h->pos.c[k] == 0)
            continue;
        int32_t i = h->pos.lo + (int32_t)k;
        if ((rc = fn(ctx, KEY_OFF + i, rep_of(h, i), h->pos.c[k])) != 0)
            return rc;
    }
    return 0;
}

/* Finds the representatives of the ranks r0 and r0 + 1 (0-based). */
typedef struct rank_walk {
    uint64_t seen;
    uint64_t r0;
    double v0, v1;
    int have0;
} rank_walk;

static int walk_rank(void *ctx, int64_t key, double rep, uint64_t count)
{
    rank_walk *w = ctx;
    (void)key;
    uint64_t end = w->seen + count; /* ranks seen .. end - 1 */
    if (!w->have0 && w->r0 < end) {
        w->v0 = rep;
        w->have0 = 1;
    }
    if (w->r0 + 1 < end) {
        w->v1 = rep;
        return 1;
    }
    w->seen = end;
    return 0;
}

static double clamp(const tw_rel_hist *h, double v)
{
    return v < h->min ? h->min : v > h->max ? h->max : v;
}

int tw_rel_hist_quantile(const tw_rel_hist *h, double q, double *out)
{
    if (h->n == 0)
        return TW_ERR;
    double pos = (double)(h->n - 1) * q;
    if (pos >= (double)(h->n - 1)) {
        *out = h->max;
        return TW_OK;
    }
    rank_walk w = {0, (uint64_t)floor(pos), NAN, NAN, 0};
    tw_rel_hist_each(h, walk_rank, &w);
    double a = w.r0 == 0 ? h->min : clamp(h, w.v0);
    double b = w.r0 + 1 == h->n - 1 ? h->max : clamp(h, w.v1);
    double t = pos - (double)w.r0;
    *out = t < 0.5 ? a + (b - a) * t : b - (b - a) * (1.0 - t);
    return TW_OK;
}

static size_t span_used(const tw_rel_span *s)
{
    size_t k = 0;
    for (uint32_t i = 0; i < s->n; i++)
        k += s->c[i] != 0;
    return k;
}

size_t tw_rel_hist_buckets(const tw_rel_hist *h)
{
    return span_used(&h->pos) + span_used(&h->neg) + (h->zeros != 0);
}

/* sv first index, uv non-empty buckets, then per bucket uv gap from the
 * previous one and uv count. */
static void span_save(const tw_rel_span *s, tw_ser *w)
{
    size_t used = span_used(s);
    tw_ser_uv(w, used);
    int64_t prev = 0;
    int first = 1;
    for (uint32_t k = 0; k < s->n; k++) {
        if (s->c[k] == 0)
            continue;
        int64_t i = (int64_t)s->lo + k;
        if (first)
            tw_ser_sv(w, i);
        else
            tw_ser_uv(w, (uint64_t)(i - prev));
        tw_ser_uv(w, s->c[k]);
        prev = i;
        first = 0;
    }
}

static uint64_t span_restore(const tw_rel_hist *h, tw_rel_span *s, tw_deser *d)
{
    uint64_t used = tw_deser_uv(d);
    uint64_t total = 0;
    if (used > d->left / 2 || used > 2 * (uint64_t)h->imax + 1) {
        tw_deser_fail(d);
        return 0;
    }
    int64_t i = 0;
    for (uint64_t k = 0; k < used && tw_deser_ok(d); k++) {
        if (k == 0) {
            i = tw_deser_sv(d);
        } else {
            uint64_t gap = tw_deser_uv(d);
            if (gap == 0 || gap > 2 * (uint64_t)h->imax) {
                tw_deser_fail(d);
                break;
            }
            i += (int64_t)gap;
        }
        uint64_t c = tw_deser_uv(d);
        if (!tw_deser_ok(d) || i < -h->imax || i > h->imax || c == 0 ||
            total + c < total) {
            tw_deser_fail(d);
            break;
        }
        if (span_cover(h, s, (int32_t)i) != TW_OK) {
            tw_deser_fail(d);
            break;
        }
        s->c[i - s->lo] = c;
        total += c;
    }
    return total;
}

void tw_rel_hist_save(const tw_rel_hist *h, tw_ser *s)
{
    tw_ser_uv(s, h->n);
    tw_ser_uv(s, h->nnan);
    tw_ser_uv(s, h->zeros);
    if (h->n > 0) {
        tw_ser_f64(s, h->min);
        tw_ser_f64(s, h->max);
    }
    span_save(&h->pos, s);
    span_save(&h->neg, s);
}

int tw_rel_hist_restore(tw_rel_hist *h, tw_deser *d)
{
    tw_rel_hist_free(h);
    tw_rel_hist_init(h, h->alpha);
    h->n = tw_deser_uv(d);
    h->nnan = tw_deser_uv(d);
    h->zeros = tw_deser_uv(d);
    if (h->n > 0) {
        h->min = tw_deser_f64(d);
        h->max = tw_deser_f64(d);
        if (!(h->min <= h->max))
            tw_deser_fail(d);
    }
    uint64_t sp = span_restore(h, &h->pos, d);
    uint64_t sn = span_restore(h, &h->neg, d);
    /* the counts must add up (and not wrap) */
    if (tw_deser_ok(d) && (sp + sn < sp || sp + sn + h->zeros < sp + sn ||
                           sp + sn + h->zeros != h->n))
        tw_deser_fail(d);
    if (!tw_deser_ok(d)) {
        tw_rel_hist_free(h);
        tw_rel_hist_init(h, h->alpha);
        return TW_ERR;
    }
    return TW_OK;
}
