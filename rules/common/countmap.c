/* countmap.c - exact multiset of doubles with numpy quantiles (see
 * countmap.h). */
#include "countmap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tw_countmap_init(tw_countmap *m, size_t max_keys)
{
    memset(m, 0, sizeof(*m));
    tw_dmap_init(&m->map);
    m->max_keys = max_keys;
    m->min = NAN;
    m->max = NAN;
}

void tw_countmap_free(tw_countmap *m)
{
    tw_dmap_free(&m->map);
    free(m->skeys);
    free(m->cum);
    size_t cap = m->max_keys;
    tw_countmap_init(m, cap);
}

void tw_countmap_clear(tw_countmap *m)
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

static double quantize(double v, double quantum)
{
    if (quantum == 0.0 || !isfinite(v))
        return v;
    if (quantum == 0.01)
        return rint(v * 100.0) / 100.0;
    return rint(v / quantum) * quantum;
}

/* Re-key every entry with the next quantum until the cap holds. */
static int coarsen(tw_countmap *m)
{
    while (m->map.n > m->max_keys) {
        double q = m->quantum == 0.0 ? 0.01 : m->quantum * 2.0;
        tw_dmap next;
        tw_dmap_init(&next);
        for (size_t i = 0; i < m->map.n; i++) {
            double k = quantize(m->map.ent[i].key, q);
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

int tw_countmap_add_n(tw_countmap *m, double v, uint64_t count)
{
    if (count == 0)
        return TW_OK;
    if (isnan(v)) {
        m->nnan += count;
        return TW_OK;
    }
    double k = quantize(v, m->quantum);
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
            return coarsen(m);
    }
    return TW_OK;
}

int tw_countmap_add(tw_countmap *m, double v)
{
    return tw_countmap_add_n(m, v, 1);
}

uint64_t tw_countmap_count(const tw_countmap *m)
{
    return m->n + m->nnan;
}

size_t tw_countmap_distinct(const tw_countmap *m)
{
    return m->map.n;
}

int tw_countmap_exact(const tw_countmap *m)
{
    return m->quantum == 0.0;
}

double tw_countmap_min(const tw_countmap *m)
{
    return m->nnan > 0 ? NAN : m->min;
}

double tw_countmap_max(const tw_countmap *m)
{
    return m->nnan > 0 ? NAN : m->max;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Build the sorted keys and cumulative counts. */
static int build_view(tw_countmap *m)
{
    if (!m->keys_dirty && !m->counts_dirty)
        return TW_OK;
    size_t k = m->map.n;
    if (k > m->scap) {
        double *sk = realloc(m->skeys, k * sizeof(*sk));
        if (sk == NULL)
            return TW_ERR;
        m->skeys = sk;
        uint64_t *cu = realloc(m->cum, k * sizeof(*cu));
        if (cu == NULL)
            return TW_ERR;
        m->cum = cu;
        m->scap = k;
    }
    if (m->keys_dirty) {
        for (size_t i = 0; i < k; i++)
            m->skeys[i] = m->map.ent[i].key;
        qsort(m->skeys, k, sizeof(double), cmp_double);
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
static double at_rank(const tw_countmap *m, uint64_t r)
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
static double lerp(double a, double b, double t)
{
    double d = b - a;
    return t < 0.5 ? a + d * t : b - d * (1.0 - t);
}

int tw_countmap_quantile(tw_countmap *m, double q, double *out)
{
    if (m->n + m->nnan == 0)
        return TW_ERR;
    if (m->nnan > 0) {
        *out = NAN;
        return TW_OK;
    }
    if (build_view(m) != TW_OK)
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
    *out = lerp(at_rank(m, i), at_rank(m, i + 1), h - fi);
    return TW_OK;
}

int tw_countmap_box(tw_countmap *m, tw_box *out)
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

size_t tw_countmap_memory(const tw_countmap *m)
{
    return tw_dmap_memory(&m->map) +
           m->scap * (sizeof(*m->skeys) + sizeof(*m->cum));
}

#define COUNTMAP_TAG 0x434d4150u /* "CMAP" */

void tw_countmap_save(const tw_countmap *m, tw_ser *s)
{
    tw_ser_u32(s, COUNTMAP_TAG);
    tw_ser_u64(s, m->n);
    tw_ser_u64(s, m->nnan);
    tw_ser_f64(s, m->min);
    tw_ser_f64(s, m->max);
    tw_ser_f64(s, m->quantum);
    tw_ser_u64(s, m->map.n);
    for (size_t i = 0; i < m->map.n; i++) {
        tw_ser_f64(s, m->map.ent[i].key);
        tw_ser_u64(s, m->map.ent[i].val);
    }
}

int tw_countmap_restore(tw_countmap *m, tw_deser *d)
{
    tw_countmap_clear(m);
    if (tw_deser_u32(d) != COUNTMAP_TAG)
        tw_deser_fail(d);
    uint64_t n = tw_deser_u64(d);
    uint64_t nnan = tw_deser_u64(d);
    double mn = tw_deser_f64(d);
    double mx = tw_deser_f64(d);
    double quantum = tw_deser_f64(d);
    uint64_t k = tw_deser_count(d, 16);
    if (!tw_deser_ok(d))
        return TW_ERR;
    if (tw_dmap_reserve(&m->map, (size_t)k) != TW_OK) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < k; i++) {
        double key = tw_deser_f64(d);
        uint64_t c = tw_deser_u64(d);
        if (!tw_deser_ok(d))
            return TW_ERR;
        int inserted = 0;
        uint64_t *slot = tw_dmap_put(&m->map, key, c, &inserted);
        if (slot == NULL || !inserted || c == 0) {
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
