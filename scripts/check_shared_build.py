#!/usr/bin/env python3
"""Checks that the builds of a test run share nearflash's compiled crates: maturin's Python module, the NBD plugin,
`cargo test --workspace` and the candle trainers that tests build. Cargo compiles a crate once per distinct set of
features of everything below it, so one dependency enabled with other features in one of those builds compiles every
nearflash crate again (minutes of CI). Reads cargo's unit graphs (nothing is compiled); on a mismatch, names the
dependencies whose features differ: add the union to crates/nearflash-workspace-hack/Cargo.toml.

Usage: python3 scripts/check_shared_build.py   (exit status 1 on a mismatch)"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: What scripts/env.sh, scripts/test.sh and the trainer tests ask cargo for (maturin's features from pyproject.toml).
BUILDS = {
    "python module": ["build", "-p", "nearflash-py", "--lib", "--features", "pyo3/extension-module"],
    "NBD plugin": ["build", "-p", "nearflash-nbd"],
    "cargo test": ["test", "--workspace", "--exclude", "nearflash-py", "--no-run"],
    "trainers": ["build", "-p", "nearflash-cognitive-train", "--bins"],
}


def unit_graph(args: list[str]) -> list[dict]:
    env = {**os.environ, "RUSTC_BOOTSTRAP": "1"}  # --unit-graph is a nightly flag; it compiles nothing
    out = subprocess.run(["cargo", *args[:1], "--release", "-q", *args[1:], "--unit-graph", "-Z", "unstable-options"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["units"]


def unit_keys(units: list[dict]) -> dict[int, str]:
    """Each unit's identity as cargo hashes it: package, target, mode, profile, features and its dependencies'."""
    keys: dict[int, str] = {}

    def key(i: int) -> str:
        if i not in keys:
            u = units[i]
            deps = sorted(key(d["index"]) for d in u["dependencies"])
            ident = json.dumps([u["pkg_id"], u["target"]["name"], u["target"]["kind"], u["mode"],
                                sorted(u["features"]), u["profile"], u.get("platform"), deps], sort_keys=True)
            keys[i] = hashlib.sha256(ident.encode()).hexdigest()
        return keys[i]

    for i in range(len(units)):
        key(i)
    return keys


def is_ours(unit: dict) -> bool:
    return unit["pkg_id"].startswith("path+")


def main() -> int:
    graphs = {name: unit_graph(args) for name, args in BUILDS.items()}
    copies: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))  # crate -> unit key -> builds
    for name, units in graphs.items():
        keys = unit_keys(units)
        for i, u in enumerate(units):
            if is_ours(u) and u["mode"] == "build" and u["target"]["kind"] == ["lib"]:
                copies[u["target"]["name"]][keys[i]].append(name)
    unshared = {crate: list(by_key.values()) for crate, by_key in copies.items() if len(by_key) > 1}
    if not unshared:
        print(f"the {len(graphs)} builds share each of the {len(copies)} nearflash crates they compile")
        return 0
    for crate, groups in sorted(unshared.items()):
        print(f"{crate} is compiled {len(groups)} times: " + " / ".join(", ".join(g) for g in groups))
    features: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for name, units in graphs.items():
        for u in units:
            if not is_ours(u) and u["mode"] == "build":
                features[u["pkg_id"].split("#")[-1]][name].add(",".join(sorted(u["features"])) or "-")
    for pkg, per in sorted(features.items()):
        if len({frozenset(v) for v in per.values()}) > 1:
            print(f"  {pkg}: " + "; ".join(f"{n}: {' | '.join(sorted(v))}" for n, v in per.items()))
    return 1


if __name__ == "__main__":
    sys.exit(main())
