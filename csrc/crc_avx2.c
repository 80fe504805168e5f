/* crc_avx2.c - CRC-32C, CRC-32 (IEEE) and CRC-64/NVME by 256-bit VPCLMULQDQ folding (fused with three crc32
 * streams for hot CRC-32C), for x86 CPUs with AVX2 + VPCLMULQDQ but no AVX-512 (AMD Zen 3,
 * Intel Alder Lake and later client cores), where the 128-bit PCLMUL backend uses half the
 * carry-less multiplier. The 128-bit folds, tails and finishes come from crc_x86_fold.h. */
#include <immintrin.h>

#include "crc_internal.h"
#include "crc_x86_sse42.h"
#include "crc_x86_fold.h"

#if !defined(__AVX2__) || !defined(__VPCLMULQDQ__)
#error "crc_avx2.c: compile with -mavx2 -mvpclmulqdq -mpclmul -msse4.2"
#endif

/* The fold distances of the 256-bit loops, in the form of the fold_set constants in
 * crc_x86_fold.h (low qword x^(D+32) mod P, high qword x^(D-32) mod P, each << 1), from the same
 * generator; every length is checked against a bitwise reference. */
typedef struct { fold_k k768, k1024; } fold_set_ymm;

static const fold_set_ymm KY_C = {       /* CRC-32C */
    {0x1c1733996ull, 0x102f9b8a2ull},  /* D=768:  x^800,  x^736 */
    {0x06992cea2ull, 0x00d3b6092ull},  /* D=1024: x^1056, x^992 */
};
static const fold_set_ymm KY_I = {       /* CRC-32 (IEEE) */
    {0x0df068dc2ull, 0x18cb44e58ull},
    {0x1e88ef372ull, 0x14a7fe880ull},
};
/* CRC-64/NVME: low qword x^(D+63) mod P, high qword x^(D-1) mod P, unshifted (see K_N in
 * crc_x86_fold.h), from tools/gen_crc64_constants.py. */
static const fold_set_ymm KY_N = {
    {0x3c255f5ebc414423ull, 0x34f5a24e22d66e90ull},  /* D=768:  x^831,  x^767 */
    {0xa1ca681e733f9c40ull, 0x5f852fb61e8d92dcull},  /* D=1024: x^1087, x^1023 */
};

#define KY(k) _mm256_broadcastsi128_si256(KV(k))

static inline __m256i loady(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* each 128-bit lane of y moved forward by the distance of k */
static inline __m256i foldy(__m256i y, __m256i k) {
    return _mm256_xor_si256(_mm256_clmulepi64_epi128(y, k, 0x00), _mm256_clmulepi64_epi128(y, k, 0x11));
}

/* Four ymm accumulators y0..y3 covering 128 consecutive bytes (y0 first), reduced to one xmm
 * lane whose raw CRC from register 0 equals theirs: y0, y1, y2 folded 768, 512, 256 bits onto
 * y3 in parallel, then ymm steps over what is left of [p, end) below 128 bytes, then the low
 * lane onto the high one, then 16-byte steps and the tail. */
static inline __m128i reduce_ymm(__m256i y0, __m256i y1, __m256i y2, __m256i y3,
                                 const uint8_t *p, const uint8_t *end, const fold_set *ks,
                                 const fold_set_ymm *ky) {
    __m256i k256 = KY(ks->k256);
    __m256i y = _mm256_xor_si256(_mm256_xor_si256(foldy(y0, KY(ky->k768)), foldy(y1, KY(ks->k512))),
                                 _mm256_xor_si256(foldy(y2, k256), y3));
    while ((size_t)(end - p) >= 32) {
        y = _mm256_xor_si256(foldy(y, k256), loady(p));
        p += 32;
    }
    __m128i k128 = KV(ks->k128);
    __m128i x = _mm_xor_si128(fold(_mm256_castsi256_si128(y), k128), _mm256_extracti128_si256(y, 1));
    return fold_rest(x, p, end, k128);
}

/* One sequential stream, n >= 128: four ymm accumulators, 128 bytes per step, each lane folded
 * 1024 bits forward. The multiplier takes one 256-bit VPCLMULQDQ per two cycles with a latency
 * of 4-5 on Zen 3 (bench/uarch_probe.c), so the 8 multiplies of a step take 16 cycles (8
 * B/cycle) and four accumulators are more than enough to hide the latency. A 128-bit PCLMULQDQ
 * has the same throughput, so this is twice the PCLMUL backend's fold per cycle, not more. */
static inline __m128i fold_ymm(__m128i seed, const uint8_t *p, size_t n, const fold_set *ks,
                               const fold_set_ymm *ky) {
    const uint8_t *end = p + n;
    __m256i y0 = _mm256_xor_si256(loady(p), _mm256_zextsi128_si256(seed));
    __m256i y1 = loady(p + 32), y2 = loady(p + 64), y3 = loady(p + 96);
    __m256i k = KY(ky->k1024);
    p += 128;
    while ((size_t)(end - p) >= 128) {
        /* Cold 16 KiB windows over 256 MiB on Zen 3 (EPYC Milan VM), medians of 11 interleaved
         * rounds, relative to a plain read of the same memory: no prefetch 0.89x, 512 bytes
         * ahead 1.00x, 1 KiB 1.04x, 2 KiB 1.07x, 4 KiB 1.02x. Prefetches never fault, and the
         * address is formed as an integer because p + 2048 may lie past the buffer. */
        uintptr_t ahead = (uintptr_t)p + 2048;
        _mm_prefetch((const char *)ahead, _MM_HINT_T0);
        _mm_prefetch((const char *)(ahead + 64), _MM_HINT_T0);
        y0 = _mm256_xor_si256(foldy(y0, k), loady(p));
        y1 = _mm256_xor_si256(foldy(y1, k), loady(p + 32));
        y2 = _mm256_xor_si256(foldy(y2, k), loady(p + 64));
        y3 = _mm256_xor_si256(foldy(y3, k), loady(p + 96));
        p += 128;
    }
    return reduce_ymm(y0, y1, y2, y3, p, end, ks, ky);
}

/* ---- CRC-32C ---- */

/* Cold data (windows over memory streaming in from DRAM): one forward stream, which the hardware
 * prefetcher follows. */
uint32_t crcm_avx2_crc32c_stream(uint32_t reg, const uint8_t *p, size_t n) {
    if (n < 64) return crc32c_serial(reg, p, n); /* as in the PCLMUL backend: same 64-byte cost */
    /* ymm from 128 bytes: 10-25% faster than xmm folding at 128-255 bytes (C, Zen 3) */
    if (n < 128) return finish_c(fold_xmm(reg, p, n, &K_C));
    return finish_c(fold_ymm(seed32(reg), p, n, &K_C, &KY_C));
}

/* Fused blocks for hot data: VPCLMULQDQ and crc32 mostly run side by side, so each block folds
 * its first 128*M bytes with four ymm accumulators while three crc32 streams cover the next
 * 3 * 40*M bytes; the four partial CRCs are joined by Horner's rule with one multiply by
 * x^(8*40*M) mod P each (clmul by kshift = (x^(8*40*M-32) mod P) << 1, then crc32 over the
 * 64-bit product multiplies by x^32 and reduces).
 * 40 crc32 bytes per stream per 128 fold bytes (15 crc32 per step): bench/uarch_probe.c measures,
 * on Zen 3, 8 VPCLMULQDQ ymm alone at ~16 cycles and the same with 16 crc32 from registers still
 * at ~16 (so the two units are independent, 16 B/cycle), but the real step (four folds with
 * their loads and xors, 15 crc32 from memory) at 18-20 cycles, 12.5-13.8 B/cycle; the kernel
 * reaches about 12.8 (38-39 GB/s at 3 GHz). 24, 32, 40 and 48 bytes per stream were tried and
 * 40 was best at 16 KiB-256 KiB. */
static inline uint32_t shift_by(uint32_t a, long long kshift) {
    __m128i pr = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_set_epi64x(0, kshift), 0);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(pr));
}

#define FUSED_L 40                       /* crc32 bytes per stream per step */
#define FUSED_STEP (128 + 3 * FUSED_L)   /* bytes per step: 248 */
#define FUSED_MIN_M 4
#define FUSED_MAX_M 64

/* kshift for M = 4..64: (x^(8*40*M-32) mod P) << 1, CRC-32C, from the generator of the fold
 * constants (M = 4, 8, 16, 32 are x^1248, x^2528, x^5088, x^10208). */
static const uint64_t KSHIFT_C[FUSED_MAX_M - FUSED_MIN_M + 1] = {
    0x18266e456ull, 0x0a87ab8a8ull, 0x12c743124ull, 0x0f37c5aeeull,
    0x1bf2e8b8aull, 0x1a5e82106ull, 0x1c3f5f66cull, 0x1e50585a0ull,
    0x0b3e32c28ull, 0x0bd6f81f8ull, 0x1c24afea4ull, 0x0a3c6f37aull,
    0x06b749fb2ull, 0x0e417f38aull, 0x08227bb8aull, 0x1641378f0ull,
    0x00167d312ull, 0x1dd3e10e8ull, 0x049c3cc9cull, 0x1d8048348ull,
    0x1329d9f7eull, 0x1da758ae0ull, 0x141a1a2e2ull, 0x029f268b4ull,
    0x0f872e54cull, 0x063ae91e6ull, 0x0a90fd27aull, 0x1c928d748ull,
    0x1d88abd4aull, 0x1a47a55d8ull, 0x13a9cba9eull, 0x18d074af6ull,
    0x02342001eull, 0x16b1e5dd2ull, 0x0995a5724ull, 0x08ec52396ull,
    0x123888b7aull, 0x079afdf1cull, 0x116b0f50cull, 0x1e54e58d8ull,
    0x017f27698ull, 0x0de8a97f8ull, 0x059f229bcull, 0x177278a2aull,
    0x1f16a3418ull, 0x072675ce8ull, 0x1a08fe6acull, 0x0ae1175c2ull,
    0x1851efe9aull, 0x0d2fd8e3cull, 0x18bf82606ull, 0x160e28034ull,
    0x0defba41cull, 0x09fd51b88ull, 0x0eca08ffeull, 0x0e9bbf648ull,
    0x1d32fdef6ull, 0x1eff0c016ull, 0x116f430b8ull, 0x08b9be230ull,
    0x1272f0f6eull,
};

/* One block of M steps at p (M * FUSED_STEP bytes), continuing from reg. */
static inline uint32_t crc32c_fused_block(uint32_t reg, const uint8_t *p, size_t M) {
    const size_t ls = FUSED_L * M;
    const uint8_t *s1 = p + 128 * M;
    const __m256i k = KY(KY_C.k1024);
    __m256i y0 = _mm256_xor_si256(loady(p), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)reg)));
    __m256i y1 = loady(p + 32), y2 = loady(p + 64), y3 = loady(p + 96);
    uint64_t c1 = 0, c2 = 0, c3 = 0;
    for (size_t i = 0; i < FUSED_L; i += 8) {
        c1 = _mm_crc32_u64(c1, crcm_load64(s1 + i));
        c2 = _mm_crc32_u64(c2, crcm_load64(s1 + ls + i));
        c3 = _mm_crc32_u64(c3, crcm_load64(s1 + 2 * ls + i));
    }
    for (size_t j = 1; j < M; j++) {
        const uint8_t *f = p + 128 * j, *c = s1 + FUSED_L * j;
        /* Prefetching each of the four streams about 1 KiB of input ahead (the fold stream
         * 1 KiB, each crc32 stream a third of that) lifted 8 KiB-4 MiB by 4-10% on Zen 3
         * (medians of 15 interleaved rounds; 512 and 2048 bytes measured the same). */
        uintptr_t ahead = (uintptr_t)f + 1024;
        _mm_prefetch((const char *)ahead, _MM_HINT_T0);
        _mm_prefetch((const char *)(ahead + 64), _MM_HINT_T0);
        _mm_prefetch((const char *)((uintptr_t)c + 336), _MM_HINT_T0);
        _mm_prefetch((const char *)((uintptr_t)c + ls + 336), _MM_HINT_T0);
        _mm_prefetch((const char *)((uintptr_t)c + 2 * ls + 336), _MM_HINT_T0);
        y0 = _mm256_xor_si256(foldy(y0, k), loady(f));
        y1 = _mm256_xor_si256(foldy(y1, k), loady(f + 32));
        y2 = _mm256_xor_si256(foldy(y2, k), loady(f + 64));
        y3 = _mm256_xor_si256(foldy(y3, k), loady(f + 96));
        for (size_t i = 0; i < FUSED_L; i += 8) {
            c1 = _mm_crc32_u64(c1, crcm_load64(c + i));
            c2 = _mm_crc32_u64(c2, crcm_load64(c + ls + i));
            c3 = _mm_crc32_u64(c3, crcm_load64(c + 2 * ls + i));
        }
    }
    long long kshift = (long long)KSHIFT_C[M - FUSED_MIN_M];
    reg = finish_c(reduce_ymm(y0, y1, y2, y3, s1, s1, &K_C, &KY_C));
    return shift_by(shift_by(shift_by(reg, kshift) ^ (uint32_t)c1, kshift) ^ (uint32_t)c2, kshift) ^
           (uint32_t)c3;
}

/* Hot data (one call over a buffer likely in cache): blocks of 64 steps (15,872 bytes) while they
 * fit, then at most one block each of 32, 16, 8 and 4 steps, then the stream kernel for the
 * rest (< 992 bytes). Fused against stream on Zen 3 at alignment 48 (C, medians of 15
 * interleaved rounds): 1 KiB 1.15x, 1.5 KiB 1.08x, 2 KiB 1.35x, 4 KiB 1.40x, 16 KiB 1.49x; the
 * 64-step blocks beat 32-step ones by 1-6% from 16 KiB up (fewer joins), while a block length
 * chosen at run time (a loop count the compiler cannot see) cost 7-13% at 1-4 KiB. */
__attribute__((noinline)) static uint32_t crc32c_fused(uint32_t reg, const uint8_t *p, size_t n) {
    /* M is a constant at every call, so each block's loop is specialised */
#define FUSED(M) do { reg = crc32c_fused_block(reg, p, M); p += FUSED_STEP * (M); n -= FUSED_STEP * (M); } while (0)
    while (n >= FUSED_STEP * 64) FUSED(64);
    if (n >= FUSED_STEP * 32) FUSED(32);
    if (n >= FUSED_STEP * 16) FUSED(16);
    if (n >= FUSED_STEP * 8) FUSED(8);
    if (n >= FUSED_STEP * 4) FUSED(4);
#undef FUSED
    return crcm_avx2_crc32c_stream(reg, p, n);
}

uint32_t crcm_avx2_crc32c(uint32_t reg, const uint8_t *p, size_t n) {
    /* one compare in front of the small inputs' path, so a 64-byte call costs what it costs in
     * the PCLMUL backend */
    if (n < 64) return crc32c_serial(reg, p, n);
    if (n < FUSED_STEP * FUSED_MIN_M) return crcm_avx2_crc32c_stream(reg, p, n);
    return crc32c_fused(reg, p, n);
}

/* ---- CRC-32 (IEEE): no crc32 instruction, so folding alone and a carry-less finish. ---- */

uint32_t crcm_avx2_crc32(uint32_t reg, const uint8_t *p, size_t n) {
    if (n < 16) return crc32_short(reg, p, n);
    if (n < 128) return finish_i(fold_xmm(reg, p, n, &K_I));
    return finish_i(fold_ymm(seed32(reg), p, n, &K_I, &KY_I));
}

/* ---- CRC-64/NVME: the same single stream, a carry-less 128 -> 64 finish (finish_n). ---- */

uint64_t crcm_avx2_crc64nvme(uint64_t reg, const uint8_t *p, size_t n) {
    if (n < 16) return crc64_short(reg, p, n);
    if (n < 128) return crc64_xmm(reg, p, n);
    return finish_n(fold_ymm(seed64(reg), p, n, &K_N, &KY_N));
}

/* ---- CRC-32C and CRC-64/NVME of the same bytes in one pass ---- */

/* For data streaming in from memory (crcm_windows_pair: buffers over 4 MiB; the hot form is
 * crcm_avx2_crc32c_crc64nvme_hot below).
 * A ymm fold retires about 8 bytes a cycle (one 256-bit VPCLMULQDQ per two cycles, see fold_ymm)
 * and the crc32 instruction 8 bytes a cycle on another port, so here the folds take all of
 * CRC-64/NVME and four crc32 streams all of CRC-32C: each block of PAIR_M steps of 128 bytes is
 * folded for CRC-64 (four ymm accumulators carried across blocks) while four streams of 32
 * bytes a step cover its four quarters for CRC-32C, joined by Horner's rule, and the running
 * CRC-32C register is moved over the block by one multiply (as in crc_avx512.c). Each block
 * prefetches the next (the five read streams outrun the hardware prefetcher on cold memory). */
#define PAIR_M 64                /* steps per block: 8 KiB blocks, 2 KiB per crc32 stream */
#define PAIR_BLOCK (128 * PAIR_M)
/* (x^(8L-32) mod P) << 1 for CRC-32C, from the generator of the fold constants: L = 2048 (a
 * stream) is x^16352, L = 8192 (a block) is x^65504. */
#define PAIR_K_STREAM 0x1a0f717c4ll
#define PAIR_K_BLOCK 0x54a86326ll

static inline void pair_step(__m256i *y, __m256i k, const uint8_t *q, uint64_t *a,
                             const uint8_t *c) {
    uintptr_t next = (uintptr_t)q + PAIR_BLOCK; /* an integer: past the end is harmless */
    _mm_prefetch((const char *)next, _MM_HINT_T0);
    _mm_prefetch((const char *)(next + 64), _MM_HINT_T0);
    y[0] = _mm256_xor_si256(foldy(y[0], k), loady(q));
    y[1] = _mm256_xor_si256(foldy(y[1], k), loady(q + 32));
    y[2] = _mm256_xor_si256(foldy(y[2], k), loady(q + 64));
    y[3] = _mm256_xor_si256(foldy(y[3], k), loady(q + 96));
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 32; t += 8) a[i] = _mm_crc32_u64(a[i], crcm_load64(c + i * 32 * PAIR_M + t));
}

void crcm_avx2_crc32c_crc64nvme(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n) {
    uint32_t rc = *reg32;
    uint64_t rn = *reg64;
    if (n < 2 * PAIR_BLOCK) {
        /* a block or less: the two single kernels (their set-up would not be paid back) */
        *reg32 = crcm_avx2_crc32c(rc, p, n);
        *reg64 = crcm_avx2_crc64nvme(rn, p, n);
        return;
    }
    const uint8_t *end = p + n;
    const __m256i k = KY(KY_N.k1024);
    __m256i y[4] = {_mm256_xor_si256(loady(p), _mm256_zextsi128_si256(seed64(rn))), loady(p + 32),
                    loady(p + 64), loady(p + 96)};
    int first = 1;
    while ((size_t)(end - p) >= PAIR_BLOCK) {
        uint64_t a[4] = {0, 0, 0, 0};
        if (first) { /* the accumulators already hold the first step */
            for (int i = 0; i < 4; i++)
                for (int t = 0; t < 32; t += 8) a[i] = _mm_crc32_u64(a[i], crcm_load64(p + i * 32 * PAIR_M + t));
        } else {
            pair_step(y, k, p, a, p);
        }
        first = 0;
        for (int j = 1; j < PAIR_M; j++) pair_step(y, k, p + 128 * j, a, p + 32 * j);
        uint32_t b = (uint32_t)a[0];
        for (int i = 1; i < 4; i++) b = shift_by(b, PAIR_K_STREAM) ^ (uint32_t)a[i];
        rc = shift_by(rc, PAIR_K_BLOCK) ^ b;
        p += PAIR_BLOCK;
    }
    /* the rest (< 8 KiB): CRC-64 keeps folding, CRC-32C takes its own kernel */
    *reg32 = crcm_avx2_crc32c(rc, p, (size_t)(end - p));
    while ((size_t)(end - p) >= 128) {
        y[0] = _mm256_xor_si256(foldy(y[0], k), loady(p));
        y[1] = _mm256_xor_si256(foldy(y[1], k), loady(p + 32));
        y[2] = _mm256_xor_si256(foldy(y[2], k), loady(p + 64));
        y[3] = _mm256_xor_si256(foldy(y[3], k), loady(p + 96));
        p += 128;
    }
    *reg64 = finish_n(reduce_ymm(y[0], y[1], y[2], y[3], p, end, &K_N, &KY_N));
}

/* ---- the same pair for data likely hot in cache (crcm_windows_pair picks it for buffers of
 * at most CRCM_PAIR_HOT_MAX bytes) ---- */

/* The same blocks, streams and folds as crcm_avx2_crc32c_crc64nvme, written so the compiler
 * issues the crc32s round-robin over the four streams between the four folds of a step (each
 * chain gets one crc32 every four, its latency is 3), and the first step folds a zero
 * accumulator by a zero multiplier with the register xored in instead of being peeled; the
 * streams are joined by independent multiplies. Measured on Zen 4 (EPYC VM, 2 vCPUs, a CI run
 * busy on the other core: noisy; C harness calling the kernels on 16 KiB windows, 2026-11-27,
 * medians of 7-9 interleaved rounds of per-round ratios, the pair's time over the slower CRC
 * alone): 16 KiB (L1) 1.21 against 1.27 for the kernel above, 256 KiB 1.21 against 1.27, 1 MiB
 * 1.21 against 1.28, 4 MiB 1.22 against 1.27, 16 MiB 1.19 against 1.25; but 64 and 256 MiB
 * cold 1.27-1.34x the time of the kernel above (the same loop with a peeled first step compiles
 * to consecutive crc32s of one stream: 1.27 hot, 1.06-1.10x cold; why the round-robin order
 * costs cold was not found), so cold data keeps the kernel above. Tried, no better hot: eight
 * streams (1.22-1.28), two steps per iteration (1.22), 32 or 128 steps per block (1.22, 1.23),
 * compiler barriers forcing the order (1.27), no prefetch (1.28, hot data from L2). */
void crcm_avx2_crc32c_crc64nvme_hot(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n) {
    uint32_t rc = *reg32;
    uint64_t rn = *reg64;
    if (n < 2 * PAIR_BLOCK) {
        *reg32 = crcm_avx2_crc32c(rc, p, n);
        *reg64 = crcm_avx2_crc64nvme(rn, p, n);
        return;
    }
    const uint8_t *end = p + n;
    const __m256i k = KY(KY_N.k1024);
    __m256i kf = _mm256_setzero_si256(), sv = _mm256_zextsi128_si256(seed64(rn));
    __m256i y0 = kf, y1 = kf, y2 = kf, y3 = kf;
    const size_t sl = 32 * PAIR_M; /* a stream: 2 KiB */
    while ((size_t)(end - p) >= PAIR_BLOCK) {
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int j = 0; j < PAIR_M; j++) {
            const uint8_t *q = p + 128 * j, *c = p + 32 * j;
            uintptr_t next = (uintptr_t)q + PAIR_BLOCK; /* an integer: past the end is harmless */
#define CRC4(t)                                                        \
    a0 = _mm_crc32_u64(a0, crcm_load64(c + (t)));                      \
    a1 = _mm_crc32_u64(a1, crcm_load64(c + sl + (t)));                 \
    a2 = _mm_crc32_u64(a2, crcm_load64(c + 2 * sl + (t)));             \
    a3 = _mm_crc32_u64(a3, crcm_load64(c + 3 * sl + (t)))
            y0 = _mm256_xor_si256(_mm256_xor_si256(foldy(y0, kf), loady(q)), sv);
            _mm_prefetch((const char *)next, _MM_HINT_T0);
            CRC4(0);
            y1 = _mm256_xor_si256(foldy(y1, kf), loady(q + 32));
            _mm_prefetch((const char *)(next + 64), _MM_HINT_T0);
            CRC4(8);
            y2 = _mm256_xor_si256(foldy(y2, kf), loady(q + 64));
            CRC4(16);
            y3 = _mm256_xor_si256(foldy(y3, kf), loady(q + 96));
            CRC4(24);
#undef CRC4
            kf = k;
            sv = _mm256_setzero_si256();
        }
        /* each stream moved to the block's end by its own multiply (L = 6, 4, 2 KiB: x^49120,
         * x^32736, x^16352), the running register over the block */
        rc = shift_by(rc, PAIR_K_BLOCK) ^ shift_by((uint32_t)a0, 0x1bc3afbb8ll) ^
             shift_by((uint32_t)a1, 0x18714ea86ll) ^ shift_by((uint32_t)a2, PAIR_K_STREAM) ^ (uint32_t)a3;
        p += PAIR_BLOCK;
    }
    *reg32 = crcm_avx2_crc32c(rc, p, (size_t)(end - p));
    while ((size_t)(end - p) >= 128) {
        y0 = _mm256_xor_si256(foldy(y0, k), loady(p));
        y1 = _mm256_xor_si256(foldy(y1, k), loady(p + 32));
        y2 = _mm256_xor_si256(foldy(y2, k), loady(p + 64));
        y3 = _mm256_xor_si256(foldy(y3, k), loady(p + 96));
        p += 128;
    }
    *reg64 = finish_n(reduce_ymm(y0, y1, y2, y3, p, end, &K_N, &KY_N));
}
