/* crc_internal.h - what the dispatcher needs from each kernel file: per-ISA prototypes and the
 * backend table. Kernels work on the *raw* CRC register (no pre/post inversion); the public
 * wrappers in crc_dispatch.c apply the inversion once. */
#ifndef CRC_INTERNAL_H
#define CRC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "crcmerkle.h"

#define CRCM_POLY_CRC32C 0x82F63B78u /* reflected Castagnoli */
#define CRCM_POLY_CRC32 0xEDB88320u  /* reflected IEEE 802.3 */
#define CRCM_POLY_CRC64NVME 0x9A6C9329AC4BC9B5ull /* reflected CRC-64/NVME (x^0 is bit 63) */

/* Unaligned loads without undefined behaviour; compilers turn these into one mov. */
static inline uint64_t crcm_load64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t crcm_load32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* raw-register kernel: returns the register after feeding n bytes at p. */
typedef uint32_t (*crcm_kernel_fn)(uint32_t reg, const uint8_t *p, size_t n);
/* a*b mod P for reflected 32-bit polynomials (x^0 is bit 31). */
typedef uint32_t (*crcm_mulmod_fn)(uint32_t a, uint32_t b);
/* the same for the 64-bit CRC (x^0 is bit 63) */
typedef uint64_t (*crcm_kernel64_fn)(uint64_t reg, const uint8_t *p, size_t n);
typedef uint64_t (*crcm_mulmod64_fn)(uint64_t a, uint64_t b);

typedef struct {
    const char *name;
    int (*supported)(void);      /* this CPU (and OS) can run it */
    crcm_kernel_fn crc32c;       /* best for one call over data likely hot in cache */
    crcm_kernel_fn crc32c_stream;/* one sequential stream: best for windows over cold memory */
    crcm_kernel_fn crc32;
    crcm_kernel_fn crc32_stream;
    crcm_mulmod_fn mulmod_crc32c;
    crcm_mulmod_fn mulmod_crc32;
    crcm_kernel64_fn crc64nvme;
    crcm_kernel64_fn crc64nvme_stream;
    crcm_mulmod64_fn mulmod_crc64nvme;
    /* Optional (NULL: none): both raw registers after the same n bytes, in one pass; the first
     * for data streaming in from memory, the second for data likely hot in cache (the same
     * function where one kernel serves both). */
    void (*crc32c_crc64nvme)(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n);
    void (*crc32c_crc64nvme_hot)(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n);
} crcm_backend;

/* The backend in use (crc_dispatch.c): for other C files of the core that call its kernels
 * directly (bookkeeper.c). */
const crcm_backend *crcm_backend_active(void);

/* portable (crc_portable.c): slicing-by-16 tables, always compiled. table[k][b] is the register
 * after feeding byte b followed by k zero bytes. */
extern const uint32_t crcm_table_crc32c[16][256];
extern const uint32_t crcm_table_crc32[16][256];
uint32_t crcm_portable_crc32c(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_portable_crc32(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_portable_mulmod_crc32c(uint32_t a, uint32_t b);
uint32_t crcm_portable_mulmod_crc32(uint32_t a, uint32_t b);
/* x^n mod P (reflected), for any n < 2^64, from a table of x^(2^k) mod P. */
uint32_t crcm_xnmodp(crcm_algorithm alg, uint64_t n);
/* x^(2^k) mod P for k = 0..67, generated into crc_tables.h. */
extern const uint32_t crcm_x2k_crc32c[68];
extern const uint32_t crcm_x2k_crc32[68];
/* CRC-64/NVME, the same three (table values are 64-bit registers). */
extern const uint64_t crcm_table_crc64nvme[16][256];
extern const uint64_t crcm_x2k_crc64nvme[68];
uint64_t crcm_portable_crc64nvme(uint64_t reg, const uint8_t *p, size_t n);
uint64_t crcm_portable_mulmod_crc64nvme(uint64_t a, uint64_t b);

/* Which kernel files a build includes: setup.py defines CRCM_HAVE_<ISA> for each kernel file it
 * compiles (x86: SSE42, PCLMUL, AVX2, AVX512; aarch64: ARM64), so a build may leave any ISA out. */
#if defined(CRCM_HAVE_SSE42) || defined(CRCM_HAVE_PCLMUL) || defined(CRCM_HAVE_AVX2) || \
    defined(CRCM_HAVE_AVX512)
#define CRCM_X86 1
int crcm_cpu_has_sse42(void);
int crcm_cpu_has_pclmul(void);      /* SSE4.2 + PCLMULQDQ */
int crcm_cpu_has_avx2_vpclmul(void);   /* AVX2 + VPCLMULQDQ + PCLMULQDQ, OS saves YMM state */
int crcm_cpu_has_avx512_vpclmul(void); /* AVX-512 F/VL/BW + VPCLMULQDQ, OS saves ZMM state */
#endif
#if defined(CRCM_HAVE_SSE42)
/* crc_sse42.c */
uint32_t crcm_sse42_crc32c(uint32_t reg, const uint8_t *p, size_t n);
#endif
#if defined(CRCM_HAVE_PCLMUL)
/* crc_pclmul.c */
uint32_t crcm_pclmul_crc32c(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_pclmul_crc32c_stream(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_pclmul_crc32(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_pclmul_mulmod_crc32c(uint32_t a, uint32_t b);
uint32_t crcm_pclmul_mulmod_crc32(uint32_t a, uint32_t b);
uint64_t crcm_pclmul_crc64nvme(uint64_t reg, const uint8_t *p, size_t n);
uint64_t crcm_pclmul_mulmod_crc64nvme(uint64_t a, uint64_t b);
void crcm_pclmul_crc32c_crc64nvme(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n);
#endif
#if defined(CRCM_HAVE_AVX2)
/* crc_avx2.c */
uint32_t crcm_avx2_crc32c(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_avx2_crc32c_stream(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_avx2_crc32(uint32_t reg, const uint8_t *p, size_t n);
uint64_t crcm_avx2_crc64nvme(uint64_t reg, const uint8_t *p, size_t n);
void crcm_avx2_crc32c_crc64nvme(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n);
void crcm_avx2_crc32c_crc64nvme_hot(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n);
#endif
#if defined(CRCM_HAVE_AVX512)
/* crc_avx512.c */
uint32_t crcm_avx512_crc32c(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_avx512_crc32c_stream(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_avx512_crc32(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_avx512_crc32_stream(uint32_t reg, const uint8_t *p, size_t n);
uint64_t crcm_avx512_crc64nvme(uint64_t reg, const uint8_t *p, size_t n);
void crcm_avx512_crc32c_crc64nvme(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n);
void crcm_avx512_crc32c_crc64nvme_hot(uint32_t *reg32, uint64_t *reg64, const uint8_t *p, size_t n);
#endif

#if defined(CRCM_HAVE_ARM64)
int crcm_cpu_has_arm64_crc_pmull(void); /* cpu_arm64.c: HWCAP CRC32 and PMULL both present */
/* crc_arm64.c */
uint32_t crcm_arm64_crc32c(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_arm64_crc32(uint32_t reg, const uint8_t *p, size_t n);
uint32_t crcm_arm64_mulmod_crc32c(uint32_t a, uint32_t b);
uint32_t crcm_arm64_mulmod_crc32(uint32_t a, uint32_t b);
/* crc_arm64.c: CRC-64/NVME by PMULL folding */
uint64_t crcm_arm64_crc64nvme(uint64_t reg, const uint8_t *p, size_t n);
uint64_t crcm_arm64_mulmod_crc64nvme(uint64_t a, uint64_t b); /* a*b mod P, x^0 is bit 63 */
#endif

#endif /* CRC_INTERNAL_H */
