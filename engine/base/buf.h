/*
 * buf.h - a growable byte buffer: checkpoint blobs, plugin state, scratch
 * output. The type is the public SDK's opaque tw_buf (plugins write into
 * one through tw_host.buf_write); the engine's code uses these functions.
 *
 * Ownership: tw_buf_new gives the caller the buffer (tw_buf_free);
 * tw_buf_data points into it and is valid until the next append or free.
 */
#ifndef TW_BUF_H
#define TW_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

tw_buf *tw_buf_new(void);
void tw_buf_free(tw_buf *b);
/* TW_OK, or TW_ERR on out-of-memory (the buffer is unchanged). */
int tw_buf_append(tw_buf *b, const void *data, size_t len);
const uint8_t *tw_buf_data(const tw_buf *b);
size_t tw_buf_len(const tw_buf *b);
void tw_buf_clear(tw_buf *b);

#endif /* TW_BUF_H */
