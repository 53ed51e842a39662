/*
 * unchanged_tensor.c - UnchangedTensor (DEBUG_RULES.md §4.6).
 *
 * Condition: at a step, a selected tensor has had the same value at its
 * last num_steps saved steps (default 3), "the same" being numpy's
 * allclose(a, b, rtol, atol) with b the current value. Needs
 * collection_names or tensor_regex.
 *
 * Decisions (README "Debugging rules"):
 *  - scalars (a "value" reduction, e.g. a loss) are compared exactly as
 *    the reference does, each earlier value against the current one;
 *  - other tensors are streamed as reductions, not whole: a publication
 *    is unchanged when the hook's update_l2 (||W_s - W_p||, p the previous
 *    publication) <= atol * sqrt(numel) + rtol * l2 (the norm form of
 *    allclose; exact when rtol = atol = 0); the tensor fires when its last
 *    num_steps - 1 publications in a row were unchanged;
 *  - fewer than num_steps saved steps: not evaluated (as the reference);
 *  - equal_nan false: a NaN is never "unchanged" (as numpy);
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum { P_NUM_STEPS = 0, P_RTOL, P_ATOL, P_EQUAL_NAN, P_OWN };

#define UT_MAX_STEPS 64

static const tw_param_spec ut_params[] = {
    {"num_steps", TW_PARAM_INT, "3", 2, UT_MAX_STEPS,
     "saved steps a tensor must stay the same"},
    {"rtol", TW_PARAM_DOUBLE, "1e-05", 0, 1e300, "relative tolerance"},
    {"atol", TW_PARAM_DOUBLE, "1e-08", 0, 1e300, "absolute tolerance"},
    {"equal_nan", TW_PARAM_BOOL, "false", 0, 1,
     "a NaN equals a NaN (numpy allclose's equal_nan)"},
    DBG_SELECT_PARAMS,
    DBG_COMMON_PARAMS,
};

/* Per tensor: [0] last step, [1] run of unchanged publications (update
 * form) or values kept (scalar form), [2] next ring slot, [3..] the last
 * num_steps scalar values (doubles). */
#define UT_WORDS (3 + UT_MAX_STEPS)

typedef struct ut_state {
    int64_t num_steps;
    double rtol, atol;
    int equal_nan;
    dbg_map seen;
} ut_state;

static void ut_destroy(void *impl)
{
    ut_state *s = impl;
    if (s == NULL)
        return;
    dbg_map_free(&s->seen);
    free(s);
}

static int ut_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    ut_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "UnchangedTensor: out of memory");
        return TW_ERR;
    }
    s->num_steps = v[P_NUM_STEPS].i;
    s->rtol = v[P_RTOL].d;
    s->atol = v[P_ATOL].d;
    s->equal_nan = v[P_EQUAL_NAN].i != 0;
    dbg_map_init(&s->seen, UT_WORDS);
    *impl = s;
    return TW_OK;
}

static int ut_close(const ut_state *s, double a, double b)
{
    if (isnan(a) || isnan(b))
        return s->equal_nan && isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= s->atol + s->rtol * fabs(b);
}

static double ring_get(const uint64_t *slot, size_t i)
{
    double d;
    memcpy(&d, &slot[3 + i], sizeof(d));
    return d;
}

static void ring_set(uint64_t *slot, size_t i, double d)
{
    memcpy(&slot[3 + i], &d, sizeof(d));
}

/* 1 when t is unchanged over num_steps saved steps (updates the state). */
static int ut_unchanged(ut_state *s, const tw_tensor *t, uint64_t *slot,
                        double *measure)
{
    double v, upd, l2 = 0;
    int64_t last = (int64_t)slot[0];
    int fresh = slot[1] == 0 && slot[2] == 0;
    if (!fresh && t->step <= last)
        return 0; /* seen already */
    slot[0] = (uint64_t)t->step;
    if (dbg_scalar(t, &v)) {
        size_t n = slot[1], at = slot[2];
        ring_set(slot, at, v);
        slot[2] = (at + 1) % (uint64_t)s->num_steps;
        if (n < (uint64_t)s->num_steps)
            slot[1] = ++n;
        if (n < (uint64_t)s->num_steps)
            return 0;
        for (size_t i = 0; i < n; i++)
            if (!ut_close(s, ring_get(slot, i), v))
                return 0;
        *measure = 0;
        return 1;
    }
    if (!tw_tensor_get(t, "update_l2", &upd))
        return 0;
    tw_tensor_get(t, "l2", &l2);
    double tol = s->atol * sqrt((double)(t->numel > 0 ? t->numel : 1)) +
                 s->rtol * fabs(l2);
    int same = t->prev_step == last && !fresh && upd <= tol;
    slot[1] = same ? slot[1] + 1 : 0;
    slot[2] = 1; /* not fresh any more */
    *measure = upd;
    return slot[1] + 1 >= (uint64_t)s->num_steps;
}

static int ut_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    ut_state *s = impl;
    int fired = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        uint64_t *slot = dbg_map_get(&s->seen, t->name, t->mode, 1);
        if (slot == NULL) {
            snprintf(err, errlen, "UnchangedTensor: out of memory");
            return TW_ERR;
        }
        double m = 0;
        if (ut_unchanged(s, t, slot, &m) && !fired) {
            dbg_hit_set(hit, t, m, s->atol,
                        "unchanged over its last %lld saved steps (rtol %g, "
                        "atol %g)",
                        (long long)s->num_steps, s->rtol, s->atol);
            fired = 1;
        }
    }
    return fired;
}

static void ut_save(void *impl, tw_ser *w)
{
    dbg_map_save(&((ut_state *)impl)->seen, w);
}

static int ut_restore(void *impl, tw_deser *d)
{
    return dbg_map_restore(&((ut_state *)impl)->seen, d);
}

static const dbg_rule_ops ut_ops = {
    .name = "UnchangedTensor",
    .nown = P_OWN,
    .select = 1,
    .require_selection = 1,
    .create = ut_create,
    .step = ut_step,
    .save = ut_save,
    .restore = ut_restore,
    .destroy = ut_destroy,
    .condition = "A tensor stopped changing",
    .recommendation =
        "Check that the optimizer was given these parameters, that "
        "requires_grad is set, that the learning rate is not 0 and that "
        "optimizer.step() runs.",
};

DBG_RULE_DEFINE(ut_ops, ut_params, "UnchangedTensor",
                "Flags a selected tensor whose value is the same at its "
                "last `num_steps` saved steps.",
                "A tensor does not change between steps: parameters that "
                "are not in the optimizer or have requires_grad False, a "
                "learning rate of 0, or a constant loss. Check the "
                "optimizer's parameter list and the training loop.")
