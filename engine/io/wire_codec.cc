/*
 * wire_codec.cc - engine/io/wire.h over the official FlatBuffers runtime.
 *
 * Decoding: the generated verifier (VerifyBatchBuffer) is the only gate a
 * buffer passes before anything reads it. When it refuses, a second walk
 * (Diagnosis below) retraces the generated Verify() functions with the
 * runtime's own Verifier primitives to say which field failed and whether
 * the only fault is an absent required field; it never decides acceptance.
 * A verified buffer is then copied into a tw_batch through the generated
 * accessors.
 *
 * No C++ exception leaves this file: every entry point catches them.
 */
#include "wire.h"
#include "wire_string.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "metrics_generated.h"

namespace fb = flatbuffers;
namespace tww = trainwatch::wire;

namespace
{

/* Every scalar in the schema is at most 8 bytes; the verifier checks
 * alignment relative to the buffer start, so a start aligned to 8 makes
 * every accessor read aligned. */
constexpr uintptr_t kMaxAlign = 8;

/* FLATBUFFERS_MIN_BUFFER_SIZE names the runtime's types unqualified. */
constexpr size_t kMinBufferSize = [] {
    using namespace flatbuffers;
    return size_t(FLATBUFFERS_MIN_BUFFER_SIZE);
}();

/* An honest writer spends at least 8 bytes per table (its vtable offset
 * plus the offset that refers to it), so more tables than len / 8 means
 * subtables referenced many times: verifying and copying them would
 * multiply a small message into a huge batch. */
size_t max_tables_for(size_t len)
{
    size_t n = len / 8;
    return n < 1 ? 1 : n;
}

fb::Verifier::Options verifier_options(size_t len)
{
    fb::Verifier::Options o;
    o.max_tables = static_cast<fb::uoffset_t>(max_tables_for(len));
    return o;
}

void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == nullptr || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------------
 * Diagnosis of a buffer the verifier refused
 * ------------------------------------------------------------------- */

/* Where the walk is, rendered only when something fails. */
struct Path {
    const Path *parent;
    const char *name;
    long index; /* -1: not a vector element */
};

void render_path(const Path *p, std::string &out)
{
    if (p == nullptr)
        return;
    render_path(p->parent, out);
    if (p->name != nullptr) {
        if (!out.empty())
            out += '.';
        out += p->name;
    }
    if (p->index >= 0) {
        out += '[';
        out += std::to_string(p->index);
        out += ']';
    }
}

enum class FieldKind { Scalar, String, Strings, Structs, Tables };

struct TableSpec;

/* One field as the generated Verify() checks it, in schema order. */
struct FieldSpec {
    const char *name;
    fb::voffset_t vt;
    FieldKind kind;
    size_t size; /* Scalar: its size (= alignment); Structs: element size */
    bool required;
    const TableSpec *table; /* Tables: the element type */
};

struct TableSpec {
    const char *name;
    const FieldSpec *fields;
    size_t nfields;
};

/* These tables mirror the generated Verify() functions; keep them in step
 * with schemas/metrics.fbs. A field left out here only costs detail: the
 * walk then blames nothing and the status stays verify_failed, never ok.
 * test_wire builds a buffer without each required field to check them. */
const FieldSpec kSeriesFields[] = {
    {"type", tww::Series::VT_TYPE, FieldKind::String, 0, true, nullptr},
    {"name", tww::Series::VT_NAME, FieldKind::String, 0, false, nullptr},
    {"dimension", tww::Series::VT_DIMENSION, FieldKind::String, 0, true,
     nullptr},
};
const TableSpec kSeries = {"Series", kSeriesFields,
                           sizeof(kSeriesFields) / sizeof(kSeriesFields[0])};

const FieldSpec kArgFields[] = {
    {"key", tww::Arg::VT_KEY, FieldKind::String, 0, true, nullptr},
    {"value", tww::Arg::VT_VALUE, FieldKind::String, 0, true, nullptr},
    {"kind", tww::Arg::VT_KIND, FieldKind::Scalar, 1, false, nullptr},
};
const TableSpec kArg = {"Arg", kArgFields,
                        sizeof(kArgFields) / sizeof(kArgFields[0])};

const FieldSpec kEventFields[] = {
    {"name", tww::FrameworkEvent::VT_NAME, FieldKind::String, 0, true, nullptr},
    {"phase", tww::FrameworkEvent::VT_PHASE, FieldKind::String, 0, true,
     nullptr},
    {"start_us", tww::FrameworkEvent::VT_START_US, FieldKind::Scalar, 8, false,
     nullptr},
    {"end_us", tww::FrameworkEvent::VT_END_US, FieldKind::Scalar, 8, false,
     nullptr},
    {"pid", tww::FrameworkEvent::VT_PID, FieldKind::Scalar, 8, false, nullptr},
    {"tid", tww::FrameworkEvent::VT_TID, FieldKind::Scalar, 8, false, nullptr},
    {"source", tww::FrameworkEvent::VT_SOURCE, FieldKind::Scalar, 1, false,
     nullptr},
    {"mode", tww::FrameworkEvent::VT_MODE, FieldKind::Scalar, 1, false,
     nullptr},
    {"args", tww::FrameworkEvent::VT_ARGS, FieldKind::Tables, 0, false, &kArg},
    {"has_args", tww::FrameworkEvent::VT_HAS_ARGS, FieldKind::Scalar, 1, false,
     nullptr},
};
const TableSpec kEvent = {"FrameworkEvent", kEventFields,
                          sizeof(kEventFields) / sizeof(kEventFields[0])};

const FieldSpec kMarkerFields[] = {
    {"kind", tww::Marker::VT_KIND, FieldKind::Scalar, 1, false, nullptr},
    {"time_us", tww::Marker::VT_TIME_US, FieldKind::Scalar, 8, false, nullptr},
    {"sampling_interval_ms", tww::Marker::VT_SAMPLING_INTERVAL_MS,
     FieldKind::Scalar, 4, false, nullptr},
    {"latest_us", tww::Marker::VT_LATEST_US, FieldKind::Scalar, 8, false,
     nullptr},
    {"profiler_config", tww::Marker::VT_PROFILER_CONFIG, FieldKind::String, 0,
     false, nullptr},
};
const TableSpec kMarker = {"Marker", kMarkerFields,
                           sizeof(kMarkerFields) / sizeof(kMarkerFields[0])};

const FieldSpec kReductionFields[] = {
    {"op", tww::TensorReduction::VT_OP, FieldKind::String, 0, true, nullptr},
    {"value", tww::TensorReduction::VT_VALUE, FieldKind::Scalar, 8, false,
     nullptr},
};
const TableSpec kReduction = {"TensorReduction", kReductionFields,
                              sizeof(kReductionFields) /
                                  sizeof(kReductionFields[0])};

const FieldSpec kTensorFields[] = {
    {"name", tww::TensorRecord::VT_NAME, FieldKind::String, 0, true, nullptr},
    {"collections", tww::TensorRecord::VT_COLLECTIONS, FieldKind::Strings, 0,
     false, nullptr},
    {"step", tww::TensorRecord::VT_STEP, FieldKind::Scalar, 8, false, nullptr},
    {"mode", tww::TensorRecord::VT_MODE, FieldKind::Scalar, 1, false, nullptr},
    {"mode_step", tww::TensorRecord::VT_MODE_STEP, FieldKind::Scalar, 8, false,
     nullptr},
    {"wall_us", tww::TensorRecord::VT_WALL_US, FieldKind::Scalar, 8, false,
     nullptr},
    {"dtype", tww::TensorRecord::VT_DTYPE, FieldKind::String, 0, false,
     nullptr},
    {"shape", tww::TensorRecord::VT_SHAPE, FieldKind::Structs, 8, false,
     nullptr},
    {"numel", tww::TensorRecord::VT_NUMEL, FieldKind::Scalar, 8, false,
     nullptr},
    {"reductions", tww::TensorRecord::VT_REDUCTIONS, FieldKind::Tables, 0,
     false, &kReduction},
    {"raw", tww::TensorRecord::VT_RAW, FieldKind::Structs, 8, false, nullptr},
    {"prev_step", tww::TensorRecord::VT_PREV_STEP, FieldKind::Scalar, 8, false,
     nullptr},
};
const TableSpec kTensor = {"TensorRecord", kTensorFields,
                           sizeof(kTensorFields) / sizeof(kTensorFields[0])};

const FieldSpec kBatchFields[] = {
    {"version", tww::Batch::VT_VERSION, FieldKind::Scalar, 2, false, nullptr},
    {"job", tww::Batch::VT_JOB, FieldKind::String, 0, true, nullptr},
    {"node", tww::Batch::VT_NODE, FieldKind::String, 0, true, nullptr},
    {"seq", tww::Batch::VT_SEQ, FieldKind::Scalar, 8, false, nullptr},
    {"file_ts_us", tww::Batch::VT_FILE_TS_US, FieldKind::Scalar, 8, false,
     nullptr},
    {"series", tww::Batch::VT_SERIES, FieldKind::Tables, 0, false, &kSeries},
    {"samples", tww::Batch::VT_SAMPLES, FieldKind::Structs, sizeof(tww::Sample),
     false, nullptr},
    {"events", tww::Batch::VT_EVENTS, FieldKind::Tables, 0, false, &kEvent},
    {"markers", tww::Batch::VT_MARKERS, FieldKind::Tables, 0, false, &kMarker},
    {"file_path", tww::Batch::VT_FILE_PATH, FieldKind::String, 0, false,
     nullptr},
    {"tensors", tww::Batch::VT_TENSORS, FieldKind::Tables, 0, false, &kTensor},
};
const TableSpec kBatch = {"Batch", kBatchFields,
                          sizeof(kBatchFields) / sizeof(kBatchFields[0])};

/* Walks the buffer in the order of the generated Verify() functions, with
 * the same Verifier and options, but notes an absent required field and
 * goes on instead of stopping. The first structural failure ends the walk
 * and is described in bytes and offsets. */
class Diagnosis
{
  public:
    Diagnosis(const uint8_t *buf, size_t len)
        : buf_(buf), len_(len), opts_(verifier_options(len)),
          v_(buf, len, opts_)
    {
    }

    void run()
    {
        fb::uoffset_t root = offset_at(0, nullptr, "the root offset");
        if (root == 0)
            return;
        Path p = {nullptr, nullptr, -1};
        table(buf_ + root, kBatch, &p);
    }

    const std::string &failure() const
    {
        return failure_;
    }
    const std::string &missing() const
    {
        return missing_;
    }

  private:
    size_t pos(const uint8_t *p) const
    {
        return static_cast<size_t>(p - buf_);
    }

    std::string where(const Path *p, const char *field) const
    {
        std::string s;
        render_path(p, s);
        if (field != nullptr) {
            if (!s.empty())
                s += '.';
            s += field;
        }
        return s;
    }

    /* Why a value at byte `at` that must be `align`-aligned was refused. */
    std::string bad_range(size_t at, size_t align) const
    {
        std::string s = " at byte " + std::to_string(at);
        if (at % align != 0)
            return s + " is not " + std::to_string(align) + "-byte aligned";
        return s + " lies outside the " + std::to_string(len_) + "-byte buffer";
    }

    bool fail(const std::string &what)
    {
        failure_ = what;
        return false;
    }

    /* An offset stored at byte `at`; 0 when it is not a valid one. */
    fb::uoffset_t offset_at(size_t at, const Path *p, const char *field)
    {
        std::string name = p == nullptr
                               ? std::string(field)
                               : "the offset of '" + where(p, field) + "'";
        if (!v_.Verify<fb::uoffset_t>(at)) {
            fail(name + bad_range(at, sizeof(fb::uoffset_t)));
            return 0;
        }
        fb::uoffset_t o = fb::ReadScalar<fb::uoffset_t>(buf_ + at);
        if (v_.VerifyOffset(at) != 0)
            return o;
        if (o == 0)
            fail(name + " at byte " + std::to_string(at) + " is zero");
        else
            fail(name + " at byte " + std::to_string(at) + " points to byte " +
                 std::to_string(uint64_t(at) + o) + ", past the end of the " +
                 std::to_string(len_) + "-byte buffer");
        return 0;
    }

    bool vector(const uint8_t *vec, size_t elem_size, const std::string &name,
                bool is_string)
    {
        size_t at = pos(vec);
        if (!v_.Verify<fb::uoffset_t>(at))
            return fail("the length word of " + name +
                        bad_range(at, sizeof(fb::uoffset_t)));
        size_t end = 0;
        if (!v_.VerifyVectorOrString(vec, elem_size, &end)) {
            fb::uoffset_t n = fb::ReadScalar<fb::uoffset_t>(vec);
            return fail(std::string(is_string ? "string" : "vector") +
                        " length of " + name + " (" + std::to_string(n) +
                        (is_string ? " bytes"
                                   : " elements of " +
                                         std::to_string(elem_size) + " bytes") +
                        " at byte " + std::to_string(at) +
                        ") points past the end of the " + std::to_string(len_) +
                        "-byte buffer");
        }
        if (is_string && !(v_.Verify(end, 1) && buf_[end] == '\0'))
            return fail("string " + name + " at byte " + std::to_string(at) +
                        " lacks its NUL terminator");
        return true;
    }

    bool table(const uint8_t *t, const TableSpec &spec, const Path *p)
    {
        if (++tables_ > opts_.max_tables)
            return fail("the buffer holds more than " +
                        std::to_string(opts_.max_tables) +
                        " tables (one per 8 bytes of a " +
                        std::to_string(len_) +
                        "-byte buffer): subtables are referenced repeatedly");
        size_t at = pos(t);
        std::string path = where(p, nullptr);
        std::string name = path.empty() ? std::string("the root table Batch")
                                        : "table " + std::string(spec.name) +
                                              " '" + path + "'";
        if (!v_.Verify<fb::soffset_t>(at))
            return fail(name + bad_range(at, sizeof(fb::soffset_t)));
        if (!v_.VerifyTableStart(t))
            return fail("the vtable of " + name + " at byte " +
                        std::to_string(at) +
                        " lies outside the buffer or is malformed");
        auto tbl = reinterpret_cast<const fb::Table *>(t);
        for (size_t i = 0; i < spec.nfields; i++) {
            if (!field(tbl, t, spec.fields[i], p))
                return false;
        }
        v_.EndTable();
        return true;
    }

    bool field(const fb::Table *tbl, const uint8_t *t, const FieldSpec &f,
               const Path *p)
    {
        fb::voffset_t fo = tbl->GetOptionalFieldOffset(f.vt);
        if (fo == 0) {
            if (f.required && missing_.empty())
                missing_ = where(p, f.name);
            return true;
        }
        size_t at = pos(t) + fo;
        if (f.kind == FieldKind::Scalar) {
            if (!v_.VerifyFieldStruct(t, fo, f.size, f.size))
                return fail("field '" + where(p, f.name) + "'" +
                            bad_range(at, f.size));
            return true;
        }
        fb::uoffset_t o = offset_at(at, p, f.name);
        if (o == 0)
            return false;
        const uint8_t *target = buf_ + at + o;
        std::string name = "'" + where(p, f.name) + "'";
        switch (f.kind) {
        case FieldKind::String:
            return vector(target, 1, name, true);
        case FieldKind::Structs:
            return vector(target, f.size, name, false);
        case FieldKind::Strings: {
            if (!vector(target, sizeof(fb::uoffset_t), name, false))
                return false;
            fb::uoffset_t n = fb::ReadScalar<fb::uoffset_t>(target);
            for (fb::uoffset_t i = 0; i < n; i++) {
                Path elem = {p, f.name, static_cast<long>(i)};
                size_t eat = pos(target) + sizeof(fb::uoffset_t) +
                             size_t(i) * sizeof(fb::uoffset_t);
                fb::uoffset_t so = offset_at(eat, &elem, nullptr);
                if (so == 0)
                    return false;
                if (!vector(buf_ + eat + so, 1,
                            "'" + where(&elem, nullptr) + "'", true))
                    return false;
            }
            return true;
        }
        case FieldKind::Tables: {
            if (!vector(target, sizeof(fb::uoffset_t), name, false))
                return false;
            auto vec =
                reinterpret_cast<const fb::Vector<fb::Offset<fb::Table>> *>(
                    target);
            for (fb::uoffset_t i = 0; i < vec->size(); i++) {
                Path elem = {p, f.name, static_cast<long>(i)};
                size_t eat = pos(target) + sizeof(fb::uoffset_t) +
                             size_t(i) * sizeof(fb::uoffset_t);
                /* The generated code follows element offsets and lets
                 * VerifyTableStart bound them; bound them first here, so
                 * no pointer is ever formed outside the buffer. */
                size_t eo = eat + fb::ReadScalar<fb::uoffset_t>(buf_ + eat);
                if (eo >= len_) {
                    std::string e = where(&elem, nullptr);
                    return fail("the offset of '" + e + "' at byte " +
                                std::to_string(eat) + " points to byte " +
                                std::to_string(eo) + ", past the end of the " +
                                std::to_string(len_) + "-byte buffer");
                }
                if (!table(buf_ + eo, *f.table, &elem))
                    return false;
            }
            return true;
        }
        case FieldKind::Scalar:
            break;
        }
        return true;
    }

    const uint8_t *buf_;
    size_t len_;
    fb::Verifier::Options opts_;
    fb::Verifier v_;
    size_t tables_ = 0;
    std::string failure_;
    std::string missing_;
};

/* ---------------------------------------------------------------------
 * Enum mapping: explicit pairs, so neither side's numbering leaks into the
 * other. Each table must name every value of the wire enum.
 * ------------------------------------------------------------------- */

template <typename C, typename W> struct EnumPair {
    C c;
    W wire;
};

#define TW_ENUM_TABLE(name, C, W, ...)                                         \
    constexpr EnumPair<C, W> name[] = {__VA_ARGS__};                           \
    static_assert(sizeof(name) / sizeof(name[0]) ==                            \
                      size_t(W::MAX) - size_t(W::MIN) + 1,                     \
                  #name " must cover every value of the schema's enum")

TW_ENUM_TABLE(kSources, tw_source, tww::SourceType,
              {TW_SOURCE_PYTHONTIMELINE, tww::SourceType::PythonTimeline},
              {TW_SOURCE_MODEL_TIMELINE, tww::SourceType::ModelTimeline},
              {TW_SOURCE_TF_PROFILER, tww::SourceType::TFProfiler},
              {TW_SOURCE_HOROVOD, tww::SourceType::Horovod},
              {TW_SOURCE_SMDATAPARALLEL, tww::SourceType::SMDataParallel});
TW_ENUM_TABLE(kModes, tw_mode, tww::Mode, {TW_MODE_NONE, tww::Mode::None},
              {TW_MODE_TRAIN, tww::Mode::Train},
              {TW_MODE_EVAL, tww::Mode::Eval},
              {TW_MODE_PREDICT, tww::Mode::Predict},
              {TW_MODE_GLOBAL, tww::Mode::Global});
TW_ENUM_TABLE(kArgKinds, tw_arg_kind, tww::ArgKind,
              {TW_ARG_STRING, tww::ArgKind::String},
              {TW_ARG_NUMBER, tww::ArgKind::Number},
              {TW_ARG_BOOL, tww::ArgKind::Bool},
              {TW_ARG_NULL, tww::ArgKind::Null},
              {TW_ARG_JSON, tww::ArgKind::Json});
TW_ENUM_TABLE(kMarkerKinds, tw_marker_kind, tww::MarkerKind,
              {TW_MARKER_NONE, tww::MarkerKind::None},
              {TW_MARKER_JOB_START, tww::MarkerKind::JobStart},
              {TW_MARKER_JOB_END, tww::MarkerKind::JobEnd});
#undef TW_ENUM_TABLE

template <typename C, typename W, size_t N>
bool from_wire(const EnumPair<C, W> (&table)[N], W w, C *out)
{
    for (const auto &e : table) {
        if (e.wire == w) {
            *out = e.c;
            return true;
        }
    }
    return false;
}

/* A C caller may store any int in an enum field, and loading an
 * out-of-range value as the enum type is undefined in C++: compare the
 * bits as the underlying integer instead. */
template <typename C, typename W, size_t N>
bool to_wire(const EnumPair<C, W> (&table)[N], const C &c, W *out)
{
    std::underlying_type_t<C> v;
    static_assert(sizeof(v) == sizeof(c), "enum size");
    memcpy(&v, &c, sizeof(v));
    for (const auto &e : table) {
        if (static_cast<std::underlying_type_t<C>>(e.c) == v) {
            *out = e.wire;
            return true;
        }
    }
    return false;
}

/* ---------------------------------------------------------------------
 * Decode: verified buffer -> tw_batch
 * ------------------------------------------------------------------- */

class Decoder
{
  public:
    Decoder(tw_batch *b, char *err, size_t errlen)
        : b_(b), err_(err), errlen_(errlen)
    {
    }

    tw_wire_status run(const tww::Batch *root);

  private:
    tw_wire_status no_memory(const char *what)
    {
        set_err(err_, errlen_, "out of memory while copying %s", what);
        return TW_WIRE_NO_MEMORY;
    }

    /* n elements of `size` bytes from the arena; at least one element so
     * that an empty-but-present array is not NULL. */
    void *array(size_t n, size_t size)
    {
        if (n > SIZE_MAX / size)
            return nullptr;
        return tw_arena_alloc(&b_->arena, (n == 0 ? 1 : n) * size);
    }

    /* Writers share equal strings (CreateSharedString); copy each once so
     * the decoded size stays proportional to the buffer. */
    const char *str(const fb::String *s)
    {
        auto it = strings_.find(s);
        if (it != strings_.end())
            return it->second;
        const char *c = tw_arena_strndup(&b_->arena, s->c_str(), s->size());
        if (c != nullptr)
            strings_.emplace(s, c);
        return c;
    }

    tw_wire_status bad_value(const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

    tw_wire_status series(const tww::Batch *root);
    tw_wire_status samples(const tww::Batch *root);
    tw_wire_status events(const tww::Batch *root);
    tw_wire_status markers(const tww::Batch *root);
    tw_wire_status tensors(const tww::Batch *root);
    tw_wire_status tensor(fb::uoffset_t i, const tww::TensorRecord *t,
                          tw_tensor *o);

    tw_batch *b_;
    char *err_;
    size_t errlen_;
    std::unordered_map<const fb::String *, const char *> strings_;
};

tw_wire_status Decoder::bad_value(const char *fmt, ...)
{
    if (err_ != nullptr && errlen_ > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err_, errlen_, fmt, ap);
        va_end(ap);
    }
    return TW_WIRE_BAD_VALUE;
}

tw_wire_status Decoder::run(const tww::Batch *root)
{
    if (root->job()->size() > TW_WIRE_ID_MAX ||
        root->node()->size() > TW_WIRE_ID_MAX) {
        bool job = root->job()->size() > TW_WIRE_ID_MAX;
        set_err(err_, errlen_,
                "%s id is %" PRIu32 " bytes long, more than the %d allowed "
                "(starts '%.40s')",
                job ? "job" : "node",
                job ? root->job()->size() : root->node()->size(),
                TW_WIRE_ID_MAX,
                job ? root->job()->c_str() : root->node()->c_str());
        return TW_WIRE_ID_TOO_LONG;
    }
    b_->job = str(root->job());
    b_->node = str(root->node());
    if (b_->job == nullptr || b_->node == nullptr)
        return no_memory("the job and node ids");
    b_->seq = root->seq();
    b_->file_ts_us = root->file_ts_us();
    if (root->file_path() != nullptr) {
        b_->file_path = str(root->file_path());
        if (b_->file_path == nullptr)
            return no_memory("the file path");
    }
    tw_wire_status st = series(root);
    if (st == TW_WIRE_OK)
        st = samples(root);
    if (st == TW_WIRE_OK)
        st = events(root);
    if (st == TW_WIRE_OK)
        st = markers(root);
    if (st == TW_WIRE_OK)
        st = tensors(root);
    if (root->python_profiles() != nullptr)
        b_->npython_profiles = root->python_profiles()->size();
    return st;
}

tw_wire_status Decoder::series(const tww::Batch *root)
{
    auto vec = root->series();
    if (vec == nullptr || vec->size() == 0)
        return TW_WIRE_OK;
    auto out = static_cast<tw_batch_series *>(
        array(vec->size(), sizeof(tw_batch_series)));
    if (out == nullptr)
        return no_memory("the series dictionary");
    for (fb::uoffset_t i = 0; i < vec->size(); i++) {
        const tww::Series *s = vec->Get(i);
        out[i].type = str(s->type());
        out[i].dimension = str(s->dimension());
        out[i].name = s->name() == nullptr ? nullptr : str(s->name());
        if (out[i].type == nullptr || out[i].dimension == nullptr ||
            (s->name() != nullptr && out[i].name == nullptr))
            return no_memory("the series dictionary");
    }
    b_->series = out;
    b_->nseries = vec->size();
    return TW_WIRE_OK;
}

tw_wire_status Decoder::samples(const tww::Batch *root)
{
    auto vec = root->samples();
    if (vec == nullptr || vec->size() == 0)
        return TW_WIRE_OK;
    auto out = static_cast<tw_sample *>(array(vec->size(), sizeof(tw_sample)));
    if (out == nullptr)
        return no_memory("the samples");
    for (fb::uoffset_t i = 0; i < vec->size(); i++) {
        const tww::Sample *s = vec->Get(i);
        if (s->series() >= b_->nseries) {
            set_err(err_, errlen_,
                    "samples[%" PRIu32 "] refers to series %" PRIu32
                    " but the batch has %zu series",
                    i, s->series(), b_->nseries);
            return TW_WIRE_BAD_REFERENCE;
        }
        out[i].ts = s->timestamp();
        out[i].value = s->value();
        out[i].series = s->series();
        out[i].flags = s->flags();
    }
    b_->samples = out;
    b_->nsamples = vec->size();
    return TW_WIRE_OK;
}

tw_wire_status Decoder::events(const tww::Batch *root)
{
    auto vec = root->events();
    if (vec == nullptr || vec->size() == 0)
        return TW_WIRE_OK;
    auto out =
        static_cast<tw_fw_event *>(array(vec->size(), sizeof(tw_fw_event)));
    if (out == nullptr)
        return no_memory("the framework events");
    for (fb::uoffset_t i = 0; i < vec->size(); i++) {
        const tww::FrameworkEvent *e = vec->Get(i);
        tw_fw_event *o = &out[i];
        o->name = str(e->name());
        o->phase = str(e->phase());
        if (o->name == nullptr || o->phase == nullptr)
            return no_memory("the framework events");
        o->node = b_->node;
        o->start_us = e->start_us();
        o->end_us = e->end_us();
        o->pid = e->pid();
        o->tid = e->tid();
        if (!from_wire(kSources, e->source(), &o->source))
            return bad_value("events[%" PRIu32 "].source is %d, not a "
                             "SourceType this reader knows",
                             i, static_cast<int>(e->source()));
        if (!from_wire(kModes, e->mode(), &o->mode))
            return bad_value("events[%" PRIu32 "].mode is %d, not a Mode "
                             "this reader knows",
                             i, static_cast<int>(e->mode()));
        auto args = e->args();
        fb::uoffset_t nargs = args == nullptr ? 0 : args->size();
        if (!e->has_args()) {
            if (nargs != 0)
                return bad_value("events[%" PRIu32 "] has %" PRIu32
                                 " args but has_args is false",
                                 i, nargs);
            continue; /* args stays NULL: the event had none */
        }
        auto a = static_cast<tw_arg *>(array(nargs, sizeof(tw_arg)));
        if (a == nullptr)
            return no_memory("the framework event args");
        for (fb::uoffset_t j = 0; j < nargs; j++) {
            const tww::Arg *w = args->Get(j);
            a[j].key = str(w->key());
            a[j].value = str(w->value());
            if (a[j].key == nullptr || a[j].value == nullptr)
                return no_memory("the framework event args");
            if (!from_wire(kArgKinds, w->kind(), &a[j].kind))
                return bad_value("events[%" PRIu32 "].args[%" PRIu32
                                 "].kind is %d, not an ArgKind this reader "
                                 "knows",
                                 i, j, static_cast<int>(w->kind()));
        }
        o->args = a;
        o->nargs = nargs;
    }
    b_->events = out;
    b_->nevents = vec->size();
    return TW_WIRE_OK;
}

tw_wire_status Decoder::markers(const tww::Batch *root)
{
    auto vec = root->markers();
    if (vec == nullptr || vec->size() == 0)
        return TW_WIRE_OK;
    auto out = static_cast<tw_marker *>(array(vec->size(), sizeof(tw_marker)));
    if (out == nullptr)
        return no_memory("the markers");
    for (fb::uoffset_t i = 0; i < vec->size(); i++) {
        const tww::Marker *m = vec->Get(i);
        if (!from_wire(kMarkerKinds, m->kind(), &out[i].kind))
            return bad_value("markers[%" PRIu32 "].kind is %d, not a "
                             "MarkerKind this reader knows",
                             i, static_cast<int>(m->kind()));
        out[i].time_us = m->time_us();
        out[i].sampling_interval_ms = m->sampling_interval_ms();
        out[i].latest_us = m->latest_us();
        out[i].profiler_config = nullptr;
        if (m->profiler_config() != nullptr) {
            out[i].profiler_config = str(m->profiler_config());
            if (out[i].profiler_config == nullptr)
                return no_memory("a marker's profiler_config");
        }
    }
    b_->markers = out;
    b_->nmarkers = vec->size();
    return TW_WIRE_OK;
}

/* Scalar vectors of 8-byte elements are copied with memcpy: their
 * elements carry no alignment promise the verifier checked (the data is
 * little-endian, as every host this builds on). */
static_assert(FLATBUFFERS_LITTLEENDIAN, "wire scalars are little-endian");

tw_wire_status Decoder::tensors(const tww::Batch *root)
{
    auto vec = root->tensors();
    if (vec == nullptr || vec->size() == 0)
        return TW_WIRE_OK;
    auto out = static_cast<tw_tensor *>(array(vec->size(), sizeof(tw_tensor)));
    if (out == nullptr)
        return no_memory("the tensors");
    for (fb::uoffset_t i = 0; i < vec->size(); i++) {
        tw_wire_status st = tensor(i, vec->Get(i), &out[i]);
        if (st != TW_WIRE_OK)
            return st;
    }
    b_->tensors = out;
    b_->ntensors = vec->size();
    return TW_WIRE_OK;
}

/* One TensorRecord, checked for what no honest hook writes: such a record
 * refuses the whole batch (bad_value, dead-lettered with this text), as a
 * bad event does. NaN and Inf reduction values are data (a diverged loss),
 * never refused. */
tw_wire_status Decoder::tensor(fb::uoffset_t i, const tww::TensorRecord *t,
                               tw_tensor *o)
{
    memset(o, 0, sizeof(*o));
    if (t->name()->size() == 0)
        return bad_value("tensors[%" PRIu32 "].name is empty", i);
    if (tw_wire_has_nul(t->name()) || tw_wire_has_nul(t->dtype()))
        return bad_value("tensors[%" PRIu32 "]: its name or dtype holds a "
                         "NUL byte",
                         i);
    if (!from_wire(kModes, t->mode(), &o->mode))
        return bad_value("tensors[%" PRIu32 "] '%.80s': mode is %d, not a "
                         "Mode this reader knows",
                         i, t->name()->c_str(), static_cast<int>(t->mode()));
    if (t->step() < 0 || t->mode_step() < 0 || t->numel() < 0)
        return bad_value(
            "tensors[%" PRIu32 "] '%.80s': step %" PRId64 ", mode_step %" PRId64
            " and numel %" PRId64 " must not be negative",
            i, t->name()->c_str(), t->step(), t->mode_step(), t->numel());
    if (t->wall_us() <= 0)
        return bad_value("tensors[%" PRIu32 "] '%.80s': wall_us is %" PRId64
                         ", not a time (us since the epoch)",
                         i, t->name()->c_str(), t->wall_us());
    if (t->prev_step() < -1 ||
        (t->prev_step() >= 0 && t->prev_step() >= t->step()))
        return bad_value("tensors[%" PRIu32 "] '%.80s': prev_step %" PRId64
                         " is neither -1 nor an earlier step than %" PRId64,
                         i, t->name()->c_str(), t->prev_step(), t->step());
    o->node = b_->node;
    o->name = str(t->name());
    o->dtype = t->dtype() == nullptr ? "" : str(t->dtype());
    if (o->name == nullptr || o->dtype == nullptr)
        return no_memory("a tensor's name");
    o->step = t->step();
    o->mode_step = t->mode_step();
    o->wall_us = t->wall_us();
    o->prev_step = t->prev_step();
    o->numel = t->numel();
    if (auto c = t->collections(); c != nullptr && c->size() > 0) {
        auto names =
            static_cast<const char **>(array(c->size(), sizeof(char *)));
        if (names == nullptr)
            return no_memory("a tensor's collections");
        for (fb::uoffset_t k = 0; k < c->size(); k++) {
            if (c->Get(k)->size() == 0 || tw_wire_has_nul(c->Get(k)))
                return bad_value("tensors[%" PRIu32 "] '%.80s': "
                                 "collections[%" PRIu32 "] is empty or "
                                 "holds a NUL byte",
                                 i, t->name()->c_str(), k);
            if ((names[k] = str(c->Get(k))) == nullptr)
                return no_memory("a tensor's collections");
        }
        o->collections = names;
        o->ncollections = c->size();
    }
    if (auto sh = t->shape(); sh != nullptr && sh->size() > 0) {
        auto dims = static_cast<int64_t *>(array(sh->size(), sizeof(int64_t)));
        if (dims == nullptr)
            return no_memory("a tensor's shape");
        memcpy(dims, sh->Data(), sh->size() * sizeof(int64_t));
        for (fb::uoffset_t k = 0; k < sh->size(); k++)
            if (dims[k] < 0)
                return bad_value("tensors[%" PRIu32 "] '%.80s': shape[%" PRIu32
                                 "] is %" PRId64 ", below 0",
                                 i, t->name()->c_str(), k, dims[k]);
        o->shape = dims;
        o->nshape = sh->size();
    }
    if (auto r = t->reductions(); r != nullptr && r->size() > 0) {
        auto red = static_cast<tw_tensor_reduction *>(
            array(r->size(), sizeof(tw_tensor_reduction)));
        if (red == nullptr)
            return no_memory("a tensor's reductions");
        for (fb::uoffset_t k = 0; k < r->size(); k++) {
            const tww::TensorReduction *w = r->Get(k);
            if (w->op()->size() == 0 || tw_wire_has_nul(w->op()))
                return bad_value("tensors[%" PRIu32 "] '%.80s': "
                                 "reductions[%" PRIu32 "].op is empty or "
                                 "holds a NUL byte",
                                 i, t->name()->c_str(), k);
            if ((red[k].op = str(w->op())) == nullptr)
                return no_memory("a tensor's reductions");
            red[k].value = w->value();
        }
        o->reductions = red;
        o->nreductions = r->size();
    }
    if (auto raw = t->raw(); raw != nullptr && raw->size() > 0) {
        auto v = static_cast<double *>(array(raw->size(), sizeof(double)));
        if (v == nullptr)
            return no_memory("a tensor's raw values");
        memcpy(v, raw->Data(), raw->size() * sizeof(double));
        o->raw = v;
        o->nraw = raw->size();
    }
    return TW_WIRE_OK;
}

tw_wire_status decode(const uint8_t *buf, size_t len, tw_batch **out, char *err,
                      size_t errlen)
{
    if (buf == nullptr || len < kMinBufferSize) {
        set_err(err, errlen,
                "buffer of %zu bytes is shorter than the smallest "
                "FlatBuffer (%zu bytes)",
                buf == nullptr ? size_t(0) : len, kMinBufferSize);
        return TW_WIRE_TOO_SHORT;
    }
    if (!tww::BatchBufferHasIdentifier(buf)) {
        char id[4 * 4 + 1];
        size_t n = 0;
        for (size_t i = 0; i < fb::kFileIdentifierLength; i++) {
            unsigned char c = buf[sizeof(fb::uoffset_t) + i];
            n += static_cast<size_t>(snprintf(
                id + n, sizeof(id) - n,
                c >= 0x20 && c < 0x7f && c != '\\' && c != '"' ? "%c"
                                                               : "\\x%02x",
                c));
        }
        set_err(err, errlen, "file identifier is \"%s\", expected \"%s\"", id,
                tww::BatchIdentifier());
        return TW_WIRE_BAD_IDENTIFIER;
    }
    /* The Verifier asserts on larger buffers rather than refusing them. */
    if (len >= FLATBUFFERS_MAX_BUFFER_SIZE) {
        set_err(err, errlen,
                "buffer of %zu bytes exceeds the FlatBuffers limit of %llu",
                len,
                static_cast<unsigned long long>(FLATBUFFERS_MAX_BUFFER_SIZE));
        return TW_WIRE_VERIFY_FAILED;
    }

    /* Kafka payloads carry no alignment promise; accessors read scalars in
     * place, so work on an aligned copy when needed. */
    std::unique_ptr<uint64_t[]> aligned;
    if (reinterpret_cast<uintptr_t>(buf) % kMaxAlign != 0) {
        aligned.reset(new uint64_t[(len + 7) / 8]);
        memcpy(aligned.get(), buf, len);
        buf = reinterpret_cast<const uint8_t *>(aligned.get());
    }

    fb::Verifier verifier(buf, len, verifier_options(len));
    if (!tww::VerifyBatchBuffer(verifier)) {
        Diagnosis d(buf, len);
        d.run();
        if (!d.failure().empty()) {
            set_err(err, errlen, "verification failed: %s",
                    d.failure().c_str());
            return TW_WIRE_VERIFY_FAILED;
        }
        if (!d.missing().empty()) {
            set_err(err, errlen, "required field '%s' is missing",
                    d.missing().c_str());
            return TW_WIRE_MISSING_FIELD;
        }
        set_err(err, errlen,
                "verification failed: the FlatBuffers verifier refused the "
                "%zu-byte buffer",
                len);
        return TW_WIRE_VERIFY_FAILED;
    }

    const tww::Batch *root = tww::GetBatch(buf);
    /* The verifier checks a struct vector's length word for alignment but
     * not its elements; every writer aligns them (an empty vector aside),
     * and the accessors read them in place. */
    auto samples = root->samples();
    if (samples != nullptr && samples->size() > 0 &&
        reinterpret_cast<uintptr_t>(samples->Data()) % alignof(tww::Sample) !=
            0) {
        set_err(err, errlen,
                "verification failed: the elements of vector 'samples' at "
                "byte %zu are not %zu-byte aligned",
                static_cast<size_t>(samples->Data() - buf),
                alignof(tww::Sample));
        return TW_WIRE_VERIFY_FAILED;
    }
    if (root->version() == 0) {
        set_err(err, errlen,
                "version 0 is not a version of the wire format (the first "
                "is 1)");
        return TW_WIRE_UNSUPPORTED_VERSION;
    }

    tw_batch *b = tw_batch_new();
    if (b == nullptr) {
        set_err(err, errlen, "out of memory allocating a batch");
        return TW_WIRE_NO_MEMORY;
    }
    /* A buffered batch keeps its arena until its scans close: size the
     * first block by the message (decoded samples and series take about
     * what they take on the wire) instead of the default 64 KB. */
    if (tw_arena_reserve(&b->arena, len + len / 2 + 256) != 0) {
        tw_batch_free(b);
        set_err(err, errlen, "out of memory allocating a batch");
        return TW_WIRE_NO_MEMORY;
    }
    tw_wire_status st;
    try {
        st = Decoder(b, err, errlen).run(root);
    } catch (...) {
        tw_batch_free(b);
        throw;
    }
    if (st != TW_WIRE_OK) {
        tw_batch_free(b);
        return st;
    }
    *out = b;
    return TW_WIRE_OK;
}

/* ---------------------------------------------------------------------
 * Encode: tw_batch -> buffer
 * ------------------------------------------------------------------- */

/* An upper bound of the encoded size, to refuse what FlatBuffers cannot
 * hold before the builder asserts on it, and to size the builder once. */
class SizeBound
{
  public:
    void str(const char *s)
    {
        add(s == nullptr ? 0 : strlen(s) + 12);
    }
    void add(size_t n)
    {
        total_ = n > kLimit - total_ ? kLimit : total_ + n;
    }
    void mul(size_t n, size_t each)
    {
        if (each != 0 && n > kLimit / each)
            total_ = kLimit;
        else
            add(n * each);
    }
    bool too_big() const
    {
        return total_ >= kLimit;
    }
    size_t total() const
    {
        return total_;
    }

  private:
    static constexpr size_t kLimit = FLATBUFFERS_MAX_BUFFER_SIZE;
    size_t total_ = 256;
};

/* Checks everything a reader would refuse, and bounds the size. */
tw_wire_status check_for_encode(const tw_batch *b, SizeBound *size)
{
    if (b->job == nullptr || b->node == nullptr)
        return TW_WIRE_MISSING_FIELD;
    size->str(b->job);
    size->str(b->node);
    size->str(b->file_path);
    if ((b->series == nullptr && b->nseries != 0) ||
        (b->samples == nullptr && b->nsamples != 0) ||
        (b->events == nullptr && b->nevents != 0) ||
        (b->markers == nullptr && b->nmarkers != 0))
        return TW_WIRE_MISSING_FIELD;
    if (b->nseries > UINT32_MAX || b->nsamples > UINT32_MAX ||
        b->nevents > UINT32_MAX || b->nmarkers > UINT32_MAX)
        return TW_WIRE_NO_MEMORY;
    for (size_t i = 0; i < b->nseries; i++) {
        const tw_batch_series *s = &b->series[i];
        if (s->type == nullptr || s->dimension == nullptr)
            return TW_WIRE_MISSING_FIELD;
        size->str(s->type);
        size->str(s->name);
        size->str(s->dimension);
        size->add(32);
    }
    for (size_t i = 0; i < b->nsamples; i++) {
        if (b->samples[i].series >= b->nseries)
            return TW_WIRE_BAD_REFERENCE;
    }
    size->mul(b->nsamples, sizeof(tww::Sample));
    for (size_t i = 0; i < b->nevents; i++) {
        const tw_fw_event *e = &b->events[i];
        tww::SourceType src;
        tww::Mode mode;
        if (e->name == nullptr || e->phase == nullptr)
            return TW_WIRE_MISSING_FIELD;
        if (e->args == nullptr && e->nargs != 0)
            return TW_WIRE_MISSING_FIELD;
        if (!to_wire(kSources, e->source, &src) ||
            !to_wire(kModes, e->mode, &mode))
            return TW_WIRE_BAD_VALUE;
        if (e->node != nullptr && strcmp(e->node, b->node) != 0)
            return TW_WIRE_BAD_VALUE;
        size->str(e->name);
        size->str(e->phase);
        size->add(96);
        for (uint32_t j = 0; j < e->nargs; j++) {
            tww::ArgKind kind;
            if (e->args[j].key == nullptr || e->args[j].value == nullptr)
                return TW_WIRE_MISSING_FIELD;
            if (!to_wire(kArgKinds, e->args[j].kind, &kind))
                return TW_WIRE_BAD_VALUE;
            size->str(e->args[j].key);
            size->str(e->args[j].value);
            size->add(32);
        }
    }
    for (size_t i = 0; i < b->nmarkers; i++) {
        tww::MarkerKind kind;
        if (!to_wire(kMarkerKinds, b->markers[i].kind, &kind))
            return TW_WIRE_BAD_VALUE;
        if (b->markers[i].profiler_config != nullptr)
            size->str(b->markers[i].profiler_config);
    }
    size->mul(b->nmarkers, 40);
    if (b->tensors == nullptr && b->ntensors != 0)
        return TW_WIRE_MISSING_FIELD;
    if (b->ntensors > UINT32_MAX)
        return TW_WIRE_NO_MEMORY;
    for (size_t i = 0; i < b->ntensors; i++) {
        const tw_tensor *t = &b->tensors[i];
        tww::Mode mode;
        if (t->name == nullptr ||
            (t->collections == nullptr && t->ncollections != 0) ||
            (t->shape == nullptr && t->nshape != 0) ||
            (t->reductions == nullptr && t->nreductions != 0) ||
            (t->raw == nullptr && t->nraw != 0))
            return TW_WIRE_MISSING_FIELD;
        if (!to_wire(kModes, t->mode, &mode))
            return TW_WIRE_BAD_VALUE;
        size->str(t->name);
        size->str(t->dtype);
        size->add(128);
        for (uint32_t k = 0; k < t->ncollections; k++) {
            if (t->collections[k] == nullptr)
                return TW_WIRE_MISSING_FIELD;
            size->str(t->collections[k]);
        }
        for (uint32_t k = 0; k < t->nreductions; k++) {
            if (t->reductions[k].op == nullptr)
                return TW_WIRE_MISSING_FIELD;
            size->str(t->reductions[k].op);
            size->add(24);
        }
        size->mul(t->nshape, 8);
        size->mul(t->nraw, 8);
    }
    return size->too_big() ? TW_WIRE_NO_MEMORY : TW_WIRE_OK;
}

void fill_sample(size_t i, tww::Sample *out, const tw_sample *in)
{
    *out = tww::Sample(in[i].ts, in[i].value, in[i].series, in[i].flags);
}

/* Builds the buffer; check_for_encode() has accepted b. */
void build(const tw_batch *b, fb::FlatBufferBuilder &fbb)
{
    /* Equal strings (phases, arg keys, series types) are stored once. */
    auto s = [&fbb](const char *c) { return fbb.CreateSharedString(c); };

    std::vector<fb::Offset<tww::Series>> series;
    series.reserve(b->nseries);
    for (size_t i = 0; i < b->nseries; i++) {
        const tw_batch_series *x = &b->series[i];
        auto type = s(x->type);
        auto name = x->name == nullptr ? fb::Offset<fb::String>() : s(x->name);
        auto dim = s(x->dimension);
        series.push_back(tww::CreateSeries(fbb, type, name, dim));
    }

    std::vector<fb::Offset<tww::FrameworkEvent>> events;
    std::vector<fb::Offset<tww::Arg>> args;
    events.reserve(b->nevents);
    for (size_t i = 0; i < b->nevents; i++) {
        const tw_fw_event *e = &b->events[i];
        fb::Offset<fb::Vector<fb::Offset<tww::Arg>>> argv;
        if (e->args != nullptr) {
            args.clear();
            for (uint32_t j = 0; j < e->nargs; j++) {
                tww::ArgKind kind = tww::ArgKind::String;
                to_wire(kArgKinds, e->args[j].kind, &kind);
                args.push_back(tww::CreateArg(fbb, s(e->args[j].key),
                                              s(e->args[j].value), kind));
            }
            argv = fbb.CreateVector(args);
        }
        tww::SourceType src = tww::SourceType::PythonTimeline;
        tww::Mode mode = tww::Mode::None;
        to_wire(kSources, e->source, &src);
        to_wire(kModes, e->mode, &mode);
        auto name = s(e->name);
        auto phase = s(e->phase);
        events.push_back(tww::CreateFrameworkEvent(
            fbb, name, phase, e->start_us, e->end_us, e->pid, e->tid, src, mode,
            argv, e->args != nullptr));
    }

    std::vector<fb::Offset<tww::Marker>> markers;
    markers.reserve(b->nmarkers);
    for (size_t i = 0; i < b->nmarkers; i++) {
        tww::MarkerKind kind = tww::MarkerKind::None;
        to_wire(kMarkerKinds, b->markers[i].kind, &kind);
        auto config = b->markers[i].profiler_config == nullptr
                          ? fb::Offset<fb::String>()
                          : s(b->markers[i].profiler_config);
        markers.push_back(tww::CreateMarker(fbb, kind, b->markers[i].time_us,
                                            b->markers[i].sampling_interval_ms,
                                            b->markers[i].latest_us, config));
    }

    std::vector<fb::Offset<tww::TensorRecord>> tensors;
    tensors.reserve(b->ntensors);
    std::vector<fb::Offset<fb::String>> colls;
    std::vector<fb::Offset<tww::TensorReduction>> reds;
    for (size_t i = 0; i < b->ntensors; i++) {
        const tw_tensor *t = &b->tensors[i];
        fb::Offset<fb::Vector<fb::Offset<fb::String>>> colls_v;
        if (t->ncollections > 0) {
            colls.clear();
            for (uint32_t k = 0; k < t->ncollections; k++)
                colls.push_back(s(t->collections[k]));
            colls_v = fbb.CreateVector(colls);
        }
        fb::Offset<fb::Vector<fb::Offset<tww::TensorReduction>>> reds_v;
        if (t->nreductions > 0) {
            reds.clear();
            for (uint32_t k = 0; k < t->nreductions; k++)
                reds.push_back(tww::CreateTensorReduction(
                    fbb, s(t->reductions[k].op), t->reductions[k].value));
            reds_v = fbb.CreateVector(reds);
        }
        fb::Offset<fb::Vector<int64_t>> shape_v;
        if (t->nshape > 0)
            shape_v = fbb.CreateVector(t->shape, t->nshape);
        fb::Offset<fb::Vector<double>> raw_v;
        if (t->nraw > 0)
            raw_v = fbb.CreateVector(t->raw, t->nraw);
        tww::Mode mode = tww::Mode::None;
        to_wire(kModes, t->mode, &mode);
        auto name = s(t->name);
        auto dtype =
            t->dtype == nullptr ? fb::Offset<fb::String>() : s(t->dtype);
        tensors.push_back(tww::CreateTensorRecord(
            fbb, name, colls_v, t->step, mode, t->mode_step, t->wall_us, dtype,
            shape_v, t->numel, reds_v, raw_v, t->prev_step));
    }

    /* Empty vectors are left out: readers treat absent as empty. */
    fb::Offset<fb::Vector<const tww::Sample *>> samples;
    if (b->nsamples > 0)
        samples = fbb.CreateVectorOfStructs<tww::Sample>(
            b->nsamples, fill_sample, b->samples);
    auto job = s(b->job);
    auto node = s(b->node);
    auto path =
        b->file_path == nullptr ? fb::Offset<fb::String>() : s(b->file_path);
    fb::Offset<fb::Vector<fb::Offset<tww::Series>>> series_v;
    if (!series.empty())
        series_v = fbb.CreateVector(series);
    fb::Offset<fb::Vector<fb::Offset<tww::FrameworkEvent>>> events_v;
    if (!events.empty())
        events_v = fbb.CreateVector(events);
    fb::Offset<fb::Vector<fb::Offset<tww::Marker>>> markers_v;
    if (!markers.empty())
        markers_v = fbb.CreateVector(markers);
    fb::Offset<fb::Vector<fb::Offset<tww::TensorRecord>>> tensors_v;
    if (!tensors.empty())
        tensors_v = fbb.CreateVector(tensors);

    tww::BatchBuilder bb(fbb);
    /* Written even though it equals the default: a future default bump
     * must not change what this buffer says. */
    fbb.ForceDefaults(true);
    bb.add_version(1);
    fbb.ForceDefaults(false);
    bb.add_job(job);
    bb.add_node(node);
    bb.add_seq(b->seq);
    bb.add_file_ts_us(b->file_ts_us);
    bb.add_series(series_v);
    bb.add_samples(samples);
    bb.add_events(events_v);
    bb.add_markers(markers_v);
    if (!tensors_v.IsNull())
        bb.add_tensors(tensors_v);
    if (!path.IsNull())
        bb.add_file_path(path);
    tww::FinishBatchBuffer(fbb, bb.Finish());
}

tw_wire_status encode(const tw_batch *b, uint8_t **out, size_t *outlen)
{
    SizeBound size;
    tw_wire_status st = check_for_encode(b, &size);
    if (st != TW_WIRE_OK)
        return st;
    fb::FlatBufferBuilder fbb(size.total());
    build(b, fbb);
    size_t n = fbb.GetSize();
    auto p = static_cast<uint8_t *>(malloc(n));
    if (p == nullptr)
        return TW_WIRE_NO_MEMORY;
    memcpy(p, fbb.GetBufferPointer(), n);
    *out = p;
    *outlen = n;
    return TW_WIRE_OK;
}

} // namespace

extern "C" const char *tw_wire_status_name(tw_wire_status st)
{
    switch (st) {
    case TW_WIRE_OK:
        return "ok";
    case TW_WIRE_TOO_SHORT:
        return "too_short";
    case TW_WIRE_BAD_IDENTIFIER:
        return "bad_identifier";
    case TW_WIRE_VERIFY_FAILED:
        return "verify_failed";
    case TW_WIRE_MISSING_FIELD:
        return "missing_field";
    case TW_WIRE_BAD_REFERENCE:
        return "bad_reference";
    case TW_WIRE_UNSUPPORTED_VERSION:
        return "unsupported_version";
    case TW_WIRE_NO_MEMORY:
        return "no_memory";
    case TW_WIRE_BAD_VALUE:
        return "bad_value";
    case TW_WIRE_ID_TOO_LONG:
        return "id_too_long";
    }
    return "unknown";
}

extern "C" tw_wire_status tw_wire_encode(const tw_batch *b, uint8_t **out,
                                         size_t *outlen)
{
    *out = nullptr;
    *outlen = 0;
    try {
        return encode(b, out, outlen);
    } catch (...) {
        /* Only allocation throws in the builder and the STL containers. */
        return TW_WIRE_NO_MEMORY;
    }
}

extern "C" tw_wire_status tw_wire_decode(const uint8_t *buf, size_t len,
                                         tw_batch **out, char *err,
                                         size_t errlen)
{
    *out = nullptr;
    if (err != nullptr && errlen > 0)
        err[0] = '\0';
    try {
        return decode(buf, len, out, err, errlen);
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory while decoding a %zu-byte buffer",
                len);
        return TW_WIRE_NO_MEMORY;
    } catch (...) {
        /* Nothing else throws here; keep the C boundary intact anyway. */
        set_err(err, errlen, "unexpected C++ exception while decoding");
        return TW_WIRE_NO_MEMORY;
    }
}
