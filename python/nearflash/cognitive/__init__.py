"""Cognitive SSD (ATC'19) on nearflash: deep hashing (a CNN trained on Fashion-MNIST, run in int8 as DLG-x does) and
Hamming graph search with the paper's two-hop page layout. The Rust side lives in ``nearflash._native.cognitive``.

:class:`DlgIndex` is the host-side DLG pipeline (hash, search, classify) the firmware extension will serve through
the DLG library's vendor commands; :func:`encode_command` / :func:`decode_command` are those commands (Table 1)."""

from nearflash.cognitive.data import fashion_mnist, load_model, shipped_model_path
from nearflash.cognitive.pipeline import LAYOUTS, DlgIndex, SearchResult, parameters
from nearflash.cognitive.wire import COMMANDS, decode_command, encode_command

__all__ = [
    "COMMANDS",
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
