"""``nearflash cognitive train``: runs the candle trainer (Rust binary ``nearflash-cognitive-train``), which reads
Fashion-MNIST and writes a safetensors model. The binary is found in ``$NEARFLASH_COGNITIVE_TRAIN``, the source
tree's ``target/release``, or ``PATH``; failing that, a source checkout builds it with cargo."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from nearflash.errors import InvalidArgument

BINARY = "nearflash-cognitive-train"
REPO = Path(__file__).resolve().parents[3]


def trainer_command() -> list[str]:
    env = os.environ.get("NEARFLASH_COGNITIVE_TRAIN")
    if env:
        return [env]
    built = REPO / "target" / "release" / BINARY
    if built.exists():
        return [str(built)]
    found = shutil.which(BINARY)
    if found:
        return [found]
    if (REPO / "crates" / BINARY / "Cargo.toml").exists() and shutil.which("cargo"):
        return ["cargo", "run", "--quiet", "--release", "--manifest-path", str(REPO / "Cargo.toml"), "-p", BINARY, "--"]
    raise InvalidArgument(f"{BINARY} not found: build it with `cargo build --release -p {BINARY}`")


def train(out: str | Path, *, bits: int = 48, epochs: int = 3, seed: int = 1, limit: Optional[int] = None,
          batch: int = 64, lr: float = 1e-3) -> str:
    """Trains and writes the model to ``out``; returns the trainer's JSON summary line."""
    if not 1 <= bits <= 64:
        raise InvalidArgument(f"bits: {bits}; 1 to 64 allowed")
    if epochs <= 0 or batch <= 0 or not 0 < lr < 1:
        raise InvalidArgument("epochs and batch must be positive, lr in (0, 1)")
    args = ["--out", str(out), "--bits", str(bits), "--epochs", str(epochs), "--seed", str(seed),
            "--batch", str(batch), "--lr", str(lr)]
    if limit is not None:
        if limit <= 0:
            raise InvalidArgument(f"limit: {limit}; a positive number of training images")
        args += ["--limit", str(limit)]
    r = subprocess.run(trainer_command() + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise InvalidArgument(f"training failed: {r.stderr.strip()}")
    return r.stdout.strip()
