"""Golden digests: fixed seeds and workloads give fixed reports, so a change of any modelled figure (timing, NAND
operations, WAF, energy) is seen here and made deliberately.

When a change of the model is intended, regenerate the stored values and commit them with the change:

    NEARFLASH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py

The stored key figures beside each digest show what moved in a failure message.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import nearflash

# The devices are pinned here (not taken from conftest) so that only a model change moves a digest.
TINY = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 16, "pages_per_block": 16,
        "over_provisioning": "35%", "gc_start_free_blocks": 3, "gc_stop_free_blocks": 3, "write_buffer": "256KiB"}
SMALL = {"channels": 4, "chips_per_channel": 2, "blocks_per_plane": 64, "pages_per_block": 32,
         "over_provisioning": "20%"}

GOLDEN = Path(__file__).with_name("golden") / "report_digests.json"
UPDATE = os.environ.get("NEARFLASH_UPDATE_GOLDEN") == "1"
REGENERATE = "NEARFLASH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py"


def _canonical(value: Any) -> Any:
    """Floats to 12 significant digits (last-bit differences of libm between machines are not model changes)."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


# Breakdowns of the commands `ops` already holds (the same completions, split per I/O queue and per queue priority),
# added after the digests were taken: leaving them out keeps a digest a statement about the model.
BREAKDOWNS = ("queues", "priorities")


def digest(report: dict[str, Any]) -> str:
    kept = {k: v for k, v in report.items() if k not in BREAKDOWNS}
    text = json.dumps(_canonical(kept), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def key_figures(r: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"elapsed_ns": r["elapsed_ns"]}
    for op, s in r["ops"].items():
        out[f"{op}.count"] = s["count"]
        out[f"{op}.p50_us"] = round(s["latency"]["p50_us"], 3)
        out[f"{op}.p99_us"] = round(s["latency"]["p99_us"], 3)
    out.update({"nand.pages_read": r["nand"]["pages_read"], "nand.pages_programmed": r["nand"]["pages_programmed"],
                "ftl.waf": r["ftl"]["waf"], "ftl.gc_runs": r["ftl"]["gc_runs"]})
    return out


def gc_steady_random_writes() -> dict[str, Any]:
    dev = nearflash.Device(None, overrides=TINY, seed=7)
    dev.precondition(0.8, "random", seed=7)
    return dev.bench("randwrite", 4096, 16, 1, 3000, seed=7)["report"].data


def random_reads_two_jobs() -> dict[str, Any]:
    dev = nearflash.Device(None, overrides=SMALL, seed=3, materialise=False)
    dev.precondition(0.5, "sequential", seed=3)
    return dev.bench("randread", 4096, 32, 2, 4000, span=(0, dev.lbas // 2), seed=3)["report"].data


def mixed_16k_default_preset() -> dict[str, Any]:
    dev = nearflash.Device(None, seed=5, materialise=False)
    return dev.bench("randrw", 16384, 64, 1, 3000, span=(0, 1 << 16), seed=5, rwmixread=0.7)["report"].data


def sdk_materialised_sequence() -> dict[str, Any]:
    """Synchronous and queued I/O with data, flush, trim and Write Zeroes through the SDK."""
    dev = nearflash.Device(None, overrides=TINY, seed=11)
    rng = np.random.default_rng(11)
    dev.write(0, rng.integers(0, 255, 4096 * 64, dtype=np.uint8))
    dev.write(100, rng.integers(0, 255, 4096 * 8, dtype=np.uint8), fua=True)
    dev.flush()
    dev.trim(8, 16)
    dev.write_zeroes(40, 8)
    q = dev.queue(depth=16)
    out = np.empty(4096 * 4, np.uint8)
    for i in range(48):
        if q.in_flight == q.depth:
            q.wait()
        q.submit_read(int(rng.integers(0, 120)), 4, out if i % 3 == 0 else None)
    q.wait_all()
    dev.advance(50_000)
    dev.read(0, 64)
    return dev.report().data


WORKLOADS: dict[str, Callable[[], dict[str, Any]]] = {
    "gc_steady_random_writes": gc_steady_random_writes,
    "random_reads_two_jobs": random_reads_two_jobs,
    "mixed_16k_default_preset": mixed_16k_default_preset,
    "sdk_materialised_sequence": sdk_materialised_sequence,
}


def _stored() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_report_digest_is_the_golden_one(name):
    report = WORKLOADS[name]()
    got = {"digest": digest(report), "figures": key_figures(report)}
    if UPDATE:
        stored = _stored()
        stored[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        return
    want = _stored().get(name)
    assert want is not None, f"no golden digest for {name!r}: generate it with `{REGENERATE}`"
    if got["digest"] != want["digest"]:
        moved = {k: (want["figures"].get(k), v) for k, v in got["figures"].items() if want["figures"].get(k) != v}
        pytest.fail(
            f"the report of {name!r} changed (digest {want['digest'][:12]} -> {got['digest'][:12]}); key figures "
            f"(golden, now): {moved or 'unchanged: a field outside the key figures moved'}.\n"
            f"If the model change is intended, regenerate with `{REGENERATE}` and commit "
            f"{GOLDEN.relative_to(GOLDEN.parents[2])} with it; otherwise the timing changed by accident.")


def test_same_seed_same_report_twice_in_one_process():
    assert digest(gc_steady_random_writes()) == digest(gc_steady_random_writes())
    a, b = sdk_materialised_sequence(), sdk_materialised_sequence()
    assert digest(a) == digest(b)


def test_a_different_seed_gives_a_different_digest():
    dev = nearflash.Device(None, overrides=TINY, seed=8)
    dev.precondition(0.8, "random", seed=8)
    other = dev.bench("randwrite", 4096, 16, 1, 3000, seed=8)["report"].data
    assert digest(other) != digest(gc_steady_random_writes())
