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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sounding.core.claim_evidence import VERDICTS
from sounding.core.sentences import split_sentences
from sounding.evaluation import beir
from sounding.models.nli import Pair

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
    claims: list[Claim], documents: dict[str, dict], neutral_per_document: int = 2, seed: int = 0
) -> list[Pair]:
    """(sentence, claim) pairs labelled for NLI: a rationale sentence of a SUPPORT claim entails
    it, one of a CONTRADICT claim contradicts it; up to `neutral_per_document` other sentences
    of each cited document (drawn at random) are neutral."""
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
    return pairs
