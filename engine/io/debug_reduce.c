/* debug_reduce.c - reductions derived from full tensors (debug_reduce.h). */
#include "debug_reduce.h"

#include <math.h>
#include <string.h>

#include "tw_assert.h"

int tw_debug_is_relu_output(const char *name)
{
    return strstr(name, "relu_output") != NULL ||
           strstr(name, "ReLU_output") != NULL;
}

int tw_debug_is_parameter(const char *name)
{
    return strncmp(name, "gradient/", 9) != 0 &&
           strstr(name, "_input_") == NULL && strstr(name, "_output_") == NULL;
}

/* DeadRelu's node test (DEBUG_RULES.md §4.10): axis 0 is the batch, every
 * other position a node; a node is dead when fewer than
 * threshold_inactivity percent of the samples are > 0. */
static double dead_fraction(const tw_debug_tensor_values *t)
{
    size_t batch = (size_t)t->shape[0];
    size_t nodes = t->n / batch;
    size_t dead = 0;
    for (size_t j = 0; j < nodes; j++) {
        size_t active = 0;
        for (size_t i = 0; i < batch; i++)
            active += t->x[i * nodes + j] > 0;
        if (100.0 * (double)active / (double)batch < t->threshold_inactivity)
            dead++;
    }
    return (double)dead / (double)nodes;
}

/* The op names of the channel sums (static strings, as ops must be). */
static const char *const channel_sum_op[TW_DEBUG_MAX_CHANNELS] = {
    "channel_sum/0",  "channel_sum/1",  "channel_sum/2",  "channel_sum/3",
    "channel_sum/4",  "channel_sum/5",  "channel_sum/6",  "channel_sum/7",
    "channel_sum/8",  "channel_sum/9",  "channel_sum/10", "channel_sum/11",
    "channel_sum/12", "channel_sum/13", "channel_sum/14", "channel_sum/15",
    "channel_sum/16", "channel_sum/17", "channel_sum/18", "channel_sum/19",
    "channel_sum/20", "channel_sum/21", "channel_sum/22", "channel_sum/23",
    "channel_sum/24", "channel_sum/25", "channel_sum/26", "channel_sum/27",
    "channel_sum/28", "channel_sum/29", "channel_sum/30", "channel_sum/31",
    "channel_sum/32", "channel_sum/33", "channel_sum/34", "channel_sum/35",
    "channel_sum/36", "channel_sum/37", "channel_sum/38", "channel_sum/39",
    "channel_sum/40", "channel_sum/41", "channel_sum/42", "channel_sum/43",
    "channel_sum/44", "channel_sum/45", "channel_sum/46", "channel_sum/47",
    "channel_sum/48", "channel_sum/49", "channel_sum/50", "channel_sum/51",
    "channel_sum/52", "channel_sum/53", "channel_sum/54", "channel_sum/55",
    "channel_sum/56", "channel_sum/57", "channel_sum/58", "channel_sum/59",
    "channel_sum/60", "channel_sum/61", "channel_sum/62", "channel_sum/63",
};

/* Input image: the sum of each channel along TW_DEBUG_IMAGE_AXIS. */
static size_t channel_sums(const tw_debug_tensor_values *t,
                           tw_tensor_reduction *out)
{
    if (t->nshape < 2 || t->shape[1] < 1 ||
        t->shape[1] > TW_DEBUG_MAX_CHANNELS || t->n == 0)
        return 0;
    size_t channels = (size_t)t->shape[1];
    size_t inner = 1; /* elements of one channel of one image */
    for (uint32_t d = 2; d < t->nshape; d++) {
        if (t->shape[d] <= 0 || inner > t->n / (size_t)t->shape[d])
            return 0; /* a shape that does not fit the elements */
        inner *= (size_t)t->shape[d];
    }
    if (inner > t->n / channels || t->shape[0] <= 0 ||
        (size_t)t->shape[0] != t->n / (channels * inner) ||
        t->n % (channels * inner) != 0)
        return 0; /* the elements are not shape's product */
    double sums[TW_DEBUG_MAX_CHANNELS] = {0};
    for (size_t i = 0; i < t->n; i++)
        sums[(i / inner) % channels] += t->x[i];
    size_t k = 0;
    for (size_t c = 0; c < channels; c++)
        out[k++] = (tw_tensor_reduction){channel_sum_op[c], sums[c]};
    out[k++] =
        (tw_tensor_reduction){"channel_count", (double)(t->n / channels)};
    out[k++] = (tw_tensor_reduction){"channel_axis", TW_DEBUG_IMAGE_AXIS};
    return k;
}

size_t tw_debug_reduce(const tw_debug_tensor_values *t,
                       tw_tensor_reduction *out)
{
    size_t k = 0;
    if (t->nshape == 0 && t->n == 1) {
        out[k++] = (tw_tensor_reduction){"value", t->x[0]};
        return k;
    }
    double sum = 0, abs_sum = 0, sq = 0;
    size_t nan = 0, inf = 0, zero = 0;
    for (size_t i = 0; i < t->n; i++) {
        double v = t->x[i];
        nan += isnan(v) != 0;
        inf += isinf(v) != 0;
        zero += v == 0;
        sum += v;
        abs_sum += fabs(v);
        sq += v * v;
    }
    double n = (double)t->n;
    double mean = t->n ? sum / n : NAN;
    /* Second pass for the variance: accurate where sum-of-squares is not. */
    double dev = 0;
    for (size_t i = 0; i < t->n; i++)
        dev += (t->x[i] - mean) * (t->x[i] - mean);
    out[k++] = (tw_tensor_reduction){"abs_mean", t->n ? abs_sum / n : NAN};
    out[k++] = (tw_tensor_reduction){"nan_count", (double)nan};
    out[k++] = (tw_tensor_reduction){"inf_count", (double)inf};
    out[k++] = (tw_tensor_reduction){"l2", sqrt(sq)};
    out[k++] = (tw_tensor_reduction){"variance", t->n ? dev / n : NAN};
    out[k++] =
        (tw_tensor_reduction){"zero_fraction", t->n ? (double)zero / n : NAN};
    if (t->prev != NULL && t->nprev == t->n) {
        double d2 = 0;
        for (size_t i = 0; i < t->n; i++)
            d2 += (t->x[i] - t->prev[i]) * (t->x[i] - t->prev[i]);
        out[k++] = (tw_tensor_reduction){"update_l2", sqrt(d2)};
    }
    if (t->relu_output && t->nshape >= 1 && t->shape[0] > 0 && t->n > 0)
        out[k++] = (tw_tensor_reduction){"dead_fraction", dead_fraction(t)};
    if (t->input_image)
        k += channel_sums(t, out + k);
    TW_ASSERT(k <= TW_DEBUG_MAX_DERIVED);
    return k;
}
