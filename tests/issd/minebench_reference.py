"""numpy references of the NU-MineBench kernels (naive_bayes, scalparc, hop), written from the algorithms'
definitions with the kernels' arithmetic order, for tests/issd/test_minebench_*.py."""

import math

import numpy as np


def nb_reference(recs, attributes, classes, values):
    x, y = recs[:, :attributes].astype(np.int64), recs[:, attributes].astype(np.int64)
    class_counts = np.bincount(y, minlength=classes).astype(np.uint64)
    counts = np.zeros((classes, attributes, values), np.uint64)
    for a in range(attributes):
        np.add.at(counts, (y, a, x[:, a]), 1)
    return class_counts, counts


def nb_predict(recs, attributes, class_counts, counts):
    """Laplace-smoothed log posterior, attributes summed in order (the kernel's order), ties to the lowest class."""
    classes, _, values = counts.shape
    n = float(sum(float(c) for c in class_counts))
    x = recs[:, :attributes].astype(np.int64)
    scores = np.empty((len(recs), classes))
    for c in range(classes):
        prior = math.log((float(class_counts[c]) + 1.0) / (n + classes))
        table = np.array([[math.log((float(counts[c, a, v]) + 1.0) / (float(class_counts[c]) + values))
                           for v in range(values)] for a in range(attributes)])
        s = np.full(len(recs), prior)
        for a in range(attributes):
            s = s + table[a, x[:, a]]
        scores[:, c] = s
    return scores.argmax(axis=1)


def gini_rows(counts, n):
    """1 - sum_c (counts_c / n)^2 summed over classes in order, 0 where n == 0."""
    g = np.ones(len(n))
    safe = np.where(n == 0, 1, n).astype(np.float64)
    for c in range(counts.shape[1]):
        p = counts[:, c].astype(np.float64) / safe
        g = g - p * p
    return np.where(n == 0, 0.0, g)


def split_reference(recs, attributes, classes, path=()):
    x, y = recs[:, :attributes], recs[:, attributes].astype(np.int64)
    keep = np.ones(len(recs), bool)
    for a, t, left in path:
        keep &= (x[:, a] <= t) == left
    x, y = x[keep], y[keep]
    total = np.bincount(y, minlength=classes)
    n = len(y)
    splits = []
    for a in range(attributes):
        hist = np.zeros((256, classes), np.int64)
        np.add.at(hist, (x[:, a].astype(np.int64), y), 1)
        left = np.cumsum(hist, axis=0)
        nl = left.sum(axis=1)
        cand = np.flatnonzero((hist.sum(axis=1) > 0) & (nl < n))
        if len(cand) == 0:
            splits.append(None)
            continue
        l, r = left[cand], total - left[cand]
        nl_c, nr_c = nl[cand], n - nl[cand]
        g = (nl_c.astype(np.float64) * gini_rows(l, nl_c) + nr_c.astype(np.float64) * gini_rows(r, nr_c)) / float(n)
        i = int(np.argmin(g))
        splits.append((int(cand[i]), float(g[i]), l[i]))
    node = float(gini_rows(total[None, :], np.array([n]))[0])
    return total, node, splits


def hop_reference(pts, grid, lo, hi, threshold):
    p = pts.astype(np.int64)
    inside = np.all((p >= lo) & (p < hi), axis=1)
    q = p[inside]
    ix = (q - lo) * grid // (hi - lo)
    cell = (ix[:, 0] * grid + ix[:, 1]) * grid + ix[:, 2]
    count = np.bincount(cell, minlength=grid ** 3)
    sums = np.stack([np.bincount(cell, weights=q[:, d], minlength=grid ** 3) for d in range(3)], axis=1).astype(np.int64)

    def densest(i):
        x, y, z = i // (grid * grid), i // grid % grid, i % grid
        best = i
        for nx in range(max(x - 1, 0), min(x + 1, grid - 1) + 1):
            for ny in range(max(y - 1, 0), min(y + 1, grid - 1) + 1):
                for nz in range(max(z - 1, 0), min(z + 1, grid - 1) + 1):
                    j = (nx * grid + ny) * grid + nz
                    if (count[j], -j) > (count[best], -best):
                        best = j
        return best

    groups, below = {}, 0
    for i in np.flatnonzero(count):
        if count[i] < threshold:
            below += int(count[i])
            continue
        peak = int(i)
        while (nxt := densest(peak)) != peak:
            peak = nxt
        g = groups.setdefault(peak, {"peak": peak, "peak_count": int(count[peak]), "cells": 0, "particles": 0, "sum": [0, 0, 0]})
        g["cells"] += 1
        g["particles"] += int(count[i])
        g["sum"] = [s + int(v) for s, v in zip(g["sum"], sums[i])]
    return {"particles": int(inside.sum()), "outside": int((~inside).sum()), "below": below,
            "groups": [groups[k] for k in sorted(groups)]}
