/*
 * wire_string.h - checks on FlatBuffers strings shared by the batch
 * decoder (wire_codec.cc) and the Python-profile reader
 * (wire_pyprofile.cc). C++ only.
 */
#ifndef TW_WIRE_STRING_H
#define TW_WIRE_STRING_H

#include <cstring>

#include <flatbuffers/flatbuffers.h>

/* A string the engine would cut short when copying it as a C string: one
 * with a NUL byte inside. */
inline bool tw_wire_has_nul(const flatbuffers::String *s)
{
    return s != nullptr && memchr(s->c_str(), '\0', s->size()) != nullptr;
}

#endif /* TW_WIRE_STRING_H */
