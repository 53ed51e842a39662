/* debug_index.c - index files of a debug-output folder (debug_index.h). */
#include "debug_index.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = {"", "TRAIN", "EVAL", "PREDICT",
                                         "GLOBAL"};

const char *tw_debug_mode_name(tw_mode mode)
{
    return (int)mode >= 0 && (int)mode <= 4 ? mode_names[mode] : "";
}

static int mode_of(const char *s, tw_mode *out)
{
    for (int i = 1; i <= 4; i++)
        if (strcmp(s, mode_names[i]) == 0) {
            *out = (tw_mode)i;
            return TW_OK;
        }
    return TW_ERR;
}

static int safe_relative(const char *p)
{
    if (p[0] == '\0' || p[0] == '/')
        return 0;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return 0;
        s += n + (e != NULL);
    }
    return 1;
}

static int parse_meta(json_t *meta, tw_debug_index *ix, char *err,
                      size_t errlen)
{
    const char *mode = json_string_value(json_object_get(meta, "mode"));
    json_t *ms = json_object_get(meta, "mode_step");
    if (mode == NULL || mode_of(mode, &ix->mode) != TW_OK) {
        snprintf(err, errlen,
                 "meta.mode is not TRAIN, EVAL, PREDICT or GLOBAL");
        return TW_ERR;
    }
    if (!json_is_integer(ms) || json_integer_value(ms) < 0) {
        snprintf(err, errlen, "meta.mode_step is not a non-negative integer");
        return TW_ERR;
    }
    ix->mode_step = json_integer_value(ms);
    json_t *ef = json_object_get(meta, "event_file_name");
    if (ef != NULL) {
        ix->event_file = json_string_value(ef);
        if (ix->event_file == NULL || !safe_relative(ix->event_file)) {
            snprintf(err, errlen,
                     "meta.event_file_name is not a relative path inside "
                     "the folder");
            return TW_ERR;
        }
    }
    return TW_OK;
}

static int parse_entries(json_t *payload, tw_debug_index *ix, char *err,
                         size_t errlen)
{
    size_t n = json_array_size(payload);
    if (n == 0)
        return TW_OK;
    ix->entries = calloc(n, sizeof(*ix->entries));
    if (ix->entries == NULL) {
        snprintf(err, errlen, "out of memory for %zu index entries", n);
        return TW_ERR;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(payload, i);
        const char *name = json_string_value(json_object_get(e, "tensorname"));
        json_t *start = json_object_get(e, "start_idx");
        json_t *length = json_object_get(e, "length");
        if (name == NULL || !json_is_integer(start) ||
            !json_is_integer(length) || json_integer_value(start) < 0 ||
            json_integer_value(length) < 0) {
            snprintf(err, errlen,
                     "tensor_payload[%zu] lacks a tensorname or a "
                     "non-negative start_idx and length",
                     i);
            return TW_ERR;
        }
        ix->entries[i] = (tw_debug_index_entry){name, json_integer_value(start),
                                                json_integer_value(length)};
    }
    ix->nentries = n;
    if (ix->event_file == NULL) {
        snprintf(err, errlen, "tensor_payload without meta.event_file_name");
        return TW_ERR;
    }
    return TW_OK;
}

int tw_debug_index_parse(const char *text, size_t len, tw_debug_index *out,
                         char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        snprintf(err, errlen, "not JSON: %s (line %d, column %d)", je.text,
                 je.line, je.column);
        return TW_ERR;
    }
    out->json = root;
    json_t *meta = json_object_get(root, "meta");
    json_t *tp = json_object_get(root, "tensor_payload");
    json_t *sp = json_object_get(root, "shape_payload");
    if (!json_is_object(meta) || json_object_size(meta) == 0) {
        snprintf(err, errlen, "no non-empty \"meta\" object");
        goto bad;
    }
    if ((tp != NULL && !json_is_array(tp)) ||
        (sp != NULL && !json_is_array(sp)) || (tp == NULL && sp == NULL)) {
        snprintf(err, errlen,
                 "neither a tensor_payload nor a shape_payload array");
        goto bad;
    }
    if (parse_meta(meta, out, err, errlen) != TW_OK ||
        parse_entries(tp, out, err, errlen) != TW_OK)
        goto bad;
    return TW_OK;
bad:
    tw_debug_index_free(out);
    return TW_ERR;
}

void tw_debug_index_free(tw_debug_index *ix)
{
    free(ix->entries);
    json_decref((json_t *)ix->json);
    memset(ix, 0, sizeof(*ix));
}

int tw_debug_file_name(const char *base, int64_t *step, char *worker,
                       size_t worker_len)
{
    const char *p = base;
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        if (p - base >= 18)
            return TW_ERR;
        v = v * 10 + (*p++ - '0');
    }
    if (p == base || *p != '_')
        return TW_ERR;
    const char *w = p + 1;
    const char *dot = strrchr(w, '.');
    if (dot == NULL || dot == w || (size_t)(dot - w) >= worker_len)
        return TW_ERR;
    memcpy(worker, w, (size_t)(dot - w));
    worker[dot - w] = '\0';
    *step = v;
    return TW_OK;
}
