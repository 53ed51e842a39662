/*
 * check_input_images.c - CheckInputImages (DEBUG_RULES.md §4.8).
 *
 * Condition: the model's input images are accumulated across saved steps
 * until at least `threshold_samples` images were seen; then the mean of
 * each channel over every accumulated pixel is computed, and the rule
 * fires when |mean_c| > threshold_mean for some channel c (inputs should
 * be normalized to zero mean). After each evaluation the accumulator is
 * reset and a new sample window starts (§4.8 [I]).
 *
 * Input: the hook never sends the images. For a tensor of the collection
 * `input_image` it publishes, computed on the device in float64, the
 * reductions `channel_sum/<c>` (the sum of channel c), `channel_count`
 * (elements per channel) and `channel_axis` (the axis summed along); the
 * legacy-folder reader derives the same three from the full tensor
 * (axis 1). Selected: tensors carrying channel_count whose name matches
 * `regex` (Python re.search) or that belong to the collection
 * `input_image`.
 *
 * Decisions (README "Debugging rules"):
 *  - images per tensor: the batch dimension, shape[0], when the channel
 *    axis is not 0; a tensor whose channel axis is 0 is one image (C, ...);
 *  - strictly greater: |mean| equal to threshold_mean does not fire; a
 *    NaN mean (NaN or Inf in the input) fires;
 *  - one accumulator per tensor name and mode (all workers together);
 *    a tensor whose channel count changes starts a new window;
 *  - at most 64 channels: the hook sends no channel sums beyond (it warns
 *    once), nor does the folder reader; such a tensor is not evaluated;
 *  - a tensor summed along another axis than `channel` is a configuration
 *    error naming both (the rule goes Error): the collection's channel
 *    and the rule's must agree;
 *  - the default regex is the reference's (MXNet's) and matches no
 *    PyTorch name; the collection `input_image` selects the PyTorch root
 *    input `<RootClass>_input_0` (the hook adds it), so the defaults work;
 *  - stop_at_first_fire default true (§8.3 item 6); with false each window
 *    is one evaluation that can fire.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum { P_MEAN = 0, P_SAMPLES, P_REGEX, P_CHANNEL, P_OWN };

#define CII_MAX_CHANNELS 64
#define CII_COLLECTION "input_image"
#define CII_SUM_PREFIX "channel_sum/"
#define CII_DEFAULT_REGEX ".*hybridsequential0_input_0"

/* One sample window of one tensor: what the dbg_map holds, copied in and
 * out (its words are saved bit for bit). */
typedef struct cii_window {
    int64_t images;
    int64_t channels;
    double count; /* elements per channel */
    double sums[CII_MAX_CHANNELS];
} cii_window;
#define CII_WORDS (sizeof(cii_window) / sizeof(uint64_t))
_Static_assert(sizeof(cii_window) == (3 + CII_MAX_CHANNELS) * sizeof(uint64_t),
               "cii_window is whole 8-byte words");

static const tw_param_spec cii_params[] = {
    {"threshold_mean", TW_PARAM_DOUBLE, "0.2", 0, 1e300,
     "largest allowed |mean| of an input channel"},
    {"threshold_samples", TW_PARAM_INT, "500", 1, 9.0e15,
     "images to accumulate before each evaluation"},
    {"regex", TW_PARAM_STRING, CII_DEFAULT_REGEX, 0, 0,
     "Python regex of the input tensor's name (besides the collection "
     "input_image)"},
    {"channel", TW_PARAM_INT, "1", 0, 7,
     "the channel axis of the input tensor (1: NCHW)"},
    DBG_COMMON_PARAMS,
};

typedef struct cii_state {
    double threshold;
    int64_t samples;
    int64_t channel;
    pcre2_code *re;
    pcre2_match_data *md;
    dbg_map acc; /* (tensor, mode) -> CII_WORDS words */
} cii_state;

static void cii_destroy(void *impl)
{
    cii_state *s = impl;
    if (s == NULL)
        return;
    pcre2_code_free(s->re);
    pcre2_match_data_free(s->md);
    dbg_map_free(&s->acc);
    free(s);
}

static int cii_create(const tw_param_value *v, void **impl, char *err,
                      size_t errlen)
{
    cii_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "CheckInputImages: out of memory");
        return TW_ERR;
    }
    s->threshold = v[P_MEAN].d;
    s->samples = v[P_SAMPLES].i;
    s->channel = v[P_CHANNEL].i;
    dbg_map_init(&s->acc, CII_WORDS);
    char why[256];
    const char *re = v[P_REGEX].is_none ? CII_DEFAULT_REGEX : v[P_REGEX].s;
    if ((s->re = tw_tensor_regex_compile(re, why, sizeof(why))) == NULL) {
        snprintf(err, errlen, "CheckInputImages: regex: %s", why);
        cii_destroy(s);
        return TW_ERR;
    }
    if ((s->md = pcre2_match_data_create_from_pattern(s->re, NULL)) == NULL) {
        snprintf(err, errlen, "CheckInputImages: out of memory");
        cii_destroy(s);
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

static int cii_select(void *impl, const tw_tensor *t)
{
    cii_state *s = impl;
    double v;
    return tw_tensor_get(t, "channel_count", &v) &&
           (tw_tensor_in_collection(t, CII_COLLECTION) ||
            tw_tensor_regex_search(s->re, s->md, t->name));
}

/* The tensor's channel sums into sums[] (index from the op name); the
 * number of channels, or 0 when they are not channel_sum/0..C-1. */
static int channel_sums(const tw_tensor *t, double *sums)
{
    int seen[CII_MAX_CHANNELS] = {0};
    int n = 0, top = -1;
    size_t plen = strlen(CII_SUM_PREFIX);
    for (uint32_t i = 0; i < t->nreductions; i++) {
        const char *op = t->reductions[i].op;
        if (strncmp(op, CII_SUM_PREFIX, plen) != 0)
            continue;
        char *end;
        long c = strtol(op + plen, &end, 10);
        if (end == op + plen || *end != '\0' || c < 0 ||
            c >= CII_MAX_CHANNELS || seen[c])
            return 0;
        seen[c] = 1;
        sums[c] = t->reductions[i].value;
        n++;
        if (c > top)
            top = (int)c;
    }
    return n == top + 1 ? n : 0;
}

/* Adds t to its accumulator; 1 with *hit when a window closed over the
 * threshold, 0 otherwise, TW_ERR on a channel-axis mismatch or OOM. */
static int add_tensor(cii_state *s, const tw_tensor *t, dbg_hit *hit, char *err,
                      size_t errlen)
{
    double axis, count, sums[CII_MAX_CHANNELS];
    if (!tw_tensor_get(t, "channel_count", &count))
        return 0;
    if (tw_tensor_get(t, "channel_axis", &axis) && axis != (double)s->channel) {
        snprintf(err, errlen,
                 "CheckInputImages: %s: its channel sums are along axis %g, "
                 "the rule's channel is %lld; set the same channel in the "
                 "input_image collection and the rule",
                 t->name, axis, (long long)s->channel);
        return TW_ERR;
    }
    int nch = channel_sums(t, sums);
    if (nch == 0 || !(count > 0))
        return 0; /* no usable channel sums: not evaluated */
    int64_t images = 1;
    if (s->channel != 0) {
        if (t->nshape == 0 || t->shape[0] <= 0)
            return 0;
        images = t->shape[0];
    }
    uint64_t *slot = dbg_map_get(&s->acc, t->name, t->mode, 1);
    if (slot == NULL) {
        snprintf(err, errlen, "CheckInputImages: out of memory");
        return TW_ERR;
    }
    cii_window w;
    memcpy(&w, slot, sizeof(w));
    if (w.channels != nch)
        memset(&w, 0, sizeof(w)); /* layout changed: a new window */
    w.channels = nch;
    w.images += images;
    w.count += count;
    for (int c = 0; c < nch; c++)
        w.sums[c] += sums[c];
    if (w.images < s->samples) {
        memcpy(slot, &w, sizeof(w));
        return 0;
    }
    /* evaluate this window, then start a new one */
    memset(slot, 0, sizeof(w));
    double means[CII_MAX_CHANNELS];
    int worst = 0;
    for (int c = 0; c < nch; c++)
        means[c] = w.sums[c] / w.count;
    for (int c = 1; c < nch; c++) /* the first NaN, else the largest |mean| */
        if (!isnan(means[worst]) &&
            (isnan(means[c]) || fabs(means[c]) > fabs(means[worst])))
            worst = c;
    int64_t seen = w.images;
    if (!(fabs(means[worst]) > s->threshold) && !isnan(means[worst]))
        return 0;
    char list[96] = "";
    size_t at = 0;
    for (int c = 0; c < nch && c < 4; c++) {
        int k = snprintf(list + at, sizeof(list) - at, "%s%.3g", c ? ", " : "",
                         means[c]);
        if (k < 0 || (size_t)k >= sizeof(list) - at)
            break;
        at += (size_t)k;
    }
    dbg_hit_set(hit, t, means[worst], s->threshold,
                "channel %d has mean %.3g (|mean| > %g) over %lld images; "
                "channel means %s%s",
                worst, means[worst], s->threshold, (long long)seen, list,
                nch > 4 ? ", ..." : "");
    return 1;
}

static int cii_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                    size_t errlen)
{
    cii_state *s = impl;
    int fired = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        dbg_hit h;
        memset(&h, 0, sizeof(h));
        int rc = add_tensor(s, st->tensors[i], &h, err, errlen);
        if (rc == TW_ERR)
            return TW_ERR;
        if (rc == 1 && !fired) {
            *hit = h;
            fired = 1;
        }
    }
    return fired;
}

static void cii_save(void *impl, tw_ser *w)
{
    cii_state *s = impl;
    dbg_map_save(&s->acc, w);
}

static int cii_restore(void *impl, tw_deser *d)
{
    cii_state *s = impl;
    return dbg_map_restore(&s->acc, d);
}

static const dbg_rule_ops cii_ops = {
    .name = "CheckInputImages",
    .nown = P_OWN,
    .select_extra = cii_select,
    .create = cii_create,
    .step = cii_step,
    .save = cii_save,
    .restore = cii_restore,
    .destroy = cii_destroy,
    .condition = "The input images are not normalized to zero mean",
    .recommendation =
        "Normalize the inputs per channel: add Normalize(mean, std) with "
        "the training set's per-channel mean and standard deviation to the "
        "input transforms (torchvision.transforms.Normalize), or subtract "
        "the mean in the data pipeline. If the model normalizes its input "
        "itself (BatchNorm first), raise threshold_mean or drop the rule.",
};

DBG_RULE_DEFINE(cii_ops, cii_params, "CheckInputImages",
                "Flags input images whose per-channel mean, over at least "
                "`threshold_samples` images, is further than "
                "`threshold_mean` from 0.",
                "The model's input images are not normalized to zero mean "
                "per channel. Add a Normalize(mean, std) transform with the "
                "training set's channel statistics.")
