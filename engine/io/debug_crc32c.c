/* debug_crc32c.c - CRC-32C and the TFRecord mask (debug_crc32c.h). */
#include "debug_crc32c.h"

/* The CRC of each 4-bit value, for the reflected polynomial 0x82F63B78. */
static const uint32_t nibble_table[16] = {
    0x00000000, 0x105EC76F, 0x20BD8EDE, 0x30E349B1, 0x417B1DBC, 0x5125DAD3,
    0x61C69362, 0x7198540D, 0x82F63B78, 0x92A8FC17, 0xA24BB5A6, 0xB21572C9,
    0xC38D26C4, 0xD3D3E1AB, 0xE330A81A, 0xF36E6F75};

uint32_t tw_crc32c(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        c = (c >> 4) ^ nibble_table[c & 15u];
        c = (c >> 4) ^ nibble_table[c & 15u];
    }
    return c ^ 0xFFFFFFFFu;
}

uint32_t tw_crc32c_mask(uint32_t c)
{
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}
