"""Reading a BEIR-format dataset: corpus.jsonl, queries.jsonl, qrels/<split>.tsv (header row)."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus: list[dict]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    corpus_sha256: str


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """A qrels TSV (header row; query-id, corpus-id, score) as {query: {document: grade}}."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open() as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader)  # header: query-id, corpus-id, score
        for query_id, doc_id, score in reader:
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    return qrels


def load(directory: Path, split: str) -> BeirDataset:
    corpus_path = directory / "corpus.jsonl"
    corpus_bytes = corpus_path.read_bytes()
    corpus = [json.loads(line) for line in corpus_bytes.decode().splitlines() if line.strip()]
    qrels = read_qrels(directory / "qrels" / f"{split}.tsv")
    queries = {}
    with (directory / "queries.jsonl").open() as handle:
        for line in handle:
            if line.strip():
                query = json.loads(line)  # only _id and text: metadata is ground truth
                if query["_id"] in qrels:
                    queries[query["_id"]] = query["text"]
    return BeirDataset(
        name=directory.name,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        corpus_sha256=hashlib.sha256(corpus_bytes).hexdigest(),
    )


def document_text(document: dict) -> str:
    """What the in-process references embed and index: title and text, as the service does."""
    return f"{document.get('title', '')} {document['text']}".strip()
