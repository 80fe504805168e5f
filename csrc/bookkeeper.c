/* bookkeeper.c - verify a batch of Apache BookKeeper stored entries in one call (see
 * bookkeeper.h). Each entry's payload is read once: its CRC-32C (and any extra payload CRCs) come
 * from one pass, and a CRC digest over header || payload is derived from the payload's CRC by
 * combine (crc(H||P) = crc(H) * x^(8|P|) + crc(P) mod P), not by a second pass. */
#include "bookkeeper.h"

#include "crc_internal.h"

/* Extra payload CRCs (CRC-32, or CRC-64/NVME without a fused kernel) are run over the payload in
 * chunks of this many bytes, right after the CRC-32C of the same chunk, so they read it from L1
 * (as crcm_windows_pair does). */
#define BK_CHUNK 16384

static inline uint64_t load_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

static inline uint32_t load_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

int crcm_bk_digest_size(crcm_bk_digest digest) {
    switch (digest) {
    case CRCM_BK_CRC32C: return 4;
    case CRCM_BK_CRC32: return 8;
    case CRCM_BK_HMAC_SHA1: return 20;
    case CRCM_BK_DUMMY: return 0;
    }
    return -1;
}

/* ---- x^(8n) mod P by table ------------------------------------------------------------------
 * crcm_combine finds x^(8n) mod P with one multiply per set bit of n and a loop over its bits:
 * at 1 KiB payloads that cost half as much as the payload's CRC. Here x^(8n) is the product of
 * one entry per byte of n (n < 2^24: at most two multiplies, none for a zero byte), from tables
 * built once per process. They are constants of the polynomial, so they are built with the
 * portable multiply whatever the backend, into memory published by compare-and-swap (a thread
 * that loses the race frees its copy). */
#include <stdlib.h>

#define POW_BYTES 3 /* n < 2^24 by table; longer payloads take crcm_combine */
typedef uint32_t pow_table[POW_BYTES][256];

static pow_table *pow_tables[2]; /* [CRCM_CRC32C], [CRCM_CRC32] */

static pow_table *build_pow(crcm_algorithm alg) {
    pow_table *t = malloc(sizeof(pow_table));
    if (t == NULL) return NULL;
    crcm_mulmod_fn mul =
        alg == CRCM_CRC32 ? crcm_portable_mulmod_crc32 : crcm_portable_mulmod_crc32c;
    for (int j = 0; j < POW_BYTES; j++) {
        uint32_t step = crcm_xnmodp(alg, (uint64_t)8 << (8 * j)); /* x^(8 * 256^j) */
        (*t)[j][0] = 0x80000000u;                                 /* x^0 */
        for (int b = 1; b < 256; b++) (*t)[j][b] = mul((*t)[j][b - 1], step);
    }
    return t;
}

/* The tables of alg, built on first use; NULL if memory ran out (the caller then combines). */
static const pow_table *pow_of(crcm_algorithm alg) {
    pow_table *t = __atomic_load_n(&pow_tables[alg], __ATOMIC_ACQUIRE);
    if (t != NULL) return t;
    pow_table *mine = build_pow(alg), *expected = NULL;
    if (mine == NULL) return NULL;
    if (__atomic_compare_exchange_n(&pow_tables[alg], &expected, mine, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return mine;
    free(mine);
    return expected;
}

/* crc(A || B) from crc(A), crc(B) and |B|: crc(A) * x^(8|B|) + crc(B) mod P. */
static inline uint32_t combine(crcm_algorithm alg, crcm_mulmod_fn mul, const pow_table *t,
                               uint32_t crc1, uint32_t crc2, size_t len2) {
    if (t == NULL || len2 >> (8 * POW_BYTES)) return crcm_combine(alg, crc1, crc2, len2);
    uint32_t c = crc1;
    for (int j = 0; j < POW_BYTES; j++) {
        unsigned b = (len2 >> (8 * j)) & 0xff;
        if (b) c = mul(c, (*t)[j][b]);
    }
    return c ^ crc2;
}

/* The CRCs of one payload (raw registers in, external values out). */
typedef struct {
    uint32_t crc32c, crc32;
    uint64_t crc64nvme;
} payload_crcs;

static payload_crcs payload_pass(const crcm_backend *be, const uint8_t *p, size_t len,
                                 int want32, int want64) {
    uint32_t r32c = 0xFFFFFFFFu, r32 = 0xFFFFFFFFu;
    uint64_t r64 = ~0ull;
    int fused = want64 && be->crc32c_crc64nvme != NULL;
    if (!want32 && !want64) {
        if (len) r32c = be->crc32c_stream(r32c, p, len);
    } else {
        for (size_t off = 0; off < len; off += BK_CHUNK) {
            size_t c = len - off < BK_CHUNK ? len - off : BK_CHUNK;
            const uint8_t *q = p + off;
            if (fused) {
                be->crc32c_crc64nvme(&r32c, &r64, q, c);
            } else {
                r32c = be->crc32c_stream(r32c, q, c);
                if (want64) r64 = be->crc64nvme(r64, q, c); /* the chunk is in L1 now */
            }
            if (want32) r32 = be->crc32(r32, q, c);
        }
    }
    payload_crcs out = {~r32c, ~r32, ~r64};
    return out;
}

/* Everything of entry i but its status is zero until proven otherwise. */
static void clear_entry(const crcm_bk_out *o, size_t i) {
    o->ledger_id[i] = o->entry_id[i] = o->last_add_confirmed[i] = o->length[i] = 0;
    o->stored_digest[i] = o->computed_digest[i] = 0;
    o->payload_crc32c[i] = 0;
    if (o->payload_crc32) o->payload_crc32[i] = 0;
    if (o->payload_crc64nvme) o->payload_crc64nvme[i] = 0;
}

/* What every entry of one call shares. */
typedef struct {
    const crcm_backend *be;
    crcm_bk_digest digest;
    int dn;                 /* digest bytes */
    crcm_mulmod_fn mul;     /* the digest CRC's multiply (CRC digests) */
    const pow_table *pow;   /* its x^(8n) tables (NULL: combine the slow way) */
} bk_call;

static uint8_t one_entry(const bk_call *k, const uint8_t *e, size_t size, const crcm_bk_out *o,
                         size_t i) {
    const crcm_backend *be = k->be;
    crcm_bk_digest digest = k->digest;
    int dn = k->dn;
    if (size >= CRCM_BK_HEADER) {
        o->ledger_id[i] = (int64_t)load_be64(e);
        o->entry_id[i] = (int64_t)load_be64(e + 8);
        o->last_add_confirmed[i] = (int64_t)load_be64(e + 16);
        o->length[i] = (int64_t)load_be64(e + 24);
    }
    if (size < (size_t)CRCM_BK_HEADER + (size_t)dn) return CRCM_BK_SHORT;
    const uint8_t *payload = e + CRCM_BK_HEADER + dn;
    size_t plen = size - CRCM_BK_HEADER - (size_t)dn;
    int want32 = digest == CRCM_BK_CRC32 || o->payload_crc32 != NULL;
    payload_crcs c = payload_pass(be, payload, plen, want32, o->payload_crc64nvme != NULL);
    o->payload_crc32c[i] = c.crc32c;
    if (o->payload_crc32) o->payload_crc32[i] = c.crc32;
    if (o->payload_crc64nvme) o->payload_crc64nvme[i] = c.crc64nvme;
    uint64_t stored, computed;
    switch (digest) {
    case CRCM_BK_CRC32C:
        stored = load_be32(e + CRCM_BK_HEADER);
        computed = combine(CRCM_CRC32C, k->mul, k->pow,
                           ~be->crc32c(0xFFFFFFFFu, e, CRCM_BK_HEADER), c.crc32c, plen);
        break;
    case CRCM_BK_CRC32:
        /* the whole 8-byte field: BookKeeper compares all of it, so non-zero upper bytes are a
         * mismatch */
        stored = load_be64(e + CRCM_BK_HEADER);
        computed = combine(CRCM_CRC32, k->mul, k->pow,
                           ~be->crc32(0xFFFFFFFFu, e, CRCM_BK_HEADER), c.crc32, plen);
        break;
    case CRCM_BK_HMAC_SHA1:
        return CRCM_BK_UNVERIFIED; /* keyed: the caller computes it (it has the password) */
    default:
        return CRCM_BK_OK; /* DUMMY: nothing to verify */
    }
    o->stored_digest[i] = stored;
    o->computed_digest[i] = computed;
    return stored == computed ? CRCM_BK_OK : CRCM_BK_MISMATCH;
}

int crcm_bk_entries(const uint8_t *data, size_t data_len, const int64_t *offsets,
                    const int64_t *sizes, size_t n, crcm_bk_digest digest, const crcm_bk_out *o) {
    int dn = crcm_bk_digest_size(digest);
    if (dn < 0) return -1;
    bk_call k = {crcm_backend_active(), digest, dn, NULL, NULL};
    if (digest == CRCM_BK_CRC32C || digest == CRCM_BK_CRC32) {
        crcm_algorithm alg = digest == CRCM_BK_CRC32 ? CRCM_CRC32 : CRCM_CRC32C;
        k.mul = alg == CRCM_CRC32 ? k.be->mulmod_crc32 : k.be->mulmod_crc32c;
        k.pow = pow_of(alg);
    }
    for (size_t i = 0; i < n; i++) {
        clear_entry(o, i);
        int64_t off = offsets[i], size = sizes[i];
        /* unsigned compares after the sign checks: no sum that can wrap */
        if (off < 0 || size < 0 || (uint64_t)off > data_len ||
            (uint64_t)size > data_len - (uint64_t)off) {
            o->status[i] = CRCM_BK_BOUNDS;
            continue;
        }
        o->status[i] = one_entry(&k, data + off, (size_t)size, o, i);
    }
    return dn;
}
