/* Reading an SQLite database file's table B-trees from flash (helpers for sqlite_lookup.c and sqlite_scan.c).
 * Format: https://sqlite.org/fileformat.html -- header (1.3), B-tree pages (1.6), varints, cells and overflow
 * (1.6), records (2.1). The database is extent[0]: its first byte is the file's first byte. */
#ifndef NF_SQLITE_BTREE_H
#define NF_SQLITE_BTREE_H
#include "nearflash_program.h"

#define NF_SQL_NOT_FOUND (~0ULL)
#define NF_SQL_CORRUPT (~0ULL - 1)
#define NF_SQL_IO (~0ULL - 2)
#define NF_SQL_SMALL (~0ULL - 3)
#define NF_SQL_UNSUPPORTED (~0ULL - 4)
#define NF_SQL_MAX_DEPTH 12
#define NF_SQL_PAGE_MAX 65536

/* The page being walked (slack past the largest page so that a cell read near its end stays in the buffer). */
static u8 page[NF_SQL_PAGE_MAX + 64];

struct db {
    u64 slba, bytes; /* the file's extent */
    u64 page_size, usable;
};

static inline u64 be16(const u8 *p) { return ((u64)p[0] << 8) | p[1]; }
static inline u64 be32(const u8 *p) { return ((u64)p[0] << 24) | ((u64)p[1] << 16) | ((u64)p[2] << 8) | p[3]; }

/* An SQLite varint at p (1-9 bytes); returns its length. */
static inline u64 varint(const u8 *p, u64 *v) {
    u64 x = 0;
    for (int i = 0; i < 8; i++) {
        x = (x << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    *v = (x << 8) | p[8];
    return 9;
}

/* Page size and usable bytes: from the parameters (u32 page size, u32 reserved bytes: what a host that opened
 * the file knows), else from the file's header (one more read). */
static u64 db_open(const struct nf_ctx *ctx, struct db *db) {
    if (ctx->nextents < 1)
        return NF_SQL_CORRUPT;
    db->slba = ctx->extent[0].slba;
    db->bytes = ctx->extent[0].nlb * ctx->lba_bytes;
    u64 size, reserved;
    if (ctx->param_len >= 8) {
        const u8 *p = (const u8 *)ctx->param_addr;
        size = nf_u32(p);
        reserved = nf_u32(p + 4);
    } else {
        if (nf_read(db->slba, 0, page, 100) < 0)
            return NF_SQL_IO;
        size = be16(page + 16);
        size = size == 1 ? 65536 : size;
        reserved = page[20];
    }
    if (size < 512 || size > NF_SQL_PAGE_MAX || (size & (size - 1)) || reserved >= size - 480)
        return NF_SQL_CORRUPT;
    db->page_size = size;
    db->usable = size - reserved;
    return 0;
}

/* Reads page `pgno` (1-based) into buf. */
static u64 db_page(const struct db *db, u64 pgno, u8 *buf) {
    if (pgno == 0 || pgno > db->bytes / db->page_size)
        return NF_SQL_CORRUPT;
    if (nf_read(db->slba, (pgno - 1) * db->page_size, buf, db->page_size) < 0)
        return NF_SQL_IO;
    return 0;
}

static inline void copy(u8 *dst, const u8 *src, u64 n) {
    u64 i = 0;
    for (; i + 8 <= n; i += 8)
        *(u64 *)(dst + i) = *(const u64 *)(src + i);
    for (; i < n; i++)
        dst[i] = src[i];
}

/* Bytes of a table leaf cell's payload of `p` bytes stored on its page (the rest is on overflow pages). */
static inline u64 local_bytes(const struct db *db, u64 p) {
    u64 u = db->usable, x = u - 35;
    if (p <= x)
        return p;
    u64 m = ((u - 12) * 32 / 255) - 23;
    u64 k = m + (p - m) % (u - 4);
    return k <= x ? k : m;
}

/* Copies the payload of the leaf cell at byte `cell` of `pg` into range 0 (following its overflow pages, read
 * into `pg` itself once the local part is copied); returns the payload's length or an error. */
static u64 db_payload(const struct db *db, const struct nf_ctx *ctx, u8 *pg, u64 cell) {
    u64 size, rowid;
    u64 c = cell + varint(pg + cell, &size);
    c += varint(pg + c, &rowid);
    if (ctx->nranges < 1)
        return size;
    if (ctx->range[0].len < size)
        return NF_SQL_SMALL;
    u8 *out = (u8 *)ctx->range[0].addr;
    u64 local = local_bytes(db, size);
    if (c + local + (local < size ? 4 : 0) > db->usable)
        return NF_SQL_CORRUPT;
    copy(out, pg + c, local);
    u64 done = local;
    u64 next = local < size ? be32(pg + c + local) : 0;
    for (u64 hops = 0; done < size; hops++) {
        if (hops > db->bytes / db->page_size)
            return NF_SQL_CORRUPT;
        u64 err = db_page(db, next, pg);
        if (err)
            return err;
        u64 n = size - done < db->usable - 4 ? size - done : db->usable - 4;
        copy(out + done, pg + 4, n);
        done += n;
        next = be32(pg);
    }
    return size;
}

#endif
