"""Table 3 (precision@T with the plain and the two-hop graph layout) and the "37x fewer flash accesses" of Sec. 4.3,
on Fashion-MNIST with the shipped model: train images are the database, test images the queries."""

from __future__ import annotations

import time

import numpy as np

from nearflash.cognitive.data import fashion_mnist, load_model
from nearflash.cognitive.experiments.fig9 import COUNT_RULE
from nearflash.cognitive.host_int8 import Int8Network
from nearflash.experiment import Experiment, Options

PAPER_CIFAR = {200: (86.65, 85.49), 400: (86.58, 85.02), 600: (86.56, 84.75), 800: (86.51, 84.47), 1000: (86.54, 84.28)}
PAPER_IMAGENET = {200: (33.78, 30.66), 400: (33.77, 29.79), 600: (33.48, 29.13), 800: (32.89, 28.43), 1000: (31.83, 27.47)}
PAPER_ACCESS_RATIO = 37.0
#: The two-hop layout saves reads only where the plain layout's graph is many times the GSE's 16 on-chip page slots.
MIN_PLAIN_PAGES = 64


def run_table3(exp: Experiment, opts: Options) -> None:
    from nearflash import _native

    cog = _native.cognitive
    # --quick: every step on a database just above T = 200..400 (each image is hashed twice, int8 and float)
    db_n = int(opts.extra.get("db", 600 if opts.quick else 60000))
    q_n = int(opts.extra.get("queries", 50 if opts.quick else 2000))
    calibration = int(opts.extra.get("calibration", 200 if opts.quick else 1000))
    ts = [int(t) for t in str(opts.extra.get("ts", "200,400" if opts.quick else "200,400,600,800,1000")).split(",") if int(t) <= db_n]
    model = load_model(opts.extra.get("model"))
    db, db_labels = fashion_mnist("train", db_n)
    qs, q_labels = fashion_mnist("test", q_n)
    t0 = time.perf_counter()
    q8 = model.quantise(db[:calibration])
    net = Int8Network(q8)  # DLG-x's arithmetic in numpy/BLAS, equal bit for bit
    db_codes = net.hash(db)
    hash_s = time.perf_counter() - t0
    q_codes = net.hash(qs)
    agree = 1.0 - float(np.unpackbits((db_codes ^ model.hash(db)).view(np.uint8)).sum()) / (len(db) * model.bits)
    t1 = time.perf_counter()
    graph = cog.Graph(db_codes, model.bits, 25, opts.seed)
    knn_s = time.perf_counter() - t1
    rows = graph.precision_at(db_labels, q_codes, q_labels, ts)
    before = graph.precision_at(db_labels, q_codes, q_labels, ts, COUNT_RULE)
    exp.record("rows", rows)
    exp.record("rows_count_rule", before)
    exp.record("sizes", {"database": len(db), "queries": len(qs), "bits": model.bits, "calibration": min(calibration, len(db)),
                         "graph_pages_plain": graph.pages("plain"), "graph_pages_two_hop": graph.pages("two_hop")})
    exp.record("seconds", {"hash_database_int8": hash_s, "knn_graph": knn_s})
    exp.compare("int8 vs float hash bits equal (database)", 100 * agree, None, "%", "issue: >= 99%")
    plain_pages = graph.pages("plain")
    small = plain_pages < MIN_PLAIN_PAGES
    table, quality = [], []
    for r, b in zip(rows, before):
        t = r["t"]
        ratio = r["plain_pages"] / max(r["two_hop_pages"], 1e-9)
        table.append([t, 100 * r["brute_force"], 100 * r["plain"], 100 * r["two_hop"], 100 * (r["plain"] - r["two_hop"]),
                      r["plain_pages"], r["two_hop_pages"], ratio, 100 * r["plain_recall"], 100 * r["two_hop_recall"],
                      100 * r["plain_distance_recall"], 100 * r["two_hop_distance_recall"],
                      PAPER_CIFAR[t][0] if t in PAPER_CIFAR else None, PAPER_CIFAR[t][1] if t in PAPER_CIFAR else None,
                      PAPER_IMAGENET[t][0] if t in PAPER_IMAGENET else None, PAPER_IMAGENET[t][1] if t in PAPER_IMAGENET else None])
        quality.append([t, r["plain"] / r["brute_force"], r["two_hop"] / r["brute_force"], b["plain"] / b["brute_force"],
                        b["two_hop"] / b["brute_force"], r["two_hop_pages"], b["two_hop_pages"], r["plain_pages"],
                        b["plain_pages"], 100 * r["two_hop_distance_recall"], 100 * b["two_hop_distance_recall"]])
        if t in PAPER_CIFAR:
            exp.compare(f"precision loss two-hop vs plain @T={t}", 100 * (r["plain"] - r["two_hop"]),
                        PAPER_CIFAR[t][0] - PAPER_CIFAR[t][1], "points", "paper: CIFAR-10 (original - optimised)",
                        better="lower", comparable=10 * t <= len(db),
                        why_not_comparable=f"T = {t} is over a tenth of the {len(db)} images: both layouts return "
                                           "most of a class")
    mean_ratio = float(np.mean([row[7] for row in table]))
    exp.compare("flash pages per query, plain / two-hop", mean_ratio, PAPER_ACCESS_RATIO, "x", "mean over T",
                better="higher", comparable=not small,
                why_not_comparable=f"the plain layout has {plain_pages} pages, under {MIN_PLAIN_PAGES} (4x the GSE's "
                                   "16 page slots): the slots keep most of them, each is read about once, and the "
                                   "two-hop layout cannot save reads")
    worst = min(min(q[1], q[2]) for q in quality)
    exp.compare("graph search precision@T over brute force's, worst over T and layouts", worst, 0.97, "x",
                "issue 27's goal (at least 0.97), not a paper number", reference="check", better="higher")
    exp.table("Issue 27: precision@T over brute force's, the search rule (converged) and the count rule at 4T it "
              "replaced, with flash pages per query and recall (ties interchangeable)",
              ["T", "plain", "two-hop", "plain (count 4T)", "two-hop (count 4T)", "pages two-hop", "pages two-hop (count 4T)",
               "pages plain", "pages plain (count 4T)", "recall two-hop %", "recall two-hop % (count 4T)"], quality)
    exp.table("Precision@T (%) and flash pages per query (Fashion-MNIST ours; CIFAR-10 and ImageNet from the paper)",
              ["T", "brute force", "plain", "two-hop", "loss", "pages plain", "pages two-hop", "plain/two-hop",
               "recall plain (ids)", "recall two-hop (ids)", "recall plain (ties)", "recall two-hop (ties)", "CIFAR orig.",
               "CIFAR opt.", "ImageNet orig.", "ImageNet opt."], table)
    exp.note("Plain layout: one record per vertex [v, K neighbours] (id 32 bits + code), 63 per 16 KiB page, the "
             "paper's 250-byte neighbourhood plus the vertex; two-hop layout: Fig. 6, one page per vertex holding it, "
             "its K neighbours and their K neighbours each (6510 B, Eq. 6: 625 x 10 B < 16 KiB).")
    exp.note("Search: 32 seeded entry vertices (codes kept on chip); the termination counter stops when the next "
             "vertex to expand is no nearer than the L-th nearest held, L = max(T, 32) (issue 27; the count rule at "
             "4T held vertices it replaced is shown beside); V_final = 12 (Eq. 5), 16 on-chip page slots. The paper "
             "gives neither the entry count nor the threshold.")
    exp.note("Precision@T is over the returned ids (label equal to the query's); recall is against brute force's "
             "top-T by Hamming distance, as id sets (ties at the cut count as misses) and with ties interchangeable "
             "(an id no farther than brute force's T-th counts).")
    fig, ax = exp.figure("table3_precision", ncols=2, width=11)
    tt = [r[0] for r in table]
    ax[0].plot(tt, [r[1] for r in table], "k--", label="brute force")
    ax[0].plot(tt, [r[2] for r in table], "o-", label="graph, plain")
    ax[0].plot(tt, [r[3] for r in table], "s-", label="graph, two-hop")
    ax[0].set_xlabel("T")
    ax[0].set_ylabel("precision@T (%)")
    ax[0].legend()
    ax[0].set_title(f"Fashion-MNIST, {len(db)} items, {len(qs)} queries")
    ax[1].plot(tt, [r[5] for r in table], "o-", label="plain")
    ax[1].plot(tt, [r[6] for r in table], "s-", label="two-hop")
    ax[1].set_xlabel("T")
    ax[1].set_ylabel("flash pages per query")
    ax[1].set_yscale("log")
    ax[1].legend()
