#!/usr/bin/env python3
"""Executions of hardware divisions (div/idiv) per I/O: callgrind runs of N and N/2 I/Os with per-instruction
counts, summed over the binary's div instructions (objdump), difference over N/2.
usage: simspeed_divisions.py BINARY CASE N [preset] [fill] [key=value ...] (BINARY: a simspeed example; a build
without the profile: `RUSTFLAGS= cargo build --release --target-dir target/plain -p nearflash-core --example simspeed`)."""
import os, re, subprocess, sys, tempfile, collections
binary, case, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
preset = sys.argv[4] if len(sys.argv) > 4 else "cosmos-plus"; fill = sys.argv[5] if len(sys.argv) > 5 else "0.9"
# div instructions of the binary, by address, with their function
divs = {}
fn = None
dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", binary], capture_output=True, text=True).stdout
for line in dis.splitlines():
    m = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
    if m: fn = m.group(2); continue
    m = re.match(r"^\s+([0-9a-f]+):\s+(i?div[a-z]*)\s", line)
    if m: divs[int(m.group(1), 16)] = (fn, m.group(2))
syms = {}
for line in subprocess.run(["nm", binary], capture_output=True, text=True).stdout.splitlines():
    p = line.split()
    if len(p) == 3 and p[2] == "main": syms["main"] = int(p[0], 16)
def run(k, out):
    env = dict(os.environ, SIMSPEED_IOS=str(k))
    subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=yes", "--dump-line=no", "--compress-pos=no",
                    "--compress-strings=no", f"--callgrind-out-file={out}", binary, preset, fill, case, *sys.argv[6:]],
                   env=env, capture_output=True, check=True)
    counts = collections.Counter(); base = None; skip = False; cur_fn = None; obj = None
    for line in open(out):
        if line.startswith("ob="): obj = line[3:].strip(); continue
        if line.startswith("fn="): cur_fn = line[3:].strip(); first = True; continue
        if line.startswith("calls="): skip = True; continue
        if line[:2] == "0x" or line[:1].isdigit():
            if skip: skip = False; continue
            parts = line.split()
            addr = int(parts[0], 16) if parts[0].startswith("0x") else int(parts[0])
            if cur_fn == "main" and obj and obj.endswith(os.path.basename(binary)):
                base = addr if base is None else min(base, addr)
            counts[addr] += int(parts[1]) if len(parts) > 1 else 0
    return counts, base
tmp = tempfile.mkdtemp()
ca, lowest = run(n, f"{tmp}/a")
base = lowest - syms["main"]; cb, _ = run(n // 2, f"{tmp}/b")
per_fn = collections.Counter()
for a, (f, ins) in divs.items():
    d = ca.get(a + base, 0) - cb.get(a + base, 0)
    if d: per_fn[(f, ins)] += d
half = n // 2
total = sum(per_fn.values())
print(f"case {case}: {total / half:.2f} divisions per I/O (base {base:#x}; {tmp})")
for (f, ins), d in per_fn.most_common(15):
    print(f"  {d / half:6.2f}  {ins:6s} {f[:150]}")
