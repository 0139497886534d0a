"""Fig. 12: locating a file for in-storage computing, NICE vs HOST-ISC vs FSR-ISC, FTL-cache hit and miss, path
depth 1..20 (paper Sec. V-B: at depth 20 NICE is 15.6-16x faster than FSR-ISC on a hit, 50.3-54.6x on a miss).

All three run on the same device in the same run, on a real ext4 image whose files sit at depths 1..20:
* NICE: the host library's hash lookup, then a NICE_Read at the file's hyper-address bound to op 4 (locate only):
  the firmware reads the head page (its OOB names the inode) and the inode's sector, and parses the inode.
* FSR-ISC: the firmware walks the path from the root inode (op 5 at the hyper-address of LBA 0), reading each
  directory level's inode-table and directory blocks one after the other, parsing each.
* HOST-ISC: the host's open() walks the path in the kernel (the crate's ext4 reader, as the host library's open):
  on a miss each metadata block the walk needs, beyond the superblock and descriptors a mount holds, is a 1-block
  Read through the modelled kernel stack, one after the other; then one 4 KiB command through the kernel (no flash
  work) hands the file's blocks to the device.
Hit: the metadata is cached (the firmware's FTL cache of data pages, the host's page cache), measured on a second
call. Miss: nothing cached (FTL cache of 0 pages; the host reads every block)."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.nice.experiments.common import (OP_LOCATE, cap, debugfs, device, fsr_block, invoke, make_image,
                                               nice_ext, timed_read)
from nearflash.nice import lookup_via
from nearflash.recssd.experiments.common import option

#: Paper Sec. V-B, Fig. 12 at depth 20: FSR-ISC / NICE latency.
PAPER_HIT = (15.6, 16.0)
PAPER_MISS = (50.3, 54.6)
#: Host hash-table lookup of the head LBA (the NICE library), assumed: ~200 instructions on a 1.9 GHz Carmel core.
HASH_LOOKUP_NS = 100
#: Kernel VFS work per path component of open() (dentry lookup, permission check) on the Jetson-NX-class host,
#: assumed: ~2,000 instructions at 1.9 GHz (dcache miss path); 300 ns with the dentry cached.
VFS_MISS_NS, VFS_HIT_NS = 1_000, 300
#: open() syscall entry/exit, assumed: ~1 us on an embedded ARM core.
SYSCALL_NS = 1_000
#: The depths of the paper's figure.
ALL_DEPTHS = tuple(range(1, 21))


def _tree(root: Path, depth: int, size: int) -> list[str]:
    """/l1/f.bin, /l1/l2/f.bin, ... /l1/../l{depth}/f.bin, each of `size` bytes; their paths."""
    rng = np.random.default_rng(depth)
    paths, d = [], root
    for i in range(1, depth + 1):
        d = d / f"l{i}"
        d.mkdir()
        (d / "f.bin").write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        paths.append("/" + "/".join(f"l{j}" for j in range(1, i + 1)) + "/f.bin")
    return paths


def _mount_sectors(dev) -> set[int]:
    """Sectors of the superblock and group descriptors: a mounted kernel holds them (not read per open())."""
    sb = bytes(dev.read(0, 1))[1024:2048]
    blocks, per_group = struct.unpack_from("<I", sb, 4)[0], struct.unpack_from("<I", sb, 32)[0]
    incompat = struct.unpack_from("<I", sb, 0x60)[0]
    desc = struct.unpack_from("<H", sb, 0xFE)[0] if incompat & 0x80 else 32
    gdt = -(-(-(-blocks // per_group)) * desc // 4096)
    return {0, *range(1, 1 + gdt)}


def _host_open_ns(dev, path: str, cold: bool, mounted: set[int]) -> tuple[int, int]:
    """open() in the kernel: the crate's ext4 reader walks the path (as the host library does); cold, each block it
    needs that the mount does not hold is a 1-block Read through the kernel stack, in order, each once. Returns
    (ns, device reads)."""
    seen: dict[int, bytes] = {}
    ns = 0

    def read(lba: int) -> bytes:
        nonlocal ns
        if lba not in seen:
            out, t = timed_read(dev, lba)
            seen[lba] = out.tobytes()
            if cold and lba not in mounted:
                ns += t
        return seen[lba]

    r = lookup_via(read, path, 0, dev.lba_bytes)
    reads = len([lba for lba in seen if lba not in mounted]) if cold else 0
    return SYSCALL_NS + r["levels"] * (VFS_MISS_NS if cold else VFS_HIT_NS) + ns, reads


def run_fig12(exp: Experiment, opts: Options) -> None:
    depths = option(opts, "depths", [1, 5, 10, 20], list(ALL_DEPTHS))
    size_kib = option(opts, "size_kib", 16, 64)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        paths = _tree(root, max(depths), size_kib * 1024)
        image = make_image(root, 8 + max(depths) * size_kib // 1024 * 2)
        img = Path(tmp) / "fs.img"
        spb = 1  # 4 KiB blocks on 4 KiB sectors
        rows, data = [], {}
        for cache in exp.steps(["miss", "hit"]):
            dev = device(image, 0 if cache == "miss" else 1024, exp)
            mounted = _mount_sectors(dev)
            heads = {}
            for d in depths:
                p = paths[d - 1]
                heads[d] = int(debugfs(img, [f"blocks {p}"])[0].split()[0]) * spb
            for d in depths:
                p = paths[d - 1]
                # NICE: bind op 4 once, then locate (twice on a hit: the second finds the metadata cached).
                r, _, t_nice = invoke(dev, heads[d], bytes([OP_LOCATE]))
                if cache == "hit":
                    r, _, t_nice = invoke(dev, heads[d], bytes([OP_LOCATE]))
                nice_ns = HASH_LOOKUP_NS + t_nice
                f, _, t_fsr = invoke(dev, 0, fsr_block(p))
                if cache == "hit":
                    f, _, t_fsr = invoke(dev, 0, fsr_block(p))
                assert f["inode"] == r["inode"] and f["size"] == r["size"] == size_kib * 1024, (p, r, f)
                host_ns, host_reads = _host_open_ns(dev, p, cache == "miss", mounted)
                # The ISC command handing the file's blocks to the device: one 4 KiB command through the kernel stack
                # with no flash work, timed as a Write at the file's hyper-address (an op binding).
                host_ns += dev.write(cap(dev) + heads[d], np.frombuffer(bytes([OP_LOCATE]) + bytes(dev.lba_bytes - 1),
                                                                         dtype=np.uint8))
                data[f"{cache}/{d}"] = {"nice_ns": nice_ns, "fsr_ns": t_fsr, "host_ns": host_ns,
                                        "nice_flash_reads": r["value"], "fsr_flash_reads": f["value"],
                                        "host_block_reads": host_reads}
                rows.append([cache, d, nice_ns / 1e3, t_fsr / 1e3, host_ns / 1e3, r["value"], f["value"], host_reads,
                             t_fsr / nice_ns, host_ns / nice_ns])
            data[f"{cache}/firmware"] = nice_ext(dev)
            dev.close()
    exp.table("File locating latency (us) by path depth", ["FTL cache", "depth", "NICE", "FSR-ISC", "HOST-ISC",
              "NICE flash reads", "FSR flash reads", "HOST block reads", "FSR/NICE", "HOST/NICE"], rows)
    exp.record("points", data)
    deep = max(depths)
    for cache, paper in (("hit", PAPER_HIT), ("miss", PAPER_MISS)):
        pt = data[f"{cache}/{deep}"]
        exp.compare(f"FSR-ISC / NICE at depth {deep}, FTL-cache {cache}", pt["fsr_ns"] / pt["nice_ns"], sum(paper) / 2,
                    "x", f"paper {paper[0]}-{paper[1]}x over file sizes (paper column: the midpoint)",
                    reference="paper-derived")
        exp.compare(f"NICE flash reads to locate, {cache}", pt["nice_flash_reads"], 0 if cache == "hit" else 2, "reads",
                    "paper: at most two", better="lower")
        exp.compare(f"FSR-ISC flash reads at depth {deep}, {cache}", pt["fsr_flash_reads"], None, "reads",
                    f"paper: up to {deep} (one per level); ours reads each level's directory block and the inode-table "
                    "blocks the walk needs")
        exp.compare(f"HOST-ISC / NICE at depth {deep}, FTL-cache {cache}", pt["host_ns"] / pt["nice_ns"], None, "x",
                    "paper: NICE beats HOST-ISC at every size (no number given)")
    exp.note("hit: every metadata page the call touches is in the firmware's FTL cache (NICE: head page and inode "
             "sector, 0 flash reads; FSR-ISC: every level's blocks) or the host's page cache (HOST-ISC); the paper "
             "says only that the file's first page is cached, so its NICE hit may still read the inode page")
    exp.note(f"files of {size_kib} KiB at each depth (the paper's file sizes are not given in the text); HOST-ISC's "
             f"VFS costs ({VFS_MISS_NS} ns/level cold, {VFS_HIT_NS} ns warm, {SYSCALL_NS} ns syscall) and NICE's "
             f"{HASH_LOOKUP_NS} ns hash lookup are assumed host constants")
    fig, axes = exp.figure("fig12", 11, 4.2, ncols=2)
    for ax, cache in zip(axes, ("hit", "miss")):
        for key, label in (("nice_ns", "NICE"), ("fsr_ns", "FSR-ISC"), ("host_ns", "HOST-ISC")):
            ax.plot(depths, [data[f"{cache}/{d}"][key] / 1e3 for d in depths], marker="o", label=label)
        paper = PAPER_HIT if cache == "hit" else PAPER_MISS
        ax.plot([deep], [data[f"{cache}/{deep}"]["nice_ns"] / 1e3 * sum(paper) / 2], "k*", ms=12,
                label=f"paper: FSR at depth {deep} = {sum(paper) / 2:.1f}x our NICE")
        ax.set(title=f"FTL-cache {cache}", xlabel="path depth", ylabel="latency (us)", yscale="log")
        ax.legend(fontsize=8)
