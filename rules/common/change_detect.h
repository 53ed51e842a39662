/*
 * change_detect.h - an online detector of a persistent upward shift in a
 * series of durations (FailSlow, rules/fail_slow.c, says why this design).
 *
 * Each value is taken as log(duration), so a slowdown by a factor is the
 * same shift at every step length. Two stages:
 *
 *  1. a one-sided CUSUM on the values standardized by a robust baseline
 *     (median and 1.4826 x MAD of the newest `baseline` accepted values,
 *     the scale floored at `scale_floor`), each clipped to +-`clip` so one
 *     huge step (a checkpoint save, a garbage collection) adds at most
 *     `clip`; its reference value is half the smallest shift of interest,
 *     log(1 + min_shift) / 2. The last time the sum left 0 is the
 *     candidate onset; while the sum is above 0 the values are held apart
 *     (the baseline does not learn the shift), and given to the baseline
 *     when the sum falls back to 0 (it was noise).
 *  2. once the sum has passed `h` (the alarm), the values after the alarm
 *     (not those that raised it: they were selected for being high) are
 *     collected, at least `confirm` of them over at least `persist_s`
 *     (an excursion of a few seconds is noise); the shift is confirmed
 *     only if it is persistent and large enough: their median exceeds
 *     the baseline's median by log(1 + min_shift / 2); with each value
 *     capped at `clip` scales above the baseline, their median exceeds it
 *     by z x (1 + 1.5 / n) standard errors of a difference of medians
 *     (1.2533 x scale x sqrt(1/n + 1/baseline); the factor for a small
 *     sample against an estimated scale, as Student's t); and a sign test
 *     holds (most of them above the baseline's median). So noisier
 *     series need more evidence, and a cluster of checkpoint-long steps,
 *     which moves a small sample's median, never qualifies.

 * After confirmation the detector keeps the newest values after the onset
 * (`after` follows them) and stops testing: one shift per series.
 *
 * Memory: two rings of `baseline` doubles, one of TW_CD_LAST and a
 * scratch array of `baseline`.
 * Ownership: tw_cd owns its rings (tw_cd_free).
 */
#ifndef TW_RULES_CHANGE_DETECT_H
#define TW_RULES_CHANGE_DETECT_H

#include <stdint.h>

#include "sysutil.h"
#include "trainwatch/ser.h"

/* Values kept for tw_cd_recent(). */
#define TW_CD_LAST 64u

typedef struct tw_cd_params {
    double min_shift;      /* smallest slowdown of interest, 0.1 = 1.1x  */
    double h;              /* CUSUM alarm level (standardized units)     */
    double clip;           /* per-value cap of the standardized value    */
    double z;              /* confirmation: standard errors of the shift */
    double scale_floor;    /* smallest scale of log values (0.02 = 2 %)  */
    uint32_t baseline;     /* values in the baseline ring                */
    uint32_t min_baseline; /* values needed before testing              */
    uint32_t confirm;      /* values after the onset needed to confirm   */
    double persist_s;      /* and time (t_us) the shift must have lasted */
} tw_cd_params;

/* Defaults: min_shift 0.1, h 5, clip 4, z 4, scale_floor 0.02, baseline
 * 256, min_baseline 50, confirm 6, persist_s 10. */
void tw_cd_params_default(tw_cd_params *p);

typedef enum tw_cd_state {
    TW_CD_LEARNING = 0, /* baseline still filling                     */
    TW_CD_WATCHING = 1, /* testing every value                        */
    TW_CD_SHIFTED = 2   /* a shift is confirmed                       */
} tw_cd_state;

/* Where a value came from, kept for the onset and the confirmation. */
typedef struct tw_cd_mark {
    int64_t n;    /* index of the value (values fed so far, from 0)  */
    int64_t t_us; /* the caller's time of the value                  */
    int64_t step; /* the caller's step number (-1 = none)            */
} tw_cd_mark;

typedef struct tw_cd {
    tw_cd_params p;
    tw_dring base; /* log values accepted as the baseline            */
    tw_dring held; /* log values since the candidate onset (newest)  */
    tw_dring last; /* the newest TW_CD_LAST log values, always        */
    double *scratch;
    double g;  /* CUSUM sum                                       */
    int64_t n; /* values fed                                      */
    tw_cd_state state;
    tw_cd_mark onset;  /* candidate, then confirmed onset             */
    tw_cd_mark detect; /* the value that confirmed it                 */
    tw_cd_mark alarm;  /* the CUSUM passed h (n = -1: not yet)        */
    double med, scale; /* baseline median and scale (log) at last use */
    double before;     /* exp(baseline median) at confirmation        */
    double after;      /* exp(median of the newest held values)       */
} tw_cd;

/* TW_ERR: out of memory (nothing to free then). */
int tw_cd_init(tw_cd *d, const tw_cd_params *p);
void tw_cd_free(tw_cd *d);

/* Feeds one duration (seconds, > 0; others are ignored). Returns the state
 * after it; TW_CD_SHIFTED first on the value that confirms the shift. */
tw_cd_state tw_cd_feed(tw_cd *d, double seconds, int64_t t_us, int64_t step);

/* exp(median) of the baseline ring (seconds); 0 while it is empty. */
double tw_cd_baseline(tw_cd *d);

/* exp(median) of the newest min(n, TW_CD_LAST) values fed (seconds): the
 * series' current level; 0 when nothing was fed. */
double tw_cd_recent(tw_cd *d, uint32_t n);

/* Checkpoint: everything above; load into a tw_cd initialised with the
 * same parameters. */
void tw_cd_save(const tw_cd *d, tw_ser *s);
int tw_cd_load(tw_cd *d, tw_deser *r);

#endif /* TW_RULES_CHANGE_DETECT_H */
