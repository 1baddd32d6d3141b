"""The in-process peers the service is measured against, in the harness's own process: bm25s,
an exact MiniLM cosine scan, their RRF (k = 60), and LanceDB's own hybrid search over the same
MiniLM vectors (`LanceHybrid`: a table of the corpus's ids, texts and vectors with LanceDB's
full-text index, queried as LanceDB documents it out of the box, the query's vector and its text
fused by LanceDB's RRF reranker). The service never reads them."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS
from lancedb.rerankers import RRFReranker
from rich.console import Console
from sounding.core.fusion import weighted_rrf
from sounding.runtime.progress import progress_bar
from sounding.settings.config import ModelsSettings

from sounding_bench import beir
from sounding_bench.harness import INGEST_BATCH

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


def _embedder(models: ModelsSettings):
    """The encoder the models sidecar runs on these settings (`assembly.sidecar.load_embedder`:
    ONNX Runtime on CPU by default), here in this process."""
    from sounding.assembly.sidecar import load_embedder
    from sounding.models.server import select_device

    return load_embedder(models, select_device(models.device))


def encode_corpus(dataset, stem: Path, fresh, console, models: ModelsSettings) -> tuple[dict, np.ndarray]:
    vectors_path, record = stem.with_suffix(".npy"), stem.with_suffix(".json")
    if not fresh and vectors_path.exists() and record.exists():
        return {**json.loads(record.read_text()), "cached": True}, np.load(vectors_path)
    embedder = _embedder(models)
    texts = [beir.document_text(d) for d in dataset.corpus]
    parts = []
    with progress_bar(console) as progress:
        task = progress.add_task("in-process encode", total=len(texts))
        started = time.perf_counter()
        for i in range(0, len(texts), INGEST_BATCH):
            parts.append(embedder.encode(texts[i : i + INGEST_BATCH]))
            progress.advance(task, len(texts[i : i + INGEST_BATCH]))
        elapsed = time.perf_counter() - started
    vectors = np.concatenate(parts)
    np.save(vectors_path, vectors)
    result = {"seconds": round(elapsed, 2), "docs_per_s": round(len(texts) / elapsed, 2)}
    record.write_text(json.dumps(result))
    return {**result, "cached": False}, vectors


class References:
    """The in-process references over one corpus, ranking `k` ids per query (all of a smaller
    corpus). `search` runs them all and times each over its whole query path (tokenise or
    encode, score, fuse); `hybrid` and `bm25s_minilm` are one reference's whole path each."""

    names = ("ref_bm25s", "ref_minilm", "ref_rrf", "ref_lancedb_hybrid")

    def __init__(
        self,
        dataset: beir.BeirDataset,
        corpus_vectors: np.ndarray,
        hybrid_directory: Path,
        k: int,
        models: ModelsSettings,
    ):
        import bm25s

        self._bm25s = bm25s
        self._embedder = _embedder(models)
        self._vectors = corpus_vectors
        self._ids = [d["_id"] for d in dataset.corpus]
        texts = [beir.document_text(d) for d in dataset.corpus]
        self._hybrid = LanceHybrid.build(hybrid_directory, self._ids, texts, corpus_vectors)
        self._k = min(k, len(self._ids))
        self._retriever = bm25s.BM25()
        self._retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._embedder.encode(list(texts))

    def lexical(self, text: str) -> list[str]:
        tokens = self._bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)
        documents, _ = self._retriever.retrieve(tokens, k=self._k, show_progress=False, n_threads=1)
        return [self._ids[i] for i in documents[0]]

    def dense(self, query_vector: np.ndarray) -> list[str]:
        scores = self._vectors @ query_vector
        top = np.argpartition(-scores, self._k - 1)[: self._k]
        return [self._ids[i] for i in top[np.argsort(-scores[top])]]

    def fuse(self, dense: list[str], lexical: list[str]) -> list[str]:
        ranked = {"dense": [(d, 0.0) for d in dense], "lexical": [(d, 0.0) for d in lexical]}
        return [item.key for item in weighted_rrf(ranked, limit=self._k)]

    def hybrid_search(self, text: str, query_vector: np.ndarray) -> list[str]:
        return self._hybrid.search(text, query_vector, self._k)

    def hybrid(self, text: str) -> list[str]:
        """LanceDB's hybrid query with the query encoded here."""
        return self.hybrid_search(text, self.encode([text])[0])

    def bm25s_minilm(self, text: str) -> list[str]:
        """bm25s and the exact MiniLM scan, fused by RRF."""
        return self.fuse(self.dense(self.encode([text])[0]), self.lexical(text))

    def search(self, text: str) -> dict[str, tuple[list[str], float]]:
        """Each reference's ranking (best first) and latency in ms."""
        started = time.perf_counter()
        lexical = self.lexical(text)
        lexical_done = time.perf_counter()
        query_vector = self.encode([text])[0]
        encoded = time.perf_counter()
        dense = self.dense(query_vector)
        dense_done = time.perf_counter()
        fused = self.fuse(dense, lexical)
        fused_done = time.perf_counter()
        hybrid = self.hybrid_search(text, query_vector)
        hybrid_done = time.perf_counter()
        return {
            "ref_bm25s": (lexical, (lexical_done - started) * 1000),
            "ref_minilm": (dense, (dense_done - lexical_done) * 1000),
            "ref_rrf": (fused, (fused_done - started) * 1000),
            # The query's encoding and LanceDB's hybrid query.
            "ref_lancedb_hybrid": (hybrid, (encoded - lexical_done + hybrid_done - fused_done) * 1000),
        }


def references_for(
    dataset: beir.BeirDataset,
    cache: Path,
    collection: str,
    k: int,
    fresh: bool,
    console: Console,
    models: ModelsSettings,
) -> tuple[dict, References]:
    """The corpus encoded in this process with the sidecar's encoder on `models` (cached under
    `cache`; with `fresh`, again) and the references ranking `k` ids over it; with the encode's
    record."""
    encode, vectors = encode_corpus(dataset, cache / f"{collection}-minilm", fresh, console, models)
    return encode, References(dataset, vectors, cache / f"{collection}-lancedb-hybrid", k, models)
