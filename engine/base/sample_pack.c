/* sample_pack.c - the compact sample form (see sample_pack.h). */
#include "sample_pack.h"

#include "numeric.h"

void tw_sample_pack(tw_ckw *w, tw_sample_cursor *c, const tw_sample *s)
{
    uint64_t ts_bits;
    memcpy(&ts_bits, &s->ts, sizeof(ts_bits));
    int64_t k = 0;
    int same_ts = ts_bits == c->prev_ts_bits,
        hund = tw_exact_hundredths(s->value, &k);
    uint64_t series = s->series;
    if (c->delta_series) {
        int64_t d = (int64_t)s->series - (int64_t)c->prev_series;
        series = ((uint64_t)d << 1) ^ (d < 0 ? UINT64_MAX : 0);
        c->prev_series = s->series;
    }
    tw_ckw_uv(w, series << 3 | (uint64_t)(s->flags != 0) << 2 |
                     (uint64_t)same_ts << 1 | (uint64_t)hund);
    if (!same_ts)
        tw_ckw_u64(w, ts_bits);
    if (hund)
        tw_ckw_iv(w, k);
    else
        tw_ckw_f64(w, s->value);
    if (s->flags != 0)
        tw_ckw_uv(w, s->flags);
    c->prev_ts_bits = ts_bits;
}

/* The series id from the header's field (a difference wrapping below 0
 * fails the range check), and the verdict on the sample read. */
static const char *verdict(const tw_ckr *r, tw_sample_cursor *c,
                           uint64_t *series, uint64_t flags, size_t nseries)
{
    if (c->delta_series) {
        uint64_t z = *series;
        *series = c->prev_series + ((z >> 1) ^ (0 - (z & 1)));
        c->prev_series = *series;
    }
    if (r->why != NULL)
        return "malformed";
    if (*series >= nseries)
        return "buffered sample names a series the dictionary lacks";
    if (flags > UINT32_MAX)
        return "buffered sample with flags over 32 bits";
    return NULL;
}

const char *tw_sample_unpack(tw_ckr *r, tw_sample_cursor *c, size_t nseries,
                             tw_sample *out)
{
    uint64_t h = tw_ckr_uv(r);
    uint64_t ts_bits = (h & 2) ? c->prev_ts_bits : tw_ckr_u64(r);
    double value = (h & 1) ? (double)tw_ckr_iv(r) / 100.0 : tw_ckr_f64(r);
    uint64_t flags = (h & 4) ? tw_ckr_uv(r) : 0;
    uint64_t series = h >> 3;
    c->prev_ts_bits = ts_bits;
    const char *bad = verdict(r, c, &series, flags, nseries);
    if (bad != NULL)
        return bad;
    memcpy(&out->ts, &ts_bits, sizeof(out->ts));
    out->value = value;
    out->series = (uint32_t)series;
    out->flags = (uint32_t)flags;
    return NULL;
}

/* tw_sample_unpack_n without out: the same checks, no values built */
static const char *check_n(tw_ckr *r, size_t n, int delta_series,
                           size_t nseries)
{
    tw_sample_cursor c;
    tw_sample_cursor_init(&c, delta_series);
    for (size_t i = 0; i < n; i++) {
        uint64_t h = tw_ckr_uv(r);
        if (!(h & 2))
            (void)tw_ckr_bytes(r, 8);
        if (h & 1)
            (void)tw_ckr_uv(r);
        else
            (void)tw_ckr_bytes(r, 8);
        uint64_t flags = (h & 4) ? tw_ckr_uv(r) : 0;
        uint64_t series = h >> 3;
        const char *bad = verdict(r, &c, &series, flags, nseries);
        if (bad != NULL)
            return bad;
    }
    return NULL;
}

const char *tw_sample_unpack_n(tw_ckr *r, size_t n, int delta_series,
                               size_t nseries, tw_sample *out)
{
    if (out == NULL)
        return check_n(r, n, delta_series, nseries);
    tw_sample_cursor c;
    tw_sample_cursor_init(&c, delta_series);
    for (size_t i = 0; i < n; i++) {
        tw_sample s;
        const char *bad = tw_sample_unpack(r, &c, nseries, &s);
        if (bad != NULL)
            return bad;
        if (out != NULL)
            out[i] = s;
    }
    return NULL;
}
