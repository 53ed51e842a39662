/*
 * json_writer.c - streaming JSON output with Python json.dump's number and
 * string conventions (see json_writer.h). Reports must read like the
 * reference's, so separators default to Python's (", " and ": ");
 * tw_json_set_compact() drops the spaces for wire messages.
 */
#include "json_writer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TW_JSON_MAX_DEPTH 64

struct tw_json {
    char *buf;
    size_t len;
    size_t cap;
    int failed;
    int compact;
    int strict;       /* non-finite values become null (RFC 8259 has no NaN) */
    size_t nonfinite; /* values written as null by strict since the reset */
    int depth;
    /* Per nesting level: has the container received an element yet? */
    unsigned char has_elem[TW_JSON_MAX_DEPTH];
    int after_key; /* a key was just written: no comma before the value */
};

tw_json *tw_json_new(void)
{
    return calloc(1, sizeof(tw_json));
}

void tw_json_free(tw_json *j)
{
    if (j == NULL)
        return;
    free(j->buf);
    free(j);
}

void tw_json_reset(tw_json *j)
{
    j->len = 0;
    if (j->buf != NULL)
        j->buf[0] = '\0';
    j->failed = 0;
    j->nonfinite = 0;
    j->depth = 0;
    j->after_key = 0;
    memset(j->has_elem, 0, sizeof(j->has_elem));
}

void tw_json_set_compact(tw_json *j, int compact)
{
    j->compact = compact;
}

void tw_json_set_strict(tw_json *j, int strict)
{
    j->strict = strict;
}

const char *tw_json_str(const tw_json *j)
{
    return j->buf != NULL ? j->buf : "";
}

size_t tw_json_len(const tw_json *j)
{
    return j->len;
}

size_t tw_json_nonfinite(const tw_json *j)
{
    return j->nonfinite;
}

int tw_json_failed(const tw_json *j)
{
    return j->failed || j->depth != 0;
}

char *tw_json_take(tw_json *j)
{
    char *s = j->buf;
    if (s == NULL)
        s = calloc(1, 1);
    j->buf = NULL;
    j->cap = 0;
    tw_json_reset(j);
    return s;
}

static void put(tw_json *j, const char *s, size_t n)
{
    if (j->failed)
        return;
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1)
            cap *= 2;
        char *nb = realloc(j->buf, cap);
        if (nb == NULL) {
            j->failed = 1;
            return;
        }
        j->buf = nb;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(tw_json *j, const char *s)
{
    put(j, s, strlen(s));
}

/* Separator before a value or key at the current level. */
static void before_value(tw_json *j)
{
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth > 0) {
        if (j->has_elem[j->depth - 1])
            puts_(j, j->compact ? "," : ", ");
        j->has_elem[j->depth - 1] = 1;
    }
}

static void open_(tw_json *j, char c)
{
    before_value(j);
    put(j, &c, 1);
    if (j->depth >= TW_JSON_MAX_DEPTH) {
        j->failed = 1;
        return;
    }
    j->has_elem[j->depth++] = 0;
}

static void close_(tw_json *j, char c)
{
    if (j->depth == 0) {
        j->failed = 1;
        return;
    }
    j->depth--;
    put(j, &c, 1);
}

void tw_json_object_begin(tw_json *j)
{
    open_(j, '{');
}
void tw_json_object_end(tw_json *j)
{
    close_(j, '}');
}
void tw_json_array_begin(tw_json *j)
{
    open_(j, '[');
}
void tw_json_array_end(tw_json *j)
{
    close_(j, ']');
}

/* Python's json.dumps(ensure_ascii=True) string escaping. */
static void put_escaped(tw_json *j, const char *s)
{
    put(j, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        char tmp[16];
        if (c == '"') {
            puts_(j, "\\\"");
            p++;
        } else if (c == '\\') {
            puts_(j, "\\\\");
            p++;
        } else if (c == '\n') {
            puts_(j, "\\n");
            p++;
        } else if (c == '\r') {
            puts_(j, "\\r");
            p++;
        } else if (c == '\t') {
            puts_(j, "\\t");
            p++;
        } else if (c == '\b') {
            puts_(j, "\\b");
            p++;
        } else if (c == '\f') {
            puts_(j, "\\f");
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", c);
            puts_(j, tmp);
            p++;
        } else if (c < 0x80) {
            put(j, (const char *)p, 1);
            p++;
        } else {
            /* Decode one UTF-8 sequence; invalid bytes become U+FFFD. */
            unsigned cp = 0xFFFD;
            int len = 1;
            if ((c & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
                cp = ((c & 0x1Fu) << 6) | (p[1] & 0x3Fu);
                len = 2;
            } else if ((c & 0xF0) == 0xE0 && (p[1] & 0xC0) == 0x80 &&
                       (p[2] & 0xC0) == 0x80) {
                cp = ((c & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) |
                     (p[2] & 0x3Fu);
                len = 3;
            } else if ((c & 0xF8) == 0xF0 && (p[1] & 0xC0) == 0x80 &&
                       (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80) {
                cp = ((c & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) |
                     ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
                len = 4;
            }
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof(tmp), "\\u%04x\\u%04x",
                         0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                snprintf(tmp, sizeof(tmp), "\\u%04x", cp);
            }
            puts_(j, tmp);
            p += len;
        }
    }
    put(j, "\"", 1);
}

void tw_json_key(tw_json *j, const char *key)
{
    before_value(j);
    put_escaped(j, key != NULL ? key : "null");
    puts_(j, j->compact ? ":" : ": ");
    j->after_key = 1;
}

void tw_py_float_repr(double v, char *buf, size_t len)
{
    if (isnan(v)) {
        snprintf(buf, len, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, len, v < 0 ? "-inf" : "inf");
        return;
    }
    /* Shortest digits that round-trip, then Python's layout rules:
     * scientific when the exponent is < -4 or >= 16. */
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    /* tmp = "[-]d.ddde[+-]XX" */
    const char *s = tmp;
    int neg = 0;
    if (*s == '-') {
        neg = 1;
        s++;
    }
    char digits[24];
    size_t nd = 0;
    const char *e = strchr(s, 'e');
    for (const char *q = s; q < e;
         q++) /* skips the point, or a locale's comma */
        if (*q >= '0' && *q <= '9')
            digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int exp = atoi(e + 1);
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp < -4 || exp >= 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        o += (size_t)snprintf(out + o, sizeof(out) - o, "e%c%02d",
                              exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp >= 0) {
        for (int i = 0; i <= exp; i++)
            out[o++] = (size_t)i < nd ? digits[i] : '0';
        out[o++] = '.';
        if ((size_t)exp + 1 < nd) {
            for (size_t i = (size_t)exp + 1; i < nd; i++)
                out[o++] = digits[i];
        } else {
            out[o++] = '0';
        }
    } else {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -exp - 1; i++)
            out[o++] = '0';
        for (size_t i = 0; i < nd; i++)
            out[o++] = digits[i];
    }
    out[o] = '\0';
    snprintf(buf, len, "%s", out);
}

static void format_double(double v, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "NaN");
    else if (isinf(v))
        snprintf(buf, len, v < 0 ? "-Infinity" : "Infinity");
    else
        tw_py_float_repr(v, buf, len);
}

void tw_json_key_double(tw_json *j, double key)
{
    char tmp[48];
    format_double(key, tmp, sizeof(tmp));
    tw_json_key(j, tmp);
}

void tw_json_string(tw_json *j, const char *s)
{
    before_value(j);
    if (s == NULL)
        puts_(j, "null");
    else
        put_escaped(j, s);
}

void tw_json_double(tw_json *j, double v)
{
    char tmp[48];
    before_value(j);
    if (j->strict && !isfinite(v)) {
        j->nonfinite++;
        puts_(j, "null");
        return;
    }
    format_double(v, tmp, sizeof(tmp));
    puts_(j, tmp);
}

void tw_json_int(tw_json *j, int64_t v)
{
    char tmp[32];
    before_value(j);
    snprintf(tmp, sizeof(tmp), "%lld", (long long)v);
    puts_(j, tmp);
}

void tw_json_bool(tw_json *j, int v)
{
    before_value(j);
    puts_(j, v ? "true" : "false");
}

void tw_json_null(tw_json *j)
{
    before_value(j);
    puts_(j, "null");
}

void tw_json_raw(tw_json *j, const char *text)
{
    before_value(j);
    puts_(j, text);
}
