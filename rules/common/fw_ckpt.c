/*
 * fw_ckpt.c - checkpoint encoding helpers (see fw_ckpt.h).
 */
#include "fw_ckpt.h"

#include <stdlib.h>
#include <string.h>

void fwck_put_bytes(fwck_w *w, const void *p, size_t n)
{
    if (w->err || n == 0)
        return;
    if (w->host->buf_write(w->buf, p, n) != TW_OK)
        w->err = 1;
}

void fwck_put_u64(fwck_w *w, uint64_t v)
{
    fwck_put_bytes(w, &v, sizeof(v));
}

void fwck_put_i64(fwck_w *w, int64_t v)
{
    fwck_put_bytes(w, &v, sizeof(v));
}

void fwck_put_f64(fwck_w *w, double v)
{
    fwck_put_bytes(w, &v, sizeof(v));
}

void fwck_put_str(fwck_w *w, const char *s)
{
    if (!s) {
        fwck_put_u64(w, UINT64_MAX);
        return;
    }
    size_t n = strlen(s);
    fwck_put_u64(w, (uint64_t)n);
    fwck_put_bytes(w, s, n);
}

void fwck_reader(fwck_r *r, const void *data, size_t len)
{
    r->p = data;
    r->len = data ? len : 0;
    r->pos = 0;
    r->err = 0;
}

void fwck_get_bytes(fwck_r *r, void *p, size_t n)
{
    if (r->err || n > r->len - r->pos) {
        r->err = 1;
        memset(p, 0, n);
        return;
    }
    memcpy(p, r->p + r->pos, n);
    r->pos += n;
}

uint64_t fwck_get_u64(fwck_r *r)
{
    uint64_t v;
    fwck_get_bytes(r, &v, sizeof(v));
    return v;
}

int64_t fwck_get_i64(fwck_r *r)
{
    int64_t v;
    fwck_get_bytes(r, &v, sizeof(v));
    return v;
}

double fwck_get_f64(fwck_r *r)
{
    double v;
    fwck_get_bytes(r, &v, sizeof(v));
    return v;
}

size_t fwck_get_count(fwck_r *r, size_t unit)
{
    uint64_t n = fwck_get_u64(r);
    if (r->err)
        return 0;
    if (unit == 0)
        unit = 1;
    if (n > (r->len - r->pos) / unit) {
        r->err = 1;
        return 0;
    }
    return (size_t)n;
}

char *fwck_get_str(fwck_r *r)
{
    uint64_t n = fwck_get_u64(r);
    if (r->err || n == UINT64_MAX)
        return NULL;
    if (n > r->len - r->pos) {
        r->err = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        r->err = 1;
        return NULL;
    }
    memcpy(s, r->p + r->pos, (size_t)n);
    s[n] = '\0';
    r->pos += (size_t)n;
    return s;
}
