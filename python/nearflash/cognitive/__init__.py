"""Cognitive SSD (ATC'19) on nearflash: deep hashing (a CNN trained on Fashion-MNIST, run in int8 as DLG-x does) and
Hamming graph search with the paper's two-hop page layout. The Rust side lives in ``nearflash._native.cognitive``.

:class:`DlgIndex` is the host-side DLG pipeline (hash, search, classify; also the B-CPU baseline);
:class:`CognitiveSSD` runs the same pipeline on a device through the DLG library's vendor commands (Table 1,
:func:`encode_command` / :func:`decode_command`), served by the ``cognitive`` firmware extension."""

from nearflash.cognitive.data import fashion_mnist, load_model, shipped_model_path
from nearflash.cognitive.pipeline import LAYOUTS, DlgIndex, SearchResult, parameters
from nearflash.cognitive.ssd import CognitiveSSD
from nearflash.cognitive.wire import COMMANDS, decode_command, encode_command

__all__ = [
    "COMMANDS",
    "CognitiveSSD",
    "LAYOUTS",
    "DlgIndex",
    "SearchResult",
    "decode_command",
    "encode_command",
    "fashion_mnist",
    "load_model",
    "parameters",
    "shipped_model_path",
]
