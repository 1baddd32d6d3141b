"""The evidence model of claim verification over a corpus (active-learning spec §2.1, §3.1; the
`corpus` inquiry domain): what the text a retrieval query newly surfaced says about a claim, as a
likelihood per verdict.

Verdicts: SUPPORT, CONTRADICT, NOT_ENOUGH_INFO. A query either reaches text the session has not
read (at least one new chunk about the claim among its hits) or it does not (ø: nothing new,
which says nothing about the verdict). When it does, natural-language inference reads every new
sentence s against the claim, P(entails) e_s and P(contradicts) c_s, and the strongest sentences
decide its outcome, one of three:

    entailing (E)      max_s e_s ≥ θ_e and max_s c_s < θ_c
    contradicting (C)  max_s c_s ≥ θ_c and max_s e_s < θ_e
    nothing (N)        otherwise: nothing decides, or both do.

(Hard thresholds on the strongest sentences carried about six times the information about the
verdict that a soft outcome from the same probabilities did, on SciFact's held-out train claims:
bench/README.md.) A sensor table M[o, h] = P(outcome o | verdict h, new text reached), fitted from
the outcomes of queries in sessions whose verdict was observed (`SensorModel.fit`), gives the
query's likelihood per verdict, L(h) = M[o, h] (`likelihood` takes the outcome as a one-hot
vector).

Evidence found once explains the silence after it: once entailing evidence has been found, a
supported claim's later queries behave as if nothing were left to find, so the SUPPORT column
becomes NOT_ENOUGH_INFO's (likewise CONTRADICT's once contradicting evidence has been found;
`SensorModel.given_found` takes the strength a* ∈ [0, 1] of what was found and mixes the columns
(1 − a*)·M[·, SUPPORT] + a*·M[·, NOT_ENOUGH_INFO]). The belief is the prior times the queries'
likelihoods, normalised; NOT_ENOUGH_INFO gains whenever queries that reach new text find nothing
that decides.

A candidate query reaches new text with probability ν (its reach, from the outcome model,
`core.reach`); its results are E, C, N with probabilities ν·M[·, h] and ø with 1 − ν under every
verdict (`predicted_outcomes`), from which its expected information gain follows
(`core.information.information_gain`).

Whether the session can still reach its target confidence is a look-ahead over the same model
(`target_chance`): the chance that the best candidates, run in turn, bring the belief's largest
probability to the target before the session's queries run out.
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
# The fourth result of a candidate query: it reaches no new text.
NOTHING_NEW = 3
# Equally probable verdicts rank in this order: no evidence either way is NOT_ENOUGH_INFO's case.
TIE_ORDER = (NOT_ENOUGH_INFO, SUPPORT, CONTRADICT)

# P(outcome | verdict) of a query reaching new text before any fit: columns are verdicts.
DEFAULT_SENSOR = np.array(
    [
        [0.55, 0.10, 0.08],
        [0.05, 0.45, 0.07],
        [0.40, 0.45, 0.85],
    ]
)


def ranked(probabilities: ArrayLike) -> list[int]:
    """The verdicts from most to least probable, equal ones (to 12 decimals) in `TIE_ORDER`: a
    belief that no evidence has moved from a uniform prior answers NOT_ENOUGH_INFO."""
    p = np.asarray(probabilities, dtype=np.float64)
    return sorted(range(len(VERDICTS)), key=lambda v: (-round(float(p[v]), 12), TIE_ORDER.index(v)))


@dataclass(frozen=True)
class SensorModel:
    """M[o, h] = P(outcome o | verdict h) for a query that reaches new text (columns sum to 1),
    and how many observed sessions it was fitted from (0: the default table)."""

    table: np.ndarray = field(default_factory=DEFAULT_SENSOR.copy)
    sessions: int = 0

    @classmethod
    def fit(
        cls,
        counts: ArrayLike,
        prior: ArrayLike = DEFAULT_SENSOR,
        prior_weight: float = 10.0,
        sessions: int = 0,
    ) -> SensorModel:
        """From counts[o, h] of (soft) outcomes observed on claims of known verdict, with the
        prior table worth `prior_weight` outcomes per verdict (a Dirichlet prior: a verdict
        seldom observed keeps close to the prior, never to a flat column)."""
        table = np.asarray(counts, dtype=float) + prior_weight * np.asarray(prior, dtype=float)
        return cls(table / table.sum(axis=0, keepdims=True), sessions)

    def given_found(self, found_entailing: float, found_contradicting: float) -> np.ndarray:
        """The table once evidence of strengths a* (entailing) and b* (contradicting) has been
        found: a verdict whose evidence is found has nothing left for later queries to find."""
        table = self.table.copy()
        neutral = table[:, NOT_ENOUGH_INFO]
        table[:, SUPPORT] = (1 - found_entailing) * table[:, SUPPORT] + found_entailing * neutral
        table[:, CONTRADICT] = (1 - found_contradicting) * table[
            :, CONTRADICT
        ] + found_contradicting * neutral
        return table


@dataclass(frozen=True)
class Thresholds:
    """θ_e and θ_c: how strong the strongest entailing or contradicting sentence must be to
    decide a query's outcome."""

    entailing: float = 0.5
    contradicting: float = 0.65


def outcome(
    entailment: ArrayLike, contradiction: ArrayLike, thresholds: Thresholds = Thresholds()
) -> np.ndarray:
    """The query's outcome as a one-hot vector over (E, C, N) from its new sentences' NLI
    probabilities (no sentence: N)."""
    a = float(np.asarray(entailment, float).max(initial=0.0))
    b = float(np.asarray(contradiction, float).max(initial=0.0))
    entails, contradicts = a >= thresholds.entailing, b >= thresholds.contradicting
    index = (
        ENTAILING
        if entails and not contradicts
        else CONTRADICTING
        if contradicts and not entails
        else NOTHING
    )
    return np.eye(len(OUTCOMES))[index]


def likelihood(outcome: ArrayLike, table: np.ndarray) -> np.ndarray:
    """L(h) = Σ_o v_o · M[o, h]: the likelihood under each verdict of a query's outcome v (one-hot,
    or a distribution over the outcomes)."""
    return np.asarray(outcome, float) @ table


def predicted_outcomes(reach: float, table: np.ndarray) -> np.ndarray:
    """P(result | h) of a candidate query that reaches new text with probability `reach`: rows
    E, C, N (the sensor table, scaled by the reach) and ø (nothing new, 1 − reach)."""
    nothing_new = np.full((1, table.shape[1]), 1.0 - reach)
    return np.vstack([reach * table, nothing_new])


def found_strength(strength: float, outcome: ArrayLike, index: int) -> float:
    """The strength of the evidence of one kind found so far after a query whose outcome is
    `outcome`: 1 − (1 − s)(1 − v[index])."""
    return 1.0 - (1.0 - strength) * (1.0 - float(np.asarray(outcome, float)[index]))


def sensor_counts(
    outcomes: Sequence[Sequence[float]], found: Sequence[Sequence[float]], verdict: int
) -> np.ndarray:
    """counts[o, h] of one observed session: each query's outcome, given the strengths
    (a*, b*) of the evidence found before it. As `SensorModel.given_found` models it, a query of a
    SUPPORT claim behaves as NOT_ENOUGH_INFO's with probability a*, so (1 − a*) of its outcome
    counts in SUPPORT's column and a* in NOT_ENOUGH_INFO's (CONTRADICT likewise with b*)."""
    counts = np.zeros((len(OUTCOMES), len(VERDICTS)))
    for outcome, (entailing, contradicting) in zip(outcomes, found, strict=True):
        v = np.asarray(outcome, float)
        explained = {SUPPORT: entailing, CONTRADICT: contradicting}.get(verdict, 0.0)
        counts[:, verdict] += (1.0 - explained) * v
        counts[:, NOT_ENOUGH_INFO] += explained * v
    return counts


# Look-ahead states whose probability falls below this are dropped.
NEGLIGIBLE_MASS = 1e-12


def target_chance(
    belief: ArrayLike,
    found: Sequence[float],
    sensor: SensorModel,
    reaches: Sequence[float],
    target: float,
) -> float:
    """P(the belief's largest probability reaches `target` within the queries to come), where the
    k-th query to come reaches new text with probability `reaches[k]` and its result is drawn from
    the belief's own prediction, Σ_h p(h)·P(result | h) (`predicted_outcomes` with the table
    given what has been found by then). An exact preposterior look-ahead over every sequence of
    results: paths that reach the target stop there, and paths that agree (same belief, same
    evidence found) are merged, so the states grow with the outcome counts, not with 4^k."""
    probabilities = np.asarray(belief, float)[None, :]
    if probabilities.max() >= target:
        return 1.0
    strengths = np.asarray(found, float)[None, :]
    mass = np.ones(1)
    reached = 0.0
    for reach in reaches:
        tables = _tables_given_found(sensor, strengths)  # [state, outcome, verdict]
        joint = probabilities[:, None, :] * tables  # P(o, h) per state
        chances = joint.sum(axis=2)  # P(o) per state
        posteriors = joint / np.where(chances > 0, chances, 1.0)[:, :, None]
        branches = [(probabilities, strengths, mass * (1.0 - reach))]
        for o in range(len(OUTCOMES)):
            after = strengths.copy()
            if o in (ENTAILING, CONTRADICTING):
                after[:, o] = 1.0
            branches.append((posteriors[:, o], after, mass * reach * chances[:, o]))
        probabilities = np.concatenate([b[0] for b in branches])
        strengths = np.concatenate([b[1] for b in branches])
        mass = np.concatenate([b[2] for b in branches])
        done = probabilities.max(axis=1) >= target
        reached += float(mass[done].sum())
        keep = ~done & (mass > NEGLIGIBLE_MASS)
        probabilities, strengths, mass = _merged(probabilities[keep], strengths[keep], mass[keep])
        if not len(mass):
            break
    return min(reached, 1.0)


def _tables_given_found(sensor: SensorModel, strengths: np.ndarray) -> np.ndarray:
    """`SensorModel.given_found` for each row of strengths (a*, b*), computed once per distinct
    row (a look-ahead has few: found or not)."""
    distinct, inverse = np.unique(strengths, axis=0, return_inverse=True)
    return np.stack([sensor.given_found(*row) for row in distinct])[inverse.ravel()]


def _merged(
    probabilities: np.ndarray, strengths: np.ndarray, mass: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The states with equal beliefs and strengths (to 1e-12) as one, their masses summed."""
    if not len(mass):
        return probabilities, strengths, mass
    keys = np.round(np.hstack([probabilities, strengths]), 12)
    unique, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    summed = np.zeros(len(unique))
    np.add.at(summed, inverse.ravel(), mass)
    return probabilities[first], strengths[first], summed
