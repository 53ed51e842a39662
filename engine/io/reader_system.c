/* reader_system.c - system metrics files (JSON lines, RULES.md §1.2) into
 * batches: one open batch per NodeId, each with its own series dictionary
 * deduplicated by (type, name, dimension). */
#include <stdlib.h>
#include <string.h>

#include "event_time.h"
#include "grow.h"
#include "hash.h"
#include "reader_input.h"
#include "reader_internal.h"
#include "reader_json.h"

/* Per-series lookup data kept beside the batch's dictionary. */
typedef struct tw_sys_key {
    uint32_t hash;
    uint32_t type_len, name_len, dim_len;
} tw_sys_key;

/* A batch being filled for one node. Samples and the dictionary grow in
 * malloc'd vectors (owned here) and are copied into the batch's arena
 * when it is handed over. */
typedef struct tw_sys_open {
    tw_batch *batch;
    size_t node_len;
    tw_sample *samples;
    size_t nsamples, samples_cap;
    tw_batch_series *series;
    tw_sys_key *keys;
    size_t nseries, series_cap;
    uint32_t *slots; /* series index + 1; 0 = empty */
    size_t nslots;   /* power of two */
} tw_sys_open;

typedef struct tw_sys_reader {
    const tw_read_ctx *ctx;
    tw_sys_open *open;
    size_t nopen, open_cap;
    size_t last; /* index of the node of the previous line */
} tw_sys_reader;

static uint32_t tw_sys_hash(const tw_json_sysline *l)
{
    uint64_t h = TW_FNV64_BASIS;
    const tw_json_str *parts[3] = {&l->type, &l->name, &l->dimension};
    for (int k = 0; k < 3; k++) {
        const tw_json_str *s = parts[k];
        h = tw_fnv1a64_update(h, s->ptr, s->ptr != NULL ? s->len : 0);
        /* Separator; a null Name hashes apart from "". */
        static const unsigned char sep[2] = {0xff, 0x01};
        h = tw_fnv1a64_update(h, sep, s->ptr == NULL ? 2 : 1);
    }
    return (uint32_t)(h ^ (h >> 32));
}

static int tw_str_eq(const char *a, size_t alen, const tw_json_str *b)
{
    if (a == NULL || b->ptr == NULL)
        return a == NULL && b->ptr == NULL;
    return alen == b->len && memcmp(a, b->ptr, alen) == 0;
}

static void tw_sys_open_release(tw_sys_open *o)
{
    tw_batch_free(o->batch);
    free(o->samples);
    free(o->series);
    free(o->keys);
    free(o->slots);
    memset(o, 0, sizeof(*o));
}

/* Starts a fresh batch (and dictionary) for the node of o. */
static int tw_sys_open_reset(tw_sys_reader *r, tw_sys_open *o, const char *node,
                             size_t node_len)
{
    o->batch = tw_reader_batch_new(r->ctx, node, node_len);
    if (o->batch == NULL)
        return TW_ERR;
    o->node_len = node_len;
    o->nsamples = 0;
    o->nseries = 0;
    if (o->slots != NULL)
        memset(o->slots, 0, o->nslots * sizeof(*o->slots));
    return TW_OK;
}

static int tw_sys_grow_slots(tw_sys_open *o)
{
    size_t n = o->nslots ? o->nslots * 2 : 64;
    uint32_t *slots = calloc(n, sizeof(*slots));
    if (slots == NULL)
        return TW_ERR;
    for (size_t i = 0; i < o->nseries; i++) {
        size_t j = o->keys[i].hash & (n - 1);
        while (slots[j] != 0)
            j = (j + 1) & (n - 1);
        slots[j] = (uint32_t)(i + 1);
    }
    free(o->slots);
    o->slots = slots;
    o->nslots = n;
    return TW_OK;
}

/* Index of the line's series in o's dictionary, added when new. -1: OOM. */
static long tw_sys_series(tw_sys_open *o, const tw_json_sysline *l)
{
    uint32_t h = tw_sys_hash(l);
    if (o->nslots != 0) {
        size_t j = h & (o->nslots - 1);
        while (o->slots[j] != 0) {
            size_t i = o->slots[j] - 1;
            const tw_sys_key *k = &o->keys[i];
            const tw_batch_series *s = &o->series[i];
            if (k->hash == h && tw_str_eq(s->type, k->type_len, &l->type) &&
                tw_str_eq(s->name, k->name_len, &l->name) &&
                tw_str_eq(s->dimension, k->dim_len, &l->dimension))
                return (long)i;
            j = (j + 1) & (o->nslots - 1);
        }
    }
    if ((o->nseries + 1) * 2 > o->nslots && tw_sys_grow_slots(o) != TW_OK)
        return -1;
    if (o->nseries == o->series_cap) {
        size_t n = o->series_cap ? o->series_cap * 2 : 16;
        tw_batch_series *s = realloc(o->series, n * sizeof(*s));
        if (s == NULL)
            return -1;
        o->series = s;
        tw_sys_key *k = realloc(o->keys, n * sizeof(*k));
        if (k == NULL)
            return -1;
        o->keys = k;
        o->series_cap = n;
    }
    tw_arena *a = &o->batch->arena;
    tw_batch_series *s = &o->series[o->nseries];
    s->type = tw_arena_strndup(a, l->type.ptr, l->type.len);
    s->name = tw_arena_strndup(a, l->name.ptr, l->name.len);
    s->dimension = tw_arena_strndup(a, l->dimension.ptr, l->dimension.len);
    if (s->type == NULL || (l->name.ptr != NULL && s->name == NULL) ||
        s->dimension == NULL)
        return -1;
    tw_sys_key *k = &o->keys[o->nseries];
    k->hash = h;
    k->type_len = (uint32_t)l->type.len;
    k->name_len = (uint32_t)l->name.len;
    k->dim_len = (uint32_t)l->dimension.len;
    size_t j = h & (o->nslots - 1);
    while (o->slots[j] != 0)
        j = (j + 1) & (o->nslots - 1);
    o->slots[j] = (uint32_t)(o->nseries + 1);
    return (long)o->nseries++;
}

/* Copies the vectors into the batch's arena and hands it to the sink. */
static int tw_sys_flush(tw_sys_reader *r, tw_sys_open *o)
{
    tw_batch *b = o->batch;
    o->batch = NULL;
    b->nsamples = o->nsamples;
    b->nseries = o->nseries;
    b->samples = tw_arena_alloc(&b->arena, o->nsamples * sizeof(tw_sample));
    b->series = tw_arena_alloc(&b->arena, o->nseries * sizeof(tw_batch_series));
    if (b->samples == NULL || b->series == NULL) {
        tw_batch_free(b);
        return TW_ERR;
    }
    memcpy(b->samples, o->samples, o->nsamples * sizeof(tw_sample));
    memcpy(b->series, o->series, o->nseries * sizeof(tw_batch_series));
    o->nsamples = 0;
    o->nseries = 0;
    return tw_reader_emit(r->ctx, b);
}

/* The open batch for the line's node, created when new. NULL: OOM. */
static tw_sys_open *tw_sys_node(tw_sys_reader *r, const tw_json_str *node)
{
    if (r->nopen > 0) {
        tw_sys_open *o = &r->open[r->last];
        if (o->node_len == node->len &&
            memcmp(o->batch->node, node->ptr, node->len) == 0)
            return o;
        for (size_t i = 0; i < r->nopen; i++) {
            o = &r->open[i];
            if (o->node_len == node->len &&
                memcmp(o->batch->node, node->ptr, node->len) == 0) {
                r->last = i;
                return o;
            }
        }
    }
    if (tw_grow((void **)&r->open, &r->open_cap, r->nopen + 1, sizeof(*r->open),
                4) != TW_OK)
        return NULL;
    tw_sys_open *o = &r->open[r->nopen];
    memset(o, 0, sizeof(*o));
    if (tw_sys_open_reset(r, o, node->ptr, node->len) != TW_OK)
        return NULL;
    r->last = r->nopen++;
    return o;
}

/* One good line. TW_ERR: out of memory or the sink failed. */
static int tw_sys_add(tw_sys_reader *r, const tw_json_sysline *l)
{
    tw_sys_open *o = tw_sys_node(r, &l->node);
    if (o == NULL)
        return TW_ERR;
    long si = tw_sys_series(o, l);
    if (si < 0)
        return TW_ERR;
    if (o->nsamples == o->samples_cap) {
        size_t n = o->samples_cap ? o->samples_cap * 2 : 256;
        if (n > TW_READER_BATCH_MAX)
            n = TW_READER_BATCH_MAX;
        tw_sample *s = realloc(o->samples, n * sizeof(*s));
        if (s == NULL)
            return TW_ERR;
        o->samples = s;
        o->samples_cap = n;
    }
    tw_sample *s = &o->samples[o->nsamples++];
    s->ts = l->timestamp;
    s->value = l->value.d;
    s->series = (uint32_t)si;
    s->flags = l->value.integral ? TW_SAMPLE_INTEGRAL : 0u;
    if (o->nsamples == TW_READER_BATCH_MAX) {
        int rc = tw_sys_flush(r, o);
        if (rc != TW_OK)
            return rc;
        /* Same node, fresh batch and dictionary. */
        return tw_sys_open_reset(r, o, l->node.ptr, l->node.len);
    }
    return TW_OK;
}

static int tw_is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
            return 0;
    return 1;
}

/* Parses buf[s, e) of the input as line number `line`. */
static int tw_sys_line(tw_sys_reader *r, tw_json_parser *jp, const tw_input *in,
                       size_t s, size_t e, uint64_t line)
{
    const tw_read_ctx *c = r->ctx;
    const char *p = in->buf + s;
    size_t n = e - s;
    if (tw_is_blank(p, n))
        return TW_OK;
    c->stats->lines++;
    tw_json_sysline l;
    const char *reason = NULL;
    size_t cap = in->cap + TW_JSON_PADDING - s;
    int rc = tw_json_parse_sysline(jp, p, n, cap, &l, &reason);
    if (rc == TW_JSON_NOMEM)
        return TW_ERR;
    if (rc == TW_OK && !tw_time_s_valid(l.timestamp)) {
        /* beyond int64 ns (year 2262) or ±Inf: no engine time */
        rc = TW_ERR;
        reason = "field \"Timestamp\" is out of range (past year 2262)";
    }
    if (rc != TW_OK) {
        c->stats->bad_lines++;
        tw_reader_report(c, line, "%s", reason);
        return TW_OK;
    }
    return tw_sys_add(r, &l);
}

int tw_reader_read_system(const tw_read_ctx *c)
{
    char err[256];
    tw_input in;
    if (tw_input_open(&in, c->file->path, err, sizeof(err)) != TW_OK) {
        c->stats->bad_files++;
        tw_reader_report(c, 0, "%s", err);
        return TW_OK;
    }
    in.max_cap = TW_READER_MAX_RECORD;
    tw_json_parser *jp = tw_json_parser_new();
    if (jp == NULL) {
        tw_input_close(&in);
        return TW_ERR;
    }
    tw_sys_reader r = {c, NULL, 0, 0, 0};
    uint64_t line = 0;
    int skipping = 0; /* inside an over-long line, already reported */
    int rc = TW_OK;
    while (rc == TW_OK) {
        const char *nl = memchr(in.buf + in.start, '\n', in.end - in.start);
        if (nl == NULL) {
            if (!in.eof) {
                int too_long = 0;
                int got = tw_input_fill(&in, &too_long, err, sizeof(err));
                if (got == TW_ERR && too_long) {
                    if (!skipping) {
                        c->stats->lines++;
                        c->stats->bad_lines++;
                        tw_reader_report(c, line + 1,
                                         "line longer than %u bytes",
                                         TW_READER_MAX_RECORD);
                    }
                    skipping = 1;
                    in.start = in.end;
                } else if (got == TW_ERR) {
                    c->stats->incomplete_files++;
                    tw_reader_report(c, 0, "%s", err);
                    in.eof = 1;
                }
                continue;
            }
            if (in.start < in.end && !skipping)
                rc = tw_sys_line(&r, jp, &in, in.start, in.end, line + 1);
            in.start = in.end;
            break;
        }
        size_t e = (size_t)(nl - in.buf);
        line++;
        if (skipping)
            skipping = 0;
        else
            rc = tw_sys_line(&r, jp, &in, in.start, e, line);
        in.start = e + 1;
    }
    c->stats->bytes += in.bytes;
    for (size_t i = 0; i < r.nopen; i++) {
        tw_sys_open *o = &r.open[i];
        if (rc == TW_OK && o->batch != NULL && o->nsamples > 0)
            rc = tw_sys_flush(&r, o);
        tw_sys_open_release(o);
    }
    free(r.open);
    tw_json_parser_free(jp);
    tw_input_close(&in);
    return rc;
}
