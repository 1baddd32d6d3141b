"""Semantic clustering of short texts (robust-MI spec §2.2.2).

Three ways, from cheapest: exact labels (canonical strings), embedding clusters (agglomerative,
average linkage, cosine distance threshold), and entailment-refined clusters (embedding clusters
split so that members mutually entail and none contradicts another). The NLI probabilities are
supplied by the caller, so everything here is pure. Labels are numbered 0, 1, ... in order of
first appearance, so equal inputs give equal labels.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np

DEFAULT_DISTANCE_THRESHOLD = 0.25
# §2.2.2: a pair is split when P(entailment) < 0.3 and P(contradiction) > 0.5.
SPLIT_MAX_ENTAILMENT = 0.3
SPLIT_MIN_CONTRADICTION = 0.5


def canonical(text: str) -> str:
    """Case-folded, whitespace collapsed, and everything but letters and digits stripped from
    both ends (linear time: a regex for the end was quadratic on long punctuation runs)."""
    folded = " ".join(text.casefold().split())
    start, end = 0, len(folded)
    while start < end and not folded[start].isalnum():
        start += 1
    while end > start and not folded[end - 1].isalnum():
        end -= 1
    return folded[start:end]


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
        n_clusters=None,  # pyright: ignore[reportArgumentType]  # None: cut at the distance threshold
        metric="cosine",
        linkage="average",
        distance_threshold=distance_threshold,
    )
    return renumber(model.fit_predict(np.asarray(vectors, dtype=np.float64)).tolist())


Entail = Callable[[list[tuple[int, int]]], Awaitable[Sequence[Sequence[float]]]]


async def refine_with_entailment(labels: Sequence[int], entail: Entail, max_pairs: int) -> list[int]:
    """Split each cluster (greedily, in order) so that a member joins a sub-cluster only if it
    and the sub-cluster's first member entail each other (entailment the most probable class,
    both ways) and neither contradicts the other. `entail(pairs)` gives (entailment, neutral,
    contradiction) for each (premise, hypothesis) pair of indices.

    Scored in rounds: in each, every cluster's first member not yet placed founds a sub-cluster,
    and every member still unplaced is scored against it both ways, all in one `entail` call. That
    is the greedy order (a member tries the sub-clusters in the order they were founded) with at
    most 2·n pairs a round. Once `max_pairs` would be exceeded, the members still unplaced each
    found a sub-cluster of their own (more clusters, never a wrong merge)."""

    def contradicts(p: Sequence[float]) -> bool:
        return p[0] < SPLIT_MAX_ENTAILMENT and p[2] > SPLIT_MIN_CONTRADICTION

    def entails(p: Sequence[float]) -> bool:
        return p[0] >= max(p[1], p[2])

    unplaced: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        unplaced.setdefault(label, []).append(index)
    refined = list(range(len(labels)))
    spent = 0
    while any(unplaced.values()):
        heads = {label: members.pop(0) for label, members in unplaced.items() if members}
        pairs = [
            pair
            for label, head in heads.items()
            for member in unplaced[label]
            for pair in ((head, member), (member, head))
        ]
        if not pairs:
            break
        if spent + len(pairs) > max_pairs:
            break  # every member still unplaced stays in a sub-cluster of its own
        spent += len(pairs)
        scored = dict(zip(pairs, await entail(pairs), strict=True))
        for label, head in heads.items():
            remaining = []
            for member in unplaced[label]:
                forward, backward = scored[(head, member)], scored[(member, head)]
                if (
                    not (contradicts(forward) or contradicts(backward))
                    and entails(forward)
                    and entails(backward)
                ):
                    refined[member] = head
                else:
                    remaining.append(member)
            unplaced[label] = remaining
    return renumber(refined)
