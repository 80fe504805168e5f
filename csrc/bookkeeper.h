/* bookkeeper.h - Apache BookKeeper stored entries, verified in bulk (see /work/shared docs:
 * BOOKKEEPER.md sections 4 and 6). A stored entry is, all big-endian:
 *
 *     ledgerId(8) entryId(8) lastAddConfirmed(8) length(8) digest(n) payload
 *
 * and its digest covers header(32) || payload (not the digest bytes). n by digest type:
 * CRC32C 4 (the CRC-32C as an int), CRC32 8 (4 zero bytes, then zlib's CRC-32), HMAC-SHA1 20,
 * DUMMY 0. */
#ifndef CRCM_BOOKKEEPER_H
#define CRCM_BOOKKEEPER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CRCM_BK_CRC32C = 0,
    CRCM_BK_CRC32 = 1,
    CRCM_BK_HMAC_SHA1 = 2,
    CRCM_BK_DUMMY = 3
} crcm_bk_digest;

/* per-entry status */
enum {
    CRCM_BK_OK = 0,         /* digest verified */
    CRCM_BK_SHORT = 1,      /* fewer than 32 + n bytes: no room for the header and digest */
    CRCM_BK_BOUNDS = 2,     /* offset/size negative or outside the buffer: nothing read */
    CRCM_BK_MISMATCH = 3,   /* stored digest != computed */
    CRCM_BK_UNVERIFIED = 4  /* HMAC-SHA1: framing fine, digest left to the caller */
};

#define CRCM_BK_HEADER 32

/* Output columns, one value per entry; the payload_* columns may be NULL (not wanted).
 * payload_crc32c is required. Header fields are filled whenever the entry lies in the buffer
 * and has at least 32 bytes (0 otherwise); stored/computed are 0 unless the digest is a CRC and
 * the entry is long enough for it. */
typedef struct {
    uint8_t *status;
    int64_t *ledger_id, *entry_id, *last_add_confirmed, *length;
    uint64_t *stored_digest, *computed_digest;
    uint32_t *payload_crc32c;
    uint32_t *payload_crc32;     /* optional */
    uint64_t *payload_crc64nvme; /* optional */
} crcm_bk_out;

/* Entry i is data[offsets[i] .. offsets[i] + sizes[i]) (after its 4-byte size word). Offsets
 * and sizes are checked against data_len before any byte is read: negative, past the end or
 * overflowing ones give CRCM_BK_BOUNDS. Returns the digest size n, or -1 for an unknown
 * digest (nothing written). */
int crcm_bk_entries(const uint8_t *data, size_t data_len, const int64_t *offsets,
                    const int64_t *sizes, size_t n, crcm_bk_digest digest, const crcm_bk_out *out);

/* The digest size n of a digest type (-1 for an unknown one). */
int crcm_bk_digest_size(crcm_bk_digest digest);

#ifdef __cplusplus
}
#endif
#endif /* CRCM_BOOKKEEPER_H */
