/* SparseLengthsSum (Caffe2's operator, RecSSD's kernel) over int32 embeddings: eBPF has no floating point, so
 * rows are fixed-point integers. Range 0: table, rows x dim i32. Range 1: indices, u32 each. Range 2: lengths,
 * one u32 per bag. Range 3: out, bags x dim i64. cparam1 = dim. Returns the number of bags summed, or
 * (u64)-1 when an index or length is out of range. */
#include "nearflash_program.h"

u64 sparse_lengths_sum(const struct nf_ctx *ctx) {
    if (ctx->nranges < 4)
        return (u64)-1;
    const u8 *table = (const u8 *)ctx->range[0].addr;
    const u8 *idx = (const u8 *)ctx->range[1].addr;
    const u8 *lens = (const u8 *)ctx->range[2].addr;
    u8 *out = (u8 *)ctx->range[3].addr;
    u64 dim = ctx->cparam1, row_bytes = dim * 4;
    if (dim == 0)
        return (u64)-1;
    u64 rows = ctx->range[0].len / row_bytes, nidx = ctx->range[1].len / 4, bags = ctx->range[2].len / 4;
    if (ctx->range[3].len < bags * dim * 8)
        return (u64)-1;
    u64 next = 0;
    for (u64 b = 0; b < bags; b++) {
        u64 len = nf_u32(lens + 4 * b);
        if (next + len > nidx)
            return (u64)-1;
        for (u64 d = 0; d < dim; d++) {
            i64 acc = 0;
            for (u64 k = 0; k < len; k++) {
                u64 row = nf_u32(idx + 4 * (next + k));
                if (row >= rows)
                    return (u64)-1;
                acc += nf_i32(table + row * row_bytes + 4 * d);
            }
            __builtin_memcpy(out + 8 * (b * dim + d), &acc, 8);
        }
        next += len;
    }
    return bags;
}
