/* sorted_spill.c - external merge sort of keyed records (sorted_spill.h). */
#include "sorted_spill.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grow.h"
#include "trainwatch/plugin.h"

/* In the buffer and in a run: key, sequence, length, then the bytes. */
typedef struct rec_head {
    int64_t key;
    uint64_t seq;
    uint32_t len;
} rec_head;

#define TW_SPILL_READ_BUF (16u << 10)

typedef struct run {
    off_t at, end; /* the run's unread bytes in the file */
    char *buf;     /* buffered bytes [pos, fill) */
    size_t cap, pos, fill;
    rec_head head; /* the current record: bytes at buf + pos */
} run;

struct tw_spill {
    size_t limit;
    char *buf; /* records, each rec_head + bytes */
    size_t used, cap;
    size_t *offs; /* where each buffered record starts */
    size_t nrec, cap_offs;
    uint64_t seq;
    char tmpdir[512];
    int fd; /* the runs' file, -1 until the first run */
    off_t file_end;
    off_t *run_start;
    size_t nruns, cap_runs;
};

tw_spill *tw_spill_new(size_t buffer_bytes, const char *tmpdir)
{
    tw_spill *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->limit = buffer_bytes > 0 ? buffer_bytes : (16u << 20);
    s->fd = -1;
    const char *d = tmpdir ? tmpdir : getenv("TMPDIR");
    snprintf(s->tmpdir, sizeof(s->tmpdir), "%s", d && *d ? d : "/tmp");
    return s;
}

void tw_spill_free(tw_spill *s)
{
    if (s == NULL)
        return;
    if (s->fd >= 0)
        close(s->fd);
    free(s->buf);
    free(s->offs);
    free(s->run_start);
    free(s);
}

size_t tw_spill_runs(const tw_spill *s)
{
    return s->nruns;
}

static int cmp_rec(const void *a, const void *b, void *ud)
{
    const char *base = ud;
    rec_head x, y;
    memcpy(&x, base + *(const size_t *)a, sizeof(x));
    memcpy(&y, base + *(const size_t *)b, sizeof(y));
    if (x.key != y.key)
        return x.key < y.key ? -1 : 1;
    return (x.seq > y.seq) - (x.seq < y.seq);
}

static void sort_buffer(tw_spill *s)
{
    if (s->nrec > 1) /* offs is NULL before the first record */
        qsort_r(s->offs, s->nrec, sizeof(*s->offs), cmp_rec, s->buf);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return TW_ERR;
        p += w;
        n -= (size_t)w;
    }
    return TW_OK;
}

/* The sorted buffer as one run at the end of the file. */
static int flush_run(tw_spill *s, char *err, size_t errlen)
{
    if (s->fd < 0) {
        char path[600];
        snprintf(path, sizeof(path), "%s/trainwatch-spill-XXXXXX", s->tmpdir);
        s->fd = mkstemp(path);
        if (s->fd < 0) {
            snprintf(err, errlen, "cannot create a temporary file in %s: %s",
                     s->tmpdir, strerror(errno));
            return TW_ERR;
        }
        unlink(path); /* gone with the process, whatever happens */
    }
    if (tw_grow((void **)&s->run_start, &s->cap_runs, s->nruns + 2,
                sizeof(*s->run_start), 16) != TW_OK) {
        snprintf(err, errlen, "out of memory (runs)");
        return TW_ERR;
    }
    sort_buffer(s);
    s->run_start[s->nruns++] = s->file_end;
    for (size_t i = 0; i < s->nrec; i++) {
        rec_head h;
        memcpy(&h, s->buf + s->offs[i], sizeof(h));
        size_t n = sizeof(h) + h.len;
        if (write_all(s->fd, s->buf + s->offs[i], n) != TW_OK) {
            snprintf(err, errlen, "writing the temporary file in %s: %s",
                     s->tmpdir, strerror(errno));
            return TW_ERR;
        }
        s->file_end += (off_t)n;
    }
    s->run_start[s->nruns] = s->file_end;
    s->used = 0;
    s->nrec = 0;
    return TW_OK;
}

int tw_spill_add(tw_spill *s, int64_t key, const char *bytes, size_t len,
                 char *err, size_t errlen)
{
    if (len > UINT32_MAX) {
        snprintf(err, errlen, "a record of %zu bytes is too long", len);
        return TW_ERR;
    }
    size_t need = sizeof(rec_head) + len;
    if (s->used > 0 && s->used + need > s->limit &&
        flush_run(s, err, errlen) != TW_OK)
        return TW_ERR;
    if (tw_grow((void **)&s->buf, &s->cap, s->used + need, 1, 1u << 16) !=
            TW_OK ||
        tw_grow((void **)&s->offs, &s->cap_offs, s->nrec + 1, sizeof(*s->offs),
                1024) != TW_OK) {
        snprintf(err, errlen, "out of memory (spill buffer)");
        return TW_ERR;
    }
    rec_head h;
    memset(&h, 0, sizeof(h)); /* the padding goes to the file too */
    h.key = key;
    h.seq = s->seq++;
    h.len = (uint32_t)len;
    memcpy(s->buf + s->used, &h, sizeof(h));
    memcpy(s->buf + s->used + sizeof(h), bytes, len);
    s->offs[s->nrec++] = s->used;
    s->used += need;
    return TW_OK;
}

/* Makes r's next record current (buffered whole). 1: a record, 0: the run
 * is done, TW_ERR: read error or out of memory. */
static int run_next(int fd, run *r)
{
    for (;;) {
        size_t have = r->fill - r->pos;
        if (have >= sizeof(rec_head)) {
            memcpy(&r->head, r->buf + r->pos, sizeof(r->head));
            if (have >= sizeof(rec_head) + r->head.len)
                return 1;
        }
        if (r->at >= r->end) {
            if (have == 0)
                return 0;
            errno = EIO; /* a record cut off: the file changed under us */
            return TW_ERR;
        }
        if (have > 0 && r->pos > 0) /* buf is NULL before the first read */
            memmove(r->buf, r->buf + r->pos, have);
        r->fill = have;
        r->pos = 0;
        size_t want = have >= sizeof(rec_head) ? sizeof(rec_head) + r->head.len
                                               : TW_SPILL_READ_BUF;
        if (want < TW_SPILL_READ_BUF)
            want = TW_SPILL_READ_BUF;
        if (want > r->cap) {
            char *nb = realloc(r->buf, want);
            if (nb == NULL)
                return TW_ERR;
            r->buf = nb;
            r->cap = want;
        }
        size_t room = r->cap - r->fill;
        if ((off_t)room > r->end - r->at)
            room = (size_t)(r->end - r->at);
        ssize_t n = pread(fd, r->buf + r->fill, room, r->at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return TW_ERR;
        }
        r->fill += (size_t)n;
        r->at += n;
    }
}

static int run_less(const run *a, const run *b)
{
    if (a->head.key != b->head.key)
        return a->head.key < b->head.key;
    return a->head.seq < b->head.seq;
}

static void heap_down(run **h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && run_less(h[l], h[m]))
            m = l;
        if (l + 1 < n && run_less(h[l + 1], h[m]))
            m = l + 1;
        if (m == i)
            return;
        run *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int finish_in_memory(tw_spill *s, tw_spill_out_fn out, void *ud)
{
    sort_buffer(s);
    for (size_t i = 0; i < s->nrec; i++) {
        rec_head h;
        memcpy(&h, s->buf + s->offs[i], sizeof(h));
        if (out(ud, h.key, s->buf + s->offs[i] + sizeof(h), h.len) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

int tw_spill_finish(tw_spill *s, tw_spill_out_fn out, void *ud, char *err,
                    size_t errlen)
{
    if (s->nruns == 0)
        return finish_in_memory(s, out, ud);
    if (s->nrec > 0 && flush_run(s, err, errlen) != TW_OK)
        return TW_ERR;
    free(s->buf); /* the merge needs only the runs' read buffers */
    s->buf = NULL;
    s->cap = s->used = 0;
    run *runs = calloc(s->nruns, sizeof(*runs));
    run **heap = calloc(s->nruns, sizeof(*heap));
    size_t n = 0;
    int rc = TW_ERR;
    if (runs == NULL || heap == NULL) {
        snprintf(err, errlen, "out of memory (merge)");
        goto out;
    }
    for (size_t i = 0; i < s->nruns; i++) {
        runs[i].at = s->run_start[i];
        runs[i].end = s->run_start[i + 1];
        int r = run_next(s->fd, &runs[i]);
        if (r == TW_ERR)
            goto read_error;
        if (r == 1)
            heap[n++] = &runs[i];
    }
    for (size_t i = n / 2; i-- > 0;)
        heap_down(heap, n, i);
    while (n > 0) {
        run *r = heap[0];
        if (out(ud, r->head.key, r->buf + r->pos + sizeof(rec_head),
                r->head.len) != TW_OK) {
            snprintf(err, errlen, "writing the merged output failed");
            goto out;
        }
        r->pos += sizeof(rec_head) + r->head.len;
        int more = run_next(s->fd, r);
        if (more == TW_ERR)
            goto read_error;
        if (more == 0)
            heap[0] = heap[--n];
        heap_down(heap, n, 0);
    }
    rc = TW_OK;
    goto out;
read_error:
    snprintf(err, errlen, "reading back the temporary file: %s",
             strerror(errno));
out:
    for (size_t i = 0; runs != NULL && i < s->nruns; i++)
        free(runs[i].buf);
    free(runs);
    free(heap);
    return rc;
}
