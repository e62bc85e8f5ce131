"""Private: embedders (deterministic hashing, wordllama from its wheel, any OpenAI-compatible /v1/embeddings)."""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError
from ._types import Embedder, check_embedded, import_backend, unit_rows

__all__ = ["EMBEDDERS", "HashingEmbedder", "OpenAIEmbedder", "WordLlamaEmbedder", "make_embedder"]

_WORD = re.compile(r"\w+", re.UNICODE)


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """(index, sign) of a feature: the first 8 bytes of its BLAKE2b digest, stable across processes and runs."""
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


class HashingEmbedder:
    """Deterministic feature hashing of lower-cased word 1- and 2-grams and character 3-grams inside each word
    (signed buckets, L2-normalised rows). No model, no randomness: the test and reference embedder."""

    name = "hashing"
    batch_invariant = True
    """Each row depends only on its own text: a batch of queries is embedded in one call."""

    def __init__(self, dim: int = 256, *, char_ngram: int = 3, char_weight: float = 0.5) -> None:
        if dim < 8:
            raise ConfigError(f"hashing embedder: dim must be >= 8; got {dim}")
        self._dim = dim
        self.char_ngram = char_ngram
        self.char_weight = char_weight
        self._cache: dict[str, tuple[tuple[int, float], ...]] = {}

    @property
    def dim(self) -> int:
        return self._dim

    def _features(self, text: str) -> tuple[tuple[int, float], ...]:
        words = [w.lower() for w in _WORD.findall(text)]
        feats: list[tuple[int, float]] = []
        for w in words:
            i, s = _bucket("w:" + w, self._dim)
            feats.append((i, s))
        for a, b in itertools.pairwise(words):
            i, s = _bucket(f"b:{a} {b}", self._dim)
            feats.append((i, s))
        n = self.char_ngram
        for w in words:
            padded = f"<{w}>"
            for j in range(max(1, len(padded) - n + 1)):
                i, s = _bucket("c:" + padded[j:j + n], self._dim)
                feats.append((i, s * self.char_weight))
        return tuple(feats)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float64)
        for row, text in enumerate(texts):
            feats = self._cache.get(text)
            if feats is None:
                feats = self._features(text)
                if len(self._cache) < 200_000:
                    self._cache[text] = feats
            for i, s in feats:
                out[row, i] += s
        return unit_rows(out)

    def fingerprint(self) -> str:
        return f"hashing-v1:dim={self._dim}:char={self.char_ngram}:w={self.char_weight}"


class WordLlamaEmbedder:
    """wordllama's static token-embedding model (``l2_supercat``), loaded offline from the 256-d weights inside its
    wheel (``WordLlama.load(cache_dir=<package dir>, disable_download=True)``); a smaller ``dim`` is its
    Matryoshka truncation (``trunc_dim``). Rows are L2-normalised."""

    name = "wordllama"

    def __init__(self, dim: int = 256, *, config: str = "l2_supercat") -> None:
        wordllama = import_backend("wordllama", "the wordllama embedder")
        self._dim = dim
        self.config = config
        try:
            self._model: Any = wordllama.WordLlama.load(config=config, dim=256,
                                                        trunc_dim=dim if dim != 256 else None,
                                                        cache_dir=Path(str(wordllama.__file__)).parent,
                                                        disable_download=True)
        except (FileNotFoundError, ValueError, AssertionError) as exc:
            raise ConfigError(f"wordllama cannot load {config!r} at dim {dim} offline: {exc}") from None
        self.version = str(getattr(wordllama, "__version__", "unknown"))

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        v = self._model.embed(list(texts), norm=True)
        return unit_rows(check_embedded(np.asarray(v), len(texts), self))

    def fingerprint(self) -> str:
        return f"wordllama-{self.version}:{self.config}:dim={self._dim}"


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint (``base_url`` + ``model``) through the ``openai`` package,
    ``batch_size`` texts a request, rows in the order sent. ``dim`` is given or probed with one request.
    ``requests`` counts the requests sent.  Uncached here: ``replaylens.memory.retrieval`` (check-migration, the
    retrieval agent) puts it behind the cross-run request cache (``CachedEmbedder``)."""

    name = "openai"

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, dim: int | None = None,
                 batch_size: int = 64, timeout_s: float = 60.0) -> None:
        openai: Any = import_backend("openai", "the openai embedder", "replaylens[llm]")
        if not model or not base_url:
            raise ConfigError("the openai embedder needs a model and a base_url (openai:MODEL@URL)")
        if batch_size < 1:
            raise ConfigError(f"the openai embedder's batch_size must be >= 1; got {batch_size}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.batch_size = batch_size
        self._dim = dim
        self.requests = 0
        self._client = openai.OpenAI(api_key=api_key or "no-key", base_url=self.base_url, max_retries=0,
                                     timeout=timeout_s)

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    @property
    def known_dim(self) -> int | None:
        """The dimension if given or already learnt, else None (no request)."""
        return self._dim

    def _request(self, batch: Sequence[str]) -> np.ndarray:
        self.requests += 1
        try:
            resp = self._client.embeddings.create(model=self.model, input=list(batch))
        except Exception as exc:  # the openai package's errors: report the endpoint in one line
            raise ConfigError(f"embedding request to {self.base_url} ({self.model}) failed: "
                              f"{type(exc).__name__}: {exc}") from None
        rows = sorted(resp.data, key=lambda d: d.index)
        if len(rows) != len(batch):
            raise ConfigError(f"{self.base_url} returned {len(rows)} embeddings for {len(batch)} inputs")
        return np.asarray([r.embedding for r in rows], dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._request(texts[i:i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        out = np.concatenate(parts, axis=0)
        if self._dim is None:  # learnt from this answer instead of a probe request
            self._dim = int(out.shape[1])
        return check_embedded(out, len(texts), self)

    def fingerprint(self) -> str:
        return f"openai:{self.model}@{self.base_url}"


def _int_arg(arg: str | None, default: int, what: str) -> int:
    if arg is None or arg == "":
        return default
    try:
        return int(arg)
    except ValueError:
        raise ConfigError(f"{what}: expected an integer dimension; got {arg!r}") from None


def _hashing(arg: str | None) -> Embedder:
    return HashingEmbedder(_int_arg(arg, 256, "hashing:DIM"))


def _wordllama(arg: str | None) -> Embedder:
    return WordLlamaEmbedder(_int_arg(arg, 256, "wordllama:DIM"))


def _openai(arg: str | None) -> Embedder:
    model, sep, url = (arg or "").partition("@")
    if not sep or not model or not url:
        raise ConfigError(f"openai embedder spec must look like openai:MODEL@BASE_URL; got openai:{arg or ''}")
    return OpenAIEmbedder(model, url)


EMBEDDERS: dict[str, Callable[[str | None], Embedder]] = {
    "hashing": _hashing,
    "wordllama": _wordllama,
    "openai": _openai,
}


def make_embedder(spec: str) -> Embedder:
    """An embedder from ``NAME[:ARG]``: ``hashing[:DIM]``, ``wordllama[:DIM]``, ``openai:MODEL@BASE_URL``."""
    name, sep, arg = spec.partition(":")
    factory = EMBEDDERS.get(name)
    if factory is None:
        raise ConfigError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDERS)}")
    return factory(arg if sep else None)
