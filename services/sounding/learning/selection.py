"""StrategySelector: which arms run for a query, learned from observed outcomes
(adaptive-strategy spec §5.3–§6.2).

The selector's state is a pure function of the observation log (replayed in order at startup),
plus the number of queries it has planned, so a restarted orchestrator plans exactly as before.
Exploration draws come from a generator seeded by (seed, query index): reproducible too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from sounding.core.bandit import ArmScore, ExplorationSchedule, LinUCB, fusion_weights, select_arms
from sounding.core.neighbours import NearestValues
from sounding.learning import features
from sounding.retrieval.protocol import Plan, PlannedArm

SIMILAR_QUERIES = 5


@dataclass(frozen=True)
class SelectionConfig:
    alpha: float = 1.0
    # Arms whose upper score is at least this share of the best one run.
    relative_threshold: float = 0.9
    schedule: ExplorationSchedule = ExplorationSchedule()
    seed: int = 0
    # Observed queries the similar-outcomes feature looks among (the most recent).
    history_capacity: int = 20_000


class StrategySelector:
    def __init__(self, arms: Sequence[str], config: SelectionConfig = SelectionConfig()):
        self.arms = tuple(arms)
        self.config = config
        self.bandit = LinUCB(self.arms, features.DIMENSION, config.alpha)
        self.queries_planned = 0
        # Observed queries' embeddings with their best-arm rewards.
        self._outcomes = NearestValues(capacity=config.history_capacity)

    def similar_outcomes(self, embedding: ArrayLike) -> float:
        """Mean best-arm reward of the most similar observed queries (cosine), or NO_HISTORY."""
        if not len(self._outcomes):
            return features.NO_HISTORY
        return float(self._outcomes.nearest(embedding, SIMILAR_QUERIES).mean())

    def plan(self, context: np.ndarray, requested: Sequence[str] = ()) -> Plan:
        """Requested arms run as given; otherwise the bandit and the exploration schedule choose."""
        scores = self.bandit.scores(context)
        confidence = self.bandit.confidence(context, scores)
        if requested:
            arms = [
                PlannedArm(a, True, "requested", 1.0, scores[a].upper if a in scores else 0.0)
                for a in requested
            ]
            return Plan(-1, "requested", arms, confidence)
        index = self.queries_planned
        self.queries_planned += 1
        rng = np.random.default_rng([self.config.seed, index])
        mode = self.config.schedule.mode(index, confidence, float(rng.random()))
        if mode in ("cold_start", "forced_all"):
            return Plan(
                index, mode, [PlannedArm(a, True, mode, 1.0, scores[a].upper) for a in self.arms], confidence
            )
        chosen = select_arms(scores, self.config.relative_threshold)
        explored = ""
        unchosen = [a for a in self.arms if a not in chosen]
        if mode == "explore" and unchosen:
            explored = unchosen[int(rng.integers(len(unchosen)))]
        elif mode == "explore":
            mode = "exploit"  # every arm is chosen already: nothing is left to explore
        weights = fusion_weights(scores, [*chosen, *([explored] if explored else [])])
        return Plan(
            index, mode, [self._planned(a, scores, chosen, explored, weights) for a in self.arms], confidence
        )

    @staticmethod
    def _planned(
        arm: str, scores: Mapping[str, ArmScore], chosen: list[str], explored: str, weights: dict[str, float]
    ) -> PlannedArm:
        if arm in chosen:
            return PlannedArm(arm, True, "exploit", weights[arm], scores[arm].upper)
        if arm == explored:
            return PlannedArm(arm, True, "explore", weights[arm], scores[arm].upper, exploration=True)
        return PlannedArm(arm, False, "below_threshold", 0.0, scores[arm].upper)

    def learn(self, context: ArrayLike, embedding: ArrayLike, rewards: Mapping[str, float]) -> None:
        """One observed outcome: every arm that ran is credited with its reward."""
        for arm, value in rewards.items():
            if arm in self.bandit.arms:
                self.bandit.update(arm, context, value)
        if rewards:
            self._outcomes.add(embedding, max(rewards.values()))
