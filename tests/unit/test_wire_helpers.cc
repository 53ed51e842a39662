/*
 * test_wire_helpers.cc - test-only FlatBuffers builders (see
 * test_wire_helpers.h). Tables are assembled field by field with
 * StartTable/EndTable because the generated Create*() functions assert that
 * required fields are present, which is exactly what some cases omit.
 */
#include "test_wire_helpers.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "metrics_generated.h"

namespace fb = flatbuffers;
namespace tww = trainwatch::wire;

namespace
{

struct Knobs {
    bool no_job = false, no_node = false;
    bool no_series_type = false, no_series_dimension = false;
    bool no_event_name = false, no_event_phase = false;
    bool no_arg_key = false, no_arg_value = false;
    bool version_absent = false, append_field = false;
    uint16_t version = 1;
    int8_t source = int8_t(tww::SourceType::ModelTimeline);
    int8_t mode = int8_t(tww::Mode::Train);
    int8_t arg_kind = int8_t(tww::ArgKind::Number);
    int8_t marker_kind = int8_t(tww::MarkerKind::JobStart);
    bool has_args = true;
    uint32_t sample_series = 1;
    int event_refs = 1; /* how many times the events vector names the event */
    bool misalign_samples = false;
    bool python_profile = false;
};

fb::Offset<tww::Series> series(fb::FlatBufferBuilder &fbb, const Knobs &k,
                               const char *type, const char *name,
                               const char *dim)
{
    auto t = fbb.CreateString(type);
    auto n =
        name == nullptr ? fb::Offset<fb::String>() : fbb.CreateString(name);
    auto d = fbb.CreateString(dim);
    auto start = fbb.StartTable();
    if (!k.no_series_type)
        fbb.AddOffset(tww::Series::VT_TYPE, t);
    fbb.AddOffset(tww::Series::VT_NAME, n);
    if (!k.no_series_dimension)
        fbb.AddOffset(tww::Series::VT_DIMENSION, d);
    return fb::Offset<tww::Series>(fbb.EndTable(start));
}

fb::Offset<tww::FrameworkEvent> event(fb::FlatBufferBuilder &fbb,
                                      const Knobs &k)
{
    auto key = fbb.CreateString("step_num");
    auto value = fbb.CreateString("7");
    auto astart = fbb.StartTable();
    if (!k.no_arg_key)
        fbb.AddOffset(tww::Arg::VT_KEY, key);
    if (!k.no_arg_value)
        fbb.AddOffset(tww::Arg::VT_VALUE, value);
    fbb.AddElement<int8_t>(tww::Arg::VT_KIND, k.arg_kind, 0);
    auto arg = fb::Offset<tww::Arg>(fbb.EndTable(astart));
    std::vector<fb::Offset<tww::Arg>> args{arg};
    auto argv = fbb.CreateVector(args);

    auto name = fbb.CreateString("Step:ModeKeys.TRAIN");
    auto phase = fbb.CreateString("Step:ModeKeys.TRAIN");
    auto start = fbb.StartTable();
    if (!k.no_event_name)
        fbb.AddOffset(tww::FrameworkEvent::VT_NAME, name);
    if (!k.no_event_phase)
        fbb.AddOffset(tww::FrameworkEvent::VT_PHASE, phase);
    fbb.AddElement<int64_t>(tww::FrameworkEvent::VT_START_US, 1000, 0);
    fbb.AddElement<int64_t>(tww::FrameworkEvent::VT_END_US, 2000, 0);
    fbb.AddElement<int64_t>(tww::FrameworkEvent::VT_PID, 11, 0);
    fbb.AddElement<int64_t>(tww::FrameworkEvent::VT_TID, 12, 0);
    fbb.AddElement<int8_t>(tww::FrameworkEvent::VT_SOURCE, k.source, 0);
    fbb.AddElement<int8_t>(tww::FrameworkEvent::VT_MODE, k.mode, 0);
    fbb.AddOffset(tww::FrameworkEvent::VT_ARGS, argv);
    fbb.AddElement<uint8_t>(tww::FrameworkEvent::VT_HAS_ARGS, k.has_args, 0);
    return fb::Offset<tww::FrameworkEvent>(fbb.EndTable(start));
}

fb::Offset<tww::Marker> marker(fb::FlatBufferBuilder &fbb, const Knobs &k)
{
    auto start = fbb.StartTable();
    fbb.AddElement<int8_t>(tww::Marker::VT_KIND, k.marker_kind, 0);
    fbb.AddElement<int64_t>(tww::Marker::VT_TIME_US, 5000, 0);
    fbb.AddElement<uint32_t>(tww::Marker::VT_SAMPLING_INTERVAL_MS, 500, 0);
    return fb::Offset<tww::Marker>(fbb.EndTable(start));
}

void batch(fb::FlatBufferBuilder &fbb, const Knobs &k)
{
    std::vector<fb::Offset<tww::Series>> sv{
        series(fbb, k, "gpu", "gpu0", "GPUUtilization"),
        series(fbb, k, "memory", nullptr, "MemoryUsedPercent")};
    auto series_v = fbb.CreateVector(sv);
    std::vector<tww::Sample> samples{
        tww::Sample(1591748109.2321954, 51.5, 0, 0),
        tww::Sample(1591748109.2331020, 41.0, k.sample_series, 1)};
    fb::Offset<fb::Vector<const tww::Sample *>> samples_v;
    if (k.misalign_samples) {
        /* Raw bytes placed so the elements start at 4 mod 8 (the finished
         * buffer's size is a multiple of 8, so distance from the end
         * decides alignment from the start). */
        size_t bytes = samples.size() * sizeof(tww::Sample);
        if ((fbb.GetSize() + bytes) % 8 == 0)
            fbb.PushElement<uint32_t>(0);
        fbb.StartVector(bytes, 1);
        fbb.PushBytes(reinterpret_cast<const uint8_t *>(samples.data()), bytes);
        samples_v = fb::Offset<fb::Vector<const tww::Sample *>>(
            fbb.EndVector(samples.size()));
    } else {
        samples_v = fbb.CreateVectorOfStructs(samples);
    }
    auto ev = event(fbb, k);
    std::vector<fb::Offset<tww::FrameworkEvent>> evs(
        static_cast<size_t>(k.event_refs), ev);
    auto events_v = fbb.CreateVector(evs);
    std::vector<fb::Offset<tww::Marker>> mv{marker(fbb, k)};
    auto markers_v = fbb.CreateVector(mv);
    auto job = fbb.CreateString("job-h");
    auto node = fbb.CreateString("node-h");
    fb::Offset<fb::Vector<fb::Offset<tww::PythonProfile>>> profiles_v;
    if (k.python_profile) {
        auto caller = tww::CreateFunctionCallerDirect(fbb, "train", "t.py", 3,
                                                      1, 1, 0.5, 2.0);
        std::vector<fb::Offset<tww::FunctionCaller>> callers{caller};
        auto fn = tww::CreateFunctionStatsDirect(fbb, "forward", "m.py", 7, 2,
                                                 2, 0.25, 1.5, &callers);
        std::vector<fb::Offset<tww::FunctionStats>> fns{fn};
        auto prof = tww::CreatePythonProfileDirect(
            fbb, "cprofile", "total_time", tww::Mode::Train, 9, 9, "STEP_START",
            "FORWARD_PASS_END", 100, 200, 7, &fns, 0);
        std::vector<fb::Offset<tww::PythonProfile>> pv{prof};
        profiles_v = fbb.CreateVector(pv);
    }

    auto start = fbb.StartTable();
    if (!k.version_absent) {
        fbb.ForceDefaults(true);
        fbb.AddElement<uint16_t>(tww::Batch::VT_VERSION, k.version, 1);
        fbb.ForceDefaults(false);
    }
    if (!k.no_job)
        fbb.AddOffset(tww::Batch::VT_JOB, job);
    if (!k.no_node)
        fbb.AddOffset(tww::Batch::VT_NODE, node);
    fbb.AddElement<uint64_t>(tww::Batch::VT_SEQ, 9, 0);
    fbb.AddElement<int64_t>(tww::Batch::VT_FILE_TS_US, 1591748100000000, 0);
    fbb.AddOffset(tww::Batch::VT_SERIES, series_v);
    fbb.AddOffset(tww::Batch::VT_SAMPLES, samples_v);
    fbb.AddOffset(tww::Batch::VT_EVENTS, events_v);
    fbb.AddOffset(tww::Batch::VT_MARKERS, markers_v);
    if (k.python_profile)
        fbb.AddOffset(tww::Batch::VT_PYTHON_PROFILES, profiles_v);
    if (k.append_field) /* the slot after the last field this reader knows */
        fbb.AddElement<uint32_t>(tww::Batch::VT_TENSORS + 2, 0xC0FFEE, 0);
    fbb.Finish(fb::Offset<tww::Batch>(fbb.EndTable(start)),
               tww::BatchIdentifier());
}

/* Points the samples vector's length far past the end of the buffer. */
void break_samples(uint8_t *buf)
{
    auto samples = tww::GetBatch(buf)->samples();
    size_t at =
        static_cast<size_t>(reinterpret_cast<const uint8_t *>(samples) - buf);
    fb::WriteScalar<fb::uoffset_t>(buf + at, 0x00ffffffu);
}

} // namespace

extern "C" uint8_t *twt_build(twt_case c, size_t *len)
{
    Knobs k;
    switch (c) {
    case TWT_VALID:
        break;
    case TWT_NO_JOB:
        k.no_job = true;
        break;
    case TWT_NO_NODE:
        k.no_node = true;
        break;
    case TWT_NO_SERIES_TYPE:
        k.no_series_type = true;
        break;
    case TWT_NO_SERIES_DIMENSION:
        k.no_series_dimension = true;
        break;
    case TWT_NO_EVENT_NAME:
        k.no_event_name = true;
        break;
    case TWT_NO_EVENT_PHASE:
        k.no_event_phase = true;
        break;
    case TWT_NO_ARG_KEY:
        k.no_arg_key = true;
        break;
    case TWT_NO_ARG_VALUE:
        k.no_arg_value = true;
        break;
    case TWT_NO_JOB_BAD_SAMPLES:
        k.no_job = true;
        break;
    case TWT_SERIES_OUT_OF_RANGE:
        k.sample_series = 2;
        break;
    case TWT_VERSION_0:
        k.version = 0;
        break;
    case TWT_VERSION_ABSENT:
        k.version_absent = true;
        break;
    case TWT_VERSION_2_APPENDED:
        k.version = 2;
        k.append_field = true;
        break;
    case TWT_BAD_SOURCE:
        k.source = 5;
        break;
    case TWT_BAD_MODE:
        k.mode = -1;
        break;
    case TWT_BAD_ARG_KIND:
        k.arg_kind = 5;
        break;
    case TWT_BAD_MARKER_KIND:
        k.marker_kind = 3;
        break;
    case TWT_ARGS_WITHOUT_HAS_ARGS:
        k.has_args = false;
        break;
    case TWT_SHARED_TABLES:
        k.event_refs = 1000;
        break;
    case TWT_MISALIGNED_SAMPLES:
        k.misalign_samples = true;
        break;
    case TWT_PYTHON_PROFILE:
        k.python_profile = true;
        break;
    case TWT_CASE_COUNT:
        return nullptr;
    }
    try {
        fb::FlatBufferBuilder fbb;
        batch(fbb, k);
        auto p = static_cast<uint8_t *>(malloc(fbb.GetSize()));
        if (p == nullptr)
            return nullptr;
        memcpy(p, fbb.GetBufferPointer(), fbb.GetSize());
        if (c == TWT_NO_JOB_BAD_SAMPLES)
            break_samples(p);
        *len = fbb.GetSize();
        return p;
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

extern "C" size_t twt_samples_length_offset(const uint8_t *buf, size_t len)
{
    fb::Verifier v(buf, len);
    if (!tww::VerifyBatchBuffer(v))
        return 0;
    auto samples = tww::GetBatch(buf)->samples();
    if (samples == nullptr)
        return 0;
    return static_cast<size_t>(reinterpret_cast<const uint8_t *>(samples) -
                               buf);
}

extern "C" int twt_stored_version(const uint8_t *buf, size_t len,
                                  unsigned *version)
{
    fb::Verifier v(buf, len);
    if (!tww::VerifyBatchBuffer(v))
        return -1;
    const tww::Batch *root = tww::GetBatch(buf);
    *version = root->version();
    /* Batch derives privately from Table; the layout is the same. */
    auto table = reinterpret_cast<const fb::Table *>(root);
    return table->CheckField(tww::Batch::VT_VERSION) ? 1 : 0;
}
