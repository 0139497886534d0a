/* SQLite table B-tree lookup by rowid, in storage: walks the database file's table B-tree from its root page
 * (interior table pages 0x05 -> leaf table page 0x0D), reading one page per level with nf_read, and copies the
 * row's record (its payload, following overflow pages) into memory range 0. Format: https://sqlite.org/fileformat.html
 * (sections 1.3 header, 1.6 B-tree pages, 2.1 records). Nothing of SQLite's code is used.
 *
 * extent[0]: the database file's blocks (the file starts at its first byte). cparam1: rowid. cparam2: the table's
 * root page number (sqlite_schema.rootpage). range[0] (optional): where the record goes.
 * Returns the record's length, or NF_SQL_NOT_FOUND, NF_SQL_CORRUPT (a page that is not what the walk expects,
 * a pointer out of the file, a loop deeper than NF_SQL_MAX_DEPTH), NF_SQL_IO (an uncorrectable page), or
 * NF_SQL_SMALL (range 0 shorter than the record). */
#include "sqlite_btree.h"

u64 sqlite_lookup(const struct nf_ctx *ctx) {
    struct db db;
    u64 err = db_open(ctx, &db);
    if (err)
        return err;
    u64 rowid = ctx->cparam1, pgno = ctx->cparam2;
    for (u64 depth = 0; depth < NF_SQL_MAX_DEPTH; depth++) {
        err = db_page(&db, pgno, page);
        if (err)
            return err;
        u64 h = pgno == 1 ? 100 : 0;
        u8 type = page[h];
        u64 ncells = be16(page + h + 3);
        if (type == 0x05) {
            /* first cell whose key >= rowid: its left child; none: the right-most child */
            u64 lo = 0, hi = ncells;
            while (lo < hi) {
                u64 mid = (lo + hi) / 2;
                u64 c = be16(page + h + 12 + 2 * mid);
                if (c + 5 > db.usable)
                    return NF_SQL_CORRUPT;
                u64 key;
                varint(page + c + 4, &key);
                if (key < rowid)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < ncells)
                pgno = be32(page + be16(page + h + 12 + 2 * lo));
            else
                pgno = be32(page + h + 8);
            continue;
        }
        if (type != 0x0D)
            return NF_SQL_CORRUPT;
        u64 lo = 0, hi = ncells;
        while (lo < hi) {
            u64 mid = (lo + hi) / 2;
            u64 c = be16(page + h + 8 + 2 * mid);
            if (c + 18 > db.usable)
                return NF_SQL_CORRUPT;
            u64 size, key;
            c += varint(page + c, &size);
            varint(page + c, &key);
            if (key == rowid)
                return db_payload(&db, ctx, page, be16(page + h + 8 + 2 * mid));
            if (key < rowid)
                lo = mid + 1;
            else
                hi = mid;
        }
        return NF_SQL_NOT_FOUND;
    }
    return NF_SQL_CORRUPT;
}
