/* Hostile (and a probe of the read helpers): reads 16 bytes from block cparam1, cparam2 times (at least once),
 * into memory range 0 if given, else into its own data. Returns the last read's result, as a u64. A block outside
 * the LBA ranges named at Execute, or more reads than the run's budget, stops the run. */
#include "nearflash_program.h"

static u8 scratch[16];

u64 read_flash(const struct nf_ctx *ctx) {
    u8 *dst = ctx->nranges > 0 && ctx->range[0].len >= 16 ? (u8 *)ctx->range[0].addr : scratch;
    long r = 0;
    u64 n = ctx->cparam2 ? ctx->cparam2 : 1;
    for (u64 i = 0; i < n; i++)
        r = nf_read(ctx->cparam1, 0, dst, 16);
    return (u64)r;
}
