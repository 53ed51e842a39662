/*
 * weight_update_ratio.c - WeightUpdateRatio (DEBUG_RULES.md §4.4).
 *
 * Condition: at a step s, for a weight tensor with an update since its
 * previous publication p, r = ||W_s - W_p||_2 / (||W_p||_2 + epsilon); the
 * rule fires when r > large_threshold or r < small_threshold. Weights are
 * the `weights` collection and names matching ^(?!gradient).*weight (the
 * PyTorch default collection, which also matches norm layers' .weight).
 *
 * Decisions (README "Debugging rules"):
 *  - streamed: ||W_s - W_p|| is the hook's update_l2 with prev_step = p,
 *    ||W_p|| the l2 the hook published for the same tensor at step p
 *    (kept by the rule); a weight without update_l2, or whose step p the
 *    rule did not see, is not evaluated;
 *  - num_steps set: evaluated only when s - p <= num_steps (the reference
 *    takes a saved step p >= s - num_steps);
 *  - frozen weights give r = 0 and fire as "too small", a zero-initialized
 *    weight fires as "too large" (the reference's quirks, kept);
 *  - norms are flattened L2 in float64 (§8.3 item 5);
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum { P_NUM_STEPS = 0, P_LARGE, P_SMALL, P_EPSILON, P_OWN };

static const tw_param_spec wur_params[] = {
    {"num_steps", TW_PARAM_INT, NULL, 1, 9.0e15,
     "only updates over at most this many steps count (None: any)"},
    {"large_threshold", TW_PARAM_DOUBLE, "10.0", 0, 1e300,
     "fire when the update/weight ratio is above this"},
    {"small_threshold", TW_PARAM_DOUBLE, "1e-8", 0, 1e300,
     "fire when the update/weight ratio is below this"},
    {"epsilon", TW_PARAM_DOUBLE, "1e-9", 0, 1e300,
     "added to the weight norm in the denominator"},
    DBG_COMMON_PARAMS,
};

typedef struct wur_state {
    int64_t num_steps; /* -1: None */
    double large, small, eps;
    pcre2_code *re;
    pcre2_match_data *md;
    dbg_map l2; /* per weight: [0] step (int64), [1] l2 (double) */
} wur_state;

static void wur_destroy(void *impl)
{
    wur_state *s = impl;
    if (s == NULL)
        return;
    pcre2_code_free(s->re);
    pcre2_match_data_free(s->md);
    dbg_map_free(&s->l2);
    free(s);
}

static int wur_create(const tw_param_value *v, void **impl, char *err,
                      size_t errlen)
{
    wur_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "WeightUpdateRatio: out of memory");
        return TW_ERR;
    }
    s->num_steps = v[P_NUM_STEPS].is_none ? -1 : v[P_NUM_STEPS].i;
    s->large = v[P_LARGE].d;
    s->small = v[P_SMALL].d;
    s->eps = v[P_EPSILON].d;
    dbg_map_init(&s->l2, 2);
    char why[200];
    s->re = tw_tensor_regex_compile("^(?!gradient).*weight", why, sizeof(why));
    s->md = s->re ? pcre2_match_data_create_from_pattern(s->re, NULL) : NULL;
    if (s->md == NULL) {
        snprintf(err, errlen, "WeightUpdateRatio: %s",
                 s->re ? "out of memory" : why);
        wur_destroy(s);
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

static int wur_is_weight(void *impl, const tw_tensor *t)
{
    wur_state *s = impl;
    return tw_tensor_in_collection(t, "weights") ||
           tw_tensor_regex_search(s->re, s->md, t->name);
}

static int wur_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                    size_t errlen)
{
    wur_state *s = impl;
    int fired = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        double l2, upd;
        int has_l2 = tw_tensor_get(t, "l2", &l2);
        int has_upd = tw_tensor_get(t, "update_l2", &upd);
        int64_t *prev = dbg_map_get(&s->l2, t->name, TW_MODE_NONE, 0);
        if (!fired && has_upd && t->prev_step >= 0 && prev != NULL &&
            prev[0] == t->prev_step &&
            (s->num_steps < 0 || t->step - t->prev_step <= s->num_steps)) {
            double wp;
            memcpy(&wp, &prev[1], sizeof(wp));
            double r = upd / (wp + s->eps);
            if (r > s->large || r < s->small) {
                dbg_hit_set(hit, t, r, r > s->large ? s->large : s->small,
                            "update/weight ratio %.3g %s %g (|dW| %.3g over "
                            "steps %lld..%lld, |W| %.3g)",
                            r, r > s->large ? ">" : "<",
                            r > s->large ? s->large : s->small, upd,
                            (long long)t->prev_step, (long long)t->step, wp);
                fired = 1;
            }
        }
        if (has_l2) {
            int64_t *slot = dbg_map_get(&s->l2, t->name, TW_MODE_NONE, 1);
            if (slot == NULL) {
                snprintf(err, errlen, "WeightUpdateRatio: out of memory");
                return TW_ERR;
            }
            slot[0] = t->step;
            memcpy(&slot[1], &l2, sizeof(l2));
        }
    }
    return fired;
}

static void wur_save(void *impl, tw_ser *w)
{
    dbg_map_save(&((wur_state *)impl)->l2, w);
}

static int wur_restore(void *impl, tw_deser *d)
{
    return dbg_map_restore(&((wur_state *)impl)->l2, d);
}

static const dbg_rule_ops wur_ops = {
    .name = "WeightUpdateRatio",
    .nown = P_OWN,
    .select_extra = wur_is_weight,
    .create = wur_create,
    .step = wur_step,
    .save = wur_save,
    .restore = wur_restore,
    .destroy = wur_destroy,
    .condition = "A weight update is out of proportion to the weight",
    .recommendation =
        "A ratio near 0 means the weight does not learn (learning rate far "
        "too low, the parameter not given to the optimizer, or frozen); a "
        "ratio above large_threshold means steps too large for the weight "
        "(lower the learning rate) or a zero-initialized weight.",
};

DBG_RULE_DEFINE(wur_ops, wur_params, "WeightUpdateRatio",
                "Flags a step at which a weight's update norm divided by "
                "its norm is above `large_threshold` or below "
                "`small_threshold`.",
                "Weights change far too little (learning rate too low, "
                "parameters frozen or not in the optimizer) or far too much "
                "(learning rate too high) for their size. Adjust the "
                "learning rate or check the optimizer's parameter list.")
