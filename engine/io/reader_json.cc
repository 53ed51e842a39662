// reader_json.cc - simdjson (On-Demand API) behind the C API of
// reader_json.h, after the plain fast paths of reader_plain.cc. Nothing
// here allocates per call except the args vector, which is reused;
// exceptions never cross the C boundary.
#include "reader_json.h"
#include "reader_plain.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#include <simdjson.h>
#pragma GCC diagnostic pop

namespace od = simdjson::ondemand;

static_assert(TW_JSON_PADDING == simdjson::SIMDJSON_PADDING,
              "TW_JSON_PADDING must match simdjson's padding");

struct tw_json_parser {
    od::parser parser;
    bool general_only = false; // tests: simdjson alone (no reader_plain)
    uint64_t plain_lines = 0;  // system lines reader_plain read
    uint64_t plain_events = 0; // array elements reader_plain read
    tw_plain::ts_cache ts;     // the system lines' last Timestamp
    std::vector<tw_json_arg> args;
    std::string scratch; // NUL-terminated copy of a number for strtod
};

namespace
{

using tw_plain::id_of_text;
using tw_plain::plain_cursor;
using tw_plain::plain_number;

tw_json_str slice(std::string_view s)
{
    tw_json_str out;
    out.ptr = s.data();
    out.len = s.size();
    return out;
}

std::string_view trim_right(std::string_view s)
{
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' ||
                          s.back() == '\n' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

// Consumes the value when it is null.
bool is_null(od::value &v)
{
    bool b = false;
    return v.is_null().get(b) == simdjson::SUCCESS && b;
}

// True when nothing but whitespace follows the consumed root value.
bool at_end(od::document &doc)
{
    const char *loc = nullptr;
    return doc.current_location().get(loc) != simdjson::SUCCESS;
}

bool written_integral(std::string_view tok)
{
    return tok.find_first_of(".eE") == std::string_view::npos;
}

// Reads a JSON number into *out. false: not a number (or unparsable).
bool read_number(tw_json_parser *p, od::value &v, tw_json_num *out)
{
    *out = tw_json_num{};
    // The token itself first: simdjson 3.0.1's get_number() gives 0 for a
    // float of 19 or more significant digits (98845033.991821717514).
    std::string_view tok = trim_right(v.raw_json_token());
    plain_cursor c{tok.data(), tok.data() + tok.size()};
    if (plain_number(c, out) && c.p == c.end)
        return true;
    *out = tw_json_num{};
    od::number n;
    if (v.get_number().get(n) == simdjson::SUCCESS) {
        out->present = 1;
        switch (n.get_number_type()) {
        case od::number_type::signed_integer:
            out->integral = 1;
            out->is_i64 = 1;
            out->i = n.get_int64();
            out->d = static_cast<double>(out->i);
            return true;
        case od::number_type::unsigned_integer:
            out->integral = 1;
            out->d = static_cast<double>(n.get_uint64());
            return true;
        case od::number_type::floating_point_number:
            // out of from_chars' range (underflow): strtod's ±0, as Python
            p->scratch.assign(tok.data(), tok.size());
            out->d = std::strtod(p->scratch.c_str(), nullptr);
            return true;
        }
        return false;
    }
    // Integers beyond 64 bits: the double of the text, as Python's float().
    if (tok.empty() || !(tok[0] == '-' || (tok[0] >= '0' && tok[0] <= '9')))
        return false;
    p->scratch.assign(tok.data(), tok.size());
    char *end = nullptr;
    out->d = std::strtod(p->scratch.c_str(), &end);
    if (end == nullptr || *end != '\0')
        return false;
    out->present = 1;
    out->integral = written_integral(tok) ? 1 : 0;
    return true;
}

// An integer id (pid/tid): a JSON integer, or a string holding one.
bool read_id(od::value &v, int64_t *out)
{
    od::json_type t;
    if (v.type().get(t) != simdjson::SUCCESS)
        return false;
    if (t == od::json_type::number) {
        od::number n;
        if (v.get_number().get(n) != simdjson::SUCCESS ||
            n.get_number_type() != od::number_type::signed_integer)
            return false;
        *out = n.get_int64();
        return true;
    }
    if (t == od::json_type::string) {
        std::string_view s;
        return v.get_string().get(s) == simdjson::SUCCESS && id_of_text(s, out);
    }
    return false;
}

// pid: an integer id (has_pid), or any other string (pid_str: the torch
// profiler's "CPU functions").
void read_pid(od::value &v, tw_json_event *out)
{
    od::json_type t;
    std::string_view s;
    if (v.type().get(t) == simdjson::SUCCESS && t == od::json_type::string) {
        if (v.get_string().get(s) != simdjson::SUCCESS)
            return;
        out->pid_str = slice(s);
        out->has_pid = id_of_text(s, &out->pid) ? 1 : 0;
        return;
    }
    out->has_pid = read_id(v, &out->pid) ? 1 : 0;
}

// The text of any value, for args: decoded string, number text, JSON text.
bool read_arg(od::value &v, tw_json_arg *arg)
{
    od::json_type t;
    if (v.type().get(t) != simdjson::SUCCESS)
        return false;
    std::string_view s;
    switch (t) {
    case od::json_type::string:
        if (v.get_string().get(s) != simdjson::SUCCESS)
            return false;
        arg->kind = TW_ARG_STRING;
        break;
    case od::json_type::number:
        s = trim_right(v.raw_json_token());
        arg->kind = TW_ARG_NUMBER;
        break;
    case od::json_type::boolean: {
        bool b;
        if (v.get_bool().get(b) != simdjson::SUCCESS)
            return false;
        s = b ? "true" : "false";
        arg->kind = TW_ARG_BOOL;
        break;
    }
    case od::json_type::null:
        if (!is_null(v))
            return false;
        s = "null";
        arg->kind = TW_ARG_NULL;
        break;
    case od::json_type::object: {
        od::object o;
        if (v.get_object().get(o) != simdjson::SUCCESS ||
            o.raw_json().get(s) != simdjson::SUCCESS)
            return false;
        arg->kind = TW_ARG_JSON;
        break;
    }
    case od::json_type::array: {
        od::array a;
        if (v.get_array().get(a) != simdjson::SUCCESS ||
            a.raw_json().get(s) != simdjson::SUCCESS)
            return false;
        arg->kind = TW_ARG_JSON;
        break;
    }
    default:
        return false;
    }
    arg->value = slice(s);
    return true;
}

// A document of one object: false with *reason (not_object when it is
// JSON but not an object).
bool open_object(tw_json_parser *p, const char *buf, size_t len, size_t cap,
                 const char *not_object, od::document *doc, od::object *obj,
                 const char **reason)
{
    if (p->parser.iterate(buf, len, cap).get(*doc) != simdjson::SUCCESS) {
        *reason = "not valid JSON";
        return false;
    }
    if (doc->get_object().get(*obj) != simdjson::SUCCESS) {
        *reason = not_object;
        return false;
    }
    return true;
}

int parse_sysline(tw_json_parser *p, const char *buf, size_t len, size_t cap,
                  tw_json_sysline *out, const char **reason)
{
    *out = tw_json_sysline{};
    if (!p->general_only && tw_plain::sysline(p->ts, buf, len, out)) {
        p->plain_lines++;
        return TW_OK;
    }
    *out = tw_json_sysline{};
    bool has_type = false, has_dim = false, has_node = false, has_ts = false;
    od::document doc;
    od::object obj;
    if (!open_object(p, buf, len, cap, "not a JSON object", &doc, &obj, reason))
        return TW_ERR;
    for (auto fres : obj) {
        od::field f;
        if (std::move(fres).get(f) != simdjson::SUCCESS) {
            *reason = "not valid JSON";
            return TW_ERR;
        }
        // Keys are compared as written (no agent escapes these names).
        od::raw_json_string key = f.key();
        od::value v = f.value();
        std::string_view s;
        if (key == "Type") {
            if (v.get_string().get(s) != simdjson::SUCCESS) {
                *reason = "field \"Type\" is not a string";
                return TW_ERR;
            }
            out->type = slice(s);
            has_type = true;
        } else if (key == "Name") {
            if (is_null(v)) {
                out->name = tw_json_str{nullptr, 0};
            } else if (v.get_string().get(s) == simdjson::SUCCESS) {
                out->name = slice(s);
            } else {
                *reason = "field \"Name\" is not a string or null";
                return TW_ERR;
            }
        } else if (key == "Dimension") {
            if (v.get_string().get(s) != simdjson::SUCCESS) {
                *reason = "field \"Dimension\" is not a string";
                return TW_ERR;
            }
            out->dimension = slice(s);
            has_dim = true;
        } else if (key == "NodeId") {
            if (v.get_string().get(s) != simdjson::SUCCESS) {
                *reason = "field \"NodeId\" is not a string";
                return TW_ERR;
            }
            out->node = slice(s);
            has_node = true;
        } else if (key == "Value") {
            if (!read_number(p, v, &out->value)) {
                *reason = "field \"Value\" is not a number";
                return TW_ERR;
            }
        } else if (key == "Timestamp") {
            // not get_double(): simdjson 3.0.1 misreads long mantissas
            // (0.72645363972107098029 as 0.173...)
            tw_json_num ts;
            if (!read_number(p, v, &ts)) {
                *reason = "field \"Timestamp\" is not a number";
                return TW_ERR;
            }
            out->timestamp = ts.d;
            has_ts = true;
        }
    }
    if (!at_end(doc)) {
        *reason = "not valid JSON (content after the object)";
        return TW_ERR;
    }
    if (!has_type)
        *reason = "missing field \"Type\"";
    else if (!has_dim)
        *reason = "missing field \"Dimension\"";
    else if (!out->value.present)
        *reason = "missing field \"Value\"";
    else if (!has_node)
        *reason = "missing field \"NodeId\"";
    else if (!has_ts)
        *reason = "missing field \"Timestamp\"";
    else
        return TW_OK;
    return TW_ERR;
}

int parse_args(tw_json_parser *p, od::value &v, tw_json_event *out,
               const char **reason)
{
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) {
        *reason = "\"args\" is not an object";
        return TW_ERR;
    }
    p->args.clear();
    for (auto fres : obj) {
        od::field f;
        std::string_view key;
        if (std::move(fres).get(f) != simdjson::SUCCESS ||
            f.unescaped_key().get(key) != simdjson::SUCCESS) {
            *reason = "not valid JSON";
            return TW_ERR;
        }
        od::value av = f.value();
        if (key == "start_time_since_epoch_in_micros") {
            // Peek the number first; the arg text is read after.
            tw_json_num n;
            od::json_type t;
            if (av.type().get(t) == simdjson::SUCCESS &&
                t == od::json_type::number) {
                std::string_view tok = trim_right(av.raw_json_token());
                {
                    p->scratch.assign(tok.data(), tok.size());
                    n = tw_json_num{};
                    n.present = 1;
                    n.integral = written_integral(tok) ? 1 : 0;
                    char *end = nullptr;
                    if (n.integral) {
                        errno = 0;
                        long long x =
                            std::strtoll(p->scratch.c_str(), &end, 10);
                        n.is_i64 = errno == 0 && *end == '\0';
                        n.i = static_cast<int64_t>(x);
                    }
                    n.d = std::strtod(p->scratch.c_str(), &end);
                    out->has_start_time = 1;
                    out->start_time = n;
                }
            }
        }
        tw_json_arg arg{};
        arg.key = slice(key);
        if (!read_arg(av, &arg)) {
            *reason = "not valid JSON inside \"args\"";
            return TW_ERR;
        }
        if (key == "name") {
            out->args_has_name = 1;
            out->args_name = arg.value;
        }
        p->args.push_back(arg);
    }
    out->has_args = 1;
    return TW_OK;
}

// The members of one event object (parse_event and the array walk).
int parse_event_members(tw_json_parser *p, od::object &obj, tw_json_event *out,
                        const char **reason)
{
    bool args_seen = false;
    for (auto fres : obj) {
        od::field f;
        if (std::move(fres).get(f) != simdjson::SUCCESS) {
            *reason = "not valid JSON";
            return TW_ERR;
        }
        // Keys are compared as written (trace writers never escape these).
        od::raw_json_string key = f.key();
        od::value v = f.value();
        std::string_view s;
        if (key == "ph") {
            out->ph = v.get_string().get(s) == simdjson::SUCCESS
                          ? slice(s)
                          : tw_json_str{nullptr, 0};
        } else if (key == "name") {
            tw_json_arg a{};
            out->name = read_arg(v, &a) && a.kind != TW_ARG_NULL
                            ? a.value
                            : tw_json_str{nullptr, 0};
        } else if (key == "pid") {
            read_pid(v, out);
        } else if (key == "cat") {
            out->cat = v.get_string().get(s) == simdjson::SUCCESS
                           ? slice(s)
                           : tw_json_str{nullptr, 0};
        } else if (key == "tid") {
            out->has_tid = read_id(v, &out->tid) ? 1 : 0;
        } else if (key == "ts") {
            if (!read_number(p, v, &out->ts))
                out->ts = tw_json_num{};
        } else if (key == "dur") {
            if (!read_number(p, v, &out->dur))
                out->dur = tw_json_num{};
        } else if (key == "args") {
            // A repeated key: the last one wins, as in Python's json.
            out->has_args = 0;
            out->args_has_name = 0;
            out->has_start_time = 0;
            if (is_null(v))
                continue;
            int rc = parse_args(p, v, out, reason);
            if (rc != TW_OK)
                return rc;
            args_seen = true;
        }
    }
    if (args_seen && out->has_args) {
        out->args = p->args.data();
        out->nargs = p->args.size();
    }
    return TW_OK;
}

int parse_event(tw_json_parser *p, const char *buf, size_t len, size_t cap,
                tw_json_event *out, const char **reason)
{
    *out = tw_json_event{};
    od::document doc;
    od::object obj;
    if (!open_object(p, buf, len, cap, "event is not a JSON object", &doc, &obj,
                     reason))
        return TW_ERR;
    int rc = parse_event_members(p, obj, out, reason);
    if (rc != TW_OK)
        return rc;
    if (!at_end(doc)) {
        *reason = "not valid JSON (content after the event)";
        return TW_ERR;
    }
    return TW_OK;
}

// The offset of the document's next token from buf, or false.
bool next_token_at(od::document &doc, const char *buf, size_t *at)
{
    const char *loc = nullptr;
    if (doc.current_location().get(loc) != simdjson::SUCCESS)
        return false;
    *at = static_cast<size_t>(loc - buf);
    return true;
}

int parse_event_array(tw_json_parser *p, const char *buf, size_t len,
                      size_t cap, tw_json_event_fn fn, void *ud,
                      tw_json_array_stop *stop)
{
    stop->state = TW_JSON_AT_ELEMENT;
    stop->at = 1; // after the '['
    size_t resume = 0;
    if (!p->general_only) {
        bool done = false;
        int rc = tw_plain::event_array(p->args, buf, len, fn, ud, stop, &resume,
                                       &done, &p->plain_events);
        if (rc != TW_OK || done)
            return rc;
    }
    od::document doc;
    od::array arr;
    if (p->parser.iterate(buf, len, cap).get(doc) != simdjson::SUCCESS ||
        doc.get_array().get(arr) != simdjson::SUCCESS)
        return TW_OK; // no more taken: the caller scans the rest
    for (auto eres : arr) {
        od::value v;
        const char *loc = nullptr;
        od::object obj;
        if (std::move(eres).get(v) != simdjson::SUCCESS ||
            v.current_location().get(loc) != simdjson::SUCCESS)
            return TW_OK; // the caller's scan reports it
        if (static_cast<size_t>(loc - buf) < resume)
            continue; // the plain walk took it
        if (v.get_object().get(obj) != simdjson::SUCCESS)
            return TW_OK; // likewise
        tw_json_event ev{};
        const char *reason = nullptr;
        if (parse_event_members(p, obj, &ev, &reason) != TW_OK)
            return TW_OK; // likewise, from the element on
        size_t next = 0;
        if (!next_token_at(doc, buf, &next) || next >= len ||
            (buf[next] != ',' && buf[next] != ']'))
            return TW_OK; // the grammar breaks after it: element by element
        int rc = fn(ud, static_cast<size_t>(loc - buf), &ev);
        if (rc != TW_OK)
            return rc;
        stop->state = TW_JSON_AFTER_ELEMENT;
        stop->at = next;
    }
    // Every element taken; the caller's scan reads the ']' at stop->at.
    return TW_OK;
}

} // namespace

extern "C" tw_json_parser *tw_json_parser_new(void)
{
    try {
        return new tw_json_parser();
    } catch (...) {
        return nullptr;
    }
}

extern "C" void tw_json_parser_free(tw_json_parser *p)
{
    delete p;
}

extern "C" void tw_json_parser_set_general_only(tw_json_parser *p, int on)
{
    p->general_only = on != 0;
}

extern "C" uint64_t tw_json_parser_plain_lines(const tw_json_parser *p)
{
    return p->plain_lines;
}

extern "C" uint64_t tw_json_parser_plain_events(const tw_json_parser *p)
{
    return p->plain_events;
}

extern "C" int tw_json_parse_sysline(tw_json_parser *p, const char *buf,
                                     size_t len, size_t cap,
                                     tw_json_sysline *out, const char **reason)
{
    try {
        return parse_sysline(p, buf, len, cap, out, reason);
    } catch (const std::bad_alloc &) {
        *reason = "out of memory";
        return TW_JSON_NOMEM;
    } catch (...) {
        *reason = "not valid JSON";
        return TW_ERR;
    }
}

extern "C" int tw_json_parse_event(tw_json_parser *p, const char *buf,
                                   size_t len, size_t cap, tw_json_event *out,
                                   const char **reason)
{
    try {
        return parse_event(p, buf, len, cap, out, reason);
    } catch (const std::bad_alloc &) {
        *reason = "out of memory";
        return TW_JSON_NOMEM;
    } catch (...) {
        *reason = "not valid JSON";
        return TW_ERR;
    }
}

extern "C" int tw_json_parse_event_array(tw_json_parser *p, const char *buf,
                                         size_t len, size_t cap,
                                         tw_json_event_fn fn, void *ud,
                                         tw_json_array_stop *stop)
{
    try {
        return parse_event_array(p, buf, len, cap, fn, ud, stop);
    } catch (const std::bad_alloc &) {
        return TW_JSON_NOMEM;
    } catch (...) {
        return TW_OK; // stop says where the caller's scan goes on
    }
}

extern "C" int tw_json_object_int(tw_json_parser *p, const char *buf,
                                  size_t len, size_t cap, const char *key,
                                  int64_t *out)
{
    try {
        od::document doc;
        od::object obj;
        if (p->parser.iterate(buf, len, cap).get(doc) != simdjson::SUCCESS ||
            doc.get_object().get(obj) != simdjson::SUCCESS)
            return 0;
        for (auto fres : obj) {
            od::field f;
            if (std::move(fres).get(f) != simdjson::SUCCESS)
                return 0;
            if (!(f.key() == std::string_view(key)))
                continue;
            od::value v = f.value();
            int64_t x = 0;
            if (v.get_int64().get(x) != simdjson::SUCCESS)
                return 0;
            *out = x;
            return 1;
        }
        return 0;
    } catch (...) {
        return 0;
    }
}
