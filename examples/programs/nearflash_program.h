/* nearflash computational programs: what an eBPF program sees (docs/programs.md "Program ABI").
 *
 * Compile with Debian's clang:   clang -O2 -target bpf -c prog.c -o prog.o
 * The object's one non-static function is the entry; it receives a read-only context and returns a 64-bit
 * value (the completion's DW0 carries its low 32 bits). Memory range i of the Execute Program's range set is
 * range[i].addr .. range[i].addr + range[i].len; any access outside the ranges, the parameters, the program's
 * own data and its 512-byte stack frame stops the run with a status. eBPF has no floating point and no helper
 * functions are provided: programs work on integers in their ranges. */
#ifndef NEARFLASH_PROGRAM_H
#define NEARFLASH_PROGRAM_H

typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define NF_MAX_RANGES 16

struct nf_range {
    u64 addr; /* VM address of the range's first byte */
    u64 len;  /* bytes */
};

struct nf_ctx {
    u64 nranges;          /* ranges bound to this run */
    u64 cparam1, cparam2; /* Execute Program CDW10-11, CDW12-13 */
    u64 param_addr;       /* parameter data after the inline ranges (0 if none) */
    u64 param_len;
    struct nf_range range[NF_MAX_RANGES];
};

/* Little-endian loads that need no alignment (clang turns them into byte loads where needed). */
static inline i32 nf_i32(const u8 *p) { i32 v; __builtin_memcpy(&v, p, 4); return v; }
static inline u32 nf_u32(const u8 *p) { u32 v; __builtin_memcpy(&v, p, 4); return v; }
static inline i64 nf_i64(const u8 *p) { i64 v; __builtin_memcpy(&v, p, 8); return v; }

#endif
