"""Weighted reciprocal rank fusion (adaptive-strategy-learning spec, weighted RRF).

score(d) = sum over arms a that ranked d of  w_a / (k + rank_a(d)),  ranks 1-based.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_RRF_K = 60.0


@dataclass(frozen=True, slots=True)
class Contribution:
    arm: str
    rank: int
    score: float


@dataclass(slots=True)
class FusedItem:
    key: str
    score: float
    contributions: list[Contribution] = field(default_factory=list)


def weighted_rrf(
    rankings: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float] | None = None,
    k: float = DEFAULT_RRF_K,
    limit: int | None = None,
) -> list[FusedItem]:
    """Fuse each arm's ranking (best first, as (key, arm score) pairs) into one ranking.

    Every fused item records which arms found it, at which rank and with which arm score.
    Ties are broken by the best rank any arm gave, then by key, so the output is deterministic.
    """
    if k <= 0:
        raise ValueError("k must be positive")
    fused: dict[str, FusedItem] = {}
    best_rank: dict[str, int] = {}
    for arm, ranking in rankings.items():
        weight = 1.0 if weights is None else weights.get(arm, 1.0)
        keys = [key for key, _ in ranking]
        if len(set(keys)) != len(keys):
            repeated = next(key for i, key in enumerate(keys) if key in keys[:i])
            raise ValueError(f"arm {arm!r} ranks {repeated!r} twice")
        for rank, (key, arm_score) in enumerate(ranking, start=1):
            item = fused.get(key)
            if item is None:
                item = fused[key] = FusedItem(key, 0.0)
                best_rank[key] = rank
            elif rank < best_rank[key]:
                best_rank[key] = rank
            item.score += weight / (k + rank)
            item.contributions.append(Contribution(arm, rank, arm_score))
    ordered = sorted(fused.values(), key=lambda item: (-item.score, best_rank[item.key], item.key))
    return ordered if limit is None else ordered[:limit]
