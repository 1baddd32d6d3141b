"""The evidence model of claim verification over a corpus (active-learning spec §2.1, §3.1; the
`corpus` inquiry domain): what the sentences a retrieval query found say about a claim, as a
likelihood per verdict.

Verdicts: SUPPORT, CONTRADICT, NOT_ENOUGH_INFO. A query's result is summarised as one of three
outcomes: it surfaced entailing evidence (E), contradicting evidence (C), or nothing that decides
(N). Natural-language inference reads each new sentence s against the claim: P(entails) e_s,
P(contradicts) c_s, weighted by the sentence's relevance r_s in [0, 1]. The query surfaced
entailing evidence with the noisy-OR probability

    a = 1 − Π_s (1 − r_s·e_s),   and contradicting evidence with   b = 1 − Π_s (1 − r_s·c_s),

so its soft outcome is v = (a(1 − b), b(1 − a), (1 − a)(1 − b) + ab): both at once decide
nothing. A sensor table M[o, h] = P(outcome o | verdict h) of a query that reaches new text (fit
on labelled claims, `SensorModel.fit`) turns v into a likelihood per verdict, Pearl's virtual
evidence:

    L(h) = Σ_o v_o · M[o, h].

Evidence found once explains the silence after it: once entailing evidence of strength a* has
been found, a supported claim's later queries behave as if nothing were left to find, so the
SUPPORT column becomes (1 − a*)·M[·, SUPPORT] + a*·M[·, NOT_ENOUGH_INFO] (and likewise the
CONTRADICT column with b*). The belief is the prior times the queries' likelihoods, normalised;
NOT_ENOUGH_INFO gains whenever queries that reach new text find nothing that decides.

A candidate query is predicted to reach new text with probability ν (its reach, from the outcome
model); its outcome probabilities are ν·M + (1 − ν)·[o = N], from which its expected information
gain follows (`core.information.information_gain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

VERDICTS = ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO")
SUPPORT, CONTRADICT, NOT_ENOUGH_INFO = range(3)
OUTCOMES = ("entailing", "contradicting", "nothing")
ENTAILING, CONTRADICTING, NOTHING = range(3)

# P(outcome | verdict) of a query reaching new text before any fit: columns are verdicts.
DEFAULT_SENSOR = np.array(
    [
        [0.55, 0.10, 0.08],
        [0.05, 0.45, 0.07],
        [0.40, 0.45, 0.85],
    ]
)


@dataclass(frozen=True)
class SensorModel:
    """M[o, h] = P(outcome o | verdict h) for a query that reaches new text (columns sum to 1)."""

    table: np.ndarray = field(default_factory=DEFAULT_SENSOR.copy)

    @classmethod
    def fit(cls, counts: ArrayLike, smoothing: float = 1.0) -> SensorModel:
        """From counts[o, h] of hard outcomes observed on claims of known verdict (additive
        smoothing keeps every outcome possible)."""
        table = np.asarray(counts, dtype=float) + smoothing
        return cls(table / table.sum(axis=0, keepdims=True))

    def given_found(self, found_entailing: float, found_contradicting: float) -> np.ndarray:
        """The table once evidence of strengths a* (entailing) and b* (contradicting) has been
        found: a verdict whose evidence is found has nothing left for later queries to find."""
        table = self.table.copy()
        table[:, SUPPORT] = (1 - found_entailing) * table[:, SUPPORT] + found_entailing * table[
            :, NOT_ENOUGH_INFO
        ]
        table[:, CONTRADICT] = (1 - found_contradicting) * table[:, CONTRADICT] + found_contradicting * table[
            :, NOT_ENOUGH_INFO
        ]
        return table


def soft_outcome(entailment: ArrayLike, contradiction: ArrayLike, relevance: ArrayLike) -> np.ndarray:
    """v = P(E), P(C), P(N) of a query from its new sentences' NLI probabilities and relevance
    (no sentence: v = (0, 0, 1))."""
    e = np.clip(np.asarray(entailment, float) * np.asarray(relevance, float), 0.0, 1.0)
    c = np.clip(np.asarray(contradiction, float) * np.asarray(relevance, float), 0.0, 1.0)
    a = 1.0 - float(np.prod(1.0 - e))
    b = 1.0 - float(np.prod(1.0 - c))
    return np.array([a * (1 - b), b * (1 - a), (1 - a) * (1 - b) + a * b])


def likelihood(outcome: ArrayLike, table: np.ndarray) -> np.ndarray:
    """L(h) = Σ_o v_o · M[o, h]: the likelihood of a query's soft outcome under each verdict."""
    return np.asarray(outcome, float) @ table


def predicted_outcomes(reach: float, table: np.ndarray) -> np.ndarray:
    """P(o | h) of a candidate query that reaches new text with probability `reach`: the sensor
    table when it does, nothing when it does not."""
    nothing = np.zeros_like(table)
    nothing[NOTHING, :] = 1.0
    return reach * table + (1.0 - reach) * nothing


def hard_outcome(outcome: Sequence[float]) -> int:
    """The most probable of E, C, N (counting outcomes to fit a sensor table)."""
    return int(np.argmax(outcome))
