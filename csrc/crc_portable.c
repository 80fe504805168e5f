/* crc_portable.c - the kernels every CPU can run (slicing-by-16 tables), and the portable
 * polynomial arithmetic that combine is built on. Also the reference the SIMD kernels are
 * tested against through the dispatcher. */
#include "crc_internal.h"

/* Slicing-by-16: 16 table lookups retire 16 bytes per step with no dependency between the
 * lookups, against one byte per dependent lookup for the classic table loop. */
static inline uint32_t slice16(const uint32_t (*t)[256], uint32_t reg, const uint8_t *p,
                               size_t n) {
    while (n >= 16) {
        uint32_t a = crcm_load32(p) ^ reg; /* little-endian: byte 0 is the first fed */
        uint32_t b = crcm_load32(p + 4), c = crcm_load32(p + 8), d = crcm_load32(p + 12);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        a = __builtin_bswap32(crcm_load32(p)) ^ reg;
        b = __builtin_bswap32(b); c = __builtin_bswap32(c); d = __builtin_bswap32(d);
#endif
        reg = t[15][a & 0xff] ^ t[14][(a >> 8) & 0xff] ^ t[13][(a >> 16) & 0xff] ^ t[12][a >> 24] ^
              t[11][b & 0xff] ^ t[10][(b >> 8) & 0xff] ^ t[9][(b >> 16) & 0xff] ^ t[8][b >> 24] ^
              t[7][c & 0xff] ^ t[6][(c >> 8) & 0xff] ^ t[5][(c >> 16) & 0xff] ^ t[4][c >> 24] ^
              t[3][d & 0xff] ^ t[2][(d >> 8) & 0xff] ^ t[1][(d >> 16) & 0xff] ^ t[0][d >> 24];
        p += 16;
        n -= 16;
    }
    while (n--) reg = (reg >> 8) ^ t[0][(reg ^ *p++) & 0xff];
    return reg;
}

uint32_t crcm_portable_crc32c(uint32_t reg, const uint8_t *p, size_t n) {
    return slice16(crcm_table_crc32c, reg, p, n);
}

uint32_t crcm_portable_crc32(uint32_t reg, const uint8_t *p, size_t n) {
    return slice16(crcm_table_crc32, reg, p, n);
}

/* a*b mod P, reflected (bit 31 is x^0): shift-and-add over the bits of a, most significant
 * power first, reducing b by x each step. */
static inline uint32_t mulmod(uint32_t a, uint32_t b, uint32_t poly) {
    uint32_t product = 0;
    for (uint32_t m = 0x80000000u; m; m >>= 1) {
        product ^= b & (0u - ((a & m) != 0));
        b = (b >> 1) ^ (poly & (0u - (b & 1)));
    }
    return product;
}

uint32_t crcm_portable_mulmod_crc32c(uint32_t a, uint32_t b) {
    return mulmod(a, b, CRCM_POLY_CRC32C);
}

uint32_t crcm_portable_mulmod_crc32(uint32_t a, uint32_t b) {
    return mulmod(a, b, CRCM_POLY_CRC32);
}

uint32_t crcm_xnmodp(crcm_algorithm alg, uint64_t n) {
    const uint32_t *x2k = alg == CRCM_CRC32 ? crcm_x2k_crc32 : crcm_x2k_crc32c;
    uint32_t poly = alg == CRCM_CRC32 ? CRCM_POLY_CRC32 : CRCM_POLY_CRC32C;
    uint32_t acc = 0x80000000u; /* x^0 */
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1) acc = mulmod(acc, x2k[k], poly);
    return acc;
}

/* ---- CRC-64/NVME (64-bit register, x^0 is bit 63) ---- */

/* Slicing-by-16 as above; the register covers the first 8 of the 16 bytes. */
uint64_t crcm_portable_crc64nvme(uint64_t reg, const uint8_t *p, size_t n) {
    const uint64_t (*t)[256] = crcm_table_crc64nvme;
    while (n >= 16) {
        uint64_t a = crcm_load64(p), b = crcm_load64(p + 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        a = __builtin_bswap64(a);
        b = __builtin_bswap64(b);
#endif
        a ^= reg;
        reg = t[15][a & 0xff] ^ t[14][(a >> 8) & 0xff] ^ t[13][(a >> 16) & 0xff] ^
              t[12][(a >> 24) & 0xff] ^ t[11][(a >> 32) & 0xff] ^ t[10][(a >> 40) & 0xff] ^
              t[9][(a >> 48) & 0xff] ^ t[8][a >> 56] ^
              t[7][b & 0xff] ^ t[6][(b >> 8) & 0xff] ^ t[5][(b >> 16) & 0xff] ^
              t[4][(b >> 24) & 0xff] ^ t[3][(b >> 32) & 0xff] ^ t[2][(b >> 40) & 0xff] ^
              t[1][(b >> 48) & 0xff] ^ t[0][b >> 56];
        p += 16;
        n -= 16;
    }
    while (n--) reg = (reg >> 8) ^ t[0][(reg ^ *p++) & 0xff];
    return reg;
}

/* a*b mod P, reflected (bit 63 is x^0), as mulmod above. */
uint64_t crcm_portable_mulmod_crc64nvme(uint64_t a, uint64_t b) {
    uint64_t product = 0;
    for (uint64_t m = 1ull << 63; m; m >>= 1) {
        product ^= b & (0ull - ((a & m) != 0));
        b = (b >> 1) ^ (CRCM_POLY_CRC64NVME & (0ull - (b & 1)));
    }
    return product;
}
