/* Count and sum of the int64 values above a threshold: the in-storage side of nearflash.array's striped scan.
 * Range 0: little-endian int64 values (8-byte aligned, as every range is); range 1: 16 bytes out (u64 count,
 * i64 sum). cparam1: the threshold (as i64). Returns the count. */
#include "nearflash_program.h"

u64 threshold_sum(const struct nf_ctx *ctx) {
    if (ctx->nranges < 2 || ctx->range[1].len < 16)
        return (u64)-1;
    const i64 *v = (const i64 *)ctx->range[0].addr;
    u64 n = ctx->range[0].len / 8, count = 0;
    i64 threshold = (i64)ctx->cparam1, sum = 0;
    for (u64 i = 0; i < n; i++) {
        if (v[i] > threshold) {
            count++;
            sum += v[i];
        }
    }
    u8 *out = (u8 *)ctx->range[1].addr;
    __builtin_memcpy(out, &count, 8);
    __builtin_memcpy(out + 8, &sum, 8);
    return count;
}
