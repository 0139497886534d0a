"""k-means over several iterations and seeds (the paper's Fig. 7 runs one Map/Reduce pass): each iteration is one
job whose centroids are the previous job's output, in storage (iSSD-XL, stream processors) and on the host path of
the same device (conventional), every step checked equal to the host library's Lloyd iterations; the speed-up is
reported per seed with its spread."""

from __future__ import annotations

from statistics import mean, pstdev

from nearflash.experiment import Experiment, Options
from nearflash.issd import agent, data, kernels
from nearflash.issd.experiments.common import common_notes

PAGE = 8192
DIM, K = 3, 4


def one_seed(seed: int, points: int, iterations: int, n_ch: int) -> dict:
    pts = data.cluster_points(points, DIM, K, seed=seed)
    pages = data.pack_records(pts, 4 * DIM, PAGE)
    start = pts[:K].astype("int64")
    host_steps = kernels.kmeans(start, pages, PAGE, max_iterations=iterations)
    dev, setup = agent.device("iSSD-XL", n_ch=n_ch, seed=seed)
    try:
        ext = agent.write_input(dev, 0, pages, PAGE)
        # every in-storage iteration, then every conventional one (each strategy's iterations back to back)
        outs = {}
        for strategy in ("in_storage", "conventional"):
            cents, outs[strategy] = start.tolist(), []
            for it in range(len(host_steps)):
                spec = kernels.spec("kmeans", dim=DIM, centroids=cents)
                o = agent.run(dev, spec, ext, PAGE, strategy, accelerate=setup["accelerate"] and strategy == "in_storage")
                if o["centroids"].tolist() != host_steps[it]["centroids"].tolist():
                    raise AssertionError(f"seed {seed} iteration {it}: {strategy} differs from the host's Lloyd step")
                outs[strategy].append(o)
                cents = o["centroids"].tolist()
        steps = []
        for it, (d, c) in enumerate(zip(outs["in_storage"], outs["conventional"])):
            if d["encoded"] != c["encoded"]:
                raise AssertionError(f"seed {seed} iteration {it}: in-storage and conventional answers differ")
            steps.append({"iteration": it, "in_storage_s": d["seconds"], "conventional_s": c["seconds"],
                          "moved": int(d["moved"]), "sse": int(d["sse"])})
    finally:
        dev.close()
    t_dev = sum(s["in_storage_s"] for s in steps)
    t_host = sum(s["conventional_s"] for s in steps)
    return {"seed": seed, "iterations": len(steps), "converged": steps[-1]["moved"] == 0, "in_storage_s": t_dev,
            "conventional_s": t_host, "speedup": t_host / t_dev, "steps": steps}


def run_kmeans(exp: Experiment, opts: Options) -> None:
    seeds = [opts.seed + i for i in range(2 if opts.quick else 5)]
    iterations = 3 if opts.quick else 10
    points = 50_000 if opts.quick else 2_000_000  # 0.6 / 24 MB: fewer and the per-job fill and LOAD dominate
    n_ch = 32  # Fig. 7: iSSD-XL overtakes the best host on k-means from 24 FMCs
    runs = [one_seed(s, points, iterations, n_ch) for s in seeds]
    exp.table(
        f"k-means, {points} points of {DIM} int32 coordinates, {K} clusters, iSSD-XL at {n_ch} FMCs (stream processors) vs "
        "the host path of the same device (8 CPUs, 8 GB/s)",
        ["seed", "iterations", "converged", "in storage ms", "conventional ms", "speed-up", "final SSE"],
        [[r["seed"], r["iterations"], r["converged"], r["in_storage_s"] * 1e3, r["conventional_s"] * 1e3, r["speedup"],
          r["steps"][-1]["sse"]] for r in runs],
    )
    sp = [r["speedup"] for r in runs]
    exp.compare("k-means in storage / host over iterations: mean speed-up", mean(sp), None, "x",
                f"{len(seeds)} seeds, spread (std) {pstdev(sp):.3f}, min {min(sp):.2f}, max {max(sp):.2f}")
    exp.compare("k-means iterations checked equal to the host's Lloyd steps", sum(r["iterations"] for r in runs), None, "steps")
    fig, ax = exp.figure("kmeans", width=7, height=4)
    for r in runs:
        ax.plot([s["iteration"] for s in r["steps"]], [s["conventional_s"] / s["in_storage_s"] for s in r["steps"]], marker="o", label=f"seed {r['seed']}")
    ax.set_xlabel("iteration")
    ax.set_ylabel("speed-up (host time / in-storage time)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    exp.record("runs", runs)
    common_notes(exp)
    exp.note(
        "Each iteration is a separate job (LOAD + RUN): the device holds no state between iterations, so every pass "
        "reads the points from flash again, as the paper's single-pass model assumes per pass. Seeds change the points "
        "and hence the starting centroids (the first K points)."
    )
