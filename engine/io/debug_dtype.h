/*
 * debug_dtype.h - the TensorProto DataType values the reference's writer
 * produces (DEBUG_RULES.md §6.6) and their little-endian element bytes as
 * float64.
 *
 * Decision: DT_INT8 is read as signed int8 (what the writer meant). The
 * reference's reader maps it to uint8 (a bug); int16, uint16, uint32 and
 * uint64, which that reader cannot decode at all, are read here too.
 * Complex types and strings have no numeric reductions: unsupported.
 */
#ifndef TW_DEBUG_DTYPE_H
#define TW_DEBUG_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* The element size in bytes; 0 for a dtype this reader cannot read. */
size_t tw_debug_dtype_size(int dtype);

/* numpy's name for it ("float32"), "" when unknown. */
const char *tw_debug_dtype_name(int dtype);

/* Element i of a tensor_content buffer of a readable dtype, as float64. */
double tw_debug_dtype_value(int dtype, const uint8_t *content, size_t i);

/* Elements [0, n) of a tensor_content buffer of a readable dtype into
 * out, as float64 (one dtype dispatch for the whole tensor). */
void tw_debug_dtype_convert(int dtype, const uint8_t *content, size_t n,
                            double *out);

#endif /* TW_DEBUG_DTYPE_H */
