/* read_probe.c - a plain read of a buffer (xor of all its 64-bit words), the physical limit that
 * checksumming cold memory is measured against in the benchmarks. */
#include "crc_internal.h"

uint64_t crcm_read_probe(const uint8_t *p, size_t n) {
    /* Eight independent accumulators: the loop is bound by loads, not by the xor chain, and
     * -O3 vectorises it. Prefetching ahead as the CRC kernels do keeps the comparison fair. */
    uint64_t acc[8] = {0};
    while (n >= 64) {
        __builtin_prefetch(p + 2048);
        for (int i = 0; i < 8; i++) acc[i] ^= crcm_load64(p + 8 * i);
        p += 64;
        n -= 64;
    }
    while (n--) acc[0] ^= *p++;
    return acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
}
