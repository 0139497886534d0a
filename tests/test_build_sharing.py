"""The builds of one test run (maturin's Python module, the NBD plugin, `cargo test --workspace`, the candle trainers)
compile each nearflash crate once: a dependency whose features differ between them makes cargo compile every crate
above it again, minutes of CI time (scripts/check_shared_build.py names the dependency; the cure is a line in
crates/nearflash-workspace-hack/Cargo.toml)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_every_build_shares_the_compiled_crates():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_shared_build.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    shared = re.search(r"share each of the (\d+) nearflash crates", r.stdout)
    assert shared and int(shared.group(1)) >= 10, r.stdout  # the crates were found, not an empty comparison
