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

/* ---- CRC-32C and CRC-64/NVME of the same bytes in one pass ---- */

/* As in crc_avx2.c: the folds (four xmm accumulators, 64 bytes a step, carried across blocks)
 * take all of CRC-64/NVME and four crc32 streams (16 bytes a step each, a quarter of the block
 * each) all of CRC-32C, which the crc32 port retires faster than the 128-bit folds go; blocks
 * are joined by one multiply each and prefetch the next. */
#define PAIR_M 128               /* steps per block: 8 KiB blocks, 2 KiB per crc32 stream */
#define PAIR_BLOCK (64 * PAIR_M)
/* (x^(8L-32) mod P) << 1 for CRC-32C: L = 2048 (a stream) x^16352, L = 8192 (a block) x^65504 */
#define PAIR_K_STREAM 0x1a0f717c4ll
#define PAIR_K_BLOCK 0x54a86326ll

static inline void pair_step(__m128i *x, __m128i k, const uint8_t *q, uint64_t *a,
                             const uint8_t *c) {
    _mm_prefetch((const char *)((uintptr_t)q + PAIR_BLOCK), _MM_HINT_T0); /* may lie past the end */
    x[0] = _mm_xor_si128(fold(x[0], k), _mm_loadu_si128((const __m128i *)q));
    x[1] = _mm_xor_si128(fold(x[1], k), _mm_loadu_si128((const __m128i *)(q + 16)));
    x[2] = _mm_xor_si128(fold(x[2], k), _mm_loadu_si128((const __m128i *)(q + 32)));
    x[3] = _mm_xor_si128(fold(x[3], k), _mm_loadu_si128((const __m128i *)(q + 48)));
    for (int i = 0; i < 4; i++) {
        a[i] = _mm_crc32_u64(a[i], crcm_load64(c + i * 16 * PAIR_M));
        a[i] = _mm_crc32_u64(a[i], crcm_load64(c + i * 16 * PAIR_M + 8));
    }
}

void crcm_pclmul_crc32c_crc64nvme(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n) {
    uint32_t rc = *reg32;
    uint64_t rn = *reg64;
    if (n < 2 * PAIR_BLOCK) {
        *reg32 = crcm_pclmul_crc32c(rc, p, n);
        *reg64 = crcm_pclmul_crc64nvme(rn, p, n);
        return;
    }
    const uint8_t *end = p + n;
    const __m128i k = KV(K_N.k512);
    __m128i x[4] = {_mm_xor_si128(_mm_loadu_si128((const __m128i *)p), seed64(rn)),
                    _mm_loadu_si128((const __m128i *)(p + 16)),
                    _mm_loadu_si128((const __m128i *)(p + 32)),
                    _mm_loadu_si128((const __m128i *)(p + 48))};
    int first = 1;
    while ((size_t)(end - p) >= PAIR_BLOCK) {
        uint64_t a[4] = {0, 0, 0, 0};
        if (first) { /* the accumulators already hold the first step */
            for (int i = 0; i < 4; i++) {
                a[i] = _mm_crc32_u64(a[i], crcm_load64(p + i * 16 * PAIR_M));
                a[i] = _mm_crc32_u64(a[i], crcm_load64(p + i * 16 * PAIR_M + 8));
            }
        } else {
            pair_step(x, k, p, a, p);
        }
        first = 0;
        for (int j = 1; j < PAIR_M; j++) pair_step(x, k, p + 64 * j, a, p + 16 * j);
        uint32_t b = (uint32_t)a[0];
        for (int i = 1; i < 4; i++) b = shift_by(b, PAIR_K_STREAM) ^ (uint32_t)a[i];
        rc = shift_by(rc, PAIR_K_BLOCK) ^ b;
        p += PAIR_BLOCK;
    }
    /* the rest (< 8 KiB): CRC-64 keeps folding, CRC-32C takes its own kernel */
    *reg32 = crcm_pclmul_crc32c(rc, p, (size_t)(end - p));
    while ((size_t)(end - p) >= 64) {
        x[0] = _mm_xor_si128(fold(x[0], k), _mm_loadu_si128((const __m128i *)p));
        x[1] = _mm_xor_si128(fold(x[1], k), _mm_loadu_si128((const __m128i *)(p + 16)));
        x[2] = _mm_xor_si128(fold(x[2], k), _mm_loadu_si128((const __m128i *)(p + 32)));
        x[3] = _mm_xor_si128(fold(x[3], k), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
    }
    if (p == end) {
        *reg64 = finish4_n(x[0], x[1], x[2], x[3]);
        return;
    }
    __m128i k128 = KV(K_N.k128);
    __m128i m = _mm_xor_si128(_mm_xor_si128(fold(x[0], KV(K_N.k384)), fold(x[1], KV(K_N.k256))),
                              _mm_xor_si128(fold(x[2], k128), x[3]));
    *reg64 = finish_n(fold_rest(m, p, end, k128));
}
