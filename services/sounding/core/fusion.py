"""The fusion of several rankings of the same documents into one.

- `weighted_rrf`: weighted reciprocal rank fusion (adaptive-strategy-learning spec, weighted RRF):
  score(d) = sum over arms a that ranked d of  w_a / (k + rank_a(d)),  ranks 1-based.
- `min_max_fusion`: normalised-score fusion, the convex combination of the arms' min-max
  normalised scores (Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid
  Retrieval", 2023): score(d) = sum over arms a of  w_a · n_a(d) / sum of w_a,  where
  n_a(d) = (s_a(d) − min s_a) / (max s_a − min s_a) over the ranking arm a returned, and 0 for a
  document it did not return. Unlike RRF it keeps how far apart an arm's scores are, so a
  document one arm scores far above its other hits counts for more than its rank alone says.

`Fusion` names one of them with its parameter; a Retrieve fuses with the one it asks for, else
the deployment's (min-max by default, bench/README.md "Zero-shot fusion").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_RRF_K = 60.0
MIN_MAX = "min_max"
RRF = "rrf"
FUSION_METHODS = (MIN_MAX, RRF)


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


def _ranked(
    rankings: Mapping[str, Sequence[tuple[str, float]]], weights: Mapping[str, float] | None
) -> tuple[dict[str, FusedItem], dict[str, int]]:
    """Every document's item with its contributions (score 0 yet) and its best rank, after
    checking that no arm ranks a document twice."""
    items: dict[str, FusedItem] = {}
    best_rank: dict[str, int] = {}
    for arm, ranking in rankings.items():
        if weights is not None and weights.get(arm, 1.0) < 0:
            raise ValueError(f"arm {arm!r} has a negative weight")
        keys = [key for key, _ in ranking]
        if len(set(keys)) != len(keys):
            repeated = next(key for i, key in enumerate(keys) if key in keys[:i])
            raise ValueError(f"arm {arm!r} ranks {repeated!r} twice")
        for rank, (key, arm_score) in enumerate(ranking, start=1):
            item = items.get(key)
            if item is None:
                item = items[key] = FusedItem(key, 0.0)
                best_rank[key] = rank
            elif rank < best_rank[key]:
                best_rank[key] = rank
            item.contributions.append(Contribution(arm, rank, arm_score))
    return items, best_rank


def _ordered(items: dict[str, FusedItem], best_rank: dict[str, int], limit: int | None) -> list[FusedItem]:
    """Best first; ties broken by the best rank any arm gave, then by key (deterministic)."""
    ordered = sorted(items.values(), key=lambda item: (-item.score, best_rank[item.key], item.key))
    return ordered if limit is None else ordered[:limit]


def weighted_rrf(
    rankings: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float] | None = None,
    k: float = DEFAULT_RRF_K,
    limit: int | None = None,
) -> list[FusedItem]:
    """Fuse each arm's ranking (best first, as (key, arm score) pairs) into one ranking by
    weighted RRF. Every fused item records which arms found it, at which rank and with which
    arm score."""
    if k <= 0:
        raise ValueError("k must be positive")
    items, best_rank = _ranked(rankings, weights)
    for item in items.values():
        item.score = sum(
            (1.0 if weights is None else weights.get(c.arm, 1.0)) / (k + c.rank) for c in item.contributions
        )
    return _ordered(items, best_rank, limit)


def min_max_fusion(
    rankings: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[FusedItem]:
    """Fuse each arm's ranking (best first, as (key, arm score) pairs, higher scores better)
    into one ranking by the weighted mean of the arms' min-max normalised scores, in [0, 1].
    An arm whose scores are all equal gives each of its documents 1; an arm that returned
    nothing still counts in the weights' sum."""
    for arm, ranking in rankings.items():
        if any(not math.isfinite(score) for _, score in ranking):
            raise ValueError(f"arm {arm!r} has a score that is not finite")
    items, best_rank = _ranked(rankings, weights)
    if not items:
        return []
    weight_of = {arm: 1.0 if weights is None else weights.get(arm, 1.0) for arm in rankings}
    total = sum(weight_of.values())
    if total <= 0:
        raise ValueError("the arms' weights sum to zero")
    spans = {}
    for arm, ranking in rankings.items():
        scores = [score for _, score in ranking]
        if scores:
            spans[arm] = (min(scores), max(scores) - min(scores))
    for item in items.values():
        normalised = 0.0
        for c in item.contributions:
            low, span = spans[c.arm]
            normalised += weight_of[c.arm] * ((c.score - low) / span if span > 0 else 1.0)
        item.score = normalised / total
    return _ordered(items, best_rank, limit)


@dataclass(frozen=True, slots=True)
class Fusion:
    """A fusion method (`MIN_MAX` or `RRF`) and RRF's constant k."""

    method: str = MIN_MAX
    k: float = DEFAULT_RRF_K

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ValueError(f"unknown fusion method {self.method!r}; known: {list(FUSION_METHODS)}")
        if self.k <= 0:
            raise ValueError("k must be positive")

    def fuse(
        self,
        rankings: Mapping[str, Sequence[tuple[str, float]]],
        weights: Mapping[str, float] | None = None,
        limit: int | None = None,
    ) -> list[FusedItem]:
        if self.method == RRF:
            return weighted_rrf(rankings, weights, k=self.k, limit=limit)
        return min_max_fusion(rankings, weights, limit=limit)
