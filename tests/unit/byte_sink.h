/* byte_sink.h - a minimal growable byte sink standing in for the host's
 * tw_buf in the unit tests of rules/common code that saves through
 * tw_ser without an engine (test_countmap.c, test_rel_hist.c,
 * test_sysutil_ring.c), and sink_host(), a host with only that. The
 * includer frees b->p. */
#ifndef TW_TEST_BYTE_SINK_H
#define TW_TEST_BYTE_SINK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"

struct tw_buf {
    uint8_t *p;
    size_t n, cap;
};

static int sink_write(tw_buf *b, const void *data, size_t len)
{
    if (b->n + len > b->cap) {
        size_t cap = (b->n + len) * 2;
        uint8_t *p = realloc(b->p, cap);
        if (p == NULL)
            return TW_ERR;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    return TW_OK;
}

/* A host whose only service is writing into a sink. */
static inline tw_host sink_host(void)
{
    tw_host host;
    memset(&host, 0, sizeof(host));
    host.buf_write = sink_write;
    return host;
}

#endif /* TW_TEST_BYTE_SINK_H */
