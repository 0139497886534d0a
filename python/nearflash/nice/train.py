"""``nearflash nice train``: trains NICE-C's LeNet-5 on Fashion-MNIST with the candle trainer (Rust binary
``nearflash-nice-train`` of the crate ``nearflash-cognitive-train``) and writes the weights file NICE's in-storage
LeNet reads, plus ``OUT.json`` with the training record. The binary is found in ``$NEARFLASH_NICE_TRAIN``, the
source tree's ``target/release``, ``PATH``, or built with cargo from a source checkout."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from nearflash.cognitive.train import run_trainer, trainer_command

BINARY = "nearflash-nice-train"


def train(out: str | Path, *, epochs: int = 6, seed: int = 1, limit: Optional[int] = None, batch: int = 64,
          lr: float = 1e-3) -> str:
    """Trains and writes the weights to ``out`` (and the record to ``out``.json); returns the JSON summary line."""
    return run_trainer(trainer_command(BINARY, "NEARFLASH_NICE_TRAIN"), ["--out", str(out)], epochs=epochs,
                       seed=seed, limit=limit, batch=batch, lr=lr)
