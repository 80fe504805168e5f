/* crc_pclmul.c - CRC-32C, CRC-32 (IEEE) and CRC-64/NVME by 128-bit PCLMULQDQ folding (fused with crc32 lanes
 * for large CRC-32C inputs), and the one-multiply a*b mod P that combine is built on, for x86 CPUs
 * with SSE4.2 + PCLMULQDQ but no AVX-512. The folding itself lives in crc_x86_fold.h. */
#include <nmmintrin.h>
#include <wmmintrin.h>
#include <tmmintrin.h>
#include <smmintrin.h>

#include "crc_internal.h"
#include "crc_x86_sse42.h"
#include "crc_x86_fold.h"

/* ---- CRC-32C: the crc32 instruction does the final 128 -> 32 reduction (finish_c). ---- */

/* Fused blocks: PCLMULQDQ and crc32 run on different execution ports, so each block folds its
 * first 64*M bytes with 4 xmm accumulators while three crc32 streams cover the next 3 * 24*M
 * bytes; the four partial CRCs are joined by Horner's rule with one multiply by x^(8*24*M) mod P
 * each (clmul by kshift = (x^(8*24*M-32) mod P) << 1, then crc32 over the 64-bit product
 * multiplies by x^32 and reduces). */
static inline uint32_t shift_by(uint32_t a, long long kshift) {
    __m128i pr = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_set_epi64x(0, kshift), 0);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(pr));
}

static inline uint32_t crc32c_fused(uint32_t reg, const uint8_t **pp, size_t *np, size_t M,
                                    long long kshift) {
    const uint8_t *p = *pp;
    size_t n = *np;
    const size_t ls = 24 * M, block = 64 * M + 3 * ls;
    const __m128i k512 = KV(K_C.k512);
    while (n >= block) {
        const uint8_t *s1 = p + 64 * M;
        __m128i x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)reg));
        __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
        uint64_t c1 = 0, c2 = 0, c3 = 0;
        for (size_t i = 0; i < 24; i += 8) {
            c1 = _mm_crc32_u64(c1, crcm_load64(s1 + i));
            c2 = _mm_crc32_u64(c2, crcm_load64(s1 + ls + i));
            c3 = _mm_crc32_u64(c3, crcm_load64(s1 + 2 * ls + i));
        }
        for (size_t j = 1; j < M; j++) {
            const uint8_t *f = p + 64 * j, *c = s1 + 24 * j;
            x0 = _mm_xor_si128(fold(x0, k512), _mm_loadu_si128((const __m128i *)f));
            x1 = _mm_xor_si128(fold(x1, k512), _mm_loadu_si128((const __m128i *)(f + 16)));
            x2 = _mm_xor_si128(fold(x2, k512), _mm_loadu_si128((const __m128i *)(f + 32)));
            x3 = _mm_xor_si128(fold(x3, k512), _mm_loadu_si128((const __m128i *)(f + 48)));
            for (size_t i = 0; i < 24; i += 8) {
                c1 = _mm_crc32_u64(c1, crcm_load64(c + i));
                c2 = _mm_crc32_u64(c2, crcm_load64(c + ls + i));
                c3 = _mm_crc32_u64(c3, crcm_load64(c + 2 * ls + i));
            }
        }
        x0 = _mm_xor_si128(_mm_xor_si128(fold(x0, KV(K_C.k384)), fold(x1, KV(K_C.k256))),
                           _mm_xor_si128(fold(x2, KV(K_C.k128)), x3));
        reg = finish_c(x0);
        reg = shift_by(shift_by(shift_by(reg, kshift) ^ (uint32_t)c1, kshift) ^ (uint32_t)c2, kshift) ^
              (uint32_t)c3;
        p += block;
        n -= block;
    }
    *pp = p;
    *np = n;
    return reg;
}

uint32_t crcm_pclmul_crc32c(uint32_t reg, const uint8_t *p, size_t n) {
    /* shift constants (x^(8*24*M-32) mod P) << 1 for CRC-32C, from the same generator:
     * M=32 -> x^6112, M=16 -> x^3040 (the latter equals the D=3072 fold constant) */
    if (n >= 4352) reg = crc32c_fused(reg, &p, &n, 32, 0xd7a4825cll);
    if (n >= 2176) reg = crc32c_fused(reg, &p, &n, 16, 0xd270f1a2ll);
    if (n < 64) return crc32c_serial(reg, p, n); /* folding wins from 64 bytes (measured) */
    return finish_c(fold_xmm(reg, p, n, &K_C));
}

/* Cold data (windows over memory streaming in from DRAM): one forward stream the hardware
 * prefetcher can follow. The fused kernel above reads four regions 768-2048 bytes apart, which
 * on Zen 3 (EPYC Milan VM) ran 16 KiB windows over a cold 256 MiB buffer at 0.52x a plain read
 * of the same memory (6.9 against 13.2 GB/s), and so lost to a Python loop that copies each
 * window into cache before checksumming it; this stream runs at the 128-bit fold's own speed. */
uint32_t crcm_pclmul_crc32c_stream(uint32_t reg, const uint8_t *p, size_t n) {
    if (n < 64) return crc32c_serial(reg, p, n);
    return finish_c(fold_xmm_pf(reg, p, n, &K_C, 1));
}

/* ---- CRC-32 (IEEE): no crc32 instruction, so the final reduction is carry-less (finish_i). ---- */

uint32_t crcm_pclmul_crc32(uint32_t reg, const uint8_t *p, size_t n) {
    if (n < 16) return crc32_short(reg, p, n);
    return finish_i(fold_xmm(reg, p, n, &K_I));
}

/* ---- a*b mod P: clmul gives the 63-bit product; shifted left by one it is a 64-bit reflected
 * value V = lo*x^32 + hi, so a*b mod P = rawcrc(0, lo as 4 bytes) ^ hi. ---- */

static inline uint64_t clmul32(uint32_t a, uint32_t b) {
    __m128i r = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0);
    return (uint64_t)_mm_cvtsi128_si64(r) << 1;
}

uint32_t crcm_pclmul_mulmod_crc32c(uint32_t a, uint32_t b) {
    uint64_t v = clmul32(a, b);
    return _mm_crc32_u32(0, (uint32_t)v) ^ (uint32_t)(v >> 32);
}

uint32_t crcm_pclmul_mulmod_crc32(uint32_t a, uint32_t b) {
    return barrett_i(_mm_cvtsi64_si128((long long)clmul32(a, b)));
}

/* ---- CRC-64/NVME: folding alone (no crc32 instruction for it) and the carry-less finish. ---- */

uint64_t crcm_pclmul_crc64nvme(uint64_t reg, const uint8_t *p, size_t n) {
    if (n < 16) return crc64_short(reg, p, n);
    return crc64_xmm(reg, p, n);
}

/* a*b mod P: the 127-bit carry-less product is the lane a*b*x (see K_N); shifted left by one bit
 * across the qwords it is the lane a*b, which barrett_n reduces. */
uint64_t crcm_pclmul_mulmod_crc64nvme(uint64_t a, uint64_t b) {
    __m128i c = _mm_clmulepi64_si128(seed64(a), seed64(b), 0x00);
    __m128i lane = _mm_or_si128(_mm_slli_epi64(c, 1), _mm_slli_si128(_mm_srli_epi64(c, 63), 8));
    return barrett_n(lane);
}
