"""Mutual information between an initial answer and its self-revision (robust-MI spec §2.3.4),
from the semantic cluster ids of k (initial, revised) answer pairs.

With n_ab pairs in clusters (a, b), N pairs, A and B the clusters seen in each step and additive
smoothing ε = 1e-6:
    p(a, b) = (n_ab + ε) / (N + ε|A||B|),  p(a) = (n_a + ε) / (N + ε|A|),  p(b) likewise,
    I = Σ_{a ∈ A, b ∈ B} p(a, b) · ln(p(a, b) / (p(a) p(b)))   (nats).
One cluster in both steps gives exactly 0.0. Cluster ids that are missing or NaN (a failed
clustering) fall back to clustering by exact string. With importance weights (§2.4.4, the
diversity-steered sampler's), the counts are weighted sums and N is the sum of the weights.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence

SMOOTHING = 1e-6


def mutual_information(
    initial: Sequence[Hashable],
    revised: Sequence[Hashable],
    eps: float = SMOOTHING,
    weights: Sequence[float] | None = None,
) -> float:
    if len(initial) != len(revised) or not initial:
        raise ValueError("needs equally many initial and revised cluster ids, at least one")
    weights = [1.0] * len(initial) if weights is None else list(weights)
    if len(weights) != len(initial) or min(weights) <= 0:
        raise ValueError("needs one positive weight per pair")
    rows, columns = sorted(set(initial), key=repr), sorted(set(revised), key=repr)
    if len(rows) == 1 and len(columns) == 1:
        return 0.0
    total = sum(weights)
    joint: defaultdict[tuple[Hashable, Hashable], float] = defaultdict(float)
    row_counts: defaultdict[Hashable, float] = defaultdict(float)
    column_counts: defaultdict[Hashable, float] = defaultdict(float)
    for a, b, weight in zip(initial, revised, weights, strict=True):
        joint[a, b] += weight
        row_counts[a] += weight
        column_counts[b] += weight
    joint_norm = total + eps * len(rows) * len(columns)
    information = 0.0
    for a in rows:
        p_a = (row_counts[a] + eps) / (total + eps * len(rows))
        for b in columns:
            p_b = (column_counts[b] + eps) / (total + eps * len(columns))
            p_ab = (joint[a, b] + eps) / joint_norm
            information += p_ab * math.log(p_ab / (p_a * p_b))
    return information


def cluster_ids_or_exact(answers: Sequence[str], cluster_ids: Sequence[float | int | None] | None) -> list:
    """The cluster ids, or, when clustering failed (None, or any id missing or NaN), the
    answers' exact strings as their clusters."""
    if cluster_ids is None or len(cluster_ids) != len(answers):
        return list(answers)
    if any(c is None or (isinstance(c, float) and math.isnan(c)) for c in cluster_ids):
        return list(answers)
    return list(cluster_ids)
