/* reader_debug.c - the legacy debug-output folder (reader_debug.h). */
#include "reader_debug.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "debug_collections.h"
#include "debug_dtype.h"
#include "debug_index.h"
#include "debug_proto.h"
#include "debug_record.h"
#include "debug_reduce.h"
#include "grow.h"
#include "strmap.h"
#include "tw_assert.h"

#define REDUCTION_PREFIX "smdebug/reductions/"
#define MAX_WORKER 256
/* Index and collections files are small; a larger one is bad input. */
#define MAX_JSON_FILE (64u << 20)
/* Stored reductions attached to one tensor at most. */
#define MAX_STORED 32

/* A tensor's previous saved values, for update_l2. */
typedef struct prev_values {
    int64_t step;
    double *x;
    size_t n;
} prev_values;

/* The entries of one index file that belong to one tensor. */
typedef struct tensor_group {
    const char *name; /* base name, NUL-terminated copy in the scratch arena */
    long full;        /* entry index of the full tensor; -1: none */
    uint32_t stored[MAX_STORED];
    const char *stored_op[MAX_STORED];
    uint32_t nstored;
} tensor_group;

typedef struct debug_reader {
    const char *dir;
    tw_debug_opts opts;
    tw_debug_tensor_fn on_tensor;
    tw_debug_error_fn on_error;
    void *ctx;
    tw_debug_counts *counts;
    tw_debug_collections colls;
    tw_strmap prev_index; /* "<worker>\n<name>" -> index in prev */
    prev_values *prev;
    size_t nprev, prev_cap;
    uint8_t *buf; /* one record */
    size_t buf_cap;
    double *values; /* one tensor's elements */
    size_t values_cap;
    tensor_group *groups;
    size_t groups_cap;
} debug_reader;

static void report(debug_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void report(debug_reader *r, const char *fmt, ...)
{
    if (r->on_error == NULL)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    r->on_error(r->ctx, msg);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int tw_debug_folder_detect(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/index", dir);
    if (!is_dir(p))
        return 0;
    snprintf(p, sizeof(p), "%s/events", dir);
    if (is_dir(p))
        return 1;
    snprintf(p, sizeof(p), "%s/collections", dir);
    return is_dir(p);
}

/* Byte order, not the locale's: the names are ASCII and their lexical
 * order is the step order (DEBUG_RULES.md §6.1). */
static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* dir's entries in byte order; -1 when dir cannot be listed. */
static int list_sorted(const char *dir, struct dirent ***out)
{
    return scandir(dir, out, NULL, by_name);
}

static void free_list(struct dirent **l, int n)
{
    for (int i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

/* Reads a whole small file into a malloc'ed buffer. */
static char *read_small(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (tw_grow((void **)&buf, &cap, n + 65536, 1, 65536) != TW_OK) {
            snprintf(err, errlen, "out of memory");
            goto bad;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > MAX_JSON_FILE) {
            snprintf(err, errlen, "larger than %u bytes", MAX_JSON_FILE);
            goto bad;
        }
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "read error");
        goto bad;
    }
    fclose(f);
    *len = n;
    return buf;
bad:
    free(buf);
    fclose(f);
    return NULL;
}

static void load_collections(debug_reader *r)
{
    char dir[4096], path[4352], err[512];
    snprintf(dir, sizeof(dir), "%s/collections/000000000", r->dir);
    struct dirent **l;
    int n = list_sorted(dir, &l);
    if (n < 0)
        return; /* no collections yet: tensors get no collection names */
    for (int i = 0; i < n; i++) {
        if (!ends_with(l[i]->d_name, "_collections.json"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, l[i]->d_name);
        size_t len;
        char *text = read_small(path, &len, err, sizeof(err));
        if (text == NULL || tw_debug_collections_add(&r->colls, text, len, err,
                                                     sizeof(err)) != TW_OK) {
            r->counts->bad_files++;
            report(r, "%s: %s", path, err);
        }
        free(text);
    }
    free_list(l, n);
}

/* Reads the framed record at [start, start+length) of fd and decodes it.
 * TW_OK, or TW_ERR after reporting it. */
static int read_record(debug_reader *r, int fd, off_t file_size,
                       const char *path, const tw_debug_index_entry *e,
                       tw_debug_event *ev)
{
    char err[512];
    if (e->length > file_size || e->start > file_size - e->length) {
        report(r,
               "%s: offset %" PRId64 ": record of %" PRId64
               " bytes runs past the end of the file (%jd bytes; '%s')",
               path, e->start, e->length, (intmax_t)file_size, e->name);
        return TW_ERR;
    }
    size_t len = (size_t)e->length;
    if (tw_grow((void **)&r->buf, &r->buf_cap, len ? len : 1, 1, 4096) !=
        TW_OK) {
        report(r, "%s: offset %" PRId64 ": out of memory for %zu bytes", path,
               e->start, len);
        return TW_ERR;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t k = pread(fd, r->buf + got, len - got, (off_t)e->start + got);
        if (k <= 0) {
            report(r, "%s: offset %" PRId64 ": read failed: %s", path, e->start,
                   k < 0 ? strerror(errno) : "end of file");
            return TW_ERR;
        }
        got += (size_t)k;
    }
    const uint8_t *payload;
    size_t plen;
    tw_debug_footer footer;
    if (tw_debug_record_check(r->buf, len, &payload, &plen, &footer, err,
                              sizeof(err)) != TW_OK) {
        report(r, "%s: record at offset %" PRId64 " ('%s'): %s", path, e->start,
               e->name, err);
        return TW_ERR;
    }
    if (tw_debug_event_decode(payload, plen, ev, err, sizeof(err)) != TW_OK) {
        report(r, "%s: record at offset %" PRId64 " ('%s'), payload %s", path,
               e->start, e->name, err);
        return TW_ERR;
    }
    if (!ev->has_tensor) {
        report(r, "%s: record at offset %" PRId64 " ('%s'): no tensor", path,
               e->start, e->name);
        return TW_ERR;
    }
    if (footer == TW_DEBUG_FOOTER_CRC)
        r->counts->crc_footers++;
    else
        r->counts->constant_footers++;
    r->counts->records++;
    return TW_OK;
}

/* The element count of a decoded tensor, checked against its bytes.
 * TW_OK, TW_ERR after reporting; *unsupported set for dtypes without
 * numeric values (strings, complex). */
static int tensor_elements(debug_reader *r, const char *path,
                           const tw_debug_index_entry *e,
                           const tw_debug_event *ev, size_t *n,
                           int *unsupported)
{
    *unsupported = 0;
    size_t size = tw_debug_dtype_size(ev->dtype);
    if (size == 0) {
        *unsupported = 1;
        report(r,
               "%s: record at offset %" PRId64
               " ('%s'): dtype %d has no numeric values here; skipped",
               path, e->start, e->name, ev->dtype);
        return TW_ERR;
    }
    size_t count = 1;
    for (uint32_t i = 0; i < ev->ndims; i++) {
        uint64_t d = (uint64_t)ev->dims[i];
        if (d != 0 && count > SIZE_MAX / size / d) {
            count = SIZE_MAX;
            break;
        }
        count *= (size_t)d;
    }
    if (count == SIZE_MAX || count * size != ev->content_len) {
        report(r,
               "%s: record at offset %" PRId64
               " ('%s'): %zu content bytes are not the shape's elements of "
               "%zu bytes (%s)",
               path, e->start, e->name, ev->content_len, size,
               tw_debug_dtype_name(ev->dtype));
        return TW_ERR;
    }
    *n = count;
    return TW_OK;
}

static int to_values(debug_reader *r, const tw_debug_event *ev, size_t n)
{
    if (tw_grow((void **)&r->values, &r->values_cap, n ? n : 1, sizeof(double),
                1024) != TW_OK)
        return TW_ERR;
    tw_debug_dtype_convert(ev->dtype, ev->content, n, r->values);
    return TW_OK;
}

/* The previous values of (worker, name), created empty when new. */
static prev_values *prev_of(debug_reader *r, const char *worker,
                            const char *name)
{
    char key[MAX_WORKER + 1024];
    int k = snprintf(key, sizeof(key), "%s\n%s", worker, name);
    if (k < 0 || (size_t)k >= sizeof(key))
        return NULL; /* a name this long keeps no update_l2 */
    uint32_t idx;
    if (tw_strmap_get(&r->prev_index, key, (size_t)k, &idx))
        return &r->prev[idx];
    if (tw_grow((void **)&r->prev, &r->prev_cap, r->nprev + 1, sizeof(*r->prev),
                64) != TW_OK ||
        tw_strmap_put(&r->prev_index, key, (size_t)k, (uint32_t)r->nprev) !=
            TW_OK)
        return NULL;
    r->prev[r->nprev] = (prev_values){-1, NULL, 0};
    return &r->prev[r->nprev++];
}

static void remember(prev_values *p, int64_t step, const double *x, size_t n)
{
    if (p == NULL)
        return;
    if (p->n != n) {
        double *nx = realloc(p->x, (n ? n : 1) * sizeof(double));
        if (nx == NULL) {
            p->step = -1; /* no update_l2 next time, rather than a wrong one */
            return;
        }
        p->x = nx;
        p->n = n;
    }
    if (n > 0) /* an empty tensor has no values (x may be NULL) */
        memcpy(p->x, x, n * sizeof(double));
    p->step = step;
}

typedef struct step_file {
    int64_t step;
    const char *worker;
    const tw_debug_index *ix;
    const char *event_path;
    int fd;
    off_t size;
} step_file;

static int in_collection(const char *const *colls, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(colls[i], name) == 0)
            return 1;
    return 0;
}

/* Reads one tensor's records, derives its reductions and hands it out.
 * TW_OK, or TW_ERR when the callback stopped the read. */
static int emit_group(debug_reader *r, const step_file *sf,
                      const tensor_group *g)
{
    tw_tensor_reduction red[TW_DEBUG_MAX_DERIVED + MAX_STORED];
    uint32_t nred = 0;
    tw_debug_event ev, head;
    int have_head = 0, have_values = 0;
    size_t n = 0;
    int64_t prev_step = -1;
    if (g->full >= 0) {
        const tw_debug_index_entry *e = &sf->ix->entries[g->full];
        int unsupported = 0;
        if (read_record(r, sf->fd, sf->size, sf->event_path, e, &head) !=
            TW_OK) {
            r->counts->bad_records++;
        } else if (tensor_elements(r, sf->event_path, e, &head, &n,
                                   &unsupported) != TW_OK) {
            if (unsupported)
                r->counts->unsupported++;
            else
                r->counts->bad_records++;
        } else if (to_values(r, &head, n) != TW_OK) {
            report(r, "%s: out of memory for %zu elements of '%s'",
                   sf->event_path, n, g->name);
        } else {
            have_head = have_values = 1;
        }
    }
    for (uint32_t i = 0; i < g->nstored; i++) {
        const tw_debug_index_entry *e = &sf->ix->entries[g->stored[i]];
        size_t cnt;
        int unsupported = 0;
        if (read_record(r, sf->fd, sf->size, sf->event_path, e, &ev) != TW_OK) {
            r->counts->bad_records++;
            continue;
        }
        if (tensor_elements(r, sf->event_path, e, &ev, &cnt, &unsupported) !=
            TW_OK) {
            r->counts->bad_records += !unsupported;
            r->counts->unsupported += unsupported != 0;
            continue;
        }
        if (cnt != 1) {
            report(r,
                   "%s: record at offset %" PRId64
                   " ('%s'): a stored reduction with %zu elements, not 1",
                   sf->event_path, e->start, e->name, cnt);
            r->counts->bad_records++;
            continue;
        }
        red[nred++] = (tw_tensor_reduction){
            g->stored_op[i], tw_debug_dtype_value(ev.dtype, ev.content, 0)};
        if (!have_head) {
            head = ev;
            head.ndims = 0; /* the base tensor's shape is not known */
            have_head = 1;
        }
    }
    if (!have_head)
        return TW_OK; /* every record of it was bad (reported) */
    uint32_t ncolls;
    const char *const *colls =
        tw_debug_collections_of(&r->colls, g->name, &ncolls);
    if (have_values) {
        prev_values *p = tw_debug_is_parameter(g->name)
                             ? prev_of(r, sf->worker, g->name)
                             : NULL;
        tw_debug_tensor_values tv = {
            .x = r->values,
            .n = n,
            .shape = head.dims,
            .nshape = head.ndims,
            .prev = p && p->step >= 0 ? p->x : NULL,
            .nprev = p ? p->n : 0,
            .relu_output = tw_debug_is_relu_output(g->name),
            .input_image = in_collection(colls, ncolls, "input_image"),
            .threshold_inactivity = r->opts.threshold_inactivity,
        };
        if (tv.prev != NULL && tv.nprev == n)
            prev_step = p->step;
        /* Derived first, then what the writer stored. */
        tw_tensor_reduction derived[TW_DEBUG_MAX_DERIVED];
        size_t nd = tw_debug_reduce(&tv, derived);
        memmove(red + nd, red, nred * sizeof(*red));
        memcpy(red, derived, nd * sizeof(*red));
        nred += (uint32_t)nd;
        if (head.ndims > 0 || n != 1)
            remember(p, sf->step, r->values, n);
    }
    tw_tensor t;
    memset(&t, 0, sizeof(t));
    t.node = sf->worker;
    t.name = g->name;
    t.collections = colls;
    t.ncollections = ncolls;
    t.mode = head.mode ? (tw_mode)head.mode : sf->ix->mode;
    t.step = sf->step;
    t.mode_step = head.has_mode_step ? head.mode_step : sf->ix->mode_step;
    t.wall_us = (int64_t)llround(head.wall_time * 1e6);
    t.prev_step = prev_step;
    t.dtype = tw_debug_dtype_name(head.dtype);
    t.numel = have_values ? (int64_t)n : 0;
    t.shape = head.dims;
    t.nshape = head.ndims;
    t.reductions = red;
    t.nreductions = nred;
    if (have_values && n <= r->opts.raw_max) {
        t.raw = r->values;
        t.nraw = (uint32_t)n;
    }
    r->counts->tensors++;
    return r->on_tensor(r->ctx, &t) == 0 ? TW_OK : TW_ERR;
}

/* Groups the index entries by tensor: a full tensor and its stored
 * reductions (`smdebug/reductions/<op>/<name>`); a name repeated in one
 * file (gradient accumulation) keeps its last entry. */
static size_t group_entries(debug_reader *r, const tw_debug_index *ix,
                            tw_strmap *by_name, tw_arena *names)
{
    size_t ng = 0;
    for (size_t i = 0; i < ix->nentries; i++) {
        const char *name = ix->entries[i].name;
        const char *op = NULL;
        size_t op_len = 0;
        if (strncmp(name, REDUCTION_PREFIX, strlen(REDUCTION_PREFIX)) == 0) {
            const char *rest = name + strlen(REDUCTION_PREFIX);
            const char *slash = strchr(rest, '/');
            if (slash != NULL && slash != rest && slash[1] != '\0') {
                op = rest;
                op_len = (size_t)(slash - rest);
                name = slash + 1;
            }
        }
        uint32_t gi;
        if (!tw_strmap_get(by_name, name, strlen(name), &gi)) {
            if (tw_grow((void **)&r->groups, &r->groups_cap, ng + 1,
                        sizeof(*r->groups), 64) != TW_OK ||
                tw_strmap_put(by_name, name, strlen(name), (uint32_t)ng) !=
                    TW_OK)
                break; /* out of memory: the groups so far */
            gi = (uint32_t)ng++;
            r->groups[gi] = (tensor_group){
                tw_strmap_key(by_name, name, strlen(name)), -1, {0}, {0}, 0};
        }
        tensor_group *g = &r->groups[gi];
        if (op == NULL) {
            g->full = (long)i;
            continue;
        }
        const char *op_copy = tw_arena_strndup(names, op, op_len);
        uint32_t k = 0;
        while (k < g->nstored && strcmp(g->stored_op[k], op_copy) != 0)
            k++;
        if (op_copy == NULL || k == MAX_STORED)
            continue;
        g->stored[k] = (uint32_t)i;
        g->stored_op[k] = op_copy;
        if (k == g->nstored)
            g->nstored++;
    }
    return ng;
}

static int read_step(debug_reader *r, const char *index_path, const char *base)
{
    char err[512], worker[MAX_WORKER], event_path[4352];
    int64_t step;
    if (tw_debug_file_name(base, &step, worker, sizeof(worker)) != TW_OK) {
        r->counts->bad_files++;
        report(r, "%s: the name is not <step>_<worker>.json", index_path);
        return TW_OK;
    }
    size_t len;
    char *text = read_small(index_path, &len, err, sizeof(err));
    tw_debug_index ix;
    if (text == NULL ||
        tw_debug_index_parse(text, len, &ix, err, sizeof(err)) != TW_OK) {
        free(text);
        r->counts->bad_files++;
        report(r, "%s: %s", index_path, err);
        return TW_OK;
    }
    free(text);
    r->counts->index_files++;
    if (ix.nentries == 0) {
        tw_debug_index_free(&ix);
        return TW_OK;
    }
    snprintf(event_path, sizeof(event_path), "%s/%s", r->dir, ix.event_file);
    int fd = open(event_path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        r->counts->bad_files++;
        report(r, "%s: cannot open the event file named by %s: %s", event_path,
               index_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        tw_debug_index_free(&ix);
        return TW_OK;
    }
    tw_strmap by_name;
    tw_arena names;
    tw_strmap_init(&by_name);
    tw_arena_init(&names);
    size_t ng = group_entries(r, &ix, &by_name, &names);
    step_file sf = {step, worker, &ix, event_path, fd, st.st_size};
    int rc = TW_OK;
    for (size_t i = 0; i < ng && rc == TW_OK; i++)
        rc = emit_group(r, &sf, &r->groups[i]);
    tw_strmap_free(&by_name);
    tw_arena_free(&names);
    close(fd);
    tw_debug_index_free(&ix);
    return rc;
}

static int read_index(debug_reader *r, char *err, size_t errlen)
{
    char dir[4096], sub[4352], path[4608];
    snprintf(dir, sizeof(dir), "%s/index", r->dir);
    struct dirent **top;
    int nt = list_sorted(dir, &top);
    if (nt < 0) {
        snprintf(err, errlen, "cannot list %s: %s", dir, strerror(errno));
        return TW_ERR;
    }
    int rc = TW_OK;
    for (int i = 0; i < nt && rc == TW_OK; i++) {
        if (top[i]->d_name[0] == '.')
            continue;
        snprintf(sub, sizeof(sub), "%s/%s", dir, top[i]->d_name);
        struct dirent **files;
        int nf = list_sorted(sub, &files);
        if (nf < 0)
            continue; /* a loose file beside the step folders */
        for (int j = 0; j < nf && rc == TW_OK; j++) {
            /* `.tmp` files are being written: not ours yet. */
            if (files[j]->d_name[0] == '.' ||
                !ends_with(files[j]->d_name, ".json"))
                continue;
            snprintf(path, sizeof(path), "%s/%s", sub, files[j]->d_name);
            rc = read_step(r, path, files[j]->d_name);
        }
        free_list(files, nf);
    }
    free_list(top, nt);
    if (rc != TW_OK)
        snprintf(err, errlen, "the tensor consumer stopped the read");
    return rc;
}

int tw_debug_folder_read(const char *dir, const tw_debug_opts *opts,
                         tw_debug_tensor_fn on_tensor,
                         tw_debug_error_fn on_error, void *ctx,
                         tw_debug_counts *counts, char *err, size_t errlen)
{
    TW_ASSERT(on_tensor != NULL && counts != NULL);
    debug_reader r;
    memset(&r, 0, sizeof(r));
    memset(counts, 0, sizeof(*counts));
    r.dir = dir;
    if (opts != NULL)
        r.opts = *opts;
    if (!(r.opts.threshold_inactivity > 0))
        r.opts.threshold_inactivity = TW_DEBUG_DEFAULT_INACTIVITY;
    r.on_tensor = on_tensor;
    r.on_error = on_error;
    r.ctx = ctx;
    r.counts = counts;
    tw_debug_collections_init(&r.colls);
    tw_strmap_init(&r.prev_index);
    load_collections(&r);
    int rc = read_index(&r, err, errlen);
    for (size_t i = 0; i < r.nprev; i++)
        free(r.prev[i].x);
    free(r.prev);
    free(r.buf);
    free(r.values);
    free(r.groups);
    tw_strmap_free(&r.prev_index);
    tw_debug_collections_free(&r.colls);
    return rc;
}
