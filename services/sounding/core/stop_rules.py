"""Answer-or-ask rules for LLM inquiry (robust-MI spec §2.5.4, §3.2–§3.6, §3.9).

Every rule turns the signals of a state into a score where lower means "more ready to answer",
so one risk-controlled threshold procedure (core.risk_control) calibrates any of them, and a
rule answers when its score is at most its threshold:

- `robust_mi_risk`: max over prompt variants of the self-revision MI (diversity-steered); τ from
  Calibrate(STOP_THRESHOLD).
- `mi_only`: the base variant's MI from plain sampling (§3.9).
- `self_consistency`: 1 − p_max of plain samples; default answers at p_max ≥ ρ = 0.8 (§3.2).
- `semantic_entropy`: entropy (nats) of the plain samples' clusters (§3.4).
- `verbalized_confidence`: 1 − c, c the stated confidence (1–10 scaled to [0, 1]) or its
  isotonic map to accuracy once calibrated (§3.3); default answers at c ≥ 0.8.
- `knowno_set_size`: the split-conformal prediction set C(h) = {y : p(y) ≥ 1 − q}; answer iff
  |C| = 1 (§3.5). Score |C|.
- `cip_lite`: the same sets and the same rule (§3.6, stopping only). An empty set is not
  certainty: no answer is plausible enough to stand alone, so both rules ask on. The methods
  differ in how they choose questions (C-IP-full minimises the expected set size), not in when
  they stop.

`hypothesis_entropy` is the planning baselines' own stop (§3.7, §3.8): the entropy (nats) of the
hypothesis set the `eig` and `uot` question selections plan over, answered by its most probable
member rather than the state's answer. It exists only in sessions of those selections, and its
threshold is the fixed `DEFAULT_THRESHOLDS` value (the spec fixes it; nothing calibrates it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal

import numpy as np

StopRule = Literal[
    "robust_mi_risk",
    "mi_only",
    "self_consistency",
    "semantic_entropy",
    "verbalized_confidence",
    "knowno_set_size",
    "cip_lite",
]
STOP_RULES: tuple[StopRule, ...] = (
    "robust_mi_risk",
    "mi_only",
    "self_consistency",
    "semantic_entropy",
    "verbalized_confidence",
    "knowno_set_size",
    "cip_lite",
)
SET_RULES = ("knowno_set_size", "cip_lite")
HYPOTHESIS_ENTROPY = "hypothesis_entropy"
# Every rule a session may stop by: the calibrated ones, and the planning selections' own.
SESSION_STOP_RULES: tuple[str, ...] = (*STOP_RULES, HYPOTHESIS_ENTROPY)

# Thresholds a rule uses before any calibration (scores: lower is readier).
DEFAULT_THRESHOLDS: dict[str, float] = {
    "robust_mi_risk": 0.1,  # nats
    "mi_only": 0.1,
    "self_consistency": 1 - 0.8,  # ρ = 0.8
    "semantic_entropy": 0.5,  # nats
    "verbalized_confidence": 1 - 0.8,  # θ = 8 of 10
    # Below ln 2: one gn secret left, or seven of eight sp explanations in one cluster.
    HYPOTHESIS_ENTROPY: 0.5,  # nats
}
# Split-conformal quantile q before calibration: the set keeps labels with p ≥ 1 − q = 0.5.
DEFAULT_CONFORMAL_QUANTILE = 0.5


def cluster_distribution(labels: Sequence[Hashable], weights: Sequence[float] | None = None) -> dict:
    """Each cluster's (weighted) share of the samples, largest first."""
    weights = [1.0] * len(labels) if weights is None else weights
    counts: defaultdict[Hashable, float] = defaultdict(float)
    for label, weight in zip(labels, weights, strict=True):
        counts[label] += weight
    total = sum(counts.values())
    return {label: count / total for label, count in sorted(counts.items(), key=lambda c: -c[1])}


def semantic_entropy(distribution: Mapping[Hashable, float]) -> float:
    return float(-sum(p * math.log(p) for p in distribution.values() if p > 0))


def conformal_quantile(nonconformity: Sequence[float], alpha: float) -> float:
    """The split-conformal quantile: the ⌈(n + 1)(1 − α)⌉-th smallest score (1.0, every label,
    when there are too few calibration states)."""
    scores = np.sort(np.asarray(nonconformity, dtype=float))
    rank = math.ceil((len(scores) + 1) * (1 - alpha))
    return float(scores[rank - 1]) if 1 <= rank <= len(scores) else 1.0


def prediction_set(distribution: Mapping[Hashable, float], quantile: float) -> list:
    return [label for label, p in distribution.items() if 1 - p <= quantile + 1e-12]


def set_rule_answers(set_size: int) -> bool:
    """Both set rules answer on a singleton set only (an empty set asks on)."""
    return set_size == 1
