/*
 * fw_ckpt.h - sequential checkpoint encoding for rule state: fixed-width
 * little-endian-as-in-memory integers and doubles, and length-prefixed
 * strings, written through tw_host.buf_write and read back with bounds
 * checks. A checkpoint is read only by the same build of the same rule.
 *
 * Ownership: the writer borrows the host and buffer; strings returned by
 * fwck_get_str() are malloc'd and owned by the caller.
 */
#ifndef TW_RULES_FW_CKPT_H
#define TW_RULES_FW_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

typedef struct fwck_w {
    const tw_host *host;
    tw_buf *buf;
    int err; /* sticky: non-zero once any write failed */
} fwck_w;

void fwck_put_u64(fwck_w *w, uint64_t v);
void fwck_put_i64(fwck_w *w, int64_t v);
void fwck_put_f64(fwck_w *w, double v);
/* NULL is encoded distinctly from "". */
void fwck_put_str(fwck_w *w, const char *s);
void fwck_put_bytes(fwck_w *w, const void *p, size_t n);

typedef struct fwck_r {
    const uint8_t *p;
    size_t len;
    size_t pos;
    int err; /* sticky: truncated input, bad length or out of memory */
} fwck_r;

void fwck_reader(fwck_r *r, const void *data, size_t len);
uint64_t fwck_get_u64(fwck_r *r);
int64_t fwck_get_i64(fwck_r *r);
double fwck_get_f64(fwck_r *r);
/* A malloc'd copy, or NULL for an encoded NULL (r->err tells failures). */
char *fwck_get_str(fwck_r *r);
void fwck_get_bytes(fwck_r *r, void *p, size_t n);
/* A count that must fit the remaining input at `unit` bytes per item. */
size_t fwck_get_count(fwck_r *r, size_t unit);

#endif /* TW_RULES_FW_CKPT_H */
