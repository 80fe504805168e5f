/* crc_dispatch.c - picks the best kernel this CPU can run (once, cached atomically), lets a
 * caller force another, and implements the public entry points on top of the active kernel. */
#include "crc_internal.h"

#if defined(CRCM_X86)
#include <cpuid.h>

/* CPUID leaf 1 and leaf 7 bits, and which register states XCR0 says the OS saves. */
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

int crcm_cpu_has_sse42(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c >> 20) & 1;
}

int crcm_cpu_has_pclmul(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return ((c >> 20) & 1) && ((c >> 1) & 1);
}

int crcm_cpu_has_avx2_vpclmul(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, sse42 = (c >> 20) & 1, pclmul = (c >> 1) & 1;
    if (!osxsave || !avx || !sse42 || !pclmul) return 0;
    if ((xgetbv0() & 0x6) != 0x6) return 0; /* XMM and YMM state OS-enabled */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int avx2 = (b >> 5) & 1, vpclmul = (c >> 10) & 1;
    return avx2 && vpclmul;
}

int crcm_cpu_has_avx512_vpclmul(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, sse42 = (c >> 20) & 1, pclmul = (c >> 1) & 1;
    if (!osxsave || !sse42 || !pclmul) return 0;
    /* XMM, YMM, opmask, ZMM0-15 upper halves and ZMM16-31 must all be OS-enabled. */
    if ((xgetbv0() & 0xE6) != 0xE6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
    int vpclmul = (c >> 10) & 1;
    return avx512f && avx512bw && avx512vl && vpclmul;
}
#endif

static int always(void) { return 1; }

/* Best first; the dispatcher takes the first entry the CPU supports.
 *
 * avx512-vpclmulqdq before avx2-vpclmulqdq, by measurement on Sapphire Rapids (Intel Xeon, 2
 * vCPU VM, 2026-11-24, `python bench/crc_rounds.py --rounds 9`, both backends of one build timed
 * in the same interleaved rounds, medians of the per-round ratios zmm/ymm): CRC-32C 512 B 1.04x,
 * 4 KiB 1.50x, 16 KiB 1.69x, 256 KiB 1.93x; CRC-32 4 KiB 1.51x, 16 KiB 1.75x, 256 KiB 1.87x;
 * cold checksum_windows (256 MiB, 16 KiB windows) 1.40x; a 64-byte call 1.11x. The zmm kernels
 * win everywhere on that CPU (full-rate 512-bit VPCLMULQDQ), and tie only where no fold runs.
 * On Zen 4 (EPYC VM, 2026-11-27, bench/uarch_probe.c --limits) a VPCLMULQDQ issues every 2
 * cycles at xmm, ymm and zmm alike, so a zmm fold moves twice the bytes of a ymm one: CRC-64/NVME
 * 256 KiB 57.6 vs 29.1 GB/s, CRC-32C 57.8 vs 46.2 (the ymm one-shot is fused with crc32
 * streams; docs/performance/zen4.md). zmm is first on every AVX-512 CPU measured. */
static const crcm_backend backends[] = {
#if defined(CRCM_HAVE_AVX512)
    {"avx512-vpclmulqdq", crcm_cpu_has_avx512_vpclmul, crcm_avx512_crc32c,
     crcm_avx512_crc32c_stream, crcm_avx512_crc32, crcm_avx512_crc32_stream,
     crcm_pclmul_mulmod_crc32c, crcm_pclmul_mulmod_crc32,
     crcm_avx512_crc64nvme, crcm_avx512_crc64nvme, crcm_pclmul_mulmod_crc64nvme,
     crcm_avx512_crc32c_crc64nvme, crcm_avx512_crc32c_crc64nvme_hot},
#endif
#if defined(CRCM_HAVE_AVX2)
    /* CRC-32 has no fused form (the crc32 instruction only knows Castagnoli), so its hot and
     * stream kernels are the same single-stream ymm fold; so has CRC-64/NVME. */
    {"avx2-vpclmulqdq", crcm_cpu_has_avx2_vpclmul, crcm_avx2_crc32c, crcm_avx2_crc32c_stream,
     crcm_avx2_crc32, crcm_avx2_crc32, crcm_pclmul_mulmod_crc32c, crcm_pclmul_mulmod_crc32,
     crcm_avx2_crc64nvme, crcm_avx2_crc64nvme, crcm_pclmul_mulmod_crc64nvme,
     crcm_avx2_crc32c_crc64nvme, crcm_avx2_crc32c_crc64nvme_hot},
#endif
#if defined(CRCM_HAVE_PCLMUL)
    {"pclmulqdq", crcm_cpu_has_pclmul, crcm_pclmul_crc32c, crcm_pclmul_crc32c_stream,
     crcm_pclmul_crc32, crcm_pclmul_crc32, crcm_pclmul_mulmod_crc32c, crcm_pclmul_mulmod_crc32,
     crcm_pclmul_crc64nvme, crcm_pclmul_crc64nvme, crcm_pclmul_mulmod_crc64nvme,
     crcm_pclmul_crc32c_crc64nvme, crcm_pclmul_crc32c_crc64nvme},
#endif
#if defined(CRCM_HAVE_SSE42)
    /* The crc32 instruction only knows the Castagnoli polynomial; without PCLMULQDQ the 64-bit
     * CRC is the table kernel. */
    {"sse42", crcm_cpu_has_sse42, crcm_sse42_crc32c, crcm_sse42_crc32c, crcm_portable_crc32,
     crcm_portable_crc32, crcm_portable_mulmod_crc32c, crcm_portable_mulmod_crc32,
     crcm_portable_crc64nvme, crcm_portable_crc64nvme, crcm_portable_mulmod_crc64nvme, NULL, NULL},
#endif
#if defined(CRCM_HAVE_ARM64)
    /* CRC-64/NVME: one PMULL fold serves hot and streamed data; no fused pair (the window
     * pair runs both kernels per chunk while it is in L1). */
    {"arm64-crc-pmull", crcm_cpu_has_arm64_crc_pmull, crcm_arm64_crc32c, crcm_arm64_crc32c,
     crcm_arm64_crc32, crcm_arm64_crc32, crcm_arm64_mulmod_crc32c, crcm_arm64_mulmod_crc32,
     crcm_arm64_crc64nvme, crcm_arm64_crc64nvme, crcm_arm64_mulmod_crc64nvme, NULL, NULL},
#endif
    {"portable", always, crcm_portable_crc32c, crcm_portable_crc32c, crcm_portable_crc32,
     crcm_portable_crc32, crcm_portable_mulmod_crc32c, crcm_portable_mulmod_crc32,
     crcm_portable_crc64nvme, crcm_portable_crc64nvme, crcm_portable_mulmod_crc64nvme, NULL, NULL},
};
#define N_BACKENDS (sizeof(backends) / sizeof(backends[0]))

/* The PCLMUL multiply is part of the AVX-512 and AVX2 entries; a build with either has PCLMUL. */
#if (defined(CRCM_HAVE_AVX512) || defined(CRCM_HAVE_AVX2)) && !defined(CRCM_HAVE_PCLMUL)
#error "the avx512 and avx2 backends need crc_pclmul.c"
#endif

/* The backend in use lives in one slot per process. Each Python extension that links the core
 * (merkle._crc, and merkle._native for the numpy API) has its own copy of this file; _native
 * adopts _crc's slot at import (crcm_dispatch_adopt) so set_backend() applies to both. The slot
 * is only accessed through __atomic builtins. */
static const crcm_backend *own_active;
static const crcm_backend **active = &own_active;

void *crcm_dispatch_slot(void) { return (void *)active; }

void crcm_dispatch_adopt(void *slot) {
    if (slot != NULL) active = (const crcm_backend **)slot;
}

static const crcm_backend *pick_best(void) {
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (backends[i].supported()) return &backends[i];
    return &backends[N_BACKENDS - 1];
}

static inline const crcm_backend *backend(void) {
    const crcm_backend *b = __atomic_load_n(active, __ATOMIC_ACQUIRE);
    if (__builtin_expect(b == NULL, 0)) {
        /* Racing first calls all compute the same answer, so a plain store is enough. */
        b = pick_best();
        __atomic_store_n(active, b, __ATOMIC_RELEASE);
    }
    return b;
}

const char *crcm_backend_name(void) { return backend()->name; }

const crcm_backend *crcm_backend_active(void) { return backend(); }

size_t crcm_compiled_backends(const char **names, size_t max) {
    for (size_t i = 0; i < N_BACKENDS && i < max; i++) names[i] = backends[i].name;
    return N_BACKENDS;
}

size_t crcm_available_backends(const char **names, size_t max) {
    size_t count = 0;
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (!backends[i].supported()) continue;
        if (count < max) names[count] = backends[i].name;
        count++;
    }
    return count;
}

int crcm_set_backend(const char *name) {
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (strcmp(backends[i].name, name) != 0) continue;
        if (!backends[i].supported()) return -2;
        __atomic_store_n(active, &backends[i], __ATOMIC_RELEASE);
        return 0;
    }
    return -1;
}

/* ---- one-shots ---------------------------------------------------------------------------- */

static inline crcm_kernel_fn kernel(crcm_algorithm alg, int stream) {
    const crcm_backend *b = backend();
    if (alg == CRCM_CRC32) return stream ? b->crc32_stream : b->crc32;
    return stream ? b->crc32c_stream : b->crc32c;
}

uint32_t crcm_crc(crcm_algorithm alg, uint32_t crc, const uint8_t *data, size_t len) {
    if (len == 0) return crc;
    return ~kernel(alg, 0)(~crc, data, len);
}

uint32_t crcm_crc32c(uint32_t crc, const uint8_t *data, size_t len) {
    return crcm_crc(CRCM_CRC32C, crc, data, len);
}

uint32_t crcm_crc32(uint32_t crc, const uint8_t *data, size_t len) {
    return crcm_crc(CRCM_CRC32, crc, data, len);
}

/* ---- combine ------------------------------------------------------------------------------ */

/* x^(8*len2) mod P from the x^(2^k) table: one multiply per set bit of len2. */
/* The product by a fixed k, tabulated per byte of the other operand: multiplying by k is
 * linear, so x * k is the XOR of one entry per byte of x (4 tables of 256 for the 32-bit CRCs,
 * 16 KiB; 8 for CRC-64/NVME), built from one multiply per bit and XORs. */
static void mul_table32(crcm_mulmod_fn mul, uint32_t k, uint32_t t[4][256]) {
    for (int j = 0; j < 4; j++) {
        t[j][0] = 0;
        for (int bit = 0; bit < 8; bit++) t[j][1u << bit] = mul((uint32_t)1u << (8 * j + bit), k);
        for (unsigned v = 3; v < 256; v++)
            if (v & (v - 1)) t[j][v] = t[j][v & (v - 1)] ^ t[j][v & (0u - v)];
    }
}

static void mul_table64(crcm_mulmod64_fn mul, uint64_t k, uint64_t t[8][256]) {
    for (int j = 0; j < 8; j++) {
        t[j][0] = 0;
        for (int bit = 0; bit < 8; bit++) t[j][1u << bit] = mul(1ull << (8 * j + bit), k);
        for (unsigned v = 3; v < 256; v++)
            if (v & (v - 1)) t[j][v] = t[j][v & (v - 1)] ^ t[j][v & (0u - v)];
    }
}

static uint32_t x8nmodp(crcm_mulmod_fn mul, const uint32_t *x2k, uint64_t len2) {
    uint32_t acc = 0x80000000u; /* x^0 */
    for (int k = 3; len2; k++, len2 >>= 1)
        if (len2 & 1) acc = mul(acc, x2k[k]);
    return acc;
}

uint32_t crcm_combine(crcm_algorithm alg, uint32_t crc1, uint32_t crc2, uint64_t len2) {
    const crcm_backend *b = backend();
    crcm_mulmod_fn mul = alg == CRCM_CRC32 ? b->mulmod_crc32 : b->mulmod_crc32c;
    const uint32_t *x2k = alg == CRCM_CRC32 ? crcm_x2k_crc32 : crcm_x2k_crc32c;
    /* The inversions of crc1 and crc2 cancel: crc(A||B) = crc(A)*x^(8|B|) + crc(B) mod P. */
    return mul(crc1, x8nmodp(mul, x2k, len2)) ^ crc2;
}

uint32_t crcm_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
    return crcm_combine(CRCM_CRC32C, crc1, crc2, len2);
}

uint32_t crcm_crc32_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
    return crcm_combine(CRCM_CRC32, crc1, crc2, len2);
}

void crcm_combine_fixed(crcm_algorithm alg, const uint32_t *crc1, const uint32_t *crc2,
                        uint64_t len2, size_t n, uint32_t *out) {
    const crcm_backend *b = backend();
    crcm_mulmod_fn mul = alg == CRCM_CRC32 ? b->mulmod_crc32 : b->mulmod_crc32c;
    const uint32_t *x2k = alg == CRCM_CRC32 ? crcm_x2k_crc32 : crcm_x2k_crc32c;
    uint32_t k = x8nmodp(mul, x2k, len2);
    if (n < 256) {
        for (size_t i = 0; i < n; i++) out[i] = mul(crc1[i], k) ^ crc2[i];
        return;
    }
    /* Multiplying by a fixed k is linear over GF(2): tabulate it per byte of crc1 (1,024
     * entries from 32 multiplies), then each element costs four lookups. */
    uint32_t t[4][256];
    mul_table32(mul, k, t);
    for (size_t i = 0; i < n; i++) {
        uint32_t c = crc1[i];
        out[i] = t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24] ^
                 crc2[i];
    }
}

/* ---- bulk --------------------------------------------------------------------------------- */

size_t crcm_window_count(size_t len, size_t bytes_per_checksum) {
    if (bytes_per_checksum == 0) return 0;
    return len / bytes_per_checksum + (len % bytes_per_checksum != 0);
}

void crcm_windows(crcm_algorithm alg, const uint8_t *data, size_t len, size_t bytes_per_checksum,
                  uint32_t *out) {
    if (bytes_per_checksum == 0) return;
    /* Windows tile a buffer that is usually streaming in from memory or disk: use the
     * single-stream kernel, which the hardware prefetcher can keep ahead of. */
    crcm_kernel_fn k = kernel(alg, 1);
    size_t i = 0;
    while (len >= bytes_per_checksum) {
        out[i++] = ~k(0xFFFFFFFFu, data, bytes_per_checksum);
        data += bytes_per_checksum;
        len -= bytes_per_checksum;
    }
    if (len) out[i] = ~k(0xFFFFFFFFu, data, len);
}

/* Shared by the int32 and int64 forms; `wide` is loop-invariant, so the compiler unswitches it. */
static inline int each_offsets(crcm_algorithm alg, const uint8_t *data, size_t data_len,
                               const void *offsets, int wide, size_t n, uint32_t *out) {
#define OFFSET(i) (wide ? ((const int64_t *)offsets)[i] : (int64_t)((const int32_t *)offsets)[i])
    if (OFFSET(0) < 0 || (uint64_t)OFFSET(n) > (uint64_t)data_len) return -1;
    for (size_t i = 0; i < n; i++)
        if (OFFSET(i + 1) < OFFSET(i)) return -1;
    /* Values lie one after another in one buffer that is usually streaming in from memory:
     * the single-stream kernel keeps the prefetcher on it (see crcm_windows). */
    crcm_kernel_fn k = kernel(alg, 1);
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(OFFSET(i + 1) - OFFSET(i));
        out[i] = len ? ~k(0xFFFFFFFFu, data + OFFSET(i), len) : 0;
    }
    return 0;
#undef OFFSET
}

int crcm_each_offsets32(crcm_algorithm alg, const uint8_t *data, size_t data_len,
                        const int32_t *offsets, size_t n, uint32_t *out) {
    return each_offsets(alg, data, data_len, offsets, 0, n, out);
}

int crcm_each_offsets64(crcm_algorithm alg, const uint8_t *data, size_t data_len,
                        const int64_t *offsets, size_t n, uint32_t *out) {
    return each_offsets(alg, data, data_len, offsets, 1, n, out);
}

void crcm_each_buffers(crcm_algorithm alg, const uint8_t *const *ptrs, const size_t *lens,
                       size_t n, uint32_t *out) {
    /* Many separate buffers, each read once: usually not in cache, so one stream each. */
    crcm_kernel_fn k = kernel(alg, 1);
    for (size_t i = 0; i < n; i++) out[i] = lens[i] ? ~k(0xFFFFFFFFu, ptrs[i], lens[i]) : 0;
}

/* ---- CRC-64/NVME ---------------------------------------------------------------------------- */

uint64_t crcm_crc64nvme(uint64_t crc, const uint8_t *data, size_t len) {
    if (len == 0) return crc;
    return ~backend()->crc64nvme(~crc, data, len);
}

/* x^(8*len2) mod P from the 64-bit x^(2^k) table (see x8nmodp). */
static uint64_t x8nmodp64(crcm_mulmod64_fn mul, uint64_t len2) {
    uint64_t acc = 1ull << 63; /* x^0 */
    for (int k = 3; len2; k++, len2 >>= 1)
        if (len2 & 1) acc = mul(acc, crcm_x2k_crc64nvme[k]);
    return acc;
}

uint64_t crcm_crc64nvme_combine(uint64_t crc1, uint64_t crc2, uint64_t len2) {
    crcm_mulmod64_fn mul = backend()->mulmod_crc64nvme;
    /* init and xorout are both all ones, so the inversions cancel as for the 32-bit CRCs */
    return mul(crc1, x8nmodp64(mul, len2)) ^ crc2;
}

void crcm_combine_fixed64(const uint64_t *crc1, const uint64_t *crc2, uint64_t len2, size_t n,
                          uint64_t *out) {
    crcm_mulmod64_fn mul = backend()->mulmod_crc64nvme;
    uint64_t k = x8nmodp64(mul, len2);
    if (n < 256) {
        for (size_t i = 0; i < n; i++) out[i] = mul(crc1[i], k) ^ crc2[i];
        return;
    }
    /* As crcm_combine_fixed: multiplying by a fixed k is linear, so tabulate it per byte of
     * crc1 (2,048 entries, 16 KiB, from 64 multiplies); each element then costs 8 lookups. */
    uint64_t t[8][256];
    mul_table64(mul, k, t);
    for (size_t i = 0; i < n; i++) {
        uint64_t c = crc1[i];
        out[i] = t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^
                 t[3][(c >> 24) & 0xff] ^ t[4][(c >> 32) & 0xff] ^ t[5][(c >> 40) & 0xff] ^
                 t[6][(c >> 48) & 0xff] ^ t[7][c >> 56] ^ crc2[i];
    }
}

void crcm_windows64(const uint8_t *data, size_t len, size_t bytes_per_checksum, uint64_t *out) {
    if (bytes_per_checksum == 0) return;
    crcm_kernel64_fn k = backend()->crc64nvme_stream; /* see crcm_windows */
    size_t i = 0;
    while (len >= bytes_per_checksum) {
        out[i++] = ~k(~0ull, data, bytes_per_checksum);
        data += bytes_per_checksum;
        len -= bytes_per_checksum;
    }
    if (len) out[i] = ~k(~0ull, data, len);
}

static inline int each64_offsets(const uint8_t *data, size_t data_len, const void *offsets,
                                 int wide, size_t n, uint64_t *out) {
#define OFFSET(i) (wide ? ((const int64_t *)offsets)[i] : (int64_t)((const int32_t *)offsets)[i])
    if (OFFSET(0) < 0 || (uint64_t)OFFSET(n) > (uint64_t)data_len) return -1;
    for (size_t i = 0; i < n; i++)
        if (OFFSET(i + 1) < OFFSET(i)) return -1;
    crcm_kernel64_fn k = backend()->crc64nvme_stream; /* see each_offsets */
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)(OFFSET(i + 1) - OFFSET(i));
        out[i] = len ? ~k(~0ull, data + OFFSET(i), len) : 0;
    }
    return 0;
#undef OFFSET
}

int crcm_each64_offsets32(const uint8_t *data, size_t data_len, const int32_t *offsets, size_t n,
                          uint64_t *out) {
    return each64_offsets(data, data_len, offsets, 0, n, out);
}

int crcm_each64_offsets64(const uint8_t *data, size_t data_len, const int64_t *offsets, size_t n,
                          uint64_t *out) {
    return each64_offsets(data, data_len, offsets, 1, n, out);
}

void crcm_each64_buffers(const uint8_t *const *ptrs, const size_t *lens, size_t n,
                         uint64_t *out) {
    crcm_kernel64_fn k = backend()->crc64nvme_stream;
    for (size_t i = 0; i < n; i++) out[i] = lens[i] ? ~k(~0ull, ptrs[i], lens[i]) : 0;
}

/* ---- two CRCs per window in one pass -------------------------------------------------------- */

/* Each window is fed to both kernels PAIR_CHUNK bytes at a time, b's right after a's, so the
 * second kernel reads the chunk from L1 (Zen 4 and Sapphire Rapids: 32 and 48 KiB of L1D)
 * and the buffer streams in from memory once. */
#define PAIR_CHUNK 16384

/* A window pair over a buffer of at most this many bytes takes the backend's hot fused kernel,
 * a longer one its streaming kernel. Zen 4 (EPYC VM, C harness, 16 KiB windows, 2026-11-27,
 * noisy): the hot zmm kernel takes 0.92x the time of the streaming one at 256 KiB, 1 and 4 MiB,
 * 0.95x at 16 MiB (in L3), but 1.26x at 64 MiB and 1.19-1.23x at 256 MiB (from memory); ymm
 * 0.95x up to 16 MiB, 1.27x at 64 MiB. 4 MiB: below the last-level cache of every CPU measured
 * (32 MiB on Zen 3 and Zen 4), so a buffer this size was most likely just written or read. */
#define CRCM_PAIR_HOT_MAX ((size_t)4 << 20)

/* The register of a 32- or 64-bit CRC after n bytes (raw registers, widened to 64 bits), by the
 * stream kernel (data coming from memory) or the hot one (data in cache). */
static inline uint64_t pair_step(const crcm_backend *be, crcm_algorithm alg, int hot, uint64_t reg,
                                 const uint8_t *p, size_t n) {
    switch (alg) {
    case CRCM_CRC64NVME: return (hot ? be->crc64nvme : be->crc64nvme_stream)(reg, p, n);
    case CRCM_CRC32: return (hot ? be->crc32 : be->crc32_stream)((uint32_t)reg, p, n);
    default: return (hot ? be->crc32c : be->crc32c_stream)((uint32_t)reg, p, n);
    }
}

static inline void pair_store(crcm_algorithm alg, void *out, size_t i, uint64_t reg) {
    if (alg == CRCM_CRC64NVME)
        ((uint64_t *)out)[i] = ~reg;
    else
        ((uint32_t *)out)[i] = ~(uint32_t)reg;
}

static inline uint64_t pair_init(crcm_algorithm alg) {
    return alg == CRCM_CRC64NVME ? ~0ull : 0xFFFFFFFFull;
}

void crcm_windows_pair(crcm_algorithm a, crcm_algorithm b, const uint8_t *data, size_t len,
                       size_t bytes_per_checksum, void *out_a, void *out_b) {
    if (bytes_per_checksum == 0 || a == b || (unsigned)a > CRCM_CRC64NVME ||
        (unsigned)b > CRCM_CRC64NVME)
        return;
    const crcm_backend *be = backend();
    /* the fused kernel, where the backend has one for this pair: its hot form for a buffer
     * that fits in cache, its streaming form for one that does not */
    int fused = be->crc32c_crc64nvme != NULL &&
                ((a == CRCM_CRC32C && b == CRCM_CRC64NVME) || (a == CRCM_CRC64NVME && b == CRCM_CRC32C));
    void (*pair_kernel)(uint32_t *, uint64_t *, const uint8_t *, size_t) =
        len <= CRCM_PAIR_HOT_MAX ? be->crc32c_crc64nvme_hot : be->crc32c_crc64nvme;
    for (size_t i = 0; len; i++) {
        size_t w = len < bytes_per_checksum ? len : bytes_per_checksum;
        uint64_t ra = pair_init(a), rb = pair_init(b);
        if (fused) {
            uint32_t r32 = 0xFFFFFFFFu;
            uint64_t r64 = ~0ull;
            pair_kernel(&r32, &r64, data, w);
            ra = a == CRCM_CRC32C ? r32 : r64;
            rb = b == CRCM_CRC32C ? r32 : r64;
        } else {
            /* The second kernel reads the chunk from L1, so it gets the backend's hot kernel;
             * CRC-32C goes second when it is one of the two, as its hot kernel adds crc32
             * streams to the folds on the avx2 and pclmul backends (avx2, Zen 4, 16 KiB windows:
             * the pair 1.98x -> 1.6x the slower CRC alone at 256 KiB hot). */
            int swap = a == CRCM_CRC32C;
            crcm_algorithm first = swap ? b : a, second = swap ? a : b;
            uint64_t r1 = swap ? rb : ra, r2 = swap ? ra : rb;
            for (size_t off = 0; off < w; off += PAIR_CHUNK) {
                size_t c = w - off < PAIR_CHUNK ? w - off : PAIR_CHUNK;
                r1 = pair_step(be, first, 0, r1, data + off, c);
                r2 = pair_step(be, second, 1, r2, data + off, c);
            }
            ra = swap ? r2 : r1;
            rb = swap ? r1 : r2;
        }
        pair_store(a, out_a, i, ra);
        pair_store(b, out_b, i, rb);
        data += w;
        len -= w;
    }
}

/* ---- fold: the CRC of n equal pieces from their CRCs ------------------------------------- */

/* crc(P0 || P1 || ... || Pn-1) for pieces of `stride` bytes each, from their CRCs: Horner's rule
 * c = c * x^(8*stride) + crc_i, one multiply by a fixed k per piece (a byte-table product, as in
 * crcm_combine_fixed). One chain is latency-bound (each step waits for the last), so the array is
 * cut into FOLD_LANES contiguous runs folded side by side, then the runs are joined with
 * x^(8*stride*run). An empty array folds to 0, the CRC of nothing. */
#define FOLD_LANES 4

uint32_t crcm_fold_fixed(crcm_algorithm alg, const uint32_t *crcs, size_t n, uint64_t stride) {
    const crcm_backend *b = backend();
    crcm_mulmod_fn mul = alg == CRCM_CRC32 ? b->mulmod_crc32 : b->mulmod_crc32c;
    const uint32_t *x2k = alg == CRCM_CRC32 ? crcm_x2k_crc32 : crcm_x2k_crc32c;
    uint32_t k = x8nmodp(mul, x2k, stride);
    uint32_t c = 0;
    if (n < 256) {
        for (size_t i = 0; i < n; i++) c = mul(c, k) ^ crcs[i];
        return c;
    }
    uint32_t t[4][256];
    mul_table32(mul, k, t);
#define T32(x) (t[0][(x) & 0xff] ^ t[1][((x) >> 8) & 0xff] ^ t[2][((x) >> 16) & 0xff] ^ t[3][(x) >> 24])
    size_t run = n / FOLD_LANES;
    uint32_t l[FOLD_LANES] = {0};
    for (size_t i = 0; i < run; i++)
        for (int j = 0; j < FOLD_LANES; j++) l[j] = T32(l[j]) ^ crcs[(size_t)j * run + i];
    uint32_t krun = x8nmodp(mul, x2k, stride * (uint64_t)run);
    c = l[0];
    for (int j = 1; j < FOLD_LANES; j++) c = mul(c, krun) ^ l[j];
    for (size_t i = FOLD_LANES * run; i < n; i++) c = T32(c) ^ crcs[i];
#undef T32
    return c;
}

uint64_t crcm_fold_fixed64(const uint64_t *crcs, size_t n, uint64_t stride) {
    crcm_mulmod64_fn mul = backend()->mulmod_crc64nvme;
    uint64_t k = x8nmodp64(mul, stride);
    uint64_t c = 0;
    if (n < 256) {
        for (size_t i = 0; i < n; i++) c = mul(c, k) ^ crcs[i];
        return c;
    }
    uint64_t t[8][256];
    mul_table64(mul, k, t);
#define T64(x) (t[0][(x) & 0xff] ^ t[1][((x) >> 8) & 0xff] ^ t[2][((x) >> 16) & 0xff] ^ \
                t[3][((x) >> 24) & 0xff] ^ t[4][((x) >> 32) & 0xff] ^ t[5][((x) >> 40) & 0xff] ^ \
                t[6][((x) >> 48) & 0xff] ^ t[7][(x) >> 56])
    size_t run = n / FOLD_LANES;
    uint64_t l[FOLD_LANES] = {0};
    for (size_t i = 0; i < run; i++)
        for (int j = 0; j < FOLD_LANES; j++) l[j] = T64(l[j]) ^ crcs[(size_t)j * run + i];
    uint64_t krun = x8nmodp64(mul, stride * (uint64_t)run);
    c = l[0];
    for (int j = 1; j < FOLD_LANES; j++) c = mul(c, krun) ^ l[j];
    for (size_t i = FOLD_LANES * run; i < n; i++) c = T64(c) ^ crcs[i];
#undef T64
    return c;
}

/* ---- segmented fold of big-endian window checksums ---------------------------------------- */

/* For each segment s: the CRC of its pieces from their CRCs as stored (big-endian, 4 bytes for
 * the 32-bit CRCs, 8 for CRC-64/NVME: Ozone's ChecksumData entries, packed), where every piece
 * but the segment's last is `stride` bytes and the last is last_len[s] bytes. Pieces
 * bounds[s]..bounds[s+1]-1 of `be` belong to segment s (bounds ascending, nseg + 1 of them);
 * an empty segment is 0. One table for the whole call (the stride is shared): the copy check
 * composes every key of a batch whose windows are uniform (all of them but the last) in one
 * call, with no byte-swapped copy of the windows. */
static inline uint32_t load_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t load_be64(const uint8_t *p) {
    return ((uint64_t)load_be32(p) << 32) | load_be32(p + 4);
}

int crcm_fold_segments_be(crcm_algorithm alg, const uint8_t *be, const uint64_t *bounds,
                          const uint64_t *last_len, size_t nseg, uint64_t stride, void *out) {
    if ((unsigned)alg > CRCM_CRC64NVME) return -1;
    for (size_t s = 0; s < nseg; s++)
        if (bounds[s + 1] < bounds[s]) return -1;
    const crcm_backend *b = backend();
    if (alg == CRCM_CRC64NVME) {
        crcm_mulmod64_fn mul = b->mulmod_crc64nvme;
        uint64_t k = x8nmodp64(mul, stride);
        uint64_t t[8][256];
        mul_table64(mul, k, t);
        uint64_t *o = (uint64_t *)out;
        for (size_t s = 0; s < nseg; s++) {
            uint64_t lo = bounds[s], hi = bounds[s + 1], c = 0;
            if (hi == lo) { o[s] = 0; continue; }
            for (uint64_t i = lo; i + 1 < hi; i++) {
                c = t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^
                    t[3][(c >> 24) & 0xff] ^ t[4][(c >> 32) & 0xff] ^ t[5][(c >> 40) & 0xff] ^
                    t[6][(c >> 48) & 0xff] ^ t[7][c >> 56];
                c ^= load_be64(be + 8 * i);
            }
            o[s] = mul(c, x8nmodp64(mul, last_len[s])) ^ load_be64(be + 8 * (hi - 1));
        }
        return 0;
    }
    crcm_mulmod_fn mul = alg == CRCM_CRC32 ? b->mulmod_crc32 : b->mulmod_crc32c;
    const uint32_t *x2k = alg == CRCM_CRC32 ? crcm_x2k_crc32 : crcm_x2k_crc32c;
    uint32_t k = x8nmodp(mul, x2k, stride);
    uint32_t t[4][256];
    mul_table32(mul, k, t);
    uint32_t *o = (uint32_t *)out;
    for (size_t s = 0; s < nseg; s++) {
        uint64_t lo = bounds[s], hi = bounds[s + 1];
        if (hi == lo) { o[s] = 0; continue; }
        /* four runs side by side (as crcm_fold_fixed) when long enough: one chain waits on
         * each table lookup */
        uint64_t n = hi - 1 - lo, run = n >= 256 ? n / FOLD_LANES : 0;
        uint32_t c = 0;
        if (run) {
            uint32_t l[FOLD_LANES] = {0};
            for (uint64_t i = 0; i < run; i++)
                for (int j = 0; j < FOLD_LANES; j++) {
                    uint32_t x = l[j];
                    l[j] = t[0][x & 0xff] ^ t[1][(x >> 8) & 0xff] ^ t[2][(x >> 16) & 0xff] ^
                           t[3][x >> 24] ^ load_be32(be + 4 * (lo + (uint64_t)j * run + i));
                }
            uint32_t krun = x8nmodp(mul, x2k, stride * run);
            c = l[0];
            for (int j = 1; j < FOLD_LANES; j++) c = mul(c, krun) ^ l[j];
        }
        for (uint64_t i = lo + FOLD_LANES * run; i + 1 < hi; i++)
            c = t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24] ^
                load_be32(be + 4 * i);
        o[s] = mul(c, x8nmodp(mul, x2k, last_len[s])) ^ load_be32(be + 4 * (hi - 1));
    }
    return 0;
}
