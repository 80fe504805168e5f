/* crc_sse42.c - CRC-32C with the SSE4.2 `crc32` instruction alone, for x86 CPUs without
 * carry-less multiply; three interleaved streams hide the instruction's 3-cycle latency. */
#include <nmmintrin.h>

#include "crc_internal.h"
#include "crc_x86_sse42.h"

/* Software 32x32 -> 63-bit carry-less product, 4 bits of a at a time through a 16-entry table
 * of multiples of b (the table is built once per call per constant, see below). */
typedef struct { uint64_t t[16]; } clmul_table;

static inline void clmul_table_init(clmul_table *tb, uint32_t b) {
    tb->t[0] = 0;
    tb->t[1] = b;
    for (int i = 2; i < 16; i++)
        tb->t[i] = (i & 1) ? tb->t[i - 1] ^ b : tb->t[i >> 1] << 1;
}

static inline uint64_t clmul_by(const clmul_table *tb, uint32_t a) {
    uint64_t r = 0;
    for (int j = 0; j < 32; j += 4) r ^= tb->t[(a >> j) & 15] << j;
    return r;
}

/* reg * x^(8L) mod P, given the table for k = x^(8L-32) mod P: the product a*k shifted left by
 * one is a*k as a 64-bit reflected value (bit 0 = x^63), and crc32 over it from register 0
 * multiplies by x^32 and reduces. */
static inline uint32_t shift_by(const clmul_table *tb, uint32_t a) {
    return (uint32_t)_mm_crc32_u64(0, clmul_by(tb, a) << 1);
}

/* Blocks of three streams of L bytes each: stream A continues the register, B and C start from
 * 0, and the block's register is (A*x^(8L) + B)*x^(8L) + C. L must be a multiple of 8. */
static inline uint32_t crc_3way(uint32_t reg, const uint8_t **pp, size_t *np, size_t L,
                                uint32_t k) {
    const uint8_t *p = *pp;
    size_t n = *np;
    clmul_table tb;
    clmul_table_init(&tb, k);
    while (n >= 3 * L) {
        uint64_t a = reg, b = 0, c = 0;
        const uint8_t *pa = p, *pb = p + L, *pc = p + 2 * L;
        for (size_t i = 0; i < L; i += 8) {
            a = _mm_crc32_u64(a, crcm_load64(pa + i));
            b = _mm_crc32_u64(b, crcm_load64(pb + i));
            c = _mm_crc32_u64(c, crcm_load64(pc + i));
        }
        reg = shift_by(&tb, shift_by(&tb, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
        p += 3 * L;
        n -= 3 * L;
    }
    *pp = p;
    *np = n;
    return reg;
}

uint32_t crcm_sse42_crc32c(uint32_t reg, const uint8_t *p, size_t n) {
    /* Shift constants x^(8L-32) mod P (reflected CRC-32C), from the generator
     * python: xn(8*L-32, 0x82F63B78) with xn = square-and-multiply mulmod, equal to
     * crcm_xnmodp(CRCM_CRC32C, 8*L-32); checked by the tests of every length. */
    if (n >= 3 * 4096) reg = crc_3way(reg, &p, &n, 4096, 0xc38a7543u);
    if (n >= 3 * 512) reg = crc_3way(reg, &p, &n, 512, 0x6ebf1d86u);
    if (n >= 3 * 128) reg = crc_3way(reg, &p, &n, 128, 0x069db049u);
    return crc32c_serial(reg, p, n);
}
