"""Inputs of the `costs` experiment's characterisation (each Table 1 kernel with a paged input of about ``scale``
bytes), and instruction counting without hardware counters: a kernel run under valgrind's callgrind, collecting
only inside the host path's chunked run (``--toggle-collect``), counts the x86 instructions our kernel executes
exactly (the count `perf stat -e instructions` would give, without a PMU). Valgrind runs a fresh interpreter per
kernel (a few seconds each); where it is not installed, :func:`count_instructions` returns ``None``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nearflash.issd import data, kernels, lineitem

PAGE = 8192


def _labelled(scale: int, values: int, seed: int) -> np.ndarray:
    """Pages of labelled records: 8 attributes, 4 classes (naive_bayes, scalparc)."""
    return data.pack_records(data.labelled_records(scale // 9, 8, 4, values, seed=seed), 9, PAGE)


def _text(scale: int, seed: int) -> np.ndarray:
    return data.pack_lines(data.text(scale, seed=seed), PAGE)


def _clusters(scale: int, seed: int) -> np.ndarray:
    return data.cluster_points(scale // 12, 3, 4, seed=seed)


#: Kernel name -> (scale, seed) -> (spec, pages).
INPUTS: dict[str, Callable[[int, int], tuple[dict, np.ndarray]]] = {
    "scan": lambda s, seed: (kernels.spec("scan"),
                             lineitem.generate(rows=s // 150, page_size=PAGE, comment_pool="compact")),
    "grep": lambda s, seed: (kernels.spec("grep", pattern="special"), _text(s, seed)),
    "string_match": lambda s, seed: (kernels.spec("string_match", keys=["ly ", "the", "furious"]), _text(s, seed)),
    "word_count": lambda s, seed: (kernels.spec("word_count"), _text(s, seed)),
    "histogram": lambda s, seed: (kernels.spec("histogram"),
                                  data.pack_records(data.pixels(1000, s // 3000, seed=seed), 3, PAGE)),
    "linear_regression": lambda s, seed: (kernels.spec("linear_regression"),
                                          data.pack_records(data.regression_points(s // 2, seed=seed), 2, PAGE)),
    "kmeans": lambda s, seed: (kernels.spec("kmeans", dim=3, centroids=_clusters(s, seed)[:4].tolist()),
                               data.pack_records(_clusters(s, seed), 12, PAGE)),
    "scalparc": lambda s, seed: (kernels.spec("scalparc", attributes=8, classes=4), _labelled(s, 256, seed)),
    "hop": lambda s, seed: (kernels.spec("hop", grid=32, lo=0, hi=1000, threshold=8),
                            data.pack_records(_clusters(s, seed), 12, PAGE)),
    "naive_bayes": lambda s, seed: (kernels.spec("naive_bayes", attributes=8, classes=4, values=16),
                                    _labelled(s, 16, seed)),
}


def inputs(scale: int, seed: int) -> dict[str, tuple[dict, np.ndarray]]:
    """Every kernel's spec and paged input."""
    return {name: make(scale, seed) for name, make in INPUTS.items()}


_SCRIPT = """
import sys
from nearflash.issd import kernels
from nearflash.issd.characterise import INPUTS, PAGE
spec, pages = INPUTS[sys.argv[1]](int(sys.argv[2]), int(sys.argv[3]))
kernels.run(spec, pages, PAGE, mode="chunked")
print(len(pages))
"""


def valgrind_available() -> bool:
    return shutil.which("valgrind") is not None


def count_instructions(name: str, scale: int, seed: int, timeout: float = 300) -> tuple[int, int] | None:
    """(instructions, input bytes) of one single-threaded host-path run of kernel ``name`` (Map, Reduce and
    finish, not the input's generation), counted by callgrind; ``None`` without valgrind."""
    if name not in INPUTS:
        raise ValueError(f"unknown kernel {name!r}; known: {sorted(INPUTS)}")
    if not valgrind_available():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=*kernel::run::run_chunked*",
               f"--callgrind-out-file={out}", sys.executable, "-c", _SCRIPT, name, str(int(scale)), str(int(seed))]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0 or not out.exists():
            raise RuntimeError(f"valgrind failed on {name}: {r.stderr[-2000:]}")
        m = re.search(r"^totals:\s*(\d+)", out.read_text(), re.M)
        if m is None:
            raise RuntimeError(f"no instruction total in callgrind's output for {name}")
        return int(m.group(1)), int(r.stdout.split()[-1])
