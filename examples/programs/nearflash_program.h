/* nearflash computational programs: what an eBPF program sees (docs/programs.md "Program ABI").
 *
 * Compile with Debian's clang:   clang -O2 -target bpf -c prog.c -o prog.o
 * The object's one non-static function is the entry; it receives a read-only context and returns a 64-bit
 * value (the completion's DW0 carries its low 32 bits). Memory range i of the Execute Program's range set is
 * range[i].addr .. range[i].addr + range[i].len; any access outside the ranges, the parameters, the program's
 * own data and its 512-byte stack frame stops the run with a status. eBPF has no floating point: programs work
 * on integers. Flash: the Execute Program's ranges of the NVM namespace are extent[j] (whole logical blocks); the
 * helpers below read them into the program's own memory (docs/programs.md "Reading flash"). */
#ifndef NEARFLASH_PROGRAM_H
#define NEARFLASH_PROGRAM_H

typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define NF_MAX_RANGES 16
#define NF_MAX_EXTENTS 16

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
    u64 lba_bytes;        /* bytes per logical block of the NVM namespace */
    u64 nextents;         /* LBA ranges of the NVM namespace the run may read */
    struct nf_extent {
        u64 slba, nlb;    /* first logical block, blocks */
    } extent[NF_MAX_EXTENTS];
};

/* Flash reads (helpers 1-3, called as kernel eBPF helpers are). A read takes `len` bytes from byte `offset` of
 * the blocks starting at logical block `lba` into `dst` (the program's data, stack or a memory range); all its
 * blocks must lie in one extent, else the run stops (LBA Out of Range, DW0 6); past the run's read budget it
 * stops too (Insufficient Resources, DW0 7).
 *   nf_read: waits for the data; >= 0 (read retries the ECC spent) or NF_EIO (a page the ECC could not
 *            correct: dst is zeroes) or NF_EINVAL (len 0 or over the largest read).
 *   nf_read_start: issues the read and returns a tag at once (NF_EAGAIN: too many in flight); reads started
 *            together overlap on the flash array and with the program's work. dst is valid after the wait.
 *   nf_read_wait: waits for the read `tag` (its result as nf_read's), or NF_WAIT_ALL: for every read in flight
 *            (the number that failed). */
static long (*nf_read)(u64 lba, u64 offset, void *dst, u64 len) = (void *)1;
static long (*nf_read_start)(u64 lba, u64 offset, void *dst, u64 len) = (void *)2;
static long (*nf_read_wait)(u64 tag) = (void *)3;
#define NF_EIO (-5)
#define NF_EAGAIN (-11)
#define NF_EINVAL (-22)
#define NF_WAIT_ALL (~0ULL)

/* Little-endian loads that need no alignment (clang turns them into byte loads where needed). */
static inline i32 nf_i32(const u8 *p) { i32 v; __builtin_memcpy(&v, p, 4); return v; }
static inline u32 nf_u32(const u8 *p) { u32 v; __builtin_memcpy(&v, p, 4); return v; }
static inline i64 nf_i64(const u8 *p) { i64 v; __builtin_memcpy(&v, p, 8); return v; }

#endif
