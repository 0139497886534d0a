"""The command path as a hostile user drives it: modelled time follows counted instructions, out-of-range programs
are stopped with their status and the device stays usable, every bad argument or field is refused with a clear
error and changes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from nearflash import programs
from nearflash.errors import InvalidArgument, NvmeError
from nearflash.programs import ProgramError
from programs_fixtures import dev, make_device, objects  # noqa: F401  (fixtures)


def test_time_doubles_when_the_work_doubles(dev, objects):
    text = np.frombuffer(b"flash needle page die block " * 4000, dtype=np.uint8)
    programs.write_slm(dev, 0, text)
    programs.load(dev, 1, objects["grep"])
    programs.activate(dev, 1)
    half = programs.execute(dev, 1, [(0, len(text) // 2)], params=b"needle")
    full = programs.execute(dev, 1, [(0, len(text))], params=b"needle")
    assert (half.value, full.value) == (2000, 4000)
    assert full.instructions / half.instructions == pytest.approx(2.0, rel=0.01)
    assert full.latency_ns / half.latency_ns == pytest.approx(full.instructions / half.instructions, rel=0.02)


@pytest.mark.parametrize("preset", ["cosmos-plus", "samsung-970pro"])
def test_out_of_range_program_is_stopped_and_the_device_stays_usable(objects, preset):
    with make_device(preset) as dev:
        programs.load(dev, 3, objects["out_of_range"])
        programs.activate(dev, 3)
        programs.write_slm(dev, 0, b"abcdefgh")
        with pytest.raises(ProgramError) as e:
            programs.execute(dev, 3, [(0, 8)])
        assert (e.value.sct, e.value.sc, e.value.dw0) == (1, 0x8C, 1)
        assert "Invalid Memory Range Set" in str(e.value)
        programs.load(dev, 4, objects["grep"])
        programs.activate(dev, 4)
        assert programs.execute(dev, 4, [(0, 8)], params=b"cd").value == 1
        block = np.full(dev.lba_bytes, 9, dtype=np.uint8)
        dev.write(5, block)
        assert (dev.read(5, 1) == block).all()


def test_a_runaway_program_is_stopped_by_the_budget(objects, tmp_path):
    src = tmp_path / "spin.c"
    src.write_text('#include "nearflash_program.h"\n'
                   'u64 spin(const struct nf_ctx *c) { volatile u64 i = 0; while (i != 1) i += 2; return i; }\n')
    obj = programs.compile_c(src)
    with make_device(instruction_budget=100_000) as dev:
        programs.load(dev, 1, obj)
        programs.activate(dev, 1)
        with pytest.raises(ProgramError) as e:
            programs.execute(dev, 1)
        assert (e.value.sc, e.value.dw0) == (0x8A, 2)
        assert dev.report().extensions["programs"]["stats"]["last_instructions"] == 100_000


def test_program_lifecycle_statuses(dev, objects):
    def status(fn, *a, **kw):
        with pytest.raises(ProgramError) as e:
            fn(*a, **kw)
        return e.value.status

    assert status(programs.activate, dev, 1) == "No Program"
    assert status(programs.load, dev, 18, objects["grep"]) == "Invalid Program Index"
    assert status(programs.load, dev, 17, objects["grep"]) == "Program Index Not Downloadable"
    programs.load(dev, 1, objects["grep"])
    assert status(programs.execute, dev, 1) == "Program Not Activated"
    programs.activate(dev, 1)
    assert status(programs.unload, dev, 1) == "Program In Use"
    assert status(programs.load, dev, 1, objects["sls"]) == "Program In Use"
    programs.activate(dev, 1, on=False)
    programs.unload(dev, 1)
    assert status(programs.execute, dev, 1) == "No Program"
    assert status(programs.execute, dev, 1, range_set=9) == "No Program"
    programs.load(dev, 2, objects["grep"])
    programs.activate(dev, 2)
    assert status(programs.execute, dev, 2, range_set=9) == "Invalid Memory Range Set Identifier"
    info = programs.identify(dev)
    downloaded = info["programs_loaded"] - info["device_programs"]
    assert downloaded == 1 and info["programs_active"] == 1 and info["controller_cores"] >= 1


def test_damaged_and_hostile_program_files_are_refused(dev, objects):
    good = objects["grep"]
    for bad in (b"\x7fELF", good[:200], good[: len(good) // 2], b"\x00" * 4096,
                bytes(np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8))):
        with pytest.raises(ProgramError) as e:
            programs.load(dev, 1, bad)
        assert e.value.status == "Invalid Program Data"
    flipped = bytearray(good)
    text_at = good.find(bytes([0x95, 0, 0, 0, 0, 0, 0, 0]))  # the exit: turn it into a helper call
    flipped[text_at:text_at + 8] = bytes([0x85, 0, 0, 0, 6, 0, 0, 0])
    with pytest.raises(ProgramError):
        programs.load(dev, 1, bytes(flipped))
    assert "helper" in dev.report().extensions["programs"]["stats"]["last_fault"]
    info = programs.identify(dev)
    assert info["programs_loaded"] == info["device_programs"], "refused loads leave nothing behind"


def test_memory_commands_check_every_bound(dev):
    slm = programs.identify(dev)["slm_bytes"]
    programs.write_slm(dev, slm - 4, b"tail")
    assert bytes(programs.read_slm(dev, slm - 4, 4)) == b"tail"
    for call in (lambda: programs.write_slm(dev, slm - 3, b"tail"), lambda: programs.read_slm(dev, slm, 1),
                 lambda: programs.copy_to_slm(dev, slm - 1, 0, 1),
                 lambda: programs.copy_to_slm(dev, 0, dev.lbas - 1, 2)):
        with pytest.raises(NvmeError) as e:
            call()
        assert e.value.status == "LBA Out of Range"
    with pytest.raises(ProgramError) as e:
        programs.create_range_set(dev, [(0, 8), (4, 8)])
    assert e.value.status == "Overlapping Memory Ranges"
    with pytest.raises(ProgramError) as e:
        programs.create_range_set(dev, [(slm - 4, 8)])
    assert e.value.status == "Invalid Memory Range Set"
    with pytest.raises(ProgramError) as e:
        programs.create_range_set(dev, [(i * 8, 8) for i in range(17)])
    assert e.value.status == "Maximum Memory Ranges Exceeded"
    rsid = programs.create_range_set(dev, [(0, 8)])
    programs.delete_range_set(dev, rsid)
    with pytest.raises(ProgramError):
        programs.delete_range_set(dev, rsid)


@pytest.mark.parametrize("call", [
    lambda d: programs.load(d, 0, b"x"),
    lambda d: programs.load(d, "1", b"x"),
    lambda d: programs.load(d, 1, b""),
    lambda d: programs.load(d, 1, 5),
    lambda d: programs.load(d, 1, "/nonexistent/prog.o"),
    lambda d: programs.activate(d, 1, on="yes"),
    lambda d: programs.create_range_set(d, []),
    lambda d: programs.create_range_set(d, [(0, 0)]),
    lambda d: programs.create_range_set(d, [(0,)]),
    lambda d: programs.copy_to_slm(d, -1, 0, 1),
    lambda d: programs.copy_to_slm(d, 0, 0, 1, sources=[(0, 1)]),
    lambda d: programs.copy_to_slm(d, 0),
    lambda d: programs.write_slm(d, 0, b""),
    lambda d: programs.write_slm(d, 0, [1, 2]),
    lambda d: programs.read_slm(d, 0, 0),
    lambda d: programs.read_slm(d, 0, 4, out=np.zeros(4, dtype=np.int32)),
    lambda d: programs.execute(d, 1, [(0, 8)], range_set=1),
    lambda d: programs.execute(d, 1, cparam1=-1),
    lambda d: programs.execute(d, 1, params=3.5),
    lambda d: programs.run_local(b"x", [np.zeros(4)]),
    lambda d: programs.load("not a device", 1, b"x"),
], ids=lambda c: "")
def test_wrong_types_and_ranges_raise_invalid_argument(dev, call):
    with pytest.raises(InvalidArgument):
        call(dev)


@pytest.mark.parametrize("call,names", [
    (lambda d, p: programs.copy_to_slm(d, 0, 0, 2**32), "nblocks must be in 1..4294967295, got 4294967296"),
    (lambda d, p: programs.copy_to_slm(d, 0, 0, -1), "nblocks"),
    (lambda d, p: programs.copy_to_slm(d, 0, -1, 1), "lba"),
    (lambda d, p: programs.copy_to_slm(d, 0, sources=[(0, 2**32)]), "sources[0] length must be in 1..4294967295"),
    (lambda d, p: programs.host_run(d, p, [(0, 1)], outputs=[2**32] * 15), "outputs[0] must be in 1..1073741824"),
    (lambda d, p: programs.host_run(d, p, [(0, 1)], outputs=[2**30, 8]), "sources and outputs take 1073745928 bytes"),
    (lambda d, p: programs.host_run(d, p, [(0, 2**32 - 1)]), "sources[0]: 4294967295 blocks from LBA 0"),
    (lambda d, p: programs.host_run(d, p, [(0, 1)], outputs=7), "outputs must be a list"),
], ids=lambda c: "")
def test_counts_at_and_past_the_apis_bounds_name_the_argument(dev, call, names):
    """Before: nblocks = 2^32 (the bound this API itself allowed) was an OverflowError from the binding, and
    host_run allocated 15 x 4 GiB of outputs (or 16 TiB of sources) and aborted the process when it failed."""
    with pytest.raises(InvalidArgument) as e:
        call(dev, b"not even a program: the sizes are checked first")
    assert names in str(e.value)


def test_commands_without_the_extension_say_so():
    import nearflash

    with nearflash.Device(None, preset="cosmos-plus") as dev:
        with pytest.raises(ProgramError, match="attach"):
            programs.identify(dev)


def test_bad_extension_parameters_fail_at_attach():
    import nearflash
    from nearflash.errors import ConfigError

    with nearflash.Device(None, preset="cosmos-plus") as dev:
        for bad in ({"max_ranges_per_set": 17}, {"slm_bytes": 1 << 50}, {"no_such": 1}, {"max_programs": 0},
                    {"max_programs": 65535}, {"max_programs": 2.5}, {"max_ranges_per_set": 17.0}):
            with pytest.raises(ConfigError):
                dev.attach("programs", **bad)
        dev.attach("programs")


@pytest.mark.parametrize("preset", __import__("nearflash").presets())
def test_every_preset_runs_a_program(objects, preset):
    with make_device(preset) as dev:
        programs.write_slm(dev, 0, b"a needle, a needle")
        programs.load(dev, 1, objects["grep"])
        programs.activate(dev, 1)
        r = programs.execute(dev, 1, [(0, 18)], params=b"needle")
        assert r.value == 2 and r.latency_ns > 0


def test_attaches_beside_the_seed_systems(objects):
    import nearflash

    with nearflash.Device(None, preset="cosmos-plus") as dev:
        for ext in ("issd", "recssd", "programs"):
            dev.attach(ext)
        programs.load(dev, 1, objects["grep"])
        programs.activate(dev, 1)
        programs.write_slm(dev, 0, b"needle")
        assert programs.execute(dev, 1, [(0, 6)], params=b"needle").value == 1


def test_device_defined_fp32_sls_matches_numpy(dev):
    rng = np.random.default_rng(7)
    rows, dim = 500, 16
    table = rng.standard_normal((rows, dim)).astype(np.float32)
    lengths = np.array([4, 0, 9, 1], dtype=np.uint32)
    idx = rng.integers(0, rows, int(lengths.sum()), dtype=np.uint32)
    pind = programs.device_program(dev, "sls_f32")
    with pytest.raises(ProgramError, match="Not Downloadable"):
        programs.load(dev, pind, b"x" * 64)
    parts = [table.tobytes(), idx.tobytes(), lengths.tobytes()]
    at, ranges = 0, []
    for p in parts:
        programs.write_slm(dev, at, p)
        ranges.append((at, len(p)))
        at += len(p)
    ranges.append((at, len(lengths) * dim * 4))
    programs.activate(dev, pind)
    r = programs.execute(dev, pind, ranges, cparam1=dim)
    assert r.value == len(lengths) and r.instructions == 0
    got = programs.read_slm(dev, at, len(lengths) * dim * 4).view("<f4").reshape(len(lengths), dim)
    offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    want = np.stack([table[idx[offs[b]:offs[b + 1]]].sum(0) for b in range(len(lengths))])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(InvalidArgument):
        programs.device_program(dev, "no_such")


def test_refusals_carry_the_device_reason_naming_the_field_and_its_range(dev):
    slm = programs.identify(dev)["slm_bytes"]
    cases = [
        (lambda: programs.read_slm(dev, slm - 2, 4), rf"Memory Read \(SB \(CDW10-11\) {slm - 2} \+ 4 bytes: beyond the {slm}-byte SLM"),
        (lambda: programs.activate(dev, 2), r"Program Activation Management \(PIND 2: no program is loaded there\)"),
        (lambda: programs.create_range_set(dev, [(0, 8), (4, 8)]), r"memory ranges 0\.\.8 and 4\.\.12 overlap"),
        (lambda: programs.delete_range_set(dev, 77), r"RSID 77 names no memory range set \(none exists\)"),
        (lambda: programs.copy_to_slm(dev, 0, dev.lbas - 1, 2), r"source range 0: 2 blocks from LBA \d+: beyond the namespace"),
    ]
    for call, words in cases:
        with pytest.raises(NvmeError, match=words):
            call()
    assert programs.identify(dev)["range_sets"] == 0, "the refusals changed nothing"
