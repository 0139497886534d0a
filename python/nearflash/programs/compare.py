"""One program, two paths, on one device: in storage (Memory Copy of the input from flash into SLM, then Execute
Program on the controller) and on the host (ordinary Reads of the same blocks, then the same program on a host
core). Each path runs in its own measurement window, so its virtual time and energy are its own."""

from __future__ import annotations

from typing import Any, Optional

from nearflash.programs import api


def in_storage(dev: Any, program: bytes, lba: int, nblocks: int, nbytes: int, *, out_bytes: int = 0,
               params: bytes = b"", cparam1: int = 0, cparam2: int = 0, pind: int = 1) -> dict[str, Any]:
    """Loads and activates ``program`` in slot ``pind``, copies ``nblocks`` from ``lba`` into SLM offset 0, runs
    it over the first ``nbytes`` (range 0) and an ``out_bytes`` output range (range 1) placed after the input,
    and reads the output back. Load and activation are outside the measurement window."""
    api.load(dev, pind, program)
    api.activate(dev, pind)
    dev.reset_stats()
    start = dev.now_ns
    api.copy_to_slm(dev, 0, lba, nblocks)
    block = dev.lba_bytes
    out_at = nblocks * block
    ranges = [(0, nbytes)] + ([(out_at, out_bytes)] if out_bytes else [])
    r = api.execute(dev, pind, ranges, params=params, cparam1=cparam1, cparam2=cparam2)
    out = api.read_slm(dev, out_at, out_bytes) if out_bytes else None
    report = dev.report()
    return {
        "value": r.value, "instructions": r.instructions, "time_ns": dev.now_ns - start,
        "execute_ns": r.latency_ns, "energy_j": report.total_energy_j, "output": out,
    }


def on_host(dev: Any, program: bytes, lba: int, nblocks: int, nbytes: int, *, out_bytes: int = 0, params: bytes = b"",
            cparam1: int = 0, cparam2: int = 0) -> dict[str, Any]:
    """The host path over the same blocks (the program sees their first ``nbytes`` as range 0, and an
    ``out_bytes`` output range as range 1)."""
    dev.reset_stats()
    start = dev.now_ns
    r = api.host_run(dev, program, [(lba, nblocks)], params, cparam1, cparam2, lengths=[nbytes],
                     outputs=[out_bytes] if out_bytes else [])
    report = dev.report()
    return {"value": r["result"], "fault": r["fault"], "instructions": r["instructions"],
            "time_ns": dev.now_ns - start, "energy_j": report.total_energy_j,
            "output": r["outputs"][0] if r["outputs"] else None}


def compare(dev: Any, program: bytes, lba: int, nblocks: int, nbytes: Optional[int] = None, **kw: Any) -> dict[str, Any]:
    """Both paths and their ratios (host / in-storage: above 1 means in-storage is faster or cheaper)."""
    n = nbytes if nbytes is not None else nblocks * dev.lba_bytes
    dev_r = in_storage(dev, program, lba, nblocks, n, **kw)
    host_kw = {k: v for k, v in kw.items() if k in ("params", "cparam1", "cparam2", "out_bytes")}
    host_r = on_host(dev, program, lba, nblocks, n, **host_kw)
    return {
        "in_storage": dev_r, "host": host_r,
        "time_ratio": host_r["time_ns"] / max(dev_r["time_ns"], 1),
        "energy_ratio": host_r["energy_j"] / max(dev_r["energy_j"], 1e-30),
    }
