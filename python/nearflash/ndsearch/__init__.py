"""NDSearch (ISCA'24) on nearflash: a graph vector index (HNSW, Vamana/DiskANN) built and searched in Rust, the
data sets and exact ground truth its benchmarks use (``minilm``: real sentence embeddings in numpy), and SearSSD's near-data search pieces. The Rust side lives
in ``nearflash._native.ndsearch``."""

from nearflash.ndsearch.datasets import (
    SYNTHETIC,
    cached_ground_truth,
    fashion_mnist,
    fortunes,
    fortunes_minilm,
    ground_truth,
    recall_at,
    synthetic,
)
from nearflash.ndsearch.index import Index
from nearflash.ndsearch import diskann, searssd
from nearflash.ndsearch.searssd import Deployment, deploy

__all__ = ["SYNTHETIC", "Deployment", "Index", "cached_ground_truth", "deploy", "diskann", "fashion_mnist", "fortunes", "fortunes_minilm", "ground_truth", "recall_at", "searssd", "synthetic"]
