/* crcmerkle.h - public C interface of the crcmerkle checksum core: CRC-32C, CRC-32 and
 * CRC-64/NVME with runtime CPU dispatch, bulk window/each entry points, and combine.
 *
 * Conventions (all functions):
 *  - `crc` arguments and results are the *external* zlib-style value: the pre/post inversion is
 *    applied inside, so crcm_crc32c(crcm_crc32c(0, a), b) == crcm_crc32c(0, a||b).
 *  - Lengths are size_t; (NULL, 0) is valid everywhere.
 *  - CRC-32C: Castagnoli, reflected polynomial 0x82F63B78. CRC-32: IEEE 802.3, reflected
 *    0xEDB88320, identical to zlib's crc32(). CRC-64/NVME: reflected 0x9A6C9329AC4BC9B5, init
 *    and xorout all ones (S3's x-amz-checksum-crc64nvme), check value of "123456789"
 *    0xAE8B14860A799888; its functions carry a 64 in their names and take uint64_t values.
 */
#ifndef CRCMERKLE_H
#define CRCMERKLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRCM_CRC64NVME is accepted only where an entry point says so (the 32-bit functions below
 * take CRCM_CRC32C or CRCM_CRC32). */
typedef enum { CRCM_CRC32C = 0, CRCM_CRC32 = 1, CRCM_CRC64NVME = 2 } crcm_algorithm;

/* One-shot / chained checksums. */
uint32_t crcm_crc32c(uint32_t crc, const uint8_t *data, size_t len);
uint32_t crcm_crc32(uint32_t crc, const uint8_t *data, size_t len);
uint32_t crcm_crc(crcm_algorithm alg, uint32_t crc, const uint8_t *data, size_t len);

/* crc(A||B) from crc(A), crc(B) and len(B), in O(log len2). */
uint32_t crcm_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);
uint32_t crcm_crc32_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);
uint32_t crcm_combine(crcm_algorithm alg, uint32_t crc1, uint32_t crc2, uint64_t len2);

/* Bulk combine: out[i] = combine(crc1[i], crc2[i], len2) for one fixed len2 (a constant is
 * precomputed once, so each element costs a multiply mod P). `out` may alias crc1 or crc2. */
void crcm_combine_fixed(crcm_algorithm alg, const uint32_t *crc1, const uint32_t *crc2,
                        uint64_t len2, size_t n, uint32_t *out);

/* Fold: the CRC of the concatenation of n pieces of `stride` bytes each, from their n CRCs
 * (0 for n == 0). The caller keeps n * stride below 2^64. */
uint32_t crcm_fold_fixed(crcm_algorithm alg, const uint32_t *crcs, size_t n, uint64_t stride);

/* Checksum every `bytes_per_checksum` window of data (the last may be short) into out, which
 * must hold crcm_window_count(len, bytes_per_checksum) values. Each window starts from crc 0.
 * bytes_per_checksum must be > 0. */
size_t crcm_window_count(size_t len, size_t bytes_per_checksum);
void crcm_windows(crcm_algorithm alg, const uint8_t *data, size_t len, size_t bytes_per_checksum,
                  uint32_t *out);

/* One checksum per value of an Arrow-style variable-length array: value i is
 * data[offsets[i] .. offsets[i+1]). offsets has n+1 entries (int32 for Binary, int64 for
 * LargeBinary). Returns 0, or -1 without writing anything if the offsets are not
 * non-decreasing within 0..data_len (a malformed array is refused, never read out of bounds). */
int crcm_each_offsets32(crcm_algorithm alg, const uint8_t *data, size_t data_len,
                        const int32_t *offsets, size_t n, uint32_t *out);
int crcm_each_offsets64(crcm_algorithm alg, const uint8_t *data, size_t data_len,
                        const int64_t *offsets, size_t n, uint32_t *out);
/* One checksum per (pointer, length) pair. */
void crcm_each_buffers(crcm_algorithm alg, const uint8_t *const *ptrs, const size_t *lens,
                       size_t n, uint32_t *out);

/* CRC-64/NVME: the same entry points with 64-bit values. */
uint64_t crcm_crc64nvme(uint64_t crc, const uint8_t *data, size_t len);
uint64_t crcm_crc64nvme_combine(uint64_t crc1, uint64_t crc2, uint64_t len2);
void crcm_combine_fixed64(const uint64_t *crc1, const uint64_t *crc2, uint64_t len2, size_t n,
                          uint64_t *out);
uint64_t crcm_fold_fixed64(const uint64_t *crcs, size_t n, uint64_t stride);
/* Per segment s (pieces bounds[s]..bounds[s+1]-1 of `be`, big-endian CRCs of `alg`'s width):
 * the CRC of the concatenation, every piece `stride` bytes but the last, last_len[s] bytes;
 * out is uint32_t[nseg] (uint64_t[nseg] for CRC-64/NVME). -1 for bounds not ascending. */
int crcm_fold_segments_be(crcm_algorithm alg, const uint8_t *be, const uint64_t *bounds,
                          const uint64_t *last_len, size_t nseg, uint64_t stride, void *out);
void crcm_windows64(const uint8_t *data, size_t len, size_t bytes_per_checksum, uint64_t *out);
int crcm_each64_offsets32(const uint8_t *data, size_t data_len, const int32_t *offsets, size_t n,
                          uint64_t *out);
int crcm_each64_offsets64(const uint8_t *data, size_t data_len, const int64_t *offsets, size_t n,
                          uint64_t *out);
void crcm_each64_buffers(const uint8_t *const *ptrs, const size_t *lens, size_t n,
                         uint64_t *out);

/* Two checksums of every window in one pass over data (each window read from memory once):
 * a and b are two different algorithms of the three; out_a / out_b are uint32_t* for the 32-bit
 * CRCs and uint64_t* for CRCM_CRC64NVME, each with crcm_window_count(len, bytes_per_checksum)
 * entries. Equal to crcm_windows/crcm_windows64 for each algorithm alone. Returns without
 * writing if a == b or either is unknown. */
void crcm_windows_pair(crcm_algorithm a, crcm_algorithm b, const uint8_t *data, size_t len,
                       size_t bytes_per_checksum, void *out_a, void *out_b);

/* Backends. Names: "avx512-vpclmulqdq", "avx2-vpclmulqdq", "pclmulqdq", "sse42",
 * "arm64-crc-pmull", "portable".
 * crcm_backend_name() is the one in use; the first call (of anything) picks the best one this
 * CPU supports. crcm_available_backends() writes up to `max` names, best first, and returns
 * how many this CPU supports. crcm_set_backend() returns 0 on success, -1 for an unknown
 * name, -2 for a backend this build or CPU cannot run. */
const char *crcm_backend_name(void);
size_t crcm_available_backends(const char **names, size_t max);
size_t crcm_compiled_backends(const char **names, size_t max);
int crcm_set_backend(const char *name);

/* The process's backend slot, and adopting another copy's slot (see crc_dispatch.c): call
 * crcm_dispatch_adopt once, before any other crcm_ call of this copy. */
void *crcm_dispatch_slot(void);
void crcm_dispatch_adopt(void *slot);

/* Benchmark support: xor of every 64-bit word of the buffer (a plain read at memory speed). */
uint64_t crcm_read_probe(const uint8_t *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* CRCMERKLE_H */
