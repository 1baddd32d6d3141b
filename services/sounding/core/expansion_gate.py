"""Whether an expansion step is worth its latency (an extension of the retrieval-uncertainty
spec's "Iterative Retrieval Loop": the loop's condition says when recall is short, this says
when a step is expected to pay for itself).

A step of strategy s on collection c is useful when it brings into the result a document the
agent then reports using. Its usefulness rate p(c, s) has a Beta posterior: a pessimistic prior
(`prior_useful`, `prior_useless`) updated by every observed retrieval that ran such a step. Before
each step the gate draws p from the posterior (Thompson sampling) and admits the step when

    p × used_document_worth_ms ≥ expected step latency,

and the expected latency fits the time left (the request's deadline and the default budget). A
step the caller asked for (the request sets expansion options) needs only the time.
So a collection no agent has reported an outcome for expands nothing (there is nothing to learn
from, and every step would be paid blind); once outcomes arrive the draws explore in proportion
to the posterior's doubt, and a strategy that keeps surfacing used documents runs whenever its
expected gain covers its measured latency. A step's latency is estimated from its recent runs
(`core.latency`), or `unmeasured_step_ms` before its first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import numpy as np

from sounding.core.latency import LatencyEstimates

NO_OUTCOMES = "no_outcomes_yet"
NO_EXPECTED_GAIN = "no_expected_gain"
LATENCY_BUDGET = "latency_budget"


@dataclass(frozen=True)
class ExpansionGateConfig:
    # The latency a used document the loop brought into the result is worth.
    used_document_worth_ms: float = 1000.0
    # The Beta prior on a step's usefulness rate (mean 0.05: a step must prove itself).
    prior_useful: float = 1.0
    prior_useless: float = 19.0
    # The latency a strategy's step is expected to take before it was measured.
    unmeasured_step_ms: float = 200.0


@dataclass(frozen=True)
class ExpansionStep:
    """A step the loop ran: its strategy, the documents it brought into the result, its latency."""

    strategy: str
    added_document_ids: tuple[str, ...]
    latency_ms: float


@dataclass
class ExpansionGate:
    config: ExpansionGateConfig = ExpansionGateConfig()
    step_latency: LatencyEstimates = field(default_factory=LatencyEstimates)
    # (collection, strategy) -> [useful steps, useless steps] among the observed retrievals.
    _counts: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    # Collections with at least one observed retrieval.
    _observed: set[str] = field(default_factory=set)

    def learn(self, collection: str, steps: Iterable[ExpansionStep], used: Collection[str]) -> None:
        """One observed retrieval of `collection`: each step it ran was useful if a document it
        added is among those the agent used."""
        self._observed.add(collection)
        used = set(used)
        for step in steps:
            counts = self._counts.setdefault((collection, step.strategy), [0, 0])
            counts[0 if used.intersection(step.added_document_ids) else 1] += 1

    def posterior(self, collection: str, strategy: str) -> tuple[float, float]:
        """The Beta(α, β) posterior of the strategy's usefulness rate on the collection."""
        useful, useless = self._counts.get((collection, strategy), (0, 0))
        return self.config.prior_useful + useful, self.config.prior_useless + useless

    def expected_step_ms(self, strategy: str) -> float:
        measured = self.step_latency.get(strategy)
        return self.config.unmeasured_step_ms if measured is None else measured

    def refusal(
        self,
        collection: str,
        strategy: str,
        remaining_ms: float,
        rng: np.random.Generator,
        requested: bool = False,
    ) -> str:
        """Why a step of `strategy` should not run now ("" when it should), `remaining_ms` being
        the time left for it; a step the caller `requested` needs only the time."""
        expected_ms = self.expected_step_ms(strategy)
        if expected_ms > remaining_ms:
            return LATENCY_BUDGET
        if requested:
            return ""
        if collection not in self._observed:
            return NO_OUTCOMES
        if rng.beta(*self.posterior(collection, strategy)) * self.config.used_document_worth_ms < expected_ms:
            return NO_EXPECTED_GAIN
        return ""
