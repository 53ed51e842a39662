/* windows.c - ring windows and online statistics per series (windows.h). */
#include "windows.h"

#include "numeric.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_codec.h"
#include "grow.h"
#include "trainwatch/bitpack.h"
#include "trainwatch/ser.h" /* tw_ser_sv_len: tw_ckw_iv writes the same varint */

typedef struct series_window {
    double *ring; /* cap values; NULL when no rule windows this metric */
    uint32_t cap;
    uint32_t head;             /* next write position */
    uint32_t filled;           /* valid values in the ring (<= cap) */
    uint64_t count;            /* values ever pushed */
    double mean, m2, min, max; /* Welford */
    tw_metric metric;
} series_window;

struct tw_windows {
    uint32_t requested[TW_METRIC_COUNT];
    series_window *series;
    size_t nseries;
    size_t capacity;
};

tw_windows *tw_windows_new(void)
{
    return calloc(1, sizeof(tw_windows));
}

void tw_windows_free(tw_windows *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->nseries; i++)
        free(w->series[i].ring);
    free(w->series);
    free(w);
}

/* Resize a ring to `cap`, keeping the newest values in order. */
static int ring_resize(series_window *s, uint32_t cap)
{
    double *nr = malloc((size_t)cap * sizeof(double));
    if (nr == NULL)
        return TW_ERR;
    uint32_t keep = s->filled < cap ? s->filled : cap;
    for (uint32_t i = 0; i < keep; i++) {
        /* i-th of the newest `keep`, oldest first */
        uint32_t pos = (uint32_t)((s->head + s->cap - keep + i) % s->cap);
        nr[i] = s->ring[pos];
    }
    free(s->ring);
    s->ring = nr;
    s->cap = cap;
    s->head = keep % cap;
    s->filled = keep;
    /* Values older than `keep` are gone; count stays the true total. */
    return TW_OK;
}

int tw_windows_request(tw_windows *w, tw_metric metric, uint32_t n)
{
    if ((unsigned)metric >= TW_METRIC_COUNT)
        return TW_ERR;
    if (n <= w->requested[metric])
        return TW_OK;
    w->requested[metric] = n;
    for (size_t i = 0; i < w->nseries; i++) {
        series_window *s = &w->series[i];
        if (s->metric != metric)
            continue;
        if (s->ring == NULL) {
            s->ring = malloc((size_t)n * sizeof(double));
            if (s->ring == NULL)
                return TW_ERR;
            s->cap = n;
            s->head = 0;
            s->filled = 0;
        } else if (ring_resize(s, n) != TW_OK) {
            return TW_ERR;
        }
    }
    return TW_OK;
}

uint32_t tw_windows_requested(const tw_windows *w, tw_metric metric)
{
    return (unsigned)metric < TW_METRIC_COUNT ? w->requested[metric] : 0;
}

int tw_windows_add_series(tw_windows *w, uint32_t id, tw_metric metric)
{
    if (id != w->nseries)
        return TW_ERR; /* ids are dense and added in order */
    if (tw_grow((void **)&w->series, &w->capacity, w->nseries + 1,
                sizeof(*w->series), 64) != TW_OK)
        return TW_ERR;
    series_window *s = &w->series[w->nseries];
    memset(s, 0, sizeof(*s));
    s->metric = (unsigned)metric < TW_METRIC_COUNT ? metric : TW_METRIC_OTHER;
    uint32_t n = w->requested[s->metric];
    if (n > 0) {
        s->ring = malloc((size_t)n * sizeof(double));
        if (s->ring == NULL)
            return TW_ERR;
        s->cap = n;
    }
    w->nseries++;
    return TW_OK;
}

void tw_windows_push(tw_windows *w, uint32_t series, double v)
{
    if (series >= w->nseries)
        return;
    series_window *s = &w->series[series];
    if (s->ring != NULL) {
        s->ring[s->head] = v;
        s->head = s->head + 1 == s->cap ? 0 : s->head + 1;
        if (s->filled < s->cap)
            s->filled++;
    }
    s->count++;
    if (s->count == 1) {
        s->mean = v;
        s->m2 = 0.0;
        s->min = v;
        s->max = v;
        return;
    }
    double d = v - s->mean;
    s->mean += d / (double)s->count;
    s->m2 += d * (v - s->mean);
    if (v < s->min)
        s->min = v;
    if (v > s->max)
        s->max = v;
}

int tw_windows_feed_scan(tw_windows *w, const tw_scan *scan)
{
    for (size_t i = w->nseries; i < scan->nseries; i++) {
        if (tw_windows_add_series(w, (uint32_t)i, scan->series[i].metric) !=
            TW_OK)
            return TW_ERR;
    }
    for (size_t i = 0; i < scan->nsamples; i++)
        tw_windows_push(w, scan->samples[i].series, scan->samples[i].value);
    return TW_OK;
}

size_t tw_windows_read(const tw_windows *w, uint32_t series, double *out,
                       size_t n)
{
    if (series >= w->nseries)
        return 0;
    const series_window *s = &w->series[series];
    if (s->ring == NULL)
        return 0;
    size_t k = s->filled < n ? s->filled : n;
    for (size_t i = 0; i < k; i++)
        out[i] = s->ring[(s->head + s->cap - k + i) % s->cap];
    return k;
}

int tw_windows_stats(const tw_windows *w, uint32_t series, tw_series_stats *out)
{
    if (series >= w->nseries)
        return TW_ERR;
    const series_window *s = &w->series[series];
    out->count = s->count;
    out->mean = s->count ? s->mean : NAN;
    out->std = s->count ? sqrt(s->m2 / (double)s->count) : NAN;
    out->min = s->count ? s->min : NAN;
    out->max = s->count ? s->max : NAN;
    return TW_OK;
}

size_t tw_windows_memory(const tw_windows *w)
{
    size_t bytes = sizeof(*w) + w->capacity * sizeof(series_window);
    for (size_t i = 0; i < w->nseries; i++)
        bytes += (size_t)w->series[i].cap * sizeof(double);
    return bytes;
}

/* ---- checkpoints ----------------------------------------------------------
 * varint nseries, then per series: u8 metric, varint count, and when count
 * > 0: f64 mean, m2, min, max, varint nvalues, f64 values (oldest first).
 * Compact form: after count, a u8 form: 0: the values as above; 1: min,
 * max and every kept value are exact hundredths, which are then zigzag
 * varints of hundredths (mean and m2 stay f64); 2: as 1, but the kept
 * values bit-packed (trainwatch/bitpack.h) after nvalues: zigzag varint
 * base (the smallest kept), u8 width, the block of hundredths - base.
 * The saver writes 2 where it is smaller than 1 (a ring of 500 noisy
 * utilisations: ~11 bits a value instead of 2-3 bytes). The ring's head
 * is not kept: values are restored from position 0, which reads back
 * identically. An engine older than form 2 refuses it. */
#define WIN_F64 0u
#define WIN_HUNDREDTHS 1u
#define WIN_PACKED 2u

static double ring_at(const series_window *s, uint32_t k)
{
    return s->ring[(s->head + s->cap - s->filled + k) % s->cap];
}

/* Are min, max and every kept value of s exact hundredths? */
static int all_hundredths(const series_window *s)
{
    int64_t k;
    if (!tw_exact_hundredths(s->min, &k) || !tw_exact_hundredths(s->max, &k))
        return 0;
    for (uint32_t i = 0; i < s->filled; i++)
        if (!tw_exact_hundredths(ring_at(s, i), &k))
            return 0;
    return 1;
}

static void put_value(tw_ckw *c, double v, int hundredths)
{
    int64_t k = 0;
    if (hundredths && tw_exact_hundredths(v, &k))
        tw_ckw_iv(c, k);
    else
        tw_ckw_f64(c, v);
}

/* WIN_PACKED when it is smaller than WIN_HUNDREDTHS for s's kept values
 * (all exact hundredths), with their smallest and the width. */
static unsigned choose_packed(const series_window *s, int64_t *base,
                              unsigned *width)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    size_t varints = 0;
    for (uint32_t i = 0; i < s->filled; i++) {
        int64_t k = 0;
        tw_exact_hundredths(ring_at(s, i), &k);
        varints += tw_ser_sv_len(k);
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    if (s->filled == 0)
        return WIN_HUNDREDTHS;
    /* |k| < 1e17: hi - lo fits */
    *base = lo;
    *width = tw_bitpack_width((uint64_t)(hi - lo));
    size_t packed = tw_ser_sv_len(lo) + 1 + tw_bitpack_bytes(s->filled, *width);
    return *width <= TW_BITPACK_MAX_WIDTH && packed < varints ? WIN_PACKED
                                                              : WIN_HUNDREDTHS;
}

static void put_packed(tw_ckw *c, const series_window *s, int64_t base,
                       unsigned width)
{
    tw_ckw_iv(c, base);
    tw_ckw_u8(c, (uint8_t)width);
    tw_bitpack_writer bw = {0, 0};
    uint8_t out[8];
    for (uint32_t i = 0; i < s->filled; i++) {
        int64_t k = 0;
        tw_exact_hundredths(ring_at(s, i), &k);
        tw_ckw_bytes(c, out,
                     tw_bitpack_put(&bw, (uint64_t)(k - base), width, out));
    }
    tw_ckw_bytes(c, out, tw_bitpack_flush(&bw, out));
}

int tw_windows_save(const tw_windows *w, tw_buf *out, int compact)
{
    tw_ckw c = {out, 0};
    tw_ckw_uv(&c, w->nseries);
    for (size_t i = 0; i < w->nseries && !c.failed; i++) {
        const series_window *s = &w->series[i];
        tw_ckw_u8(&c, (uint8_t)s->metric);
        tw_ckw_uv(&c, s->count);
        if (s->count == 0)
            continue;
        unsigned form = compact && all_hundredths(s) ? WIN_HUNDREDTHS : WIN_F64;
        int64_t base = 0;
        unsigned width = 0;
        if (form == WIN_HUNDREDTHS)
            form = choose_packed(s, &base, &width);
        if (compact)
            tw_ckw_u8(&c, (uint8_t)form);
        int hund = form != WIN_F64;
        tw_ckw_f64(&c, s->mean);
        tw_ckw_f64(&c, s->m2);
        put_value(&c, s->min, hund);
        put_value(&c, s->max, hund);
        tw_ckw_uv(&c, s->filled);
        if (form == WIN_PACKED) {
            put_packed(&c, s, base, width);
            continue;
        }
        for (uint32_t k = 0; k < s->filled; k++)
            put_value(&c, ring_at(s, k), hund);
    }
    return c.failed ? TW_ERR : TW_OK;
}

static double get_value(tw_ckr *r, int hundredths)
{
    return hundredths ? (double)tw_ckr_iv(r) / 100.0 : tw_ckr_f64(r);
}

/* WIN_PACKED's values (after nvalues) into s's ring from position 0 when
 * apply; TW_ERR with r failed on a bad base, width or short block. */
static int load_packed(tw_ckr *r, series_window *s, uint64_t nv, int apply)
{
    int64_t base = tw_ckr_iv(r);
    unsigned width = tw_ckr_u8(r);
    if (r->why != NULL)
        return TW_ERR;
    if (width > TW_BITPACK_MAX_WIDTH || base <= -(1ll << 60) ||
        base >= (1ll << 60)) {
        tw_ckr_fail(r, "bad packed values");
        return TW_ERR;
    }
    size_t bytes = tw_bitpack_bytes((size_t)nv, width);
    const uint8_t *block = tw_ckr_bytes(r, bytes);
    if (block == NULL)
        return TW_ERR;
    tw_bitpack_reader br;
    tw_bitpack_reader_init(&br, block, bytes);
    for (uint64_t k = 0; k < nv; k++) {
        uint64_t off = tw_bitpack_get(&br, width);
        if (apply) /* base + off < 2^61 */
            s->ring[k] = (double)(base + (int64_t)off) / 100.0;
    }
    return TW_OK;
}

/* One pass over the blob: checks everything when apply == 0, writes into
 * w when apply == 1 (only after a clean check pass, so it cannot fail). */
static int windows_load(tw_windows *w, const void *data, size_t len,
                        int compact, int apply, char *err, size_t errlen)
{
    tw_ckr r;
    tw_ckr_init(&r, data, len);
    uint64_t n = tw_ckr_uv(&r);
    /* fewer series than w: the job's dictionary grew since the save (a
     * segmented job's state snapshot); the newer series stay empty */
    if (r.why == NULL && n > w->nseries) {
        snprintf(err, errlen,
                 "windows: checkpoint has %llu series, the job has %zu",
                 (unsigned long long)n, w->nseries);
        return TW_ERR;
    }
    for (size_t i = (size_t)n; i < w->nseries && r.why == NULL && !apply; i++)
        if (w->series[i].count != 0) {
            snprintf(err, errlen, "windows: series %zu already has values", i);
            return TW_ERR;
        }
    for (size_t i = 0; i < (size_t)n && r.why == NULL; i++) {
        series_window *s = &w->series[i];
        uint8_t metric = tw_ckr_u8(&r);
        uint64_t count = tw_ckr_uv(&r);
        if (r.why != NULL)
            break;
        if (metric != (uint8_t)s->metric) {
            snprintf(err, errlen,
                     "windows: series %zu has metric %u in the checkpoint, "
                     "%u in the job",
                     i, metric, (unsigned)s->metric);
            return TW_ERR;
        }
        if (!apply && s->count != 0) {
            snprintf(err, errlen, "windows: series %zu already has values", i);
            return TW_ERR;
        }
        double mean = 0, m2 = 0, mn = 0, mx = 0;
        uint64_t nv = 0;
        int hund = 0;
        unsigned form = WIN_F64;
        if (count > 0) {
            if (compact) {
                form = tw_ckr_u8(&r);
                if (r.why == NULL && form > WIN_PACKED)
                    r.why = "unknown value form";
                hund = form != WIN_F64;
            }
            mean = tw_ckr_f64(&r);
            m2 = tw_ckr_f64(&r);
            mn = get_value(&r, hund);
            mx = get_value(&r, hund);
            nv = tw_ckr_uv(&r);
            if (r.why != NULL)
                break;
            if (nv > s->cap || nv > count) {
                snprintf(err, errlen,
                         "windows: series %zu keeps %llu values, its ring "
                         "holds %u (of %llu pushed)",
                         i, (unsigned long long)nv, s->cap,
                         (unsigned long long)count);
                return TW_ERR;
            }
            if (form != WIN_PACKED && tw_ckr_left(&r) / (hund ? 1 : 8) < nv) {
                tw_ckr_fail(&r, "truncated");
                break;
            }
        }
        if (apply) {
            s->count = count;
            s->mean = mean;
            s->m2 = m2;
            s->min = mn;
            s->max = mx;
            s->filled = (uint32_t)nv;
            s->head = s->cap ? (uint32_t)(nv % s->cap) : 0;
        }
        if (form == WIN_PACKED) {
            if (load_packed(&r, s, nv, apply) != TW_OK)
                break;
            continue;
        }
        for (uint64_t k = 0; k < nv; k++) {
            double v = get_value(&r, hund);
            if (apply)
                s->ring[k] = v;
        }
    }
    if (r.why == NULL && tw_ckr_left(&r) != 0)
        r.why = "trailing bytes";
    if (r.why != NULL) {
        snprintf(err, errlen, "windows: %s at byte %zu of %zu", r.why,
                 tw_ckr_offset(&r), len);
        return TW_ERR;
    }
    return TW_OK;
}

int tw_windows_restore(tw_windows *w, const void *data, size_t len, int compact,
                       char *err, size_t errlen)
{
    if (windows_load(w, data, len, compact, 0, err, errlen) != TW_OK)
        return TW_ERR;
    return windows_load(w, data, len, compact, 1, err, errlen);
}
