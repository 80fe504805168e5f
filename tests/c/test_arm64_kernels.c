/* test_arm64_kernels.c - checks the aarch64 kernels (csrc/crc_arm64.c, csrc/cpu_arm64.c) against
 * bitwise references with no other part of the core linked in; run by run_arm64_qemu.sh.
 * The 32- and 64-bit CRCs share every test: registers are uint64_t, a 32-bit CRC's upper half
 * is zero, and the references are written for any width up to 64. */
#define _DEFAULT_SOURCE /* mmap flags under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crc_internal.h"

#define MAX_LEN 4160
#define MAX_ALIGN 64
#define POLY_CRC64NVME 0x9A6C9329AC4BC9B5ull /* reflected */

static unsigned long passed, failed;

static void check(int ok, const char *what, const char *alg, size_t len, size_t align,
                  uint64_t got, uint64_t want) {
    if (ok) {
        passed++;
        return;
    }
    if (failed < 20) {
        printf("FAIL %s %s len=%zu align=%zu got=%016llx want=%016llx\n", what, alg, len, align,
               (unsigned long long)got, (unsigned long long)want);
    }
    failed++;
}

/* xorshift64*: reproducible data and seeds. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

typedef struct {
    const char *name;
    unsigned width;  /* 32 or 64 bits */
    uint64_t poly;   /* reflected */
    uint64_t (*crc)(uint64_t reg, const uint8_t *p, size_t n);
    uint64_t (*mulmod)(uint64_t a, uint64_t b);
    uint64_t check_123456789; /* standard check value, after the ~ inversions */
} algo;

static uint64_t mask(const algo *a) { return a->width == 64 ? ~0ull : (1ull << a->width) - 1; }
static uint64_t x0(const algo *a) { return 1ull << (a->width - 1); } /* x^0, reflected */

/* Bitwise references: one bit per step, reflected, raw register (any width: the register's
 * bits above the width stay zero). */
static uint64_t ref_crc(const algo *a, uint64_t reg, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        reg ^= p[i];
        for (int b = 0; b < 8; b++) {
            reg = (reg >> 1) ^ ((reg & 1u) ? a->poly : 0u);
        }
    }
    return reg;
}

/* x*y mod P by shift-and-add; x's top bit is x^0, and y is multiplied by x each step. */
static uint64_t ref_mulmod(const algo *a, uint64_t x, uint64_t y) {
    uint64_t r = 0;
    for (unsigned i = 0; i < a->width; i++) {
        if (x & (x0(a) >> i)) {
            r ^= y;
        }
        y = (y >> 1) ^ ((y & 1u) ? a->poly : 0u);
    }
    return r;
}

/* The kernels under test, widened to one signature. */
static uint64_t k_crc32c(uint64_t reg, const uint8_t *p, size_t n) {
    return crcm_arm64_crc32c((uint32_t)reg, p, n);
}
static uint64_t k_crc32(uint64_t reg, const uint8_t *p, size_t n) {
    return crcm_arm64_crc32((uint32_t)reg, p, n);
}
static uint64_t m_crc32c(uint64_t a, uint64_t b) {
    return crcm_arm64_mulmod_crc32c((uint32_t)a, (uint32_t)b);
}
static uint64_t m_crc32(uint64_t a, uint64_t b) {
    return crcm_arm64_mulmod_crc32((uint32_t)a, (uint32_t)b);
}

static const algo ALGOS[3] = {
    {"crc32c", 32, CRCM_POLY_CRC32C, k_crc32c, m_crc32c, 0xE3069283u},
    {"crc32", 32, CRCM_POLY_CRC32, k_crc32, m_crc32, 0xCBF43926u},
    {"crc64nvme", 64, POLY_CRC64NVME, crcm_arm64_crc64nvme, crcm_arm64_mulmod_crc64nvme,
     0xAE8B14860A799888ull},
};

static void test_vectors(const algo *a) {
    const uint8_t *msg = (const uint8_t *)"123456789";
    uint64_t got = ~a->crc(mask(a), msg, 9) & mask(a);
    check(got == a->check_123456789, "check-vector", a->name, 9, 0, got, a->check_123456789);
    uint64_t ref = ~ref_crc(a, mask(a), msg, 9) & mask(a);
    check(ref == a->check_123456789, "reference-vector", a->name, 9, 0, ref, a->check_123456789);
    uint64_t seed = 0x0123456789ABCDEFull & mask(a);
    got = a->crc(seed, NULL, 0);
    check(got == seed, "null-empty", a->name, 0, 0, got, seed);
    /* Every short length from an all-ones and an all-zero register, and a one-bit message at
     * each position: the register-into-message split of the short path at its edges. */
    uint8_t buf[64] = {0};
    for (size_t n = 0; n <= sizeof buf; n++) {
        for (size_t bit = 0; bit < 8 * n; bit += 5) {
            buf[bit / 8] = (uint8_t)(1u << (bit % 8));
            for (int s = 0; s < 2; s++) {
                uint64_t r0 = s ? mask(a) : 0;
                uint64_t want = ref_crc(a, r0, buf, n);
                got = a->crc(r0, buf, n);
                check(got == want, "one-bit", a->name, n, bit, got, want);
            }
            buf[bit / 8] = 0;
        }
    }
}

/* Every length 0..MAX_LEN at every start alignment 0..63, random register each time. The same
 * message is copied to each alignment, so the reference is linear algebra on prefixes:
 * crc(s, M) = crc(0, M) ^ s * x^(8 len) mod P, with both terms from the bitwise references. */
static void test_lengths_alignments(const algo *a, const uint8_t *msg) {
    static uint64_t prefix[MAX_LEN + 1], xpow[MAX_LEN + 1];
    static uint8_t buf[MAX_LEN + MAX_ALIGN + 64];
    const uint8_t zero = 0;
    prefix[0] = 0;
    xpow[0] = x0(a);
    for (size_t n = 1; n <= MAX_LEN; n++) {
        prefix[n] = ref_crc(a, prefix[n - 1], msg + n - 1, 1);
        xpow[n] = ref_crc(a, xpow[n - 1], &zero, 1); /* times x^8 */
    }
    for (size_t align = 0; align < MAX_ALIGN; align++) {
        for (size_t i = 0; i < sizeof buf; i++) {
            buf[i] = (uint8_t)rng(); /* junk around the message must not leak in */
        }
        memcpy(buf + align, msg, MAX_LEN);
        for (size_t n = 0; n <= MAX_LEN; n++) {
            uint64_t seed = rng() & mask(a);
            uint64_t want = prefix[n] ^ ref_mulmod(a, seed, xpow[n]);
            uint64_t got = a->crc(seed, buf + align, n);
            check(got == want, "length/alignment", a->name, n, align, got, want);
        }
    }
    /* The linear-algebra shortcut itself, checked directly on a sample. */
    for (size_t n = 0; n <= MAX_LEN; n += 97) {
        uint64_t seed = rng() & mask(a);
        uint64_t want = ref_crc(a, seed, msg, n);
        uint64_t got = prefix[n] ^ ref_mulmod(a, seed, xpow[n]);
        check(got == want, "reference-shortcut", a->name, n, 0, got, want);
    }
}

/* Messages that end (and start) right against an inaccessible page: any over-read faults. */
static void test_guard_page(const algo *a, const uint8_t *msg) {
    long page = sysconf(_SC_PAGESIZE);
    size_t span = ((MAX_LEN + (size_t)page - 1) / (size_t)page) * (size_t)page;
    uint8_t *base = mmap(NULL, span + 2 * (size_t)page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        check(0, "mmap", a->name, 0, 0, 0, 0);
        return;
    }
    uint8_t *lo_guard = base, *area = base + page, *hi_guard = base + page + span;
    mprotect(lo_guard, (size_t)page, PROT_NONE);
    mprotect(hi_guard, (size_t)page, PROT_NONE);
    for (size_t n = 0; n <= MAX_LEN; n++) {
        uint64_t seed = rng() & mask(a);
        uint64_t want = ref_crc(a, seed, msg, n);
        memcpy(hi_guard - n, msg, n);
        uint64_t got = a->crc(seed, hi_guard - n, n);
        check(got == want, "ends-at-guard", a->name, n, 0, got, want);
        memcpy(area, msg, n);
        got = a->crc(seed, area, n);
        check(got == want, "starts-after-guard", a->name, n, 0, got, want);
        n += n >= 512 ? 6 : 0; /* every length up to 512, then every 7th */
    }
    munmap(base, span + 2 * (size_t)page);
}

/* Large buffers, plus chaining at split points: f(f(s, A), B) == f(s, A||B). */
static void test_large(const algo *a) {
    static const size_t lens[] = {1u << 20, (1u << 20) + 1, (1u << 20) + 15, (3u << 20) + 77};
    size_t max = (3u << 20) + 77 + 16;
    uint8_t *big = malloc(max);
    if (big == NULL) {
        check(0, "malloc", a->name, max, 0, 0, 0);
        return;
    }
    for (size_t i = 0; i < max; i++) {
        big[i] = (uint8_t)rng();
    }
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        size_t n = lens[i], align = i * 5;
        uint64_t seed = rng() & mask(a);
        uint64_t want = ref_crc(a, seed, big + align, n);
        uint64_t got = a->crc(seed, big + align, n);
        check(got == want, "large", a->name, n, align, got, want);
        size_t splits[] = {1, 63, 64, 255, 256, 4097, n / 2 + 3, n - 300, n - 1};
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
            size_t k = splits[s];
            uint64_t chained = a->crc(a->crc(seed, big + align, k), big + align + k, n - k);
            check(chained == want, "large-chained", a->name, n, k, chained, want);
        }
    }
    free(big);
}

static void test_mulmod(const algo *a) {
    const uint64_t special[] = {0u,     1u,          x0(a),        x0(a) >> 1,    mask(a),
                                a->poly, 1ull << 16, mask(a) >> 1, 1ull << 31, 0xFFFFFFFFull};
    size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < ns; i++) {
        for (size_t j = 0; j < ns; j++) {
            uint64_t u = special[i] & mask(a), v = special[j] & mask(a);
            uint64_t got = a->mulmod(u, v);
            uint64_t want = ref_mulmod(a, u, v);
            check(got == want, "mulmod-special", a->name, i, j, got, want);
        }
    }
    for (int i = 0; i < 200000; i++) {
        uint64_t x = rng() & mask(a), y = rng() & mask(a);
        uint64_t got = a->mulmod(x, y);
        uint64_t want = ref_mulmod(a, x, y);
        check(got == want, "mulmod-random", a->name, (size_t)i, 0, got, want);
        if (i < 1000) {
            /* x^0 is the identity, and multiplication commutes. */
            check(a->mulmod(x, x0(a)) == x, "mulmod-identity", a->name, (size_t)i, 0,
                  a->mulmod(x, x0(a)), x);
            check(a->mulmod(x, y) == a->mulmod(y, x), "mulmod-commute", a->name, (size_t)i, 0,
                  a->mulmod(x, y), a->mulmod(y, x));
        }
    }
}

int main(void) {
    int has = crcm_cpu_has_arm64_crc_pmull();
    check(has == 1, "cpu-detect", "arm64", 0, 0, (uint64_t)has, 1);

    static uint8_t msg[MAX_LEN];
    for (size_t i = 0; i < MAX_LEN; i++) {
        msg[i] = (uint8_t)rng();
    }
    for (size_t i = 0; i < sizeof ALGOS / sizeof ALGOS[0]; i++) {
        const algo *a = &ALGOS[i];
        test_vectors(a);
        test_mulmod(a);
        test_lengths_alignments(a, msg);
        test_guard_page(a, msg);
        test_large(a);
    }
    printf("%lu passed, %lu failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
