// reader_plain.cc - the plain fast paths of the JSON readers
// (reader_plain.h): text of plain strings, numbers and literals read
// without simdjson, byte for byte as reader_json.cc's simdjson paths read
// it; anything else is refused, and those paths decide.
#include "reader_plain.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace tw_plain
{

namespace
{

// (These walk a local pointer: bytes read through a char pointer may
// alias the cursor, so c.p itself would be stored per byte.)
// JSON whitespace.
void plain_ws(plain_cursor &c)
{
    const char *q = c.p;
    while (q < c.end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r'))
        q++;
    c.p = q;
}

// `"KEY"` then ':' (whitespace around either).
bool plain_key(plain_cursor &c, std::string_view key)
{
    plain_ws(c);
    if (static_cast<size_t>(c.end - c.p) < key.size() + 2 || c.p[0] != '"' ||
        std::memcmp(c.p + 1, key.data(), key.size()) != 0 ||
        c.p[key.size() + 1] != '"')
        return false;
    c.p += key.size() + 2;
    plain_ws(c);
    if (c.p == c.end || *c.p != ':')
        return false;
    c.p++;
    plain_ws(c);
    return true;
}

// ',' (or '}' when last) after a value.
bool plain_sep(plain_cursor &c, char sep)
{
    plain_ws(c);
    if (c.p == c.end || *c.p != sep)
        return false;
    c.p++;
    return true;
}

// A string of printable ASCII without escapes. Eight bytes at a time: the
// exact has-zero-byte test (x ^ '"') finds the closing quote (its lowest
// set bit is exact), the has-less-than and high-bit tests find a control
// or non-ASCII byte, has-zero-byte (x ^ '\\') a backslash; bytes from the
// quote on are replaced by spaces first. Reads up to 7 bytes past c.end:
// the text's padding (reader_plain.h).
bool plain_string(plain_cursor &c, tw_json_str *out)
{
    const char *q = c.p, *end = c.end;
    if (q == end || *q != '"')
        return false;
    q++;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = 0x0101010101010101ull, high = ones * 0x80;
    const uint64_t spaces = ones * ' ';
    for (const char *s = q; s < end; s += 8) {
        uint64_t x;
        std::memcpy(&x, s, 8);
        uint64_t qt = x ^ (ones * '"');
        uint64_t quote = (qt - ones) & ~qt & high;
        uint64_t keep = ~0ull; // the bytes before the quote
        size_t j = 8;
        if (quote != 0) {
            j = static_cast<size_t>(__builtin_ctzll(quote)) / 8;
            keep = j == 0 ? 0 : ~0ull >> (64 - 8 * j);
        }
        uint64_t y = (x & keep) | (spaces & ~keep);
        uint64_t bs = y ^ (ones * '\\');
        if (((((y - ones * 0x20) & ~y) | y | ((bs - ones) & ~bs)) & high) != 0)
            return false;
        if (quote != 0) {
            const char *close = s + j;
            if (close >= end)
                return false;
            out->ptr = q;
            out->len = static_cast<size_t>(close - q);
            c.p = close + 1;
            return true;
        }
    }
    return false;
#else
    for (const char *s = q; s < end; s++) {
        unsigned char ch = static_cast<unsigned char>(*s);
        if (ch == '"') {
            out->ptr = q;
            out->len = static_cast<size_t>(s - q);
            c.p = s + 1;
            return true;
        }
        if (ch < 0x20 || ch >= 0x80 || ch == '\\')
            return false;
    }
    return false;
#endif
}

bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

} // namespace

bool plain_number(plain_cursor &c, tw_json_num *out)
{
    const char *q = c.p, *end = c.end, *start = c.p;
    bool neg = q < end && *q == '-';
    if (neg)
        q++;
    const char *digits = q;
    if (q == end || !is_digit(*q))
        return false;
    uint64_t v = 0; // wraps past 19 digits; those are refused below
    if (*q == '0')
        q++;
    else
        for (; q < end && is_digit(*q); q++)
            v = v * 10 + static_cast<uint64_t>(*q - '0');
    size_t ndigits = static_cast<size_t>(q - digits);
    bool integral = true;
    if (q < end && *q == '.') {
        integral = false;
        q++;
        if (q == end || !is_digit(*q))
            return false;
        while (q < end && is_digit(*q))
            q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        integral = false;
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (q == end || !is_digit(*q))
            return false;
        while (q < end && is_digit(*q))
            q++;
    }
    *out = tw_json_num{};
    if (integral) {
        if (ndigits > 18 || (neg && ndigits == 1 && digits[0] == '0'))
            return false;
        out->i = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
        out->d = static_cast<double>(out->i);
        out->integral = 1;
        out->is_i64 = 1;
    } else {
        std::from_chars_result r = std::from_chars(start, q, out->d);
        if (r.ec != std::errc() || r.ptr != q)
            return false;
    }
    out->present = 1;
    c.p = q;
    return true;
}

bool id_of_text(std::string_view s, int64_t *out)
{
    if (s.empty() || s.size() > 20)
        return false;
    char buf[24];
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = '\0';
    char *end = nullptr;
    errno = 0;
    long long x = std::strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = static_cast<int64_t>(x);
    return true;
}

namespace
{

bool number_char(char ch)
{
    return is_digit(ch) || ch == '.' || ch == 'e' || ch == 'E' || ch == '-' ||
           ch == '+';
}

// The Timestamp: the last one's double when the token is the same text.
bool plain_timestamp(ts_cache &cache, plain_cursor &c, double *out)
{
    size_t n = cache.len;
    if (n > 0 && static_cast<size_t>(c.end - c.p) > n &&
        std::memcmp(c.p, cache.text, n) == 0 && !number_char(c.p[n])) {
        c.p += n;
        *out = cache.value;
        return true;
    }
    const char *start = c.p;
    tw_json_num ts;
    if (!plain_number(c, &ts))
        return false;
    n = static_cast<size_t>(c.p - start);
    if (n <= sizeof(cache.text)) {
        std::memcpy(cache.text, start, n);
        cache.len = n;
        cache.value = ts.d;
    }
    *out = ts.d;
    return true;
}

} // namespace

bool sysline(ts_cache &ts, const char *buf, size_t len, tw_json_sysline *out)
{
    plain_cursor c{buf, buf + len};
    plain_ws(c);
    if (c.p == c.end || *c.p++ != '{')
        return false;
    if (!plain_key(c, "Type") || !plain_string(c, &out->type) ||
        !plain_sep(c, ',') || !plain_key(c, "Name"))
        return false;
    if (c.end - c.p >= 4 && std::memcmp(c.p, "null", 4) == 0) {
        c.p += 4;
        out->name = tw_json_str{nullptr, 0};
    } else if (!plain_string(c, &out->name)) {
        return false;
    }
    if (!plain_sep(c, ',') || !plain_key(c, "Dimension") ||
        !plain_string(c, &out->dimension) || !plain_sep(c, ',') ||
        !plain_key(c, "Value") || !plain_number(c, &out->value) ||
        !plain_sep(c, ',') || !plain_key(c, "NodeId") ||
        !plain_string(c, &out->node) || !plain_sep(c, ',') ||
        !plain_key(c, "Timestamp") ||
        !plain_timestamp(ts, c, &out->timestamp) || !plain_sep(c, '}'))
        return false;
    plain_ws(c);
    return c.p == c.end;
}

namespace
{

// A member's key and its ':'.
bool plain_member_key(plain_cursor &c, std::string_view *key)
{
    tw_json_str k;
    plain_ws(c);
    if (!plain_string(c, &k))
        return false;
    plain_ws(c);
    if (c.p == c.end || *c.p != ':')
        return false;
    c.p++;
    plain_ws(c);
    *key = std::string_view(k.ptr, k.len);
    return true;
}

// After a member: 1 at ',' (another follows), 0 at '}', -1 otherwise.
int plain_member_end(plain_cursor &c)
{
    plain_ws(c);
    if (c.p == c.end)
        return -1;
    char ch = *c.p++;
    return ch == ',' ? 1 : ch == '}' ? 0 : -1;
}

// A scalar: its kind (TW_ARG_*), its text (a string's contents, else the
// token) and, for a number, its value.
bool plain_scalar(plain_cursor &c, tw_arg_kind *kind, tw_json_str *text,
                  tw_json_num *num)
{
    if (c.p == c.end)
        return false;
    char ch = *c.p;
    if (ch == '"') {
        *kind = TW_ARG_STRING;
        return plain_string(c, text);
    }
    if (ch == 'n' || ch == 't' || ch == 'f') {
        std::string_view lit = ch == 'n'   ? "null"
                               : ch == 't' ? "true"
                                           : "false";
        if (static_cast<size_t>(c.end - c.p) < lit.size() ||
            std::memcmp(c.p, lit.data(), lit.size()) != 0)
            return false;
        *text = tw_json_str{c.p, lit.size()};
        *kind = ch == 'n' ? TW_ARG_NULL : TW_ARG_BOOL;
        c.p += lit.size();
        return true;
    }
    const char *start = c.p;
    if (!plain_number(c, num))
        return false;
    *text = tw_json_str{start, static_cast<size_t>(c.p - start)};
    *kind = TW_ARG_NUMBER;
    return true;
}

// args: an object of scalars (parse_args).
bool plain_args(std::vector<tw_json_arg> &args, plain_cursor &c,
                tw_json_event *out)
{
    if (c.p == c.end || *c.p != '{')
        return false;
    c.p++;
    args.clear();
    plain_ws(c);
    if (c.p < c.end && *c.p == '}') {
        c.p++;
        out->has_args = 1;
        return true;
    }
    for (;;) {
        std::string_view key;
        tw_json_arg arg{};
        tw_json_num num{};
        if (!plain_member_key(c, &key) ||
            !plain_scalar(c, &arg.kind, &arg.value, &num))
            return false;
        arg.key = tw_json_str{key.data(), key.size()};
        if (key == "start_time_since_epoch_in_micros" &&
            arg.kind == TW_ARG_NUMBER) {
            out->has_start_time = 1;
            out->start_time = num;
        }
        if (key == "name") {
            out->args_has_name = 1;
            out->args_name = arg.value;
        }
        args.push_back(arg);
        int more = plain_member_end(c);
        if (more < 0)
            return false;
        if (more == 0)
            break;
    }
    out->has_args = 1;
    return true;
}

// One event object, c at its '{'.
bool plain_event(std::vector<tw_json_arg> &args, plain_cursor &c,
                 tw_json_event *out)
{
    if (c.p == c.end || *c.p != '{')
        return false;
    c.p++;
    plain_ws(c);
    bool args_seen = false;
    if (c.p < c.end && *c.p == '}') {
        c.p++;
        return true;
    }
    for (;;) {
        std::string_view key;
        if (!plain_member_key(c, &key))
            return false;
        if (key == "args") {
            out->has_args = 0;
            out->args_has_name = 0;
            out->has_start_time = 0;
            if (c.end - c.p >= 4 && std::memcmp(c.p, "null", 4) == 0) {
                c.p += 4;
            } else {
                if (!plain_args(args, c, out))
                    return false;
                args_seen = true;
            }
        } else {
            tw_arg_kind kind;
            tw_json_str text;
            tw_json_num num{};
            if (!plain_scalar(c, &kind, &text, &num))
                return false;
            bool is_str = kind == TW_ARG_STRING;
            if (key == "ph") {
                out->ph = is_str ? text : tw_json_str{nullptr, 0};
            } else if (key == "name") {
                out->name =
                    kind != TW_ARG_NULL ? text : tw_json_str{nullptr, 0};
            } else if (key == "pid") {
                if (is_str) {
                    out->pid_str = text;
                    out->has_pid =
                        id_of_text(std::string_view(text.ptr, text.len),
                                   &out->pid)
                            ? 1
                            : 0;
                } else {
                    out->has_pid = kind == TW_ARG_NUMBER && num.is_i64;
                    if (out->has_pid)
                        out->pid = num.i;
                }
            } else if (key == "cat") {
                out->cat = is_str ? text : tw_json_str{nullptr, 0};
            } else if (key == "tid") {
                if (is_str)
                    out->has_tid =
                        id_of_text(std::string_view(text.ptr, text.len),
                                   &out->tid)
                            ? 1
                            : 0;
                else {
                    out->has_tid = kind == TW_ARG_NUMBER && num.is_i64;
                    if (out->has_tid)
                        out->tid = num.i;
                }
            } else if (key == "ts") {
                out->ts = kind == TW_ARG_NUMBER ? num : tw_json_num{};
            } else if (key == "dur") {
                out->dur = kind == TW_ARG_NUMBER ? num : tw_json_num{};
            }
        }
        int more = plain_member_end(c);
        if (more < 0)
            return false;
        if (more == 0)
            break;
    }
    if (args_seen && out->has_args) {
        out->args = args.data();
        out->nargs = args.size();
    }
    return true;
}

// The plain walk of parse_event_array: hands over elements while they are
// plain; *resume is the offset of the first element it did not take, *done
// says it took them all.
} // namespace

int event_array(std::vector<tw_json_arg> &args, const char *buf, size_t len,
                tw_json_event_fn fn, void *ud, tw_json_array_stop *stop,
                size_t *resume, bool *done, uint64_t *taken)
{
    plain_cursor c{buf, buf + len};
    *done = false;
    *resume = 0;
    if (c.p == c.end || *c.p != '[')
        return TW_OK;
    c.p++;
    plain_ws(c);
    if (c.p < c.end && *c.p == ']')
        return TW_OK; // empty: simdjson's walk decides
    for (;;) {
        size_t at = static_cast<size_t>(c.p - buf);
        *resume = at;
        tw_json_event ev{};
        if (!plain_event(args, c, &ev))
            return TW_OK;
        plain_ws(c);
        if (c.p == c.end || (*c.p != ',' && *c.p != ']'))
            return TW_OK;
        size_t next = static_cast<size_t>(c.p - buf);
        int rc = fn(ud, at, &ev);
        if (rc != TW_OK)
            return rc;
        (*taken)++;
        stop->state = TW_JSON_AFTER_ELEMENT;
        stop->at = next;
        if (*c.p == ']') {
            *done = true;
            return TW_OK;
        }
        c.p++;
        plain_ws(c);
    }
}

} // namespace tw_plain
