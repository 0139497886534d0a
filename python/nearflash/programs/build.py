"""Compiling C programs with Debian's clang (``clang -O2 -target bpf -c``) into eBPF ELF objects, and the C
examples shipped in ``examples/programs/``."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from nearflash.errors import InvalidArgument

#: The repository's example programs (``examples/programs/<name>.c``).
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples" / "programs"
#: Example name -> what it computes.
EXAMPLES = {
    "lineitem_filter": "TPC-H Q6 filter + aggregate over iSSD's 150-byte lineitem records (count, sum)",
    "grep": "non-overlapping occurrences of a byte string",
    "sls": "SparseLengthsSum over int32 embeddings",
    "threshold_sum": "count and sum of the int64 values above a threshold (nearflash.array's in-storage scan)",
    "out_of_range": "hostile: reads one byte past its memory range",
    "sqlite_lookup": "SQLite table B-tree lookup by rowid, reading the database file's pages from flash",
    "sqlite_scan": "SQLite table scan: rows in a rowid range whose integer column passes a comparison (count, sum)",
    "read_flash": "hostile: reads the block cparam1 (nf_read), cparam2 times; returns the last result",
}


def have_clang(clang: str = "clang") -> bool:
    """Whether ``clang`` can be run."""
    return shutil.which(clang) is not None


def compile_c(source: str | os.PathLike, *, clang: str = "clang", include: str | os.PathLike | None = None) -> bytes:
    """Compiles a C file (a path) with ``clang -O2 -target bpf -c`` and returns the object's bytes.
    ``include`` adds a directory to the header search path (``examples/programs`` by default, for
    ``nearflash_program.h``)."""
    src = Path(source)
    if not src.is_file():
        raise InvalidArgument(f"source {str(src)!r} is not a file")
    if not have_clang(clang):
        raise InvalidArgument(f"{clang!r} was not found: install Debian's clang (apt-get install clang)")
    inc = Path(include) if include is not None else EXAMPLES_DIR
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / (src.stem + ".o")
        cmd = [clang, "-O2", "-target", "bpf", "-I", str(inc), "-c", str(src), "-o", str(obj)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise InvalidArgument(f"clang failed on {src.name}:\n{r.stderr.strip()}")
        return obj.read_bytes()


def example(name: str, *, clang: str = "clang") -> bytes:
    """The compiled object of an example program (see :data:`EXAMPLES`)."""
    if name not in EXAMPLES:
        raise InvalidArgument(f"example {name!r} is not one of {sorted(EXAMPLES)}")
    return compile_c(EXAMPLES_DIR / f"{name}.c", clang=clang)
