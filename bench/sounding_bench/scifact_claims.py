"""SciFact claims as ground truth: verdicts and rationale sentences, read from the claims'
`metadata` (the evidence annotation). Only evaluation harnesses and the NLI training recipe
read it; nothing the service runs sees it.

A claim's verdict is the label of its annotated evidence (SUPPORT or CONTRADICT; SciFact never
gives one claim both), or NOT_ENOUGH_INFO when it has none. Its cited documents are its qrels.

The train split's claims are partitioned once, by a hash of the claim id, into a part that may
train or fit models (`fit`) and a held-out part (`held_out`, one claim in five) on which what
was fitted is measured; the test split is never used to fit anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sounding.core.claim_evidence import VERDICTS
from sounding.core.query_candidates import content_words
from sounding.core.sentences import split_sentences
from sounding.models.nli import Pair

from sounding_bench import beir

HELD_OUT_EVERY = 5
NLI_LABEL = {"SUPPORT": "entailment", "CONTRADICT": "contradiction"}


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    verdict: str
    cited: tuple[str, ...]
    # Rationale sentences (indices into `split_sentences` of the document's text) per document.
    rationales: dict[str, tuple[int, ...]] = field(default_factory=dict)


def load_claims(data: Path, split: str) -> list[Claim]:
    """The split's claims (those with qrels), in the order of queries.jsonl."""
    qrels = beir.read_qrels(data / "qrels" / f"{split}.tsv")
    claims = []
    with (data / "queries.jsonl").open() as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            if row["_id"] not in qrels:
                continue
            evidence = row.get("metadata") or {}
            labels = {e["label"] for entries in evidence.values() for e in entries}
            if len(labels) > 1:
                raise ValueError(f"claim {row['_id']} has evidence of both verdicts: {sorted(labels)}")
            verdict = labels.pop() if labels else VERDICTS[2]
            rationales = {
                document: tuple(sorted({i for e in entries for i in e["sentences"]}))
                for document, entries in evidence.items()
            }
            claims.append(
                Claim(row["_id"], row["text"], verdict, tuple(sorted(qrels[row["_id"]])), rationales)
            )
    return claims


def held_out(claim_id: str) -> bool:
    """Whether a train claim belongs to the held-out part (a fixed hash of its id)."""
    return int(hashlib.sha256(claim_id.encode()).hexdigest(), 16) % HELD_OUT_EVERY == 0


def read_documents(data: Path) -> dict[str, dict]:
    documents = {}
    with (data / "corpus.jsonl").open() as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                documents[row["_id"]] = row
    return documents


def nli_pairs(
    claims: list[Claim],
    documents: dict[str, dict],
    neutral_per_document: int = 2,
    seed: int = 0,
    uncited: Mapping[str, Sequence[str]] | None = None,
) -> list[Pair]:
    """(sentence, claim) pairs labelled for NLI: a rationale sentence of a SUPPORT claim entails
    it, one of a CONTRADICT claim contradicts it; up to `neutral_per_document` other sentences
    of each cited document (drawn at random) are neutral. With `uncited` ({claim id: documents
    near the claim it does not cite}, `nearest_uncited`), each of those documents' title and
    its `neutral_per_document` sentences sharing most content words with the claim are neutral
    too: text about the claim's topic that is not its evidence, what a retrieval query mostly
    reads."""
    rng = np.random.default_rng(seed)
    pairs = []
    for claim in claims:
        for document in claim.cited:
            sentences = split_sentences(documents[document]["text"])
            rationale = [i for i in claim.rationales.get(document, ()) if i < len(sentences)]
            label = NLI_LABEL.get(claim.verdict)
            if label:
                pairs += [Pair(sentences[i], claim.text, label) for i in rationale]
            others = [i for i in range(len(sentences)) if i not in rationale]
            for i in rng.permutation(others)[:neutral_per_document]:
                pairs.append(Pair(sentences[int(i)], claim.text, "neutral"))
        words = set(content_words(claim.text))
        for document in (uncited or {}).get(claim.id, ()):
            title = documents[document].get("title", "").strip()
            sentences = split_sentences(documents[document]["text"])
            closest = sorted(sentences, key=lambda s: -len(words & set(content_words(s))))
            pairs += [Pair(s, claim.text, "neutral") for s in [title, *closest[:neutral_per_document]] if s]
    return pairs


def nearest_uncited(
    claims: list[Claim],
    documents: dict[str, dict],
    embed: Callable[[list[str]], np.ndarray],
    count: int,
) -> dict[str, list[str]]:
    """{claim id: its `count` nearest documents (cosine of normalised embeddings of the claim
    and of title plus text) among those it does not cite}."""
    ids = list(documents)
    vectors = embed([f"{documents[d].get('title', '')}. {documents[d]['text']}" for d in ids])
    queries = embed([c.text for c in claims])
    nearest = {}
    for claim, similarity in zip(claims, queries @ vectors.T, strict=True):
        cited = set(claim.cited)
        order = (ids[i] for i in np.argsort(-similarity, kind="stable"))
        nearest[claim.id] = [d for d in order if d not in cited][:count]
    return nearest


def claim_pairs(data: Path, claims: list[Claim], hard_negatives: int) -> list[Pair]:
    """`nli_pairs` of the claims over the BEIR directory's corpus, with their `hard_negatives`
    nearest uncited documents under the bundled embedder (0: none)."""
    documents = read_documents(data)
    uncited = None
    if hard_negatives:
        from sounding.models.embedder import TorchEmbedder

        uncited = nearest_uncited(claims, documents, TorchEmbedder("cpu").encode, hard_negatives)
    return nli_pairs(claims, documents, uncited=uncited)
