/* ozone_tree.c - bulk Ozone container-tree computations on columns (values, ordering, proto2
 * wire format, diff), so that trees of millions of chunks never become Python objects. */
#include "ozone_tree.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crcmerkle.h"

/* ---- values ------------------------------------------------------------------------------ */

static inline void store_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void store_be64(uint8_t *p, uint64_t v) {
    store_be32(p, (uint32_t)(v >> 32));
    store_be32(p + 4, (uint32_t)v);
}

#define BATCH 1024 /* values converted to big-endian per CRC call */

void ozt_leaves_u32(const uint32_t *windows, const int64_t *starts, size_t n_chunks,
                    int64_t *out) {
    uint8_t buf[BATCH * 4];
    for (size_t i = 0; i < n_chunks; i++) {
        size_t pos = (size_t)starts[i], end = (size_t)starts[i + 1];
        uint32_t crc = 0;
        while (pos < end) {
            size_t k = end - pos < BATCH ? end - pos : BATCH;
            for (size_t j = 0; j < k; j++) {
                uint32_t w;
                memcpy(&w, windows + pos + j, sizeof w);
                store_be32(buf + 4 * j, w);
            }
            crc = crcm_crc32c(crc, buf, 4 * k);
            pos += k;
        }
        out[i] = (int64_t)crc;
    }
}

void ozt_leaves_bytes(const uint8_t *bytes, const int64_t *starts, size_t n_chunks,
                      int64_t *out) {
    for (size_t i = 0; i < n_chunks; i++) {
        size_t a = (size_t)starts[i], b = (size_t)starts[i + 1];
        out[i] = (int64_t)crcm_crc32c(0, b > a ? bytes + a : NULL, b > a ? b - a : 0);
    }
}

void ozt_block_values(const int64_t *block_ids, const int64_t *chunk_start, size_t n_blocks,
                      const int64_t *leaves, int64_t *out) {
    uint8_t buf[BATCH * 8];
    for (size_t i = 0; i < n_blocks; i++) {
        size_t pos = (size_t)chunk_start[i], end = (size_t)chunk_start[i + 1];
        store_be64(buf, (uint64_t)block_ids[i]);
        size_t fill = 1;
        uint32_t crc = 0;
        for (;;) {
            while (pos < end && fill < BATCH) store_be64(buf + 8 * fill++, (uint64_t)leaves[pos++]);
            crc = crcm_crc32c(crc, buf, 8 * fill);
            fill = 0;
            if (pos >= end) break;
        }
        out[i] = (int64_t)crc;
    }
}

int64_t ozt_container_value(const int64_t *block_values, size_t n_blocks) {
    uint8_t buf[BATCH * 8];
    uint32_t crc = 0;
    size_t pos = 0;
    while (pos < n_blocks) {
        size_t k = n_blocks - pos < BATCH ? n_blocks - pos : BATCH;
        for (size_t j = 0; j < k; j++) store_be64(buf + 8 * j, (uint64_t)block_values[pos + j]);
        crc = crcm_crc32c(crc, buf, 8 * k);
        pos += k;
    }
    return (int64_t)crc;
}

/* ---- ordering ---------------------------------------------------------------------------- */

int ozt_is_sorted(const int64_t *v, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (v[i] < v[i - 1]) return 0;
    return 1;
}

/* (a1, b1) < (a2, b2); b may be NULL (single key). */
static inline int key_less(const int64_t *a, const int64_t *b, int64_t x, int64_t y) {
    if (a[x] != a[y]) return a[x] < a[y];
    return b != NULL && b[x] < b[y];
}

typedef struct {
    int64_t a, b, row;
} sort_item;

static inline int item_less(const sort_item *x, const sort_item *y) {
    return x->a < y->a || (x->a == y->a && x->b < y->b);
}

static int sort_rows(const int64_t *a, const int64_t *b, size_t n, int64_t *perm,
                     size_t *n_out) {
    int strictly = 1;
    for (size_t i = 1; i < n && strictly; i++)
        if (!key_less(a, b, (int64_t)(i - 1), (int64_t)i)) strictly = 0;
    if (strictly) return 0;
    if (n > SIZE_MAX / (2 * sizeof(sort_item))) return -1;
    /* Bottom-up merge sort of (key, row) records: stable, O(n log n), sequential memory
     * access (no indirection through the key columns), runs already in order copied. */
    sort_item *buf = (sort_item *)malloc(2 * n * sizeof *buf);
    if (buf == NULL) return -1;
    sort_item *src = buf, *dst = buf + n;
    for (size_t i = 0; i < n; i++) {
        src[i].a = a[i];
        src[i].b = b != NULL ? b[i] : 0;
        src[i].row = (int64_t)i;
    }
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            if (mid >= hi || !item_less(&src[mid], &src[mid - 1])) {
                memcpy(dst + lo, src + lo, (hi - lo) * sizeof *dst);
                continue;
            }
            while (i < mid && j < hi) dst[k++] = item_less(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        sort_item *t = src;
        src = dst;
        dst = t;
    }
    /* Keep the last row of each run of equal keys (stable order: the last one given). */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && src[i].a == src[i + 1].a && src[i].b == src[i + 1].b) continue;
        perm[m++] = src[i].row;
    }
    free(buf);
    *n_out = m;
    return 1;
}

int ozt_sort_chunks(const int64_t *block, const int64_t *offset, size_t n, int64_t *perm,
                    size_t *n_out) {
    return sort_rows(block, offset, n, perm, n_out);
}

int ozt_sort_blocks(const int64_t *ids, size_t n, int64_t *perm, size_t *n_out) {
    return sort_rows(ids, NULL, n, perm, n_out);
}

size_t ozt_group(const int64_t *chunk_block, size_t n, int64_t *ids_out, int64_t *starts_out) {
    size_t g = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || chunk_block[i] != chunk_block[i - 1]) {
            ids_out[g] = chunk_block[i];
            starts_out[g++] = (int64_t)i;
        }
    }
    starts_out[g] = (int64_t)n;
    return g;
}

/* ---- proto2 encoding --------------------------------------------------------------------- */

static inline size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline unsigned block_mask(const ozt_tree_view *t, size_t i) {
    if (t->block_present != NULL) return t->block_present[i];
    return OZT_BLOCK_ID | OZT_BLOCK_VALUE | OZT_BLOCK_DELETED;
}

static inline unsigned chunk_mask(const ozt_tree_view *t, size_t j) {
    if (t->chunk_present != NULL) return t->chunk_present[j];
    return OZT_CHUNK_OFFSET | OZT_CHUNK_LENGTH | OZT_CHUNK_VALUE | OZT_CHUNK_MATCHES;
}

static inline size_t chunk_size(const ozt_tree_view *t, size_t j) {
    unsigned m = chunk_mask(t, j);
    size_t s = 0;
    if (m & OZT_CHUNK_OFFSET) s += 1 + varint_size((uint64_t)t->chunk_offset[j]);
    if (m & OZT_CHUNK_LENGTH) s += 1 + varint_size((uint64_t)t->chunk_length[j]);
    if (m & OZT_CHUNK_VALUE) s += 1 + varint_size((uint64_t)t->chunk_value[j]);
    if (m & OZT_CHUNK_MATCHES) s += 2;
    return s;
}

static size_t tree_size(const ozt_tree_view *t, uint64_t *block_sizes) {
    size_t total = t->has_data_checksum ? 1 + varint_size((uint64_t)t->data_checksum) : 0;
    for (size_t i = 0; i < t->n_blocks; i++) {
        unsigned m = block_mask(t, i);
        size_t s = 0;
        if (m & OZT_BLOCK_ID) s += 1 + varint_size((uint64_t)t->block_id[i]);
        if (m & OZT_BLOCK_VALUE) s += 1 + varint_size((uint64_t)t->block_value[i]);
        for (size_t j = (size_t)t->chunk_start[i]; j < (size_t)t->chunk_start[i + 1]; j++) {
            size_t c = chunk_size(t, j);
            s += 1 + varint_size(c) + c;
        }
        if (m & OZT_BLOCK_DELETED) s += 2;
        block_sizes[i] = s;
        total += 1 + varint_size(s) + s;
    }
    return total;
}


size_t ozt_encoded_size(const ozt_tree_view *t, uint64_t *block_sizes) {
    size_t total = t->has_container_id ? 1 + varint_size((uint64_t)t->container_id) : 0;
    if (t->has_tree) {
        size_t s = tree_size(t, block_sizes);
        total += 1 + varint_size(s) + s;
    }
    return total + t->tail_len;
}

void ozt_encode(const ozt_tree_view *t, const uint64_t *block_sizes, uint8_t *out) {
    uint8_t *p = out;
    if (t->has_container_id) {
        *p++ = 0x08;
        p = put_varint(p, (uint64_t)t->container_id);
    }
    if (!t->has_tree) {
        if (t->tail_len) memcpy(p, t->tail, t->tail_len);
        return;
    }
    size_t s = t->has_data_checksum ? 1 + varint_size((uint64_t)t->data_checksum) : 0;
    for (size_t i = 0; i < t->n_blocks; i++) s += 1 + varint_size(block_sizes[i]) + block_sizes[i];
    *p++ = 0x12;
    p = put_varint(p, s);
    if (t->has_data_checksum) {
        *p++ = 0x08;
        p = put_varint(p, (uint64_t)t->data_checksum);
    }
    for (size_t i = 0; i < t->n_blocks; i++) {
        unsigned m = block_mask(t, i);
        *p++ = 0x12;
        p = put_varint(p, block_sizes[i]);
        if (m & OZT_BLOCK_ID) {
            *p++ = 0x08;
            p = put_varint(p, (uint64_t)t->block_id[i]);
        }
        if (m & OZT_BLOCK_VALUE) {
            *p++ = 0x10;
            p = put_varint(p, (uint64_t)t->block_value[i]);
        }
        for (size_t j = (size_t)t->chunk_start[i]; j < (size_t)t->chunk_start[i + 1]; j++) {
            unsigned cm = chunk_mask(t, j);
            /* A chunk message is at most 35 bytes (three 10-byte varints with their tags,
             * and the bool), so its length is one varint byte: written after the fields
             * instead of sizing the chunk a second time (tree_size already did). */
            *p++ = 0x1a;
            uint8_t *len_at = p++;
            if (cm & OZT_CHUNK_OFFSET) {
                *p++ = 0x08;
                p = put_varint(p, (uint64_t)t->chunk_offset[j]);
            }
            if (cm & OZT_CHUNK_LENGTH) {
                *p++ = 0x10;
                p = put_varint(p, (uint64_t)t->chunk_length[j]);
            }
            if (cm & OZT_CHUNK_VALUE) {
                *p++ = 0x18;
                p = put_varint(p, (uint64_t)t->chunk_value[j]);
            }
            if (cm & OZT_CHUNK_MATCHES) {
                *p++ = 0x20;
                *p++ = t->chunk_matches[j] ? 1 : 0;
            }
            *len_at = (uint8_t)(p - len_at - 1);
        }
        if (m & OZT_BLOCK_DELETED) {
            *p++ = 0x20;
            *p++ = t->block_deleted[i] ? 1 : 0;
        }
    }
    if (t->tail_len) memcpy(p, t->tail, t->tail_len);
}

/* ---- proto2 decoding --------------------------------------------------------------------- */

typedef struct {
    const uint8_t *base, *p, *end;
    ozt_error *err;
} cursor;

static int fail(cursor *c, const uint8_t *at, const char *what) {
    c->err->offset = (size_t)(at - c->base);
    c->err->what = what;
    return -1;
}

static inline int get_varint(cursor *c, uint64_t *v) {
    const uint8_t *p = c->p;
    if (p < c->end && *p < 0x80) {
        *v = *p;
        c->p = p + 1;
        return 0;
    }
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (p >= c->end) return fail(c, c->p, "truncated varint");
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (b < 0x80) {
            *v = r;
            c->p = p;
            return 0;
        }
    }
    return fail(c, c->p, "varint longer than 10 bytes");
}

/* Reads a tag; rejects field number 0 and group wire types. */
static inline int get_tag(cursor *c, uint32_t *field, uint32_t *wire) {
    const uint8_t *at = c->p;
    uint64_t tag;
    if (get_varint(c, &tag)) return -1;
    if (tag > 0xFFFFFFFFu) return fail(c, at, "tag out of range");
    *field = (uint32_t)(tag >> 3);
    *wire = (uint32_t)(tag & 7);
    if (*field == 0) return fail(c, at, "field number 0");
    if (*wire == 3 || *wire == 4) return fail(c, at, "group wire type (not used by these messages)");
    if (*wire > 5) return fail(c, at, "invalid wire type");
    return 0;
}

/* Opens a length-delimited field: returns the end of its payload. */
static inline int get_len(cursor *c, const uint8_t **sub_end) {
    const uint8_t *at = c->p;
    uint64_t n;
    if (get_varint(c, &n)) return -1;
    if (n > (uint64_t)(c->end - c->p)) return fail(c, at, "length-delimited field runs past the end of its message");
    *sub_end = c->p + n;
    return 0;
}

static int skip_field(cursor *c, uint32_t wire) {
    const uint8_t *at = c->p, *e;
    uint64_t v;
    switch (wire) {
    case 0:
        return get_varint(c, &v);
    case 1:
        if (c->end - c->p < 8) return fail(c, at, "truncated fixed64 field");
        c->p += 8;
        return 0;
    case 5:
        if (c->end - c->p < 4) return fail(c, at, "truncated fixed32 field");
        c->p += 4;
        return 0;
    case 2:
        if (get_len(c, &e)) return -1;
        c->p = e;
        return 0;
    default:
        return fail(c, at, "invalid wire type");
    }
}

static int expect_wire(cursor *c, const uint8_t *at, uint32_t wire, uint32_t want,
                       const char *what) {
    return wire == want ? 0 : fail(c, at, what);
}

typedef struct {
    ozt_tree_out *out; /* NULL: count only */
    size_t n_blocks, n_chunks, unknown, tail_len;
} decoder;

/* A varint entirely before end; -1 (no error recorded) otherwise or if longer than 10. */
static inline int quick_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 70 && p < end; shift += 7) {
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *v = r;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

/* The exact layout Ozone writes (08 offset 10 length 18 value 20 0|1, nothing else): parsed
 * straight through. Anything else returns 0 and takes the general path, which gives the same
 * result for valid input and reports errors. */
static inline int quick_chunk(const uint8_t *p, const uint8_t *end, ozt_tree_out *o, size_t j) {
    uint64_t off, len, val;
    if (end - p < 8 || *p++ != 0x08 || quick_varint(&p, end, &off)) return 0;
    if (p >= end || *p++ != 0x10 || quick_varint(&p, end, &len)) return 0;
    if (p >= end || *p++ != 0x18 || quick_varint(&p, end, &val)) return 0;
    if (end - p != 2 || p[0] != 0x20 || p[1] > 1) return 0;
    o->chunk_offset[j] = (int64_t)off;
    o->chunk_length[j] = (int64_t)len;
    o->chunk_value[j] = (int64_t)val;
    o->chunk_matches[j] = p[1];
    o->chunk_present[j] = OZT_CHUNK_OFFSET | OZT_CHUNK_LENGTH | OZT_CHUNK_VALUE | OZT_CHUNK_MATCHES;
    return 1;
}

static int decode_chunk(decoder *d, cursor *c, const uint8_t *end) {
    ozt_tree_out *o = d->out;
    size_t j = d->n_chunks++;
    if (o != NULL && j >= o->n_chunks) return fail(c, c->p, "more chunks than counted");
    if (o == NULL || quick_chunk(c->p, end, o, j)) {
        c->p = end;
        return 0;
    }
    const uint8_t *saved_end = c->end;
    c->end = end;
    int64_t fields[3] = {0, 0, 0};
    uint8_t mask = 0, matches = 0;
    while (c->p < end) {
        const uint8_t *at = c->p;
        uint32_t f, w;
        uint64_t v;
        if (get_tag(c, &f, &w)) return -1;
        if (f >= 1 && f <= 4) {
            if (expect_wire(c, at, w, 0, "ChunkMerkleTree field has the wrong wire type")) return -1;
            if (get_varint(c, &v)) return -1;
            if (f == 4) {
                matches = v != 0;
                mask |= OZT_CHUNK_MATCHES;
            } else {
                fields[f - 1] = (int64_t)v;
                mask |= (uint8_t)(1u << (f - 1));
            }
        } else {
            d->unknown++;
            if (skip_field(c, w)) return -1;
        }
    }
    c->end = saved_end;
    o->chunk_offset[j] = fields[0];
    o->chunk_length[j] = fields[1];
    o->chunk_value[j] = fields[2];
    o->chunk_matches[j] = matches;
    o->chunk_present[j] = mask;
    return 0;
}

static int decode_block(decoder *d, cursor *c, const uint8_t *end) {
    ozt_tree_out *o = d->out;
    size_t i = d->n_blocks++;
    if (o != NULL && i >= o->n_blocks) return fail(c, c->p, "more blocks than counted");
    const uint8_t *saved_end = c->end;
    c->end = end;
    int64_t id = 0, value = 0;
    uint8_t mask = 0, deleted = 0;
    if (o != NULL) o->chunk_start[i] = (int64_t)d->n_chunks;
    while (c->p < end) {
        const uint8_t *at = c->p, *e;
        uint32_t f, w;
        uint64_t v;
        if (get_tag(c, &f, &w)) return -1;
        if (f == 3) {
            if (expect_wire(c, at, w, 2, "BlockMerkleTree.chunkMerkleTree is not length-delimited")) return -1;
            if (get_len(c, &e) || decode_chunk(d, c, e)) return -1;
        } else if (f == 1 || f == 2 || f == 4) {
            if (expect_wire(c, at, w, 0, "BlockMerkleTree field has the wrong wire type")) return -1;
            if (get_varint(c, &v)) return -1;
            if (f == 1) {
                id = (int64_t)v;
                mask |= OZT_BLOCK_ID;
            } else if (f == 2) {
                value = (int64_t)v;
                mask |= OZT_BLOCK_VALUE;
            } else {
                deleted = v != 0;
                mask |= OZT_BLOCK_DELETED;
            }
        } else {
            d->unknown++;
            if (skip_field(c, w)) return -1;
        }
    }
    c->end = saved_end;
    if (o != NULL) {
        o->block_id[i] = id;
        o->block_value[i] = value;
        o->block_deleted[i] = deleted;
        o->block_present[i] = mask;
    }
    return 0;
}

static int decode_tree(decoder *d, cursor *c, const uint8_t *end) {
    ozt_tree_out *o = d->out;
    const uint8_t *saved_end = c->end;
    c->end = end;
    if (o != NULL) o->has_tree = 1;
    while (c->p < end) {
        const uint8_t *at = c->p, *e;
        uint32_t f, w;
        uint64_t v;
        if (get_tag(c, &f, &w)) return -1;
        if (f == 1) {
            if (expect_wire(c, at, w, 0, "ContainerMerkleTree.dataChecksum is not a varint")) return -1;
            if (get_varint(c, &v)) return -1;
            if (o != NULL) {
                o->data_checksum = (int64_t)v;
                o->has_data_checksum = 1;
            }
        } else if (f == 2) {
            if (expect_wire(c, at, w, 2, "ContainerMerkleTree.blockMerkleTree is not length-delimited")) return -1;
            if (get_len(c, &e) || decode_block(d, c, e)) return -1;
        } else {
            d->unknown++;
            if (skip_field(c, w)) return -1;
        }
    }
    c->end = saved_end;
    return 0;
}

static int decode_info(decoder *d, const uint8_t *buf, size_t len, ozt_error *err) {
    cursor c = {buf, buf, buf + len, err};
    ozt_tree_out *o = d->out;
    while (c.p < c.end) {
        const uint8_t *at = c.p, *e;
        uint32_t f, w;
        uint64_t v;
        if (get_tag(&c, &f, &w)) return -1;
        if (f == 1) {
            if (expect_wire(&c, at, w, 0, "ContainerChecksumInfo.containerID is not a varint")) return -1;
            if (get_varint(&c, &v)) return -1;
            if (o != NULL) {
                o->container_id = (int64_t)v;
                o->has_container_id = 1;
            }
        } else if (f == 2) {
            if (expect_wire(&c, at, w, 2, "ContainerChecksumInfo.containerMerkleTree is not length-delimited")) return -1;
            /* A repeated occurrence of an embedded message merges into the first, as in
             * protobuf: its blocks append, its scalars replace. */
            if (get_len(&c, &e) || decode_tree(d, &c, e)) return -1;
        } else {
            d->unknown++;
            if (skip_field(&c, w)) return -1;
            /* Kept raw (tag included) to be written back after field 2, as Ozone does. */
            size_t n = (size_t)(c.p - at);
            if (o != NULL) {
                if (d->tail_len + n > o->tail_len) return fail(&c, at, "more unknown bytes than counted");
                memcpy(o->tail + d->tail_len, at, n);
            }
            d->tail_len += n;
        }
    }
    if (o != NULL) {
        o->chunk_start[d->n_blocks] = (int64_t)d->n_chunks;
        o->unknown_fields = d->unknown;
    }
    return 0;
}

int ozt_decode_count(const uint8_t *buf, size_t len, size_t *n_blocks, size_t *n_chunks,
                     size_t *tail_len, ozt_error *err) {
    decoder d = {NULL, 0, 0, 0, 0};
    if (decode_info(&d, buf, len, err)) return -1;
    *n_blocks = d.n_blocks;
    *n_chunks = d.n_chunks;
    *tail_len = d.tail_len;
    return 0;
}

int ozt_decode(const uint8_t *buf, size_t len, ozt_tree_out *out, ozt_error *err) {
    decoder d = {out, 0, 0, 0, 0};
    out->has_container_id = out->has_tree = out->has_data_checksum = 0;
    out->container_id = out->data_checksum = 0;
    if (decode_info(&d, buf, len, err)) return -1;
    if (d.n_blocks != out->n_blocks || d.n_chunks != out->n_chunks || d.tail_len != out->tail_len) {
        err->offset = 0;
        err->what = "array sizes do not match the message";
        return -1;
    }
    return 0;
}

/* ---- diff -------------------------------------------------------------------------------- */

static void diff_chunks(const ozt_diff_side *a, size_t ia, const ozt_diff_side *b, size_t ib,
                        ozt_diff_out *o) {
    size_t i = (size_t)a->chunk_start[ia], iend = (size_t)a->chunk_start[ia + 1];
    size_t j = (size_t)b->chunk_start[ib], jend = (size_t)b->chunk_start[ib + 1];
    while (j < jend) {
        if (i < iend && a->chunk_offset[i] < b->chunk_offset[j]) {
            i++; /* only in ours: the peer pulls it from us */
        } else if (i >= iend || a->chunk_offset[i] > b->chunk_offset[j]) {
            if (b->chunk_matches[j])
                o->missing_chunks[o->n_missing_chunks++] = (int64_t)j;
            else
                o->n_unhealthy_filtered++;
            j++;
        } else {
            if (a->chunk_value[i] != b->chunk_value[j]) {
                if (!a->chunk_matches[i]) {
                    if (b->chunk_matches[j]) {
                        o->corrupt_chunks_ours[o->n_corrupt_chunks] = (int64_t)i;
                        o->corrupt_chunks[o->n_corrupt_chunks++] = (int64_t)j;
                    } else {
                        o->n_unhealthy_filtered++; /* both unhealthy: nothing to pull */
                    }
                } else if (b->chunk_matches[j]) {
                    /* Both healthy: Ozone repairs nothing (a write-path divergence); listed
                     * for operators. Ours healthy, peer unhealthy: nothing, not counted. */
                    o->unrecoverable_chunks_ours[o->n_unrecoverable_chunks] = (int64_t)i;
                    o->unrecoverable_chunks[o->n_unrecoverable_chunks++] = (int64_t)j;
                }
            }
            i++;
            j++;
        }
    }
}

void ozt_diff(const ozt_diff_side *a, const ozt_diff_side *b, ozt_diff_out *o) {
    o->n_missing_blocks = o->n_deleted_blocks = o->n_missing_chunks = 0;
    o->n_corrupt_chunks = o->n_unrecoverable_chunks = o->n_unhealthy_filtered = 0;
    size_t i = 0, j = 0;
    while (j < b->n_blocks) {
        if (i < a->n_blocks && a->block_id[i] < b->block_id[j]) {
            i++; /* only in ours: ignored */
        } else if (i >= a->n_blocks || a->block_id[i] > b->block_id[j]) {
            if (b->block_deleted[j])
                o->deleted_blocks[o->n_deleted_blocks++] = (int64_t)j;
            else
                o->missing_blocks[o->n_missing_blocks++] = (int64_t)j;
            j++;
        } else {
            /* Examined only when the values differ: a live block against a tombstone of the
             * same value stays live. */
            if (a->block_value[i] != b->block_value[j]) {
                int ad = a->block_deleted[i] != 0, bd = b->block_deleted[j] != 0;
                if (ad) {
                    if (bd && a->block_value[i] < b->block_value[j]) /* signed, as in Java */
                        o->deleted_blocks[o->n_deleted_blocks++] = (int64_t)j; /* larger wins */
                    /* ours deleted, peer live: the peer adopts ours */
                } else if (bd) {
                    o->deleted_blocks[o->n_deleted_blocks++] = (int64_t)j; /* adopt the tombstone */
                } else {
                    diff_chunks(a, i, b, j, o);
                }
            }
            i++;
            j++;
        }
    }
}
