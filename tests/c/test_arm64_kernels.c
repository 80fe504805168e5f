/* test_arm64_kernels.c - checks the aarch64 kernels (csrc/crc_arm64.c, csrc/cpu_arm64.c) against
 * bitwise references with no other part of the core linked in; run by run_arm64_qemu.sh. */
#define _DEFAULT_SOURCE /* mmap flags under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crc_internal.h"

#define MAX_LEN 4160
#define MAX_ALIGN 64

static unsigned long passed, failed;

static void check(int ok, const char *what, const char *alg, size_t len, size_t align,
                  uint32_t got, uint32_t want) {
    if (ok) {
        passed++;
        return;
    }
    if (failed < 20) {
        printf("FAIL %s %s len=%zu align=%zu got=%08x want=%08x\n", what, alg, len, align,
               (unsigned)got, (unsigned)want);
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

/* Bitwise references: one bit per step, reflected, raw register. */
static uint32_t ref_crc(uint32_t poly, uint32_t reg, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        reg ^= p[i];
        for (int b = 0; b < 8; b++) {
            reg = (reg >> 1) ^ ((reg & 1u) ? poly : 0u);
        }
    }
    return reg;
}

/* a*b mod P by shift-and-add; a's bit 31 is x^0, and b is multiplied by x each step. */
static uint32_t ref_mulmod(uint32_t poly, uint32_t a, uint32_t b) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        if (a & 0x80000000u) {
            r ^= b;
        }
        a <<= 1;
        b = (b >> 1) ^ ((b & 1u) ? poly : 0u);
    }
    return r;
}

typedef struct {
    const char *name;
    uint32_t poly;
    crcm_kernel_fn crc;
    crcm_mulmod_fn mulmod;
    uint32_t check_123456789; /* standard check value, after the ~ inversions */
} algo;

static const algo ALGOS[2] = {
    {"crc32c", CRCM_POLY_CRC32C, crcm_arm64_crc32c, crcm_arm64_mulmod_crc32c, 0xE3069283u},
    {"crc32", CRCM_POLY_CRC32, crcm_arm64_crc32, crcm_arm64_mulmod_crc32, 0xCBF43926u},
};

static void test_vectors(const algo *a) {
    const uint8_t *msg = (const uint8_t *)"123456789";
    uint32_t got = ~a->crc(0xFFFFFFFFu, msg, 9);
    check(got == a->check_123456789, "check-vector", a->name, 9, 0, got, a->check_123456789);
    uint32_t ref = ~ref_crc(a->poly, 0xFFFFFFFFu, msg, 9);
    check(ref == a->check_123456789, "reference-vector", a->name, 9, 0, ref, a->check_123456789);
    got = a->crc(0x12345678u, NULL, 0);
    check(got == 0x12345678u, "null-empty", a->name, 0, 0, got, 0x12345678u);
}

/* Every length 0..MAX_LEN at every start alignment 0..63, random register each time. The same
 * message is copied to each alignment, so the reference is linear algebra on prefixes:
 * crc(s, M) = crc(0, M) ^ s * x^(8 len) mod P, with both terms from the bitwise references. */
static void test_lengths_alignments(const algo *a, const uint8_t *msg) {
    static uint32_t prefix[MAX_LEN + 1], xpow[MAX_LEN + 1];
    static uint8_t buf[MAX_LEN + MAX_ALIGN + 64];
    const uint8_t zero = 0;
    prefix[0] = 0;
    xpow[0] = 0x80000000u; /* x^0 */
    for (size_t n = 1; n <= MAX_LEN; n++) {
        prefix[n] = ref_crc(a->poly, prefix[n - 1], msg + n - 1, 1);
        xpow[n] = ref_crc(a->poly, xpow[n - 1], &zero, 1); /* times x^8 */
    }
    for (size_t align = 0; align < MAX_ALIGN; align++) {
        for (size_t i = 0; i < sizeof buf; i++) {
            buf[i] = (uint8_t)rng(); /* junk around the message must not leak in */
        }
        memcpy(buf + align, msg, MAX_LEN);
        for (size_t n = 0; n <= MAX_LEN; n++) {
            uint32_t seed = (uint32_t)rng();
            uint32_t want = prefix[n] ^ ref_mulmod(a->poly, seed, xpow[n]);
            uint32_t got = a->crc(seed, buf + align, n);
            check(got == want, "length/alignment", a->name, n, align, got, want);
        }
    }
    /* The linear-algebra shortcut itself, checked directly on a sample. */
    for (size_t n = 0; n <= MAX_LEN; n += 97) {
        uint32_t seed = (uint32_t)rng();
        uint32_t want = ref_crc(a->poly, seed, msg, n);
        uint32_t got = prefix[n] ^ ref_mulmod(a->poly, seed, xpow[n]);
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
        uint32_t seed = (uint32_t)rng();
        uint32_t want = ref_crc(a->poly, seed, msg, n);
        memcpy(hi_guard - n, msg, n);
        uint32_t got = a->crc(seed, hi_guard - n, n);
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
        uint32_t seed = (uint32_t)rng();
        uint32_t want = ref_crc(a->poly, seed, big + align, n);
        uint32_t got = a->crc(seed, big + align, n);
        check(got == want, "large", a->name, n, align, got, want);
        size_t splits[] = {1, 63, 64, 255, 256, 4097, n / 2 + 3, n - 300, n - 1};
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
            size_t k = splits[s];
            uint32_t chained = a->crc(a->crc(seed, big + align, k), big + align + k, n - k);
            check(chained == want, "large-chained", a->name, n, k, chained, want);
        }
    }
    free(big);
}

static void test_mulmod(const algo *a) {
    const uint32_t special[] = {0u, 1u, 0x80000000u, 0x40000000u, 0xFFFFFFFFu, a->poly,
                                0x00000001u << 16, 0x7FFFFFFFu};
    size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < ns; i++) {
        for (size_t j = 0; j < ns; j++) {
            uint32_t got = a->mulmod(special[i], special[j]);
            uint32_t want = ref_mulmod(a->poly, special[i], special[j]);
            check(got == want, "mulmod-special", a->name, i, j, got, want);
        }
    }
    for (int i = 0; i < 200000; i++) {
        uint32_t x = (uint32_t)rng(), y = (uint32_t)rng();
        uint32_t got = a->mulmod(x, y);
        uint32_t want = ref_mulmod(a->poly, x, y);
        check(got == want, "mulmod-random", a->name, (size_t)i, 0, got, want);
        if (i < 1000) {
            /* x^0 is the identity, and multiplication commutes. */
            check(a->mulmod(x, 0x80000000u) == x, "mulmod-identity", a->name, (size_t)i, 0,
                  a->mulmod(x, 0x80000000u), x);
            check(a->mulmod(x, y) == a->mulmod(y, x), "mulmod-commute", a->name, (size_t)i, 0,
                  a->mulmod(x, y), a->mulmod(y, x));
        }
    }
}

int main(void) {
    int has = crcm_cpu_has_arm64_crc_pmull();
    check(has == 1, "cpu-detect", "arm64", 0, 0, (uint32_t)has, 1);

    static uint8_t msg[MAX_LEN];
    for (size_t i = 0; i < MAX_LEN; i++) {
        msg[i] = (uint8_t)rng();
    }
    for (int i = 0; i < 2; i++) {
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
