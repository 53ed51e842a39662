/*
 * fail_slow.c - FailSlow (trainwatch rule, fixed semantics; no reference
 * counterpart): finds the rank that became persistently slower than it
 * was itself (a degrading GPU, a throttled CPU, a failing link), from its
 * TRAIN step events, as soon as the shift is clear and long before
 * anything fails. Straggler finds a rank slower than the others; a
 * fail-slow rank is slower than itself.
 *
 * Detector (rules/common/change_detect.h): per rank, an online one-sided
 * CUSUM on log step time against a robust running baseline (median and
 * MAD of the newest `baseline` accepted steps), each step's contribution
 * clipped; when it alarms, the steps after the alarm must show, over
 * `persist` seconds and `confirm` steps, a median above the baseline by
 * half of `min_shift` and by `z` standard errors, most of them above it.
 * Why this one: log time makes a slowdown factor the same shift at every
 * step length; median/MAD are not moved by the long steps every job has
 * (checkpoint saves, garbage collections, the first step of an epoch);
 * the clipped CUSUM accumulates small persistent shifts (1.1x) quickly
 * and forgets isolated outliers, and its last zero is a good onset
 * estimate (median error 0 steps on the corpus); testing only the steps
 * after the alarm removes the selection bias that makes a plain CUSUM
 * alarm on noise, and the median test makes the evidence needed grow
 * with the series' noise. Page-Hinkley is the same statistic with a
 * running mean baseline, which long steps drag; fixed windows (before/
 * after t-tests) cost a window of delay and assume no outliers.

 * Phases: a rank's first `warmup` TRAIN steps are skipped, and the first
 * `resume_skip` after any EVAL/PREDICT step or after a pause between two
 * TRAIN steps longer than 2x the rank's recent step (an evaluation pass,
 * a checkpoint save between steps, the next epoch's loader start).
 *
 * One root cause, one finding: in synchronous data parallelism every rank
 * waits for the slow one at each collective, so every rank's step time
 * shifts at the same onset. Where the hook records forward passes
 * (Forward-SubModuleInternal), the same detector runs on each rank's
 * forward time per TRAIN step, which holds no collective wait: a rank
 * whose step time shifted is fail-slow only if its own forward time
 * shifted too; the others are "waiting" for it. Without forward events, a
 * rank whose step time shifted is fail-slow only if fewer than half of
 * the other ranks slowed over the same steps. When more than half of the
 * job's ranks (both ranks of a 2-rank job) would be fail-slow, the job as
 * a whole slowed (input pipeline, shared storage, network, a code change):
 * that is not one rank's fault, FailSlow reports no finding and counts it
 * in Details (`job_wide`). A fail-slow rank that is also a Straggler gives
 * one problem: the engine marks the Straggler finding caused_by FailSlow
 * (docs/rules.md "Root cause first").
 *
 * Counters: each (scan, fail-slow rank) counts once in RuleTriggered and
 * Violations; Datapoints: TRAIN steps tested. A rank stays fail-slow to
 * the job's end (one shift per rank).
 *
 * Memory: per rank two detectors (2 x (2 x `baseline` + 64) doubles) and
 * its id; per scan, one entry per step or forward event of the scan.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "change_detect.h"
#include "sysutil.h"
#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

enum {
    P_MIN_SHIFT = 0,
    P_WARMUP,
    P_RESUME_SKIP,
    P_THRESHOLD,
    P_Z,
    P_CONFIRM,
    P_BASELINE,
    P_MIN_BASELINE,
    P_PERSIST,
    P_COUNT
};

static const tw_param_spec fs_params[P_COUNT] = {
    {"min_shift", TW_PARAM_DOUBLE, "0.1", 0.01, 100.0,
     "smallest persistent slowdown to report, as a fraction (0.1 = 1.1x)"},
    {"warmup", TW_PARAM_INT, "20", 0.0, 1e9,
     "first TRAIN steps of each rank that are not tested"},
    {"resume_skip", TW_PARAM_INT, "3", 0.0, 1e6,
     "TRAIN steps not tested after an evaluation pass or a pause"},
    {"threshold", TW_PARAM_DOUBLE, "5", 0.5, 1000.0,
     "CUSUM alarm level, in robust standard deviations"},
    {"z", TW_PARAM_DOUBLE, "5", 0.0, 100.0,
     "standard errors by which the shift's median must exceed the "
     "baseline's"},
    {"confirm", TW_PARAM_INT, "6", 1.0, 100000.0,
     "steps since the onset needed to confirm a shift"},
    {"baseline", TW_PARAM_INT, "256", 8.0, 100000.0,
     "newest accepted steps per rank that form its baseline"},
    {"min_baseline", TW_PARAM_INT, "50", 4.0, 100000.0,
     "steps per rank before it is tested"},
    {"persist", TW_PARAM_DOUBLE, "10", 0.0, 1e6,
     "seconds a shift must have lasted (and `confirm` steps) to be "
     "confirmed"},
};

#define FS_MAGIC 0x46534c31u /* "FSL1" */
#define FS_FORWARD "Forward-SubModuleInternal"

typedef enum fs_verdict {
    FS_NONE = 0,  /* no confirmed shift of its step time          */
    FS_FAIL_SLOW, /* slower than itself: the finding              */
    FS_WAITING,   /* its step time shifted, its own work did not  */
    FS_JOB_WIDE   /* shifted with most of the job's ranks         */
} fs_verdict;

static const char *const fs_verdict_text[] = {"none", "fail-slow", "waiting",
                                              "job-wide"};

typedef struct fs_rank {
    tw_cd step;          /* TRAIN step durations                       */
    tw_cd fwd;           /* forward time per TRAIN step                */
    int64_t seen;        /* TRAIN steps seen                           */
    int64_t tested;      /* TRAIN steps fed to the detector            */
    int64_t last_end_us; /* end of its newest TRAIN step               */
    int64_t last_us;     /* end of its newest event taken in           */
    int64_t skip;        /* TRAIN steps still to skip                  */
    uint8_t broken;      /* an EVAL/PREDICT step since the last TRAIN  */
    uint8_t has_fwd;     /* forward events inside its TRAIN steps      */
    uint8_t verdict;     /* fs_verdict                                 */
    /* set with a verdict: from the forward detector where the rank has
     * forward events, else from the step detector */
    tw_cd_mark onset, detect;
    double before; /* median step (s) before the onset                 */
} fs_rank;

/* One step or forward event of the current scan. */
typedef struct fs_entry {
    uint32_t rank;
    uint8_t kind; /* 0 TRAIN step, 1 forward, 2 other-mode step */
    int64_t start_us, end_us;
    int64_t step; /* step_num, -1 when absent */
} fs_entry;

typedef struct fs_state {
    const tw_host *host;
    tw_cd_params cd;
    int64_t warmup, resume_skip;
    char *params_text;

    tw_namemap names; /* rank (node) ids, first-seen order */
    fs_rank *ranks;
    uint32_t cap;

    fs_entry *ent; /* scratch for one scan */
    size_t ecap;

    int64_t triggered, violations, datapoints;
    int64_t job_wide;          /* ranks judged job-wide                */
    int64_t first_us, last_us; /* scans with a fail-slow rank          */
    int64_t newest_us;         /* newest step end of the job           */
} fs_state;

static void fs_destroy(void *state)
{
    fs_state *s = state;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->names.count; i++) {
        tw_cd_free(&s->ranks[i].step);
        tw_cd_free(&s->ranks[i].fwd);
    }
    tw_namemap_free(&s->names);
    free(s->ranks);
    free(s->ent);
    free(s->params_text);
    free(s);
}

static int fs_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen, "FailSlow: expected %d parameters, got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    const tw_param_value *v = params->values;
    fs_state *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "FailSlow: out of memory");
        return TW_ERR;
    }
    s->host = host;
    tw_cd_params_default(&s->cd);
    if (!v[P_MIN_SHIFT].is_none)
        s->cd.min_shift = v[P_MIN_SHIFT].d;
    if (!v[P_THRESHOLD].is_none)
        s->cd.h = v[P_THRESHOLD].d;
    if (!v[P_Z].is_none)
        s->cd.z = v[P_Z].d;
    if (!v[P_CONFIRM].is_none)
        s->cd.confirm = (uint32_t)v[P_CONFIRM].i;
    if (!v[P_BASELINE].is_none)
        s->cd.baseline = (uint32_t)v[P_BASELINE].i;
    if (!v[P_MIN_BASELINE].is_none)
        s->cd.min_baseline = (uint32_t)v[P_MIN_BASELINE].i;
    if (!v[P_PERSIST].is_none)
        s->cd.persist_s = v[P_PERSIST].d;
    s->warmup = v[P_WARMUP].is_none ? 20 : v[P_WARMUP].i;
    s->resume_skip = v[P_RESUME_SKIP].is_none ? 3 : v[P_RESUME_SKIP].i;
    if (s->cd.min_baseline > s->cd.baseline) {
        snprintf(err, errlen,
                 "FailSlow: min_baseline (%u) is larger than baseline (%u)",
                 s->cd.min_baseline, s->cd.baseline);
        free(s);
        return TW_ERR;
    }
    tw_namemap_init(&s->names);
    s->params_text = malloc(256);
    if (!s->params_text) {
        fs_destroy(s);
        snprintf(err, errlen, "FailSlow: out of memory");
        return TW_ERR;
    }
    snprintf(s->params_text, 256,
             "min_shift:%g\nwarmup:%lld\nresume_skip:%lld\nthreshold:%g\nz:%"
             "g\nconfirm:%u\nbaseline:%u\nmin_baseline:%u\npersist:%g",
             s->cd.min_shift, (long long)s->warmup, (long long)s->resume_skip,
             s->cd.h, s->cd.z, s->cd.confirm, s->cd.baseline,
             s->cd.min_baseline, s->cd.persist_s);
    *state = s;
    return TW_OK;
}

/* The index of rank `id`, added with fresh detectors when new. */
static int fs_rank_of(fs_state *s, const char *id, uint32_t *idx)
{
    int added = 0;
    if (tw_namemap_add(&s->names, id, idx, &added) != TW_OK)
        return TW_ERR;
    if (!added)
        return TW_OK;
    if (tw_sys_grow((void **)&s->ranks, sizeof(*s->ranks), &s->cap,
                    s->names.count) != TW_OK)
        return TW_ERR;
    fs_rank *r = &s->ranks[*idx];
    memset(r, 0, sizeof(*r));
    if (tw_cd_init(&r->step, &s->cd) != TW_OK)
        return TW_ERR;
    if (tw_cd_init(&r->fwd, &s->cd) != TW_OK) {
        tw_cd_free(&r->step);
        return TW_ERR;
    }
    return TW_OK;
}

static int64_t step_num(const tw_fw_event *e)
{
    for (uint32_t i = 0; e->args && i < e->nargs; i++)
        if (e->args[i].key && strcmp(e->args[i].key, "step_num") == 0 &&
            e->args[i].value &&
            (e->args[i].kind == TW_ARG_STRING ||
             e->args[i].kind == TW_ARG_NUMBER)) {
            char *end;
            long long v = strtoll(e->args[i].value, &end, 10);
            return end != e->args[i].value ? (int64_t)v : -1;
        }
    return -1;
}

static int entry_cmp(const void *a, const void *b)
{
    const fs_entry *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->start_us != y->start_us)
        return x->start_us < y->start_us ? -1 : 1;
    return (x->kind == 1) - (y->kind == 1); /* a step before its forward */
}

static int fs_push(fs_state *s, size_t *n, fs_entry e)
{
    if (*n == s->ecap) {
        size_t cap = s->ecap ? s->ecap * 2 : 256;
        fs_entry *p = realloc(s->ent, cap * sizeof(*p));
        if (!p)
            return TW_ERR;
        s->ent = p;
        s->ecap = cap;
    }
    s->ent[(*n)++] = e;
    return TW_OK;
}

/* Collects the scan's step and forward events not delivered before. */
static int fs_collect(fs_state *s, const tw_scan *scan, size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        if ((e->flags & TW_EVENT_REPEAT) || e->end_us < e->start_us)
            continue;
        uint8_t kind;
        if (e->mode == TW_MODE_TRAIN)
            kind = 0;
        else if (e->mode != TW_MODE_NONE)
            kind = 2;
        else if (e->phase && strcmp(e->phase, FS_FORWARD) == 0)
            kind = 1;
        else
            continue;
        uint32_t idx;
        if (fs_rank_of(s, e->node ? e->node : "", &idx) != TW_OK)
            return TW_ERR;
        if (e->end_us <= s->ranks[idx].last_us && kind != 1)
            continue; /* already taken in (it may arrive again late) */
        if (fs_push(s, n,
                    (fs_entry){idx, kind, e->start_us, e->end_us,
                               kind == 1 ? -1 : step_num(e)}) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

/* Tests one TRAIN step of rank r (its forward time `fwd`, 0 = none). */
static void fs_train_step(fs_state *s, fs_rank *r, const fs_entry *e,
                          double fwd)
{
    double dur = (double)(e->end_us - e->start_us) / 1e6;
    r->seen++;
    int64_t gap = r->last_end_us ? e->start_us - r->last_end_us : 0;
    double recent = tw_cd_recent(&r->step, 8);
    if (r->broken || (recent > 0 && (double)gap > 2e6 * recent))
        r->skip = s->resume_skip;
    r->broken = 0;
    if (e->end_us > r->last_end_us)
        r->last_end_us = e->end_us;
    if (e->end_us > s->newest_us)
        s->newest_us = e->end_us;
    if (r->seen <= s->warmup)
        return;
    if (r->skip > 0) {
        r->skip--;
        return;
    }
    r->tested++;
    s->datapoints++;
    /* onset: the step's start; detection: its end, when it is known */
    if (dur > 0 &&
        tw_cd_feed(&r->step, dur, e->start_us, e->step) == TW_CD_SHIFTED &&
        r->step.detect.n == r->step.n - 1)
        r->step.detect.t_us = e->end_us;
    if (fwd > 0) {
        r->has_fwd = 1;
        if (tw_cd_feed(&r->fwd, fwd, e->start_us, e->step) == TW_CD_SHIFTED &&
            r->fwd.detect.n == r->fwd.n - 1)
            r->fwd.detect.t_us = e->end_us;
    }
}

/* Walks the sorted entries: each TRAIN step with the forwards that start
 * inside it. */
static void fs_feed(fs_state *s, size_t n)
{
    if (n == 0)
        return; /* s->ent may still be NULL: qsort must not see it */
    qsort(s->ent, n, sizeof(*s->ent), entry_cmp);
    for (size_t a = 0; a < n;) {
        const fs_entry *e = &s->ent[a];
        fs_rank *r = &s->ranks[e->rank];
        size_t b = a + 1;
        if (e->kind == 2) {
            r->broken = 1;
        } else if (e->kind == 0) {
            double fwd = 0;
            for (; b < n && s->ent[b].rank == e->rank && s->ent[b].kind == 1 &&
                   s->ent[b].start_us < e->end_us;
                 b++)
                fwd += (double)(s->ent[b].end_us - s->ent[b].start_us) / 1e6;
            fs_train_step(s, r, e, fwd);
        }
        if (e->kind != 1 && e->end_us > r->last_us)
            r->last_us = e->end_us;
        a = b;
    }
}

/* Whether a peer slowed over the newest `k` of its steps. */
static int peer_slowed(fs_state *s, fs_rank *p, uint32_t k)
{
    if (p->step.state == TW_CD_SHIFTED)
        return 1;
    if (p->step.state != TW_CD_WATCHING)
        return 0;
    double base = tw_cd_baseline(&p->step);
    return base > 0 &&
           tw_cd_recent(&p->step, k) >= base * (1.0 + s->cd.min_shift / 2.0);
}

/* Whether rank i's own work slowed: 1 yes, 0 no (its peers slowed as
 * much: job-wide), -1 not yet (waiting for another rank, or no shift). */
static int own_shift(fs_state *s, uint32_t i)
{
    fs_rank *r = &s->ranks[i];
    if (r->has_fwd)
        return r->fwd.state == TW_CD_SHIFTED ? 1 : -1;
    if (r->step.state != TW_CD_SHIFTED)
        return -1;
    int64_t since = r->step.n - r->step.onset.n;
    uint32_t k = since > (int64_t)TW_CD_LAST ? TW_CD_LAST
                 : since < 1                 ? 1
                                             : (uint32_t)since;
    uint32_t peers = 0, slowed = 0;
    for (uint32_t j = 0; j < s->names.count; j++)
        if (j != i && s->ranks[j].step.state != TW_CD_LEARNING) {
            peers++;
            slowed += (uint32_t)peer_slowed(s, &s->ranks[j], k);
        }
    return peers == 0 || 2 * slowed < peers ? 1 : 0;
}

/* The rank's step-time median since its onset (s). */
static double fs_after(fs_rank *r)
{
    if (r->step.state == TW_CD_SHIFTED)
        return r->step.after;
    const tw_cd *d = r->has_fwd ? &r->fwd : &r->step;
    int64_t since = d->n - d->onset.n;
    return tw_cd_recent(&r->step, since > (int64_t)TW_CD_LAST ? TW_CD_LAST
                                  : since < 1                 ? 1
                                              : (uint32_t)since);
}

static void fs_verdict_set(fs_rank *r, fs_verdict v)
{
    const tw_cd *d = r->has_fwd ? &r->fwd : &r->step;
    r->verdict = (uint8_t)v;
    r->onset = d->onset;
    r->detect = d->detect;
    r->before = r->step.state == TW_CD_SHIFTED ? r->step.before
                                               : tw_cd_baseline(&r->step);
}

/* Gives a verdict to every rank whose own work (or, without forward
 * events, step time) shifted. */
static void fs_judge(fs_state *s)
{
    uint32_t nranks = s->names.count, cand = 0, flagged = 0;
    uint8_t *own = calloc(nranks ? nranks : 1, 1);
    if (!own)
        return; /* judged at the next scan */
    for (uint32_t i = 0; i < nranks; i++) {
        fs_rank *r = &s->ranks[i];
        flagged += r->verdict == FS_FAIL_SLOW;
        if (r->verdict != FS_NONE && r->verdict != FS_WAITING)
            continue;
        int o = own_shift(s, i);
        if (o > 0) {
            own[i] = 1;
            cand++;
        } else if (o == 0) {
            fs_verdict_set(r, FS_JOB_WIDE);
            s->job_wide++;
        } else if (r->step.state == TW_CD_SHIFTED) {
            r->verdict = FS_WAITING; /* may turn fail-slow later */
        }
    }
    /* more than half of the job's ranks (both of two) at once: job-wide */
    int wide = nranks >= 2 && 2 * (cand + flagged) > nranks;
    for (uint32_t i = 0; i < nranks; i++) {
        if (!own[i])
            continue;
        fs_verdict_set(&s->ranks[i], wide ? FS_JOB_WIDE : FS_FAIL_SLOW);
        s->job_wide += wide;
    }
    free(own);
}

static int fs_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    fs_state *s = state;
    size_t n;
    if (fs_collect(s, scan, &n) != TW_OK) {
        snprintf(err, errlen, "FailSlow: out of memory");
        return TW_ERR;
    }
    fs_feed(s, n);
    fs_judge(s);
    int64_t found = 0;
    for (uint32_t i = 0; i < s->names.count; i++)
        found += s->ranks[i].verdict == FS_FAIL_SLOW;
    if (found > 0) {
        s->triggered += found;
        s->violations += found;
        if (s->first_us == 0)
            s->first_us = scan->start_us;
        s->last_us = scan->end_us;
    }
    out->condition_met = found > 0;
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;
}

static const char *fs_parameters_text(void *state)
{
    return ((const fs_state *)state)->params_text;
}

static const char *const fs_state_text[] = {"learning", "watching", "shifted"};

/* Hours from the onset to the job's newest step. */
static double fs_hours_since(const fs_state *s, const fs_rank *r)
{
    int64_t d = s->newest_us - r->onset.t_us;
    return d > 0 ? (double)d / 3.6e9 : 0.0;
}

/* The rank's step time now against before its onset. */
static double fs_slowdown(fs_rank *r)
{
    return r->before > 0 ? fs_after(r) / r->before : 0.0;
}

static void fs_details_shift(const tw_host *h, tw_json *j, const fs_state *s,
                             fs_rank *r)
{
    double slowdown = fs_slowdown(r);
    h->json_key(j, "onset_step");
    h->json_int(j, r->onset.step);
    h->json_key(j, "onset_us");
    h->json_int(j, r->onset.t_us);
    h->json_key(j, "detected_step");
    h->json_int(j, r->detect.step);
    h->json_key(j, "detected_us");
    h->json_int(j, r->detect.t_us);
    h->json_key(j, "before_s");
    h->json_double(j, r->before);
    h->json_key(j, "after_s");
    h->json_double(j, fs_after(r));
    h->json_key(j, "slowdown");
    h->json_double(j, slowdown);
    h->json_key(j, "wasted_fraction");
    h->json_double(j, slowdown > 1 ? 1.0 - 1.0 / slowdown : 0.0);
    h->json_key(j, "hours_since_onset");
    h->json_double(j, fs_hours_since(s, r));
    if (r->has_fwd) {
        h->json_key(j, "forward_slowdown");
        h->json_double(j, r->fwd.state == TW_CD_SHIFTED && r->fwd.before > 0
                              ? r->fwd.after / r->fwd.before
                              : 1.0);
    }
}

/* Details only: the host writes the envelope around them. */
static int fs_details(void *state, tw_json *j)
{
    fs_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    h->json_key(j, "job_wide");
    h->json_int(j, s->job_wide);
    h->json_key(j, "ranks");
    h->json_object_begin(j);
    for (uint32_t i = 0; i < s->names.count; i++) {
        fs_rank *r = &s->ranks[i];
        h->json_key(j, tw_namemap_key(&s->names, i));
        h->json_object_begin(j);
        h->json_key(j, "verdict");
        h->json_string(j, fs_verdict_text[r->verdict]);
        h->json_key(j, "state");
        h->json_string(j, fs_state_text[r->step.state]);
        h->json_key(j, "tested");
        h->json_int(j, r->tested);
        h->json_key(j, "baseline_s");
        h->json_double(j, r->verdict != FS_NONE ? r->before
                                                : tw_cd_baseline(&r->step));
        if (r->verdict != FS_NONE && r->verdict != FS_WAITING)
            fs_details_shift(h, j, s, r);
        h->json_object_end(j);
    }
    h->json_object_end(j);
    h->json_object_end(j);
    return TW_OK;
}

static int fs_save(void *state, tw_buf *out)
{
    fs_state *s = state;
    tw_ser w;
    tw_ser_init(&w, s->host, out);
    tw_ser_u32(&w, FS_MAGIC);
    tw_ser_i64(&w, s->triggered);
    tw_ser_i64(&w, s->violations);
    tw_ser_i64(&w, s->datapoints);
    tw_ser_i64(&w, s->job_wide);
    tw_ser_i64(&w, s->first_us);
    tw_ser_i64(&w, s->last_us);
    tw_ser_i64(&w, s->newest_us);
    tw_namemap_save(&s->names, &w);
    for (uint32_t i = 0; i < s->names.count; i++) {
        const fs_rank *r = &s->ranks[i];
        tw_cd_save(&r->step, &w);
        tw_cd_save(&r->fwd, &w);
        tw_ser_i64(&w, r->seen);
        tw_ser_i64(&w, r->tested);
        tw_ser_i64(&w, r->last_end_us);
        tw_ser_i64(&w, r->last_us);
        tw_ser_i64(&w, r->skip);
        tw_ser_u8(&w, r->broken);
        tw_ser_u8(&w, r->has_fwd);
        tw_ser_u8(&w, r->verdict);
        tw_ser_i64(&w, r->onset.n);
        tw_ser_i64(&w, r->onset.t_us);
        tw_ser_i64(&w, r->onset.step);
        tw_ser_i64(&w, r->detect.n);
        tw_ser_i64(&w, r->detect.t_us);
        tw_ser_i64(&w, r->detect.step);
        tw_ser_f64(&w, r->before);
    }
    return tw_ser_ok(&w) ? TW_OK : TW_ERR;
}

static int fs_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    fs_state *s = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    if (tw_deser_u32(&d) != FS_MAGIC)
        tw_deser_fail(&d);
    s->triggered = tw_deser_i64(&d);
    s->violations = tw_deser_i64(&d);
    s->datapoints = tw_deser_i64(&d);
    s->job_wide = tw_deser_i64(&d);
    s->first_us = tw_deser_i64(&d);
    s->last_us = tw_deser_i64(&d);
    s->newest_us = tw_deser_i64(&d);
    tw_namemap names;
    tw_namemap_init(&names);
    if (tw_deser_ok(&d) && tw_namemap_load(&names, &d) != TW_OK)
        tw_deser_fail(&d);
    for (uint32_t i = 0; i < names.count && tw_deser_ok(&d); i++) {
        uint32_t idx;
        if (fs_rank_of(s, tw_namemap_key(&names, i), &idx) != TW_OK ||
            idx != i) {
            tw_deser_fail(&d);
            break;
        }
        fs_rank *r = &s->ranks[i];
        if (tw_cd_load(&r->step, &d) != TW_OK ||
            tw_cd_load(&r->fwd, &d) != TW_OK) {
            tw_deser_fail(&d);
            break;
        }
        r->seen = tw_deser_i64(&d);
        r->tested = tw_deser_i64(&d);
        r->last_end_us = tw_deser_i64(&d);
        r->last_us = tw_deser_i64(&d);
        r->skip = tw_deser_i64(&d);
        r->broken = tw_deser_u8(&d);
        r->has_fwd = tw_deser_u8(&d);
        r->verdict = tw_deser_u8(&d);
        r->onset.n = tw_deser_i64(&d);
        r->onset.t_us = tw_deser_i64(&d);
        r->onset.step = tw_deser_i64(&d);
        r->detect.n = tw_deser_i64(&d);
        r->detect.t_us = tw_deser_i64(&d);
        r->detect.step = tw_deser_i64(&d);
        r->before = tw_deser_f64(&d);
        if (r->verdict > FS_JOB_WIDE)
            tw_deser_fail(&d);
    }
    tw_namemap_free(&names);
    if (!tw_deser_done(&d)) {
        snprintf(err, errlen,
                 "FailSlow: checkpoint is truncated, corrupt or not from "
                 "this rule");
        return TW_ERR;
    }
    return TW_OK;
}

/* The fail-slow ranks, the largest slowdown first. */
static int fs_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                      char *err, size_t errlen)
{
    fs_state *s = state;
    (void)ctx, (void)err, (void)errlen;
    fs_rank *worst = NULL;
    const char *worst_id = NULL;
    double below = INFINITY;
    size_t flagged = 0;
    for (uint32_t i = 0; i < s->names.count; i++)
        flagged += s->ranks[i].verdict == FS_FAIL_SLOW;
    while (f->nnames < TW_FINDING_MAX_NODES) {
        int64_t pick = -1;
        for (uint32_t i = 0; i < s->names.count; i++) {
            fs_rank *r = &s->ranks[i];
            double sd = fs_slowdown(r);
            if (r->verdict == FS_FAIL_SLOW && sd < below &&
                (pick < 0 || sd > fs_slowdown(&s->ranks[pick])))
                pick = i;
        }
        if (pick < 0)
            break;
        below = fs_slowdown(&s->ranks[pick]);
        if (!worst) {
            worst = &s->ranks[pick];
            worst_id = tw_namemap_key(&s->names, (uint32_t)pick);
        }
        tw_finding_add_name(f, tw_namemap_key(&s->names, (uint32_t)pick));
    }
    if (flagged > f->ninvolved)
        f->ninvolved = flagged;
    if (!worst)
        return TW_OK;
    f->first_us = worst->onset.t_us;
    f->last_us = s->newest_us;
    double sd = fs_slowdown(worst);
    double wasted = sd > 1 ? 1.0 - 1.0 / sd : 0.0;
    double hours = fs_hours_since(s, worst);
    f->value = sd;
    f->limit = 1.0 + s->cd.min_shift;
    snprintf(f->unit, sizeof(f->unit), "x its own");
    if (worst->has_fwd && worst->fwd.state == TW_CD_SHIFTED &&
        worst->fwd.before > 0)
        tw_finding_text(f->summary,
                        "%s became slower than it was itself from TRAIN "
                        "step %lld on, and stayed slow: its forward pass "
                        "%.2fx, the job's steps %.2fx; %zu of %u ranks "
                        "fail-slow.",
                        worst_id, (long long)worst->onset.step,
                        worst->fwd.after / worst->fwd.before, sd, flagged,
                        s->names.count);
    else
        tw_finding_text(f->summary,
                        "%s became %.2fx slower than it was itself from "
                        "TRAIN step %lld on, and stayed slow: %zu of %u "
                        "ranks fail-slow.",
                        worst_id, sd, (long long)worst->onset.step, flagged,
                        s->names.count);
    tw_finding_text(
        f->magnitude,
        "%s: median step %.4g s before, %.4g s after (onset at step %lld, "
        "detected at step %lld, %.1f s later); the job loses %.0f %% of its "
        "time to it, %.3g rank-hours of %u ranks so far%s",
        worst_id, worst->before, fs_after(worst), (long long)worst->onset.step,
        (long long)worst->detect.step,
        (double)(worst->detect.t_us - worst->onset.t_us) / 1e6, 100.0 * wasted,
        wasted * hours * s->names.count, s->names.count,
        worst->has_fwd ? "; its own forward pass slowed, the other ranks wait"
                       : "");
    tw_finding_text(f->recommendation,
                    "Look at what changed on that rank at the onset: GPU "
                    "clocks and temperature (throttling), ECC or XID errors, "
                    "a degraded link, another process on its node; drain "
                    "the node or restart from a checkpoint without it.");
    tw_finding_text(f->parameters,
                    "min_shift %g, threshold %g, z %g, confirm %u, persist "
                    "%g s, warmup %lld, baseline %u",
                    s->cd.min_shift, s->cd.h, s->cd.z, s->cd.confirm,
                    s->cd.persist_s, (long long)s->warmup, s->cd.baseline);
    return TW_OK;
}

static const tw_rule_descriptor fs_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "FailSlow",
    .description = "Finds the rank whose TRAIN steps became persistently "
                   "slower than its own earlier steps (online change-point "
                   "detection).",
    .params = fs_params,
    .nparams = P_COUNT,
    .create = fs_create,
    .scan = fs_scan,
    .details = fs_details,
    .parameters_text = fs_parameters_text,
    .save = fs_save,
    .restore = fs_restore,
    .destroy = fs_destroy,
    .finding = fs_finding,
    .finding_help =
        "A rank's steps became persistently slower than its own earlier "
        "steps (by more than min_shift) from an onset on, while the other "
        "ranks did not slow by themselves: a degrading GPU, throttling, a "
        "failing link or a neighbour process. In synchronous training "
        "every rank runs at its pace; the finding gives the onset, the "
        "medians before and after and the time the job loses to it.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &fs_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_FRAMEWORK;
}
