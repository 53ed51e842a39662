/*
 * loss_not_decreasing.c - LossNotDecreasing (DEBUG_RULES.md §4.7).
 *
 * Watches each selected scalar loss on its own (per tensor name and mode),
 * on mode steps. At a saved step s it needs a baseline b, the newest saved
 * step <= s - num_steps (none: skip), and checks only when s >=
 * last_checked + num_steps; then, with d = 100 (L_b - L_s) / |L_b|,
 * it fires when d < diff_percent: the loss went down by less than
 * diff_percent percent over num_steps steps (the documented meaning).
 * compat_2019 true uses the 2019 test-forced formula instead: fire when
 * 100 (L_s - L_b) / L_b >= diff_percent (diff_percent as an allowed rise).
 * Either way the finding says "increasing" when the loss rose by more than
 * increase_threshold_percent.
 *
 * Selection: the `losses` collection (and, as the reference found
 * `loss_0` without one, scalar tensors whose name matches (?i)loss) when
 * use_losses_collection, ∪ collection_names ∪ tensor_regex; only scalar
 * tensors (a "value" reduction or one raw value) are read.
 *
 * Decisions (README "Debugging rules"):
 *  - §8.3 item 1: the documented formula is the default, compat_2019 the
 *    test-forced one; |L_b| in the denominator so negative losses work;
 *    L_b = 0 compares L_s with 0 (d = +Inf below, 0 equal, -Inf above);
 *  - mode None: a loss is watched in the first of EVAL, TRAIN, GLOBAL seen
 *    for it so far (the reference picks the first mode with saved steps;
 *    streaming cannot see the future, so a job that starts evaluating
 *    later switches to EVAL from then on); a mode given watches only it;
 *  - a NaN or Inf loss is neither a baseline nor checked (ExplodingTensor
 *    reports it);
 *  - state is bounded: per loss, the saved steps of the last num_steps
 *    mode steps and the newest one before them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum {
    P_USE_LOSSES = 0,
    P_NUM_STEPS,
    P_DIFF_PERCENT,
    P_INCREASE_PERCENT,
    P_COMPAT_2019,
    P_OWN
};

static const tw_param_spec lnd_params[] = {
    {"use_losses_collection", TW_PARAM_BOOL, "true", 0, 1,
     "also watch the losses collection (and scalar tensors named like "
     "loss)"},
    {"num_steps", TW_PARAM_INT, "10", 1, 9.0e15,
     "mode steps between the baseline and the checked step"},
    {"diff_percent", TW_PARAM_DOUBLE, "0.1", 0, 100,
     "the loss must fall by at least this percent over num_steps"},
    {"increase_threshold_percent", TW_PARAM_DOUBLE, "5", 0, 100,
     "a rise above this percent is reported as an increasing loss"},
    {"compat_2019", TW_PARAM_BOOL, "false", 0, 1,
     "use the 2019 reference tests' formula: fire when the loss rose by "
     ">= diff_percent percent"},
    DBG_SELECT_PARAMS,
    DBG_COMMON_PARAMS,
};

typedef struct lnd_point {
    int64_t step;
    double value;
} lnd_point;

/* One watched loss in one mode. */
typedef struct lnd_series {
    char *name;
    tw_mode mode;
    int64_t last_checked; /* -1 = never */
    lnd_point *pts;       /* oldest first */
    size_t n, cap;
} lnd_series;

typedef struct lnd_state {
    int use_losses, compat;
    int64_t num_steps;
    double diff, increase;
    tw_mode mode;        /* NONE: EVAL > TRAIN > GLOBAL preference */
    pcre2_code *loss_re; /* (?i)loss */
    pcre2_match_data *md;
    lnd_series *series;
    size_t nseries, cap;
} lnd_state;

static void lnd_destroy(void *impl)
{
    lnd_state *s = impl;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nseries; i++) {
        free(s->series[i].name);
        free(s->series[i].pts);
    }
    free(s->series);
    pcre2_code_free(s->loss_re);
    pcre2_match_data_free(s->md);
    free(s);
}

static int lnd_create(const tw_param_value *v, void **impl, char *err,
                      size_t errlen)
{
    lnd_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "LossNotDecreasing: out of memory");
        return TW_ERR;
    }
    s->use_losses = v[P_USE_LOSSES].i != 0;
    s->num_steps = v[P_NUM_STEPS].i;
    s->diff = v[P_DIFF_PERCENT].d;
    s->increase = v[P_INCREASE_PERCENT].d;
    s->compat = v[P_COMPAT_2019].i != 0;
    const tw_param_value *coll = &v[P_OWN], *re = &v[P_OWN + 1];
    if (!s->use_losses && coll->is_none && re->is_none) {
        snprintf(err, errlen,
                 "LossNotDecreasing: with use_losses_collection false, "
                 "collection_names or tensor_regex must name the losses");
        free(s);
        return TW_ERR;
    }
    const tw_param_value *mode = &v[P_OWN + DBG_NSELECT + 2];
    s->mode = TW_MODE_NONE;
    if (!mode->is_none && tw_tensor_mode_parse(mode->s, &s->mode) != TW_OK) {
        snprintf(err, errlen, "LossNotDecreasing: bad mode '%s'", mode->s);
        free(s);
        return TW_ERR;
    }
    char why[200];
    s->loss_re = tw_tensor_regex_compile("(?i)loss", why, sizeof(why));
    s->md = s->loss_re ? pcre2_match_data_create_from_pattern(s->loss_re, NULL)
                       : NULL;
    if (s->md == NULL) {
        snprintf(err, errlen, "LossNotDecreasing: %s",
                 s->loss_re ? "out of memory" : why);
        lnd_destroy(s);
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

static int lnd_is_loss(void *impl, const tw_tensor *t)
{
    lnd_state *s = impl;
    if (!s->use_losses)
        return 0;
    return tw_tensor_in_collection(t, "losses") ||
           tw_tensor_regex_search(s->loss_re, s->md, t->name);
}

static tw_mode mode_of(const tw_tensor *t)
{
    return t->mode == TW_MODE_NONE ? TW_MODE_GLOBAL : t->mode;
}

static lnd_series *lnd_find(lnd_state *s, const char *name, tw_mode mode,
                            int create)
{
    for (size_t i = 0; i < s->nseries; i++)
        if (s->series[i].mode == mode && strcmp(s->series[i].name, name) == 0)
            return &s->series[i];
    if (!create)
        return NULL;
    if (s->nseries == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        lnd_series *v = realloc(s->series, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        s->series = v;
        s->cap = cap;
    }
    lnd_series *x = &s->series[s->nseries];
    memset(x, 0, sizeof(*x));
    if ((x->name = strdup(name)) == NULL)
        return NULL;
    x->mode = mode;
    x->last_checked = -1;
    s->nseries++;
    return x;
}

/* Is `mode` the one this loss is watched in (mode None: the preferred of
 * the modes seen for it so far)? */
static int lnd_watched(lnd_state *s, const char *name, tw_mode mode)
{
    if (s->mode != TW_MODE_NONE)
        return mode == s->mode;
    static const tw_mode pref[] = {TW_MODE_EVAL, TW_MODE_TRAIN, TW_MODE_GLOBAL};
    for (size_t i = 0; i < 3; i++)
        if (pref[i] == mode || lnd_find(s, name, pref[i], 0) != NULL)
            return pref[i] == mode;
    return 0; /* PREDICT losses are never watched by default */
}

/* Appends (step, value), keeping only the newest point at or before
 * step - num_steps and those after it. */
static int lnd_push(lnd_state *s, lnd_series *x, int64_t step, double value)
{
    if (x->n > 0 && step <= x->pts[x->n - 1].step)
        return TW_OK; /* a step seen again (redelivered): first value wins */
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 8;
        lnd_point *v = realloc(x->pts, cap * sizeof(*v));
        if (v == NULL)
            return TW_ERR;
        x->pts = v;
        x->cap = cap;
    }
    x->pts[x->n++] = (lnd_point){step, value};
    size_t drop = 0;
    while (drop + 1 < x->n && x->pts[drop + 1].step <= step - s->num_steps)
        drop++;
    if (drop > 0) {
        memmove(x->pts, x->pts + drop, (x->n - drop) * sizeof(*x->pts));
        x->n -= drop;
    }
    return TW_OK;
}

/* 1 fired (hit filled), 0 not, TW_ERR out of memory. */
static int lnd_check(lnd_state *s, const tw_tensor *t, double value,
                     dbg_hit *hit)
{
    tw_mode mode = mode_of(t);
    if (!lnd_watched(s, t->name, mode)) {
        /* still record it, so the preference sees the mode */
        lnd_series *x = lnd_find(s, t->name, mode, 1);
        return x == NULL ? TW_ERR : 0;
    }
    lnd_series *x = lnd_find(s, t->name, mode, 1);
    if (x == NULL || lnd_push(s, x, t->mode_step, value) != TW_OK)
        return TW_ERR;
    int64_t at = t->mode_step;
    if (x->n < 2 || x->pts[0].step > at - s->num_steps)
        return 0; /* no baseline yet */
    if (x->last_checked >= 0 && at < x->last_checked + s->num_steps)
        return 0;
    x->last_checked = at;
    const lnd_point *b = &x->pts[0];
    double lb = b->value;
    double d; /* percent decrease */
    if (lb != 0)
        d = 100.0 * (lb - value) / fabs(lb);
    else
        d = value < 0 ? INFINITY : value == 0 ? 0 : -INFINITY;
    int fire;
    if (s->compat)
        fire = lb != 0 ? 100.0 * (value - lb) / lb >= s->diff : value >= lb;
    else
        fire = d < s->diff;
    if (!fire)
        return 0;
    dbg_hit_set(hit, t, value, s->diff,
                "loss %.6g at mode step %lld vs %.6g at %lld: %s %.3g %% "
                "over %lld steps (needs a fall of >= %g %%)%s",
                value, (long long)at, lb, (long long)b->step,
                d >= 0 ? "fell" : "rose", fabs(d), (long long)(at - b->step),
                s->diff, -d > s->increase ? "; the loss is increasing" : "");
    return 1;
}

static int lnd_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                    size_t errlen)
{
    lnd_state *s = impl;
    int fired = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        double v;
        if (!dbg_scalar(t, &v) || !isfinite(v))
            continue;
        dbg_hit h;
        memset(&h, 0, sizeof(h));
        int rc = lnd_check(s, t, v, &h);
        if (rc == TW_ERR) {
            snprintf(err, errlen, "LossNotDecreasing: out of memory");
            return TW_ERR;
        }
        if (rc == 1 && !fired) {
            *hit = h;
            fired = 1;
        }
    }
    return fired;
}

static void lnd_save(void *impl, tw_ser *w)
{
    lnd_state *s = impl;
    tw_ser_u64(w, s->nseries);
    for (size_t i = 0; i < s->nseries; i++) {
        const lnd_series *x = &s->series[i];
        tw_ser_str(w, x->name);
        tw_ser_u8(w, (uint8_t)x->mode);
        tw_ser_i64(w, x->last_checked);
        tw_ser_u64(w, x->n);
        for (size_t k = 0; k < x->n; k++) {
            tw_ser_i64(w, x->pts[k].step);
            tw_ser_f64(w, x->pts[k].value);
        }
    }
}

static int lnd_restore(void *impl, tw_deser *d)
{
    lnd_state *s = impl;
    uint64_t n = tw_deser_count(d, 18);
    for (uint64_t i = 0; i < n && tw_deser_ok(d); i++) {
        char *name = tw_deser_str(d);
        uint8_t mode = tw_deser_u8(d);
        if (name == NULL || mode > TW_MODE_GLOBAL) {
            free(name);
            return TW_ERR;
        }
        lnd_series *x = lnd_find(s, name, (tw_mode)mode, 1);
        free(name);
        if (x == NULL)
            return TW_ERR;
        x->last_checked = tw_deser_i64(d);
        uint64_t np = tw_deser_count(d, 16);
        for (uint64_t k = 0; k < np && tw_deser_ok(d); k++) {
            int64_t step = tw_deser_i64(d);
            double v = tw_deser_f64(d);
            if (x->n == x->cap) {
                size_t cap = x->cap ? 2 * x->cap : 8;
                lnd_point *p = realloc(x->pts, cap * sizeof(*p));
                if (p == NULL)
                    return TW_ERR;
                x->pts = p;
                x->cap = cap;
            }
            x->pts[x->n++] = (lnd_point){step, v};
        }
    }
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

static const dbg_rule_ops lnd_ops = {
    .name = "LossNotDecreasing",
    .nown = P_OWN,
    .select = 1,
    .mode_is_own = 1,
    .select_extra = lnd_is_loss,
    .create = lnd_create,
    .step = lnd_step,
    .save = lnd_save,
    .restore = lnd_restore,
    .destroy = lnd_destroy,
    .condition = "The loss is not decreasing",
    .recommendation =
        "Check that optimizer.step() and zero_grad() run every step, that "
        "the optimizer was given the model's parameters, and that the "
        "learning rate is neither 0 nor too large; check the labels.",
};

DBG_RULE_DEFINE(lnd_ops, lnd_params, "LossNotDecreasing",
                "Flags a loss that fell by less than `diff_percent` percent "
                "over `num_steps` saved steps.",
                "The loss stopped going down: a learning rate of 0 (or far "
                "too high), a missing optimizer.step() or zero_grad(), an "
                "optimizer without the model's parameters, a frozen model "
                "or broken labels. Fix the training loop or the learning "
                "rate; if the model has converged, stop the job.")
