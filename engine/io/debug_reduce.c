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
    TW_ASSERT(k <= TW_DEBUG_MAX_DERIVED);
    return k;
}
