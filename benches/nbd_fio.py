"""fio's nbd engine against `nearflash serve` beside nbdkit's own memory plugin, in the same run.

Two checks of docs/nbd.md and docs/workloads.md (issue 24):

1. **Pace none, throughput and depth**: 4 KiB random reads at iodepth 32 (``--iodepth``) for ``--runtime`` seconds,
   against nbdkit's ``memory`` plugin (a RAM disk of the same size, the same worker threads) and against
   `nearflash serve --pace none` (a preconditioned timing-only cosmos-plus), in turn (each round starting one server
   later), ``--repeats`` times each, for each ``--lag`` (``--reaction-lag``; none given: the server's default) and,
   with ``--serial``, `--serial`. With ``--versus LIB``, a second build of the NBD plugin
   (``NEARFLASH_NBD_PLUGIN=LIB``, on its own copy of the image) runs in the same rounds: the A/B of a change to the
   serving path, as the pairwise ratio of the two builds' rates and user CPU per request.
   nbdkit's ``null`` plugin (reads return zeros; nothing stored, nothing looked up) runs in the same rounds as the
   client's ceiling: what fio drives through nbdkit when the server does no work, so a ratio near 1.0 to it says
   the client, not the server, sets the rate.
   Reported: fio's IOPS on each, the ratio nearflash / memory (of the medians and of the best runs), the queue depth
   the device served fio's connection at in virtual time (``pacing.last_connection.mean_queue_depth``), the commands
   in flight at each submission, and the submissions in the event loop's past; per request, each server's user and
   system CPU, its task switches (all, and the involuntary ones; `perf stat` over the run, where perf is permitted)
   and fio's own CPU (the rate on shared cores follows the sum of fio's and the server's CPU per request).
2. **Pace realtime, keeping time**: fio at QD 1, 4 and 16 against `nearflash serve --pace realtime` on cosmos-plus
   with ``nand.t_read`` = each of ``--t-read`` (slow enough for this machine, then faster until it cannot keep up):
   fio's IOPS and mean latency beside the device's own for fio's connection (the status file's
   ``pacing.last_connection``), and the late completions (replies delivered 20 us or more after their modelled
   completion, with the mean and worst delay).

Both servers and every fio run share the machine: ratios, not absolute rates, are the result (load average saved).
With ``--pin`` (the default where this process may run on two CPUs or more) fio runs on the first allowed CPU and
each server on the second, the same for both servers: the client and the server do not take turns on one core and
the kernel does not migrate them, which moves every run's rate by more than the servers differ (``--no-pin``:
wherever the kernel puts them, as in the runs before 2026-12-01's).
Results: ``out/bench/nbd_fio.{json,md}``.

    .venv/bin/python benches/nbd_fio.py [--runtime 5] [--repeats 3] [--lag 1 2 4 8] [--serial] [--versus LIB]
                                        [--t-read 2ms 500us 100us] [--quick] [--skip realtime]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out" / "bench"
PY = sys.executable
#: 59.5 GiB cosmos-plus (8 channels, 128 blocks per plane), filled so that every read goes to flash.
DEVICE = ["--set", "channels=8", "--set", "blocks_per_plane=128"]


def fio(uri: str, iodepth: int, runtime: float, out: Path, size: str = "8g") -> dict[str, float]:
    """A fio run; its IOPS, mean latency, I/O count, and its own CPU time per I/O (the other half of the work on
    the shared cores: the rate follows the sum of fio's and the server's CPU per request)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([*PIN["fio"], "fio", "--name=r", "--ioengine=nbd", f"--uri={uri}", "--rw=randread", "--bs=4k",
                        f"--size={size}", f"--iodepth={iodepth}", "--time_based", f"--runtime={runtime}",
                        "--randseed=11", "--output-format=json", f"--output={out}"], capture_output=True, text=True,
                       timeout=runtime + 120)
    if p.returncode != 0:
        raise SystemExit(f"fio failed: {p.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    j = json.loads(out.read_text())["jobs"][0]["read"]
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / max(j["total_ios"], 1) * 1e6
    return {"iops": j["iops"], "mean_us": j["lat_ns"]["mean"] / 1e3, "ios": j["total_ios"], "fio_cpu_us_per_io": cpu}


class switches:
    """Task switches of a process's threads (those that start later too: nbdkit starts its worker threads per
    connection and ends them when it closes, so /proc/PID/task/*/status before and after a run misses them) while
    the block runs, counted by `perf stat` (software events and a tracepoint: no hardware counters needed): all
    switches away from its threads, and the involuntary ones (the thread still runnable: preempted or yielding).
    `counts` stays empty where perf is missing or not permitted."""

    def __init__(self, pid: int):
        self.pid, self.counts = pid, {}

    def __enter__(self) -> "switches":
        fd, name = tempfile.mkstemp(prefix="nf-perf-", suffix=".csv")
        os.close(fd)
        self.out = Path(name)
        self.proc = None
        if shutil.which("perf"):
            self.proc = subprocess.Popen(["perf", "stat", "-x,", "-o", str(self.out), "-e", "context-switches",
                                          "-e", "sched:sched_switch", "--filter", "prev_state == 0", "-p",
                                          str(self.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)  # attached to every thread before the run starts
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        names = {"context-switches": "switches", "sched:sched_switch": "involuntary"}
        for line in self.out.read_text().splitlines():
            f = line.split(",")
            if len(f) > 2 and f[2] in names and f[0].isdigit():
                self.counts[names[f[2]]] = int(f[0])
        if len(self.counts) < 2:
            self.counts = {}
        self.out.unlink(missing_ok=True)


#: Command prefixes that pin fio and the servers to their CPUs (`pin`); empty: not pinned.
PIN: dict[str, list[str]] = {"fio": [], "server": []}


def pin(on: Optional[bool]) -> Optional[dict[str, int]]:
    """With ON (None: where two CPUs are allowed), fio on the first CPU this process may use and the servers on the
    second; the CPUs chosen, or None when not pinned."""
    cpus = sorted(os.sched_getaffinity(0))
    if on is None:
        on = len(cpus) >= 2 and shutil.which("taskset") is not None
    if not on:
        return None
    if len(cpus) < 2:
        raise SystemExit(f"--pin needs two CPUs; this process may use {len(cpus)} ({cpus})")
    if shutil.which("taskset") is None:
        raise SystemExit("--pin needs taskset (util-linux)")
    PIN["fio"], PIN["server"] = (["taskset", "-c", str(c)] for c in cpus[:2])
    return {"fio": cpus[0], "server": cpus[1]}


class Server:
    def __init__(self, argv: list[str], pidfile: Path, sock: Path, env: Optional[dict[str, str]] = None):
        self.proc = subprocess.Popen([*PIN["server"], *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.uri = f"nbd+unix:///?socket={sock}"
        deadline = time.monotonic() + 120
        while not pidfile.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server did not start: {argv}: {self.proc.stderr.read()}")
            time.sleep(0.05)

    def cpu_s(self) -> tuple[float, float]:
        """CPU time the server has used so far (all its threads, living and exited), user and system, in seconds."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick

    def measure(self, iodepth: int, runtime: float, out: Path) -> dict[str, Any]:
        """A fio run against this server, with the server's CPU time per request, user and system (figures that the
        machine's load moves far less than the rate: both servers' rates are bound by CPUs shared with other work),
        and its task switches per request (`switches`)."""
        user, sys_ = self.cpu_s()
        with switches(self.proc.pid) as sw:
            r = fio(self.uri, iodepth, runtime, out)
        user2, sys2 = self.cpu_s()
        n = max(r["ios"], 1)
        r["server_user_us_per_io"] = (user2 - user) / n * 1e6
        r["server_sys_us_per_io"] = (sys2 - sys_) / n * 1e6
        r["server_cpu_us_per_io"] = r["server_user_us_per_io"] + r["server_sys_us_per_io"]
        if sw.counts:
            r["switches_per_io"] = sw.counts["switches"] / n
            r["involuntary_per_io"] = sw.counts["involuntary"] / n
        return r

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


def serve(image: Path, sock: Path, pace: str, threads: int, mode: tuple[str, ...] = (),
          plugin: Optional[Path] = None) -> Server:
    """`nearflash serve` on IMAGE; PLUGIN: that build of the NBD plugin library instead of the tree's."""
    env = {**os.environ, "NEARFLASH_NBD_PLUGIN": str(plugin)} if plugin else None
    return Server([PY, "-m", "nearflash.cli", "serve", str(image), "--unix", str(sock), "--pace", pace,
                   "--threads", str(threads), *mode], image / "serve.pid", sock, env)


def status(image: Path, settle: float = 1.0) -> dict[str, Any]:
    """The served device's status once it has caught up with the last requests (rewritten within ~0.4 s)."""
    time.sleep(settle)
    return json.loads((image / "serve.json").read_text())


def between(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    """The device's own figures for the fio run between two status snapshots: its connection (the last closed) as
    the device saw it, the queue depth its commands met, and the replies that were late."""
    conn = b["pacing"]["last_connection"]
    pa, pb = a["pacing"], b["pacing"]
    cmds = pb["commands"] - pa["commands"]
    in_flight = (pb["mean_in_flight_at_submission"] * pb["commands"]
                 - pa["mean_in_flight_at_submission"] * pa["commands"]) / max(cmds, 1)
    replies = pb["replies"] - pa["replies"]
    late_mean = (pb["mean_late_us"] * pb["replies"] - pa["mean_late_us"] * pa["replies"]) / max(replies, 1)
    return {"reads": conn["requests"], "iops": conn["iops"], "mean_us": conn["mean_latency_us"],
            "queue_depth": conn["mean_queue_depth"], "in_flight_at_submission": in_flight, "commands": cmds,
            "late_submissions": pb["late_submissions"] - pa["late_submissions"],
            "late": pb["late"] - pa["late"], "replies": replies, "mean_late_us": late_mean,
            "max_late_us": pb["max_late_us"]}


def create(image: Path, *extra: str) -> None:
    """A filled timing-only image, its tables read once (the mapping table and OOB area are memory-mapped files:
    cold, every random read would wait for the host's disk, which the memory plugin never does)."""
    p = subprocess.run([PY, "-m", "nearflash.cli", "create", str(image), "--timing-only", "--precondition", "1.0",
                        *DEVICE, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"create failed: {p.stderr}")
    for f in image.glob("*.bin"):
        with open(f, "rb") as r:
            while r.read(1 << 24):
                pass


def per_io(r: dict[str, Any]) -> str:
    """A run's server costs per request, in words."""
    text = f"{r['server_cpu_us_per_io']:.1f} us CPU each: {r['server_user_us_per_io']:.1f} user, {r['server_sys_us_per_io']:.1f} system"
    text += f"; fio {r['fio_cpu_us_per_io']:.1f} us"
    if "switches_per_io" in r:
        text += f"; {r['switches_per_io']:.2f} task switches, {r['involuntary_per_io']:.2f} involuntary"
    return text


def throughput(work: Path, iodepth: int, runtime: float, repeats: int, threads: int,
               modes: list[tuple[str, ...]], versus: Optional[Path] = None) -> list[dict[str, Any]]:
    """For each serving mode (`nearflash serve` options), its runs interleaved with the memory plugin's (and with
    those of the plugin build VERSUS, on its own image)."""
    image = work / "img"
    create(image)
    if versus:
        create(work / "img-versus")
    size = json.loads(subprocess.run([PY, "-m", "nearflash.cli", "info", str(image), "--json"], capture_output=True,
                                     text=True).stdout)["identify"]
    nbytes = size["namespace_lbas"] * size["lba_bytes"]
    mem, null = (Server(["nbdkit", "--foreground", "-U", str(work / f"{p}.sock"), "-P", str(work / f"{p}.pid"),
                         "--threads", str(threads), p, str(nbytes)], work / f"{p}.pid", work / f"{p}.sock")
                  for p in ("memory", "null"))
    results = []
    try:
        for m, mode in enumerate(modes):
            name = " ".join(mode) or "default"
            print(f" nearflash serve --pace none {name}", flush=True)
            servers = {"memory": (mem, None), "null": (null, None)}
            try:
                servers["nearflash"] = (serve(image, work / f"nf{m}.sock", "none", threads, mode), image)
                if versus:
                    img = work / "img-versus"
                    servers["versus"] = (serve(img, work / f"vs{m}.sock", "none", threads, mode, versus), img)
                runs = {k: [] for k in servers}
                for i in range(repeats):
                    load = os.getloadavg()[0]
                    # Each round starts one server later (each server in each position over the rounds).
                    keys = list(servers)
                    order = keys[i % len(keys):] + keys[:i % len(keys)]
                    for k in order:
                        runs[k].append(measure(*servers[k], iodepth, runtime, work / "fio.json", load))
                    print(f"  run {i + 1} (load {load:.1f}): " + ", ".join(run_words(k, runs[k][-1]) for k in servers),
                          flush=True)
            finally:
                for srv, img in servers.values():
                    if img is not None:
                        srv.stop()
            results.append(summary(name, iodepth, runtime, threads, runs, versus))
    finally:
        mem.stop()
        null.stop()
    return results


def measure(srv: Server, image: Optional[Path], iodepth: int, runtime: float, out: Path, load: float) -> dict[str, Any]:
    """One fio run against a server; for a nearflash server (IMAGE given), the device's own figures for it."""
    before = status(image, 0.5) if image else None
    r = srv.measure(iodepth, runtime, out)
    if image:
        r["device"] = between(before, status(image))
    r["load_average"] = load
    return r


def run_words(name: str, r: dict[str, Any]) -> str:
    text = f"{name} {r['iops']:,.0f} IOPS ({per_io(r)})"
    if "device" in r:
        d = r["device"]
        text += (f", device queue depth {d['queue_depth']:.1f} (in flight at submission "
                 f"{d['in_flight_at_submission']:.1f}, {d['late_submissions']:,} of {d['commands']:,} late)")
    return text


def summary(name: str, iodepth: int, runtime: float, threads: int, runs: dict[str, list[dict[str, Any]]],
            versus: Optional[Path]) -> dict[str, Any]:
    """One serving mode's runs: medians, best runs and ratios to the memory plugin (and between the two builds)."""
    med = {k: statistics.median(x["iops"] for x in v) for k, v in runs.items()}
    best = {k: max(x["iops"] for x in v) for k, v in runs.items()}
    t = {"mode": name, "iodepth": iodepth, "runtime_s": runtime, "threads": threads, "runs": runs,
         "median_iops": med, "best_iops": best, "ratio_median": med["nearflash"] / med["memory"],
         "ratio_best": best["nearflash"] / best["memory"],
         "to_ceiling": {k: med[k] / med["null"] for k in ("memory", "nearflash")},
         "device_queue_depth": statistics.median(r["device"]["queue_depth"] for r in runs["nearflash"]),
         "late_submissions": sum(r["device"]["late_submissions"] for r in runs["nearflash"]),
         "cpu_us_per_io": {k: statistics.median(x["server_cpu_us_per_io"] for x in v) for k, v in runs.items()},
         **{f"{f}_per_io": {k: statistics.median(x[g] for x in v) for k, v in runs.items()}
            for f, g in (("user_us", "server_user_us_per_io"), ("sys_us", "server_sys_us_per_io"),
                         ("fio_cpu_us", "fio_cpu_us_per_io"),
                         ("switches", "switches_per_io"), ("involuntary", "involuntary_per_io"))
            if all(g in x for v in runs.values() for x in v)},
         "load_average": [x["load_average"] for x in runs["nearflash"]]}
    if versus:
        pairs = [b["iops"] / a["iops"] for a, b in zip(runs["nearflash"], runs["versus"])]
        user = [b["server_user_us_per_io"] / a["server_user_us_per_io"]
                for a, b in zip(runs["nearflash"], runs["versus"]) if a["server_user_us_per_io"] > 0]
        t["versus"] = {"plugin": str(versus), "ratio_to_memory": med["versus"] / med["memory"],
                       "ratio_median": med["versus"] / med["nearflash"], "pairwise": pairs,
                       "pairwise_median": statistics.median(pairs),
                       "user_cpu_pairwise_median": statistics.median(user) if user else None}
    return t


def realtime(work: Path, t_read: str, qds: list[int], runtime: float, threads: int) -> list[dict[str, Any]]:
    image = work / f"rt-{t_read}"
    create(image, "--set", f"t_read={t_read}")
    s = serve(image, work / f"rt-{t_read}.sock", "realtime", threads)
    rows = []
    try:
        for qd in qds:
            before = status(image, 0.5)
            f = fio(s.uri, qd, runtime, work / "fio.json")
            d = between(before, status(image))
            row = {"t_read": t_read, "qd": qd, "fio": f, "device": d,
                   "iops_ratio": f["iops"] / d["iops"] if d["iops"] else None,
                   "latency_ratio": f["mean_us"] / d["mean_us"] if d["mean_us"] else None}
            rows.append(row)
            print(f"  t_read {t_read} QD {qd}: fio {f['iops']:,.0f} IOPS {f['mean_us']:,.1f} us | device "
                  f"{d['iops']:,.0f} IOPS {d['mean_us']:,.1f} us | late {d['late']} of {d['replies']}", flush=True)
    finally:
        s.stop()
    return rows


def cpu_cell(t: dict[str, Any], k: str) -> str:
    cell = f"{t['cpu_us_per_io'][k]:.1f}"
    if "user_us_per_io" in t:
        cell += f" ({t['user_us_per_io'][k]:.1f} + {t['sys_us_per_io'][k]:.1f})"
    return cell


def fio_cell(t: dict[str, Any]) -> str:
    f = t.get("fio_cpu_us_per_io")
    return f"{f['memory']:.1f} / {f['nearflash']:.1f} us" if f else "-"


def switch_cell(t: dict[str, Any]) -> str:
    if "switches_per_io" not in t:
        return "-"
    sw, inv = t["switches_per_io"], t["involuntary_per_io"]
    return f"{sw['memory']:.2f} ({inv['memory']:.2f}) / {sw['nearflash']:.2f} ({inv['nearflash']:.2f})"


def markdown(r: dict[str, Any]) -> str:
    lines = ["# fio over NBD: nearflash serve beside nbdkit's memory plugin", "",
             f"Run {r['when']} on `{r['host']}`, load average {r['load_average'][0]:.1f} (2 shared cores); "
             + (f"fio on CPU {r['pinned']['fio']}, both servers on CPU {r['pinned']['server']}." if r.get("pinned")
                else "fio and the servers not pinned."), ""]
    ts = r.get("throughput") or []
    if ts:
        t = ts[0]
        lines += [f"## Pace none: 4 KiB random reads, iodepth {t['iodepth']}, {t['runtime_s']:g} s per run, "
                  f"{len(t['runs']['memory'])} runs each, in turn with the memory and null plugins", "",
                  "| `nearflash serve --pace none` | memory plugin, median IOPS (runs) | nearflash, median IOPS (runs) | "
                  "ratio of medians (best runs) | queue depth in virtual time (runs) | late submissions | "
                  "server CPU per request, memory / nearflash (medians; user + system) | "
                  "task switches per request, memory / nearflash (involuntary) | fio's CPU per request, memory / "
                  "nearflash | null plugin (the client's ceiling), median IOPS; memory / nearflash to it | "
                  "load average |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in ts:
        each = {k: ", ".join(f"{x['iops']:,.0f}" for x in t["runs"][k]) for k in ("memory", "nearflash")}
        depths = ", ".join(f"{x['device']['queue_depth']:.1f}" for x in t["runs"]["nearflash"])
        lines.append(f"| {t['mode']} | {t['median_iops']['memory']:,.0f} ({each['memory']}) | "
                     f"{t['median_iops']['nearflash']:,.0f} ({each['nearflash']}) | **{t['ratio_median']:.2f}x** "
                     f"({t['ratio_best']:.2f}x) | {t['device_queue_depth']:.1f} ({depths}) | {t['late_submissions']:,} | "
                     f"{cpu_cell(t, 'memory')} / {cpu_cell(t, 'nearflash')} us | {switch_cell(t)} | "
                     f"{fio_cell(t)} | {t['median_iops']['null']:,.0f}; {t['to_ceiling']['memory']:.2f} / "
                     f"{t['to_ceiling']['nearflash']:.2f} | "
                     f"{min(t['load_average']):.1f}-{max(t['load_average']):.1f} |")
    lines += [""] if ts else []
    vs = [t for t in ts if "versus" in t]
    if vs:
        lines += [f"## A second plugin build in the same rounds: `{vs[0]['versus']['plugin']}`", "",
                  "| `nearflash serve --pace none` | this tree's build, median IOPS | the second build, median IOPS "
                  "(runs) | second / this: ratio of medians | pairwise (median, range) | server user CPU per request, "
                  "this / second (medians; pairwise ratio) | second build / memory plugin |",
                  "|---|---|---|---|---|---|---|"]
        for t in vs:
            v, med = t["versus"], t["median_iops"]
            each = ", ".join(f"{x['iops']:,.0f}" for x in t["runs"]["versus"])
            user = t.get("user_us_per_io")
            user_cell = (f"{user['nearflash']:.2f} / {user['versus']:.2f} us ({v['user_cpu_pairwise_median']:.3f})"
                         if user and v["user_cpu_pairwise_median"] else "-")
            lines.append(f"| {t['mode']} | {med['nearflash']:,.0f} | {med['versus']:,.0f} ({each}) | "
                         f"**{v['ratio_median']:.3f}** | {v['pairwise_median']:.3f} ({min(v['pairwise']):.2f}-"
                         f"{max(v['pairwise']):.2f}) | {user_cell} | {v['ratio_to_memory']:.2f}x |")
        lines.append("")
    if r.get("realtime"):
        lines += ["## Pace realtime: fio beside the device's own figures", "",
                  "| t_read | QD | fio IOPS | device IOPS | ratio | fio mean us | device mean us | ratio | late / replies | mean / worst late us |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["realtime"]:
            f, d = row["fio"], row["device"]
            lines.append(f"| {row['t_read']} | {row['qd']} | {f['iops']:,.0f} | {d['iops']:,.0f} | "
                         f"{row['iops_ratio']:.3f} | {f['mean_us']:,.1f} | {d['mean_us']:,.1f} | {row['latency_ratio']:.3f} | "
                         f"{d['late']} / {d['replies']} | {d['mean_late_us']:,.0f} / {d['max_late_us']:,.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iodepth", type=int, default=32)
    ap.add_argument("--runtime", type=float, default=5.0, help="seconds per fio run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=64, help="nbdkit worker threads per connection (both servers)")
    ap.add_argument("--t-read", nargs="*", default=["20ms", "5ms", "2ms"], help="realtime: nand.t_read values")
    ap.add_argument("--qds", type=int, nargs="*", default=[1, 4, 16], help="realtime: fio queue depths")
    ap.add_argument("--quick", action="store_true", help="2 s runs, 1 repeat")
    ap.add_argument("--skip", choices=["throughput", "realtime"], help="leave out one of the two checks")
    ap.add_argument("--lag", type=int, nargs="*", default=[], help="pace none: serve with each --reaction-lag N")
    ap.add_argument("--serial", action="store_true", help="pace none: also serve with --serial")
    ap.add_argument("--versus", type=Path, metavar="LIB",
                    help="pace none: also serve with this build of the NBD plugin library, in the same rounds (A/B)")
    ap.add_argument("--pin", action=argparse.BooleanOptionalAction, default=None,
                    help="fio on one CPU, the servers on another (default: where two CPUs are allowed)")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    if a.versus is not None and not a.versus.is_file():
        ap.error(f"--versus {a.versus}: no such file (expected a built libnearflash_nbd.so)")
    for tool in ("nbdkit", "fio"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed")
    if a.quick:
        a.runtime, a.repeats = 2.0, 1
    result: dict[str, Any] = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "host": os.uname().nodename,
                              "load_average": os.getloadavg(), "pinned": pin(a.pin)}
    with tempfile.TemporaryDirectory(prefix="nf-nbdfio-", dir="/tmp") as w:
        work = Path(w)
        if a.skip != "throughput":
            print(f"pace none: fio iodepth {a.iodepth}, memory plugin vs nearflash", flush=True)
            modes = [("--reaction-lag", str(n)) for n in a.lag] or [()]
            modes += [("--serial",)] if a.serial else []
            result["throughput"] = throughput(work, a.iodepth, a.runtime, a.repeats, a.threads, modes,
                                              a.versus.resolve() if a.versus else None)
        result["realtime"] = []
        for t in a.t_read if a.skip != "realtime" else []:
            print(f"pace realtime, t_read {t}", flush=True)
            result["realtime"] += realtime(work, t, a.qds, a.runtime, a.threads)
    result["load_average_after"] = os.getloadavg()
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "nbd_fio.json").write_text(json.dumps(result, indent=1))
    (a.out / "nbd_fio.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
