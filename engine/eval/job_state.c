/*
 * job_state.c - exact checkpoint/restore of a whole job (job.h, "checkpoints").
 *
 * Every part is   u32 magic | u16 version | u16 flags | u64 payload length |
 *                 u32 CRC-32 of the payload | payload
 * (fixed fields little-endian; the payload in the ckpt_codec.h encoding;
 * flags 0, or PART_ZSTD: the stored payload is a zstd frame of it).
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
 * Deferred state (version 6 core): the windows and every rule without a
 * wall-clock hook are one snapshot, written in "state.<id>.<i>" slices
 * (magic "TWJS": uv id, uv i, uv slice count, uv snapshot length, then
 * bytes [i * size, ...) of the snapshot). The snapshot is entries of
 * u8 kind (0 windows, 1 rule), uv rule index, uv length, then a sealed
 * "windows" or "rule.<i>" blob as above (the windows with the series of
 * their day: a restore leaves later series empty). The core appends
 * u8 snapshot kind (0 none yet, 1 slices, 2 version 5 parts: "windows"
 * and "rule.<i>"), uv id, uv scans in it (gen), uv slice count, uv n
 * pending scans = the scans since gen, each uv index, iv start, iv end
 * (µs), uv cutoff (the job's arrival count then: it saw the batches
 * below it), uv series, uv nodes, u8 flags (1 start inclusive, 2 final);
 * then u8 1 + the last scan closed as such a record, or u8 0. A restore
 * puts the snapshot together, runs the pending scans again over the
 * restored batches (job.c, tw_job_replay_), and releases what the last
 * scan released. Slices of another id are removed by the next save. A
 * "chunks.<seq>" part stays while a pending scan released one of its
 * batches, and batches a scan released before any save wrote them are
 * written by the next save for the same reason (j->retired).
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
#include <zstd.h>

#include "ckpt_codec.h"
#include "clock.h"
#include "grow.h"
#include "job.h"
#include "job_internal.h"
#include "log.h"
#include "numeric.h"
#include "sample_pack.h"
#include "tw_assert.h"

#define CORE_MAGIC 0x434a5754u  /* "TWJC" */
#define RULE_MAGIC 0x524a5754u  /* "TWJR" */
#define DICT_MAGIC 0x444a5754u  /* "TWJD" */
#define WIN_MAGIC 0x574a5754u   /* "TWJW" */
#define CHUNK_MAGIC 0x424a5754u /* "TWJB" */
#define SNAP_MAGIC 0x534a5754u  /* "TWJS" */
/* Version 2 appends the data-loss record (job_loss.h) to "core"; version 3
 * the buffered debugging tensors and their counters; version 4 writes the
 * buffered samples and events compactly (see the head comment). Older
 * blobs are still read. */
#define STATE_VERSION 4u
#define STATE_VERSION_MIN 1u
#define SEG_VERSION 5u /* segmented core and its parts */
/* Version 6: the segmented core also says where the scan-fed state is and
 * lists the scans run since ("deferred state" below); "state.<id>.<i>"
 * slices hold it. */
#define DEFER_VERSION 6u
#define SLICES_MAX (1u << 20)
/* A snapshot this many scans behind is written whole at the next save. */
#define PEND_MAX 8u

#define HEADER_BYTES 20u
#define CKPT_KEEP_BYTES (256u * 1024u)
/* Header flag: the payload is one zstd frame of the part's real payload,
 * with its size in the frame header; the CRC covers the stored
 * (compressed) bytes. A save compresses a part of at least
 * ZSTD_MIN_PAYLOAD bytes when that saves an eighth; engines before the
 * flag refuse such a part ("header flags 1 unknown"). */
#define PART_ZSTD 1u
#define ZSTD_MIN_PAYLOAD 4096u
#define ZSTD_LEVEL 1
/* A compressed part may announce at most this many bytes: a corrupt or
 * hostile frame header cannot make a restore allocate more. */
#define PART_RAW_MAX ((uint64_t)1 << 30)

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
static void seal_flags(tw_buf *b, uint32_t magic, unsigned version,
                       unsigned flags)
{
    uint8_t *d = (uint8_t *)(uintptr_t)tw_buf_data(b);
    size_t n = tw_buf_len(b) - HEADER_BYTES;
    put_le(d, magic, 4);
    put_le(d + 4, version, 2);
    put_le(d + 6, flags, 2);
    put_le(d + 8, n, 8);
    put_le(d + 16, crc_of(d + HEADER_BYTES, n), 4);
}

static void seal(tw_buf *b, uint32_t magic, unsigned version)
{
    seal_flags(b, magic, version, 0);
}

/* Replaces the sealed part in b by its compressed form (PART_ZSTD) when
 * that pays; cctx may be NULL (a context for this call only). TW_ERR only
 * on out of memory; b is then unchanged. */
static int compress_sealed(tw_buf *b, ZSTD_CCtx *cctx)
{
    const uint8_t *d = tw_buf_data(b);
    size_t n = tw_buf_len(b) - HEADER_BYTES;
    if (n < ZSTD_MIN_PAYLOAD)
        return TW_OK;
    size_t cap = ZSTD_compressBound(n);
    uint8_t *z = malloc(cap);
    if (z == NULL)
        return TW_ERR;
    size_t zn =
        cctx != NULL
            ? ZSTD_compressCCtx(cctx, z, cap, d + HEADER_BYTES, n, ZSTD_LEVEL)
            : ZSTD_compress(z, cap, d + HEADER_BYTES, n, ZSTD_LEVEL);
    int rc = TW_OK;
    if (!ZSTD_isError(zn) && zn < n - n / 8) {
        uint32_t magic = (uint32_t)get_le(d, 4);
        unsigned version = (unsigned)get_le(d + 4, 2);
        static const uint8_t zero[HEADER_BYTES];
        tw_buf_clear(b);
        if (tw_buf_append(b, zero, sizeof(zero)) != TW_OK ||
            tw_buf_append(b, z, zn) != TW_OK)
            rc = TW_ERR; /* cannot happen: b had room for more */
        else
            seal_flags(b, magic, version, PART_ZSTD);
    }
    free(z);
    return rc;
}

/* The payload of a PART_ZSTD part, decompressed into memory the job keeps
 * until the restore call returns (tw_job_restore_part / _end). */
static int inflate_payload(tw_job *j, const char *part, const uint8_t *z,
                           size_t zn, const uint8_t **payload, size_t *n,
                           char *err, size_t errlen)
{
    unsigned long long raw = ZSTD_getFrameContentSize(z, zn);
    if (raw == ZSTD_CONTENTSIZE_UNKNOWN || raw == ZSTD_CONTENTSIZE_ERROR) {
        snprintf(err, errlen,
                 "checkpoint part '%s': compressed payload is not a zstd "
                 "frame that states its size",
                 part);
        return TW_ERR;
    }
    if (raw > PART_RAW_MAX) {
        snprintf(err, errlen,
                 "checkpoint part '%s': compressed payload announces %llu "
                 "bytes, more than the %llu this engine reads",
                 part, raw, (unsigned long long)PART_RAW_MAX);
        return TW_ERR;
    }
    uint8_t *out = malloc(raw > 0 ? (size_t)raw : 1);
    if (out == NULL ||
        tw_grow((void **)&j->unsealed, &j->unsealed_cap, j->nunsealed + 1,
                sizeof(*j->unsealed), 4) != TW_OK) {
        free(out);
        snprintf(err, errlen, "checkpoint part '%s': out of memory", part);
        return TW_ERR;
    }
    j->unsealed[j->nunsealed++] = out;
    size_t got = ZSTD_decompress(out, (size_t)raw, z, zn);
    if (ZSTD_isError(got) || got != raw) {
        snprintf(err, errlen,
                 "checkpoint part '%s': compressed payload does not "
                 "decompress to its %llu bytes (%s)",
                 part, raw,
                 ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
        return TW_ERR;
    }
    *payload = out;
    *n = (size_t)raw;
    return TW_OK;
}

/* Frees what inflate_payload kept for one restore call. */
static void unsealed_free(tw_job *j)
{
    for (size_t i = 0; i < j->nunsealed; i++)
        free(j->unsealed[i]);
    j->nunsealed = 0;
}

/* Checks a part's header; on success *payload and *n are its payload. */
static int unseal(tw_job *j, const char *part, const void *data, size_t len,
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
                 : magic == SNAP_MAGIC ? "job state slice"
                                       : "job batches");
        return TW_ERR;
    }
    unsigned version = (unsigned)get_le(d + 4, 2);
    /* the segment parts exist from version 5 on; core and rules from 1 */
    unsigned vmin = magic == CORE_MAGIC || magic == RULE_MAGIC
                        ? STATE_VERSION_MIN
                    : magic == SNAP_MAGIC ? DEFER_VERSION
                                          : SEG_VERSION;
    unsigned vmax = magic == CORE_MAGIC || magic == SNAP_MAGIC ? DEFER_VERSION
                                                               : SEG_VERSION;
    if (version < vmin || version > vmax) {
        snprintf(err, errlen,
                 "checkpoint part '%s': version %u, this engine reads "
                 "versions %u to %u",
                 part, version, vmin, vmax);
        return TW_ERR;
    }
    unsigned flags = (unsigned)get_le(d + 6, 2);
    if ((flags & ~PART_ZSTD) != 0) {
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
    *version_out = version;
    if (flags & PART_ZSTD)
        return inflate_payload(j, part, d + HEADER_BYTES, len - HEADER_BYTES,
                               payload, n, err, errlen);
    *payload = d + HEADER_BYTES;
    *n = len - HEADER_BYTES;
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

static void put_scan(tw_ckw *w, const pend_scan *ps)
{
    tw_ckw_uv(w, ps->k);
    tw_ckw_iv(w, ps->start_us);
    tw_ckw_iv(w, ps->end_us);
    tw_ckw_uv(w, ps->cutoff);
    tw_ckw_uv(w, ps->nseries);
    tw_ckw_uv(w, ps->nnodes);
    tw_ckw_u8(w, (uint8_t)(ps->start_inclusive | (ps->final << 1)));
}

/* What a segmented core says of the deferred snapshot after a save. */
typedef struct snap_view {
    int kind;
    uint64_t id, gen, nslices;
    size_t pend_from; /* j->pend[pend_from..npend): the scans since gen */
} snap_view;

/* seg_next: the segmented core's next seq (0: a whole version 4 core) */
static int build_core(tw_job *j, tw_buf *b, uint64_t seg_next,
                      const snap_view *sv)
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
        TW_ASSERT(sv != NULL);
        tw_ckw_u8(&w, (uint8_t)sv->kind);
        tw_ckw_uv(&w, sv->id);
        tw_ckw_uv(&w, sv->gen);
        tw_ckw_uv(&w, sv->nslices);
        tw_ckw_uv(&w, j->npend - sv->pend_from);
        for (size_t i = sv->pend_from; i < j->npend; i++)
            put_scan(&w, &j->pend[i]);
        tw_ckw_u8(&w, (uint8_t)(j->has_last_scan != 0));
        if (j->has_last_scan)
            put_scan(&w, &j->last_scan);
        if (w.failed)
            return TW_ERR;
        seal(b, CORE_MAGIC, DEFER_VERSION);
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
           j->rules_changes != j->rules_saved ||
           (j->segmented && (j->snap != NULL || j->nstale > 0 || j->npend > 0));
}

void tw_job_set_segmented(tw_job *j)
{
    j->segmented = 1;
}

void tw_job_set_slice_bytes(tw_job *j, size_t bytes)
{
    j->slice_bytes = bytes;
}

void tw_job_set_checkpoint_target(tw_job *j, size_t bytes)
{
    j->target_bytes = bytes;
}

int tw_job_rule_deferred_(const tw_job *j, size_t i)
{
    return !tw_rule_has_wallclock(j->rules[i]);
}

void tw_job_chunk_released_(tw_job *j, const chunk *c, uint64_t scans)
{
    if (c->seg == 0)
        return;
    /* batches leave roughly in arrival order: the oldest segments first */
    for (size_t i = 0; i < j->ncsegs; i++)
        if (j->csegs[i].seq == c->seg) {
            TW_ASSERT(j->csegs[i].live > 0);
            j->csegs[i].live--;
            if (scans > j->csegs[i].released_by)
                j->csegs[i].released_by = scans;
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
 * unsaved ones, about to become segment seq), then `extra` (released
 * batches a replay still needs). */
static int build_chunks(tw_job *j, tw_buf *b, uint64_t seq, uint64_t match,
                        const chunk *extra, size_t nextra)
{
    static const uint8_t zero[HEADER_BYTES];
    tw_ckw w = {b, 0};
    tw_ckw_bytes(&w, zero, sizeof(zero));
    size_t n = nextra;
    for (size_t i = 0; i < j->nchunks; i++)
        n += j->chunks[i].seg == match;
    tw_ckw_uv(&w, seq);
    tw_ckw_uv(&w, n);
    for (size_t i = 0; i < j->nchunks && !w.failed; i++)
        if (j->chunks[i].seg == match)
            put_batch_chunk(&w, &j->chunks[i], 1);
    for (size_t i = 0; i < nextra && !w.failed; i++)
        put_batch_chunk(&w, &extra[i], 1);
    if (w.failed)
        return TW_ERR;
    seal(b, CHUNK_MAGIC, SEG_VERSION);
    return TW_OK;
}

/* The scan-fed state as one snapshot: entries of u8 kind (0 the windows,
 * 1 a rule), uv rule index, uv length and the sealed "windows" or
 * "rule.<i>" blob; the windows first, then the rules without a wall-clock
 * hook in order. */
static int build_snapshot(tw_job *j, tw_buf *out)
{
    tw_buf *one = tw_buf_new();
    if (one == NULL)
        return TW_ERR;
    tw_ckw w = {out, 0};
    int rc = build_windows(j, one);
    for (size_t i = 0; i <= j->nrules && rc == TW_OK; i++) {
        if (i > 0) {
            if (!tw_job_rule_deferred_(j, i - 1))
                continue;
            tw_buf_clear(one);
            if (build_rule(j, i - 1, one) != TW_OK) {
                rc = TW_ERR;
                break;
            }
        }
        tw_ckw_u8(&w, i > 0);
        tw_ckw_uv(&w, i > 0 ? i - 1 : 0);
        tw_ckw_uv(&w, tw_buf_len(one));
        tw_ckw_bytes(&w, tw_buf_data(one), tw_buf_len(one));
        if (w.failed)
            rc = TW_ERR;
    }
    tw_buf_free(one);
    return rc;
}

/* The i-th of n "state.<id>.<i>" slices of the snapshot in raw: uv id,
 * uv i, uv n, uv the snapshot's length, then its bytes [i * size,
 * (i + 1) * size). */
static int build_slice(tw_job *j, const tw_buf *raw, tw_buf *b, uint64_t i)
{
    static const uint8_t zero[HEADER_BYTES];
    size_t total = tw_buf_len(raw);
    size_t from = (size_t)i * j->snap_slice;
    size_t to = total - from < j->snap_slice ? total : from + j->snap_slice;
    TW_ASSERT(i < j->snap_next_n && from < total);
    tw_ckw w = {b, 0};
    tw_ckw_bytes(&w, zero, sizeof(zero));
    tw_ckw_uv(&w, j->snap_next_id);
    tw_ckw_uv(&w, i);
    tw_ckw_uv(&w, j->snap_next_n);
    tw_ckw_uv(&w, total);
    tw_ckw_bytes(&w, tw_buf_data(raw) + from, to - from);
    if (w.failed)
        return TW_ERR;
    seal(b, SNAP_MAGIC, DEFER_VERSION);
    return TW_OK;
}

/* Bytes of the snapshot's sealed slice i. */
static size_t slice_len(const tw_job *j, uint64_t i)
{
    return j->snap_off[i + 1] - j->snap_off[i];
}

/* One save's emits from the job's reusable buffer. */
typedef struct save_run {
    tw_job *j;
    tw_job_part_fn emit;
    void *ud;
    size_t biggest;
    size_t bytes; /* emitted so far */
    char *err;
    size_t errlen;
} save_run;

static int emit_bytes(save_run *sr, const char *part, const void *data,
                      size_t n)
{
    if (n > sr->biggest)
        sr->biggest = n;
    sr->bytes += n;
    if (sr->emit(sr->ud, part, data, n) != TW_OK) {
        snprintf(sr->err, sr->errlen,
                 "job %s: checkpoint part '%s': the store refused it",
                 sr->j->id, part);
        return TW_ERR;
    }
    return TW_OK;
}

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
    if (compress_sealed(j->ckpt, NULL) != TW_OK) {
        snprintf(sr->err, sr->errlen,
                 "job %s: checkpoint part '%s': out of memory", j->id, part);
        return TW_ERR;
    }
    if (emit_bytes(sr, part, tw_buf_data(j->ckpt), tw_buf_len(j->ckpt)) !=
        TW_OK)
        return TW_ERR;
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

/* The "rule.<i>" parts: every rule, or (only_wallclock, segmented jobs)
 * those outside the deferred snapshot. */
static int save_rules(save_run *sr, int only_wallclock)
{
    tw_job *j = sr->j;
    char part[32];
    for (size_t i = 0; i < j->nrules; i++) {
        if (only_wallclock && tw_job_rule_deferred_(j, i))
            continue;
        snprintf(part, sizeof(part), "rule.%zu", i);
        if (emit_built(sr, part, build_rule(j, i, j->ckpt),
                       tw_rule_name(j->rules[i])) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

/* Removes slices [0, n) of snapshot id. */
static int remove_slices(save_run *sr, uint64_t id, uint64_t n)
{
    char part[48];
    for (uint64_t i = 0; i < n; i++) {
        snprintf(part, sizeof(part), "state.%llu.%llu", (unsigned long long)id,
                 (unsigned long long)i);
        if (emit_removal(sr, part) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

static void drop_snapshot(tw_job *j)
{
    tw_buf_free(j->snap);
    j->snap = NULL;
    free(j->snap_off);
    j->snap_off = NULL;
    j->snap_next_sent = j->snap_next_tried = j->snap_next_n = 0;
}

static void free_retired(tw_job *j)
{
    for (size_t i = 0; i < j->nretired; i++)
        tw_batch_free(j->retired[i].batch);
    j->nretired = 0;
}

/* A whole version 4 core; segments left by a segmented past (a restore)
 * are removed, since the core now holds what they held. */
static int save_whole(save_run *sr, int core, int rules)
{
    tw_job *j = sr->j;
    char part[48];
    if (core &&
        emit_built(sr, "core", build_core(j, j->ckpt, 0, NULL), NULL) != TW_OK)
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
        if (j->snap_kind == SNAP_SLICES &&
            remove_slices(sr, j->snap_id, j->snap_nslices) != TW_OK)
            return TW_ERR;
        for (size_t i = 0; i < j->nstale; i++)
            if (emit_removal(sr, j->stale[i]) != TW_OK)
                return TW_ERR;
    }
    if (rules && save_rules(sr, 0) != TW_OK)
        return TW_ERR;
    if (core) {
        j->ndsegs = j->ncsegs = 0;
        j->nodes_saved = j->series_saved = 0;
        j->windows_saved = 0;
        j->snap_kind = SNAP_NONE;
        j->nstale = 0;
        for (size_t i = 0; i < j->nchunks; i++)
            j->chunks[i].seg = 0;
    }
    return TW_OK;
}

/* Takes the snapshot of the scan-fed state as it is now, in slices of
 * slice_bytes, or one slice (whole), each sealed and compressed now
 * (j->snap), so that a save knows what each slice will write. */
static int start_snapshot(tw_job *j, int whole)
{
    drop_snapshot(j);
    tw_buf *raw = tw_buf_new(), *one = tw_buf_new();
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    int rc = raw != NULL && one != NULL && cctx != NULL &&
                     (j->snap = tw_buf_new()) != NULL
                 ? build_snapshot(j, raw)
                 : TW_ERR;
    size_t total = rc == TW_OK ? tw_buf_len(raw) : 0;
    if (rc == TW_OK) {
        j->snap_slice = whole || j->slice_bytes == 0 ? total : j->slice_bytes;
        j->snap_next_n = (total + j->snap_slice - 1) / j->snap_slice;
        j->snap_next_id = j->snap_last_id + 1;
        if ((j->snap_off =
                 malloc((j->snap_next_n + 1) * sizeof(*j->snap_off))) == NULL)
            rc = TW_ERR;
    }
    for (uint64_t i = 0; rc == TW_OK && i < j->snap_next_n; i++) {
        tw_buf_clear(one);
        j->snap_off[i] = tw_buf_len(j->snap);
        if (build_slice(j, raw, one, i) != TW_OK ||
            compress_sealed(one, cctx) != TW_OK ||
            tw_buf_append(j->snap, tw_buf_data(one), tw_buf_len(one)) != TW_OK)
            rc = TW_ERR;
    }
    tw_buf_free(raw);
    tw_buf_free(one);
    ZSTD_freeCCtx(cctx);
    if (rc != TW_OK) {
        drop_snapshot(j);
        return TW_ERR;
    }
    j->snap_off[j->snap_next_n] = tw_buf_len(j->snap);
    j->snap_taken_us = tw_mono_us();
    j->snap_saves = 0;
    j->snap_last_id = j->snap_next_id;
    j->snap_next_gen = j->next_scan;
    j->snap_next_changes = j->windows_changes;
    j->snap_next_sent = j->snap_next_tried = 0;
    return TW_OK;
}

/* How many slices from `from` this save writes: one, more while the
 * save's bytes (`input` so far) stay within target_bytes, and at least
 * snap_min (pacing); all that are left at most. */
static uint64_t slices_this_save(tw_job *j, uint64_t from, size_t input)
{
    uint64_t left = j->snap_next_n - from, k = 1;
    TW_ASSERT(from < j->snap_next_n);
    /* written within three quarters of the saves the last scan interval
     * had, so it lands before the next scan's snapshot is due */
    uint64_t pace = j->saves_per_scan * 3 / 4;
    j->snap_min = pace == 0 ? 1 : (j->snap_next_n + pace - 1) / pace;
    if (j->target_bytes > 0) {
        size_t bytes = input + slice_len(j, from);
        while (k < left && bytes + slice_len(j, from + k) <= j->target_bytes)
            bytes += slice_len(j, from + k++);
        if (k < j->snap_min)
            k = j->snap_min;
    }
    return k < left ? k : left;
}

/* A buffered batch's bytes in a "chunks.<n>" part before compression:
 * its packed samples, or a rough 16 bytes a sample and event. */
static size_t chunk_bytes_estimate(const chunk *c)
{
    return c->packed != NULL ? c->packed_len
                             : 16 * (c->batch->nsamples + c->batch->nevents);
}

/* What the new "chunks.<n>" part of this save will take: its batches'
 * bytes at the last such part's compression. */
static size_t input_estimate(const tw_job *j)
{
    size_t raw = 0;
    for (size_t i = 0; i < j->nchunks; i++)
        if (j->chunks[i].seg == 0)
            raw += chunk_bytes_estimate(&j->chunks[i]);
    for (size_t i = 0; i < j->nretired; i++)
        raw += chunk_bytes_estimate(&j->retired[i]);
    return j->chunk_ratio == 0 ? raw : (size_t)(raw * j->chunk_ratio / 1024);
}

void tw_job_snapshot_early_(tw_job *j)
{
    if (!j->segmented || j->slice_bytes == 0 || j->seg_next == 0 ||
        j->force_whole || j->finished || j->finish_begun || j->snap != NULL ||
        j->npend == 0 || j->npend > PEND_MAX)
        return;
    /* on failure the next save builds it, and says why */
    (void)start_snapshot(j, 0);
}

/* Segmented: the deferred snapshot. A save after scans starts one of the
 * scan-fed state (build_snapshot) and writes one slice of it per save;
 * the save that writes the last slice commits it: the core then names it,
 * and the previous snapshot, the scans it covers and the batches only
 * they needed leave the store. A full save, the first save, a finished
 * job, or a snapshot PEND_MAX scans behind write a fresh one whole. */
static int save_segmented(save_run *sr, int only_dirty, int core, int rules)
{
    tw_job *j = sr->j;
    uint64_t seq = j->seg_next != 0 ? j->seg_next : 1;
    if (only_dirty) { /* pacing: the saves of the last scan interval */
        if (j->next_scan != j->pace_scan) {
            j->saves_per_scan = j->pace_saves / (j->next_scan - j->pace_scan);
            j->pace_scan = j->next_scan;
            j->pace_saves = 0;
        }
        j->pace_saves++;
    }
    /* the scan-fed state differs from the stored snapshot: scans ran
     * since it (a restored job replayed them) or the rules finished */
    int state_dirty =
        j->windows_changes != j->windows_saved_changes || j->npend > 0;
    int whole = !only_dirty || j->seg_next == 0 || j->finished ||
                j->force_whole || j->npend > PEND_MAX || j->slice_bytes == 0;
    int fresh = !only_dirty || (state_dirty && (whole || j->snap == NULL));
    /* a fresh snapshot replaces one in progress; its slices go */
    uint64_t drop_id = 0, drop_n = 0;
    if (fresh && j->snap != NULL) {
        drop_id = j->snap_next_id;
        drop_n = j->snap_next_tried;
        drop_snapshot(j);
    }
    if (fresh && start_snapshot(j, whole) != TW_OK) {
        snprintf(sr->err, sr->errlen,
                 "job %s: checkpoint: cannot build the state snapshot "
                 "(out of memory or a rule failed)",
                 j->id);
        return TW_ERR;
    }
    /* the slices this save writes: [from, to) */
    uint64_t from = j->snap != NULL ? j->snap_next_sent : 0, to = from;
    if (j->snap != NULL)
        to = whole ? j->snap_next_n
                   : from + slices_this_save(j, from, input_estimate(j));
    int commit = j->snap != NULL && to == j->snap_next_n;
    snap_view sv = {j->snap_kind, j->snap_id, j->snap_gen, j->snap_nslices, 0};
    if (commit)
        sv = (snap_view){SNAP_SLICES, j->snap_next_id, j->snap_next_gen,
                         j->snap_next_n, 0};
    while (sv.pend_from < j->npend && j->pend[sv.pend_from].k < sv.gen)
        sv.pend_from++;
    TW_ASSERT(sv.gen + (j->npend - sv.pend_from) == j->next_scan ||
              !commit); /* the pending scans are every scan since */

    /* batches: the new ones, and the released ones a replay still needs */
    size_t unsaved = 0, keep_retired = 0;
    for (size_t i = 0; i < j->nchunks; i++)
        unsaved += j->chunks[i].seg == 0;
    for (size_t i = 0; i < j->nretired; i++)
        if (j->retired[i].released_by > sv.gen)
            j->retired[keep_retired++] = j->retired[i];
        else
            tw_batch_free(j->retired[i].batch);
    j->nretired = keep_retired;
    int dict_grew = j->nnodes > j->nodes_saved || j->nseries > j->series_saved;
    int dead = 0;
    for (size_t i = 0; i < j->ncsegs; i++)
        dead |= j->csegs[i].live == 0 && j->csegs[i].released_by <= sv.gen;
    /* a failed save may have left its chunks.<seq> in the caller's pending
     * list; with nothing to replace it now, it must be removed */
    int stale = unsaved == 0 && keep_retired == 0 && j->seg_tried == seq;
    int new_seg = unsaved > 0 || keep_retired > 0;
    uint64_t next = dict_grew || new_seg ? seq + 1 : seq;
    if (!core && !rules && from == to && !dead && !stale &&
        next == j->seg_next && j->nstale == 0)
        return TW_OK;
    core = core || next != j->seg_next || dead || stale || commit;
    /* the bookkeeping slots first: after the emits nothing may fail */
    if ((dict_grew && tw_grow((void **)&j->dsegs, &j->dsegs_cap, j->ndsegs + 1,
                              sizeof(*j->dsegs), 8) != TW_OK) ||
        (new_seg && tw_grow((void **)&j->csegs, &j->csegs_cap, j->ncsegs + 1,
                            sizeof(*j->csegs), 16) != TW_OK)) {
        snprintf(sr->err, sr->errlen, "job %s: checkpoint: out of memory",
                 j->id);
        return TW_ERR;
    }
    char part[48];
    if (core && emit_built(sr, "core", build_core(j, j->ckpt, next, &sv),
                           NULL) != TW_OK)
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
    for (size_t i = 0; i < j->ncsegs; i++) {
        const chunk_seg *c = &j->csegs[i];
        snprintf(part, sizeof(part), "chunks.%llu", (unsigned long long)c->seq);
        if (c->live == 0 && c->released_by <= sv.gen
                ? emit_removal(sr, part) != TW_OK
                : !only_dirty && emit_built(sr, part,
                                            build_chunks(j, j->ckpt, c->seq,
                                                         c->seq, NULL, 0),
                                            NULL) != TW_OK)
            return TW_ERR;
    }
    snprintf(part, sizeof(part), "chunks.%llu", (unsigned long long)seq);
    if (new_seg) {
        j->seg_tried = seq;
        size_t before = sr->bytes, raw = 0;
        int built = build_chunks(j, j->ckpt, seq, 0, j->retired, j->nretired);
        raw = tw_buf_len(j->ckpt);
        if (emit_built(sr, part, built, NULL) != TW_OK)
            return TW_ERR;
        if (raw > ZSTD_MIN_PAYLOAD) /* what compression kept of it */
            j->chunk_ratio = (uint64_t)(sr->bytes - before) * 1024 / raw;
    } else if (stale && emit_removal(sr, part) != TW_OK) {
        return TW_ERR;
    }
    for (uint64_t i = from; i < to; i++) {
        snprintf(part, sizeof(part), "state.%llu.%llu",
                 (unsigned long long)j->snap_next_id, (unsigned long long)i);
        if (i + 1 > j->snap_next_tried)
            j->snap_next_tried = i + 1;
        if (emit_bytes(sr, part, tw_buf_data(j->snap) + j->snap_off[i],
                       slice_len(j, i)) != TW_OK)
            return TW_ERR;
    }
    if (drop_n > 0 && remove_slices(sr, drop_id, drop_n) != TW_OK)
        return TW_ERR;
    for (size_t i = 0; i < j->nstale; i++)
        if (emit_removal(sr, j->stale[i]) != TW_OK)
            return TW_ERR;
    if (commit) {
        if (j->snap_kind == SNAP_SLICES &&
            remove_slices(sr, j->snap_id, j->snap_nslices) != TW_OK)
            return TW_ERR;
        if (j->snap_kind == SNAP_LEGACY) {
            /* a version 5 checkpoint's parts, now in the snapshot */
            if (j->windows_saved && emit_removal(sr, "windows") != TW_OK)
                return TW_ERR;
            for (size_t i = 0; i < j->nrules; i++) {
                snprintf(part, sizeof(part), "rule.%zu", i);
                if (tw_job_rule_deferred_(j, i) &&
                    emit_removal(sr, part) != TW_OK)
                    return TW_ERR;
            }
        }
    }
    if (rules && save_rules(sr, 1) != TW_OK)
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
        if (j->csegs[i].live > 0 || j->csegs[i].released_by > sv.gen)
            j->csegs[kept++] = j->csegs[i];
    j->ncsegs = kept;
    if (new_seg) {
        uint64_t released_by = 0;
        for (size_t i = 0; i < j->nretired; i++)
            if (j->retired[i].released_by > released_by)
                released_by = j->retired[i].released_by;
        for (size_t i = 0; i < j->nchunks; i++)
            if (j->chunks[i].seg == 0)
                j->chunks[i].seg = seq;
        j->csegs[j->ncsegs++] = (chunk_seg){seq, unsaved, released_by};
    }
    free_retired(j);
    j->nstale = 0;
    if (j->snap != NULL) {
        j->snap_next_sent = to;
        j->snap_saves++;
    }
    if (commit) {
        tw_log(TW_LOG_DEBUG,
               "job %s: state snapshot %llu in the store: %llu slice(s), %zu "
               "bytes, over %llu checkpoint(s), %.3f s after it was taken; "
               "%zu scan(s) since it",
               j->id, (unsigned long long)sv.id, (unsigned long long)sv.nslices,
               tw_buf_len(j->snap), (unsigned long long)j->snap_saves,
               (double)(tw_mono_us() - j->snap_taken_us) / 1e6,
               j->npend - sv.pend_from);
        j->snap_kind = SNAP_SLICES;
        j->snap_id = sv.id;
        j->snap_gen = sv.gen;
        j->snap_nslices = sv.nslices;
        j->windows_saved = 0;
        j->windows_saved_changes = j->snap_next_changes;
        if (sv.pend_from > 0) /* pend may still be NULL */
            memmove(j->pend, j->pend + sv.pend_from,
                    (j->npend - sv.pend_from) * sizeof(*j->pend));
        j->npend -= sv.pend_from;
        drop_snapshot(j);
        j->force_whole = 0;
    }
    j->seg_next = next;
    j->seg_tried = 0;
    return TW_OK;
}

int tw_job_save(tw_job *j, int only_dirty, tw_job_part_fn emit, void *ud,
                char *err, size_t errlen)
{
    if (tw_job_restore_end(j, err, errlen) != TW_OK)
        return TW_ERR;
    int core = !only_dirty || j->core_changes != j->core_saved;
    int rules = !only_dirty || j->rules_changes != j->rules_saved;
    if (!core && !rules && !j->segmented)
        return TW_OK;
    if (j->ckpt == NULL && (j->ckpt = tw_buf_new()) == NULL) {
        snprintf(err, errlen, "job %s: checkpoint: out of memory", j->id);
        return TW_ERR;
    }
    tw_buf_clear(j->ckpt);
    save_run sr = {j, emit, ud, 0, 0, err, errlen};
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
    /* the map sized once, not doubled and rehashed on the way */
    if (cp->apply && n > 0 &&
        tw_strmap_reserve(&j->series_ids, j->nseries + n) != TW_OK)
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

/* A scan record (put_scan); 0 when it is bad. */
static int get_scan(core_pass *cp, pend_scan *ps)
{
    tw_ckr *r = &cp->r;
    ps->k = tw_ckr_uv(r);
    ps->start_us = tw_ckr_iv(r);
    ps->end_us = tw_ckr_iv(r);
    ps->cutoff = tw_ckr_uv(r);
    ps->nseries = tw_ckr_uv(r);
    ps->nnodes = tw_ckr_uv(r);
    uint8_t flags = tw_ckr_u8(r);
    if (r->why != NULL)
        return 0;
    if (flags > 3 || ps->end_us < ps->start_us) {
        cp->bad = "a scan record with bad flags or times";
        return 0;
    }
    ps->start_inclusive = flags & 1;
    ps->final = (uint8_t)(flags >> 1);
    return 1;
}

/* A segmented core's deferred-state fields (version 6; a version 5 core
 * has its scan-fed state in "windows" and "rule.<i>" parts). The pending
 * scans must be every scan since the snapshot's, in order. */
static void get_snap(core_pass *cp, uint64_t next_scan)
{
    tw_ckr *r = &cp->r;
    tw_job *j = cp->j;
    if (cp->version < DEFER_VERSION) {
        if (cp->apply) {
            j->snap_kind = SNAP_LEGACY;
            j->snap_gen = next_scan;
        }
        return;
    }
    uint8_t kind = tw_ckr_u8(r);
    uint64_t id = tw_ckr_uv(r), gen = tw_ckr_uv(r), nslices = tw_ckr_uv(r);
    size_t npend = tw_ckr_count(r, 9);
    if (r->why != NULL)
        return;
    if (kind > SNAP_LEGACY ||
        (kind == SNAP_SLICES ? nslices == 0 || nslices > SLICES_MAX
                             : nslices != 0)) {
        cp->bad = "bad state snapshot fields";
        return;
    }
    if (gen > next_scan || npend != next_scan - gen) {
        cp->bad = "the scans since the state snapshot are not all listed";
        return;
    }
    if (cp->apply && npend > 0 &&
        tw_grow((void **)&j->pend, &j->pend_cap, npend, sizeof(*j->pend), 8) !=
            TW_OK) {
        cp->oom = 1;
        return;
    }
    for (size_t i = 0; i < npend; i++) {
        pend_scan ps;
        if (!get_scan(cp, &ps))
            return;
        if (ps.k != gen + i) {
            cp->bad = "a scan since the state snapshot is out of order";
            return;
        }
        if (cp->apply)
            j->pend[i] = ps;
    }
    uint8_t has_last = tw_ckr_u8(r);
    pend_scan last;
    memset(&last, 0, sizeof(last));
    if (r->why != NULL || has_last > 1 || (has_last && !get_scan(cp, &last)))
        return;
    if (has_last && last.k + 1 != next_scan) { /* none: a version 5 past */
        cp->bad = "the last scan does not match the clock";
        return;
    }
    if (!cp->apply)
        return;
    j->has_last_scan = has_last;
    j->last_scan = last;
    j->npend = npend;
    j->snap_kind = kind;
    j->snap_id = id;
    j->snap_last_id = id;
    j->snap_gen = gen;
    j->snap_nslices = nslices;
    if (kind == SNAP_SLICES) {
        j->rs_slice = calloc((size_t)nslices, sizeof(*j->rs_slice));
        j->rs_slice_len = calloc((size_t)nslices, sizeof(*j->rs_slice_len));
        if (j->rs_slice == NULL || j->rs_slice_len == NULL)
            cp->oom = 1;
    }
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
        tw_ckr wr;
        tw_ckr_init(&wr, wdata, wlen);
        if (tw_ckr_uv(&wr) != cp->nseries) { /* whole: every series */
            cp->bad = "the windows hold another number of series than the "
                      "dictionary";
            return;
        }
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
    if (cp->version >= SEG_VERSION) {
        get_snap(cp, next_scan);
        if (core_failed(cp))
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
    if (cp->version >= SEG_VERSION)
        j->replay_due = 1; /* tw_job_restore_end: the snapshot, the scans */
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
    if (unseal(j, "core", data, len, CORE_MAGIC, &payload, &n, &version, err,
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
    if (unseal(j, part, data, len, DICT_MAGIC, &payload, &n, &version, err,
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

/* The aggregator windows from a "windows" blob: a version 5 part
 * (in_snapshot 0: once, with every series of the dictionary) or the state
 * snapshot's (the series it was saved with; newer ones stay empty). */
static int restore_windows(tw_job *j, const char *part, const void *data,
                           size_t len, int in_snapshot, char *err,
                           size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal(j, part, data, len, WIN_MAGIC, &payload, &n, &version, err,
               errlen) != TW_OK)
        return TW_ERR;
    tw_ckr r;
    tw_ckr_init(&r, payload, n);
    uint64_t nseries = tw_ckr_uv(&r);
    if (r.why != NULL) {
        snprintf(err, errlen, "checkpoint part '%s': %s", part, r.why);
        return TW_ERR;
    }
    if (!in_snapshot &&
        (j->seg_next == 0 || j->windows_saved || j->snap_kind != SNAP_LEGACY)) {
        snprintf(err, errlen, "checkpoint part '%s': %s", part,
                 j->windows_saved ? "restored twice"
                 : j->seg_next == 0
                     ? "no segmented (version 5) 'core' was restored before it"
                     : "the core keeps the windows in its state snapshot "
                       "(a part left from an older save)");
        return TW_ERR;
    }
    if (in_snapshot ? nseries > j->nseries : nseries != j->nseries) {
        snprintf(err, errlen,
                 "checkpoint part '%s': saved with %llu series, the job "
                 "has %zu (a dictionary segment is missing)",
                 part, (unsigned long long)nseries, j->nseries);
        return TW_ERR;
    }
    char why[256];
    if (tw_windows_restore(j->windows, r.p, tw_ckr_left(&r), 1, why,
                           sizeof(why)) != TW_OK) {
        snprintf(err, errlen, "checkpoint part '%s': %s", part, why);
        return TW_ERR;
    }
    if (!in_snapshot)
        j->windows_saved = 1; /* a version 5 part: removed at the commit */
    return TW_OK;
}

static int restore_chunks(tw_job *j, const char *part, uint64_t seq,
                          const void *data, size_t len, char *err,
                          size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal(j, part, data, len, CHUNK_MAGIC, &payload, &n, &version, err,
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
    j->csegs[j->ncsegs++] = (chunk_seg){seq, j->nchunks - before, 0};
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

/* "state.<id>.<i>", both decimals without leading zeros. */
static int state_name(const char *part, uint64_t *id, uint64_t *i)
{
    if (strncmp(part, "state.", 6) != 0)
        return 0;
    const char *a = part + 6;
    size_t na = strspn(a, "0123456789");
    if (na == 0 || na > 19 || a[na] != '.' || (a[0] == '0' && na > 1))
        return 0;
    const char *b = a + na + 1;
    size_t nb = strspn(b, "0123456789");
    if (nb == 0 || nb > 19 || b[nb] != '\0' || (b[0] == '0' && nb > 1))
        return 0;
    *id = strtoull(a, NULL, 10);
    *i = strtoull(b, NULL, 10);
    return 1;
}

static int restore_rule(tw_job *j, const char *part, size_t idx,
                        const void *data, size_t len, char *err, size_t errlen);

/* A slice of the state snapshot: kept until tw_job_restore_end puts the
 * snapshot together. A slice of another snapshot (one a crash left
 * unfinished, or replaced) is checked, then removed at the next save. */
static int restore_slice(tw_job *j, const char *part, uint64_t id, uint64_t idx,
                         const void *data, size_t len, char *err, size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal(j, part, data, len, SNAP_MAGIC, &payload, &n, &version, err,
               errlen) != TW_OK)
        return TW_ERR;
    tw_ckr r;
    tw_ckr_init(&r, payload, n);
    uint64_t pid = tw_ckr_uv(&r), pi = tw_ckr_uv(&r), pn = tw_ckr_uv(&r),
             total = tw_ckr_uv(&r);
    if (r.why != NULL || pid != id || pi != idx || pi >= pn ||
        tw_ckr_left(&r) == 0 || tw_ckr_left(&r) > total) {
        snprintf(err, errlen, "checkpoint part '%s': %s", part,
                 r.why != NULL ? r.why
                               : "its header does not match its name or size");
        return TW_ERR;
    }
    if (j->seg_next == 0) {
        snprintf(err, errlen,
                 "checkpoint part '%s': no segmented 'core' was restored "
                 "before it",
                 part);
        return TW_ERR;
    }
    if (j->snap_kind != SNAP_SLICES || id != j->snap_id) {
        if (tw_grow((void **)&j->stale, &j->stale_cap, j->nstale + 1,
                    sizeof(*j->stale), 8) != TW_OK) {
            snprintf(err, errlen, "checkpoint part '%s': out of memory", part);
            return TW_ERR;
        }
        snprintf(j->stale[j->nstale++], sizeof(j->stale[0]), "%s", part);
        if (id > j->snap_last_id)
            j->snap_last_id = id;
        return TW_OK;
    }
    if (pn != j->snap_nslices || j->rs_slice[idx] != NULL) {
        snprintf(err, errlen, "checkpoint part '%s': %s", part,
                 pn != j->snap_nslices
                     ? "the core names another number of slices"
                     : "restored twice");
        return TW_ERR;
    }
    size_t body = tw_ckr_left(&r);
    /* the total travels in every slice: each must agree (checked at the
     * end, with the lengths summed) */
    uint8_t *copy = malloc(body + sizeof(uint64_t));
    if (copy == NULL) {
        snprintf(err, errlen, "checkpoint part '%s': out of memory", part);
        return TW_ERR;
    }
    memcpy(copy, &total, sizeof(total));
    memcpy(copy + sizeof(total), r.p, body);
    j->rs_slice[idx] = copy;
    j->rs_slice_len[idx] = body;
    return TW_OK;
}

void tw_job_restore_drop_(tw_job *j)
{
    for (uint64_t i = 0; j->rs_slice != NULL && i < j->snap_nslices; i++)
        free(j->rs_slice[i]);
    free(j->rs_slice);
    free(j->rs_slice_len);
    j->rs_slice = NULL;
    j->rs_slice_len = NULL;
}

/* The snapshot's entries into the windows and the rules. */
static int restore_snapshot(tw_job *j, const uint8_t *p, size_t n, char *err,
                            size_t errlen)
{
    char part[48];
    snprintf(part, sizeof(part), "state.%llu", (unsigned long long)j->snap_id);
    int windows = 0;
    uint8_t *ruled = calloc(j->nrules + 1, 1);
    if (ruled == NULL) {
        snprintf(err, errlen, "checkpoint part '%s': out of memory", part);
        return TW_ERR;
    }
    tw_ckr r;
    tw_ckr_init(&r, p, n);
    int rc = TW_OK;
    while (rc == TW_OK && tw_ckr_left(&r) > 0) {
        uint8_t kind = tw_ckr_u8(&r);
        uint64_t idx = tw_ckr_uv(&r);
        size_t len = tw_ckr_count(&r, 1);
        const uint8_t *blob = tw_ckr_bytes(&r, len);
        if (r.why != NULL) {
            snprintf(err, errlen, "checkpoint part '%s': %s at byte %zu", part,
                     r.why, tw_ckr_offset(&r));
            rc = TW_ERR;
        } else if (kind == 0 && !windows) {
            windows = 1;
            rc = restore_windows(j, part, blob, len, 1, err, errlen);
        } else if (kind == 1 && idx < j->nrules && !ruled[idx] &&
                   tw_job_rule_deferred_(j, (size_t)idx)) {
            ruled[idx] = 1;
            rc = restore_rule(j, part, (size_t)idx, blob, len, err, errlen);
        } else {
            snprintf(err, errlen,
                     "checkpoint part '%s': an entry of kind %u for rule %llu "
                     "is repeated or unknown",
                     part, kind, (unsigned long long)idx);
            rc = TW_ERR;
        }
    }
    for (size_t i = 0; rc == TW_OK && i < j->nrules; i++)
        if (tw_job_rule_deferred_(j, i) && !ruled[i]) {
            snprintf(err, errlen,
                     "checkpoint part '%s': rule %zu (%s) is missing from it",
                     part, i, tw_rule_name(j->rules[i]));
            rc = TW_ERR;
        }
    if (rc == TW_OK && !windows) {
        snprintf(err, errlen, "checkpoint part '%s': the windows are missing",
                 part);
        rc = TW_ERR;
    }
    free(ruled);
    return rc;
}

static int restore_end(tw_job *j, char *err, size_t errlen)
{
    if (!j->replay_due)
        return TW_OK;
    if (j->snap_kind == SNAP_SLICES) {
        uint64_t total = 0, sum = 0;
        for (uint64_t i = 0; i < j->snap_nslices; i++) {
            if (j->rs_slice[i] == NULL) {
                snprintf(err, errlen,
                         "checkpoint of job %s: part 'state.%llu.%llu' is "
                         "missing (%llu slices)",
                         j->id, (unsigned long long)j->snap_id,
                         (unsigned long long)i,
                         (unsigned long long)j->snap_nslices);
                return TW_ERR;
            }
            uint64_t t;
            memcpy(&t, j->rs_slice[i], sizeof(t));
            if (i > 0 && t != total) {
                snprintf(err, errlen,
                         "checkpoint of job %s: the slices of 'state.%llu' "
                         "disagree on its size",
                         j->id, (unsigned long long)j->snap_id);
                return TW_ERR;
            }
            total = t;
            sum += j->rs_slice_len[i];
        }
        if (sum != total) {
            snprintf(err, errlen,
                     "checkpoint of job %s: the slices of 'state.%llu' hold "
                     "%llu bytes of %llu",
                     j->id, (unsigned long long)j->snap_id,
                     (unsigned long long)sum, (unsigned long long)total);
            return TW_ERR;
        }
        uint8_t *all = malloc(total ? total : 1);
        if (all == NULL) {
            snprintf(err, errlen, "checkpoint of job %s: out of memory", j->id);
            return TW_ERR;
        }
        size_t o = 0;
        for (uint64_t i = 0; i < j->snap_nslices; i++) {
            memcpy(all + o, j->rs_slice[i] + sizeof(uint64_t),
                   j->rs_slice_len[i]);
            o += j->rs_slice_len[i];
        }
        int rc = restore_snapshot(j, all, o, err, errlen);
        free(all);
        if (rc != TW_OK)
            return TW_ERR;
    }
    tw_job_restore_drop_(j);
    for (size_t i = 0; i < j->npend; i++)
        if (j->pend[i].nseries > j->nseries || j->pend[i].nnodes > j->nnodes) {
            snprintf(err, errlen,
                     "checkpoint of job %s: scan %llu saw %llu series, the "
                     "dictionary has %zu (a segment is missing)",
                     j->id, (unsigned long long)j->pend[i].k,
                     (unsigned long long)j->pend[i].nseries, j->nseries);
            return TW_ERR;
        }
    j->replay_due = 0;
    if (j->npend > 0)
        tw_log(TW_LOG_INFO,
               "job %s: %zu scan(s) since its state snapshot (%llu scans) run "
               "again",
               j->id, j->npend, (unsigned long long)j->snap_gen);
    if (tw_job_replay_(j) != TW_OK) {
        j->replay_due = 1;
        snprintf(err, errlen,
                 "checkpoint of job %s: out of memory running its last %zu "
                 "scan(s) again",
                 j->id, j->npend);
        return TW_ERR;
    }
    j->core_saved = j->core_changes;
    j->rules_saved = j->rules_changes;
    j->windows_saved_changes = j->windows_changes;
    return TW_OK;
}

/* ---- restore: rules --------------------------------------------------------
 */

static int restore_rule(tw_job *j, const char *part, size_t idx,
                        const void *data, size_t len, char *err, size_t errlen)
{
    const uint8_t *payload;
    size_t n;
    unsigned version;
    if (unseal(j, part, data, len, RULE_MAGIC, &payload, &n, &version, err,
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

static int restore_part(tw_job *j, const char *part, const void *data,
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
            if (j->seg_next != 0 && j->snap_kind != SNAP_LEGACY &&
                tw_job_rule_deferred_(j, (size_t)idx)) {
                snprintf(err, errlen,
                         "checkpoint part '%s': the core keeps rule %lu in its "
                         "state snapshot (a part left from an older save)",
                         part, idx);
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
        return restore_windows(j, part, data, len, 0, err, errlen);
    uint64_t id, i;
    if (state_name(part, &id, &i))
        return restore_slice(j, part, id, i, data, len, err, errlen);
    snprintf(err, errlen,
             "checkpoint part '%.64s': unknown part name (expected 'core', "
             "'rule.<i>', 'dict.<n>', 'windows', 'chunks.<n>' or "
             "'state.<n>.<i>')",
             part);
    return TW_ERR;
}

int tw_job_restore_part(tw_job *j, const char *part, const void *data,
                        size_t len, char *err, size_t errlen)
{
    int rc = restore_part(j, part, data, len, err, errlen);
    unsealed_free(j);
    return rc;
}

int tw_job_restore_end(tw_job *j, char *err, size_t errlen)
{
    int rc = restore_end(j, err, errlen);
    unsealed_free(j);
    return rc;
}
