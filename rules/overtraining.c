/*
 * overtraining.c - Overtraining (DEBUG_RULES.md §4.14).
 *
 * Condition: per loss and mode (TRAIN, EVAL), the best loss so far; a
 * saved step improves on it when L < best - delta; the rule fires when
 * either mode has gone patience_train (TRAIN, default 5) or
 * patience_validation (EVAL, default 10) saved steps without improving.
 * Losses: the `losses` collection and scalar tensors named like (?i)loss.
 *
 * Decisions (§8.3 item 3; README "Debugging rules"):
 *  - delta is absolute (default 0.01, the current guide's);
 *  - the unit is the saved step of that mode; the first value sets best;
 *  - either mode stalling fires;
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum { P_PT = 0, P_PV, P_DELTA, P_OWN };

static const tw_param_spec ot_params[] = {
    {"patience_train", TW_PARAM_INT, "5", 1, 9.0e15,
     "TRAIN saved steps without improvement before firing"},
    {"patience_validation", TW_PARAM_INT, "10", 1, 9.0e15,
     "EVAL saved steps without improvement before firing"},
    {"delta", TW_PARAM_DOUBLE, "0.01", 0, 1e300,
     "a loss improves when it is below the best by more than this"},
    DBG_COMMON_PARAMS,
};

/* Per (loss, mode): [0] best (double), [1] seen (0/1), [2] steps since. */
typedef struct ot_state {
    int64_t pt, pv;
    double delta;
    pcre2_code *re;
    pcre2_match_data *md;
    dbg_map best;
} ot_state;

static void ot_destroy(void *impl)
{
    ot_state *s = impl;
    if (s == NULL)
        return;
    pcre2_code_free(s->re);
    pcre2_match_data_free(s->md);
    dbg_map_free(&s->best);
    free(s);
}

static int ot_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    ot_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "Overtraining: out of memory");
        return TW_ERR;
    }
    s->pt = v[P_PT].i;
    s->pv = v[P_PV].i;
    s->delta = v[P_DELTA].d;
    dbg_map_init(&s->best, 3);
    char why[200];
    s->re = tw_tensor_regex_compile("(?i)loss", why, sizeof(why));
    s->md = s->re ? pcre2_match_data_create_from_pattern(s->re, NULL) : NULL;
    if (s->md == NULL) {
        snprintf(err, errlen, "Overtraining: %s",
                 s->re ? "out of memory" : why);
        ot_destroy(s);
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

static int ot_is_loss(void *impl, const tw_tensor *t)
{
    ot_state *s = impl;
    return tw_tensor_in_collection(t, "losses") ||
           tw_tensor_regex_search(s->re, s->md, t->name);
}

static int ot_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    ot_state *s = impl;
    int fired = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        double v;
        if ((t->mode != TW_MODE_TRAIN && t->mode != TW_MODE_EVAL) ||
            !dbg_scalar(t, &v) || !isfinite(v))
            continue;
        uint64_t *p = dbg_map_get(&s->best, t->name, t->mode, 1);
        if (p == NULL) {
            snprintf(err, errlen, "Overtraining: out of memory");
            return TW_ERR;
        }
        double best;
        memcpy(&best, &p[0], sizeof(best));
        if (!p[1] || v < best - s->delta) {
            memcpy(&p[0], &v, sizeof(v));
            p[1] = 1;
            p[2] = 0;
            continue;
        }
        p[2]++;
        int64_t patience = t->mode == TW_MODE_TRAIN ? s->pt : s->pv;
        if ((int64_t)p[2] >= patience && !fired) {
            dbg_hit_set(hit, t, (double)p[2], (double)patience,
                        "%s loss has not improved on its best %.4g by more "
                        "than %g for %llu saved steps",
                        t->mode == TW_MODE_TRAIN ? "training" : "validation",
                        best, s->delta, (unsigned long long)p[2]);
            fired = 1;
        }
    }
    return fired;
}

static void ot_save(void *impl, tw_ser *w)
{
    dbg_map_save(&((ot_state *)impl)->best, w);
}

static int ot_restore(void *impl, tw_deser *d)
{
    return dbg_map_restore(&((ot_state *)impl)->best, d);
}

static const dbg_rule_ops ot_ops = {
    .name = "Overtraining",
    .nown = P_OWN,
    .select_extra = ot_is_loss,
    .create = ot_create,
    .step = ot_step,
    .save = ot_save,
    .restore = ot_restore,
    .destroy = ot_destroy,
    .condition = "The loss no longer improves",
    .recommendation =
        "Training has plateaued: stop the job (or keep the best "
        "checkpoint) to save compute, or change the learning-rate "
        "schedule if the plateau is too early.",
};

DBG_RULE_DEFINE(ot_ops, ot_params, "Overtraining",
                "Flags a training or validation loss that has not improved "
                "by more than `delta` for `patience_train` / "
                "`patience_validation` saved steps.",
                "The loss has stopped improving: further training wastes "
                "compute (and validation loss may start to rise). Stop the "
                "job, keep the best checkpoint, or revisit the schedule.")
