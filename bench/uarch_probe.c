/* uarch_probe.c - measures the instruction limits the x86 CRC kernels are bound by on the CPU in
 * front of it: the throughput and latency of VPCLMULQDQ (xmm and ymm), the throughput of crc32,
 * and how much of each survives when both run in one loop (the fused CRC-32C kernels assume the
 * two use different execution units). The figures quoted in csrc/crc_avx2.c come from here.
 *
 *   cc -O2 -mavx2 -mvpclmulqdq -mpclmul -msse4.2 bench/uarch_probe.c -o /tmp/uarch_probe
 *   /tmp/uarch_probe
 *
 * Cycles are measured against a chain of dependent 1-cycle adds in the same run, so the result
 * does not depend on the TSC frequency or on turbo. The loops are in inline assembly so the
 * compiler cannot reorder, merge or drop the instructions; results are best of 5 runs.
 *
 *   /tmp/uarch_probe --limits
 *
 * prints only what the CRC-64/NVME folding limit needs, as "name value" lines (bench/cpu_limits.py
 * reads them): the core clock in GHz, the cycles per 64-bit crc32 and per VPCLMULQDQ for xmm,
 * ymm and, where the CPU and the OS run AVX-512, zmm; best of many 1-ms runs, so a shared machine's preemptions drop
 * out. No AVX-512 compiler flag is needed: the instructions are in inline assembly only. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define N 20000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double best_of(void (*f)(long), long n, int runs) {
    double best = 1e30;
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        f(n);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best / (double)n * 1e9;
}

static double best_ns_per_iter(void (*f)(long)) { return best_of(f, N, 5); }

/* four dependent adds per iteration: 4 cycles */
static void add_chain(long n) {
    long x = 0;
    __asm__ volatile("1: add $1,%0; add $1,%0; add $1,%0; add $1,%0; dec %1; jnz 1b"
                     : "+r"(x), "+r"(n));
}

#define CL(w, imm, dst) "vpclmulqdq $" #imm ", %%" #w "0, %%" #w "0, %%" #w #dst "\n"
#define CRC(r) "crc32q %%r8, %" #r "\n"
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "r8"
#define LOOP(body)                                                                               \
    long a = 0, b = 0, c = 0, d = 0;                                                             \
    __asm__ volatile("vpxor %%xmm0, %%xmm0, %%xmm0\n xor %%r8, %%r8\n 1:\n" body                 \
                     "dec %4\n jnz 1b\n"                                                         \
                     : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(n)                               \
                     :                                                                           \
                     : CLOBBER);                                                                 \
    (void)a; (void)b; (void)c; (void)d;

#define CL8(w) CL(w, 0, 1) CL(w, 0x11, 2) CL(w, 0, 3) CL(w, 0x11, 4) \
               CL(w, 0, 5) CL(w, 0x11, 6) CL(w, 0, 7) CL(w, 0x11, 8)
#define CRC4 CRC(0) CRC(1) CRC(2) CRC(3)

/* 8 independent multiplies per iteration */
static void clmul_zmm(long n) { LOOP(CL8(zmm)) }
static void clmul_ymm(long n) { LOOP(CL8(ymm)) }
static void clmul_xmm(long n) { LOOP(CL8(xmm)) }
/* 4 dependent ymm multiplies per iteration */
static void clmul_ymm_latency(long n) {
    LOOP(CL(ymm, 0, 0) CL(ymm, 0, 0) CL(ymm, 0, 0) CL(ymm, 0, 0))
}
/* 8 crc32 per iteration on 4 independent chains (latency 3, so 4 chains hide it) */
static void crc_8(long n) { LOOP(CRC4 CRC4) }
/* 8 ymm multiplies with 4, 8, 12, 16 crc32 */
static void mix_8_4(long n) { LOOP(CL8(ymm) CRC4) }
static void mix_8_8(long n) { LOOP(CL8(ymm) CRC4 CRC4) }
static void mix_8_12(long n) { LOOP(CL8(ymm) CRC4 CRC4 CRC4) }
static void mix_8_16(long n) { LOOP(CL8(ymm) CRC4 CRC4 CRC4 CRC4) }

/* The fused kernel's step as it really is: four ymm accumulators each folded (two multiplies,
 * two xors, one 32-byte load), optionally with crc32 over 8-byte loads from memory. */
static uint8_t buf[4096] __attribute__((aligned(64)));
#define FOLD(acc, off)                                                                           \
    "vpclmulqdq $0x00, %%ymm9, %%ymm" #acc ", %%ymm10\n"                                          \
    "vpclmulqdq $0x11, %%ymm9, %%ymm" #acc ", %%ymm" #acc "\n"                                     \
    "vpxor %%ymm10, %%ymm" #acc ", %%ymm" #acc "\n"                                                \
    "vpxor " #off "(%5), %%ymm" #acc ", %%ymm" #acc "\n"
#define MCRC(r, off) "crc32q " #off "(%5), %" #r "\n"
#define FOLD4 FOLD(1, 0) FOLD(2, 32) FOLD(3, 64) FOLD(4, 96)
#define MCRC15 MCRC(0, 128) MCRC(1, 168) MCRC(2, 208) MCRC(0, 136) MCRC(1, 176) MCRC(2, 216) \
               MCRC(0, 144) MCRC(1, 184) MCRC(2, 224) MCRC(0, 152) MCRC(1, 192) MCRC(2, 232) \
               MCRC(0, 160) MCRC(1, 200) MCRC(2, 240)
#define MLOOP(body)                                                                              \
    long a = 0, b = 0, c = 0, d = 0;                                                             \
    const uint8_t *p = buf;                                                                      \
    __asm__ volatile("vpxor %%xmm9, %%xmm9, %%xmm9\n 1:\n" body "dec %4\n jnz 1b\n"              \
                     : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(n)                               \
                     : "r"(p)                                                                    \
                     : "xmm1", "xmm2", "xmm3", "xmm4", "xmm9", "xmm10");                         \
    (void)a; (void)b; (void)c; (void)d;
static void fold_step(long n) { MLOOP(FOLD4) }
static void fused_step(long n) { MLOOP(FOLD4 MCRC15) }

/* "--limits": short runs, many of them; the clock is taken before and after and the faster kept */
static int limits(void) {
    const long n = 250000;
    const int runs = 41;
    double cycle = best_of(add_chain, n, runs) / 4;
    double xmm = best_of(clmul_xmm, n, runs) / 8, ymm = 0, zmm = 0;
    if (__builtin_cpu_supports("vpclmulqdq")) ymm = best_of(clmul_ymm, n, runs) / 8;
    if (__builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f"))
        zmm = best_of(clmul_zmm, n, runs) / 8;
    double crc = __builtin_cpu_supports("sse4.2") ? best_of(crc_8, n, runs) / 8 : 0;
    double again = best_of(add_chain, n, runs) / 4;
    if (again < cycle) cycle = again;
    printf("ghz %.3f\nxmm %.3f\n", 1 / cycle, xmm / cycle);
    if (crc > 0) printf("crc32 %.3f\n", crc / cycle);
    if (ymm > 0) printf("ymm %.3f\n", ymm / cycle);
    if (zmm > 0) printf("zmm %.3f\n", zmm / cycle);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--limits") == 0) return limits();
    double cycle = best_ns_per_iter(add_chain) / 4;
    printf("core clock while running: %.2f GHz\n", 1 / cycle);
    if (__builtin_cpu_supports("avx512f"))
        printf("vpclmulqdq zmm: %.2f cycles per instruction (throughput)\n",
               best_ns_per_iter(clmul_zmm) / cycle / 8);
    printf("vpclmulqdq ymm: %.2f cycles per instruction (throughput)\n",
           best_ns_per_iter(clmul_ymm) / cycle / 8);
    printf("vpclmulqdq xmm: %.2f cycles per instruction (throughput)\n",
           best_ns_per_iter(clmul_xmm) / cycle / 8);
    printf("vpclmulqdq ymm: %.2f cycles latency\n", best_ns_per_iter(clmul_ymm_latency) / cycle / 4);
    printf("crc32 r64: %.2f cycles per instruction (throughput)\n",
           best_ns_per_iter(crc_8) / cycle / 8);
    struct { const char *name; void (*f)(long); int crcs; } mixes[] = {
        {"8 vpclmulqdq ymm + 4 crc32", mix_8_4, 4},
        {"8 vpclmulqdq ymm + 8 crc32", mix_8_8, 8},
        {"8 vpclmulqdq ymm + 12 crc32", mix_8_12, 12},
        {"8 vpclmulqdq ymm + 16 crc32", mix_8_16, 16},
    };
    for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++) {
        double cyc = best_ns_per_iter(mixes[i].f) / cycle;
        /* a fused CRC step: 8 multiplies fold 128 bytes, each crc32 takes 8 */
        printf("%s: %.2f cycles -> %.1f bytes/cycle for a fused step\n", mixes[i].name, cyc,
               (128.0 + 8.0 * mixes[i].crcs) / cyc);
    }
    double f = best_ns_per_iter(fold_step) / cycle, g = best_ns_per_iter(fused_step) / cycle;
    printf("fold step (4 ymm accumulators, 128 bytes from L1): %.2f cycles -> %.1f bytes/cycle\n",
           f, 128.0 / f);
    printf("fused step (fold step + 15 crc32 from L1, 248 bytes): %.2f cycles -> %.1f bytes/cycle\n",
           g, 248.0 / g);
    return 0;
}
