/*
 * confusion.c - Confusion (DEBUG_RULES.md §4.11).
 *
 * Condition: with M[l][p] the count of (label l, prediction p) pairs and
 * r_i the samples of true class i, the rule fires when, for a class with
 * samples, M[i][i] / r_i < min_diag or M[i][p] / r_i > max_off_diag for
 * some p != i. Labels and predictions are 1-D class-id vectors published
 * raw (the hook sends small tensors the user names): the tensor named
 * `labels` or in collection `labels_collection`, and likewise for
 * `predictions`; no argmax (the reference has none).
 *
 * Decisions (README "Debugging rules"):
 *  - §8.3 item 2: normalization per true-class row, the only reading that
 *    passes the reference's four tests (the documented diagonal formula
 *    fires on a perfect classifier); rows without samples are skipped;
 *  - §8.3 item 4: per step by default; `cumulative` true accumulates the
 *    matrix over steps; at most 128 classes (the matrices live in the
 *    rule's state);
 *  - K = category_no, or max(label, prediction) + 1; a value that is not
 *    a class id in [0, K) (negative, fractional, NaN) makes the step not
 *    evaluated; vectors of different lengths too;
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum {
    P_CATEGORY_NO = 0,
    P_LABELS,
    P_PREDICTIONS,
    P_LABELS_COLL,
    P_PREDICTIONS_COLL,
    P_MIN_DIAG,
    P_MAX_OFF_DIAG,
    P_CUMULATIVE,
    P_OWN
};

#define CF_MAX_CLASSES 128

static const tw_param_spec cf_params[] = {
    {"category_no", TW_PARAM_INT, NULL, 2, CF_MAX_CLASSES,
     "number of classes (None: the largest label or prediction + 1)"},
    {"labels", TW_PARAM_STRING, "labels", 0, 0, "name of the labels tensor"},
    {"predictions", TW_PARAM_STRING, "predictions", 0, 0,
     "name of the predictions tensor (class ids)"},
    {"labels_collection", TW_PARAM_STRING, "labels", 0, 0,
     "collection holding the labels"},
    {"predictions_collection", TW_PARAM_STRING, "predictions", 0, 0,
     "collection holding the predictions"},
    {"min_diag", TW_PARAM_DOUBLE, "0.9", 0, 1,
     "least share of a class predicted as itself"},
    {"max_off_diag", TW_PARAM_DOUBLE, "0.1", 0, 1,
     "most share of a class predicted as one other class"},
    {"cumulative", TW_PARAM_BOOL, "false", 0, 1,
     "accumulate the matrix over steps instead of per step"},
    DBG_COMMON_PARAMS,
};

typedef struct cf_state {
    int64_t k; /* 0: inferred */
    char *labels, *preds, *labels_coll, *preds_coll;
    double min_diag, max_off;
    int cumulative;
    int64_t kseen;                                   /* classes so far */
    int64_t m[CF_MAX_CLASSES * CF_MAX_CLASSES];      /* cumulative counts */
    int64_t step_m[CF_MAX_CLASSES * CF_MAX_CLASSES]; /* scratch: one step */
} cf_state;

static void cf_destroy(void *impl)
{
    cf_state *s = impl;
    if (s == NULL)
        return;
    free(s->labels);
    free(s->preds);
    free(s->labels_coll);
    free(s->preds_coll);
    free(s);
}

static char *dup_or_empty(const tw_param_value *v)
{
    const char *t = v->is_none || v->s == NULL ? "" : v->s;
    size_t n = strlen(t) + 1;
    char *c = malloc(n);
    if (c != NULL)
        memcpy(c, t, n);
    return c;
}

static int cf_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    cf_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "Confusion: out of memory");
        return TW_ERR;
    }
    s->k = v[P_CATEGORY_NO].is_none ? 0 : v[P_CATEGORY_NO].i;
    s->labels = dup_or_empty(&v[P_LABELS]);
    s->preds = dup_or_empty(&v[P_PREDICTIONS]);
    s->labels_coll = dup_or_empty(&v[P_LABELS_COLL]);
    s->preds_coll = dup_or_empty(&v[P_PREDICTIONS_COLL]);
    s->min_diag = v[P_MIN_DIAG].d;
    s->max_off = v[P_MAX_OFF_DIAG].d;
    s->cumulative = v[P_CUMULATIVE].i != 0;
    if (!s->labels || !s->preds || !s->labels_coll || !s->preds_coll) {
        cf_destroy(s);
        snprintf(err, errlen, "Confusion: out of memory");
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

static int is_labels(const cf_state *s, const tw_tensor *t)
{
    return (s->labels[0] && strcmp(t->name, s->labels) == 0) ||
           (s->labels_coll[0] && tw_tensor_in_collection(t, s->labels_coll));
}

static int is_preds(const cf_state *s, const tw_tensor *t)
{
    return (s->preds[0] && strcmp(t->name, s->preds) == 0) ||
           (s->preds_coll[0] && tw_tensor_in_collection(t, s->preds_coll));
}

static int cf_select(void *impl, const tw_tensor *t)
{
    return is_labels(impl, t) || is_preds(impl, t);
}

/* A class id, or -1. */
static int64_t class_of(double v)
{
    if (!(v >= 0) || v >= CF_MAX_CLASSES || v != floor(v))
        return -1;
    return (int64_t)v;
}

static int cf_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    cf_state *s = impl;
    (void)err, (void)errlen;
    const tw_tensor *lab = NULL, *pred = NULL;
    for (size_t i = 0; i < st->ntensors; i++) {
        if (lab == NULL && is_labels(s, st->tensors[i]))
            lab = st->tensors[i];
        else if (pred == NULL && is_preds(s, st->tensors[i]))
            pred = st->tensors[i];
    }
    if (lab == NULL || pred == NULL || lab->nraw == 0 ||
        lab->nraw != pred->nraw)
        return 0;
    int64_t k = s->k;
    for (uint32_t i = 0; i < lab->nraw; i++) {
        int64_t a = class_of(lab->raw[i]), b = class_of(pred->raw[i]);
        if (a < 0 || b < 0 || (s->k > 0 && (a >= s->k || b >= s->k)))
            return 0; /* not class ids: the step is not evaluated */
        if (s->k == 0) {
            if (a + 1 > k)
                k = a + 1;
            if (b + 1 > k)
                k = b + 1;
        }
    }
    int64_t *m = s->cumulative ? s->m : s->step_m;
    if (!s->cumulative)
        memset(s->step_m, 0, sizeof(s->step_m));
    for (uint32_t i = 0; i < lab->nraw; i++)
        m[class_of(lab->raw[i]) * CF_MAX_CLASSES + class_of(pred->raw[i])]++;
    if (s->cumulative) {
        if (k > s->kseen)
            s->kseen = k;
        k = s->kseen;
    }
    for (int64_t i = 0; i < k; i++) {
        int64_t r = 0;
        for (int64_t p = 0; p < k; p++)
            r += m[i * CF_MAX_CLASSES + p];
        if (r == 0)
            continue;
        double diag = (double)m[i * CF_MAX_CLASSES + i] / (double)r;
        if (diag < s->min_diag) {
            dbg_hit_set(hit, lab, diag, s->min_diag,
                        "class %lld: %.3g of its %lld samples predicted as "
                        "itself (< min_diag %g)",
                        (long long)i, diag, (long long)r, s->min_diag);
            return 1;
        }
        for (int64_t p = 0; p < k; p++) {
            double off = (double)m[i * CF_MAX_CLASSES + p] / (double)r;
            if (p != i && off > s->max_off) {
                dbg_hit_set(hit, lab, off, s->max_off,
                            "class %lld predicted as %lld for %.3g of its "
                            "%lld samples (> max_off_diag %g)",
                            (long long)i, (long long)p, off, (long long)r,
                            s->max_off);
                return 1;
            }
        }
    }
    return 0;
}

/* Only the cumulative matrix is state (sparse: the non-zero cells). */
static void cf_save(void *impl, tw_ser *w)
{
    cf_state *s = impl;
    tw_ser_i64(w, s->kseen);
    uint64_t n = 0;
    for (size_t i = 0; i < CF_MAX_CLASSES * CF_MAX_CLASSES; i++)
        n += s->m[i] != 0;
    tw_ser_u64(w, n);
    for (size_t i = 0; i < CF_MAX_CLASSES * CF_MAX_CLASSES; i++)
        if (s->m[i] != 0) {
            tw_ser_u32(w, (uint32_t)i);
            tw_ser_i64(w, s->m[i]);
        }
}

static int cf_restore(void *impl, tw_deser *d)
{
    cf_state *s = impl;
    s->kseen = tw_deser_i64(d);
    uint64_t n = tw_deser_count(d, 12);
    for (uint64_t i = 0; i < n && tw_deser_ok(d); i++) {
        uint32_t at = tw_deser_u32(d);
        int64_t v = tw_deser_i64(d);
        if (at >= CF_MAX_CLASSES * CF_MAX_CLASSES)
            return TW_ERR;
        s->m[at] = v;
    }
    return tw_deser_ok(d) && s->kseen >= 0 && s->kseen <= CF_MAX_CLASSES
               ? TW_OK
               : TW_ERR;
}

static const dbg_rule_ops cf_ops = {
    .name = "Confusion",
    .nown = P_OWN,
    .select_extra = cf_select,
    .create = cf_create,
    .step = cf_step,
    .save = cf_save,
    .restore = cf_restore,
    .destroy = cf_destroy,
    .condition = "A class is confused with others",
    .recommendation =
        "Look at the classes named: too few or mislabeled training samples "
        "of that class, or two classes the features cannot tell apart; "
        "rebalance or relabel the data, or weight the loss.",
};

DBG_RULE_DEFINE(cf_ops, cf_params, "Confusion",
                "Flags a class predicted as itself less than `min_diag` of "
                "the time, or as one other class more than `max_off_diag`.",
                "The confusion matrix shows a class that is often predicted "
                "as another one. Check that class's samples and labels, "
                "rebalance the data or weight the loss.")
