// reader_plain.h - the plain fast paths of the JSON readers (C++, for
// reader_json.cc only).
//
// Most of what the agent and the trace writers produce is plain: objects of
// strings without escapes (printable ASCII), numbers and literals. Such
// text is read here without simdjson, exactly as reader_json.cc's simdjson
// paths read it: for a ~120-byte system line, simdjson's stage 1 and
// On-Demand walk cost more than the line itself. Anything else (an escape,
// a non-ASCII byte, a nested value where a scalar is read, "-0", an integer
// of 19 or more digits, another key order for system lines) is refused,
// and the simdjson path decides, so results and error texts are the same
// either way (tests/unit/test_reader_json.c holds the two equal on random
// text). The text must stay readable for 7 bytes past its end (it has
// TW_JSON_PADDING there): strings are read eight bytes at a time.
#ifndef TW_READER_PLAIN_H
#define TW_READER_PLAIN_H

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "reader_json.h"

namespace tw_plain
{

// A cursor over the text: [p, end).
struct plain_cursor {
    const char *p, *end;
};

// The last Timestamp token of a system line and its double: the agent
// writes one timestamp on every line of a sample (each core, each GPU).
struct ts_cache {
    char text[32];
    size_t len = 0;
    double value = 0;
};

// A JSON number at c.p: integers of at most 18 digits exactly, others
// through std::from_chars (correctly rounded, as Python's float()). On
// success c.p is just after it. "-0", longer integers and values out of
// range are refused.
bool plain_number(plain_cursor &c, tw_json_num *out);

// A string holding a decimal int64 (strtoll's grammar).
bool id_of_text(std::string_view s, int64_t *out);

// One system line (RULES.md §1.2) with the agent's six keys in its order
// (Type, Name, Dimension, Value, NodeId, Timestamp), JSON whitespace around
// ':' and ','. true: *out filled, its strings point into buf.
bool sysline(ts_cache &ts, const char *buf, size_t len, tw_json_sysline *out);

// The plain part of tw_json_parse_event_array: hands the elements of the
// array at buf[0] to fn while they are plain events (args: an object of
// scalars, kept in `args`), updating *stop after each; *resume is the
// offset of the first element it did not take, *done true when it took
// the array to its ']'; *taken counts the elements taken. TW_OK or what fn
// returned.
int event_array(std::vector<tw_json_arg> &args, const char *buf, size_t len,
                tw_json_event_fn fn, void *ud, tw_json_array_stop *stop,
                size_t *resume, bool *done, uint64_t *taken);

} // namespace tw_plain

#endif
