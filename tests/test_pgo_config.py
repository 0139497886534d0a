"""scripts/pgo_config.sh, which turns profile-guided optimisation on for the builds of a tree (docs/development.md):
on only with a profile made by this rustc, a new profile makes new flags (so cargo rebuilds), a config.toml it did
not write is never touched, and the tracked profile is one this repository's rustc can use."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "pgo_config.sh"
pytestmark = pytest.mark.skipif(shutil.which("rustc") is None, reason="rustc is not installed")


def rustc_version() -> str:
    return subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout


def configure(tree: Path, pgo: str | None = None) -> subprocess.CompletedProcess:
    """Runs the script on `tree`, with NEARFLASH_PGO set to `pgo` (None: unset, whatever this run's own setting;
    CI's .ci/run sets it off)."""
    env = {k: v for k, v in os.environ.items() if k != "NEARFLASH_PGO"}
    if pgo is not None:
        env["NEARFLASH_PGO"] = pgo
    return subprocess.run(["bash", str(SCRIPT), str(tree)], capture_output=True, text=True, timeout=60, env=env)


def tree_with(tmp_path: Path, profile: bytes | None, made_by: str | None) -> Path:
    (tmp_path / "pgo").mkdir()
    if profile is not None:
        (tmp_path / "pgo" / "nearflash.profdata.gz").write_bytes(gzip.compress(profile))
    if made_by is not None:
        (tmp_path / "pgo" / "rustc-version").write_text(made_by)
    return tmp_path


def flags(tree: Path) -> str:
    return (tree / ".cargo" / "config.toml").read_text()


def test_a_profile_made_by_this_rustc_is_used_through_a_copy_named_by_its_hash(tmp_path):
    tree = tree_with(tmp_path, b"profile one", rustc_version())
    r = configure(tree)
    assert r.returncode == 0, r.stderr
    digest = hashlib.sha256((tree / "pgo" / "nearflash.profdata.gz").read_bytes()).hexdigest()[:16]
    copy = tree / ".cargo" / f"pgo-{digest}.profdata"
    assert copy.read_bytes() == b"profile one"
    # The profile, and LLVM's splitting of the blocks it never saw run out of hot functions (scripts/pgo_flags.sh).
    assert f'rustflags = ["-Cprofile-use={copy}", "-Cllvm-args=-enable-split-machine-functions"]' in flags(tree)
    # A new profile: new flags (cargo rebuilds), and the old copy goes.
    (tree / "pgo" / "nearflash.profdata.gz").write_bytes(gzip.compress(b"profile two"))
    assert configure(tree).returncode == 0
    assert not copy.exists()
    new_digest = hashlib.sha256((tree / "pgo" / "nearflash.profdata.gz").read_bytes()).hexdigest()[:16]
    new_copy = tree / ".cargo" / f"pgo-{new_digest}.profdata"
    assert str(new_copy) in flags(tree) and new_copy.read_bytes() == b"profile two"


@pytest.mark.parametrize("profile, made_by", [(b"p", "rustc 0.1.0 (another)\n"), (None, None), (b"p", None)],
                         ids=["another rustc", "no profile", "no version file"])
def test_without_a_usable_profile_the_generated_config_goes(tmp_path, profile, made_by):
    tree = tree_with(tmp_path, b"p", rustc_version())
    assert configure(tree).returncode == 0 and (tree / ".cargo" / "config.toml").exists()
    shutil.rmtree(tree / "pgo")
    tree_with(tree, profile, made_by)
    r = configure(tree)
    assert r.returncode == 0, r.stderr
    assert not (tree / ".cargo" / "config.toml").exists()
    assert not list((tree / ".cargo").glob("pgo-*.profdata"))
    assert "building without it" in r.stdout


def test_a_config_the_script_did_not_write_is_left_alone(tmp_path):
    tree = tree_with(tmp_path, b"p", rustc_version())
    (tree / ".cargo").mkdir()
    own = '[build]\nrustflags = ["-Ctarget-cpu=native"]\n'
    (tree / ".cargo" / "config.toml").write_text(own)
    r = configure(tree)
    assert r.returncode == 0 and flags(tree) == own
    assert "left as it is" in r.stdout
    assert not list((tree / ".cargo").glob("pgo-*.profdata"))


def test_pgo_off_builds_without_the_profile_and_on_turns_it_back(tmp_path):
    tree = tree_with(tmp_path, b"p", rustc_version())
    assert configure(tree).returncode == 0 and (tree / ".cargo" / "config.toml").exists()
    r = configure(tree, "off")
    assert r.returncode == 0, r.stderr
    assert "NEARFLASH_PGO=off" in r.stdout
    assert not (tree / ".cargo" / "config.toml").exists() and not list((tree / ".cargo").glob("pgo-*.profdata"))
    assert configure(tree, "off").stdout == ""  # nothing left to remove: nothing said
    assert configure(tree, "on").returncode == 0 and "-Cprofile-use=" in flags(tree)


def test_pgo_off_leaves_a_config_the_script_did_not_write(tmp_path):
    tree = tree_with(tmp_path, b"p", rustc_version())
    (tree / ".cargo").mkdir()
    own = '[build]\njobs = 1\n'
    (tree / ".cargo" / "config.toml").write_text(own)
    assert configure(tree, "off").returncode == 0 and flags(tree) == own


@pytest.mark.parametrize("value", ["yes", "0", "OFF", "of f"])
def test_an_unknown_pgo_setting_is_refused_and_changes_nothing(tmp_path, value):
    tree = tree_with(tmp_path, b"p", rustc_version())
    assert configure(tree).returncode == 0
    before = flags(tree)
    r = configure(tree, value)
    assert r.returncode == 2
    assert "NEARFLASH_PGO must be 'on' or 'off'" in r.stderr and repr(value).strip("'") in r.stderr
    assert flags(tree) == before


def test_the_tracked_profile_names_the_rustc_that_made_it():
    made_by = (ROOT / "pgo" / "rustc-version").read_text()
    assert made_by.startswith("rustc ") and "LLVM version:" in made_by
    with gzip.open(ROOT / "pgo" / "nearflash.profdata.gz") as f:
        head = f.read(8)
    assert head == b"\xfflprofi\x81"  # LLVM's indexed profile, the format -Cprofile-use reads
