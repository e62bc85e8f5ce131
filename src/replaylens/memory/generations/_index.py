"""Mixed embedding generations: does an index hold vectors from more than one embedder?

A half-done embedding upgrade leaves same-size vectors of two models in one index; nothing fails, retrieval
silently degrades.  The check re-embeds (a seeded sample of) the stored texts with the *declared* embedder and
flags every record whose stored vector does not match (cosine similarity below ``1 - tolerance``).  It reports
the share flagged, a Wilson interval for the index's share when only a sample was checked, and an example.

An index is read from a file (JSONL, CSV or Parquet with ``id``, ``text``, ``vector``), a LanceDB table
(``lancedb:DIR[:TABLE]``) or a persistent Chroma collection (``chroma:DIR[:COLLECTION]``).
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ...errors import ConfigError, InputError
from ...records import Field, read_raw
from ...rng import derive_rng
from ..stores import Embedder, embed_checked, make_embedder, unit_rows

__all__ = ["INDEX_FIELDS", "GenerationReport", "IndexRows", "build_mixed_index", "check_generations", "read_index",
           "write_index"]

INDEX_FIELDS = ("id", "text", "vector")


@dataclass(frozen=True, eq=False)
class IndexRows:
    """An index's records: ids, texts and their stored vectors (n, dim)."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    vectors: np.ndarray
    source: str = "<index>"


@dataclass(frozen=True)
class GenerationReport:
    """The share of checked records whose stored vector the declared embedder does not reproduce."""

    embedder: str
    source: str
    n_records: int
    n_checked: int
    n_mismatched: int
    tolerance: float
    interval: tuple[float, float]
    example: dict[str, Any] | None
    dim_stored: int
    dim_declared: int

    @property
    def share(self) -> float:
        return self.n_mismatched / max(self.n_checked, 1)

    @property
    def clean(self) -> bool:
        return self.n_mismatched == 0

    def line(self) -> str:
        lo, hi = self.interval
        what = "every record" if self.n_checked == self.n_records else f"a sample of {self.n_checked}"
        head = (f"{'CLEAN' if self.clean else 'MIXED'}: {self.n_mismatched} of {self.n_checked} checked records "
                f"({100 * self.share:.1f} %) do not match {self.embedder} in {self.source} ({what} of "
                f"{self.n_records}")
        head += ")" if self.n_checked == self.n_records else f"; 95 % interval for the index {100 * lo:.1f}–" \
                                                             f"{100 * hi:.1f} %)"
        if self.dim_stored != self.dim_declared:
            head += f"; stored vectors have {self.dim_stored} dimensions, the embedder {self.dim_declared}"
        if self.example is not None:
            head += (f"; e.g. id {self.example['id']} ({self.example['text']!r}): cosine "
                     f"{self.example['cosine']:.3f} with its re-embedding")
        return head

    def to_dict(self) -> dict[str, Any]:
        return {"embedder": self.embedder, "source": self.source, "records": self.n_records,
                "checked": self.n_checked, "mismatched": self.n_mismatched, "share": self.share,
                "interval": list(self.interval), "tolerance": self.tolerance, "clean": self.clean,
                "dim_stored": self.dim_stored, "dim_declared": self.dim_declared, "example": self.example,
                "line": self.line()}


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def check_generations(index: IndexRows, embedder: str | Embedder, *, sample: int | None = None, seed: int = 0,
                      tolerance: float = 1e-3, batch: int = 256) -> GenerationReport:
    """Re-embed ``sample`` records (all when None or larger than the index; a seeded choice otherwise) with
    ``embedder`` and count those whose stored vector's cosine with the re-embedding is below ``1 - tolerance``."""
    emb = make_embedder(embedder) if isinstance(embedder, str) else embedder
    n = len(index.ids)
    if n == 0:
        raise ConfigError(f"{index.source}: the index has no records")
    if sample is not None and sample < 1:
        raise ConfigError(f"the sample must hold at least one record; got {sample}")
    if sample is None or sample >= n:
        rows = np.arange(n)
    else:
        rows = np.sort(derive_rng(seed, "generation-sample", index.source).choice(n, size=sample, replace=False))
    stored = unit_rows(index.vectors[rows])
    dim_s, dim_d = int(stored.shape[1]), int(emb.dim)
    cos = np.full(rows.size, -np.inf)
    if dim_s == dim_d:
        texts = [index.texts[int(i)] for i in rows]
        fresh = np.concatenate([embed_checked(emb, texts[a:a + batch], unit=True)
                                for a in range(0, len(texts), batch)], axis=0)
        cos = np.einsum("ij,ij->i", stored.astype(np.float64), fresh.astype(np.float64))
    bad = np.flatnonzero(cos < 1.0 - tolerance)
    example = None
    if bad.size:
        j = int(bad[0])
        i = int(rows[j])
        example = {"id": index.ids[i], "text": index.texts[i], "cosine": float(cos[j]) if dim_s == dim_d else math.nan}
    lo, hi = (_wilson(int(bad.size), int(rows.size)) if rows.size < n else
              (bad.size / n, bad.size / n))
    return GenerationReport(emb.fingerprint(), index.source, n, int(rows.size), int(bad.size), tolerance,
                            (float(lo), float(hi)), example, dim_s, dim_d)


def _module(name: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"{what} needs the {name!r} package ({exc}); install it with: "
                          "pip install 'replaylens[stores]'") from None


def _from_lancedb(spec: str) -> IndexRows:
    path, _, table = spec.partition(":")
    lancedb: Any = _module("lancedb", "reading a LanceDB index")
    db = lancedb.connect(path)
    listed = db.list_tables()
    names = [str(x) for x in (listed.tables if hasattr(listed, "tables") else listed)]
    name = table or (names[0] if len(names) == 1 else "")
    if not name:
        raise ConfigError(f"lancedb:{path}: name the table (lancedb:DIR:TABLE); tables: {', '.join(names) or 'none'}")
    t = db.open_table(name).to_arrow()
    missing = [c for c in INDEX_FIELDS if c not in t.column_names]
    if missing:
        raise ConfigError(f"lancedb:{path}:{name}: the table has no column {missing[0]!r} (needs id, text, vector)")
    vec = np.asarray(t.column("vector").to_pylist(), dtype=np.float32)
    return IndexRows(tuple(map(str, t.column("id").to_pylist())), tuple(map(str, t.column("text").to_pylist())),
                     vec, f"lancedb:{path}:{name}")


def _from_chroma(spec: str) -> IndexRows:
    path, _, coll = spec.partition(":")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    chromadb: Any = _module("chromadb", "reading a Chroma index")
    settings = _module("chromadb.config", "reading a Chroma index").Settings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(path=path, settings=settings)
    names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
    name = coll or (names[0] if len(names) == 1 else "")
    if not name:
        raise ConfigError(f"chroma:{path}: name the collection (chroma:DIR:NAME); collections: "
                          f"{', '.join(names) or 'none'}")
    got = client.get_collection(name).get(include=["embeddings", "documents"])
    vec = np.asarray(got["embeddings"], dtype=np.float32)
    return IndexRows(tuple(got["ids"]), tuple(d or "" for d in got["documents"]), vec, f"chroma:{path}:{name}")


def read_index(spec: str | os.PathLike[str]) -> IndexRows:
    """An index from a file (``id``, ``text``, ``vector``: JSONL, CSV or Parquet; errors name file, line and field),
    ``lancedb:DIR[:TABLE]`` or ``chroma:DIR[:COLLECTION]``."""
    text = str(spec)
    if text.startswith("lancedb:"):
        return _from_lancedb(text[len("lancedb:"):])
    if text.startswith("chroma:"):
        return _from_chroma(text[len("chroma:"):])
    t = read_raw(Path(text))
    if not t.rows:
        raise InputError(t.source, None, None, "the index file is empty")
    f = Field(t)
    ids: list[str] = []
    texts: list[str] = []
    vecs: list[list[float]] = []
    width: int | None = None
    for i, row in enumerate(t.rows):
        for k in row:
            if k not in INDEX_FIELDS:
                raise f.err(i, k, f"unknown field; allowed fields: {', '.join(INDEX_FIELDS)}")
        rid, txt = f.string(i, "id"), row.get("text")
        if not isinstance(txt, str):
            raise f.err(i, "text", "expected the stored text (a string)")
        v: Any = row.get("vector")
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                raise f.err(i, "vector", "expected a JSON list of numbers") from None
        if hasattr(v, "tolist"):
            v = v.tolist()
        if not isinstance(v, list) or not v or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                       and math.isfinite(x) for x in v):
            raise f.err(i, "vector", "expected a non-empty list of finite numbers")
        if width is not None and len(v) != width:
            raise f.err(i, "vector", f"expected {width} numbers like the first record, got {len(v)}")
        width = len(v)
        ids.append(str(rid))
        texts.append(txt)
        vecs.append([float(x) for x in v])
    return IndexRows(tuple(ids), tuple(texts), np.asarray(vecs, dtype=np.float32), t.source)


def write_index(index: IndexRows, path: str | os.PathLike[str]) -> Path:
    """Write an index as JSONL (``id``, ``text``, ``vector``)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as fh:
        for i, t, v in zip(index.ids, index.texts, index.vectors.tolist(), strict=True):
            fh.write(json.dumps({"id": i, "text": t, "vector": [round(x, 7) for x in v]}) + "\n")
    return p


def build_mixed_index(texts: Sequence[str], declared: str | Embedder, other: str | Embedder | None, *,
                      share: float, seed: int = 0, source: str = "<mixed index>") -> IndexRows:
    """An index of ``texts`` embedded by ``declared``, except a seeded ``share`` of the records (rounded to a
    whole number) embedded by ``other`` — a half-done embedding upgrade (``other`` None or ``share`` 0: clean)."""
    a = make_embedder(declared) if isinstance(declared, str) else declared
    vec = embed_checked(a, list(texts), unit=True)
    n_other = round(share * len(texts))
    if other is not None and n_other:
        b = make_embedder(other) if isinstance(other, str) else other
        if b.dim != a.dim:
            raise ConfigError(f"a mixed index needs same-size vectors: {a.dim} vs {b.dim}")
        rows = np.sort(derive_rng(seed, "mixed-index", source).choice(len(texts), size=n_other, replace=False))
        vec[rows] = embed_checked(b, [texts[int(i)] for i in rows], unit=True)
    return IndexRows(tuple(f"r{i:05d}" for i in range(len(texts))), tuple(texts), vec, source)
