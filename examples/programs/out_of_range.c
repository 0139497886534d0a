/* A hostile program: reads one byte past the end of its first memory range. The VM stops it (Invalid Memory
 * Range Set, DW0 = 1) and the device stays usable. */
#include "nearflash_program.h"

u64 peek_past_end(const struct nf_ctx *ctx) {
    const u8 *p = (const u8 *)ctx->range[0].addr;
    return p[ctx->range[0].len];
}
