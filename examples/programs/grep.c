/* grep -c for a byte string: counts non-overlapping occurrences of the parameter bytes in range 0 (as Python's
 * bytes.count). Returns the count. */
#include "nearflash_program.h"

u64 grep_count(const struct nf_ctx *ctx) {
    if (ctx->nranges < 1 || ctx->param_len == 0)
        return 0;
    const u8 *text = (const u8 *)ctx->range[0].addr;
    const u8 *pat = (const u8 *)ctx->param_addr;
    u64 n = ctx->range[0].len, m = ctx->param_len, count = 0, i = 0;
    while (i + m <= n) {
        u64 j = 0;
        while (j < m && text[i + j] == pat[j])
            j++;
        if (j == m) {
            count++;
            i += m;
        } else {
            i++;
        }
    }
    return count;
}
