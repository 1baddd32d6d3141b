"""Semantic clustering of short texts (robust-MI spec §2.2.2).

Three ways, from cheapest: exact labels (canonical strings), embedding clusters (agglomerative,
average linkage, cosine distance threshold), and entailment-refined clusters (embedding clusters
split so that members mutually entail and none contradicts another). The NLI probabilities are
supplied by the caller, so everything here is pure. Labels are numbered 0, 1, ... in order of
first appearance, so equal inputs give equal labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

DEFAULT_DISTANCE_THRESHOLD = 0.25
# §2.2.2: a pair is split when P(entailment) < 0.3 and P(contradiction) > 0.5.
SPLIT_MAX_ENTAILMENT = 0.3
SPLIT_MIN_CONTRADICTION = 0.5

_EDGE_PUNCTUATION = re.compile(r"^[\W_]+|[\W_]+$")
_SPACES = re.compile(r"\s+")


def canonical(text: str) -> str:
    """Case-folded, whitespace collapsed, punctuation stripped from both ends."""
    return _EDGE_PUNCTUATION.sub("", _SPACES.sub(" ", text.casefold()).strip())


def renumber(labels: Sequence[int]) -> list[int]:
    """Labels renumbered 0, 1, ... in order of first appearance."""
    seen: dict[int, int] = {}
    return [seen.setdefault(label, len(seen)) for label in labels]


def exact_clusters(texts: Sequence[str]) -> list[int]:
    seen: dict[str, int] = {}
    return [seen.setdefault(canonical(t), len(seen)) for t in texts]


def embedding_clusters(
    vectors: np.ndarray, distance_threshold: float = DEFAULT_DISTANCE_THRESHOLD
) -> list[int]:
    """Agglomerative clusters of L2-normalised rows: average linkage, merged while the cosine
    distance between clusters is below `distance_threshold`."""
    count = vectors.shape[0]
    if count < 2:
        return [0] * count
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(
        n_clusters=None, metric="cosine", linkage="average", distance_threshold=distance_threshold
    )
    return renumber(model.fit_predict(np.asarray(vectors, dtype=np.float64)).tolist())


def within_cluster_pairs(labels: Sequence[int]) -> list[tuple[int, int]]:
    """Every ordered pair (i, j), i != j, of members of the same cluster: the NLI queries that
    `refine_with_entailment` needs."""
    members: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        members.setdefault(label, []).append(index)
    return [(i, j) for group in members.values() for i in group for j in group if i != j]


def refine_with_entailment(
    labels: Sequence[int], probabilities: Mapping[tuple[int, int], Sequence[float]]
) -> list[int]:
    """Split each cluster (greedily, in order) so that a member joins a sub-cluster only if it
    and the sub-cluster's first member entail each other (entailment the most probable class,
    both ways) and neither contradicts the other. `probabilities[(i, j)]` is (entailment,
    neutral, contradiction) with text i as premise and j as hypothesis."""

    def contradicts(i: int, j: int) -> bool:
        entailment, _, contradiction = probabilities[(i, j)]
        return entailment < SPLIT_MAX_ENTAILMENT and contradiction > SPLIT_MIN_CONTRADICTION

    def entails(i: int, j: int) -> bool:
        entailment, neutral, contradiction = probabilities[(i, j)]
        return entailment >= max(neutral, contradiction)

    def together(i: int, j: int) -> bool:
        return not (contradicts(i, j) or contradicts(j, i)) and entails(i, j) and entails(j, i)

    refined = [0] * len(labels)
    heads: dict[int, list[int]] = {}  # candidate cluster -> first member of each sub-cluster
    next_label = 0
    for index, label in enumerate(labels):
        for head in heads.setdefault(label, []):
            if together(head, index):
                refined[index] = refined[head]
                break
        else:
            heads[label].append(index)
            refined[index] = next_label
            next_label += 1
    return renumber(refined)
