/* debug_record.c - event-file record framing (debug_record.h). */
#include "debug_record.h"

#include <inttypes.h>
#include <stdio.h>

#include "debug_crc32c.h"
#include "trainwatch/plugin.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

void tw_debug_record_header(uint64_t n, uint8_t out[12])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(n >> (8 * i));
    uint32_t c = tw_crc32c_mask(tw_crc32c(out, 8));
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(c >> (8 * i));
}

int tw_debug_record_check(const uint8_t *buf, size_t len,
                          const uint8_t **payload, size_t *payload_len,
                          tw_debug_footer *footer, char *err, size_t errlen)
{
    if (len < TW_DEBUG_RECORD_OVERHEAD) {
        snprintf(err, errlen,
                 "record of %zu bytes is shorter than its 16 framing bytes",
                 len);
        return TW_ERR;
    }
    uint64_t n = le64(buf);
    uint32_t want = tw_crc32c_mask(tw_crc32c(buf, 8));
    if (le32(buf + 8) != want) {
        snprintf(err, errlen,
                 "offset 8: length CRC 0x%08" PRIx32 " does not match "
                 "0x%08" PRIx32,
                 le32(buf + 8), want);
        return TW_ERR;
    }
    if (n != (uint64_t)(len - TW_DEBUG_RECORD_OVERHEAD)) {
        snprintf(err, errlen,
                 "offset 0: payload length %" PRIu64
                 " does not fit the record's %zu bytes",
                 n, len);
        return TW_ERR;
    }
    uint32_t foot = le32(buf + 12 + n);
    if (foot == TW_DEBUG_FOOTER_CONSTANT_VALUE) {
        *footer = TW_DEBUG_FOOTER_CONSTANT;
    } else if (foot == tw_crc32c_mask(tw_crc32c(buf + 12, (size_t)n))) {
        *footer = TW_DEBUG_FOOTER_CRC;
    } else {
        snprintf(err, errlen,
                 "offset %zu: footer 0x%08" PRIx32
                 " is neither the debug constant nor the payload's CRC",
                 (size_t)(12 + n), foot);
        return TW_ERR;
    }
    *payload = buf + 12;
    *payload_len = (size_t)n;
    return TW_OK;
}
