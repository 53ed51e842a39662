/*
 * wire_pyprofile.cc - engine/io/wire_pyprofile.h over the generated
 * FlatBuffers reader (metrics_generated.h).
 *
 * A buffer passes the same gate as in wire_codec.cc (identifier, size,
 * VerifyBatchBuffer with the same table bound); when it is refused,
 * tw_wire_decode is asked for its diagnosis so that both decoders name a
 * bad message the same way. No C++ exception leaves this file.
 */
#include "wire_pyprofile.h"
#include "wire_string.h"

#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <unordered_map>

#include "metrics_generated.h"

namespace fb = flatbuffers;
namespace tww = trainwatch::wire;

namespace
{

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

/* FLATBUFFERS_MIN_BUFFER_SIZE names the runtime's types unqualified. */
constexpr size_t kMinBufferSize = [] {
    using namespace flatbuffers;
    return size_t(FLATBUFFERS_MIN_BUFFER_SIZE);
}();

const char *mode_name(tww::Mode m)
{
    switch (m) {
    case tww::Mode::None:
        return "";
    case tww::Mode::Train:
        return "TRAIN";
    case tww::Mode::Eval:
        return "EVAL";
    case tww::Mode::Predict:
        return "PREDICT";
    case tww::Mode::Global:
        return "GLOBAL";
    }
    return nullptr;
}

/* The gate of wire_codec.cc; on refusal its diagnosis. */
tw_wire_status refused(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    tw_batch *b = nullptr;
    tw_wire_status st = tw_wire_decode(buf, len, &b, err, errlen);
    if (st == TW_WIRE_OK) { /* both gates are the same: not expected */
        tw_batch_free(b);
        set_err(err, errlen,
                "verification failed: the %zu-byte buffer "
                "was refused",
                len);
        return TW_WIRE_VERIFY_FAILED;
    }
    return st;
}

class Copier
{
  public:
    Copier(tw_wire_pyprofiles *out, char *err, size_t errlen)
        : out_(out), err_(err), errlen_(errlen)
    {
    }

    tw_wire_status run(const tww::Batch *root);

  private:
    tw_wire_status bad(const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    tw_wire_status no_memory(const char *what)
    {
        set_err(err_, errlen_, "out of memory while copying %s", what);
        return TW_WIRE_NO_MEMORY;
    }
    tw_wire_status profile(fb::uoffset_t i, const tww::PythonProfile *p,
                           tw_wire_pyprofile *o);
    tw_wire_status functions(fb::uoffset_t i, const tww::PythonProfile *p,
                             tw_pstats **out);

    tw_wire_pyprofiles *out_;
    char *err_;
    size_t errlen_;
};

tw_wire_status Copier::bad(const char *fmt, ...)
{
    if (err_ != nullptr && errlen_ > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err_, errlen_, fmt, ap);
        va_end(ap);
    }
    return TW_WIRE_BAD_VALUE;
}

char *dup(const fb::String *s)
{
    if (s == nullptr)
        return strdup("");
    return strndup(s->c_str(), s->size());
}

tw_wire_status Copier::run(const tww::Batch *root)
{
    if (root->job()->size() > TW_WIRE_ID_MAX ||
        root->node()->size() > TW_WIRE_ID_MAX) {
        set_err(err_, errlen_, "job or node id longer than %d bytes",
                TW_WIRE_ID_MAX);
        return TW_WIRE_ID_TOO_LONG;
    }
    out_->job = dup(root->job());
    out_->node = dup(root->node());
    if (out_->job == nullptr || out_->node == nullptr)
        return no_memory("the job and node ids");
    auto vec = root->python_profiles();
    if (vec == nullptr || vec->size() == 0)
        return TW_WIRE_OK;
    out_->items = static_cast<tw_wire_pyprofile *>(
        calloc(vec->size(), sizeof(tw_wire_pyprofile)));
    if (out_->items == nullptr)
        return no_memory("the Python profiles");
    for (fb::uoffset_t i = 0; i < vec->size(); i++) {
        /* counted first: tw_wire_pyprofiles_free frees what was copied */
        out_->n = i + 1;
        tw_wire_status st = profile(i, vec->Get(i), &out_->items[i]);
        if (st != TW_WIRE_OK)
            return st;
    }
    return TW_WIRE_OK;
}

tw_wire_status Copier::profile(fb::uoffset_t i, const tww::PythonProfile *p,
                               tw_wire_pyprofile *o)
{
    o->mode = mode_name(p->mode());
    if (o->mode == nullptr)
        return bad("python_profiles[%" PRIu32 "].mode is %d, not a Mode "
                   "this reader knows",
                   i, static_cast<int>(p->mode()));
    if (p->start_phase()->size() == 0 || p->end_phase()->size() == 0)
        return bad("python_profiles[%" PRIu32 "]: start_phase or end_phase "
                   "is empty",
                   i);
    if (tw_wire_has_nul(p->start_phase()) || tw_wire_has_nul(p->end_phase()) ||
        tw_wire_has_nul(p->profiler()) || tw_wire_has_nul(p->timer()))
        return bad("python_profiles[%" PRIu32 "]: a phase, profiler or "
                   "timer name holds a NUL byte",
                   i);
    if (p->start_step() < 0 || p->end_step() < 0)
        return bad("python_profiles[%" PRIu32 "]: start_step %" PRId64
                   " and end_step %" PRId64 " must not be negative",
                   i, p->start_step(), p->end_step());
    if (p->start_us() <= 0 || p->end_us() < p->start_us())
        return bad("python_profiles[%" PRIu32 "]: start_us %" PRId64
                   " and end_us %" PRId64 " are not an interval (us since "
                   "the epoch, start <= end)",
                   i, p->start_us(), p->end_us());
    o->profiler = dup(p->profiler());
    o->timer = dup(p->timer());
    o->start_phase = dup(p->start_phase());
    o->end_phase = dup(p->end_phase());
    if (o->profiler == nullptr || o->timer == nullptr ||
        o->start_phase == nullptr || o->end_phase == nullptr)
        return no_memory("a Python profile's names");
    o->start_step = p->start_step();
    o->end_step = p->end_step();
    o->start_us = p->start_us();
    o->end_us = p->end_us();
    o->pid = p->pid();
    o->functions_cut = p->functions_cut();
    return functions(i, p, &o->stats);
}

/* The functions as a tw_pstats: one string pool holding each distinct
 * wire string once (writers share equal strings), so the copy stays
 * proportional to the buffer. */
tw_wire_status Copier::functions(fb::uoffset_t i, const tww::PythonProfile *p,
                                 tw_pstats **out)
{
    auto s = static_cast<tw_pstats *>(calloc(1, sizeof(tw_pstats)));
    if (s == nullptr)
        return no_memory("a Python profile");
    *out = s;
    auto vec = p->functions();
    size_t n = vec == nullptr ? 0 : vec->size();
    s->funcs = static_cast<tw_pstats_func *>(
        calloc(n == 0 ? 1 : n, sizeof(tw_pstats_func)));
    if (s->funcs == nullptr)
        return no_memory("a Python profile's functions");
    std::unordered_map<const fb::String *, size_t> at;
    size_t pool = 1; /* offset 0: "" for an absent file */
    auto place = [&](const fb::String *str) {
        if (str != nullptr && at.emplace(str, pool).second)
            pool += str->size() + 1;
    };
    for (size_t k = 0; k < n; k++) {
        const tww::FunctionStats *f = vec->Get(static_cast<fb::uoffset_t>(k));
        const char *name = f->function()->c_str();
        if (f->function()->size() == 0)
            return bad("python_profiles[%" PRIu32 "].functions[%zu] has an "
                       "empty name",
                       i, k);
        if (tw_wire_has_nul(f->function()) || tw_wire_has_nul(f->file()))
            return bad("python_profiles[%" PRIu32 "].functions[%zu] '%.80s': "
                       "its name or file holds a NUL byte",
                       i, k, name);
        if (f->total_calls() > INT64_MAX ||
            f->primitive_calls() > f->total_calls())
            return bad("python_profiles[%" PRIu32 "].functions[%zu] '%.80s': "
                       "%" PRIu64 " primitive calls of %" PRIu64 " in all",
                       i, k, name, f->primitive_calls(), f->total_calls());
        if (!std::isfinite(f->total_time()) ||
            !std::isfinite(f->cumulative_time()))
            return bad("python_profiles[%" PRIu32 "].functions[%zu] '%.80s': "
                       "total_time %g or cumulative_time %g is not a time",
                       i, k, name, f->total_time(), f->cumulative_time());
        place(f->function());
        place(f->file());
    }
    s->strings = static_cast<char *>(malloc(pool));
    if (s->strings == nullptr)
        return no_memory("a Python profile's names");
    s->strings[0] = '\0';
    for (const auto &e : at)
        memcpy(s->strings + e.second, e.first->c_str(), e.first->size() + 1);
    for (size_t k = 0; k < n; k++) {
        const tww::FunctionStats *f = vec->Get(static_cast<fb::uoffset_t>(k));
        tw_pstats_func *o = &s->funcs[k];
        o->function = s->strings + at[f->function()];
        o->file =
            f->file() == nullptr ? s->strings : s->strings + at[f->file()];
        o->line = f->line();
        o->cc = static_cast<int64_t>(f->primitive_calls());
        o->nc = static_cast<int64_t>(f->total_calls());
        o->tt = f->total_time();
        o->ct = f->cumulative_time();
    }
    s->nfuncs = n;
    return TW_WIRE_OK;
}

/* Verifier bound of wire_codec.cc: at most one table per 8 bytes. */
fb::Verifier::Options verifier_options(size_t len)
{
    fb::Verifier::Options o;
    size_t tables = len / 8 < 1 ? 1 : len / 8;
    o.max_tables = static_cast<fb::uoffset_t>(tables);
    return o;
}

tw_wire_status decode(const uint8_t *buf, size_t len, tw_wire_pyprofiles **out,
                      char *err, size_t errlen)
{
    if (buf == nullptr || len < kMinBufferSize ||
        !tww::BatchBufferHasIdentifier(buf) ||
        len >= FLATBUFFERS_MAX_BUFFER_SIZE)
        return refused(buf, len, err, errlen);
    const uint8_t *orig = buf;
    /* accessors read scalars in place: an aligned copy when needed */
    std::unique_ptr<uint64_t[]> aligned;
    if (reinterpret_cast<uintptr_t>(buf) % 8 != 0) {
        aligned.reset(new uint64_t[(len + 7) / 8]);
        memcpy(aligned.get(), buf, len);
        buf = reinterpret_cast<const uint8_t *>(aligned.get());
    }
    fb::Verifier verifier(buf, len, verifier_options(len));
    if (!tww::VerifyBatchBuffer(verifier))
        return refused(orig, len, err, errlen);
    const tww::Batch *root = tww::GetBatch(buf);
    if (root->version() == 0)
        return refused(orig, len, err, errlen);
    auto p = static_cast<tw_wire_pyprofiles *>(
        calloc(1, sizeof(tw_wire_pyprofiles)));
    if (p == nullptr) {
        set_err(err, errlen, "out of memory");
        return TW_WIRE_NO_MEMORY;
    }
    tw_wire_status st;
    try {
        st = Copier(p, err, errlen).run(root);
    } catch (...) {
        tw_wire_pyprofiles_free(p);
        throw;
    }
    if (st != TW_WIRE_OK) {
        tw_wire_pyprofiles_free(p);
        return st;
    }
    *out = p;
    return TW_WIRE_OK;
}

} // namespace

extern "C" tw_wire_status tw_wire_decode_pyprofiles(const uint8_t *buf,
                                                    size_t len,
                                                    tw_wire_pyprofiles **out,
                                                    char *err, size_t errlen)
{
    *out = nullptr;
    try {
        return decode(buf, len, out, err, errlen);
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory decoding Python profiles");
        return TW_WIRE_NO_MEMORY;
    } catch (...) {
        set_err(err, errlen, "unexpected failure decoding Python profiles");
        return TW_WIRE_VERIFY_FAILED;
    }
}

extern "C" void tw_wire_pyprofiles_free(tw_wire_pyprofiles *p)
{
    if (p == nullptr)
        return;
    for (size_t i = 0; i < p->n; i++) {
        tw_wire_pyprofile *o = &p->items[i];
        free(o->profiler);
        free(o->timer);
        free(o->start_phase);
        free(o->end_phase);
        tw_pstats_free(o->stats);
    }
    free(p->items);
    free(p->job);
    free(p->node);
    free(p);
}
