"""Private: LanceDB (embedded, on disk under ``path`` or in a temporary directory), flat cosine search."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._types import Embedder, Hit, Params, StoreItem, check_k, embed_checked, embed_queries, import_backend

__all__ = ["LanceDBStore"]


class LanceDBStore:
    """A LanceDB table (columns ``id``, ``text``, ``metadata`` as JSON text, ``vector``) searched exhaustively in
    cosine space (no ANN index: exact scores). On disk under ``path`` (the table is kept across constructions),
    else in a temporary directory removed by ``close``. Writes are ``add`` (param ``write="add"``: re-adding an id
    appends a second copy) or ``merge`` (``write="merge"``: a merge-insert on ``id`` replaces it). Params
    ``table`` (name, default "replaylens") and ``add_batch`` (records per write, 1024)."""

    name = "lancedb"

    def __init__(self, embedder: Embedder, *, path: Path | None = None,
                 params: Mapping[str, object] | None = None) -> None:
        p = Params("lancedb", params or {})
        self.table_name = p.get_str("table", "replaylens")
        self.write = p.get_str("write", "add", choices=("add", "merge"))
        self.add_batch = p.get_int("add_batch", 1024, low=1)
        p.done()
        lancedb: Any = import_backend("lancedb", "the lancedb store")
        self._pa: Any = import_backend("pyarrow", "the lancedb store")
        self.embedder = embedder
        self._tmp = None if path is not None else tempfile.mkdtemp(prefix="replaylens-lancedb-")
        where = path if path is not None else Path(str(self._tmp))
        where.mkdir(parents=True, exist_ok=True)
        self._db = lancedb.connect(str(where))
        listed = self._db.list_tables()
        names = [str(x) for x in (listed.tables if hasattr(listed, "tables") else listed)]
        self._table: Any = self._db.open_table(self.table_name) if self.table_name in names else None

    def _schema(self) -> Any:
        pa = self._pa
        return pa.schema([("id", pa.string()), ("text", pa.string()), ("metadata", pa.string()),
                          ("vector", pa.list_(pa.float32(), self.embedder.dim))])

    def add(self, items: Sequence[StoreItem]) -> None:
        pa = self._pa
        for start in range(0, len(items), self.add_batch):
            batch = items[start:start + self.add_batch]
            vecs = embed_checked(self.embedder, [it.text for it in batch])
            data = pa.table({"id": [it.id for it in batch], "text": [it.text for it in batch],
                             "metadata": [json.dumps(dict(it.metadata)) for it in batch],
                             "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)),
                                                                         self.embedder.dim)},
                            schema=self._schema())
            if self._table is None:
                self._table = self._db.create_table(self.table_name, data=data)
            elif self.write == "merge":
                (self._table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
                 .execute(data))
            else:
                self._table.add(data)

    def _search(self, vector: Any, k: int) -> list[Hit]:
        if self._table is None:
            return []
        rows = (self._table.search(vector.tolist()).metric("cosine").limit(k)
                .select(["id", "metadata", "_distance"]).to_list())
        return [Hit(str(r["id"]), 1.0 - float(r["_distance"]), i + 1, json.loads(r["metadata"] or "{}"))
                for i, r in enumerate(rows)]

    def query(self, text: str, k: int) -> list[Hit]:
        check_k(k)
        return self._search(embed_checked(self.embedder, [text])[0], k)

    def query_many(self, texts: Sequence[str], k: int) -> list[list[Hit]]:
        """``[self.query(t, k) for t in texts]``: the query vectors embedded together, then one search each."""
        check_k(k)
        return [self._search(q, k) for q in embed_queries(self.embedder, texts)] if texts else []

    def close(self) -> None:
        self._table = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
