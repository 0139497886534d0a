/* SQLite table scan in storage: counts the rows of a table whose rowid is in [lo, hi] and whose integer column
 * `column` (record column index) compares with `value` as `op` says, and sums that column over them. Walks the
 * table B-tree from its root down to the leaves that can hold [lo, hi]; the leaves under one interior page are
 * read ahead NF_SCAN_AHEAD at a time (nf_read_start / nf_read_wait), so their flash reads overlap.
 *
 * extent[0]: the database file. cparam2: the table's root page. Parameters: struct scan_params. range[0]
 * (optional, 16 bytes): (count, sum) as two i64. Returns the count, or an NF_SQL_* error (a NULL, real or text
 * value in the column: NF_SQL_UNSUPPORTED; pages over 16 KiB: NF_SQL_UNSUPPORTED). */
#include "sqlite_btree.h"

#define NF_SCAN_PAGE 16384
#define NF_SCAN_AHEAD 16

struct scan_params {
    u32 page_size, reserved; /* as db_open reads them */
    i64 lo, hi;              /* rowids, inclusive */
    u32 column, op;          /* op: 0 <, 1 <=, 2 =, 3 >=, 4 >, 5 != */
    i64 value;
};

static u8 level[NF_SQL_MAX_DEPTH][NF_SCAN_PAGE];
static u8 ahead[NF_SCAN_AHEAD][NF_SCAN_PAGE];
static u64 first[NF_SQL_MAX_DEPTH], last[NF_SQL_MAX_DEPTH], cur[NF_SQL_MAX_DEPTH];

struct totals {
    i64 count, sum;
};

/* The signed big-endian integer of serial type t at p; 0 if t is not an integer type (then *ok = 0). */
static inline i64 int_value(const u8 *p, u64 t, u64 *ok) {
    u64 n = t == 1 ? 1 : t == 2 ? 2 : t == 3 ? 3 : t == 4 ? 4 : t == 5 ? 6 : t == 6 ? 8 : 0;
    *ok = 1;
    if (t == 8)
        return 0;
    if (t == 9)
        return 1;
    if (n == 0) {
        *ok = 0;
        return 0;
    }
    u64 v = 0;
    for (u64 i = 0; i < n; i++)
        v = (v << 8) | p[i];
    u64 shift = 64 - 8 * n;
    return (i64)(v << shift) >> shift;
}

static inline u64 body_bytes(u64 t) {
    if (t >= 12)
        return (t - 12) / 2;
    return t == 1 ? 1 : t == 2 ? 2 : t == 3 ? 3 : t == 4 ? 4 : t == 5 ? 6 : (t == 6 || t == 7) ? 8 : 0;
}

static inline int passes(i64 x, u32 op, i64 v) {
    return op == 0 ? x < v : op == 1 ? x <= v : op == 2 ? x == v : op == 3 ? x >= v : op == 4 ? x > v : x != v;
}

/* Adds the rows of leaf page pg that match; 0 or an error. */
static u64 scan_leaf(const struct db *db, const struct scan_params *q, const u8 *pg, struct totals *t) {
    if (pg[0] != 0x0D)
        return NF_SQL_CORRUPT;
    u64 ncells = be16(pg + 3);
    for (u64 i = 0; i < ncells; i++) {
        u64 c = be16(pg + 8 + 2 * i);
        if (c + 18 > db->usable)
            return NF_SQL_CORRUPT;
        u64 size, rowid;
        c += varint(pg + c, &size);
        c += varint(pg + c, &rowid);
        if ((i64)rowid < q->lo || (i64)rowid > q->hi)
            continue;
        u64 local = local_bytes(db, size);
        u64 hsize, type = 0;
        u64 h = varint(pg + c, &hsize), body = hsize;
        for (u64 k = 0; k <= q->column; k++) {
            if (h >= hsize || h >= local)
                return NF_SQL_UNSUPPORTED; /* fewer columns, or a header on overflow pages */
            h += varint(pg + c + h, &type);
            if (k < q->column)
                body += body_bytes(type);
        }
        if (body + body_bytes(type) > local)
            return NF_SQL_UNSUPPORTED;
        u64 ok;
        i64 x = int_value(pg + c + body, type, &ok);
        if (!ok)
            return NF_SQL_UNSUPPORTED;
        if (passes(x, q->op, q->value)) {
            t->count++;
            t->sum += x;
        }
    }
    return 0;
}

/* Children first..last of the interior page pg that can hold rowids lo..hi. */
static void child_span(const u8 *pg, i64 lo, i64 hi, u64 *a, u64 *b) {
    u64 n = be16(pg + 3), i = 0, j;
    while (i < n) {
        u64 key;
        varint(pg + be16(pg + 12 + 2 * i) + 4, &key);
        if ((i64)key >= lo)
            break;
        i++;
    }
    for (j = i; j < n; j++) {
        u64 key;
        varint(pg + be16(pg + 12 + 2 * j) + 4, &key);
        if ((i64)key >= hi)
            break;
    }
    *a = i;
    *b = j;
}

static inline u64 child(const u8 *pg, u64 i) {
    return i < be16(pg + 3) ? be32(pg + be16(pg + 12 + 2 * i)) : be32(pg + 8);
}

u64 sqlite_scan(const struct nf_ctx *ctx) {
    struct db db;
    u64 err = db_open(ctx, &db);
    if (err)
        return err;
    if (ctx->param_len < sizeof(struct scan_params) || db.page_size > NF_SCAN_PAGE)
        return NF_SQL_UNSUPPORTED;
    const struct scan_params *q = (const struct scan_params *)ctx->param_addr;
    struct totals t = {0, 0};
    u64 root = ctx->cparam2;
    if (root < 2 || (err = db_page(&db, root, level[0])))
        return err ? err : NF_SQL_CORRUPT;
    if (level[0][0] == 0x0D) {
        err = scan_leaf(&db, q, level[0], &t);
        goto done;
    }
    if (level[0][0] != 0x05)
        return NF_SQL_CORRUPT;
    u64 d = 0;
    child_span(level[0], q->lo, q->hi, &first[0], &last[0]);
    cur[0] = first[0];
    for (u64 steps = 0; steps < (1ULL << 32); steps++) {
        if (cur[d] > last[d]) {
            if (d == 0)
                break;
            d--;
            cur[d]++;
            continue;
        }
        if (d + 1 >= NF_SQL_MAX_DEPTH)
            return NF_SQL_CORRUPT;
        if ((err = db_page(&db, child(level[d], cur[d]), level[d + 1])))
            return err;
        u8 type = level[d + 1][0];
        if (type == 0x05) {
            d++;
            child_span(level[d], q->lo, q->hi, &first[d], &last[d]);
            cur[d] = first[d];
            continue;
        }
        if ((err = scan_leaf(&db, q, level[d + 1], &t)))
            return err;
        /* the siblings are leaves too: read them ahead, NF_SCAN_AHEAD at a time */
        for (u64 i = cur[d] + 1; i <= last[d];) {
            u64 n = last[d] - i + 1 < NF_SCAN_AHEAD ? last[d] - i + 1 : NF_SCAN_AHEAD;
            for (u64 k = 0; k < n; k++) {
                u64 pgno = child(level[d], i + k);
                if (pgno == 0 || pgno > db.bytes / db.page_size)
                    return NF_SQL_CORRUPT;
                if (nf_read_start(db.slba, (pgno - 1) * db.page_size, ahead[k], db.page_size) < 0)
                    return NF_SQL_IO;
            }
            if (nf_read_wait(NF_WAIT_ALL) != 0)
                return NF_SQL_IO;
            for (u64 k = 0; k < n; k++)
                if ((err = scan_leaf(&db, q, ahead[k], &t)))
                    return err;
            i += n;
        }
        cur[d] = last[d] + 1;
    }
done:
    if (err)
        return err;
    if (ctx->nranges > 0 && ctx->range[0].len >= 16) {
        i64 *out = (i64 *)ctx->range[0].addr;
        out[0] = t.count;
        out[1] = t.sum;
    }
    return t.count;
}
