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

/* n >= 256: four zmm accumulators (256 bytes per step, each lane folded 2048 bits forward),
 * merged into one zmm, then 64-byte steps, then one xmm. ks: 128..512-bit constants, kz: wider. */
static inline __m128i fold_zmm(__m128i seed, const uint8_t *p, size_t n, const fold_set *ks,
                               const fold_set_zmm *kz) {
    const uint8_t *end = p + n;
    __m512i z0 = _mm512_xor_si512(loadz(p), _mm512_zextsi128_si512(seed));
    __m512i z1 = loadz(p + 64), z2 = loadz(p + 128), z3 = loadz(p + 192);
    __m512i k = KZ(kz->k2048);
    p += 256;
    while ((size_t)(end - p) >= 256) {
        /* Prefetching 2 KiB ahead lifted cold 16 KiB windows from 12 to 14.3 GB/s on a Xeon
         * (Sapphire Rapids VM), equal to a plain xor-reduce read, and hot 256 KiB from 70 to
         * 88 GB/s; prefetches never fault, so running past the end is harmless.
         * The address is formed as an integer: p + 2048 itself may lie past the buffer. */
        uintptr_t ahead = (uintptr_t)p + 2048;
        _mm_prefetch((const char *)ahead, _MM_HINT_T0);
        _mm_prefetch((const char *)(ahead + 64), _MM_HINT_T0);
        _mm_prefetch((const char *)(ahead + 128), _MM_HINT_T0);
        _mm_prefetch((const char *)(ahead + 192), _MM_HINT_T0);
        z0 = foldz(z0, k, loadz(p));
        z1 = foldz(z1, k, loadz(p + 64));
        z2 = foldz(z2, k, loadz(p + 128));
        z3 = foldz(z3, k, loadz(p + 192));
        p += 256;
    }
    /* z0, z1, z2 folded forward by 1536, 1024, 512 bits onto z3, in parallel */
    __m512i ka = KZ(kz->k1536), kb = KZ(kz->k1024);
    k = KZ(ks->k512);
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
    if (n < 256) return finish_n(fold_xmm_seed_pf(seed64(reg), p, n, &K_N, 0));
    return finish_n(fold_zmm(seed64(reg), p, n, &K_N, &KZ_N));
}
