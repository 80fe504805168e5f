/* crc_x86_sse42.h - the serial SSE4.2 `crc32` loop, shared here so the three x86 kernel files
 * (crc_sse42.c, crc_pclmul.c, crc_avx512.c) keep one copy of it instead of three.
 * Internal, header-only (static inline): its includer must be compiled with -msse4.2. */
#ifndef CRC_X86_SSE42_H
#define CRC_X86_SSE42_H

#if !defined(__SSE4_2__)
#error "crc_x86_sse42.h: compile the including file with -msse4.2"
#endif

#include <nmmintrin.h>

#include "crc_internal.h"

/* CRC-32C register after feeding n bytes at p, one crc32 instruction per 8 bytes, then 4/2/1. */
static inline uint32_t crc32c_serial(uint32_t reg, const uint8_t *p, size_t n) {
    uint64_t r = reg;
    for (; n >= 8; n -= 8, p += 8) r = _mm_crc32_u64(r, crcm_load64(p));
    reg = (uint32_t)r;
    if (n & 4) { reg = _mm_crc32_u32(reg, crcm_load32(p)); p += 4; }
    if (n & 2) { uint16_t v; memcpy(&v, p, 2); reg = _mm_crc32_u16(reg, v); p += 2; }
    if (n & 1) reg = _mm_crc32_u8(reg, *p);
    return reg;
}

#endif /* CRC_X86_SSE42_H */
