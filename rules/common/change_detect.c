/*
 * change_detect.c - online detector of a persistent upward shift
 * (change_detect.h).
 */
#include "change_detect.h"

#include <math.h>
#include <stdlib.h>

#include "select.h"

/* 1.4826 x MAD estimates a normal's standard deviation; 1.2533 x sd / sqrt(n)
 * is the standard error of a normal sample's median. */
#define CD_MAD_TO_SD 1.4826
#define CD_MEDIAN_SE 1.2533
/* The baseline's median and scale are recomputed after this many new
 * values once it holds 64 (a quickselect of `baseline` values each). */
#define CD_REFRESH 4u
/* Sign test: (above - below) / sqrt(n) must reach this (one-sided p about
 * 0.01; all of 6, 9 of 10, 16 of 20). */
#ifndef CD_SIGN_Z
#define CD_SIGN_Z 2.4
#endif
#ifndef CD_SMALL_N
#define CD_SMALL_N 1.5
#endif
#ifndef CD_MAGNITUDE
#define CD_MAGNITUDE 0.5
#endif

void tw_cd_params_default(tw_cd_params *p)
{
    *p = (tw_cd_params){.min_shift = 0.1,
                        .h = 5.0,
                        .clip = 4.0,
                        .z = 5.0,
                        .scale_floor = 0.02,
                        .baseline = 256,
                        .min_baseline = 50,
                        .confirm = 6,
                        .persist_s = 10.0};
}

int tw_cd_init(tw_cd *d, const tw_cd_params *p)
{
    *d = (tw_cd){.p = *p};
    d->onset.step = d->detect.step = -1;
    d->alarm.n = -1;
    d->scratch = malloc((p->baseline > TW_CD_LAST ? p->baseline : TW_CD_LAST) *
                        sizeof(double));
    if (!d->scratch || tw_dring_init(&d->base, p->baseline) != TW_OK ||
        tw_dring_init(&d->held, p->baseline) != TW_OK ||
        tw_dring_init(&d->last, TW_CD_LAST) != TW_OK) {
        tw_cd_free(d);
        return TW_ERR;
    }
    return TW_OK;
}

void tw_cd_free(tw_cd *d)
{
    tw_dring_free(&d->base);
    tw_dring_free(&d->held);
    tw_dring_free(&d->last);
    free(d->scratch);
    d->scratch = NULL;
}

/* Median of the newest n values of r (n <= r->len, > 0). */
static double ring_median(tw_cd *d, const tw_dring *r, size_t n)
{
    size_t got = tw_dring_copy(r, 0, n, d->scratch);
    return tw_select_quantile(d->scratch, got, 0.5);
}

/* Baseline median and scale (log units). */
static void refresh(tw_cd *d)
{
    size_t n = tw_dring_copy(&d->base, 0, d->base.len, d->scratch);
    double med = tw_select_quantile(d->scratch, n, 0.5);
    for (size_t i = 0; i < n; i++)
        d->scratch[i] = fabs(d->scratch[i] - med);
    double mad = tw_select_quantile(d->scratch, n, 0.5);
    d->med = med;
    d->scale = fmax(CD_MAD_TO_SD * mad, d->p.scale_floor);
}

/* Whether the values since the CUSUM's alarm show a persistent shift of
 * interest. Only values after the alarm are tested: those that raised it
 * were selected for being high. They must span `confirm` values and
 * `persist_s`; their median must lie above the baseline's by enough
 * (magnitude, and z standard errors), and most of them above it (a sign
 * test: a few huge steps move a small sample's median, never the count
 * above). */
static int confirmed(tw_cd *d, int64_t t_us)
{
    if (d->alarm.n < 0 || d->n - d->alarm.n < (int64_t)d->p.confirm ||
        (double)(t_us - d->alarm.t_us) < d->p.persist_s * 1e6)
        return 0;
    int64_t fresh = d->n - d->alarm.n;
    size_t n = tw_dring_copy(
        &d->held, 0, fresh < (int64_t)d->held.len ? (size_t)fresh : d->held.len,
        d->scratch);
    size_t above = 0;
    for (size_t i = 0; i < n; i++)
        above += d->scratch[i] > d->med;
    if (2.0 * (double)above - (double)n < CD_SIGN_Z * sqrt((double)n))
        return 0;
    double shift = tw_select_quantile(d->scratch, n, 0.5) - d->med;
    if (shift < log1p(d->p.min_shift * CD_MAGNITUDE))
        return 0;
    /* the evidence: each value counts at most `clip` scales above the
     * baseline (three checkpoint-long steps among six must not make a
     * median), and a small sample's median against an estimated scale
     * has heavier tails than the normal bound (as Student's t has) */
    double cap = d->med + d->p.clip * d->scale;
    for (size_t i = 0; i < n; i++)
        d->scratch[i] = fmin(d->scratch[i], cap);
    double capped = tw_select_quantile(d->scratch, n, 0.5) - d->med;
    double se =
        CD_MEDIAN_SE * d->scale * sqrt(1.0 / (double)n + 1.0 / d->base.len);
    double z = d->p.z * (1.0 + CD_SMALL_N / (double)n);
    return capped >= z * se;
}

/* The candidate was noise: its values join the baseline. */
static void release_held(tw_cd *d)
{
    size_t n = tw_dring_copy(&d->held, 0, d->held.len, d->scratch);
    for (size_t i = 0; i < n; i++)
        tw_dring_push(&d->base, d->scratch[i]);
    tw_dring_clear(&d->held);
    refresh(d);
}

tw_cd_state tw_cd_feed(tw_cd *d, double seconds, int64_t t_us, int64_t step)
{
    if (!(seconds > 0.0) || !isfinite(seconds))
        return d->state;
    double x = log(seconds);
    tw_cd_mark here = {d->n++, t_us, step};
    tw_dring_push(&d->last, x);
    if (d->state == TW_CD_SHIFTED) {
        tw_dring_push(&d->held, x);
        if (d->n % CD_REFRESH == 0)
            d->after = exp(ring_median(d, &d->held, d->held.len));
        return d->state;
    }
    if (d->state == TW_CD_LEARNING) {
        tw_dring_push(&d->base, x);
        if (d->base.len >= d->p.min_baseline) {
            refresh(d);
            d->state = TW_CD_WATCHING;
        }
        return d->state;
    }
    double z = (x - d->med) / d->scale;
    z = fmin(fmax(z, -d->p.clip), d->p.clip);
    double k = log1p(d->p.min_shift) / 2.0 / d->scale;
    double g = fmin(fmax(d->g + z - k, 0.0), d->p.h + d->p.clip);
    if (g > 0.0) {
        if (d->g == 0.0) {
            d->onset = here;
            d->alarm.n = -1;
        }
        tw_dring_push(&d->held, x);
        d->g = g;
        if (g > d->p.h && d->alarm.n < 0)
            d->alarm = here;
        if (confirmed(d, t_us)) {
            d->state = TW_CD_SHIFTED;
            d->detect = here;
            d->before = exp(d->med);
            d->after = exp(ring_median(d, &d->held, d->held.len));
        }
        return d->state;
    }
    d->g = 0.0;
    if (d->held.len > 0)
        release_held(d);
    tw_dring_push(&d->base, x);
    /* new values since the last refresh: the ring's fill, then modulo */
    if (d->base.len < 64 || d->n % CD_REFRESH == 0)
        refresh(d);
    return d->state;
}

double tw_cd_baseline(tw_cd *d)
{
    return d->base.len ? exp(ring_median(d, &d->base, d->base.len)) : 0.0;
}

double tw_cd_recent(tw_cd *d, uint32_t n)
{
    if (d->last.len == 0 || n == 0)
        return 0.0;
    size_t k = n < d->last.len ? n : d->last.len;
    return exp(ring_median(d, &d->last, k));
}

static void mark_save(const tw_cd_mark *m, tw_ser *s)
{
    tw_ser_i64(s, m->n);
    tw_ser_i64(s, m->t_us);
    tw_ser_i64(s, m->step);
}

static void mark_load(tw_cd_mark *m, tw_deser *r)
{
    m->n = tw_deser_i64(r);
    m->t_us = tw_deser_i64(r);
    m->step = tw_deser_i64(r);
}

void tw_cd_save(const tw_cd *d, tw_ser *s)
{
    tw_dring_save(&d->base, s);
    tw_dring_save(&d->held, s);
    tw_dring_save(&d->last, s);
    tw_ser_f64(s, d->g);
    tw_ser_i64(s, d->n);
    tw_ser_u8(s, (uint8_t)d->state);
    mark_save(&d->onset, s);
    mark_save(&d->detect, s);
    mark_save(&d->alarm, s);
    tw_ser_f64(s, d->med);
    tw_ser_f64(s, d->scale);
    tw_ser_f64(s, d->before);
    tw_ser_f64(s, d->after);
}

int tw_cd_load(tw_cd *d, tw_deser *r)
{
    if (tw_dring_load(&d->base, r) != TW_OK ||
        tw_dring_load(&d->held, r) != TW_OK ||
        tw_dring_load(&d->last, r) != TW_OK)
        return TW_ERR;
    d->g = tw_deser_f64(r);
    d->n = tw_deser_i64(r);
    uint8_t st = tw_deser_u8(r);
    mark_load(&d->onset, r);
    mark_load(&d->detect, r);
    mark_load(&d->alarm, r);
    d->med = tw_deser_f64(r);
    d->scale = tw_deser_f64(r);
    d->before = tw_deser_f64(r);
    d->after = tw_deser_f64(r);
    if (st > TW_CD_SHIFTED || !(d->scale > 0.0 || st == TW_CD_LEARNING))
        tw_deser_fail(r);
    d->state = (tw_cd_state)st;
    return tw_deser_ok(r) ? TW_OK : TW_ERR;
}
