/* sysutil.c - rings and string maps for the system rules
 * (see sysutil.h). */
#include "sysutil.h"

#include "trainwatch/bitpack.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- ring ------------------------------------------------------------ */

int tw_dring_init(tw_dring *r, uint32_t cap)
{
    r->cap = cap;
    r->len = 0;
    r->head = 0;
    r->v = NULL;
    if (cap == 0)
        return TW_OK;
    r->v = malloc((size_t)cap * sizeof(double));
    return r->v != NULL ? TW_OK : TW_ERR;
}

void tw_dring_free(tw_dring *r)
{
    free(r->v);
    r->v = NULL;
    r->cap = r->len = r->head = 0;
}

void tw_dring_clear(tw_dring *r)
{
    r->len = 0;
    r->head = 0;
}

void tw_dring_push(tw_dring *r, double x)
{
    if (r->cap == 0)
        return;
    r->v[r->head] = x;
    r->head = r->head + 1 == r->cap ? 0 : r->head + 1;
    if (r->len < r->cap)
        r->len++;
}

size_t tw_dring_copy(const tw_dring *r, size_t skip_newest, size_t n,
                     double *out)
{
    if (skip_newest >= r->len)
        return 0;
    size_t avail = r->len - skip_newest;
    if (n > avail)
        n = avail;
    /* index of the oldest value to copy */
    size_t start = ((size_t)r->head + r->cap - skip_newest - n) % r->cap;
    for (size_t i = 0; i < n; i++) {
        size_t k = start + i;
        if (k >= r->cap)
            k -= r->cap;
        out[i] = r->v[k];
    }
    return n;
}

/* The compact form sets this bit in the u32 length (a length never
 * reaches it: windows are at most 100 000), then a u8 form:
 *  1: the values as zigzag varint deltas of their hundredths, when every
 *     value is exactly hundredths / 100.0 (utilisation with two decimals);
 *  2: a u32 divisor D > 1 and per value the zigzag varint delta of
 *     h = rint(x * D * 100) and the zigzag varint of x's bits minus those
 *     of (h / 100.0) / D, when every value is such an average over D
 *     (tw_dring_save_avg);
 *  3: the hundredths of form 1 bit-packed (trainwatch/bitpack.h): sv base
 *     (the smallest), u8 width, the block of h - base;
 *  4: form 2 bit-packed: u32 D, sv base, u8 width, the block of h - base,
 *     u8 width, the block of the zigzagged ulps;
 *  5: the hundredths of form 1 as runs of equal values: uv the number of
 *     runs, then per run the zigzag varint delta of its hundredths from
 *     the previous run's and uv its length - 1;
 *  0: the f64 bits.
 * The saver writes the smallest of 1, 3 and 5 (2 and 4 for averages):
 * noisy values pack (11 bits for a 12-point band instead of 2-3 bytes),
 * a memory percentage that changes a few times in the window is a few
 * runs. Lossless; the older form (plain length, f64 bits) is
 * read. An engine older than forms 3 and 4 refuses them. */
#define RING_COMPACT 0x80000000u
#define RING_F64 0u
#define RING_HUNDREDTHS 1u
#define RING_AVG 2u
#define RING_PACKED 3u
#define RING_PACKED_AVG 4u
#define RING_RUNS 5u
/* An average's bits are at most this far from (h / 100.0) / D (a sum of
 * percentages is a few ulps off its hundredths); else f64. */
#define RING_AVG_MAX_ULPS 65536

/* (h / 100.0) / div: what an average of hundredths over div decodes to. */
static double ring_avg_base(int64_t h, double div)
{
    return (double)h / 100.0 / div;
}

/* x as h and its distance in ulps from ring_avg_base(h, div); 0 when x is
 * negative (or -0.0), not finite or too far. */
static int ring_avg(double x, double div, int64_t *h, int64_t *ulps)
{
    double y = x * div * 100.0;
    if (!(x >= 0.0) || signbit(x) || !(y < 9007199254740992.0)) /* 2^53 */
        return 0;
    *h = (int64_t)llrint(y);
    double base = ring_avg_base(*h, div);
    uint64_t bx, bb;
    memcpy(&bx, &x, sizeof(bx));
    memcpy(&bb, &base, sizeof(bb));
    /* both below 2^63 (non-negative doubles): the difference fits */
    *ulps = (int64_t)bx - (int64_t)bb;
    return *ulps >= -RING_AVG_MAX_ULPS && *ulps <= RING_AVG_MAX_ULPS;
}

static int ring_hundredths(double x, int64_t *h)
{
    double y = x * 100.0;
    if (!(fabs(y) < 9007199254740992.0)) /* 2^53 */
        return 0;
    *h = (int64_t)llrint(y);
    double back = (double)*h / 100.0;
    return memcmp(&back, &x, sizeof(x)) == 0;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* The i-th oldest value's integer parts in the exact form `form` (1 or 2):
 * hundredths (or hundredths of the sum) h, and the ulps (form 2). */
static void ring_parts(const tw_dring *r, uint32_t i, unsigned form,
                       double divisor, int64_t *h, int64_t *ulps)
{
    double x;
    tw_dring_copy(r, r->len - 1 - i, 1, &x);
    *h = 0;
    *ulps = 0;
    if (form == RING_HUNDREDTHS)
        ring_hundredths(x, h);
    else
        ring_avg(x, divisor, h, ulps);
}

static void ser_block(tw_ser *s, const tw_dring *r, unsigned form,
                      double divisor, int ulps_part, int64_t base,
                      unsigned width)
{
    tw_bitpack_writer w = {0, 0};
    uint8_t out[8];
    for (uint32_t i = 0; i < r->len; i++) {
        int64_t h, ulps;
        ring_parts(r, i, form, divisor, &h, &ulps);
        /* h - base < 2^54 (both in (-2^53, 2^53)): no overflow */
        uint64_t v = ulps_part ? zigzag(ulps) : (uint64_t)(h - base);
        tw_ser_bytes(s, out, tw_bitpack_put(&w, v, width, out));
    }
    tw_ser_bytes(s, out, tw_bitpack_flush(&w, out));
}

/* Form 5 of a ring of exact hundredths that has nruns runs. */
static void ser_runs(tw_ser *s, const tw_dring *r, uint64_t nruns)
{
    tw_ser_uv(s, nruns);
    int64_t prev = 0, run_h = 0;
    uint32_t run_len = 0;
    for (uint32_t i = 0; i < r->len; i++) {
        int64_t h, ulps;
        ring_parts(r, i, RING_HUNDREDTHS, 1.0, &h, &ulps);
        if (run_len > 0 && h == run_h) {
            run_len++;
            continue;
        }
        if (run_len > 0) {
            tw_ser_uv(s, run_len - 1);
            prev = run_h;
        }
        tw_ser_sv(s, h - prev); /* |h| < 2^53: no overflow */
        run_h = h;
        run_len = 1;
    }
    if (run_len > 0)
        tw_ser_uv(s, run_len - 1);
}

void tw_dring_save(const tw_dring *r, tw_ser *s)
{
    tw_dring_save_avg(r, s, 1);
}

void tw_dring_save_avg(const tw_dring *r, tw_ser *s, uint32_t divisor)
{
    int hundredths = 1, avg = divisor > 1;
    for (uint32_t i = 0; i < r->len && hundredths; i++) {
        int64_t h;
        hundredths = ring_hundredths(r->v[i], &h);
    }
    for (uint32_t i = 0; i < r->len && avg && !hundredths; i++) {
        int64_t h, u;
        avg = ring_avg(r->v[i], (double)divisor, &h, &u);
    }
    uint8_t form = hundredths ? RING_HUNDREDTHS : avg ? RING_AVG : RING_F64;
    double div = (double)divisor;
    int64_t hmin = INT64_MAX, hmax = INT64_MIN, prev = 0;
    uint64_t umax = 0, nruns = 0;
    size_t varint_bytes = 0, run_bytes = 0;
    uint32_t run_len = 0;
    for (uint32_t i = 0; i < r->len && form != RING_F64; i++) {
        int64_t h, ulps;
        ring_parts(r, i, form, div, &h, &ulps);
        varint_bytes += tw_ser_sv_len(h - prev) +
                        (form == RING_AVG ? tw_ser_sv_len(ulps) : 0);
        if (i > 0 && h == prev) {
            run_len++;
        } else {
            if (i > 0)
                run_bytes += tw_ser_uv_len(run_len - 1);
            run_bytes += tw_ser_sv_len(h - prev);
            nruns++;
            run_len = 1;
        }
        prev = h;
        hmin = h < hmin ? h : hmin;
        hmax = h > hmax ? h : hmax;
        umax = zigzag(ulps) > umax ? zigzag(ulps) : umax;
    }
    unsigned width = 0, uwidth = tw_bitpack_width(umax);
    if (form != RING_F64 && r->len > 0) {
        width = tw_bitpack_width((uint64_t)(hmax - hmin));
        size_t packed =
            tw_ser_sv_len(hmin) + 1 + tw_bitpack_bytes(r->len, width);
        if (form == RING_AVG)
            packed += 1 + tw_bitpack_bytes(r->len, uwidth);
        run_bytes += tw_ser_uv_len(run_len - 1) + tw_ser_uv_len(nruns);
        size_t best = varint_bytes;
        if (width <= TW_BITPACK_MAX_WIDTH && packed < best) {
            form = form == RING_HUNDREDTHS ? RING_PACKED : RING_PACKED_AVG;
            best = packed;
        }
        if (form != RING_AVG && form != RING_PACKED_AVG && run_bytes < best)
            form = RING_RUNS;
    }
    tw_ser_u32(s, r->len | RING_COMPACT);
    tw_ser_u8(s, form);
    if (form == RING_AVG || form == RING_PACKED_AVG)
        tw_ser_u32(s, divisor);
    if (form == RING_PACKED || form == RING_PACKED_AVG) {
        unsigned exact = form == RING_PACKED ? RING_HUNDREDTHS : RING_AVG;
        tw_ser_sv(s, hmin);
        tw_ser_u8(s, (uint8_t)width);
        ser_block(s, r, exact, div, 0, hmin, width);
        if (form == RING_PACKED_AVG) {
            tw_ser_u8(s, (uint8_t)uwidth);
            ser_block(s, r, exact, div, 1, 0, uwidth);
        }
        return;
    }
    if (form == RING_RUNS) {
        ser_runs(s, r, nruns);
        return;
    }
    prev = 0;
    for (uint32_t i = 0; i < r->len; i++) {
        int64_t h, ulps;
        if (form == RING_F64) {
            double x;
            tw_dring_copy(r, r->len - 1 - i, 1, &x);
            tw_ser_f64(s, x);
            continue;
        }
        ring_parts(r, i, form, div, &h, &ulps);
        tw_ser_sv(s, h - prev); /* |h| < 2^53: no overflow */
        if (form == RING_AVG)
            tw_ser_sv(s, ulps);
        prev = h;
    }
}

/* The value of hundredths h (form 1) or of the average h with `ulps`
 * (form 2); 0 on a value the saver cannot have written. */
static int ring_value(unsigned exact, int64_t h, int64_t ulps, double div,
                      double *x)
{
    if (exact == RING_HUNDREDTHS) {
        *x = (double)h / 100.0;
        return 1;
    }
    if (h < 0 || ulps < -RING_AVG_MAX_ULPS || ulps > RING_AVG_MAX_ULPS)
        return 0;
    double base = ring_avg_base(h, div);
    uint64_t bits;
    memcpy(&bits, &base, sizeof(bits));
    bits += (uint64_t)ulps; /* wraps as the saver's subtraction */
    memcpy(x, &bits, sizeof(*x));
    return 1;
}

/* Form 5 (the reader is past the form). */
static int dring_load_runs(tw_dring *r, tw_deser *d, uint32_t len)
{
    uint64_t nruns = tw_deser_uv(d);
    if (!tw_deser_ok(d) || nruns > len || nruns * 2 > d->left) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    int64_t h = 0;
    uint64_t total = 0;
    for (uint64_t k = 0; k < nruns; k++) {
        int64_t delta = tw_deser_sv(d);
        uint64_t n = tw_deser_uv(d) + 1;
        if (!tw_deser_ok(d) || n > len - total ||
            (delta > 0 ? h > INT64_MAX - delta : h < INT64_MIN - delta)) {
            tw_deser_fail(d);
            return TW_ERR;
        }
        h += delta;
        total += n;
        for (uint64_t i = 0; i < n; i++)
            tw_dring_push(r, (double)h / 100.0);
    }
    if (total != len) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    return TW_OK;
}

/* Forms 3 and 4 (the reader is past the form and divisor). */
static int dring_load_packed(tw_dring *r, tw_deser *d, uint32_t len,
                             unsigned exact, double div)
{
    int64_t base = tw_deser_sv(d);
    unsigned width = tw_deser_u8(d);
    const uint8_t *hb = NULL, *ub = NULL;
    unsigned uwidth = 0;
    if (tw_deser_ok(d) && width <= TW_BITPACK_MAX_WIDTH &&
        base > -9007199254740992ll && base < 9007199254740992ll) /* 2^53 */
        hb = tw_deser_view(d, tw_bitpack_bytes(len, width));
    if (hb != NULL && exact == RING_AVG) {
        uwidth = tw_deser_u8(d);
        if (tw_deser_ok(d) && uwidth <= TW_BITPACK_MAX_WIDTH)
            ub = tw_deser_view(d, tw_bitpack_bytes(len, uwidth));
    }
    if (hb == NULL || (exact == RING_AVG && ub == NULL)) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    tw_bitpack_reader hr, ur;
    tw_bitpack_reader_init(&hr, hb, tw_bitpack_bytes(len, width));
    tw_bitpack_reader_init(&ur, ub, tw_bitpack_bytes(len, uwidth));
    for (uint32_t i = 0; i < len; i++) {
        uint64_t off = tw_bitpack_get(&hr, width);
        int64_t ulps = 0;
        if (exact == RING_AVG) {
            uint64_t z = tw_bitpack_get(&ur, uwidth);
            ulps = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
        }
        double x;
        /* base in (-2^53, 2^53), off < 2^56: the sum fits */
        if (off >= (1ull << 54) ||
            !ring_value(exact, base + (int64_t)off, ulps, div, &x)) {
            tw_deser_fail(d);
            return TW_ERR;
        }
        tw_dring_push(r, x);
    }
    return TW_OK;
}

int tw_dring_load(tw_dring *r, tw_deser *d)
{
    uint32_t len = tw_deser_u32(d);
    int compact = (len & RING_COMPACT) != 0;
    len &= ~RING_COMPACT;
    unsigned form = compact ? tw_deser_u8(d) : RING_F64;
    int with_divisor = form == RING_AVG || form == RING_PACKED_AVG;
    uint32_t divisor = with_divisor ? tw_deser_u32(d) : 1;
    /* at least one byte a value (hundredths), two (averages), eight (f64);
     * packed blocks are checked by their length */
    size_t least = form == RING_HUNDREDTHS ? 1
                   : form == RING_AVG      ? 2
                   : form == RING_F64      ? 8
                                           : 0;
    if (!tw_deser_ok(d) || form > RING_RUNS || (with_divisor && divisor < 2) ||
        len > r->cap || (size_t)len * least > d->left) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    tw_dring_clear(r);
    if (form == RING_RUNS)
        return dring_load_runs(r, d, len);
    if (form == RING_PACKED || form == RING_PACKED_AVG)
        return dring_load_packed(
            r, d, len, form == RING_PACKED ? RING_HUNDREDTHS : RING_AVG,
            (double)divisor);
    int64_t prev = 0;
    for (uint32_t i = 0; i < len && tw_deser_ok(d); i++) {
        if (form == RING_F64) {
            tw_dring_push(r, tw_deser_f64(d));
            continue;
        }
        int64_t delta = tw_deser_sv(d);
        if (delta > 0 ? prev > INT64_MAX - delta : prev < INT64_MIN - delta)
            tw_deser_fail(d);
        else
            prev += delta;
        int64_t ulps = form == RING_AVG ? tw_deser_sv(d) : 0;
        double x;
        if (!ring_value(form, prev, ulps, (double)divisor, &x)) {
            tw_deser_fail(d);
            break;
        }
        tw_dring_push(r, x);
    }
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

/* ---- string map ------------------------------------------------------ */

static uint64_t str_hash(const char *s)
{
    if (s == NULL)
        return 0x9e3779b97f4a7c15ull;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static int key_eq(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

void tw_namemap_init(tw_namemap *m)
{
    memset(m, 0, sizeof(*m));
}

void tw_namemap_free(tw_namemap *m)
{
    for (uint32_t i = 0; i < m->count; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

uint32_t tw_namemap_find(const tw_namemap *m, const char *key)
{
    if (m->nslots == 0)
        return UINT32_MAX;
    uint32_t mask = m->nslots - 1;
    for (uint32_t i = (uint32_t)str_hash(key) & mask;; i = (i + 1) & mask) {
        uint32_t s = m->slots[i];
        if (s == 0)
            return UINT32_MAX;
        if (key_eq(m->keys[s - 1], key))
            return s - 1;
    }
}

static int strmap_rehash(tw_namemap *m, uint32_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof(uint32_t));
    if (slots == NULL)
        return TW_ERR;
    for (uint32_t k = 0; k < m->count; k++) {
        uint32_t i = (uint32_t)str_hash(m->keys[k]) & (nslots - 1);
        while (slots[i] != 0)
            i = (i + 1) & (nslots - 1);
        slots[i] = k + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    return TW_OK;
}

int tw_namemap_add(tw_namemap *m, const char *key, uint32_t *idx, int *added)
{
    uint32_t found = tw_namemap_find(m, key);
    if (added != NULL)
        *added = 0;
    if (found != UINT32_MAX) {
        *idx = found;
        return TW_OK;
    }
    if ((uint64_t)(m->count + 1) * 2 > m->nslots &&
        strmap_rehash(m, m->nslots ? m->nslots * 2 : 16) != TW_OK)
        return TW_ERR;
    if (tw_sys_grow((void **)&m->keys, sizeof(char *), &m->keys_cap,
                    m->count + 1) != TW_OK)
        return TW_ERR;
    char *copy = NULL;
    if (key != NULL) {
        copy = strdup(key);
        if (copy == NULL)
            return TW_ERR;
    }
    m->keys[m->count] = copy;
    uint32_t mask = m->nslots - 1;
    uint32_t i = (uint32_t)str_hash(key) & mask;
    while (m->slots[i] != 0)
        i = (i + 1) & mask;
    m->slots[i] = m->count + 1;
    *idx = m->count++;
    if (added != NULL)
        *added = 1;
    return TW_OK;
}

const char *tw_namemap_key(const tw_namemap *m, uint32_t idx)
{
    return idx < m->count ? m->keys[idx] : NULL;
}

void tw_namemap_save(const tw_namemap *m, tw_ser *s)
{
    tw_ser_u32(s, m->count);
    for (uint32_t i = 0; i < m->count; i++)
        tw_ser_str(s, m->keys[i]);
}

int tw_namemap_load(tw_namemap *m, tw_deser *d)
{
    uint32_t n = tw_deser_u32(d);
    if (!tw_deser_ok(d) || (size_t)n * 4 > d->left) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    for (uint32_t i = 0; i < n; i++) {
        char *k = tw_deser_str(d);
        if (!tw_deser_ok(d))
            return TW_ERR;
        uint32_t idx;
        int added;
        int rc = tw_namemap_add(m, k, &idx, &added);
        free(k);
        if (rc != TW_OK || !added) {
            tw_deser_fail(d);
            return TW_ERR;
        }
    }
    return TW_OK;
}

/* ---- misc ------------------------------------------------------------- */

int tw_sys_str_eq(const char *a, const char *b)
{
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

int tw_sys_grow(void **arr, size_t size, uint32_t *cap, uint32_t need)
{
    if (need <= *cap)
        return TW_OK;
    uint64_t n = *cap ? (uint64_t)*cap * 2 : 4;
    while (n < need)
        n *= 2;
    if (n > UINT32_MAX)
        n = UINT32_MAX;
    if (n < need)
        return TW_ERR;
    void *p = realloc(*arr, (size_t)n * size);
    if (p == NULL)
        return TW_ERR;
    memset((char *)p + (size_t)*cap * size, 0, (size_t)(n - *cap) * size);
    *arr = p;
    *cap = (uint32_t)n;
    return TW_OK;
}

/* ---- (node, name) series table ------------------------------------------ */

#define KEY_SEP '\x1f'
#define KEY_NONE '\x1e'

void tw_seriestab_init(tw_seriestab *t)
{
    memset(t, 0, sizeof(*t));
    tw_namemap_init(&t->keys);
    tw_namemap_init(&t->nodes);
}

void tw_seriestab_free(tw_seriestab *t)
{
    tw_namemap_free(&t->keys);
    tw_namemap_free(&t->nodes);
    free(t->node_of);
    free(t->cache);
    memset(t, 0, sizeof(*t));
}

uint32_t tw_seriestab_count(const tw_seriestab *t)
{
    return t->keys.count;
}

uint32_t tw_seriestab_nnodes(const tw_seriestab *t)
{
    return t->nodes.count;
}

/* "<node>\x1f<name>" or "<node>\x1e"; malloc'd. */
static char *series_key(const char *node, const char *name)
{
    size_t ln = strlen(node), lm = name != NULL ? strlen(name) : 0;
    char *key = malloc(ln + lm + 2);
    if (key == NULL)
        return NULL;
    memcpy(key, node, ln);
    key[ln] = name != NULL ? KEY_SEP : KEY_NONE;
    if (name != NULL)
        memcpy(key + ln + 1, name, lm);
    key[ln + 1 + lm] = '\0';
    return key;
}

uint32_t tw_seriestab_find(const tw_seriestab *t, const char *node,
                           const char *name)
{
    char *key = series_key(node != NULL ? node : "", name);
    if (key == NULL)
        return TW_SERIES_NONE;
    uint32_t id = tw_namemap_find(&t->keys, key);
    free(key);
    return id == UINT32_MAX ? TW_SERIES_NONE : id;
}

int tw_seriestab_add(tw_seriestab *t, const char *node, const char *name,
                     uint32_t *id, int *added)
{
    if (node == NULL)
        node = "";
    char *key = series_key(node, name);
    if (key == NULL)
        return TW_ERR;
    uint32_t before = t->keys.count;
    int is_new = 0;
    int rc = tw_sys_grow((void **)&t->node_of, sizeof(uint32_t), &t->node_cap,
                         before + 1);
    uint32_t nidx = 0;
    if (rc == TW_OK)
        rc = tw_namemap_add(&t->nodes, node, &nidx, NULL);
    if (rc == TW_OK)
        rc = tw_namemap_add(&t->keys, key, id, &is_new);
    free(key);
    if (rc != TW_OK)
        return TW_ERR;
    if (is_new)
        t->node_of[*id] = nidx;
    if (added != NULL)
        *added = is_new;
    return TW_OK;
}

int tw_seriestab_resolve(tw_seriestab *t, const tw_scan *scan, uint32_t sid,
                         int (*wanted)(const tw_series *s), uint32_t *id,
                         int *added)
{
    if (added != NULL)
        *added = 0;
    *id = TW_SERIES_NONE;
    if (sid >= scan->nseries)
        return TW_OK; /* the host guarantees ids < nseries; ignore others */
    if (sid < t->cache_cap && t->cache[sid] != 0) {
        if (t->cache[sid] != UINT32_MAX)
            *id = t->cache[sid] - 1;
        return TW_OK;
    }
    uint32_t need = scan->nseries > sid + 1 ? (uint32_t)scan->nseries : sid + 1;
    if (tw_sys_grow((void **)&t->cache, sizeof(uint32_t), &t->cache_cap,
                    need) != TW_OK)
        return TW_ERR;
    const tw_series *s = &scan->series[sid];
    if (!wanted(s)) {
        t->cache[sid] = UINT32_MAX;
        return TW_OK;
    }
    const char *node = s->node < scan->nnodes ? scan->nodes[s->node] : "";
    if (tw_seriestab_add(t, node, s->name, id, added) != TW_OK)
        return TW_ERR;
    t->cache[sid] = *id + 1;
    return TW_OK;
}

uint32_t tw_seriestab_node(const tw_seriestab *t, uint32_t id)
{
    return t->node_of[id];
}

const char *tw_seriestab_node_name(const tw_seriestab *t, uint32_t node)
{
    return tw_namemap_key(&t->nodes, node);
}

const char *tw_seriestab_name(const tw_seriestab *t, uint32_t id)
{
    const char *key = tw_namemap_key(&t->keys, id);
    const char *node = tw_namemap_key(&t->nodes, t->node_of[id]);
    const char *p = key + strlen(node);
    return *p == KEY_NONE ? NULL : p + 1;
}

void tw_seriestab_save(const tw_seriestab *t, tw_ser *s)
{
    uint32_t n = t->keys.count;
    tw_ser_u32(s, n);
    for (uint32_t i = 0; i < n; i++) {
        tw_ser_str(s, tw_namemap_key(&t->nodes, t->node_of[i]));
        tw_ser_str(s, tw_seriestab_name(t, i));
    }
}

int tw_seriestab_load(tw_seriestab *t, tw_deser *d)
{
    uint32_t n = tw_deser_u32(d);
    if (!tw_deser_ok(d) || (size_t)n * 8 > d->left) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    for (uint32_t i = 0; i < n; i++) {
        char *node = tw_deser_str(d);
        char *name = tw_deser_str(d);
        uint32_t id;
        int added = 0;
        int rc = tw_deser_ok(d) && node != NULL
                     ? tw_seriestab_add(t, node, name, &id, &added)
                     : TW_ERR;
        free(node);
        free(name);
        if (rc != TW_OK || !added || id != i) {
            tw_deser_fail(d);
            return TW_ERR;
        }
    }
    return TW_OK;
}
