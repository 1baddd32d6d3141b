"""LanceDB's own hybrid search, in process: the peer that Retrieve is measured against (`sounding
eval retrieval`'s `ref_lancedb_hybrid`). A table of a corpus's ids, texts and vectors with
LanceDB's full-text index, queried as LanceDB documents it out of the box: a hybrid query (the
query's vector and its text) fused by LanceDB's RRF reranker. Evaluation only: the service never
reads it."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS
from lancedb.rerankers import RRFReranker

TABLE = "corpus"


class LanceHybrid:
    def __init__(self, table: lancedb.table.Table):
        self._table = table
        self._reranker = RRFReranker()

    @classmethod
    def build(
        cls, directory: Path, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray
    ) -> LanceHybrid:
        """The table in `directory`, written anew unless it already holds these ids."""
        db = lancedb.connect(str(directory))
        if TABLE in db.table_names():
            table = db.open_table(TABLE)
            if table.count_rows() == len(ids):
                return cls(table)
        shutil.rmtree(directory, ignore_errors=True)
        db = lancedb.connect(str(directory))
        vectors = np.asarray(vectors, np.float32)
        data = pa.table(
            {
                "id": pa.array(list(ids)),
                "text": pa.array(list(texts)),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
            }
        )
        table = db.create_table(TABLE, data)
        table.create_index("text", config=FTS())
        return cls(table)

    def search(self, text: str, vector: np.ndarray, limit: int) -> list[str]:
        """The ids of the best `limit` rows for the query, best first."""
        rows = (
            self._table.search(query_type="hybrid")
            .vector(np.asarray(vector, np.float32))
            .text(text)
            .rerank(self._reranker)
            .limit(limit)
            .select(["id"])
            .to_list()
        )
        return [row["id"] for row in rows]
