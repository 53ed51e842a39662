/*
 * json_writer.h - a streaming JSON writer into a growable string, printing
 * doubles the way Python's json.dump does: shortest repr that round-trips,
 * integral floats as "5.0", exponent form outside [1e-4, 1e16), and the
 * tokens NaN, Infinity, -Infinity. Commas and nesting are tracked by the
 * writer. This is the tw_json that plugin.h hands to rules.
 *
 * Ownership: tw_json_new() returns a writer owned by the caller
 * (tw_json_free). tw_json_str() returns a pointer owned by the writer, valid
 * until the next write or free. tw_json_take() hands the string to the
 * caller (free()) and resets the writer.
 */
#ifndef TW_JSON_WRITER_H
#define TW_JSON_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

tw_json *tw_json_new(void);
void tw_json_free(tw_json *j);
void tw_json_reset(tw_json *j);
/* Compact separators ("," and ":") instead of Python's defaults. */
void tw_json_set_compact(tw_json *j, int compact);
/* Strict JSON for other parsers: NaN and ±Infinity values are written as
 * null instead of Python's tokens (keys from tw_json_key_double are strings
 * either way). Kept across tw_json_reset. */
void tw_json_set_strict(tw_json *j, int strict);
/* How many non-finite values strict mode wrote as null since the last
 * reset, so the caller can flag the output as changed. */
size_t tw_json_nonfinite(const tw_json *j);
const char *tw_json_str(const tw_json *j);
size_t tw_json_len(const tw_json *j);
char *tw_json_take(tw_json *j);
/* Non-zero once any allocation failed; the output is then incomplete. */
int tw_json_failed(const tw_json *j);

void tw_json_object_begin(tw_json *j);
void tw_json_object_end(tw_json *j);
void tw_json_array_begin(tw_json *j);
void tw_json_array_end(tw_json *j);
void tw_json_key(tw_json *j, const char *key);
void tw_json_key_double(tw_json *j, double key);
void tw_json_string(tw_json *j, const char *s);
void tw_json_double(tw_json *j, double v);
void tw_json_int(tw_json *j, int64_t v);
void tw_json_bool(tw_json *j, int v);
void tw_json_null(tw_json *j);
void tw_json_raw(tw_json *j, const char *text);

/* Python repr() of a float into buf (at least 32 bytes): "0.1", "5.0",
 * "1e-05", "1.5e+16", "nan"/"inf" (json uses NaN/Infinity instead). */
void tw_py_float_repr(double v, char *buf, size_t len);

#endif /* TW_JSON_WRITER_H */
