/* buf.c - a growable byte buffer (buf.h). */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

struct tw_buf {
    uint8_t *data;
    size_t len, cap;
};

tw_buf *tw_buf_new(void)
{
    return calloc(1, sizeof(tw_buf));
}

void tw_buf_free(tw_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    free(b);
}

int tw_buf_append(tw_buf *b, const void *data, size_t len)
{
    if (len == 0)
        return TW_OK;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len)
            cap *= 2;
        uint8_t *nd = realloc(b->data, cap);
        if (nd == NULL)
            return TW_ERR;
        b->data = nd;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return TW_OK;
}

const uint8_t *tw_buf_data(const tw_buf *b)
{
    return b->data;
}

size_t tw_buf_len(const tw_buf *b)
{
    return b->len;
}

void tw_buf_clear(tw_buf *b)
{
    b->len = 0;
}
