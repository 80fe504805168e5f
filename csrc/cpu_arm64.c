/* cpu_arm64.c - asks the OS whether this aarch64 CPU has the CRC32 and PMULL instructions; kept
 * apart from crc_arm64.c so it is compiled without +crc+crypto and is safe to run anywhere. */
#include "crc_internal.h"

#if defined(__linux__) || defined(__ANDROID__)
#include <sys/auxv.h>
#ifndef AT_HWCAP
#define AT_HWCAP 16
#endif
/* Linux arm64 uapi (arch/arm64/include/uapi/asm/hwcap.h); an old libc may not define them. */
#ifndef HWCAP_PMULL
#define HWCAP_PMULL (1UL << 4)
#endif
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1UL << 7)
#endif

int crcm_cpu_has_arm64_crc_pmull(void) {
    unsigned long hwcap = getauxval(AT_HWCAP);
    unsigned long need = (unsigned long)HWCAP_CRC32 | (unsigned long)HWCAP_PMULL;
    return (hwcap & need) == need;
}

#elif defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>

int crcm_cpu_has_arm64_crc_pmull(void) {
    int value = 0;
    size_t size = sizeof(value);
    if (sysctlbyname("hw.optional.armv8_crc32", &value, &size, NULL, 0) != 0) {
        return 0;
    }
    return value != 0; /* every Apple arm64 core has PMULL (FEAT_PMULL is part of its AES) */
}

#else
int crcm_cpu_has_arm64_crc_pmull(void) { return 0; } /* no known way to ask: stay portable */
#endif
