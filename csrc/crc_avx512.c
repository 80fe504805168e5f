/* crc_avx512.c - CRC-32C, CRC-32 (IEEE) and CRC-64/NVME by 512-bit VPCLMULQDQ folding of one sequential
 * stream, which keeps the hardware prefetcher on a single stream and so runs at DRAM bandwidth on
 * cold data, for x86 CPUs with AVX-512 F/VL/BW + VPCLMULQDQ. The 128-bit folding, tails and
 * finishes it ends with live in crc_x86_fold.h. */
#include <immintrin.h>

#include "crc_internal.h"
#include "crc_x86_sse42.h"
#include "crc_x86_fold.h"

/* The wider fold distances of the 512-bit loops, in the same form as the fold_set constants in
 * crc_x86_fold.h (low qword x^(D+32) mod P, high qword x^(D-32) mod P, each << 1), from the same
 * generator; checked against a bitwise reference at every length. */
typedef struct { fold_k k1024, k1536, k2048; } fold_set_zmm;

static const fold_set_zmm KZ_C = {       /* CRC-32C */
    {0x06992cea2ull, 0x00d3b6092ull},  /* D=1024: x^1056, x^992 */
    {0x0a87ab8a8ull, 0x0ab7aff2aull},  /* D=1536: x^1568, x^1504 */
    {0x0dcb17aa4ull, 0x0b9e02b86ull},  /* D=2048: x^2080, x^2016 */
};
static const fold_set_zmm KZ_I = {       /* CRC-32 (IEEE) */
    {0x1e88ef372ull, 0x14a7fe880ull},
    {0x1821d8bc0ull, 0x12e958ac4ull},
    {0x11542778aull, 0x1322d1430ull},
};
/* CRC-64/NVME: low qword x^(D+63) mod P, high qword x^(D-1) mod P, unshifted (see K_N in
 * crc_x86_fold.h), from tools/gen_crc64_constants.py. */
static const fold_set_zmm KZ_N = {
    {0xa1ca681e733f9c40ull, 0x5f852fb61e8d92dcull},  /* D=1024: x^1087, x^1023 */
    {0x758ee09da263e275ull, 0x6d2d13de8038b4caull},  /* D=1536: x^1599, x^1535 */
    {0x37ccd3e14069cabcull, 0xa043808c0f782663ull},  /* D=2048: x^2111, x^2047 */
};

#define KZ(k) _mm512_broadcast_i32x4(KV(k))
#define XOR3(a, b, c) _mm512_ternarylogic_epi64((a), (b), (c), 0x96)

/* fold each 128-bit lane of z forward and xor in d */
static inline __m512i foldz(__m512i z, __m512i k, __m512i d) {
    return XOR3(_mm512_clmulepi64_epi128(z, k, 0x00), _mm512_clmulepi64_epi128(z, k, 0x11), d);
}
static inline __m512i loadz(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }

/* Four zmm accumulators z0..z3 covering 256 consecutive bytes (z0 first), reduced to one xmm
 * lane whose raw CRC from register 0 equals theirs: z0, z1, z2 folded 1536, 1024, 512 bits onto
 * z3 in parallel, then 64-byte steps over what is left of [p, end) below 256 bytes, then lanes
 * 0..2 onto lane 3, then 16-byte steps and the tail. */
static inline __m128i reduce_zmm(__m512i z0, __m512i z1, __m512i z2, __m512i z3, const uint8_t *p,
                                 const uint8_t *end, const fold_set *ks, const fold_set_zmm *kz) {
    /* z0, z1, z2 folded forward by 1536, 1024, 512 bits onto z3, in parallel */
    __m512i ka = KZ(kz->k1536), kb = KZ(kz->k1024);
    __m512i k = KZ(ks->k512);
    z2 = XOR3(XOR3(_mm512_clmulepi64_epi128(z0, ka, 0x00), _mm512_clmulepi64_epi128(z0, ka, 0x11),
                   _mm512_clmulepi64_epi128(z1, kb, 0x00)),
              XOR3(_mm512_clmulepi64_epi128(z1, kb, 0x11), _mm512_clmulepi64_epi128(z2, k, 0x00),
                   _mm512_clmulepi64_epi128(z2, k, 0x11)),
              z3);
    while ((size_t)(end - p) >= 64) {
        z2 = foldz(z2, k, loadz(p));
        p += 64;
    }
    /* lanes 0..2 folded forward by 384, 256, 128 bits onto lane 3 */
    __m512i kl = _mm512_inserti32x4(
        _mm512_inserti32x4(_mm512_inserti32x4(_mm512_setzero_si512(), KV(ks->k384), 0),
                           KV(ks->k256), 1), KV(ks->k128), 2);
    __m512i t = XOR3(_mm512_clmulepi64_epi128(z2, kl, 0x00), _mm512_clmulepi64_epi128(z2, kl, 0x11),
                     _mm512_maskz_mov_epi64(0xC0, z2)); /* lane 3 of z2 passes through */
    __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
    __m128i x = _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    return fold_rest(x, p, end, KV(ks->k128));
}

/* Prefetching 2 KiB ahead lifted cold 16 KiB windows from 12 to 14.3 GB/s on a Xeon (Sapphire
 * Rapids VM), equal to a plain xor-reduce read, and hot 256 KiB from 70 to 88 GB/s; prefetches
 * never fault, so running past the end is harmless. The address is formed as an integer: p + 2048
 * itself may lie past the buffer. */
static inline void prefetch_256(const uint8_t *p) {
    uintptr_t ahead = (uintptr_t)p + 2048;
    _mm_prefetch((const char *)ahead, _MM_HINT_T0);
    _mm_prefetch((const char *)(ahead + 64), _MM_HINT_T0);
    _mm_prefetch((const char *)(ahead + 128), _MM_HINT_T0);
    _mm_prefetch((const char *)(ahead + 192), _MM_HINT_T0);
}

/* n >= 256: four zmm accumulators (256 bytes per step, each lane folded 2048 bits forward),
 * then reduce_zmm. ks: 128..512-bit constants, kz: wider. */
static inline __m128i fold_zmm(__m128i seed, const uint8_t *p, size_t n, const fold_set *ks,
                               const fold_set_zmm *kz) {
    const uint8_t *end = p + n;
    __m512i z0 = _mm512_xor_si512(loadz(p), _mm512_zextsi128_si512(seed));
    __m512i z1 = loadz(p + 64), z2 = loadz(p + 128), z3 = loadz(p + 192);
    __m512i k = KZ(kz->k2048);
    p += 256;
    while ((size_t)(end - p) >= 256) {
        prefetch_256(p);
        z0 = foldz(z0, k, loadz(p));
        z1 = foldz(z1, k, loadz(p + 64));
        z2 = foldz(z2, k, loadz(p + 128));
        z3 = foldz(z3, k, loadz(p + 192));
        p += 256;
    }
    return reduce_zmm(z0, z1, z2, z3, p, end, ks, kz);
}

/* ---- CRC-32C ---- */

uint32_t crcm_avx512_crc32c_stream(uint32_t reg, const uint8_t *p, size_t n) {
    /* below 64 bytes the serial crc32 chain beats folding setup + reduction (measured) */
    if (n < 64) return crc32c_serial(reg, p, n);
    if (n < 256) return finish_c(fold_xmm(reg, p, n, &K_C));
    return finish_c(fold_zmm(seed32(reg), p, n, &K_C, &KZ_C));
}

/* Hot data: the single stream already runs at ~85 GB/s from 4 KiB up here (VPCLMULQDQ
 * throughput bound). Fusing it with three crc32 lanes on adjacent regions (blocks of 256*M fold
 * bytes + 3*16*M crc32 bytes, M = 16/32, Horner join) measured no better (54-70 GB/s at
 * 64 KiB) on this Xeon, so the hot entry is the stream kernel. */
uint32_t crcm_avx512_crc32c(uint32_t reg, const uint8_t *p, size_t n) {
    return crcm_avx512_crc32c_stream(reg, p, n);
}

/* ---- CRC-32 (IEEE): no crc32 instruction, so the final reduction is carry-less. ---- */

uint32_t crcm_avx512_crc32_stream(uint32_t reg, const uint8_t *p, size_t n) {
    if (n < 16) return crc32_short(reg, p, n);
    if (n < 256) return finish_i(fold_xmm(reg, p, n, &K_I));
    return finish_i(fold_zmm(seed32(reg), p, n, &K_I, &KZ_I));
}

uint32_t crcm_avx512_crc32(uint32_t reg, const uint8_t *p, size_t n) {
    return crcm_avx512_crc32_stream(reg, p, n);
}

/* ---- CRC-64/NVME: the same single stream, a carry-less 128 -> 64 finish (finish_n); hot and
 * cold take this one kernel, as CRC-32 does. ---- */

uint64_t crcm_avx512_crc64nvme(uint64_t reg, const uint8_t *p, size_t n) {
    if (n < 16) return crc64_short(reg, p, n);
    if (n < 256) return crc64_xmm(reg, p, n);
    return finish_n(fold_zmm(seed64(reg), p, n, &K_N, &KZ_N));
}

/* ---- CRC-32C and CRC-64/NVME of the same bytes in one pass ---- */

/* For data streaming in from memory (crcm_windows_pair: buffers over 4 MiB; the hot form is
 * crcm_avx512_crc32c_crc64nvme_hot below).
 * Hot, both CRCs alone are bound by the carry-less multiplier, so running one after the other
 * costs the sum. The crc32 instruction runs on another port: here each block of PAIR_M steps of
 * 256 bytes is folded for CRC-64/NVME (four zmm accumulators, carried across blocks) while its
 * CRC-32C comes from PAIR_NC zmm folds over the block's first 64*PAIR_NC*PAIR_M bytes plus
 * PAIR_NS crc32 streams of 32*PAIR_M bytes over the rest. The block's CRC-32C (from register 0)
 * is joined by Horner's rule as in crc_avx2.c, and the running register is moved over the block
 * by one more multiply, so a block does not wait for the one before it.
 * Measured on Zen 4 (EPYC VM, 2 vCPUs shared and busy, C, medians of 31 interleaved rounds; the
 * pair's time over the slower CRC alone): alone, a zmm fold takes ~16 cycles per 256 bytes
 * (VPCLMULQDQ zmm at ~0.5 per cycle) and crc32 retires ~8 bytes a cycle, so with g of each 256
 * bytes folded for CRC-32C a step costs max(16 + g/16, (256 - g)/8) cycles: 1.33x at best
 * (g = 85), 1.5x at g = 64 (one accumulator, six streams) or 128 (two, four). Got: hot 16 KiB
 * and 256 KiB 1.75-1.78x with g = 64, 1.82-1.84x with g = 128, against ~1.9x for the two
 * kernels one after the other. Cold (256 MiB, 16 KiB windows) the eight read streams outran the
 * hardware prefetcher (2.0x, against 1.35-1.5x one after the other) until each block prefetched
 * the next: 1.16-1.23x. */
#define PAIR_M 32   /* steps per block: 8 KiB blocks */
#ifndef PAIR_NC
#define PAIR_NC 1   /* CRC-32C zmm fold accumulators (64 bytes each per step): 1 or 2 */
#endif
#define PAIR_NS ((256 - 64 * PAIR_NC) / 32) /* crc32 streams of 32 bytes per step */
#define PAIR_BLOCK (256 * PAIR_M)

static inline void prefetch_next(const uint8_t *p) {
    uintptr_t a = (uintptr_t)p; /* an integer: past the end of the buffer is harmless */
    _mm_prefetch((const char *)a, _MM_HINT_T0);
    _mm_prefetch((const char *)(a + 64), _MM_HINT_T0);
    _mm_prefetch((const char *)(a + 128), _MM_HINT_T0);
    _mm_prefetch((const char *)(a + 192), _MM_HINT_T0);
}

static inline uint32_t shift_by(uint32_t a, long long kshift) {
    __m128i pr = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_set_epi64x(0, kshift), 0);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(pr));
}

/* (x^(8L-32) mod P) << 1 for CRC-32C, from the generator of the fold constants: L = 1024 (a
 * stream, 32*PAIR_M) is x^8160, L = 8192 (a block) is x^65504. */
#define PAIR_K_STREAM 0x170076fall
#define PAIR_K_BLOCK 0x54a86326ll

void crcm_avx512_crc32c_crc64nvme(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n) {
    uint32_t rc = *reg32;
    uint64_t rn = *reg64;
    if (n < 2 * PAIR_BLOCK) {
        /* a block or less: the two single kernels (their set-up would not be paid back) */
        *reg32 = crcm_avx512_crc32c_stream(rc, p, n);
        *reg64 = crcm_avx512_crc64nvme(rn, p, n);
        return;
    }
    const uint8_t *end = p + n;
    const __m512i k64 = KZ(KZ_N.k2048), k32 = KZ(PAIR_NC == 2 ? KZ_C.k1024 : K_C.k512);
    __m512i z0 = _mm512_xor_si512(loadz(p), _mm512_zextsi128_si512(seed64(rn)));
    __m512i z1 = loadz(p + 64), z2 = loadz(p + 128), z3 = loadz(p + 192);
    int first = 1;
    while ((size_t)(end - p) >= PAIR_BLOCK) {
        const uint8_t *s = p + 64 * PAIR_NC * PAIR_M; /* the crc32 streams' region */
        __m512i c0 = loadz(p), c1 = PAIR_NC == 2 ? loadz(p + 64) : _mm512_setzero_si512();
        uint64_t a[PAIR_NS] = {0};
        for (int i = 0; i < PAIR_NS; i++)
            for (int t = 0; t < 32; t += 8) a[i] = _mm_crc32_u64(a[i], crcm_load64(s + i * 32 * PAIR_M + t));
        if (!first) {
            z0 = foldz(z0, k64, loadz(p));
            z1 = foldz(z1, k64, loadz(p + 64));
            z2 = foldz(z2, k64, loadz(p + 128));
            z3 = foldz(z3, k64, loadz(p + 192));
        }
        first = 0;
        for (int j = 1; j < PAIR_M; j++) {
            const uint8_t *q = p + 256 * j, *f = p + 64 * PAIR_NC * j, *c = s + 32 * j;
            /* The next block, 256 bytes a step: the streams of this one touch up to 8 regions
             * at once, more than the hardware prefetcher follows on cold memory. */
            prefetch_next(q + PAIR_BLOCK);
            z0 = foldz(z0, k64, loadz(q));
            z1 = foldz(z1, k64, loadz(q + 64));
            z2 = foldz(z2, k64, loadz(q + 128));
            z3 = foldz(z3, k64, loadz(q + 192));
            c0 = foldz(c0, k32, loadz(f));
            if (PAIR_NC == 2) c1 = foldz(c1, k32, loadz(f + 64));
            for (int i = 0; i < PAIR_NS; i++)
                for (int t = 0; t < 32; t += 8)
                    a[i] = _mm_crc32_u64(a[i], crcm_load64(c + i * 32 * PAIR_M + t));
        }
        /* the block's CRC-32C from register 0: its fold region reduced (as reduce_zmm's last
         * steps), then each stream appended */
        __m512i c = PAIR_NC == 2 ? foldz(c0, KZ(K_C.k512), c1) : c0;
        __m512i kl = _mm512_inserti32x4(
            _mm512_inserti32x4(_mm512_inserti32x4(_mm512_setzero_si512(), KV(K_C.k384), 0),
                               KV(K_C.k256), 1), KV(K_C.k128), 2);
        __m512i t = XOR3(_mm512_clmulepi64_epi128(c, kl, 0x00), _mm512_clmulepi64_epi128(c, kl, 0x11),
                         _mm512_maskz_mov_epi64(0xC0, c));
        __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
        uint32_t b = finish_c(_mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
        for (int i = 0; i < PAIR_NS; i++) b = shift_by(b, PAIR_K_STREAM) ^ (uint32_t)a[i];
        rc = shift_by(rc, PAIR_K_BLOCK) ^ b;
        p += PAIR_BLOCK;
    }
    /* the rest (< 8 KiB): CRC-64 keeps folding 256-byte steps, CRC-32C takes its own kernel */
    *reg32 = crcm_avx512_crc32c_stream(rc, p, (size_t)(end - p));
    while ((size_t)(end - p) >= 256) {
        z0 = foldz(z0, k64, loadz(p));
        z1 = foldz(z1, k64, loadz(p + 64));
        z2 = foldz(z2, k64, loadz(p + 128));
        z3 = foldz(z3, k64, loadz(p + 192));
        p += 256;
    }
    *reg64 = finish_n(reduce_zmm(z0, z1, z2, z3, p, end, &K_N, &KZ_N));
}

/* ---- the same pair for data likely hot in cache (crcm_windows_pair picks it for buffers of
 * at most CRCM_PAIR_HOT_MAX bytes) ---- */

/* Blocks of 16 KiB, each split into a region A (its first 4 KiB) and B (the other 12 KiB). Per
 * 256-byte step, CRC-64/NVME folds 64 bytes of A (one zmm accumulator, carried over from the
 * block before) and 192 of B (three accumulators from zero), and CRC-32C folds the same 64 bytes
 * of A from the same load (one accumulator, k512) while eight crc32 streams of 24 bytes a step
 * cover B. At the end of a block CRC-64's A accumulator is moved 12 KiB forward onto B's reduced
 * lane (one multiply), and CRC-32C's pieces are each moved to the block's end by one multiply
 * (independent, not a Horner chain). Against crcm_avx512_crc32c_crc64nvme: one zmm load fewer
 * per step (A's bytes serve both CRCs) and the crc32 work spread over eight chains.
 * Measured on Zen 4 (EPYC VM, 2 vCPUs, a CI run busy on the other core: noisy; C harness calling
 * the kernels on 16 KiB windows, 2026-11-27, medians of 7-21 interleaved rounds of per-round
 * ratios, the pair's time over the slower CRC alone): 256 KiB hot 1.63 against 1.77 for the
 * kernel above, 16 KiB (L1) 1.62 against 1.76, 1 MiB 1.63 against 1.77, 4 MiB 1.63 against 1.77;
 * but 256 MiB cold 1.19-1.23x the time of the kernel above (likely because the next block's
 * 16 KiB, prefetched beside the block's own 16 KiB, fill L1; with 8 KiB blocks 1.04x cold but 1.66
 * hot; prefetching to L2 instead 1.09x cold, 1.63 hot), so data from memory keeps the kernel
 * above (crcm_windows_pair: buffers over 4 MiB). What was tried and did not
 * help (same harness): the CRC-32C share g of each 256 bytes at 64, 80, 85, 96, 112 and 128
 * (every split measured 1.68-1.76 with separate loads although the port bound is 1.33-1.5:
 * uarch probes showed the crc32 and VPCLMULQDQ loops reach their bound together only from
 * registers; with their loads (zmm loads ~1.1 cycles each, scalar ~0.37) they lose 8-12%);
 * 4, 6, 12, 24 streams (1.63-2.29); the crc32s placed between the folds by compiler barriers
 * (no gain, up to +5%); staggering the streams within cache lines (no change); 2, 3, 5, 6, 8
 * prefetches a step (1.63-1.82). */
#define HOT_M 64                        /* 256-byte steps per block: 16 KiB */
#define HOT_BLOCK (256 * HOT_M)
#define HOT_LA (64 * HOT_M)             /* region A: 4 KiB */
#define HOT_NS 8                        /* crc32 streams over B, 24 bytes a step each */
#define HOT_SL (24 * HOT_M)             /* a stream: 1536 bytes */

/* CRC-64/NVME {x^(D+63), x^(D-1)} for D = 8 * 12288 (B's length), tools/gen_crc64_constants.py
 * fold_k; CRC-32C (x^(8L-32) mod P) << 1 for L = 1536 * (7 - i) (stream i to the block's end),
 * 12288 (A's fold to the block's end) and 16384 (the running register over a block). */
static const fold_k HOT_K_B = {0x0535cba97d64a0adull, 0x2da73f4d18465a70ull};
static const long long HOT_K_STREAM[HOT_NS - 1] = {
    0x57e82916, 0x16e32e02a, 0x1f240f9ee, 0x1bc3afbb8, 0x5bb964, 0x1307a0206, 0x19b1afbc4};
#define HOT_K_A 0x1c41de810ll
#define HOT_K_BLOCK 0x1dc403ccll

void crcm_avx512_crc32c_crc64nvme_hot(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n) {
    uint32_t rc = *reg32;
    uint64_t rn = *reg64;
    if (n < HOT_BLOCK) {
        *reg32 = crcm_avx512_crc32c_stream(rc, p, n);
        *reg64 = crcm_avx512_crc64nvme(rn, p, n);
        return;
    }
    const uint8_t *end = p + n;
    const __m512i z = _mm512_setzero_si512();
    /* The first step folds a zero accumulator by a zero multiplier and xors the register in:
     * no peeled first step, which (with the 8 KiB blocks above) changed the compiled schedule
     * for the worse. */
    __m512i ka = z, sv = _mm512_zextsi128_si512(seed64(rn)), a0 = z;
    while ((size_t)(end - p) >= HOT_BLOCK) {
        const __m512i kb = KZ(KZ_N.k1536), kc = KZ(K_C.k512);
        __m512i b0 = z, b1 = z, b2 = z, c0 = z;
        uint64_t s[HOT_NS] = {0};
        for (int j = 0; j < HOT_M; j++) {
            const uint8_t *pa = p + 64 * j, *pb = p + HOT_LA + 192 * j, *pc = p + HOT_LA + 24 * j;
            __m512i la = loadz(pa);
            a0 = _mm512_xor_si512(foldz(a0, ka, la), sv);
            c0 = foldz(c0, kc, la);
            b0 = foldz(b0, kb, loadz(pb));
            b1 = foldz(b1, kb, loadz(pb + 64));
            b2 = foldz(b2, kb, loadz(pb + 128));
            prefetch_next(p + HOT_BLOCK + 256 * j);
#pragma GCC unroll 3
            for (int t = 0; t < 24; t += 8)
#pragma GCC unroll 8
                for (int i = 0; i < HOT_NS; i++) s[i] = _mm_crc32_u64(s[i], crcm_load64(pc + i * HOT_SL + t));
            ka = KZ(K_N.k512);
            sv = z;
        }
        /* CRC-64: B's three lanes onto its last, A's last lane moved over B onto it */
        __m512i kb2 = KZ(KZ_N.k1024);
        __m512i bl = XOR3(_mm512_clmulepi64_epi128(b0, kb2, 0x00), _mm512_clmulepi64_epi128(b0, kb2, 0x11),
                          foldz(b1, KZ(K_N.k512), b2));
        __m512i kd = KZ(HOT_K_B);
        a0 = XOR3(_mm512_clmulepi64_epi128(a0, kd, 0x00), _mm512_clmulepi64_epi128(a0, kd, 0x11), bl);
        /* CRC-32C of A from register 0 (as reduce_zmm's last steps), then every piece moved to
         * the block's end */
        __m512i kl = _mm512_inserti32x4(
            _mm512_inserti32x4(_mm512_inserti32x4(z, KV(K_C.k384), 0), KV(K_C.k256), 1), KV(K_C.k128), 2);
        __m512i t = XOR3(_mm512_clmulepi64_epi128(c0, kl, 0x00), _mm512_clmulepi64_epi128(c0, kl, 0x11),
                         _mm512_maskz_mov_epi64(0xC0, c0));
        __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
        uint32_t r = finish_c(_mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
        r = shift_by(r, HOT_K_A) ^ shift_by(rc, HOT_K_BLOCK);
        for (int i = 0; i < HOT_NS - 1; i++) r ^= shift_by((uint32_t)s[i], HOT_K_STREAM[i]);
        rc = r ^ (uint32_t)s[HOT_NS - 1];
        p += HOT_BLOCK;
    }
    /* the rest (< 16 KiB): CRC-64 goes on in 256-byte steps from its one lane, CRC-32C takes its
     * own kernel */
    *reg32 = crcm_avx512_crc32c_stream(rc, p, (size_t)(end - p));
    const __m512i k64 = KZ(KZ_N.k2048);
    __m512i z0 = z, z1 = z, z2 = z, z3 = a0;
    while ((size_t)(end - p) >= 256) {
        z0 = foldz(z0, k64, loadz(p));
        z1 = foldz(z1, k64, loadz(p + 64));
        z2 = foldz(z2, k64, loadz(p + 128));
        z3 = foldz(z3, k64, loadz(p + 192));
        p += 256;
    }
    *reg64 = finish_n(reduce_zmm(z0, z1, z2, z3, p, end, &K_N, &KZ_N));
}
