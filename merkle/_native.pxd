# Declarations of the C core (csrc/crcmerkle.h) for the Cython layer.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t

cdef extern from "crcmerkle.h" nogil:
    ctypedef enum crcm_algorithm:
        CRCM_CRC32C
        CRCM_CRC32
        CRCM_CRC64NVME

    uint32_t crcm_crc(crcm_algorithm alg, uint32_t crc, const uint8_t *data, size_t len)
    uint32_t crcm_combine(crcm_algorithm alg, uint32_t crc1, uint32_t crc2, uint64_t len2)
    void crcm_combine_fixed(crcm_algorithm alg, const uint32_t *crc1, const uint32_t *crc2,
                            uint64_t len2, size_t n, uint32_t *out)
    uint32_t crcm_fold_fixed(crcm_algorithm alg, const uint32_t *crcs, size_t n, uint64_t stride)
    uint64_t crcm_fold_fixed64(const uint64_t *crcs, size_t n, uint64_t stride)
    int crcm_fold_segments_be(crcm_algorithm alg, const uint8_t *be, const uint64_t *bounds,
                              const uint64_t *last_len, size_t nseg, uint64_t stride, void *out)
    size_t crcm_window_count(size_t len, size_t bytes_per_checksum)
    void crcm_windows(crcm_algorithm alg, const uint8_t *data, size_t len,
                      size_t bytes_per_checksum, uint32_t *out)
    int crcm_each_offsets32(crcm_algorithm alg, const uint8_t *data, size_t data_len,
                            const int32_t *offsets, size_t n, uint32_t *out)
    int crcm_each_offsets64(crcm_algorithm alg, const uint8_t *data, size_t data_len,
                            const int64_t *offsets, size_t n, uint32_t *out)
    void crcm_each_buffers(crcm_algorithm alg, const uint8_t *const *ptrs, const size_t *lens,
                           size_t n, uint32_t *out)
    uint64_t crcm_crc64nvme(uint64_t crc, const uint8_t *data, size_t len)
    uint64_t crcm_crc64nvme_combine(uint64_t crc1, uint64_t crc2, uint64_t len2)
    void crcm_combine_fixed64(const uint64_t *crc1, const uint64_t *crc2, uint64_t len2, size_t n,
                              uint64_t *out)
    void crcm_windows64(const uint8_t *data, size_t len, size_t bytes_per_checksum, uint64_t *out)
    int crcm_each64_offsets32(const uint8_t *data, size_t data_len, const int32_t *offsets,
                              size_t n, uint64_t *out)
    int crcm_each64_offsets64(const uint8_t *data, size_t data_len, const int64_t *offsets,
                              size_t n, uint64_t *out)
    void crcm_each64_buffers(const uint8_t *const *ptrs, const size_t *lens, size_t n,
                             uint64_t *out)
    void crcm_windows_pair(crcm_algorithm a, crcm_algorithm b, const uint8_t *data, size_t len,
                           size_t bytes_per_checksum, void *out_a, void *out_b)
    const char *crcm_backend_name()
    size_t crcm_available_backends(const char **names, size_t max)
    size_t crcm_compiled_backends(const char **names, size_t max)
    int crcm_set_backend(const char *name)
    void *crcm_dispatch_slot()
    void crcm_dispatch_adopt(void *slot)
    uint64_t crcm_read_probe(const uint8_t *data, size_t len)
