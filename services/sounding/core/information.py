"""Information theory for active inquiry (active-learning-retrieval spec §2–§3, §5).

Beliefs are categorical distributions over hypotheses plus an "unknown" mass for the answer
lying outside the hypothesis set. Entropies are in bits and include the unknown mass (§3.1).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


def entropy_bits(probabilities: np.ndarray, unknown_mass: float = 0.0) -> float:
    """H = -sum p log2 p over the hypotheses and the unknown mass (zero terms contribute 0)."""
    p = np.asarray(probabilities, dtype=float)
    p = p[p > 0]
    h = float(-(p * np.log2(p)).sum())
    if unknown_mass > 0:
        h -= unknown_mass * np.log2(unknown_mass)
    return max(h, 0.0)


def max_entropy_bits(hypotheses: int, with_unknown: bool = False) -> float:
    """Entropy of the uniform distribution over the hypotheses (and the unknown, if tracked)."""
    n = hypotheses + (1 if with_unknown else 0)
    return float(np.log2(n)) if n > 1 else 0.0


@dataclass(frozen=True)
class Posterior:
    probabilities: np.ndarray
    unknown_mass: float


def bayes_update(
    probabilities: np.ndarray,
    unknown_mass: float,
    likelihoods: np.ndarray,
    unknown_likelihood: float,
) -> Posterior:
    """p'(h) ∝ p(h)·L(h), unknown' ∝ unknown·L_unknown (§3.1 `updateBeliefs`).

    Likelihood ratios work as well as likelihoods: only their proportions matter. If the
    observation is impossible under every hypothesis and under the unknown, all mass moves to
    the unknown: the hypothesis set has been refuted.
    """
    p = np.asarray(probabilities, dtype=float) * np.asarray(likelihoods, dtype=float)
    unknown = unknown_mass * unknown_likelihood
    total = float(p.sum()) + unknown
    if total <= 0:
        return Posterior(np.zeros_like(p), 1.0)
    return Posterior(p / total, unknown / total)


@dataclass(frozen=True)
class Scenario:
    """One possible result of a question: its probability, the entropy after it and the gain."""

    outcome: int
    probability: float
    entropy_after: float
    gain: float


@dataclass(frozen=True)
class InformationGain:
    entropy_before: float
    expected_entropy_after: float
    scenarios: tuple[Scenario, ...]

    @property
    def expected_gain(self) -> float:
        return max(self.entropy_before - self.expected_entropy_after, 0.0)


def expected_information_gain(
    probabilities: np.ndarray,
    outcomes: np.ndarray,
    unknown_mass: float = 0.0,
    unknown_outcome_probabilities: np.ndarray | None = None,
    noise: float = 0.0,
) -> InformationGain:
    """EIG = H(A) − Σ_r P(r)·H(A | r) over the question's possible results (§3.1).

    `outcomes[h]` is the result index hypothesis h implies, or -1 when h leaves the result open
    (every result equally likely under h). With `noise` ε, the observed result
    equals the implied one with probability 1 − ε and is any other of the K results with
    probability ε/(K − 1). The unknown answers with `unknown_outcome_probabilities` (uniform over
    the results by default).
    """
    outcomes = np.asarray(outcomes, dtype=int)
    results = max(int(outcomes.max(initial=0)) + 1, 1)
    if unknown_outcome_probabilities is not None:
        results = max(results, len(unknown_outcome_probabilities))
    return information_gain(
        probabilities,
        likelihood_matrix(outcomes, results, noise),
        unknown_mass,
        None if unknown_outcome_probabilities is None else np.asarray(unknown_outcome_probabilities, float),
    )


def information_gain(
    probabilities: np.ndarray,
    likelihood: np.ndarray,
    unknown_mass: float = 0.0,
    unknown_likelihood: np.ndarray | None = None,
) -> InformationGain:
    """EIG = H(A) − Σ_r P(r)·H(A | r) for a question whose results have the probabilities
    `likelihood[r, h]` = P(r | h) (columns sum to 1); the unknown answers with
    `unknown_likelihood` (uniform over the results by default)."""
    p = np.asarray(probabilities, dtype=float)
    likelihood = np.asarray(likelihood, dtype=float)
    results = likelihood.shape[0]
    unknown = np.full(results, 1.0 / results) if unknown_likelihood is None else unknown_likelihood
    before = entropy_bits(p, unknown_mass)
    joint = likelihood * p[None, :]
    joint_unknown = unknown * unknown_mass
    evidence = joint.sum(axis=1) + joint_unknown
    scenarios = []
    expected_after = 0.0
    for result in range(results):
        if evidence[result] <= 0:
            continue
        after = entropy_bits(joint[result] / evidence[result], joint_unknown[result] / evidence[result])
        expected_after += evidence[result] * after
        scenarios.append(Scenario(result, float(evidence[result]), after, before - after))
    return InformationGain(before, expected_after, tuple(scenarios))


def likelihood_matrix(outcomes: np.ndarray, results: int, noise: float) -> np.ndarray:
    """P(observed result r | hypothesis h), shape (results, hypotheses)."""
    outcomes = np.asarray(outcomes, dtype=int)
    determined = outcomes >= 0
    exact = np.zeros((results, outcomes.shape[0]))
    exact[outcomes[determined], np.flatnonzero(determined)] = 1.0
    if noise > 0 and results > 1:
        exact = exact * (1.0 - noise) + (1.0 - exact) * (noise / (results - 1))
    exact[:, ~determined] = 1.0 / results
    return exact


def cost_adjusted_score(expected_gain: float, normalized_cost: float, cost_sensitivity: float) -> float:
    """score = EIG / (1 + λ·cost) (§2.4)."""
    return expected_gain / (1.0 + cost_sensitivity * normalized_cost)


def exploration_bonus(
    weight: float,
    novelty: float,
    prediction_uncertainty: float,
    coverage: float,
    similar_queries: int,
) -> float:
    """UCB-style bonus  w·sqrt(novelty · prediction uncertainty · coverage / (1 + similar)) (§3.3).

    novelty = 1 − max similarity to an asked question; coverage = 1 / (1 + questions already
    asked about the same aspect).
    """
    value = novelty * prediction_uncertainty * coverage / (1 + similar_queries)
    return weight * float(np.sqrt(max(value, 0.0)))


@dataclass(frozen=True)
class StoppingConfig:
    min_confidence: float = 0.95
    max_queries: int = 25
    max_cost: float = float("inf")
    min_information_gain: float = 0.01


@dataclass(frozen=True)
class StoppingDecision:
    stop: bool
    # One of confidence_reached, max_queries_reached, budget_exhausted, diminishing_returns,
    # no_viable_queries; empty while going on.
    reason: str = ""


def default_stopping(
    confidence: float,
    queries_executed: int,
    total_cost: float,
    last_information_gain: float,
    config: StoppingConfig,
) -> StoppingDecision:
    """The default criterion of §3.4, checked in its order."""
    if confidence >= config.min_confidence:
        return StoppingDecision(True, "confidence_reached")
    if queries_executed >= config.max_queries:
        return StoppingDecision(True, "max_queries_reached")
    if total_cost >= config.max_cost:
        return StoppingDecision(True, "budget_exhausted")
    if (
        config.min_information_gain > 0
        and queries_executed >= 2
        and last_information_gain < config.min_information_gain
    ):
        return StoppingDecision(True, "diminishing_returns")
    return StoppingDecision(False)


@dataclass(frozen=True)
class PredictionMetrics:
    information_gain_mae: float
    cost_mae: float
    result_type_accuracy: float
    total_outcomes: int
    windows: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Outcome:
    gain_error: float
    cost_error: float
    type_correct: bool


class OutcomeLearner:
    """Tracks predicted against actual gain, cost and result type (§5), overall and over the
    last 10 and last 100 outcomes, and corrects future gain predictions by the mean bias seen."""

    WINDOWS = (10, 100)

    def __init__(self, history_limit: int = 1000):
        self._history: deque[_Outcome] = deque(maxlen=history_limit)
        self._bias_sum = 0.0
        self._count = 0
        self._totals = [0.0, 0.0, 0]

    def record(
        self,
        predicted_gain: float,
        actual_gain: float,
        predicted_cost: float,
        actual_cost: float,
        predicted_type: str,
        actual_type: str,
    ) -> None:
        outcome = _Outcome(
            abs(predicted_gain - actual_gain),
            abs(predicted_cost - actual_cost),
            predicted_type == actual_type,
        )
        self._history.append(outcome)
        self._bias_sum += actual_gain - predicted_gain
        self._count += 1
        self._totals[0] += outcome.gain_error
        self._totals[1] += outcome.cost_error
        self._totals[2] += int(outcome.type_correct)

    def corrected_gain(self, predicted_gain: float) -> float:
        """A prediction shifted by the mean observed bias (never below zero)."""
        if self._count == 0:
            return predicted_gain
        return max(predicted_gain + self._bias_sum / self._count, 0.0)

    def metrics(self) -> PredictionMetrics:
        if self._count == 0:
            return PredictionMetrics(0.0, 0.0, 0.0, 0)
        windows = {}
        for size in self.WINDOWS:
            recent: Sequence[_Outcome] = list(self._history)[-size:]
            windows[f"last_{size}"] = {
                "information_gain_mae": float(np.mean([o.gain_error for o in recent])),
                "cost_mae": float(np.mean([o.cost_error for o in recent])),
                "result_type_accuracy": float(np.mean([o.type_correct for o in recent])),
            }
        return PredictionMetrics(
            information_gain_mae=self._totals[0] / self._count,
            cost_mae=self._totals[1] / self._count,
            result_type_accuracy=self._totals[2] / self._count,
            total_outcomes=self._count,
            windows=windows,
        )
