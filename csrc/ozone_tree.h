/* ozone_tree.h - columnar Apache Ozone container Merkle trees (chunk -> block -> container,
 * CRC-32C at every level): bulk values, stable chunk ordering, the ContainerChecksumInfo proto2
 * wire format and the one-sided diff, all on flat arrays with no per-chunk allocation.
 *
 * Layout shared by every function: blocks sorted by ID, block i owns chunks
 * [chunk_start[i], chunk_start[i+1]) (chunk_start has n_blocks+1 entries, chunk_start[0] = 0),
 * chunks of a block sorted by offset. Values are the unsigned 32-bit tree values carried in
 * int64, as in Ozone's protos. Lengths and counts are size_t; booleans are uint8_t 0/1.
 */
#ifndef CRCM_OZONE_TREE_H
#define CRCM_OZONE_TREE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Leaf values from uint32 window checksums: chunk i owns windows[starts[i] .. starts[i+1]),
 * each hashed as 4 big-endian bytes. starts has n_chunks+1 non-decreasing entries. */
void ozt_leaves_u32(const uint32_t *windows, const int64_t *starts, size_t n_chunks,
                    int64_t *out);
/* Leaf values from raw stored window bytes: chunk i owns bytes[starts[i] .. starts[i+1]). */
void ozt_leaves_bytes(const uint8_t *bytes, const int64_t *starts, size_t n_chunks,
                      int64_t *out);

/* Block value i = CRC32C(BE64(block_ids[i]) || BE64(leaf) for each of its chunks). */
void ozt_block_values(const int64_t *block_ids, const int64_t *chunk_start, size_t n_blocks,
                      const int64_t *leaves, int64_t *out);
/* Container value = CRC32C(BE64(v) for each block value, in block order); 0 for none. */
int64_t ozt_container_value(const int64_t *block_values, size_t n_blocks);

/* Order chunk rows by (block, offset), stably, keeping only the last row of each equal
 * (block, offset) run (Ozone keeps chunks in a map keyed by offset: the later one replaces).
 * Returns 0 if the rows already are strictly increasing (perm and *n_out untouched), 1 if
 * perm[0 .. *n_out) now holds the kept row indices in order, -1 if out of memory. */
int ozt_sort_chunks(const int64_t *block, const int64_t *offset, size_t n, int64_t *perm,
                    size_t *n_out);
/* Same for block rows keyed by ID only (stable, last of each run kept). */
int ozt_sort_blocks(const int64_t *ids, size_t n, int64_t *perm, size_t *n_out);
/* Whether a column is non-decreasing (1) or not (0). */
int ozt_is_sorted(const int64_t *v, size_t n);

/* Run-length groups of a sorted chunk->block column: writes the distinct IDs to ids_out and
 * the CSR starts (n_groups+1 entries) to starts_out; returns n_groups. */
size_t ozt_group(const int64_t *chunk_block, size_t n, int64_t *ids_out, int64_t *starts_out);

/* ---- ContainerChecksumInfo proto2 wire format ---------------------------------------------
 * Written as Java protobuf writes Ozone's messages: fields in field-number order, int64 as
 * varint (negative = 10 bytes), bool as one varint byte, repeated messages not packed.
 * Presence masks (bit 0 blockID, bit 1 dataChecksum, bit 2 deleted for blocks; bit 0 offset,
 * bit 1 length, bit 2 dataChecksum, bit 3 checksumMatches for chunks): a NULL mask array means
 * what Ozone writes: every field, a block's `deleted` included when false (bytes 20 00).
 * `tail` (tail_len bytes) is written verbatim after field 2: the unknown top-level fields of
 * the file the tree was read from, which Ozone keeps on every rewrite (protobuf-java writes a
 * message's unknown fields after its known ones). */
#define OZT_BLOCK_ID 1u
#define OZT_BLOCK_VALUE 2u
#define OZT_BLOCK_DELETED 4u
#define OZT_CHUNK_OFFSET 1u
#define OZT_CHUNK_LENGTH 2u
#define OZT_CHUNK_VALUE 4u
#define OZT_CHUNK_MATCHES 8u
typedef struct {
    int has_container_id, has_tree, has_data_checksum;
    int64_t container_id, data_checksum;
    size_t n_blocks, n_chunks;
    const int64_t *block_id, *block_value, *chunk_start;
    const uint8_t *block_deleted, *block_present;
    const int64_t *chunk_offset, *chunk_length, *chunk_value;
    const uint8_t *chunk_matches, *chunk_present;
    const uint8_t *tail;
    size_t tail_len;
} ozt_tree_view;

/* Exact encoded size; block_sizes (n_blocks entries) receives each BlockMerkleTree's size. */
size_t ozt_encoded_size(const ozt_tree_view *t, uint64_t *block_sizes);
/* Writes exactly ozt_encoded_size() bytes to out (block_sizes from that call). */
void ozt_encode(const ozt_tree_view *t, const uint64_t *block_sizes, uint8_t *out);

typedef struct {
    int has_container_id, has_tree, has_data_checksum;
    int64_t container_id, data_checksum;
    size_t n_blocks, n_chunks;
    /* Fields missing from a message read as 0; the *_present masks record which were there
     * (same bits as for ozt_tree_view). */
    int64_t *block_id, *block_value, *chunk_start;
    uint8_t *block_deleted, *block_present;
    int64_t *chunk_offset, *chunk_length, *chunk_value;
    uint8_t *chunk_matches, *chunk_present;
    size_t unknown_fields; /* skipped fields of unknown number */
    /* The unknown top-level fields, raw and in order (tag included), copied to `tail`, which
     * must hold the tail_len that ozt_decode_count reported (NULL when it is 0). */
    uint8_t *tail;
    size_t tail_len;
} ozt_tree_out;

typedef struct {
    size_t offset;    /* byte offset of the problem */
    const char *what; /* static description */
} ozt_error;

/* Pass 1: validate the framing and count blocks, chunks and the bytes of unknown top-level
 * fields. 0 on success, -1 on error. */
int ozt_decode_count(const uint8_t *buf, size_t len, size_t *n_blocks, size_t *n_chunks,
                     size_t *tail_len, ozt_error *err);
/* Pass 2: fill out (arrays sized from pass 1; chunk_start n_blocks+1). 0 or -1. */
int ozt_decode(const uint8_t *buf, size_t len, ozt_tree_out *out, ozt_error *err);

/* ---- One-sided diff (what must `ours` pull from `peer`) -----------------------------------
 * Ozone's rules (ContainerChecksumTreeManager): a block present on both sides is examined only
 * when the two block values differ; n_unhealthy_filtered counts the peer chunks not pulled
 * because the peer holds them unhealthy (only in the peer, or at an offset where ours is
 * unhealthy too). The container-level checks (IDs, equal values) are the caller's.
 * Both trees sorted. Output indices refer to the peer's rows except *_ours. Each output array
 * must hold as many entries as the peer has blocks (block outputs) or chunks (chunk outputs). */
typedef struct {
    size_t n_blocks, n_chunks;
    const int64_t *block_id, *block_value, *chunk_start;
    const uint8_t *block_deleted;
    const int64_t *chunk_offset, *chunk_value;
    const uint8_t *chunk_matches;
} ozt_diff_side;

typedef struct {
    int64_t *missing_blocks;          /* peer block rows: live, absent from ours */
    int64_t *deleted_blocks;          /* peer block rows: tombstones to adopt */
    int64_t *missing_chunks;          /* peer chunk rows: healthy, absent from ours */
    int64_t *corrupt_chunks;          /* peer chunk rows: healthy, ours unhealthy, differ */
    int64_t *corrupt_chunks_ours;     /* our chunk row of each corrupt chunk */
    int64_t *unrecoverable_chunks;    /* peer chunk rows: both healthy, values differ */
    int64_t *unrecoverable_chunks_ours;
    size_t n_missing_blocks, n_deleted_blocks, n_missing_chunks, n_corrupt_chunks,
        n_unrecoverable_chunks, n_unhealthy_filtered;
} ozt_diff_out;

void ozt_diff(const ozt_diff_side *ours, const ozt_diff_side *peer, ozt_diff_out *out);

#ifdef __cplusplus
}
#endif
#endif /* CRCM_OZONE_TREE_H */
