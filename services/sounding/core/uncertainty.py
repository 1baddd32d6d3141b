"""What a retrieval may have missed (retrieval-uncertainty spec, "Miss Rate Computation") and
the monotone calibration of stated rates against observed ones. Pure numpy/scipy.

Signals, each in a fixed range:
- `tail_density`: share of similarity scores in the borderline band [0.3, 0.5), at most 0.5
  (0.5 when there are no scores): a fat tail means relevant content may sit just below the cut.
- `near_threshold`: min(borderline count / 10, 0.3).
- `historical`: the observed miss rate of similar past queries (`MissHistory`; 0.3 when none
  are known).
- `complexity`: distinct concepts (key phrases) in the query, min(count / 5, 1).
- `disagreement`: 1 − the mean pairwise Jaccard overlap of the arms' top-10 documents (0 with
  one arm): arms that disagree suggest neither found everything.
- `flatness`: the tenth score over the first of the lexical arm's ranking (the dense arm's
  without a lexical one; 1 with no hits): near 1 when no document stands out, near 0 when
  one clearly does (a query-performance predictor).

miss_rate = min(0.9, 0.3·tail + near_threshold + 0.3·historical + 0.1·complexity
                     + 0.1·disagreement + 0.3·flatness)
The first four terms and the cap are the spec's; disagreement and flatness are Sounding's
additions. Why flatness: on SciFact train (809 queries, dense + lexical fused, "missed" = a
relevant document outside the top 10), the AUROC of each signal alone for "missed" was
tail density 0.48, near-threshold 0.48, complexity 0.41, disagreement 0.65, the BM25 flatness
0.81; on test the combination without flatness scored 0.60, with it 0.75 (`bench/README.md`,
"Retrieval uncertainty").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from numpy.typing import ArrayLike

from sounding.core.entities import extract_entities
from sounding.core.neighbours import NearestValues

BORDERLINE = (0.3, 0.5)
DEFAULT_HISTORICAL_MISS_RATE = 0.3
MAX_MISS_RATE = 0.9
DISAGREEMENT_TOP = 10
FLATNESS_RANK = 10


def tail_density(scores: Sequence[float]) -> float:
    if len(scores) == 0:
        return 0.5
    values = np.asarray(scores, dtype=float)
    tail = np.count_nonzero((values >= BORDERLINE[0]) & (values < BORDERLINE[1]))
    return min(tail / len(values), 0.5)


def near_threshold(scores: Sequence[float]) -> float:
    values = np.asarray(scores, dtype=float)
    count = np.count_nonzero((values > BORDERLINE[0]) & (values < BORDERLINE[1]))
    return min(count / 10, 0.3)


def query_complexity(query: str) -> float:
    return min(len(extract_entities(query, limit=10)) / 5, 1.0)


def arm_disagreement(rankings: Mapping[str, Sequence[str]], top: int = DISAGREEMENT_TOP) -> float:
    tops = [set(list(ranking)[:top]) for ranking in rankings.values()]
    pairs = [(a, b) for a, b in combinations(tops, 2) if a | b]
    if not pairs:
        return 0.0
    return 1.0 - float(np.mean([len(a & b) / len(a | b) for a, b in pairs]))


class MissHistory:
    """Observed retrievals' query embeddings and whether they missed something; the historical
    signal for a new query is the smoothed miss share of its nearest observed queries:
    (misses among the k most similar + PRIOR_WEIGHT · 0.3) / (k + PRIOR_WEIGHT)."""

    NEIGHBOURS = 10
    PRIOR_WEIGHT = 2.0

    def __init__(self, capacity: int = 20_000) -> None:
        self._outcomes = NearestValues(capacity)

    def __len__(self) -> int:
        return len(self._outcomes)

    def add(self, embedding: ArrayLike, missed: bool) -> None:
        self._outcomes.add(embedding, float(missed))

    def add_many(self, embeddings: Sequence[ArrayLike] | np.ndarray, missed: Sequence[bool]) -> None:
        self._outcomes.add_many(embeddings, np.asarray(missed, dtype=float))

    def miss_rate(self, embedding: ArrayLike) -> float | None:
        """None before any retrieval was observed."""
        if not len(self._outcomes):
            return None
        nearest = self._outcomes.nearest(embedding, self.NEIGHBOURS)
        return (float(nearest.sum()) + self.PRIOR_WEIGHT * DEFAULT_HISTORICAL_MISS_RATE) / (
            len(nearest) + self.PRIOR_WEIGHT
        )


def flatness(scores: Sequence[float], rank: int = FLATNESS_RANK) -> float:
    """The score at `rank` (or the last) over the first, in [0, 1]; 1 without positive scores."""
    if len(scores) == 0 or scores[0] <= 0:
        return 1.0
    return float(min(max(scores[min(rank, len(scores)) - 1] / scores[0], 0.0), 1.0))


@dataclass(frozen=True)
class MissRateSignals:
    tail_density: float
    near_threshold: float
    historical: float
    complexity: float
    disagreement: float
    flatness: float

    @classmethod
    def measure(
        cls,
        query: str,
        similarity_scores: Sequence[float],
        rankings: Mapping[str, Sequence[str]],
        historical: float | None = None,
        separation_scores: Sequence[float] = (),
    ) -> MissRateSignals:
        """`similarity_scores`: the dense arm's cosine similarities; `separation_scores`: the
        ranking whose flatness is measured (lexical BM25 scores, else the dense ones)."""
        return cls(
            tail_density(similarity_scores),
            near_threshold(similarity_scores),
            DEFAULT_HISTORICAL_MISS_RATE if historical is None else historical,
            query_complexity(query),
            arm_disagreement(rankings),
            flatness(separation_scores),
        )

    def miss_rate(self) -> float:
        combined = (
            0.3 * self.tail_density
            + self.near_threshold
            + 0.3 * self.historical
            + 0.1 * self.complexity
            + 0.1 * self.disagreement
            + 0.3 * self.flatness
        )
        return min(MAX_MISS_RATE, combined)

    def inputs(self) -> dict[str, float]:
        return {
            "tail_density": self.tail_density,
            "near_threshold": self.near_threshold,
            "historical_miss_rate": self.historical,
            "query_complexity": self.complexity,
            "arm_disagreement": self.disagreement,
            "score_flatness": self.flatness,
        }


FORMULA = (
    "min(0.9, 0.3*tail_density + near_threshold + 0.3*historical_miss_rate + 0.1*query_complexity"
    " + 0.1*arm_disagreement + 0.3*score_flatness)"
)
