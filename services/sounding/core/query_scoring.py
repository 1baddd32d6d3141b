"""Scoring a candidate retrieval query of a corpus inquiry before it runs (active-learning spec
§2.4, §3.1–§3.3): pure, from cheap probes that execute nothing.

Probes: the candidate's embedding's cosine to the claim, its largest cosine to the queries
already run, to the chunks already read and to the chunks about the claim that earlier queries
fetched but did not read (their ranked lists go deeper than what is read), and whether any such
chunk is left. From them and the candidate's generation strategy the outcome model
(`core.reach`) predicts ν, the chance that the candidate reaches unread text about the claim (a
new chunk at least as close to the claim as the session's relevance floor), and how sure it is.
Then:

- expected information gain over the verdicts (§3.1), from ν and the candidate's own sensor
  table (its generation strategy's: what such queries found on claims of each verdict;
  `core.claim_evidence.predicted_outcomes`), so two candidates of equal reach gain differently
  when their strategies' tables differ;
- cost (§2.4): the search's latency plus inference over the sentences it is expected to bring
  (ν × sentences per query × ms per sentence), in ms, normalised by the session's cost scale
  (`Costs.scale_ms`, capped at 1);
- the cost-adjusted score EIG / (1 + λ·cost);
- the exploration bonus (§3.3): novelty = 1 − the largest cosine to a query run, prediction
  uncertainty = 1 − the outcome model's confidence, coverage = 1 / (1 + queries run on the
  candidate's aspect), and the count of queries run at least `SIMILAR_QUERY` alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core import query_candidates
from sounding.core.claim_evidence import predicted_outcomes
from sounding.core.information import cost_adjusted_score, exploration_bonus, information_gain
from sounding.core.reach import ReachModel

# The outcome model's inputs, in order (`features`).
REACH_FEATURES = (
    "bias",
    "similarity_to_claim",
    "similarity_to_queries",
    "similarity_to_read",
    "similarity_to_unread",
    "unread_left",
    "first_query",
    *(f"strategy:{s}" for s in query_candidates.STRATEGIES),
)
# Names the inputs above: a logged query of another feature set is not replayed into the model.
FEATURE_SET = hashlib.sha256(",".join(REACH_FEATURES).encode()).hexdigest()[:12]
# Its prior before any query was observed: a first query close to the claim nearly always reaches
# new text about it; one far from the claim, or close to what was run or read, rarely does; one
# close to fetched text about the claim that is still unread often does, and a session with no
# such text left seldom reaches any.
REACH_PRIOR = {
    "bias": -0.5,
    "similarity_to_claim": 3.0,
    "similarity_to_queries": -4.0,
    "similarity_to_read": -2.0,
    "similarity_to_unread": 3.0,
    "unread_left": 0.5,
    "first_query": 1.0,
}
# A candidate's cost in ms is normalised by this by default (and capped at 1): with λ = 1, a
# query must be expected to gain a bit per 20 s of work to be worth running. A scale of 5 s,
# chosen on 80 held-out train claims, stopped `eig` too early on the test claims once the sensor
# table was fitted from all 158 (bench/README.md).
COST_SCALE_MS = 20_000.0
# Queries at least this similar (cosine) to a candidate count as "similar" in its bonus.
SIMILAR_QUERY = 0.8


def prior_reach_model() -> ReachModel:
    mean = np.array([REACH_PRIOR.get(name, 0.0) for name in REACH_FEATURES])
    return ReachModel(REACH_FEATURES, mean, np.ones(len(REACH_FEATURES)))


def features(
    strategy: str,
    similarity_to_claim: float,
    similarity_to_queries: float,
    similarity_to_read: float,
    similarity_to_unread: float,
    unread_left: bool,
    first: bool,
) -> list[float]:
    """The outcome model's inputs, in `REACH_FEATURES`' order."""
    one_hot = [float(strategy == s) for s in query_candidates.STRATEGIES]
    return [
        1.0,
        similarity_to_claim,
        similarity_to_queries,
        similarity_to_read,
        similarity_to_unread,
        float(unread_left),
        float(first),
        *one_hot,
    ]


@dataclass(frozen=True)
class Costs:
    """What running a query costs, as measured so far, and the ms a cost of 1 stands for."""

    search_ms: float
    nli_ms_per_sentence: float
    sentences_per_query: float
    scale_ms: float = COST_SCALE_MS


@dataclass(frozen=True, kw_only=True)
class CandidateScore:
    features: list[float]
    reach: float
    expected_gain: float
    cost_ms: float
    cost: float
    adjusted: float
    bonus: float


def score(
    *,
    candidate: query_candidates.Candidate,
    vector: np.ndarray,
    claim: np.ndarray,
    queries_run: np.ndarray,
    chunks_read: np.ndarray,
    chunks_unread: np.ndarray,
    aspects_run: Sequence[str],
    belief: np.ndarray,
    table: np.ndarray,
    reach_model: ReachModel,
    costs: Costs,
    cost_sensitivity: float,
    exploration_weight: float,
) -> CandidateScore:
    """The candidate's scores; `vector` and `claim` are unit vectors, `queries_run`,
    `chunks_read` and `chunks_unread` (fetched, about the claim, not read) unit vectors one row
    each (possibly none)."""
    to_queries = queries_run @ vector if len(queries_run) else np.zeros(0)
    to_read = chunks_read @ vector if len(chunks_read) else np.zeros(0)
    to_unread = chunks_unread @ vector if len(chunks_unread) else np.zeros(0)
    nearest_query = float(to_queries.max(initial=0.0))
    x = features(
        candidate.strategy,
        float(claim @ vector),
        nearest_query,
        float(to_read.max(initial=0.0)),
        float(to_unread.max(initial=0.0)),
        bool(len(chunks_unread)),
        not len(aspects_run),
    )
    reach, confidence = reach_model.predict(x)
    gain = information_gain(belief, predicted_outcomes(reach, table)).expected_gain
    cost_ms = costs.search_ms + reach * costs.sentences_per_query * costs.nli_ms_per_sentence
    cost = min(cost_ms / costs.scale_ms, 1.0)
    return CandidateScore(
        features=x,
        reach=reach,
        expected_gain=gain,
        cost_ms=cost_ms,
        cost=cost,
        adjusted=cost_adjusted_score(gain, cost, cost_sensitivity),
        bonus=exploration_bonus(
            exploration_weight,
            novelty=1.0 - max(nearest_query, 0.0),
            prediction_uncertainty=1.0 - confidence,
            coverage=1.0 / (1 + list(aspects_run).count(candidate.aspect)),
            similar_queries=int((to_queries >= SIMILAR_QUERY).sum()),
        ),
    )
