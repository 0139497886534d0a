"""Data for vector search: Fashion-MNIST from Debian's ``dataset-fashion-mnist`` (60k x 784 base, 10k queries,
uint8), seeded synthetic clustered sets shaped like glove-100 (100-d float32, cosine) and sift (128-d uint8, L2)
regenerated from their seed in fixed-size chunks (so any slice of a 10M set can be made on its own), real sentence
embeddings (all-MiniLM-L6-v2, 384-d, of the quotations in Debian's ``fortunes`` package, embedded once and cached),
and exact k-nearest-neighbour ground truth by blocked matrix products, cached on disk beside the data."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np

from nearflash.errors import InvalidArgument

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
FORTUNES_DIR = Path("/usr/share/games/fortunes")
#: Held-out queries of ``fortunes-minilm``: the texts with the smallest SHA-256 digests (one SearSSD batch).
FORTUNES_QUERIES = 2048


def xdg_cache() -> Path:
    """The user's cache for nearflash's vector-search data: ``$XDG_CACHE_HOME/nearflash/ndsearch`` (the XDG base
    directory specification; ``~/.cache`` where the variable is unset or not absolute)."""
    root = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(root) if os.path.isabs(root) else Path.home() / ".cache"
    return base / "nearflash" / "ndsearch"


#: Where embeddings, large graphs and ground truth are cached unless a caller names another directory (the
#: experiments keep their ground truth under ``--out`` unless ``--set cache=xdg``).
DEFAULT_CACHE = xdg_cache()
CHUNK = 65536
SYNTHETIC = {
    # name: (dim, dtype, metric, clusters)
    "glove-100-like": (100, "float32", "cosine", 1000),
    "sift-like": (128, "uint8", "l2", 1000),
}


def _idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 16 or int.from_bytes(raw[:4], "big") != 2051:
        raise ValueError(f"{path} is not an idx3 image file")
    n, h, w = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    if len(raw) != 16 + n * h * w:
        raise ValueError(f"{path} is truncated")
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, h * w)


def fashion_mnist(root: Path | str = FASHION_DIR) -> tuple[np.ndarray, np.ndarray]:
    """(base 60000 x 784, queries 10000 x 784), uint8."""
    root = Path(root)
    train, test = root / "train-images-idx3-ubyte.gz", root / "t10k-images-idx3-ubyte.gz"
    if not (train.exists() and test.exists()):
        raise FileNotFoundError(
            f"Fashion-MNIST is not at {root}: install the Debian package 'dataset-fashion-mnist' "
            "(sudo apt-get install dataset-fashion-mnist; scripts/env.sh does this where it can)")
    return _idx(train), _idx(test)


def fortunes(root: Path | str = FORTUNES_DIR) -> list[str]:
    """The quotations of Debian's ``fortunes`` package (fortune-mod's data files: entries between ``%`` lines),
    files in name order, each entry stripped, exact duplicates dropped (the first kept)."""
    root = Path(root)
    files = sorted(f for f in root.glob("*") if f.is_file() and not f.is_symlink() and "." not in f.name) \
        if root.is_dir() else []
    if not files:
        raise FileNotFoundError(
            f"the fortunes corpus is not at {root}: install the Debian package 'fortunes' "
            "(sudo apt-get install fortunes; scripts/env.sh does this where it can)")
    seen: dict[str, None] = {}
    for f in files:
        entry: list[str] = []
        for line in f.read_bytes().decode("utf-8", errors="replace").split("\n") + ["%"]:
            if line.rstrip() != "%":
                entry.append(line)
                continue
            text = "\n".join(entry).strip()
            entry = []
            if text:
                seen.setdefault(text, None)
    return list(seen)


def split_queries(texts: list[str], nq: int = FORTUNES_QUERIES) -> tuple[list[int], list[int]]:
    """(base rows, query rows) of ``texts``: the ``nq`` texts with the smallest SHA-256 digests are held out as
    queries (in digest order), the rest are the base in corpus order - a split fixed by the texts alone."""
    if not 0 < nq < len(texts):
        raise InvalidArgument(f"nq must be in 1..{len(texts) - 1}, not {nq}")
    digests = [hashlib.sha256(t.encode()).digest() for t in texts]
    order = sorted(range(len(texts)), key=digests.__getitem__)
    held = set(order[:nq])
    return [i for i in range(len(texts)) if i not in held], order[:nq]


def fortunes_minilm(cache_dir: Path | str | None = DEFAULT_CACHE, root: Path | str = FORTUNES_DIR,
                    model=None, nq: int = FORTUNES_QUERIES) -> tuple[np.ndarray, np.ndarray]:
    """(base, queries): all-MiniLM-L6-v2 embeddings (float32 unit vectors, 384-d; cosine or inner product) of
    the ``fortunes`` corpus, ``nq`` held out as queries by :func:`split_queries`. Embedded once and cached in ``cache_dir`` (None: no
    cache) as .npy, keyed by digests of the corpus and of the model files. ``model``: a
    :class:`nearflash.ndsearch.minilm.MiniLM` (default: the shipped one; needs the ``embed`` extra)."""
    from nearflash.ndsearch import minilm
    texts = fortunes(root)
    corpus = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    base_rows, query_rows = split_queries(texts, nq)
    path = None
    if cache_dir is not None:
        m_digest = model.digest if model is not None else minilm.model_digest()
        path = Path(cache_dir) / f"emb-fortunes-{corpus}-minilm-{m_digest[:16]}.npy"
    if path is not None and path.exists():
        emb = np.load(path)
    else:
        emb = (model or minilm.load()).embed(texts)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, emb)
            tmp.replace(path)
    if emb.shape != (len(texts), 384) or emb.dtype != np.float32:
        raise ValueError(f"{path}: expected {len(texts)} x 384 float32 embeddings, found {emb.shape} {emb.dtype}")
    return emb[base_rows], emb[query_rows]


def _centres(name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    dim, _, _, nc = SYNTHETIC[name]
    rng = np.random.default_rng([seed, 0xC0FFEE])
    if name == "sift-like":
        centres = rng.gamma(0.6, 30.0, size=(nc, dim))
    else:
        centres = rng.standard_normal((nc, dim))
    weights = 1.0 / np.arange(1, nc + 1) ** 0.7  # skewed cluster sizes (Zipf-like)
    return centres, weights / weights.sum()


def _chunk(name: str, seed: int, stream: int, index: int, rows: int) -> np.ndarray:
    """The first ``rows`` rows of chunk ``index``: cluster choices and noise come from two generators drawn in
    row order, so any prefix is the same rows as the whole chunk's."""
    dim, dtype, _, _ = SYNTHETIC[name]
    centres, w = _centres(name, seed)
    pick = np.random.default_rng([seed, stream, index, 0])
    noise = np.random.default_rng([seed, stream, index, 1])
    c = pick.choice(len(centres), size=rows, p=w)
    if name == "sift-like":
        x = centres[c] + noise.normal(0.0, 12.0, size=(rows, dim))
        return np.clip(np.rint(x), 0, 255).astype(np.uint8)
    return (centres[c] + 0.35 * noise.standard_normal((rows, dim))).astype(np.float32)


def synthetic(name: str, n: int, seed: int = 0, start: int = 0, queries: bool = False) -> np.ndarray:
    """Rows ``start .. start+n`` of the synthetic set ``name`` (base vectors, or the query stream with
    ``queries=True``), the same for the same seed however they are sliced."""
    if name not in SYNTHETIC:
        raise InvalidArgument(f"name must be one of {sorted(SYNTHETIC)}, not {name!r}")
    if n < 0 or start < 0:
        raise InvalidArgument("n and start must be >= 0")
    stream = 2 if queries else 1
    dim, dtype, _, _ = SYNTHETIC[name]
    out = np.empty((n, dim), dtype=dtype)
    i = start
    while i < start + n:
        c, off = divmod(i, CHUNK)
        take = min(CHUNK - off, start + n - i)
        out[i - start:i - start + take] = _chunk(name, seed, stream, c, off + take)[off:off + take]
        i += take
    return out


def _prep(x: np.ndarray, metric: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64 if x.dtype != np.float32 else np.float32)
    if metric == "cosine":
        n = np.linalg.norm(x, axis=1, keepdims=True)
        x = x / np.where(n == 0, 1, n)
    return x


def _exact(rows: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """Distances of q (1 x d) to ``rows`` in float64, as the index defines them."""
    b = rows.astype(np.float64)
    qq = q.astype(np.float64)
    if metric == "l2":
        return ((b - qq) ** 2).sum(axis=1)
    if metric == "cosine":
        b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-300)
        qq = qq / max(np.linalg.norm(qq), 1e-300)
    return 1.0 - b @ qq


def _candidates(blocks, queries: np.ndarray, keep: int, metric: str, qblock: int) -> np.ndarray:
    """Ids of the ``keep`` nearest candidates of every query by blocked float32 matrix products over ``blocks``
    (``(first id, rows)`` in any order)."""
    nq = len(queries)
    best_d = np.full((nq, keep), np.inf, dtype=np.float32)
    best_i = np.zeros((nq, keep), dtype=np.int64)
    qs = _prep(queries, metric).astype(np.float32)
    for b0, rows in blocks:
        b = _prep(rows, metric).astype(np.float32)
        bn = (b * b).sum(axis=1) if metric == "l2" else None
        for q0 in range(0, nq, qblock):
            q = qs[q0:q0 + qblock]
            s = q @ b.T
            d = (bn[None, :] - 2 * s) if metric == "l2" else -s
            d = np.concatenate([best_d[q0:q0 + qblock], d], axis=1)
            i = np.concatenate([best_i[q0:q0 + qblock],
                                np.broadcast_to(np.arange(b0, b0 + len(b)), (len(q), len(b)))], axis=1)
            part = np.argpartition(d, keep - 1, axis=1)[:, :keep]
            best_d[q0:q0 + qblock] = np.take_along_axis(d, part, axis=1)
            best_i[q0:q0 + qblock] = np.take_along_axis(i, part, axis=1)
    return best_i


def _refine(rows_of, queries: np.ndarray, best_i: np.ndarray, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The final order of each query's candidates from float64 distances (ties by id); ``rows_of(ids)`` gives the
    candidates' base rows."""
    nq = len(queries)
    out_d = np.empty((nq, k), dtype=np.float64)
    out_i = np.empty((nq, k), dtype=np.int64)
    for j in range(nq):
        ex = _exact(rows_of(best_i[j]), queries[j], metric)
        order = np.lexsort((best_i[j], ex))[:k]
        out_d[j], out_i[j] = ex[order], best_i[j][order]
    return out_d, out_i


def _check_gt(metric: str, dim: int, queries: np.ndarray) -> None:
    if metric not in ("l2", "ip", "cosine"):
        raise InvalidArgument(f"metric must be 'l2', 'ip' or 'cosine', not {metric!r}")
    if queries.ndim != 2 or queries.shape[1] != dim:
        raise InvalidArgument("base and queries must be 2-D with the same number of columns")


def ground_truth(base: np.ndarray, queries: np.ndarray, k: int = 100, metric: str = "l2",
                 block: int = 65536, qblock: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Exact (distances, ids) of the ``k`` nearest base rows of every query, nearest first: candidates from
    blocked float32 matrix products, the final order from float64 distances of the best ``k + 16``."""
    if base.ndim != 2:
        raise InvalidArgument("base and queries must be 2-D with the same number of columns")
    _check_gt(metric, base.shape[1], queries)
    k = min(k, len(base))
    keep = min(k + 16, len(base))
    blocks = ((b0, base[b0:b0 + block]) for b0 in range(0, len(base), block))
    return _refine(base.__getitem__, queries, _candidates(blocks, queries, keep, metric, qblock), k, metric)


def synthetic_ground_truth(name: str, n: int, queries: np.ndarray, k: int = 10, seed: int = 0,
                           qblock: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """:func:`ground_truth` over the first ``n`` rows of the synthetic set ``name`` without holding them: the rows
    are regenerated from the seed chunk by chunk (twice: candidates, then the candidates' rows)."""
    if name not in SYNTHETIC:
        raise InvalidArgument(f"name must be one of {sorted(SYNTHETIC)}, not {name!r}")
    dim, _, metric, _ = SYNTHETIC[name]
    _check_gt(metric, dim, queries)
    if n < 1:
        raise InvalidArgument(f"n must be >= 1, not {n}")
    k = min(k, n)
    keep = min(k + 16, n)
    blocks = ((b0, synthetic(name, min(CHUNK, n - b0), seed, start=b0)) for b0 in range(0, n, CHUNK))
    best_i = _candidates(blocks, queries, keep, metric, qblock)
    ids = np.unique(best_i)
    table = np.empty((len(ids), dim), dtype=SYNTHETIC[name][1])
    for c in np.unique(ids // CHUNK):
        sel = (ids // CHUNK) == c
        rows = synthetic(name, min(CHUNK, n - c * CHUNK), seed, start=int(c) * CHUNK)
        table[sel] = rows[ids[sel] - c * CHUNK]
    return _refine(lambda i: table[np.searchsorted(ids, i)], queries, best_i, k, metric)


def _cached(path: Path, compute) -> tuple[np.ndarray, np.ndarray]:
    """``compute()``'s (distances, ids), kept at ``path`` (an .npz written through a temporary file)."""
    if path.exists():
        with np.load(path) as z:
            return z["distances"], z["ids"]
    d, i = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, distances=d, ids=i)
    tmp.replace(path)
    return d, i


def cached_ground_truth(key: str, base: np.ndarray, queries: np.ndarray, k: int, metric: str,
                        cache_dir: Path | str | None = DEFAULT_CACHE) -> tuple[np.ndarray, np.ndarray]:
    """:func:`ground_truth`, cached in ``cache_dir`` under ``key`` plus a digest of the inputs (None: no cache)."""
    if cache_dir is None:
        return ground_truth(base, queries, k, metric)
    h = hashlib.sha256()
    for a in (base, queries):
        h.update(str(a.shape).encode() + str(a.dtype).encode())
        h.update(np.ascontiguousarray(a[:: max(1, len(a) // 512)]).tobytes())
    path = Path(cache_dir) / f"gt-{key}-{metric}-k{k}-{h.hexdigest()[:16]}.npz"
    return _cached(path, lambda: ground_truth(base, queries, k, metric))


def cached_synthetic_ground_truth(name: str, n: int, queries: np.ndarray, k: int = 10, seed: int = 0,
                                  cache_dir: Path | str | None = DEFAULT_CACHE) -> tuple[np.ndarray, np.ndarray]:
    """:func:`synthetic_ground_truth`, cached in ``cache_dir`` keyed by the set, ``n``, the seed and a digest of
    the queries (None: no cache)."""
    if cache_dir is None:
        return synthetic_ground_truth(name, n, queries, k, seed)
    h = hashlib.sha256(str(queries.shape).encode() + str(queries.dtype).encode())
    h.update(np.ascontiguousarray(queries).tobytes())
    path = Path(cache_dir) / f"gt-{name}-{n}-s{seed}-k{k}-{h.hexdigest()[:16]}.npz"
    return _cached(path, lambda: synthetic_ground_truth(name, n, queries, k, seed))


def recall_at(ids: np.ndarray, truth: np.ndarray, k: int = 10) -> float:
    """Mean fraction of the true ``k`` nearest found among the first ``k`` returned."""
    ids, truth = np.asarray(ids)[:, :k], np.asarray(truth)[:, :k]
    hits = sum(len(np.intersect1d(a, b)) for a, b in zip(ids, truth))
    return hits / truth.size
