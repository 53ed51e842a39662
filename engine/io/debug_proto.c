/* debug_proto.c - the event protobuf subset's wire decoder (debug_proto.h). */
#include "debug_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A cursor over one message; `base` is the offset of `p` in the payload,
 * for messages. */
typedef struct pb {
    const uint8_t *p;
    size_t n;
    size_t pos;
    size_t base;
    char *err;
    size_t errlen;
} pb;

typedef struct pb_field {
    uint32_t number;
    int type;
    uint64_t v;          /* WT_VARINT, WT_I64, WT_I32 */
    const uint8_t *data; /* WT_LEN */
    size_t len;
    size_t at; /* payload offset of the field's value */
} pb_field;

static int fail(pb *c, const char *what)
{
    snprintf(c->err, c->errlen, "offset %zu: %s", c->base + c->pos, what);
    return TW_ERR;
}

/* A varint at the cursor; errors name the offset where it starts. */
static int varint(pb *c, uint64_t *out)
{
    size_t start = c->pos;
    const char *why = "varint longer than 10 bytes";
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (c->pos >= c->n) {
            why = "varint runs past the end of its message";
            break;
        }
        uint8_t b = c->p[c->pos++];
        if (shift == 63 && (b & 0x7f) > 1) {
            why = "varint overflows 64 bits";
            break;
        }
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *out = v;
            return TW_OK;
        }
    }
    c->pos = start;
    return fail(c, why);
}

/* The next field, or 0 at the end of the message (1 when one was read). */
static int next_field(pb *c, pb_field *f, int *status)
{
    *status = TW_OK;
    if (c->pos >= c->n)
        return 0;
    size_t start = c->pos; /* errors about the key name where it starts */
    uint64_t key;
    if (varint(c, &key) != TW_OK)
        goto bad;
    f->number = (uint32_t)(key >> 3);
    f->type = (int)(key & 7);
    if (f->number == 0 || (key >> 3) > 0x1fffffff) {
        c->pos = start;
        fail(c, "field number 0 or out of range");
        goto bad;
    }
    f->at = c->base + c->pos;
    switch (f->type) {
    case WT_VARINT:
        if (varint(c, &f->v) != TW_OK)
            goto bad;
        break;
    case WT_I64:
    case WT_I32: {
        size_t w = f->type == WT_I64 ? 8 : 4;
        if (c->n - c->pos < w) {
            fail(c, "fixed-width field runs past the end of its message");
            goto bad;
        }
        f->v = 0;
        for (size_t i = 0; i < w; i++)
            f->v |= (uint64_t)c->p[c->pos + i] << (8 * i);
        c->pos += w;
        break;
    }
    case WT_LEN: {
        uint64_t len;
        if (varint(c, &len) != TW_OK)
            goto bad;
        if (len > c->n - c->pos) {
            fail(c, "length-delimited field runs past the end of its message");
            goto bad;
        }
        f->at = c->base + c->pos;
        f->data = c->p + c->pos;
        f->len = (size_t)len;
        c->pos += (size_t)len;
        break;
    }
    default:
        c->pos = start;
        fail(c, "group or unknown wire type");
        goto bad;
    }
    return 1;
bad:
    *status = TW_ERR;
    return 0;
}

static pb sub(const pb *c, const pb_field *f)
{
    pb s = {f->data, f->len, 0, f->at, c->err, c->errlen};
    return s;
}

/* A field whose wire type is not the one its number needs is an error:
 * the reference's writer never produces one. */
static int want(pb *c, const pb_field *f, int type)
{
    if (f->type == type)
        return TW_OK;
    snprintf(c->err, c->errlen, "offset %zu: field %u has wire type %d, not %d",
             f->at, f->number, f->type, type);
    return TW_ERR;
}

static int parse_int_text(const uint8_t *s, size_t n, int64_t *out)
{
    if (n == 0 || n > 19)
        return TW_ERR;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return TW_ERR;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return TW_OK;
}

static int decode_plugin_data(pb *c, tw_debug_event *ev)
{
    const uint8_t *name = NULL, *content = NULL;
    size_t name_len = 0, content_len = 0;
    pb_field f;
    int st;
    while (next_field(c, &f, &st)) {
        if (f.number == 1 || f.number == 2) {
            if (want(c, &f, WT_LEN) != TW_OK)
                return TW_ERR;
            if (f.number == 1) {
                name = f.data;
                name_len = f.len;
            } else {
                content = f.data;
                content_len = f.len;
            }
        }
    }
    if (st != TW_OK)
        return TW_ERR;
    int64_t v;
    if (name_len == 4 && memcmp(name, "mode", 4) == 0) {
        if (parse_int_text(content, content_len, &v) != TW_OK || v < 1 || v > 4)
            return fail(c, "plugin_data 'mode' is not 1, 2, 3 or 4");
        ev->mode = (int)v;
    } else if (name_len == 9 && memcmp(name, "mode_step", 9) == 0) {
        if (parse_int_text(content, content_len, &v) != TW_OK)
            return fail(c, "plugin_data 'mode_step' is not a decimal count");
        ev->mode_step = v;
        ev->has_mode_step = 1;
    }
    return TW_OK;
}

static int decode_metadata(pb *c, tw_debug_event *ev)
{
    pb_field f;
    int st;
    while (next_field(c, &f, &st)) {
        if (f.number != 1)
            continue;
        if (want(c, &f, WT_LEN) != TW_OK)
            return TW_ERR;
        pb s = sub(c, &f);
        if (decode_plugin_data(&s, ev) != TW_OK)
            return TW_ERR;
    }
    return st;
}

static int decode_dim(pb *c, tw_debug_event *ev)
{
    int64_t size = 0;
    pb_field f;
    int st;
    while (next_field(c, &f, &st)) {
        if (f.number != 1)
            continue;
        if (want(c, &f, WT_VARINT) != TW_OK)
            return TW_ERR;
        size = (int64_t)f.v;
    }
    if (st != TW_OK)
        return TW_ERR;
    if (size < 0)
        return fail(c, "negative tensor dimension");
    if (ev->ndims >= TW_DEBUG_MAX_DIMS)
        return fail(c, "tensor has more than 16 dimensions");
    ev->dims[ev->ndims++] = size;
    return TW_OK;
}

static int decode_shape(pb *c, tw_debug_event *ev)
{
    ev->ndims = 0; /* a repeated shape field: the last one wins */
    pb_field f;
    int st;
    while (next_field(c, &f, &st)) {
        if (f.number != 2)
            continue;
        if (want(c, &f, WT_LEN) != TW_OK)
            return TW_ERR;
        pb s = sub(c, &f);
        if (decode_dim(&s, ev) != TW_OK)
            return TW_ERR;
    }
    return st;
}

static int decode_tensor(pb *c, tw_debug_event *ev)
{
    ev->has_tensor = 1;
    pb_field f;
    int st;
    while (next_field(c, &f, &st)) {
        switch (f.number) {
        case 1:
            if (want(c, &f, WT_VARINT) != TW_OK)
                return TW_ERR;
            if (f.v > 1000)
                return fail(c, "dtype out of range");
            ev->dtype = (int)f.v;
            break;
        case 2: {
            if (want(c, &f, WT_LEN) != TW_OK)
                return TW_ERR;
            pb s = sub(c, &f);
            if (decode_shape(&s, ev) != TW_OK)
                return TW_ERR;
            break;
        }
        case 4:
            if (want(c, &f, WT_LEN) != TW_OK)
                return TW_ERR;
            ev->content = f.data;
            ev->content_len = f.len;
            break;
        case 8:
            if (want(c, &f, WT_LEN) != TW_OK)
                return TW_ERR;
            ev->nstrings++;
            break;
        default:
            break;
        }
    }
    return st;
}

static int decode_value(pb *c, tw_debug_event *ev)
{
    ev->has_value = 1;
    pb_field f;
    int st;
    while (next_field(c, &f, &st)) {
        if (f.number != 1 && f.number != 8 && f.number != 9)
            continue;
        if (want(c, &f, WT_LEN) != TW_OK)
            return TW_ERR;
        pb s = sub(c, &f);
        if (f.number == 1) {
            ev->tag = (const char *)f.data;
            ev->tag_len = f.len;
        } else if (f.number == 8) {
            if (decode_tensor(&s, ev) != TW_OK)
                return TW_ERR;
        } else if (decode_metadata(&s, ev) != TW_OK) {
            return TW_ERR;
        }
    }
    return st;
}

static int decode_summary(pb *c, tw_debug_event *ev)
{
    pb_field f;
    int st;
    while (next_field(c, &f, &st)) {
        if (f.number != 1)
            continue;
        if (want(c, &f, WT_LEN) != TW_OK)
            return TW_ERR;
        /* One value per record is all the writer makes; take the first. */
        if (ev->has_value)
            continue;
        pb s = sub(c, &f);
        if (decode_value(&s, ev) != TW_OK)
            return TW_ERR;
    }
    return st;
}

int tw_debug_event_decode(const uint8_t *p, size_t n, tw_debug_event *ev,
                          char *err, size_t errlen)
{
    memset(ev, 0, sizeof(*ev));
    pb c = {p, n, 0, 0, err, errlen};
    pb_field f;
    int st;
    while (next_field(&c, &f, &st)) {
        switch (f.number) {
        case 1: {
            if (want(&c, &f, WT_I64) != TW_OK)
                return TW_ERR;
            double d;
            memcpy(&d, &f.v, sizeof(d));
            ev->wall_time = d;
            break;
        }
        case 2:
            if (want(&c, &f, WT_VARINT) != TW_OK)
                return TW_ERR;
            ev->step = (int64_t)f.v;
            break;
        case 5: {
            if (want(&c, &f, WT_LEN) != TW_OK)
                return TW_ERR;
            pb s = sub(&c, &f);
            if (decode_summary(&s, ev) != TW_OK)
                return TW_ERR;
            break;
        }
        default:
            break;
        }
    }
    return st;
}
