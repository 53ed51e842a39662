/*
 * debug_record.h - one framed record of a debug-output event file
 * (DEBUG_RULES.md §6.5): u64 LE payload length, masked CRC32C of those 8
 * bytes, the payload, a 4-byte footer.
 *
 * The header CRC is always checked. The footer is accepted either as the
 * constant the reference's debug writer puts there (the masked CRC of the
 * text "0x12345678", as written with write_checksum=False) or as the real
 * masked CRC of the payload (TensorBoard-style files); which one was found
 * is reported.
 */
#ifndef TW_DEBUG_RECORD_H
#define TW_DEBUG_RECORD_H

#include <stddef.h>
#include <stdint.h>

/* Header and footer bytes around a payload. */
#define TW_DEBUG_RECORD_OVERHEAD 16u
/* The constant footer of the reference's debug event files. */
#define TW_DEBUG_FOOTER_CONSTANT_VALUE 0x062DC0B3u

typedef enum tw_debug_footer {
    TW_DEBUG_FOOTER_CONSTANT = 0, /* the reference's fixed value      */
    TW_DEBUG_FOOTER_CRC           /* the masked CRC32C of the payload */
} tw_debug_footer;

/* Checks the record that occupies exactly buf[0, len) (the index's
 * length covers the whole framed record). TW_OK with the payload's place
 * in buf; TW_ERR with a sentence naming the offset within the record. */
int tw_debug_record_check(const uint8_t *buf, size_t len,
                          const uint8_t **payload, size_t *payload_len,
                          tw_debug_footer *footer, char *err, size_t errlen);

/* Writes the 12 header bytes for a payload of n bytes (for tests and the
 * fuzz seeds). */
void tw_debug_record_header(uint64_t n, uint8_t out[12]);

#endif /* TW_DEBUG_RECORD_H */
