/*
 * job_state.c - exact checkpoint/restore of a whole job (job.h, "checkpoints").
 *
 * Every part is   u32 magic | u16 version | u16 0 | u64 payload length |
 *                 u32 CRC-32 of the payload | payload
 * (fixed fields little-endian; the payload in the ckpt_codec.h encoding).
 *
 * "core" (magic "TWJC", version 1) payload:
 *   str job id; config: iv tick, lateness, idle, u8 external watermark,
 *   u8 semantics, uv rule count;
 *   clock: iv F, F candidate, latest system, latest framework, next start
 *   (continuous), scan limit, uv next scan, u8 flags (F fixed, started,
 *   finished, end marker seen);
 *   stats: uv batches, duplicates, samples, events, late samples, late
 *   events, scans; uv arrivals;
 *   nodes: uv n, str each;
 *   series: uv n, per series uv node, str type, name (may be NULL), dimension;
 *   producers: uv n, per producer str key ("sys:algo-1"), iv newest, uv
 *   highest seq, the seen-window bitmap (u8 0 + 64 u64 words, or u8 1 + uv
 *   run count + alternating run lengths of seen/unseen bits from the newest);
 *   windows: uv length + tw_windows_save bytes;
 *   chunks (batches buffered for open scans): uv n, per chunk uv arrival,
 *   iv order ts, u8 order key (0 node, 1 file path), u8 framework source,
 *   iv min/max sample ns, min start/max end µs, str node, uv seq, iv file ts,
 *   str file path, uv nsamples + (f64 ts, f64 value, uv job series id, uv
 *   flags) each, uv nevents + events (str name, phase, u8 node (0 NULL,
 *   1 the batch's, 2 own str), iv start, end, pid, tid, u8 source, u8 mode,
 *   uv flags, uv nargs + 1 (0 = no args), (str key, str value, u8 kind));
 *   from version 3, iv min/max tensor µs, uv ntensors + tensors (str name,
 *   uv ncollections + str each, iv step, u8 mode, iv mode step, wall µs,
 *   prev step, str dtype, iv numel, uv nshape + iv each, uv nreductions +
 *   (str op, f64 value), uv nraw + f64 each; the node is the batch's).
 *   Version 3 appends uv tensors, late tensors after the data-loss record.
 *   Version 4 writes each chunk's samples and events compactly (see
 *   "version 4" below); the rest is as in version 3.
 *
 * "rule.<i>" (magic "TWJR", version 1) payload: uv i, uv rule count, str
 * rule name, str plugin name, then tw_rule_save's bytes.
 *
 * Segmented checkpoints (tw_job_set_segmented) write version 5:
 *   "core" as version 4 without nodes, series, windows and chunks, and with
 *   uv seq of the next segments after the arrivals;
 *   "dict.<seq>" (magic "TWJD"): uv seq, uv first node index, uv n, str
 *   each; uv first series id, uv n, per series as in "core" but its
 *   strings through a string table as a chunk's event strings;
 *   "windows" (magic "TWJW"): uv series count, tw_windows_save bytes in
 *   its compact form;
 *   "chunks.<seq>" (magic "TWJB"): uv seq, uv n, chunks as in version 4
 *   but each sample's series as the zigzag difference from the previous
 *   sample's (an agent's batch lists its series in id order: one byte).
 *   A segmented job buffers samples in that form (sample_pack.h, job.c):
 *   a save copies the bytes, a restore checks them and keeps them.
 * A segment's seq is below the core's next seq, and dictionary segments
 * must arrive in order without a gap (their first index is checked).
 *
 * Restoring the core runs its parser twice: a check pass that reads the
 * whole blob and changes nothing (the aggregator part is restored into a
 * scratch tw_windows), then an apply pass over the same bytes that can only
 * fail on out-of-memory or a duplicated name.
 *
 * Ownership: the reusable save buffer belongs to the job (j->ckpt, freed by
 * tw_job_free); it is dropped after a save whose largest part passed
 * CKPT_KEEP_BYTES so thousands of idle jobs do not each hold a big buffer.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ckpt_codec.h"
#include "grow.h"
#include "job.h"
#include "job_internal.h"
#include "numeric.h"
#include "sample_pack.h"
#include "tw_assert.h"

#define CORE_MAGIC 0x434a5754u  /* "TWJC" */
#define RULE_MAGIC 0x524a5754u  /* "TWJR" */
#define DICT_MAGIC 0x444a5754u  /* "TWJD" */
#define WIN_MAGIC 0x574a5754u   /* "TWJW" */
#define CHUNK_MAGIC 0x424a5754u /* "TWJB" */
/* Version 2 appends the data-loss record (job_loss.h) to "core"; version 3
 * the buffered debugging tensors and their counters; version 4 writes the
 * buffered samples and events compactly (see the head comment). Older
 * blobs are still read. */
#define STATE_VERSION 4u
#define STATE_VERSION_MIN 1u
#define SEG_VERSION 5u /* segmented core and its parts */
#define HEADER_BYTES 20u
#define CKPT_KEEP_BYTES (256u * 1024u)

enum {
    CLOCK_FIRST_FIXED = 1,
    CLOCK_STARTED = 2,
    CLOCK_FINISHED = 4,
    CLOCK_END_MARKER = 8,
};

static uint32_t crc_of(const uint8_t *p, size_t n)
{
    return (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), p, n);
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Writes the header in front of the payload already in b (which starts
 * with HEADER_BYTES reserved bytes). The buffer is ours: writing through
 * tw_buf_data's pointer is writing our own heap memory. */
static void seal(tw_buf *b, uint32_t magic, unsigned version)
{
    uint8_t *d = (uint8_t *)(uintptr_t)tw_buf_data(b);
    size_t n = tw_buf_len(b) - HEADER_BYTES;
    put_le(d, magic, 4);
    put_le(d + 4, version, 2);
    put_le(d + 6, 0, 2);
    put_le(d + 8, n, 8);
    put_le(d + 16, crc_of(d + HEADER_BYTES, n), 4);
}

/* Checks a part's header; on success *payload and *n are its payload. */
static int unseal(const char *part, const void *data, size_t len,
                  uint32_t magic, const uint8_t **payload, size_t *n,
                  unsigned *version_out, char *err, size_t errlen)
{
    const uint8_t *d = data;
    if (d == NULL || len < HEADER_BYTES) {
        snprintf(err, errlen,
                 "checkpoint part '%s': truncated (%zu bytes, the header "
                 "alone is %u)",
                 part, len, HEADER_BYTES);
        return TW_ERR;
    }
    if (get_le(d, 4) != magic) {
        snprintf(err, errlen,
                 "checkpoint part '%s': not a trainwatch %s checkpoint (bad "
                 "magic)",
                 part,
                 magic == CORE_MAGIC   ? "job core"
                 : magic == RULE_MAGIC ? "job rule"
                 : magic == DICT_MAGIC ? "job dictionary"
                 : magic == WIN_MAGIC  ? "job windows"
                                       : "job batches");
        return TW_ERR;
    }
    unsigned version = (unsigned)get_le(d + 4, 2);
    /* the segment parts exist from version 5 on; core and rules from 1 */
    unsigned vmin = magic == CORE_MAGIC || magic == RULE_MAGIC
                        ? STATE_VERSION_MIN
                        : SEG_VERSION;
    if (version < vmin || version > SEG_VERSION) {
        snprintf(err, errlen,
                 "checkpoint part '%s': version %u, this engine reads "
                 "versions %u to %u",
                 part, version, vmin, SEG_VERSION);
        return TW_ERR;
    }
    if (get_le(d + 6, 2) != 0) {
        snprintf(err, errlen,
                 "checkpoint part '%s': header flags %u unknown to this engine",
                 part, (unsigned)get_le(d + 6, 2));
        return TW_ERR;
    }
    uint64_t want = get_le(d + 8, 8);
    if (want != len - HEADER_BYTES) {
        snprintf(err, errlen,
                 "checkpoint part '%s': %s (payload of %llu bytes announced, "
                 "%zu present)",
                 part,
                 want > len - HEADER_BYTES ? "truncated" : "trailing bytes",
                 (unsigned long long)want, len - HEADER_BYTES);
        return TW_ERR;
    }
    if (get_le(d + 16, 4) != crc_of(d + HEADER_BYTES, len - HEADER_BYTES)) {
        snprintf(err, errlen, "checkpoint part '%s': CRC mismatch (corrupt)",
                 part);
        return TW_ERR;
    }
    *payload = d + HEADER_BYTES;
    *n = len - HEADER_BYTES;
    *version_out = version;
    return TW_OK;
}

/* ---- save ------------------------------------------------------------------
 */

/* The (node, seq) window: 4096 bits, bit i = "max_seq - i was seen". In
 * order streams it is one run of ones, so runs are usually a few bytes. */
static void put_seen(tw_ckw *w, const uint64_t *seen)
{
    uint32_t runs[SEQ_WINDOW + 1];
    size_t nruns = 0;
    int cur = 1; /* runs alternate, the first counts seen bits */
    uint32_t len = 0;
    size_t last = 0; /* runs up to the last run of ones */
    for (size_t wi = 0; wi < SEQ_WINDOW / 64; wi++) {
        uint64_t word = seen[wi];
        if (word == (cur ? UINT64_MAX : 0)) {
            len += 64;
            continue;
        }
        for (unsigned b = 0; b < 64; b++) {
            int bit = (int)((word >> b) & 1u);
            if (bit != cur) {
                runs[nruns++] = len;
                if (cur)
                    last = nruns;
                cur = bit;
                len = 0;
            }
            len++;
        }
    }
    runs[nruns++] = len;
    if (cur)
        last = nruns;
    /* trailing unseen bits are implied */
    size_t bytes = 0;
    for (size_t i = 0; i < last; i++)
        bytes += runs[i] < 128 ? 1 : 2;
    if (bytes + 3 >= 8 * (SEQ_WINDOW / 64)) {
        tw_ckw_u8(w, 0);
        for (size_t wi = 0; wi < SEQ_WINDOW / 64; wi++)
            tw_ckw_u64(w, seen[wi]);
        return;
    }
    tw_ckw_u8(w, 1);
    tw_ckw_uv(w, last);
    for (size_t i = 0; i < last; i++)
        tw_ckw_uv(w, runs[i]);
}

/* ---- version 4: compact buffered samples and events ------------------------
 * Samples: one uv header, series << 3 | has flags << 2 | same ts as the
 * previous sample << 1 | value in exact hundredths; then the ts bits unless
 * the same, the value as iv hundredths or f64 bits, the flags if any. An
 * agent's batch samples every series at one instant with values of limited
 * precision, so a sample takes 3-5 bytes instead of 18.
 * Events: the deltas of start (from the previous event's), end (from its
 * start), pid and tid (from the previous event's), as iv with wrapping
 * arithmetic so every int64 round-trips; their strings through the chunk's
 * dictionary: uv 0 NULL, 1 + str a new string (remembered while the chunk
 * has fewer than DICT_MAX), k >= 2 the (k - 2)th remembered one. */
#define DICT_MAX 256
#define DICT_SLOTS 512 /* the writer's hash of the remembered strings */

typedef struct str_dict_w {
    const char *s[DICT_MAX];
    size_t n;
    uint16_t slot[DICT_SLOTS]; /* index + 1 into s, 0 = empty */
} str_dict_w;

typedef struct str_dict_r {
    const char *s[DICT_MAX];
    size_t len[DICT_MAX];
    const char *copy[DICT_MAX]; /* its copy in the batch (get_chunk) */
    size_t n;
} str_dict_r;

static int64_t wrap_sub(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

static int64_t wrap_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s != '\0'; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void put_dict_str(tw_ckw *w, str_dict_w *d, const char *s)
{
    if (s == NULL) {
        tw_ckw_uv(w, 0);
        return;
    }
    uint32_t slot = str_hash(s) % DICT_SLOTS;
    uint16_t at = d->slot[slot];
    if (at != 0 && strcmp(d->s[at - 1], s) == 0) {
        tw_ckw_uv(w, (uint64_t)at + 1);
        return;
    }
    tw_ckw_uv(w, 1);
    tw_ckw_str(w, s);
    if (d->n < DICT_MAX) {
        d->s[d->n++] = s;
        if (at == 0)
            d->slot[slot] = (uint16_t)d->n;
    }
}

/* The string put_dict_str wrote: *s NULL for NULL; 0 on a malformed blob.
 * *at: its index among the remembered strings, or -1. */
static int get_dict_str_at(tw_ckr *r, str_dict_r *d, const char **s, size_t *n,
                           int *at)
{
    *s = NULL;
    *n = 0;
    *at = -1;
    uint64_t k = tw_ckr_uv(r);
    if (r->why != NULL || k == 0)
        return r->why == NULL;
    if (k == 1) {
        if (!tw_ckr_str(r, s, n))
            return 0;
        if (*s == NULL) {
            tw_ckr_fail(r, "a new dictionary string that is NULL");
            return 0;
        }
        if (d->n < DICT_MAX) {
            *at = (int)d->n;
            d->s[d->n] = *s;
            d->copy[d->n] = NULL;
            d->len[d->n++] = *n;
        }
        return 1;
    }
    if (k - 2 >= d->n) {
        tw_ckr_fail(r, "a string reference past the chunk's dictionary");
        return 0;
    }
    *at = (int)(k - 2);
    *s = d->s[k - 2];
    *n = d->len[k - 2];
    return 1;
}

static int get_dict_str(tw_ckr *r, str_dict_r *d, const char **s, size_t *n)
{
    int at;
    return get_dict_str_at(r, d, s, n, &at);
}

/* A chunk string: through the dictionary from version 4 (d != NULL). */
static int get_str(tw_ckr *r, str_dict_r *d, const char **s, size_t *n)
{
    return d != NULL ? get_dict_str(r, d, s, n) : tw_ckr_str(r, s, n);
}

/* delta_series: version 5 segments (see the head comment) */
static void put_batch_chunk(tw_ckw *w, const chunk *c, int delta_series)
{
    const tw_batch *b = c->batch;
    tw_ckw_uv(w, c->arrival);
    tw_ckw_iv(w, c->order_ts);
    tw_ckw_u8(w, b->file_path != NULL && c->order_name == b->file_path);
    tw_ckw_u8(w, (uint8_t)c->source);
    tw_ckw_iv(w, c->min_ns);
    tw_ckw_iv(w, c->max_ns);
    tw_ckw_iv(w, c->min_start_us);
    tw_ckw_iv(w, c->max_end_us);
    tw_ckw_str(w, b->node);
    tw_ckw_uv(w, b->seq);
    tw_ckw_iv(w, b->file_ts_us);
    tw_ckw_str(w, b->file_path);
    size_t ns = chunk_nsamples(c);
    tw_ckw_uv(w, ns);
    tw_sample_cursor out;
    tw_sample_cursor_init(&out, delta_series);
    if (c->packed != NULL && delta_series) {
        tw_ckw_bytes(w, c->packed, c->packed_len); /* the same form */
    } else if (c->packed != NULL) {
        tw_ckr r;
        tw_ckr_init(&r, c->packed, c->packed_len);
        tw_sample_cursor in;
        tw_sample_cursor_init(&in, 1);
        for (size_t i = 0; i < ns; i++) {
            tw_sample s;
            const char *bad = tw_sample_unpack(&r, &in, SIZE_MAX, &s);
            TW_ASSERT(bad == NULL);
            tw_sample_pack(w, &out, &s);
        }
    } else {
        for (size_t i = 0; i < ns; i++)
            tw_sample_pack(w, &out, &b->samples[i]);
    }
    tw_ckw_uv(w, b->nevents);
    str_dict_w dict;
    memset(&dict, 0, sizeof(dict));
    int64_t prev_start = 0, prev_pid = 0, prev_tid = 0;
    for (size_t i = 0; i < b->nevents; i++) {
        const tw_fw_event *e = &b->events[i];
        put_dict_str(w, &dict, e->name);
        put_dict_str(w, &dict, e->phase);
        if (e->node == NULL) {
            tw_ckw_u8(w, 0);
        } else if (b->node != NULL && strcmp(e->node, b->node) == 0) {
            tw_ckw_u8(w, 1);
        } else {
            tw_ckw_u8(w, 2);
            put_dict_str(w, &dict, e->node);
        }
        tw_ckw_iv(w, wrap_sub(e->start_us, prev_start));
        tw_ckw_iv(w, wrap_sub(e->end_us, e->start_us));
        tw_ckw_iv(w, wrap_sub(e->pid, prev_pid));
        tw_ckw_iv(w, wrap_sub(e->tid, prev_tid));
        prev_start = e->start_us;
        prev_pid = e->pid;
        prev_tid = e->tid;
        tw_ckw_u8(w, (uint8_t)e->source);
        tw_ckw_u8(w, (uint8_t)e->mode);
        tw_ckw_uv(w, e->flags);
        tw_ckw_uv(w, e->args == NULL ? 0 : (uint64_t)e->nargs + 1);
        for (uint32_t a = 0; e->args != NULL && a < e->nargs; a++) {
            put_dict_str(w, &dict, e->args[a].key);
            put_dict_str(w, &dict, e->args[a].value);
            tw_ckw_u8(w, (uint8_t)e->args[a].kind);
        }
    }
    tw_ckw_iv(w, c->min_tensor_us);
    tw_ckw_iv(w, c->max_tensor_us);
    tw_ckw_uv(w, b->ntensors);
    for (size_t i = 0; i < b->ntensors; i++) {
        const tw_tensor *t = &b->tensors[i];
        tw_ckw_str(w, t->name);
        tw_ckw_uv(w, t->ncollections);
        for (uint32_t k = 0; k < t->ncollections; k++)
            tw_ckw_str(w, t->collections[k]);
        tw_ckw_iv(w, t->step);
        tw_ckw_u8(w, (uint8_t)t->mode);
        tw_ckw_iv(w, t->mode_step);
        tw_ckw_iv(w, t->wall_us);
        tw_ckw_iv(w, t->prev_step);
        tw_ckw_str(w, t->dtype);
        tw_ckw_iv(w, t->numel);
        tw_ckw_uv(w, t->nshape);
        for (uint32_t k = 0; k < t->nshape; k++)
            tw_ckw_iv(w, t->shape[k]);
        tw_ckw_uv(w, t->nreductions);
        for (uint32_t k = 0; k < t->nreductions; k++) {
            tw_ckw_str(w, t->reductions[k].op);
            tw_ckw_f64(w, t->reductions[k].value);
        }
        tw_ckw_uv(w, t->nraw);
        for (uint32_t k = 0; k < t->nraw; k++)
            tw_ckw_f64(w, t->raw[k]);
    }
}

static void put_producers(tw_ckw *w, const tw_job *j)
{
    tw_ckw_uv(w, j->nproducers);
    for (size_t i = 0; i < j->nproducers; i++) {
        const producer *p = &j->producers[i];
        tw_ckw_str(w, p->name);
        tw_ckw_iv(w, p->newest_us);
        tw_ckw_uv(w, p->max_seq);
        put_seen(w, p->seen);
    }
}

/* seg_next: the segmented core's next seq (0: a whole version 4 core) */
static int build_core(tw_job *j, tw_buf *b, uint64_t seg_next)
{
    static const uint8_t zero[HEADER_BYTES];
    tw_ckw w = {b, 0};
    tw_ckw_bytes(&w, zero, sizeof(zero));
    tw_ckw_str(&w, j->id);
    tw_ckw_iv(&w, j->cfg.tick_us);
    tw_ckw_iv(&w, j->cfg.lateness_us);
    tw_ckw_iv(&w, j->cfg.idle_node_us);
    tw_ckw_u8(&w, (uint8_t)(j->cfg.external_watermark != 0));
    tw_ckw_u8(&w, (uint8_t)j->cfg.semantics);
    tw_ckw_uv(&w, j->nrules);

    tw_ckw_iv(&w, j->first_us);
    tw_ckw_iv(&w, j->first_candidate_us);
    tw_ckw_iv(&w, j->latest_system_us);
    tw_ckw_iv(&w, j->latest_framework_us);
    tw_ckw_iv(&w, j->next_start_us);
    tw_ckw_iv(&w, j->scan_limit_us);
    tw_ckw_uv(&w, j->next_scan);
    tw_ckw_u8(&w, (uint8_t)((j->first_fixed ? CLOCK_FIRST_FIXED : 0) |
                            (j->started ? CLOCK_STARTED : 0) |
                            (j->finished ? CLOCK_FINISHED : 0) |
                            (j->end_marker ? CLOCK_END_MARKER : 0)));

    const tw_job_stats *st = &j->stats;
    tw_ckw_uv(&w, st->batches);
    tw_ckw_uv(&w, st->duplicate_batches);
    tw_ckw_uv(&w, st->samples);
    tw_ckw_uv(&w, st->events);
    tw_ckw_uv(&w, st->late_samples);
    tw_ckw_uv(&w, st->late_events);
    tw_ckw_uv(&w, st->scans);
    tw_ckw_uv(&w, j->arrivals);
    if (seg_next != 0) {
        tw_ckw_uv(&w, seg_next);
        put_producers(&w, j);
        tw_job_loss_save(&j->loss, &w);
        tw_ckw_uv(&w, j->stats.tensors);
        tw_ckw_uv(&w, j->stats.late_tensors);
        if (w.failed)
            return TW_ERR;
        seal(b, CORE_MAGIC, SEG_VERSION);
        return TW_OK;
    }

    tw_ckw_uv(&w, j->nnodes);
    for (size_t i = 0; i < j->nnodes; i++)
        tw_ckw_str(&w, j->nodes[i]);
    tw_ckw_uv(&w, j->nseries);
    for (size_t i = 0; i < j->nseries; i++) {
        const tw_series *s = &j->series[i];
        tw_ckw_uv(&w, s->node);
        tw_ckw_str(&w, s->type);
        tw_ckw_str(&w, s->name);
        tw_ckw_str(&w, s->dimension);
    }
    put_producers(&w, j);

    /* windows, length-prefixed: reserve a fixed 5-byte varint (a windows
     * blob under 32 GiB) and patch it, to avoid a second buffer */
    uint8_t lenpad[5] = {0x80, 0x80, 0x80, 0x80, 0x00};
    size_t lenpos = tw_buf_len(b);
    tw_ckw_bytes(&w, lenpad, sizeof(lenpad));
    if (w.failed || tw_windows_save(j->windows, b, 0) != TW_OK)
        return TW_ERR;
    uint64_t wlen = tw_buf_len(b) - lenpos - sizeof(lenpad);
    if (wlen >= (1ull << 35))
        return TW_ERR;
    uint8_t *d = (uint8_t *)(uintptr_t)tw_buf_data(b) + lenpos;
    for (int i = 0; i < 5; i++)
        d[i] = (uint8_t)(((wlen >> (7 * i)) & 0x7f) | (i < 4 ? 0x80 : 0));

    tw_ckw_uv(&w, j->nchunks);
    for (size_t i = 0; i < j->nchunks && !w.failed; i++)
        put_batch_chunk(&w, &j->chunks[i], 0);
    tw_job_loss_save(&j->loss, &w);
    tw_ckw_uv(&w, j->stats.tensors);
    tw_ckw_uv(&w, j->stats.late_tensors);
    if (w.failed)
        return TW_ERR;
    seal(b, CORE_MAGIC, STATE_VERSION);
    return TW_OK;
}

static int build_rule(tw_job *j, size_t i, tw_buf *b)
{
    static const uint8_t zero[HEADER_BYTES];
    tw_rule *r = j->rules[i];
    tw_ckw w = {b, 0};
    tw_ckw_bytes(&w, zero, sizeof(zero));
    tw_ckw_uv(&w, i);
    tw_ckw_uv(&w, j->nrules);
    tw_ckw_str(&w, tw_rule_name(r));
    tw_ckw_str(&w, tw_rule_descriptor_of(r)->name);
    if (w.failed || tw_rule_save(r, b) != TW_OK)
        return TW_ERR;
    seal(b, RULE_MAGIC, STATE_VERSION);
    return TW_OK;
}

int tw_job_dirty(const tw_job *j)
{
    return j->core_changes != j->core_saved ||
           j->rules_changes != j->rules_saved;
}

void tw_job_set_segmented(tw_job *j)
{
    j->segmented = 1;
}

void tw_job_chunk_released_(tw_job *j, const chunk *c)
{
    if (c->seg == 0)
        return;
    /* batches leave roughly in arrival order: the oldest segments first */
    for (size_t i = 0; i < j->ncsegs; i++)
        if (j->csegs[i].seq == c->seg) {
            TW_ASSERT(j->csegs[i].live > 0);
            j->csegs[i].live--;
            return;
        }
    TW_ASSERT(!"a buffered batch names a segment the job does not track");
}

/* "dict.<seq>": nodes [n0, n1) and series [s0, s1). */
static int build_dict(tw_job *j, tw_buf *b, uint64_t seq, size_t n0, size_t n1,
                      size_t s0, size_t s1)
{
    static const uint8_t zero[HEADER_BYTES];
    tw_ckw w = {b, 0};
    tw_ckw_bytes(&w, zero, sizeof(zero));
    tw_ckw_uv(&w, seq);
    tw_ckw_uv(&w, n0);
    tw_ckw_uv(&w, n1 - n0);
    for (size_t i = n0; i < n1; i++)
        tw_ckw_str(&w, j->nodes[i]);
    tw_ckw_uv(&w, s0);
    tw_ckw_uv(&w, s1 - s0);
    /* types and dimensions repeat: through a string table as a chunk's
     * event strings */
    str_dict_w *strs = calloc(1, sizeof(*strs));
    if (strs == NULL)
        return TW_ERR;
    for (size_t i = s0; i < s1; i++) {
        const tw_series *s = &j->series[i];
        tw_ckw_uv(&w, s->node);
        put_dict_str(&w, strs, s->type);
        put_dict_str(&w, strs, s->name);
        put_dict_str(&w, strs, s->dimension);
    }
    free(strs);
    if (w.failed)
        return TW_ERR;
    seal(b, DICT_MAGIC, SEG_VERSION);
    return TW_OK;
}

static int build_windows(tw_job *j, tw_buf *b)
{
    static const uint8_t zero[HEADER_BYTES];
    tw_ckw w = {b, 0};
    tw_ckw_bytes(&w, zero, sizeof(zero));
    tw_ckw_uv(&w, j->nseries);
    if (w.failed || tw_windows_save(j->windows, b, 1) != TW_OK)
        return TW_ERR;
    seal(b, WIN_MAGIC, SEG_VERSION);
    return TW_OK;
}

/* "chunks.<seq>": the buffered batches whose seg is `match` (0: the
 * unsaved ones, about to become segment seq). */
static int build_chunks(tw_job *j, tw_buf *b, uint64_t seq, uint64_t match)
{
    static const uint8_t zero[HEADER_BYTES];
    tw_ckw w = {b, 0};
    tw_ckw_bytes(&w, zero, sizeof(zero));
    size_t n = 0;
    for (size_t i = 0; i < j->nchunks; i++)
        n += j->chunks[i].seg == match;
    tw_ckw_uv(&w, seq);
    tw_ckw_uv(&w, n);
    for (size_t i = 0; i < j->nchunks && !w.failed; i++)
        if (j->chunks[i].seg == match)
            put_batch_chunk(&w, &j->chunks[i], 1);
    if (w.failed)
        return TW_ERR;
    seal(b, CHUNK_MAGIC, SEG_VERSION);
    return TW_OK;
}

/* One save's emits from the job's reusable buffer. */
typedef struct save_run {
    tw_job *j;
    tw_job_part_fn emit;
    void *ud;
    size_t biggest;
    char *err;
    size_t errlen;
} save_run;

/* Emits what a build_* just left in j->ckpt (built: its result); `rule`
 * names the rule of a "rule.<i>" part for the message. */
static int emit_built(save_run *sr, const char *part, int built,
                      const char *rule)
{
    tw_job *j = sr->j;
    if (built != TW_OK) {
        snprintf(sr->err, sr->errlen,
                 "job %s: checkpoint part '%s'%s%s: cannot save (out of "
                 "memory or the rule failed)",
                 j->id, part, rule ? " " : "", rule ? rule : "");
        return TW_ERR;
    }
    size_t n = tw_buf_len(j->ckpt);
    if (n > sr->biggest)
        sr->biggest = n;
    if (sr->emit(sr->ud, part, tw_buf_data(j->ckpt), n) != TW_OK) {
        snprintf(sr->err, sr->errlen,
                 "job %s: checkpoint part '%s': the store refused it", j->id,
                 part);
        return TW_ERR;
    }
    tw_buf_clear(j->ckpt);
    return TW_OK;
}

static int emit_removal(save_run *sr, const char *part)
{
    if (sr->emit(sr->ud, part, NULL, 0) != TW_OK) {
        snprintf(sr->err, sr->errlen,
                 "job %s: checkpoint part '%s': the store refused its "
                 "removal",
                 sr->j->id, part);
        return TW_ERR;
    }
    return TW_OK;
}

static int save_rules(save_run *sr)
{
    tw_job *j = sr->j;
    char part[32];
    for (size_t i = 0; i < j->nrules; i++) {
        snprintf(part, sizeof(part), "rule.%zu", i);
        if (emit_built(sr, part, build_rule(j, i, j->ckpt),
                       tw_rule_name(j->rules[i])) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

/* A whole version 4 core; segments left by a segmented past (a restore)
 * are removed, since the core now holds what they held. */
static int save_whole(save_run *sr, int core, int rules)
{
    tw_job *j = sr->j;
    char part[48];
    if (core &&
        emit_built(sr, "core", build_core(j, j->ckpt, 0), NULL) != TW_OK)
        return TW_ERR;
    if (core) {
        for (size_t i = 0; i < j->ndsegs; i++) {
            snprintf(part, sizeof(part), "dict.%llu",
                     (unsigned long long)j->dsegs[i].seq);
            if (emit_removal(sr, part) != TW_OK)
                return TW_ERR;
        }
        for (size_t i = 0; i < j->ncsegs; i++) {
            snprintf(part, sizeof(part), "chunks.%llu",
                     (unsigned long long)j->csegs[i].seq);
            if (emit_removal(sr, part) != TW_OK)
                return TW_ERR;
        }
        if (j->windows_saved && emit_removal(sr, "windows") != TW_OK)
            return TW_ERR;
    }
    if (rules && save_rules(sr) != TW_OK)
        return TW_ERR;
    if (core) {
        j->ndsegs = j->ncsegs = 0;
        j->nodes_saved = j->series_saved = 0;
        j->windows_saved = 0;
        for (size_t i = 0; i < j->nchunks; i++)
            j->chunks[i].seg = 0;
    }
    return TW_OK;
}

static int save_segmented(save_run *sr, int only_dirty, int core, int rules)
{
    tw_job *j = sr->j;
    uint64_t seq = j->seg_next != 0 ? j->seg_next : 1;
    size_t unsaved = 0;
    for (size_t i = 0; i < j->nchunks; i++)
        unsaved += j->chunks[i].seg == 0;
    int dict_grew = j->nnodes > j->nodes_saved || j->nseries > j->series_saved;
    int dead = 0;
    for (size_t i = 0; i < j->ncsegs; i++)
        dead |= j->csegs[i].live == 0;
    /* a failed save may have left its chunks.<seq> in the caller's pending
     * list; with nothing to replace it now, it must be removed */
    int stale = unsaved == 0 && j->seg_tried == seq;
    int windows = !only_dirty || !j->windows_saved ||
                  j->windows_changes != j->windows_saved_changes ||
                  j->windows_series != j->nseries;
    uint64_t next = dict_grew || unsaved > 0 ? seq + 1 : seq;
    if (!core && !rules && !windows && !dead && !stale && next == j->seg_next)
        return TW_OK;
    core = core || next != j->seg_next || dead || stale;
    /* the bookkeeping slots first: after the emits nothing may fail */
    if ((dict_grew && tw_grow((void **)&j->dsegs, &j->dsegs_cap, j->ndsegs + 1,
                              sizeof(*j->dsegs), 8) != TW_OK) ||
        (unsaved > 0 &&
         tw_grow((void **)&j->csegs, &j->csegs_cap, j->ncsegs + 1,
                 sizeof(*j->csegs), 16) != TW_OK)) {
        snprintf(sr->err, sr->errlen, "job %s: checkpoint: out of memory",
                 j->id);
        return TW_ERR;
    }
    char part[48];
    if (core &&
        emit_built(sr, "core", build_core(j, j->ckpt, next), NULL) != TW_OK)
        return TW_ERR;
    for (size_t i = 0; !only_dirty && i < j->ndsegs; i++) {
        const dict_seg *d = &j->dsegs[i];
        size_t n1 =
            i + 1 < j->ndsegs ? j->dsegs[i + 1].first_node : j->nodes_saved;
        size_t s1 =
            i + 1 < j->ndsegs ? j->dsegs[i + 1].first_series : j->series_saved;
        snprintf(part, sizeof(part), "dict.%llu", (unsigned long long)d->seq);
        if (emit_built(sr, part,
                       build_dict(j, j->ckpt, d->seq, d->first_node, n1,
                                  d->first_series, s1),
                       NULL) != TW_OK)
            return TW_ERR;
    }
    if (dict_grew) {
        snprintf(part, sizeof(part), "dict.%llu", (unsigned long long)seq);
        if (emit_built(sr, part,
                       build_dict(j, j->ckpt, seq, j->nodes_saved, j->nnodes,
                                  j->series_saved, j->nseries),
                       NULL) != TW_OK)
            return TW_ERR;
    }
    if (windows &&
        emit_built(sr, "windows", build_windows(j, j->ckpt), NULL) != TW_OK)
        return TW_ERR;
    for (size_t i = 0; i < j->ncsegs; i++) {
        const chunk_seg *c = &j->csegs[i];
        snprintf(part, sizeof(part), "chunks.%llu", (unsigned long long)c->seq);
        if (c->live == 0
                ? emit_removal(sr, part) != TW_OK
                : !only_dirty &&
                      emit_built(sr, part,
                                 build_chunks(j, j->ckpt, c->seq, c->seq),
                                 NULL) != TW_OK)
            return TW_ERR;
    }
    snprintf(part, sizeof(part), "chunks.%llu", (unsigned long long)seq);
    if (unsaved > 0) {
        j->seg_tried = seq;
        if (emit_built(sr, part, build_chunks(j, j->ckpt, seq, 0), NULL) !=
            TW_OK)
            return TW_ERR;
    } else if (stale && emit_removal(sr, part) != TW_OK) {
        return TW_ERR;
    }
    if (rules && save_rules(sr) != TW_OK)
        return TW_ERR;

    /* every emit went through: the store will hold what was written */
    if (dict_grew) {
        j->dsegs[j->ndsegs++] =
            (dict_seg){seq, j->nodes_saved, j->series_saved};
        j->nodes_saved = j->nnodes;
        j->series_saved = j->nseries;
    }
    size_t kept = 0;
    for (size_t i = 0; i < j->ncsegs; i++)
        if (j->csegs[i].live > 0)
            j->csegs[kept++] = j->csegs[i];
    j->ncsegs = kept;
    if (unsaved > 0) {
        for (size_t i = 0; i < j->nchunks; i++)
            if (j->chunks[i].seg == 0)
                j->chunks[i].seg = seq;
        j->csegs[j->ncsegs++] = (chunk_seg){seq, unsaved};
    }
    if (windows) {
        j->windows_saved = 1;
        j->windows_series = j->nseries;
        j->windows_saved_changes = j->windows_changes;
    }
    j->seg_next = next;
    j->seg_tried = 0;
    return TW_OK;
}

int tw_job_save(tw_job *j, int only_dirty, tw_job_part_fn emit, void *ud,
                char *err, size_t errlen)
{
    int core = !only_dirty || j->core_changes != j->core_saved;
    int rules = !only_dirty || j->rules_changes != j->rules_saved;
    if (!core && !rules && !j->segmented)
        return TW_OK;
    if (j->ckpt == NULL && (j->ckpt = tw_buf_new()) == NULL) {
        snprintf(err, errlen, "job %s: checkpoint: out of memory", j->id);
        return TW_ERR;
    }
    tw_buf_clear(j->ckpt);
    save_run sr = {j, emit, ud, 0, err, errlen};
    int rc = j->segmented ? save_segmented(&sr, only_dirty, core, rules)
                          : save_whole(&sr, core, rules);
    if (rc == TW_OK) {
        j->core_saved = j->core_changes;
        j->rules_saved = j->rules_changes;
    }
    if (sr.biggest > CKPT_KEEP_BYTES || rc != TW_OK) {
        tw_buf_free(j->ckpt);
        j->ckpt = NULL;
    } else {
        tw_buf_clear(j->ckpt);
    }
    return rc;
}

/* ---- restore: core ---------------------------------------------------------
 */

/* NUL-terminated copies of strings read from a blob, for the lookups. */
typedef struct scratch {
    char *s[3];
    size_t cap[3];
} scratch;

static const char *scratch_put(scratch *sc, int slot, const char *p, size_t n,
                               int *oom)
{
    if (p == NULL)
        return NULL;
    if (n + 1 > sc->cap[slot]) {
        char *q = realloc(sc->s[slot], n + 1);
        if (q == NULL) {
            *oom = 1;
            return NULL;
        }
        sc->s[slot] = q;
        sc->cap[slot] = n + 1;
    }
    memcpy(sc->s[slot], p, n);
    sc->s[slot][n] = '\0';
    return sc->s[slot];
}

static void scratch_free(scratch *sc)
{
    for (int i = 0; i < 3; i++)
        free(sc->s[i]);
}

/* An arena copy of a blob string (NULL stays NULL); *oom on failure. */
static char *arena_str(tw_arena *a, const char *p, size_t n, int *oom)
{
    if (p == NULL)
        return NULL;
    char *q = tw_arena_alloc(a, n + 1);
    if (q == NULL) {
        *oom = 1;
        return NULL;
    }
    memcpy(q, p, n);
    q[n] = '\0';
    return q;
}

/* A buffered event's string: one copy per remembered dictionary string
 * of the chunk (at >= 0), so restored events share their names, phases
 * and keys as the trace reader's batches do (less memory; rules memoize
 * by pointer, rules/common/ptr_memo.h). */
static const char *event_str(tw_arena *a, str_dict_r *d, int at, const char *p,
                             size_t n, int *oom)
{
    if (at < 0)
        return arena_str(a, p, n, oom);
    if (d->copy[at] == NULL)
        d->copy[at] = arena_str(a, p, n, oom);
    return d->copy[at];
}

/* A chunk string and its dictionary index (-1: none, or no dictionary). */
static int get_event_str(tw_ckr *r, str_dict_r *d, const char **s, size_t *n,
                         int *at)
{
    if (d != NULL)
        return get_dict_str_at(r, d, s, n, at);
    *at = -1;
    return tw_ckr_str(r, s, n);
}

typedef struct core_pass {
    tw_job *j;
    tw_ckr r;
    int apply;
    int oom;
    const char *bad;  /* a semantic problem (the reader keeps syntax ones) */
    unsigned version; /* of the blob */
    char detail[256];
    size_t nnodes, nseries;          /* as read from the blob */
    size_t first_node, first_series; /* a dictionary segment's first */
    uint64_t seg_next; /* version 5 core: the next segments' seq */
    uint64_t want_seq; /* a segment: the seq its part name gives */
    str_dict_r strs;   /* a dictionary segment's string table */
    tw_windows *check; /* check pass: scratch aggregator (core) */
    scratch sc;
} core_pass;

static void get_seen(core_pass *cp, uint64_t *seen)
{
    tw_ckr *r = &cp->r;
    uint8_t mode = tw_ckr_u8(r);
    uint64_t words[SEQ_WINDOW / 64];
    memset(words, 0, sizeof(words));
    if (mode == 0) {
        for (size_t i = 0; i < SEQ_WINDOW / 64; i++)
            words[i] = tw_ckr_u64(r);
    } else if (mode == 1) {
        size_t nruns = tw_ckr_count(r, 1);
        uint64_t pos = 0;
        for (size_t i = 0; i < nruns && r->why == NULL; i++) {
            uint64_t len = tw_ckr_uv(r);
            if (len > SEQ_WINDOW - pos) {
                tw_ckr_fail(r, "sequence window runs exceed 4096 bits");
                break;
            }
            if (i % 2 == 0)
                for (uint64_t b = pos; b < pos + len; b++)
                    words[b / 64] |= 1ull << (b % 64);
            pos += len;
        }
    } else if (r->why == NULL) {
        tw_ckr_fail(r, "unknown sequence window encoding");
    }
    if (cp->apply && r->why == NULL)
        memcpy(seen, words, sizeof(words));
}

/* An arena array of n elements of size (at least one), NULL: *oom. */
static void *arena_array(tw_arena *a, size_t n, size_t size, int *oom)
{
    void *p = tw_arena_alloc(a, (n ? n : 1) * size);
    if (p == NULL)
        *oom = 1;
    return p;
}

/* One tensor's fields into *t (strings and arrays into b's arena when b
 * is not NULL, i.e. in the apply pass). */
static int get_tensor(core_pass *cp, tw_batch *b, tw_tensor *t)
{
    tw_ckr *r = &cp->r;
    const char *name, *dtype;
    size_t nname, ndtype;
    tw_ckr_str(r, &name, &nname);
    size_t ncoll = tw_ckr_count(r, 4);
    if (r->why != NULL)
        return TW_ERR;
    if (name == NULL || ncoll > UINT32_MAX) {
        cp->bad = "buffered tensor without a name";
        return TW_ERR;
    }
    const char **coll = NULL;
    if (b != NULL) {
        t->name = arena_str(&b->arena, name, nname, &cp->oom);
        if (ncoll > 0)
            coll = arena_array(&b->arena, ncoll, sizeof(char *), &cp->oom);
        if (cp->oom)
            return TW_ERR;
    }
    for (size_t k = 0; k < ncoll; k++) {
        const char *cn;
        size_t ncn;
        tw_ckr_str(r, &cn, &ncn);
        if (r->why != NULL)
            return TW_ERR;
        if (cn == NULL) {
            cp->bad = "buffered tensor with a NULL collection";
            return TW_ERR;
        }
        if (coll != NULL &&
            (coll[k] = arena_str(&b->arena, cn, ncn, &cp->oom)) == NULL)
            return TW_ERR;
    }
    t->collections = coll;
    t->ncollections = (uint32_t)ncoll;
    t->step = tw_ckr_iv(r);
    uint8_t mode = tw_ckr_u8(r);
    t->mode_step = tw_ckr_iv(r);
    t->wall_us = tw_ckr_iv(r);
    t->prev_step = tw_ckr_iv(r);
    tw_ckr_str(r, &dtype, &ndtype);
    t->numel = tw_ckr_iv(r);
    size_t nshape = tw_ckr_count(r, 1);
    if (r->why != NULL)
        return TW_ERR;
    if (mode > TW_MODE_GLOBAL || nshape > UINT32_MAX) {
        cp->bad = "buffered tensor with a value out of range";
        return TW_ERR;
    }
    t->mode = (tw_mode)mode;
    int64_t *shape = NULL;
    if (b != NULL) {
        t->dtype = arena_str(&b->arena, dtype ? dtype : "", dtype ? ndtype : 0,
                             &cp->oom);
        if (nshape > 0)
            shape = arena_array(&b->arena, nshape, sizeof(int64_t), &cp->oom);
        if (cp->oom)
            return TW_ERR;
    }
    for (size_t k = 0; k < nshape; k++) {
        int64_t d = tw_ckr_iv(r);
        if (shape != NULL)
            shape[k] = d;
    }
    t->shape = shape;
    t->nshape = (uint32_t)nshape;
    size_t nred = tw_ckr_count(r, 9);
    if (r->why != NULL)
        return TW_ERR;
    tw_tensor_reduction *red = NULL;
    if (b != NULL && nred > 0 &&
        (red = arena_array(&b->arena, nred, sizeof(*red), &cp->oom)) == NULL)
        return TW_ERR;
    for (size_t k = 0; k < nred; k++) {
        const char *op;
        size_t nop;
        tw_ckr_str(r, &op, &nop);
        double v = tw_ckr_f64(r);
        if (r->why != NULL)
            return TW_ERR;
        if (op == NULL) {
            cp->bad = "buffered tensor reduction without an op";
            return TW_ERR;
        }
        if (red != NULL) {
            red[k].op = arena_str(&b->arena, op, nop, &cp->oom);
            red[k].value = v;
            if (cp->oom)
                return TW_ERR;
        }
    }
    t->reductions = red;
    t->nreductions = (uint32_t)nred;
    size_t nraw = tw_ckr_count(r, 8);
    if (r->why != NULL)
        return TW_ERR;
    if (nraw > UINT32_MAX) {
        cp->bad = "buffered tensor with too many raw values";
        return TW_ERR;
    }
    double *raw = NULL;
    if (b != NULL && nraw > 0 &&
        (raw = arena_array(&b->arena, nraw, sizeof(double), &cp->oom)) == NULL)
        return TW_ERR;
    for (size_t k = 0; k < nraw; k++) {
        double v = tw_ckr_f64(r);
        if (raw != NULL)
            raw[k] = v;
    }
    t->raw = raw;
    t->nraw = (uint32_t)nraw;
    if (b != NULL)
        t->node = b->node != NULL ? b->node : "";
    return r->why != NULL ? TW_ERR : TW_OK;
}

static int get_tensors(core_pass *cp, tw_batch *b)
{
    size_t n = tw_ckr_count(&cp->r, 10);
    if (cp->r.why != NULL)
        return TW_ERR;
    if (b != NULL && n > 0) {
        b->tensors = arena_array(&b->arena, n, sizeof(tw_tensor), &cp->oom);
        if (b->tensors == NULL)
            return TW_ERR;
    }
    for (size_t i = 0; i < n; i++) {
        tw_tensor t;
        memset(&t, 0, sizeof(t));
        if (get_tensor(cp, b, &t) != TW_OK)
            return TW_ERR;
        if (b != NULL)
            b->tensors[b->ntensors++] = t;
    }
    return TW_OK;
}

static void get_chunk(core_pass *cp)
{
    tw_ckr *r = &cp->r;
    tw_job *j = cp->j;
    chunk c;
    memset(&c, 0, sizeof(c));
    c.arrival = tw_ckr_uv(r);
    c.order_ts = tw_ckr_iv(r);
    uint8_t order_key = tw_ckr_u8(r);
    uint8_t source = tw_ckr_u8(r);
    c.min_ns = tw_ckr_iv(r);
    c.max_ns = tw_ckr_iv(r);
    c.min_start_us = tw_ckr_iv(r);
    c.max_end_us = tw_ckr_iv(r);
    const char *node, *path;
    size_t nnode, npath;
    tw_ckr_str(r, &node, &nnode);
    uint64_t seq = tw_ckr_uv(r);
    int64_t file_ts = tw_ckr_iv(r);
    tw_ckr_str(r, &path, &npath);
    int compact = cp->version >= 4;
    size_t nsamples = tw_ckr_count(r, compact ? 2 : 18);
    if (r->why != NULL)
        return;
    if (order_key > 1 || (order_key == 1 && path == NULL) ||
        source > TW_SOURCE_COUNT) {
        cp->bad = "buffered batch with a bad order key or source";
        return;
    }
    /* a segmented job keeps a segment's samples packed as they are here:
     * checked, then copied (sample_pack.h) */
    int pack = cp->apply && j->segmented && cp->version >= SEG_VERSION;
    const uint8_t *packed = r->p;
    size_t packed_len = 0;
    if (pack) {
        const char *bad = tw_sample_unpack_n(r, nsamples, 1, cp->nseries, NULL);
        if (r->why != NULL)
            return;
        if (bad != NULL) {
            cp->bad = bad;
            return;
        }
        packed_len = (size_t)(r->p - packed);
    }
    c.source = source;
    tw_batch *b = NULL;
    if (cp->apply) {
        if ((b = tw_batch_new()) == NULL) {
            cp->oom = 1;
            return;
        }
        /* a samples-only batch in one block of its size, not a 64 KB one
         * (what buffer_tight in job.c keeps after ingest) */
        size_t need =
            tw_arena_size(strlen(j->id) + 1) + tw_arena_size(nnode + 1) +
            tw_arena_size(npath + 1) +
            tw_arena_size(pack ? packed_len : nsamples * sizeof(tw_sample));
        if (tw_arena_reserve(&b->arena, need) != 0) {
            cp->oom = 1;
            goto out;
        }
        b->job = arena_str(&b->arena, j->id, strlen(j->id), &cp->oom);
        b->node = arena_str(&b->arena, node, nnode, &cp->oom);
        b->seq = seq;
        b->file_ts_us = file_ts;
        b->file_path = arena_str(&b->arena, path, npath, &cp->oom);
        if (pack && packed_len > 0) {
            uint8_t *dst = tw_arena_alloc_uninit(&b->arena, packed_len);
            if (dst == NULL)
                cp->oom = 1;
            else {
                memcpy(dst, packed, packed_len);
                c.packed = dst;
                c.packed_len = packed_len;
                c.npacked = nsamples;
            }
        } else if (!pack && nsamples > 0) {
            /* every sample is written below, or the batch freed */
            b->samples =
                tw_arena_alloc_uninit(&b->arena, nsamples * sizeof(tw_sample));
            if (b->samples == NULL)
                cp->oom = 1;
        }
        if (cp->oom)
            goto out;
    }
    tw_sample_cursor cur;
    tw_sample_cursor_init(&cur, cp->version >= SEG_VERSION);
    for (size_t i = 0; i < nsamples && !pack; i++) {
        tw_sample s;
        if (compact) {
            const char *bad = tw_sample_unpack(r, &cur, cp->nseries, &s);
            if (r->why != NULL)
                goto out;
            if (bad != NULL) {
                cp->bad = bad;
                goto out;
            }
        } else {
            s.ts = tw_ckr_f64(r);
            s.value = tw_ckr_f64(r);
            uint64_t series = tw_ckr_uv(r), flags = tw_ckr_uv(r);
            if (r->why != NULL)
                goto out;
            if (series >= cp->nseries || flags > UINT32_MAX) {
                cp->bad = "buffered sample names a series the dictionary lacks";
                goto out;
            }
            s.series = (uint32_t)series;
            s.flags = (uint32_t)flags;
        }
        if (b != NULL)
            b->samples[i] = s;
    }
    size_t nevents = tw_ckr_count(r, 10);
    if (r->why != NULL)
        goto out;
    if (b != NULL && nevents > 0) {
        b->events = tw_arena_alloc(&b->arena, nevents * sizeof(tw_fw_event));
        if (b->events == NULL) {
            cp->oom = 1;
            goto out;
        }
    }
    str_dict_r dict;
    dict.n = 0;
    int64_t prev_start = 0, prev_pid = 0, prev_tid = 0;
    for (size_t i = 0; i < nevents; i++) {
        tw_fw_event e;
        memset(&e, 0, sizeof(e));
        const char *name, *phase, *enode = NULL;
        size_t nname, nphase, nenode = 0;
        str_dict_r *d = compact ? &dict : NULL;
        int name_at, phase_at, enode_at = -1;
        get_event_str(r, d, &name, &nname, &name_at);
        get_event_str(r, d, &phase, &nphase, &phase_at);
        uint8_t node_kind = tw_ckr_u8(r);
        if (node_kind == 2)
            get_event_str(r, d, &enode, &nenode, &enode_at);
        if (compact) {
            e.start_us = wrap_add(prev_start, tw_ckr_iv(r));
            e.end_us = wrap_add(e.start_us, tw_ckr_iv(r));
            e.pid = wrap_add(prev_pid, tw_ckr_iv(r));
            e.tid = wrap_add(prev_tid, tw_ckr_iv(r));
            prev_start = e.start_us;
            prev_pid = e.pid;
            prev_tid = e.tid;
        } else {
            e.start_us = tw_ckr_iv(r);
            e.end_us = tw_ckr_iv(r);
            e.pid = tw_ckr_iv(r);
            e.tid = tw_ckr_iv(r);
        }
        uint8_t esrc = tw_ckr_u8(r), mode = tw_ckr_u8(r);
        uint64_t flags = tw_ckr_uv(r);
        uint64_t nargs1 = tw_ckr_uv(r);
        if (r->why != NULL)
            goto out;
        if (node_kind > 2 || (node_kind == 1 && node == NULL) ||
            esrc >= TW_SOURCE_COUNT || mode > TW_MODE_GLOBAL ||
            flags > UINT32_MAX || nargs1 > UINT32_MAX ||
            (nargs1 > 0 && nargs1 - 1 > tw_ckr_left(r) / 3)) {
            cp->bad = "buffered event with a value out of range";
            goto out;
        }
        e.source = (tw_source)esrc;
        e.mode = (tw_mode)mode;
        e.flags = (uint32_t)flags;
        e.nargs = nargs1 > 0 ? (uint32_t)(nargs1 - 1) : 0;
        tw_arg *args = NULL;
        if (b != NULL) {
            e.name = event_str(&b->arena, d, name_at, name, nname, &cp->oom);
            e.phase =
                event_str(&b->arena, d, phase_at, phase, nphase, &cp->oom);
            e.node = node_kind == 1 ? b->node
                                    : event_str(&b->arena, d, enode_at, enode,
                                                nenode, &cp->oom);
            if (nargs1 > 0) {
                args = tw_arena_alloc(&b->arena,
                                      (e.nargs ? e.nargs : 1) * sizeof(tw_arg));
                if (args == NULL)
                    cp->oom = 1;
                e.args = args;
            }
            if (cp->oom)
                goto out;
        }
        for (uint32_t a = 0; a < e.nargs; a++) {
            const char *k, *v;
            size_t nk, nv;
            int k_at, v_at;
            get_event_str(r, d, &k, &nk, &k_at);
            get_event_str(r, d, &v, &nv, &v_at);
            uint8_t kind = tw_ckr_u8(r);
            if (r->why != NULL)
                goto out;
            if (kind > TW_ARG_JSON) {
                cp->bad = "buffered event argument of an unknown kind";
                goto out;
            }
            if (args != NULL) {
                args[a].key = event_str(&b->arena, d, k_at, k, nk, &cp->oom);
                args[a].value = event_str(&b->arena, d, v_at, v, nv, &cp->oom);
                args[a].kind = (tw_arg_kind)kind;
                if (cp->oom)
                    goto out;
            }
        }
        if (b != NULL)
            b->events[b->nevents++] = e;
    }
    c.min_tensor_us = INT64_MAX;
    c.max_tensor_us = INT64_MIN;
    if (cp->version >= 3) {
        c.min_tensor_us = tw_ckr_iv(r);
        c.max_tensor_us = tw_ckr_iv(r);
        if (get_tensors(cp, b) != TW_OK)
            goto out;
    }
    if (cp->apply) {
        b->nsamples = pack ? 0 : nsamples;
        c.batch = b;
        c.order_name =
            order_key == 1 ? b->file_path : (b->node != NULL ? b->node : "");
        size_t need = j->nchunks + 1;
        if (need > j->chunks_cap) {
            size_t cap = j->chunks_cap ? 2 * j->chunks_cap : 16;
            chunk *nc = realloc(j->chunks, cap * sizeof(chunk));
            if (nc == NULL) {
                cp->oom = 1;
                goto out;
            }
            j->chunks = nc;
            j->chunks_cap = cap;
        }
        j->chunks[j->nchunks++] = c;
        return;
    }
out:
    tw_batch_free(b);
}

static int core_failed(const core_pass *cp)
{
    return cp->r.why != NULL || cp->bad != NULL || cp->oom;
}

static void get_series(core_pass *cp)
{
    tw_ckr *r = &cp->r;
    tw_job *j = cp->j;
    size_t n = tw_ckr_count(r, 4);
    if (cp->check != NULL)
        for (int m = 0; m < TW_METRIC_COUNT; m++)
            if (tw_windows_request(
                    cp->check, (tw_metric)m,
                    tw_windows_requested(j->windows, (tw_metric)m)) != TW_OK)
                cp->oom = 1;
    for (size_t i = 0; i < n && !core_failed(cp); i++) {
        uint64_t node = tw_ckr_uv(r);
        const char *t, *nm, *dim;
        size_t nt, nnm, ndim;
        /* a dictionary segment's strings go through its string table */
        str_dict_r *d = cp->version >= SEG_VERSION ? &cp->strs : NULL;
        get_str(r, d, &t, &nt);
        get_str(r, d, &nm, &nnm);
        get_str(r, d, &dim, &ndim);
        if (r->why != NULL)
            break;
        if (node >= cp->nnodes || t == NULL || dim == NULL) {
            cp->bad = "series with a bad node index or no type/dimension";
            break;
        }
        tw_batch_series bs;
        bs.type = scratch_put(&cp->sc, 0, t, nt, &cp->oom);
        bs.name = scratch_put(&cp->sc, 1, nm, nnm, &cp->oom);
        bs.dimension = scratch_put(&cp->sc, 2, dim, ndim, &cp->oom);
        if (cp->oom)
            break;
        if (!cp->apply) {
            tw_metric m = tw_metric_classify(bs.type, bs.name, bs.dimension);
            if (cp->check != NULL &&
                tw_windows_add_series(cp->check, (uint32_t)i, m) != TW_OK)
                cp->oom = 1;
            continue;
        }
        uint32_t id;
        if (tw_job_series_id_(j, (uint32_t)node, j->nodes[node], &bs, &id) !=
            TW_OK) {
            cp->oom = 1;
            break;
        }
        if (id != cp->first_series + i) {
            cp->bad = "the dictionary holds the same series twice";
            break;
        }
    }
    cp->nseries = cp->first_series + n;
}

static void get_producers(core_pass *cp)
{
    tw_ckr *r = &cp->r;
    size_t n = tw_ckr_count(r, 4);
    for (size_t i = 0; i < n && !core_failed(cp); i++) {
        const char *key;
        size_t nkey;
        tw_ckr_str(r, &key, &nkey);
        int64_t newest = tw_ckr_iv(r);
        uint64_t max_seq = tw_ckr_uv(r);
        const char *colon = key != NULL ? memchr(key, ':', nkey) : NULL;
        if (r->why == NULL && colon == NULL) {
            cp->bad = "producer key without a kind";
            break;
        }
        producer *p = NULL;
        if (cp->apply) {
            const char *kind =
                scratch_put(&cp->sc, 0, key, (size_t)(colon - key), &cp->oom);
            const char *node =
                scratch_put(&cp->sc, 1, colon + 1,
                            nkey - (size_t)(colon - key) - 1, &cp->oom);
            if (cp->oom ||
                (p = tw_job_producer_get_(cp->j, kind, node)) == NULL) {
                cp->oom = 1;
                break;
            }
            if (tw_job_producer_newest_(cp->j, p, newest) != TW_OK) {
                cp->oom = 1;
                break;
            }
            p->max_seq = max_seq;
        }
        get_seen(cp, p != NULL ? p->seen : NULL);
    }
}

static void get_nodes(core_pass *cp)
{
    tw_ckr *r = &cp->r;
    size_t n = tw_ckr_count(r, 1);
    for (size_t i = 0; i < n && !core_failed(cp); i++) {
        const char *s;
        size_t len;
        tw_ckr_str(r, &s, &len);
        if (r->why != NULL)
            break;
        if (s == NULL) {
            cp->bad = "node without a name";
            break;
        }
        if (!cp->apply)
            continue;
        uint32_t idx;
        const char *name = scratch_put(&cp->sc, 0, s, len, &cp->oom);
        if (cp->oom || tw_job_node_index_(cp->j, name, &idx) != TW_OK) {
            cp->oom = 1;
            break;
        }
        if (idx != cp->first_node + i)
            cp->bad = "the dictionary holds the same node twice";
    }
    cp->nnodes = cp->first_node + n;
}

/* Does F + (k + 2) * tick stay in int64 (so later scans cannot overflow)? */
static int clock_fits(int64_t first, uint64_t k, int64_t tick)
{
    if (tick <= 0)
        return 1;
    int64_t span, end;
    if (k > (uint64_t)INT64_MAX - 2 ||
        __builtin_mul_overflow((int64_t)(k + 2), tick, &span) ||
        __builtin_add_overflow(first, span, &end) ||
        __builtin_add_overflow(end, tick, &end))
        return 0;
    return 1;
}

static void core_pass_run(core_pass *cp)
{
    tw_job *j = cp->j;
    tw_ckr *r = &cp->r;
    const char *id;
    size_t nid;
    tw_ckr_str(r, &id, &nid);
    tw_job_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.tick_us = tw_ckr_iv(r);
    cfg.lateness_us = tw_ckr_iv(r);
    cfg.idle_node_us = tw_ckr_iv(r);
    cfg.external_watermark = tw_ckr_u8(r);
    cfg.semantics = (tw_semantics)tw_ckr_u8(r);
    uint64_t nrules = tw_ckr_uv(r);
    if (r->why != NULL)
        return;
    if (id == NULL || nid != strlen(j->id) || memcmp(id, j->id, nid) != 0) {
        snprintf(cp->detail, sizeof(cp->detail),
                 "it is the checkpoint of job '%.*s'",
                 id ? (int)(nid > 100 ? 100 : nid) : 6, id ? id : "(none)");
        cp->bad = cp->detail;
        return;
    }
    const char *what = NULL;
    long long have = 0, want = 0;
    if (cfg.tick_us != j->cfg.tick_us)
        what = "tick_us", have = cfg.tick_us, want = j->cfg.tick_us;
    else if (cfg.lateness_us != j->cfg.lateness_us)
        what = "lateness_us", have = cfg.lateness_us, want = j->cfg.lateness_us;
    else if (cfg.idle_node_us != j->cfg.idle_node_us)
        what = "idle_node_us", have = cfg.idle_node_us,
        want = j->cfg.idle_node_us;
    else if (cfg.external_watermark != (j->cfg.external_watermark != 0))
        what = "external_watermark", have = cfg.external_watermark,
        want = j->cfg.external_watermark != 0;
    else if (cfg.semantics != j->cfg.semantics)
        what = "semantics", have = cfg.semantics, want = j->cfg.semantics;
    else if (nrules != j->nrules)
        what = "rule count", have = (long long)nrules,
        want = (long long)j->nrules;
    if (what != NULL) {
        snprintf(cp->detail, sizeof(cp->detail),
                 "configuration differs: %s is %lld in the checkpoint, %lld "
                 "in this job",
                 what, have, want);
        cp->bad = cp->detail;
        return;
    }

    int64_t first = tw_ckr_iv(r), cand = tw_ckr_iv(r), lsys = tw_ckr_iv(r),
            lfw = tw_ckr_iv(r), next_start = tw_ckr_iv(r), limit = tw_ckr_iv(r);
    uint64_t next_scan = tw_ckr_uv(r);
    uint8_t flags = tw_ckr_u8(r);
    tw_job_stats st;
    memset(&st, 0, sizeof(st));
    st.batches = tw_ckr_uv(r);
    st.duplicate_batches = tw_ckr_uv(r);
    st.samples = tw_ckr_uv(r);
    st.events = tw_ckr_uv(r);
    st.late_samples = tw_ckr_uv(r);
    st.late_events = tw_ckr_uv(r);
    st.scans = tw_ckr_uv(r);
    uint64_t arrivals = tw_ckr_uv(r);
    if (r->why != NULL)
        return;
    if (flags > 15 || !clock_fits(first, next_scan, cfg.tick_us) ||
        !clock_fits(cand, next_scan, cfg.tick_us)) {
        cp->bad = "clock values out of range";
        return;
    }

    if (cp->version >= SEG_VERSION) {
        /* the dictionary, windows and batches are parts of their own */
        cp->seg_next = tw_ckr_uv(r);
        if (r->why != NULL)
            return;
        if (cp->seg_next == 0) {
            cp->bad = "next segment number 0";
            return;
        }
        get_producers(cp);
        if (core_failed(cp))
            return;
    } else {
        get_nodes(cp);
        if (core_failed(cp))
            return;
        get_series(cp);
        if (core_failed(cp))
            return;
        get_producers(cp);
        if (core_failed(cp))
            return;

        size_t wlen = tw_ckr_count(r, 1);
        const uint8_t *wdata = tw_ckr_bytes(r, wlen);
        if (r->why != NULL)
            return;
        if (tw_windows_restore(cp->apply ? j->windows : cp->check, wdata, wlen,
                               0, cp->detail, sizeof(cp->detail)) != TW_OK) {
            cp->bad = cp->detail;
            return;
        }

        size_t nchunks = tw_ckr_count(r, 20);
        for (size_t i = 0; i < nchunks && !core_failed(cp); i++)
            get_chunk(cp);
        if (core_failed(cp))
            return;
    }
    if (cp->version >= 2 &&
        tw_job_loss_restore(&j->loss, r, cp->apply) != TW_OK)
        cp->oom = 1;
    if (core_failed(cp))
        return;
    if (cp->version >= 3) {
        st.tensors = tw_ckr_uv(r);
        st.late_tensors = tw_ckr_uv(r);
        if (r->why != NULL)
            return;
    }
    if (tw_ckr_left(r) != 0) {
        tw_ckr_fail(r, "trailing bytes");
        return;
    }
    if (!cp->apply)
        return;
    j->first_us = first;
    j->first_candidate_us = cand;
    j->latest_system_us = lsys;
    j->latest_framework_us = lfw;
    j->next_start_us = next_start;
    j->scan_limit_us = limit;
    j->next_scan = next_scan;
    j->first_fixed = (flags & CLOCK_FIRST_FIXED) != 0;
    j->started = (flags & CLOCK_STARTED) != 0;
    j->finished = (flags & CLOCK_FINISHED) != 0;
    j->end_marker = (flags & CLOCK_END_MARKER) != 0;
    j->stats = st;
    j->arrivals = arrivals;
    j->seg_next = cp->seg_next;
}

/* Runs `run` over a part's payload twice: a check pass that changes
 * nothing, then (if it passed) the apply pass; only the apply pass with
 * apply_only (the caller undoes a failed one). check_windows: the core's
 * check pass needs a scratch aggregator. */
static int two_passes(tw_job *j, const char *part, const uint8_t *payload,
                      size_t n, unsigned version, uint64_t want_seq,
                      int check_windows, int apply_only,
                      void (*run)(core_pass *cp), char *err, size_t errlen)
{
    int rc = TW_OK;
    for (int apply = apply_only; apply <= 1 && rc == TW_OK; apply++) {
        core_pass cp;
        memset(&cp, 0, sizeof(cp));
        cp.j = j;
        cp.apply = apply;
        cp.version = version;
        cp.want_seq = want_seq;
        tw_ckr_init(&cp.r, payload, n);
        if (!apply && check_windows && (cp.check = tw_windows_new()) == NULL)
            cp.oom = 1;
        else
            run(&cp);
        if (cp.oom) {
            snprintf(err, errlen, "checkpoint part '%s': out of memory", part);
            rc = TW_ERR;
        } else if (cp.r.why != NULL) {
            snprintf(err, errlen,
                     "checkpoint part '%s': %s at payload byte %zu of %zu",
                     part, cp.r.why, tw_ckr_offset(&cp.r), n);
            rc = TW_ERR;
        } else if (cp.bad != NULL) {
            snprintf(err, errlen, "checkpoint part '%s': %s", part, cp.bad);
            rc = TW_ERR;
        }
        tw_windows_free(cp.check);
        scratch_free(&cp.sc);
    }
    return rc;
}

static int restore_core(tw_job *j, const void *data, size_t len, char *err,
                        size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal("core", data, len, CORE_MAGIC, &payload, &n, &version, err,
               errlen) != TW_OK)
        return TW_ERR;
    if (j->stats.batches != 0 || j->nseries != 0 || j->nnodes != 0 ||
        j->nproducers != 0 || j->nchunks != 0 || j->started || j->finished ||
        j->stats.scans != 0) {
        snprintf(err, errlen,
                 "checkpoint part 'core': job %s is not fresh (restore into a "
                 "job that has ingested nothing and was not restored before)",
                 j->id);
        return TW_ERR;
    }
    int rc = two_passes(j, "core", payload, n, version, 0, 1, 0, core_pass_run,
                        err, errlen);
    if (rc == TW_OK)
        j->core_saved = j->core_changes;
    return rc;
}

/* ---- restore: segments (version 5) -----------------------------------------
 */

/* The checks every segment's seq passes: the one its name gives, and
 * older than the restored core's next. */
static int segment_seq_ok(core_pass *cp, uint64_t seq)
{
    if (cp->r.why != NULL)
        return 0;
    if (seq != cp->want_seq) {
        cp->bad = "its segment number differs from the one in its name";
        return 0;
    }
    if (cp->j->seg_next == 0) {
        cp->bad = "no segmented (version 5) 'core' was restored before it";
        return 0;
    }
    if (seq >= cp->j->seg_next) {
        cp->bad = "it is newer than the core (a core from an older save)";
        return 0;
    }
    return 1;
}

static void dict_pass_run(core_pass *cp)
{
    tw_ckr *r = &cp->r;
    tw_job *j = cp->j;
    uint64_t seq = tw_ckr_uv(r);
    uint64_t n0 = tw_ckr_uv(r);
    if (!segment_seq_ok(cp, seq))
        return;
    if (n0 != j->nnodes) {
        snprintf(cp->detail, sizeof(cp->detail),
                 "it starts at node %llu, the job has %zu (a dictionary "
                 "segment is missing or repeated)",
                 (unsigned long long)n0, j->nnodes);
        cp->bad = cp->detail;
        return;
    }
    cp->first_node = n0;
    get_nodes(cp);
    uint64_t s0 = tw_ckr_uv(r);
    if (core_failed(cp))
        return;
    if (s0 != j->nseries) {
        snprintf(cp->detail, sizeof(cp->detail),
                 "it starts at series %llu, the job has %zu (a dictionary "
                 "segment is missing or repeated)",
                 (unsigned long long)s0, j->nseries);
        cp->bad = cp->detail;
        return;
    }
    cp->first_series = s0;
    get_series(cp);
    if (core_failed(cp))
        return;
    if (tw_ckr_left(r) != 0)
        tw_ckr_fail(r, "trailing bytes");
}

static void chunks_pass_run(core_pass *cp)
{
    tw_ckr *r = &cp->r;
    tw_job *j = cp->j;
    uint64_t seq = tw_ckr_uv(r);
    if (!segment_seq_ok(cp, seq))
        return;
    if (j->ncsegs > 0 && seq <= j->csegs[j->ncsegs - 1].seq) {
        cp->bad = "batch segments restored out of order or twice";
        return;
    }
    size_t n = tw_ckr_count(r, 20);
    cp->nseries = j->nseries;
    for (size_t i = 0; i < n && !core_failed(cp); i++)
        get_chunk(cp);
    if (core_failed(cp))
        return;
    if (tw_ckr_left(r) != 0)
        tw_ckr_fail(r, "trailing bytes");
}

static int restore_dict(tw_job *j, const char *part, uint64_t seq,
                        const void *data, size_t len, char *err, size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal(part, data, len, DICT_MAGIC, &payload, &n, &version, err,
               errlen) != TW_OK)
        return TW_ERR;
    if (tw_grow((void **)&j->dsegs, &j->dsegs_cap, j->ndsegs + 1,
                sizeof(*j->dsegs), 8) != TW_OK) {
        snprintf(err, errlen, "checkpoint part '%s': out of memory", part);
        return TW_ERR;
    }
    size_t n0 = j->nnodes, s0 = j->nseries;
    if (two_passes(j, part, payload, n, version, seq, 0, 0, dict_pass_run, err,
                   errlen) != TW_OK)
        return TW_ERR;
    j->dsegs[j->ndsegs++] = (dict_seg){seq, n0, s0};
    j->nodes_saved = j->nnodes;
    j->series_saved = j->nseries;
    return TW_OK;
}

static int restore_windows(tw_job *j, const void *data, size_t len, char *err,
                           size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal("windows", data, len, WIN_MAGIC, &payload, &n, &version, err,
               errlen) != TW_OK)
        return TW_ERR;
    tw_ckr r;
    tw_ckr_init(&r, payload, n);
    uint64_t nseries = tw_ckr_uv(&r);
    if (r.why != NULL) {
        snprintf(err, errlen, "checkpoint part 'windows': %s", r.why);
        return TW_ERR;
    }
    if (j->seg_next == 0 || j->windows_saved) {
        snprintf(err, errlen, "checkpoint part 'windows': %s",
                 j->windows_saved ? "restored twice"
                                  : "no segmented (version 5) 'core' was "
                                    "restored before it");
        return TW_ERR;
    }
    if (nseries != j->nseries) {
        snprintf(err, errlen,
                 "checkpoint part 'windows': saved with %llu series, the job "
                 "has %zu (a dictionary segment is missing)",
                 (unsigned long long)nseries, j->nseries);
        return TW_ERR;
    }
    char why[256];
    if (tw_windows_restore(j->windows, r.p, tw_ckr_left(&r), 1, why,
                           sizeof(why)) != TW_OK) {
        snprintf(err, errlen, "checkpoint part 'windows': %s", why);
        return TW_ERR;
    }
    j->windows_saved = 1;
    j->windows_series = j->nseries;
    j->windows_saved_changes = j->windows_changes;
    return TW_OK;
}

static int restore_chunks(tw_job *j, const char *part, uint64_t seq,
                          const void *data, size_t len, char *err,
                          size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal(part, data, len, CHUNK_MAGIC, &payload, &n, &version, err,
               errlen) != TW_OK)
        return TW_ERR;
    if (tw_grow((void **)&j->csegs, &j->csegs_cap, j->ncsegs + 1,
                sizeof(*j->csegs), 16) != TW_OK) {
        snprintf(err, errlen, "checkpoint part '%s': out of memory", part);
        return TW_ERR;
    }
    /* One pass: the batches are most of a restore's time, and what a
     * failed pass appended is simply dropped again. */
    size_t before = j->nchunks;
    if (two_passes(j, part, payload, n, version, seq, 0, 1, chunks_pass_run,
                   err, errlen) != TW_OK) {
        for (size_t i = before; i < j->nchunks; i++)
            tw_batch_free(j->chunks[i].batch);
        j->nchunks = before;
        return TW_ERR;
    }
    for (size_t i = before; i < j->nchunks; i++)
        j->chunks[i].seg = seq;
    j->csegs[j->ncsegs++] = (chunk_seg){seq, j->nchunks - before};
    return TW_OK;
}

/* "<prefix><n>" with n a decimal without leading zeros: 1 and *n, else 0. */
static int segment_name(const char *part, const char *prefix, uint64_t *n)
{
    size_t pl = strlen(prefix);
    if (strncmp(part, prefix, pl) != 0)
        return 0;
    const char *d = part + pl;
    size_t nd = strspn(d, "0123456789");
    if (nd == 0 || nd > 19 || d[nd] != '\0' || (d[0] == '0' && nd > 1))
        return 0;
    *n = strtoull(d, NULL, 10);
    return 1;
}

/* ---- restore: rules --------------------------------------------------------
 */

static int restore_rule(tw_job *j, const char *part, size_t idx,
                        const void *data, size_t len, char *err, size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal(part, data, len, RULE_MAGIC, &payload, &n, &version, err,
               errlen) != TW_OK)
        return TW_ERR;
    tw_ckr r;
    tw_ckr_init(&r, payload, n);
    uint64_t i = tw_ckr_uv(&r), nrules = tw_ckr_uv(&r);
    const char *name, *plugin;
    size_t nname, nplugin;
    tw_ckr_str(&r, &name, &nname);
    tw_ckr_str(&r, &plugin, &nplugin);
    if (r.why != NULL) {
        snprintf(err, errlen, "checkpoint part '%s': %s at payload byte %zu",
                 part, r.why, tw_ckr_offset(&r));
        return TW_ERR;
    }
    if (nrules != j->nrules || i != idx) {
        snprintf(err, errlen,
                 "checkpoint part '%s': saved as rule %llu of %llu, the job "
                 "has %zu rules",
                 part, (unsigned long long)i, (unsigned long long)nrules,
                 j->nrules);
        return TW_ERR;
    }
    tw_rule *rule = j->rules[idx];
    const char *want = tw_rule_name(rule);
    const char *wplugin = tw_rule_descriptor_of(rule)->name;
    if (name == NULL || plugin == NULL || nname != strlen(want) ||
        memcmp(name, want, nname) != 0 || nplugin != strlen(wplugin) ||
        memcmp(plugin, wplugin, nplugin) != 0) {
        snprintf(err, errlen,
                 "checkpoint part '%s': it holds rule '%.*s' (%.*s), the job's "
                 "rule %zu is '%s' (%s)",
                 part, name ? (int)(nname > 100 ? 100 : nname) : 0,
                 name ? name : "",
                 plugin ? (int)(nplugin > 100 ? 100 : nplugin) : 0,
                 plugin ? plugin : "", idx, want, wplugin);
        return TW_ERR;
    }
    char why[512];
    why[0] = '\0';
    if (tw_rule_restore(rule, r.p, tw_ckr_left(&r), why, sizeof(why)) !=
        TW_OK) {
        snprintf(err, errlen, "checkpoint part '%s': %s", part,
                 why[0] ? why : "the rule refused its state");
        return TW_ERR;
    }
    j->rules_saved = j->rules_changes;
    return TW_OK;
}

int tw_job_restore_part(tw_job *j, const char *part, const void *data,
                        size_t len, char *err, size_t errlen)
{
    if (part == NULL) {
        snprintf(err, errlen, "checkpoint part (null): unknown part name");
        return TW_ERR;
    }
    if (strcmp(part, "core") == 0)
        return restore_core(j, data, len, err, errlen);
    if (strncmp(part, "rule.", 5) == 0 && part[5] >= '0' && part[5] <= '9' &&
        strlen(part + 5) <= 9 && (part[5] != '0' || part[6] == '\0')) {
        char *end;
        unsigned long idx = strtoul(part + 5, &end, 10);
        if (*end == '\0') {
            if (idx >= j->nrules) {
                snprintf(err, errlen,
                         "checkpoint part '%s': the job has only %zu rules",
                         part, j->nrules);
                return TW_ERR;
            }
            return restore_rule(j, part, (size_t)idx, data, len, err, errlen);
        }
    }
    uint64_t seq;
    if (segment_name(part, "dict.", &seq))
        return restore_dict(j, part, seq, data, len, err, errlen);
    if (segment_name(part, "chunks.", &seq))
        return restore_chunks(j, part, seq, data, len, err, errlen);
    if (strcmp(part, "windows") == 0)
        return restore_windows(j, data, len, err, errlen);
    snprintf(err, errlen,
             "checkpoint part '%.64s': unknown part name (expected 'core', "
             "'rule.<i>', 'dict.<n>', 'windows' or 'chunks.<n>')",
             part);
    return TW_ERR;
}
