/* TPC-H Q6's filter and aggregate over iSSD's 150-byte lineitem records (crates/nearflash-issd/src/lineitem):
 *   SELECT count(*), sum(l_extendedprice * l_discount) FROM lineitem
 *   WHERE l_shipdate >= lo AND l_shipdate < hi AND l_discount BETWEEN dlo AND dhi AND l_quantity < qmax
 * Range 0: the table as stored on flash, in pages of cparam1 bytes ([u32 payload bytes][records][padding]),
 * or contiguous records when cparam1 is 0. Range 1: 16 bytes out (u64 count, i64 sum). Parameters: five i32
 * (lo, hi, dlo, dhi, qmax). Returns the count. */
#include "nearflash_program.h"

#define RECORD 150

struct q6 { i32 lo, hi, dlo, dhi, qmax; };

static u64 scan(const u8 *p, u64 n, const struct q6 *q, i64 *sum) {
    u64 count = 0;
    for (u64 off = 0; off + RECORD <= n; off += RECORD) {
        const u8 *r = p + off;
        i32 ship = nf_i32(r + 48), disc = nf_i32(r + 40), qty = nf_i32(r + 36);
        if (ship >= q->lo && ship < q->hi && disc >= q->dlo && disc <= q->dhi && qty < q->qmax) {
            count++;
            *sum += nf_i64(r + 24) * disc;
        }
    }
    return count;
}

u64 lineitem_q6(const struct nf_ctx *ctx) {
    if (ctx->nranges < 2 || ctx->range[1].len < 16 || ctx->param_len < sizeof(struct q6))
        return (u64)-1;
    const struct q6 *q = (const struct q6 *)ctx->param_addr;
    const u8 *table = (const u8 *)ctx->range[0].addr;
    u64 len = ctx->range[0].len, page = ctx->cparam1, count = 0;
    i64 sum = 0;
    if (page == 0) {
        count = scan(table, len, q, &sum);
    } else {
        for (u64 at = 0; at + page <= len; at += page) {
            u64 payload = nf_u32(table + at);
            if (payload > page - 4)
                payload = page - 4;
            count += scan(table + at + 4, payload, q, &sum);
        }
    }
    u8 *out = (u8 *)ctx->range[1].addr;
    __builtin_memcpy(out, &count, 8);
    __builtin_memcpy(out + 8, &sum, 8);
    return count;
}
