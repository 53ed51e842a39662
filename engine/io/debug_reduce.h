/*
 * debug_reduce.h - the reductions the debugging rules need (DEBUG_RULES.md
 * §8.2), derived from a full tensor of a debug-output folder the way the
 * live hook publishes them: in float64, variance in the population form,
 * norms over the flattened tensor.
 *
 * A 0-d tensor (a loss, a scalar) gets only "value". Any other tensor gets
 * abs_mean, nan_count, inf_count, l2, variance, zero_fraction; update_l2
 * (the L2 norm of the change since the previous saved step of the same
 * tensor and worker) for parameters (tw_debug_is_parameter) when that
 * step's values are known and have as many elements; dead_fraction for
 * ReLU outputs (tw_debug_is_relu_output); for input images (tensors of
 * the collection `input_image`, CheckInputImages) with 2 or more
 * dimensions and at most TW_DEBUG_MAX_CHANNELS channels along axis 1
 * (NCHW, the hook's default channel), `channel_sum/<c>` for each channel
 * c, `channel_count` (elements per channel) and `channel_axis` (1), as
 * the hook publishes them.
 * NaN and Inf propagate into abs_mean, l2, variance and update_l2 as in
 * numpy.
 */
#ifndef TW_DEBUG_REDUCE_H
#define TW_DEBUG_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

/* Channels of an input image that get channel sums (the hook's cap). */
#define TW_DEBUG_MAX_CHANNELS 64

/* The channel axis of input images read from a folder (NCHW). */
#define TW_DEBUG_IMAGE_AXIS 1

/* The most reductions tw_debug_reduce writes. */
#define TW_DEBUG_MAX_DERIVED (8 + TW_DEBUG_MAX_CHANNELS + 2)

/* DeadRelu's default threshold_inactivity, percent. */
#define TW_DEBUG_DEFAULT_INACTIVITY 1.0

typedef struct tw_debug_tensor_values {
    const double *x;
    size_t n;
    const int64_t *shape;
    uint32_t nshape;
    const double *prev; /* the previous saved step's values; NULL: none */
    size_t nprev;
    int relu_output;
    int input_image; /* of the collection input_image: channel sums */
    double threshold_inactivity; /* percent */
} tw_debug_tensor_values;

/* Writes the derived reductions into out (room for TW_DEBUG_MAX_DERIVED)
 * and returns how many. Ops are static strings. */
size_t tw_debug_reduce(const tw_debug_tensor_values *t,
                       tw_tensor_reduction *out);

/* A ReLU output by name: DeadRelu's default tensor_regex `.*relu_output`
 * and the `ReLU_output` spelling the analysis guide adds, as substrings
 * (what re.search of those regexes matches). */
int tw_debug_is_relu_output(const char *name);

/* A parameter by its PyTorch name (DEBUG_RULES.md §5.3): not a gradient
 * (`gradient/...`) and not a module input or output (`..._input_<i>`,
 * `..._output_<i>`). Only parameters get update_l2, as from the hook. */
int tw_debug_is_parameter(const char *name);

#endif /* TW_DEBUG_REDUCE_H */
