/*
 * test_reader_json.c - the JSON parsers of the agent's files
 * (engine/io/reader_json.h): the plain fast paths (system lines, event
 * arrays) against the general (simdjson) parser on the same text, generated at
 * random around the agent's format (numbers of every shape, whitespace,
 * escapes, non-ASCII, other key orders, extra and missing fields, truncation,
 * flipped bytes). The two must agree on everything: status, error text, every
 * field, every double bit for bit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reader_json.h"

typedef struct rng {
    uint64_t s;
    char last_ts[64]; /* the last Timestamp token written */
} rng;

static uint64_t rnext(rng *r)
{
    /* xorshift64*: reproducible lines from a fixed seed */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

static unsigned rbelow(rng *r, unsigned n)
{
    return (unsigned)(rnext(r) % n);
}

typedef struct line {
    char buf[1024];
    size_t len;
} line;

static void put(line *l, const char *s)
{
    size_t n = strlen(s);
    if (l->len + n < sizeof(l->buf))
        memcpy(l->buf + l->len, s, n), l->len += n;
}

static void putf(line *l, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    put(l, tmp);
}

static void ws(rng *r, line *l)
{
    static const char *const w[] = {"", "", "", " ", "  ", "\t"};
    put(l, w[rbelow(r, 6)]);
}

static void digits(rng *r, line *l, unsigned n, int lead_nonzero)
{
    for (unsigned i = 0; i < n; i++) {
        char d[2] = {(char)('0' + rbelow(r, 10)), 0};
        if (i == 0 && lead_nonzero && d[0] == '0')
            d[0] = (char)('1' + rbelow(r, 9));
        put(l, d);
    }
}

static void number(rng *r, line *l)
{
    static const char *const odd[] = {"-0",
                                      "0",
                                      "-0.0",
                                      "0.0",
                                      "01",
                                      "1.",
                                      ".5",
                                      "1e",
                                      "+1",
                                      "1e400",
                                      "-1e400",
                                      "1e-400",
                                      "1E5",
                                      "2e+3",
                                      "3e-2",
                                      "-",
                                      "NaN",
                                      "Infinity",
                                      "9223372036854775807",
                                      "9223372036854775808",
                                      "-9223372036854775808",
                                      "18446744073709551616",
                                      "123456789012345678",
                                      "1234567890123456789",
                                      "4.9406564584124654e-324",
                                      "1.7976931348623157e308",
                                      "2.2250738585072011e-308",
                                      "0.1e1"};
    switch (rbelow(r, 6)) {
    case 0:
        put(l, odd[rbelow(r, sizeof(odd) / sizeof(odd[0]))]);
        return;
    case 1: /* an integer of 1-21 digits */
        if (rbelow(r, 3) == 0)
            put(l, "-");
        digits(r, l, 1 + rbelow(r, 21), 1);
        return;
    case 2: /* a timestamp */
        putf(l, "17000%05u.%u", rbelow(r, 100000), rbelow(r, 10000000));
        return;
    default: /* mantissa, fraction, exponent */
        if (rbelow(r, 4) == 0)
            put(l, "-");
        if (rbelow(r, 3) == 0)
            put(l, "0");
        else
            digits(r, l, 1 + rbelow(r, 12), 1);
        if (rbelow(r, 4) != 0) {
            put(l, ".");
            digits(r, l, 1 + rbelow(r, 20), 0);
        }
        if (rbelow(r, 4) == 0) {
            put(l, rbelow(r, 2) ? "e" : "E");
            put(l, (const char *[]){"", "+", "-"}[rbelow(r, 3)]);
            digits(r, l, 1 + rbelow(r, 3), 0);
        }
    }
}

static void string(rng *r, line *l)
{
    static const char *const odd[] = {
        "a\\\"b",   "a\\\\b", "t\\u00e9", "\xc3\xa9t\xc3\xa9",
        "\xff\xfe", "a\tb",   "",         "a/b",
        "\\n",      "x\x01y"};
    put(l, "\"");
    if (rbelow(r, 8) == 0) {
        put(l, odd[rbelow(r, sizeof(odd) / sizeof(odd[0]))]);
    } else {
        unsigned n = rbelow(r, 12);
        for (unsigned i = 0; i < n; i++) {
            char c[2] = {(char)(' ' + rbelow(r, 95)), 0};
            if (c[0] == '"' || c[0] == '\\')
                c[0] = '_';
            put(l, c);
        }
    }
    put(l, "\"");
}

static const char *const KEYS[6] = {"Type",  "Name",   "Dimension",
                                    "Value", "NodeId", "Timestamp"};

static void field(rng *r, line *l, int k)
{
    ws(r, l);
    putf(l, "\"%s\"", KEYS[k]);
    ws(r, l);
    put(l, ":");
    ws(r, l);
    if (k == 1 && rbelow(r, 5) == 0) {
        put(l, "null");
    } else if (k == 5) {
        /* the last line's timestamp again (the fast path's cache), or it
         * with more after it (the cache must not match a prefix) */
        char *last = r->last_ts;
        unsigned how = rbelow(r, 6);
        size_t at = l->len;
        if (how < 2 && last[0] != '\0') {
            put(l, last);
        } else if (how == 2 && last[0] != '\0') {
            put(l, last);
            put(l, (const char *[]){"5", "e1", ".5", "0"}[rbelow(r, 4)]);
        } else {
            number(r, l);
        }
        size_t n = l->len - at < sizeof(r->last_ts) ? l->len - at : 0;
        memcpy(last, l->buf + at, n);
        last[n] = '\0';
    } else if (k == 3) {
        number(r, l);
    } else {
        string(r, l);
    }
    ws(r, l);
}

static void make_line(rng *r, line *l)
{
    int order[6] = {0, 1, 2, 3, 4, 5};
    int n = 6;
    l->len = 0;
    if (rbelow(r, 10) == 0) /* another key order */
        for (int i = 5; i > 0; i--) {
            int j = (int)rbelow(r, (unsigned)i + 1), t = order[i];
            order[i] = order[j], order[j] = t;
        }
    if (rbelow(r, 20) == 0) /* a field missing */
        n = 5;
    if (rbelow(r, 4) == 0)
        ws(r, l);
    put(l, "{");
    for (int i = 0; i < n; i++) {
        if (i > 0)
            put(l, ",");
        field(r, l, order[i]);
    }
    if (rbelow(r, 20) == 0)
        put(l, ",\"Extra\":1");
    put(l, "}");
    static const char *const tail[] = {" ", "\r", " \t", " x", "{}", ","};
    if (rbelow(r, 4) == 0)
        put(l, tail[rbelow(r, 6)]);
    if (rbelow(r, 20) == 0) /* truncated */
        l->len = rbelow(r, (unsigned)l->len + 1);
    if (rbelow(r, 20) == 0 && l->len > 0) /* a byte flipped */
        l->buf[rbelow(r, (unsigned)l->len)] ^= (char)(1u << rbelow(r, 8));
}

typedef struct parsed {
    int rc;
    const char *reason;
    tw_json_sysline l;
} parsed;

static parsed parse(tw_json_parser *jp, const line *src, char *padded)
{
    parsed p;
    memset(padded, 0, sizeof(src->buf) + TW_JSON_PADDING);
    memcpy(padded, src->buf, src->len);
    p.reason = NULL;
    p.rc = tw_json_parse_sysline(jp, padded, src->len,
                                 src->len + TW_JSON_PADDING, &p.l, &p.reason);
    return p;
}

static void same_str(const char *what, tw_json_str a, tw_json_str b,
                     const line *src)
{
    /* the same text (the general parser's unescaped copy, the fast
     * path's slice of the line) */
    int ok = (a.ptr == NULL) == (b.ptr == NULL) && a.len == b.len &&
             (a.ptr == NULL || memcmp(a.ptr, b.ptr, a.len) == 0);
    if (!ok)
        fail_msg("%s differs on line %.*s", what, (int)src->len, src->buf);
}

static void same_num(const char *what, const tw_json_num *a,
                     const tw_json_num *b, const line *src)
{
    if (a->present != b->present || a->integral != b->integral ||
        a->is_i64 != b->is_i64 || a->i != b->i ||
        memcmp(&a->d, &b->d, sizeof(a->d)) != 0)
        fail_msg("%s differs on line %.*s: fast %d/%d/%d %lld %.17g, "
                 "general %d/%d/%d %lld %.17g",
                 what, (int)src->len, src->buf, a->present, a->integral,
                 a->is_i64, (long long)a->i, a->d, b->present, b->integral,
                 b->is_i64, (long long)b->i, b->d);
}

/* The fast parser and one with simdjson alone, each with a padded copy of
 * the text. */
typedef struct two_parsers {
    tw_json_parser *fast, *general;
    char fa[sizeof(((line *)0)->buf) + TW_JSON_PADDING];
    char ga[sizeof(((line *)0)->buf) + TW_JSON_PADDING];
} two_parsers;

static two_parsers *two_parsers_new(void)
{
    two_parsers *tp = calloc(1, sizeof(*tp));
    assert_non_null(tp);
    tp->fast = tw_json_parser_new();
    tp->general = tw_json_parser_new();
    assert_non_null(tp->fast);
    assert_non_null(tp->general);
    tw_json_parser_set_general_only(tp->general, 1);
    return tp;
}

static void two_parsers_free(two_parsers *tp)
{
    tw_json_parser_free(tp->fast);
    tw_json_parser_free(tp->general);
    free(tp);
}

static void test_plain_path_same_as_general(void **state)
{
    (void)state;
    two_parsers *tp = two_parsers_new();
    tw_json_parser *fast = tp->fast, *general = tp->general;
    char *fa = tp->fa, *ga = tp->ga;
    rng r = {0x9e3779b97f4a7c15ull, ""};
    unsigned ok = 0, bad = 0;
    const unsigned N = 200000;
    for (unsigned i = 0; i < N; i++) {
        line src;
        make_line(&r, &src);
        parsed a = parse(fast, &src, fa);
        parsed b = parse(general, &src, ga);
        if (a.rc != b.rc)
            fail_msg("status differs on line %.*s: fast %d, general %d (%s)",
                     (int)src.len, src.buf, a.rc, b.rc,
                     b.reason ? b.reason : "-");
        if (a.rc != 0) {
            assert_string_equal(a.reason, b.reason);
            bad++;
            continue;
        }
        ok++;
        same_str("Type", a.l.type, b.l.type, &src);
        same_str("Name", a.l.name, b.l.name, &src);
        same_str("Dimension", a.l.dimension, b.l.dimension, &src);
        same_str("NodeId", a.l.node, b.l.node, &src);
        same_num("Value", &a.l.value, &b.l.value, &src);
        if (memcmp(&a.l.timestamp, &b.l.timestamp, sizeof(double)) != 0)
            fail_msg("Timestamp differs on line %.*s: %.17g vs %.17g",
                     (int)src.len, src.buf, a.l.timestamp, b.l.timestamp);
    }
    uint64_t plain = tw_json_parser_plain_lines(fast);
    print_message("%u lines: %u good (%llu by the fast path), %u bad\n", N, ok,
                  (unsigned long long)plain, bad);
    /* the generator reaches both paths and both outcomes */
    assert_true(plain > N / 4);
    assert_true(ok > plain + N / 100);
    assert_true(bad > N / 20);
    assert_int_equal(tw_json_parser_plain_lines(general), 0);
    two_parsers_free(tp);
}

/* The agent's own line and the shared sample's spacing take the fast path. */
static void test_plain_path_taken(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "{\"Type\":\"gpu\",\"Name\":\"gpu0\",\"Dimension\":\"GPUUtilization\","
        "\"Value\":93,\"NodeId\":\"algo-2\",\"Timestamp\":1700002980.2872521}",
        "{\"Type\": \"cpu\", \"Name\":\"cpu0\", \"Dimension\": "
        "\"CPUUtilization\", \"Value\":4.76,\"NodeId\":\"algo-1\","
        "\"Timestamp\":1591160699.4570894}\r"};
    tw_json_parser *jp = tw_json_parser_new();
    assert_non_null(jp);
    static char buf[512 + TW_JSON_PADDING];
    for (size_t i = 0; i < 2; i++) {
        size_t n = strlen(lines[i]);
        memset(buf, 0, sizeof(buf));
        memcpy(buf, lines[i], n);
        tw_json_sysline l;
        const char *reason = NULL;
        assert_int_equal(
            tw_json_parse_sysline(jp, buf, n, n + TW_JSON_PADDING, &l, &reason),
            0);
        assert_int_equal(tw_json_parser_plain_lines(jp), i + 1);
        assert_int_equal(l.value.integral, i == 0);
    }
    tw_json_parser_free(jp);
}

/* Numbers of 19 or more significant digits, which simdjson 3.0.1's
 * get_number()/get_double() misread (as 0, or as another number): the
 * correctly rounded double of the text (strtod's, Python's float()), on
 * both paths. */
static void test_long_mantissas(void **state)
{
    (void)state;
    static const char text[] =
        "{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":\"CPUUtilization\","
        "\"Value\":98845033.991821717514,\"NodeId\":\"algo-1\","
        "\"Timestamp\":0.72645363972107098029}";
    static char buf[sizeof(text) + TW_JSON_PADDING];
    memcpy(buf, text, sizeof(text));
    for (int general = 0; general < 2; general++) {
        tw_json_parser *jp = tw_json_parser_new();
        assert_non_null(jp);
        tw_json_parser_set_general_only(jp, general);
        tw_json_sysline l;
        const char *reason = NULL;
        size_t n = sizeof(text) - 1;
        assert_int_equal(
            tw_json_parse_sysline(jp, buf, n, n + TW_JSON_PADDING, &l, &reason),
            0);
        assert_true(l.value.d == strtod("98845033.991821717514", NULL));
        assert_true(l.timestamp == strtod("0.72645363972107098029", NULL));
        assert_int_equal(l.value.integral, 0);
        tw_json_parser_free(jp);
    }
}

/* ---- event arrays: the plain walk against simdjson's ------------------ */

typedef struct text {
    char *buf;
    size_t len, cap;
} text;

static void tput(text *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n + 64;
        t->buf = realloc(t->buf, t->cap);
        assert_non_null(t->buf);
    }
}

static void tstr(text *t, tw_json_str s)
{
    if (s.ptr == NULL) {
        tput(t, "|<null>");
        return;
    }
    /* one line per event: other bytes as \xNN */
    tput(t, "|'");
    for (size_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch < 0x20 || ch >= 0x7f || ch == '\\')
            tput(t, "\\x%02x", ch);
        else
            tput(t, "%c", ch);
    }
    tput(t, "'");
}

static void tnum(text *t, const tw_json_num *n)
{
    tput(t, "|%d%d%d %lld %a", n->present, n->integral, n->is_i64,
         (long long)n->i, n->d);
}

/* One line of text per event: every field the parser fills. */
static int describe_event(void *ud, size_t pos, const tw_json_event *ev)
{
    text *t = ud;
    tput(t, "@%zu", pos);
    tstr(t, ev->ph);
    tstr(t, ev->name);
    tput(t, "|pid %d %lld", ev->has_pid,
         (long long)(ev->has_pid ? ev->pid : 0));
    tstr(t, ev->pid_str);
    tstr(t, ev->cat);
    tput(t, "|tid %d %lld", ev->has_tid,
         (long long)(ev->has_tid ? ev->tid : 0));
    tnum(t, &ev->ts);
    tnum(t, &ev->dur);
    tput(t, "|args %d %zu", ev->has_args, ev->has_args ? ev->nargs : 0);
    for (size_t i = 0; ev->has_args && i < ev->nargs; i++) {
        tput(t, " %d", (int)ev->args[i].kind);
        tstr(t, ev->args[i].key);
        tstr(t, ev->args[i].value);
    }
    tput(t, "|name %d", ev->args_has_name);
    if (ev->args_has_name)
        tstr(t, ev->args_name);
    tput(t, "|start %d", ev->has_start_time);
    if (ev->has_start_time)
        tnum(t, &ev->start_time);
    tput(t, "\n");
    return 0;
}

static void scalar(rng *r, line *l)
{
    switch (rbelow(r, 8)) {
    case 0:
    case 1:
    case 2:
        string(r, l);
        return;
    case 3:
    case 4:
        number(r, l);
        return;
    case 5:
        put(l, (const char *[]){"null", "true", "false", "nul"}[rbelow(r, 4)]);
        return;
    case 6:
        putf(l, "\"%u\"", rbelow(r, 100000)); /* an id as a string */
        return;
    default:
        put(l,
            (const char *[]){"{\"a\": 1}", "[1, 2]", "{}", "[]"}[rbelow(r, 4)]);
    }
}

static void event(rng *r, line *l)
{
    static const char *const keys[] = {"name", "ph",  "pid",     "tid",
                                       "ts",   "dur", "cat",     "args",
                                       "id",   "s",   "p\\u0068"};
    static const char *const arg_keys[] = {
        "step_num", "name", "start_time_since_epoch_in_micros",
        "pid",      "x",    "na\\u006de"};
    put(l, "{");
    unsigned n = rbelow(r, 8);
    for (unsigned i = 0; i < n; i++) {
        if (i > 0)
            put(l, ",");
        ws(r, l);
        unsigned k = rbelow(r, sizeof(keys) / sizeof(keys[0]));
        putf(l, "\"%s\"", keys[k]);
        ws(r, l);
        put(l, ":");
        ws(r, l);
        if (k == 7 && rbelow(r, 8) != 0) { /* args */
            if (rbelow(r, 10) == 0) {
                put(l, "null");
            } else {
                put(l, "{");
                unsigned m = rbelow(r, 4);
                for (unsigned j = 0; j < m; j++) {
                    if (j > 0)
                        put(l, ", ");
                    putf(l, "\"%s\": ",
                         arg_keys[rbelow(r, sizeof(arg_keys) /
                                                sizeof(arg_keys[0]))]);
                    scalar(r, l);
                }
                put(l, "}");
            }
        } else if ((k == 4 || k == 5 || k == 2 || k == 3) &&
                   rbelow(r, 4) != 0) {
            putf(l, "%u", rbelow(r, 4000000000u)); /* a plain id or time */
        } else {
            scalar(r, l);
        }
    }
    if (rbelow(r, 30) == 0)
        put(l, ",");
    put(l, "}");
}

static void make_array(rng *r, line *l)
{
    l->len = 0;
    put(l, "[");
    unsigned n = rbelow(r, 6);
    for (unsigned i = 0; i < n; i++) {
        if (i > 0)
            put(l, rbelow(r, 40) == 0 ? " " : ",\n");
        event(r, l);
    }
    put(l, rbelow(r, 30) == 0 ? "" : "]");
    if (rbelow(r, 10) == 0)
        put(l, "\n{\"more\": 1}");
    if (rbelow(r, 30) == 0 && l->len > 0) /* truncated */
        l->len = rbelow(r, (unsigned)l->len + 1);
    if (rbelow(r, 30) == 0 && l->len > 0) /* a byte flipped */
        l->buf[rbelow(r, (unsigned)l->len)] ^= (char)(1u << rbelow(r, 8));
}

typedef struct walked {
    text events; /* describe_event's lines */
    size_t nevents;
    tw_json_array_stop stop;
    int rc;
} walked;

static int count_event(void *ud, size_t pos, const tw_json_event *ev)
{
    walked *w = ud;
    w->nevents++;
    return describe_event(&w->events, pos, ev);
}

static void walk(tw_json_parser *jp, const line *src, char *padded, walked *w)
{
    memset(padded, 0, sizeof(src->buf) + TW_JSON_PADDING);
    memcpy(padded, src->buf, src->len);
    w->events.len = 0;
    w->nevents = 0;
    tput(&w->events, "");
    w->rc = tw_json_parse_event_array(jp, padded, src->len,
                                      src->len + TW_JSON_PADDING, count_event,
                                      w, &w->stop);
}

/* The offset of the n-th event line's "@pos" in t (n from 0). */
static const char *nth_line(const text *t, size_t n)
{
    const char *q = t->buf;
    for (size_t i = 0; i < n; i++)
        q = strchr(q, '\n') + 1;
    return q;
}

/* The plain walk may take more than simdjson's (which takes nothing when
 * the text as a whole is not valid JSON, e.g. content after the array);
 * the reader's scan reads those elements one by one with
 * tw_json_parse_event. So: simdjson's events are the plain walk's first
 * ones, byte for byte; each further one is what tw_json_parse_event gives
 * for that element; and the plain walk stops after its last. */
static void test_plain_events_same_as_general(void **state)
{
    (void)state;
    two_parsers *tp = two_parsers_new();
    tw_json_parser *fast = tp->fast, *general = tp->general;
    char *fa = tp->fa, *ga = tp->ga;
    walked a = {{NULL, 0, 0}, 0, {TW_JSON_AT_ELEMENT, 0}, 0};
    walked b = a;
    text one = {NULL, 0, 0};
    rng r = {0x5851f42d4c957f2dull, ""};
    const unsigned N = 100000;
    uint64_t events = 0, beyond = 0;
    for (unsigned i = 0; i < N; i++) {
        line src;
        make_array(&r, &src);
        if (src.len == 0 || src.buf[0] != '[')
            continue;
        walk(fast, &src, fa, &a);
        walk(general, &src, ga, &b);
        events += a.nevents;
        size_t prefix = (size_t)(nth_line(&a.events, b.nevents) - a.events.buf);
        if (a.rc != 0 || b.rc != 0 || a.nevents < b.nevents ||
            prefix != b.events.len ||
            memcmp(a.events.buf, b.events.buf, prefix) != 0 ||
            (a.nevents == b.nevents &&
             (a.stop.state != b.stop.state || a.stop.at != b.stop.at)))
            fail_msg("the walks differ on %.*s\nplain:\n%.*sstop %d %zu\n"
                     "simdjson:\n%.*sstop %d %zu",
                     (int)src.len, src.buf, (int)a.events.len, a.events.buf,
                     (int)a.stop.state, a.stop.at, (int)b.events.len,
                     b.events.buf, (int)b.stop.state, b.stop.at);
        for (size_t k = b.nevents; k < a.nevents; k++) {
            /* element k: from its '{' to the ',' or ']' after it */
            const char *ln = nth_line(&a.events, k);
            size_t pos = strtoul(ln + 1, NULL, 10), end;
            if (k + 1 < a.nevents) {
                end = strtoul(nth_line(&a.events, k + 1) + 1, NULL, 10);
                while (src.buf[end - 1] != ',')
                    end--;
                end--;
            } else {
                assert_int_equal(a.stop.state, TW_JSON_AFTER_ELEMENT);
                end = a.stop.at;
            }
            tw_json_event ev;
            const char *reason = NULL;
            assert_int_equal(tw_json_parse_event(general, ga + pos, end - pos,
                                                 sizeof(tp->ga) - pos, &ev,
                                                 &reason),
                             0);
            one.len = 0;
            describe_event(&one, pos, &ev);
            size_t n = (size_t)(strchr(ln, '\n') + 1 - ln);
            if (n != one.len || memcmp(ln, one.buf, n) != 0)
                fail_msg("element %zu of %.*s:\nplain walk: %.*s"
                         "tw_json_parse_event: %.*s",
                         k, (int)src.len, src.buf, (int)n, ln, (int)one.len,
                         one.buf);
            beyond++;
        }
    }
    uint64_t plain = tw_json_parser_plain_events(fast);
    print_message("%u arrays: %llu events, %llu by the plain walk (%llu "
                  "where simdjson's walk took none)\n",
                  N, (unsigned long long)events, (unsigned long long)plain,
                  (unsigned long long)beyond);
    assert_true(plain > events / 4);
    assert_true(plain < events);
    assert_true(beyond > 0);
    assert_int_equal(tw_json_parser_plain_events(general), 0);
    free(a.events.buf);
    free(b.events.buf);
    free(one.buf);
    two_parsers_free(tp);
}

/* Every byte at every place of a string (of every length up to 17): the
 * fast path takes the line exactly when the byte is printable ASCII other
 * than the backslash (its word-at-a-time test against the plain rule). */
static void test_plain_string_bytes(void **state)
{
    (void)state;
    tw_json_parser *jp = tw_json_parser_new();
    assert_non_null(jp);
    static char buf[256 + TW_JSON_PADDING];
    for (unsigned len = 1; len <= 17; len++)
        for (unsigned at = 0; at < len; at++)
            for (unsigned b = 0; b < 256; b++) {
                if (b == '"')
                    continue;
                char str[32];
                memset(str, 'a', len);
                str[at] = (char)b;
                static const char pre[] = "{\"Type\":\"";
                static const char post[] =
                    "\",\"Name\":null,\"Dimension\":\"D\",\"Value\":1,"
                    "\"NodeId\":\"n\",\"Timestamp\":2}";
                memset(buf, 0, sizeof(buf));
                memcpy(buf, pre, sizeof(pre) - 1);
                memcpy(buf + sizeof(pre) - 1, str, len);
                memcpy(buf + sizeof(pre) - 1 + len, post, sizeof(post) - 1);
                int n = (int)(sizeof(pre) - 1 + len + sizeof(post) - 1);
                uint64_t before = tw_json_parser_plain_lines(jp);
                tw_json_sysline l;
                const char *reason = NULL;
                (void)tw_json_parse_sysline(jp, buf, (size_t)n,
                                            (size_t)n + TW_JSON_PADDING, &l,
                                            &reason);
                int plain = b >= 0x20 && b < 0x80 && b != '\\';
                if ((tw_json_parser_plain_lines(jp) - before == 1) != plain)
                    fail_msg("byte 0x%02x at %u of %u: fast path %s", b, at,
                             len, plain ? "refused it" : "took it");
            }
    tw_json_parser_free(jp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_mantissas),
        cmocka_unit_test(test_plain_path_taken),
        cmocka_unit_test(test_plain_string_bytes),
        cmocka_unit_test(test_plain_path_same_as_general),
        cmocka_unit_test(test_plain_events_same_as_general),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
