"""Both cargo workspaces' lockfiles are complete: the main one and the fuzz targets' own (``fuzz/``, its own
workspace, which the main build never resolves), so that a clean clone builds either with ``--locked`` and nothing
is resolved anew at CI time (a dependency added to a crate must reach both lockfiles)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def metadata(workspace: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["cargo", "metadata", "--locked", *extra, "--format-version", "1"], cwd=ROOT / workspace,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
@pytest.mark.parametrize("workspace", [".", "fuzz"])
def test_the_lockfile_holds_every_dependency(workspace):
    r = metadata(workspace, "--offline")
    if r.returncode != 0 and "offline" in r.stderr:
        # A fresh machine's cargo cache lacks the fuzz workspace's own crates (libfuzzer-sys) until the fuzz phase
        # fetches them: ask the registry (reachable in CI) instead; --locked still refuses any new resolution.
        r = metadata(workspace)
    assert r.returncode == 0, f"{workspace}/Cargo.lock is incomplete (run `cargo generate-lockfile --offline` " \
                              f"there): {r.stderr[-600:]}"
