"""Question selection over an explicit hypothesis set (robust-MI spec §3.7 UoT-style, §3.8 EIG).
Pure numpy.

A state is a prior p(z) over hypotheses z and, for every candidate question q, the outcome each
hypothesis implies, outcome(z, q) (an index into the question's outcome alphabet). The answer is
read through a noisy channel: p(o | z, q) = (1 − ε)·1[outcome(z, q) = o] + ε / |O|. With ε = 0
(guessing numbers: the feedback is exact) the posterior is the exact partition; ε > 0 (outcomes
predicted by an NLI model) keeps every branch's posterior defined (§3.8's smoothing for empty
branches).

- `expected_information_gain`: H(p) − Σ_o p(o | q) H(p(z | o, q)) per question, in nats (§3.8).
- `two_step_gains`: §3.7's depth-2 planning: the first question's gain plus, for each of its
  outcomes, the best follow-up question's gain under that branch's posterior, weighted by the
  branch's probability (the expected entropy reduction of the best two-question plan that starts
  with it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class HypothesisProblem:
    """`prior`: p(z), shape (Z,). `outcomes`: shape (Q, Z), outcome(z, q) in [0, alphabet).
    `noise`: ε of the answer channel."""

    prior: np.ndarray
    outcomes: np.ndarray
    alphabet: int
    noise: float = 0.0

    @classmethod
    def of(
        cls, prior: ArrayLike, outcomes: ArrayLike, alphabet: int, noise: float = 0.0
    ) -> HypothesisProblem:
        p = np.asarray(prior, dtype=float)
        table = np.asarray(outcomes, dtype=int)
        if p.ndim != 1 or p.size == 0 or np.any(p < 0) or p.sum() <= 0:
            raise ValueError("prior must be a non-empty, non-negative vector with positive mass")
        if table.ndim != 2 or table.shape[1] != p.size:
            raise ValueError(f"outcomes must have shape (questions, {p.size})")
        if alphabet < 1 or (table.size > 0 and (table.min() < 0 or table.max() >= alphabet)):
            raise ValueError("every outcome must be an index below alphabet")
        if not 0.0 <= noise < 1.0:
            raise ValueError("noise must be in [0, 1)")
        return cls(p / p.sum(), table, alphabet, noise)

    def likelihood(self, question: int) -> np.ndarray:
        """p(o | z, q), shape (alphabet, Z)."""
        exact = (self.outcomes[question][None, :] == np.arange(self.alphabet)[:, None]).astype(float)
        return (1.0 - self.noise) * exact + self.noise / self.alphabet

    def branches(self, question: int, prior: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """p(o | q) (alphabet,) and the posteriors p(z | o, q) (alphabet, Z); an impossible branch
        (p(o) = 0) keeps the prior."""
        p = self.prior if prior is None else prior
        joint = self.likelihood(question) * p[None, :]
        marginal = joint.sum(axis=1)
        safe = np.where(marginal > 0, marginal, 1.0)
        posteriors = np.where(marginal[:, None] > 0, joint / safe[:, None], p[None, :])
        return marginal, posteriors


def entropy(p: ArrayLike) -> float:
    """Shannon entropy in nats of a distribution (zeros ignored)."""
    q = np.asarray(p, dtype=float)
    q = q[q > 0]
    return float(-(q * np.log(q)).sum())


def _gain(problem: HypothesisProblem, question: int, prior: np.ndarray) -> float:
    marginal, posteriors = problem.branches(question, prior)
    after = sum(m * entropy(post) for m, post in zip(marginal, posteriors, strict=True) if m > 0)
    return max(entropy(prior) - after, 0.0)


def expected_information_gain(problem: HypothesisProblem) -> np.ndarray:
    """§3.8: each question's expected entropy reduction of p(z), nats, shape (Q,)."""
    return np.array([_gain(problem, q, problem.prior) for q in range(problem.outcomes.shape[0])])


def two_step_gains(problem: HypothesisProblem) -> np.ndarray:
    """§3.7 (depth 2): per first question q, EIG(q) + Σ_o p(o | q) max_{q' ≠ q} EIG(q' | o), nats,
    shape (Q,). With one candidate it is that candidate's EIG."""
    count = problem.outcomes.shape[0]
    totals = np.zeros(count)
    for first in range(count):
        marginal, posteriors = problem.branches(first)
        follow_up = 0.0
        for mass, posterior in zip(marginal, posteriors, strict=True):
            if mass <= 0 or count == 1:
                continue
            follow_up += mass * max(_gain(problem, q, posterior) for q in range(count) if q != first)
        totals[first] = _gain(problem, first, problem.prior) + follow_up
    return totals
