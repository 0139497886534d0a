"""RecSSD (ASPLOS'21) on nearflash: the firmware extension and host library on a device (:class:`RecSSD`,
:class:`EmbeddingBag`), recommendation models with pluggable embedding lookups, input traces, and the host-side
pieces of near-data SparseLengthsSum. The Rust side lives in ``nearflash._native.recssd``."""

from nearflash.recssd.embeddings import (
    DenseEmbeddings,
    EmbeddingLookup,
    GeneratedEmbeddings,
    NdpFunctionalEmbeddings,
    TableSpec,
    sls_reference,
)
from nearflash.recssd.inputs import fixed_offsets, locality_batches, microbenchmark_ids, uniform_batch
from nearflash.recssd.models import MODEL_NAMES, SPECS, Batch, FlopCount, ModelSpec, RecModel, build_model
from nearflash.recssd.system import PATHS, PRECISIONS, EmbeddingBag, InferenceResult, RecSSD, parameters

__all__ = [
    "MODEL_NAMES",
    "SPECS",
    "Batch",
    "DenseEmbeddings",
    "EmbeddingBag",
    "InferenceResult",
    "PATHS",
    "PRECISIONS",
    "RecSSD",
    "parameters",
    "EmbeddingLookup",
    "FlopCount",
    "GeneratedEmbeddings",
    "ModelSpec",
    "NdpFunctionalEmbeddings",
    "RecModel",
    "TableSpec",
    "build_model",
    "fixed_offsets",
    "locality_batches",
    "microbenchmark_ids",
    "sls_reference",
    "uniform_batch",
]
