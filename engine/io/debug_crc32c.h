/*
 * debug_crc32c.h - CRC-32C (Castagnoli) and the TFRecord mask that the
 * debug-output folder's event files use (DEBUG_RULES.md §6.5). Written here
 * (a 16-entry nibble table) because none of the linked libraries has the
 * Castagnoli polynomial: zlib's crc32 is the IEEE one.
 */
#ifndef TW_DEBUG_CRC32C_H
#define TW_DEBUG_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C of n bytes: reflected polynomial 0x82F63B78, init and final xor
 * 0xFFFFFFFF. CRC32C("123456789") = 0xE3069283. */
uint32_t tw_crc32c(const uint8_t *p, size_t n);

/* The TFRecord mask: ((c >> 15) | (c << 17)) + 0xA282EAD8 mod 2^32. */
uint32_t tw_crc32c_mask(uint32_t c);

#endif /* TW_DEBUG_CRC32C_H */
