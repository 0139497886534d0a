"""``nearflash cognitive train``: runs the candle trainer (Rust binary ``nearflash-cognitive-train``), which reads
Fashion-MNIST and writes a safetensors model. A trainer binary of the crate ``nearflash-cognitive-train`` (this one,
or NICE's ``nearflash-nice-train``) is found in its environment variable, the source tree's ``target/release``, or
``PATH``; failing that, a source checkout builds it with cargo."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from nearflash.errors import InvalidArgument

BINARY = "nearflash-cognitive-train"
CRATE = "nearflash-cognitive-train"
REPO = Path(__file__).resolve().parents[3]


def trainer_command(binary: str = BINARY, env_var: str = "NEARFLASH_COGNITIVE_TRAIN") -> list[str]:
    env = os.environ.get(env_var)
    if env:
        return [env]
    built = REPO / "target" / "release" / binary
    if built.exists():
        return [str(built)]
    found = shutil.which(binary)
    if found:
        return [found]
    if (REPO / "crates" / CRATE / "Cargo.toml").exists() and shutil.which("cargo"):
        return ["cargo", "run", "--quiet", "--release", "--manifest-path", str(REPO / "Cargo.toml"), "-p", CRATE,
                "--bin", binary, "--"]
    raise InvalidArgument(f"{binary} not found: build it with `cargo build --release -p {CRATE}`")


def run_trainer(command: list[str], args: list[str], *, epochs: int, seed: int, limit: Optional[int], batch: int,
                lr: float) -> str:
    """Runs a trainer with the options every trainer takes (checked here first); returns its JSON summary line."""
    if epochs <= 0 or batch <= 0 or not 0 < lr < 1:
        raise InvalidArgument("epochs and batch must be positive, lr in (0, 1)")
    if seed < 0:
        raise InvalidArgument(f"seed: {seed}; a non-negative integer")
    args = args + ["--epochs", str(epochs), "--seed", str(seed), "--batch", str(batch), "--lr", str(lr)]
    if limit is not None:
        if limit <= 0:
            raise InvalidArgument(f"limit: {limit}; a positive number of training images")
        args += ["--limit", str(limit)]
    r = subprocess.run(command + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise InvalidArgument(f"training failed: {r.stderr.strip()}")
    return r.stdout.strip()


def train(out: str | Path, *, bits: int = 48, epochs: int = 3, seed: int = 1, limit: Optional[int] = None,
          batch: int = 64, lr: float = 1e-3) -> str:
    """Trains and writes the model to ``out``; returns the trainer's JSON summary line."""
    if not 1 <= bits <= 64:
        raise InvalidArgument(f"bits: {bits}; 1 to 64 allowed")
    # Checked before training, which takes minutes: the trainer found a bad path only when it wrote the model.
    out = Path(out)
    if out.is_dir():
        raise InvalidArgument(f"out: {str(out)!r} is a directory; give the model file's path")
    if not out.parent.is_dir():
        raise InvalidArgument(f"out: the folder {str(out.parent)!r} does not exist")
    return run_trainer(trainer_command(), ["--out", str(out), "--bits", str(bits)], epochs=epochs, seed=seed,
                       limit=limit, batch=batch, lr=lr)
