"""The fusion of a Retrieve's rankings (the arms', and the expansion loop's queries'): the
request's fusion over documents (`core.fusion`), each document represented by its best-ranked
chunk."""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter

from sounding.core.fusion import Fusion
from sounding.retrieval.protocol import ArmResult, FusedHit


def fuse_hits(
    landed: Mapping[str, ArmResult], weights: Mapping[str, float], fusion: Fusion, top_k: int
) -> list[FusedHit]:
    """The top `top_k` documents of `fusion` over `landed`'s rankings, weighted; each document's
    chunk is that of its best rank (on a tie, that of the ranking listed first)."""
    rankings = {arm: [(h.document_id, h.score) for h in r.hits] for arm, r in landed.items()}
    chunks = {arm: {h.document_id: h.chunk_id for h in r.hits} for arm, r in landed.items()}
    fused = []
    for item in fusion.fuse(rankings, weights, limit=top_k):
        best = min(item.contributions, key=attrgetter("rank"))
        fused.append(FusedHit(item.key, chunks[best.arm][item.key], item.score, item.contributions))
    return fused
