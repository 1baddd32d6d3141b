"""StrategySelector: which arms run for a query, learned from observed outcomes
(adaptive-strategy spec §5.3–§6.2).

The bandit's arms are plans (`core.plans`): every set of the selectable arms. An observed
retrieval credits every plan made of the arms that ran, each with the reward of its own fused
ranking. Exploiting is conservative: it runs the baseline, the plan with the best mean reward
over its latest `BASELINE_WINDOW` rewards, unless LinUCB is sure another plan does better for
this query (the other's lower bound above the baseline's upper bound), so the selector follows
the best fixed plan unless the query's features say otherwise, and a change in what the arms
return (a new query adapter) shows in the baseline within a window. Before any plan has
`BASELINE_MIN_REWARDS`, the plan with the highest upper score runs. Exploring adds one arm the
plan lacks; cold start and the periodic forced plans run every arm. A plan's arms are fused with
equal weights, so a chosen plan ranks exactly as that fixed set of arms would.

Costly arms are explored within a latency budget. An arm is costly when its measured cost (a
running mean of its runs' `cost_ms`) exceeds `costly_ratio` times the cheapest arm's (at least
`COST_FLOOR_MS`), or, before its first run, when it is `assumed_costly` (the generating arms:
seconds a query on CPU). Cold start, forced plans and exploration add a costly arm on only a
`costly_share` of queries, one at a time (the others run the cheap arms), so the first queries
of a collection answer at the cheap arms' speed while every arm is still tried and learned; a
costly arm the bandit finds worth its latency penalty joins the plan it exploits like any other.
When every arm is costly, none is treated as such.

The bandit's state is a pure function of the observation log (replayed in order at startup),
plus the number of queries it has planned; exploration draws come from a generator seeded by
(seed, query index). The arms' costs are measured since the process started, so after a restart
the costly-arm rule starts again from `assumed_costly` until the arms have run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from sounding.core.bandit import ArmScore, ExplorationSchedule, LinUCB
from sounding.core.latency import LatencyEstimates
from sounding.core.neighbours import NearestValues
from sounding.core.plans import plan_arms, plan_name, plans
from sounding.learning import features
from sounding.retrieval.protocol import Plan, PlannedArm

SIMILAR_QUERIES = 5
BASELINE_WINDOW = 100
BASELINE_MIN_REWARDS = 10
# The cheapest arm's cost counts as at least this much when costly arms are told apart.
COST_FLOOR_MS = 100.0


@dataclass(frozen=True)
class SelectionConfig:
    alpha: float = 1.0
    schedule: ExplorationSchedule = ExplorationSchedule()
    seed: int = 0
    # Observed queries the similar-outcomes feature looks among (the most recent).
    history_capacity: int = 20_000
    # An arm costs too much to explore on every query above this multiple of the cheapest's cost.
    costly_ratio: float = 10.0
    # The share of queries on which cold start, forced plans and exploration add a costly arm.
    costly_share: float = 0.1


class StrategySelector:
    def __init__(
        self,
        arms: Sequence[str],
        config: SelectionConfig = SelectionConfig(),
        assumed_costly: Collection[str] = (),
        costs: LatencyEstimates | None = None,
    ):
        self.arms = tuple(arms)
        self.config = config
        self.assumed_costly = frozenset(assumed_costly)
        # Each arm's running cost (ms), measured at every Retrieve that ran it.
        self.costs = costs if costs is not None else LatencyEstimates()
        self.bandit = LinUCB(plans(self.arms), features.DIMENSION, config.alpha)
        self.queries_planned = 0
        # Observed queries' embeddings with their best plan's reward.
        self._outcomes = NearestValues(capacity=config.history_capacity)
        self._recent = {name: deque(maxlen=BASELINE_WINDOW) for name in self.bandit.arms}

    def baseline(self) -> str | None:
        """The plan with the best mean over its latest rewards (None until one has enough)."""
        means = {
            name: sum(rewards) / len(rewards)
            for name, rewards in self._recent.items()
            if len(rewards) >= BASELINE_MIN_REWARDS
        }
        return max(means, key=lambda name: means[name]) if means else None

    def similar_outcomes(self, embedding: ArrayLike) -> float:
        """Mean best-plan reward of the most similar observed queries (cosine), or NO_HISTORY."""
        if not len(self._outcomes):
            return features.NO_HISTORY
        return float(self._outcomes.nearest(embedding, SIMILAR_QUERIES).mean())

    def costly(self) -> frozenset[str]:
        """The arms whose cost dwarfs the cheapest arm's (module docstring)."""
        measured = [cost for arm in self.arms if (cost := self.costs.get(arm)) is not None]
        limit = self.config.costly_ratio * max(min(measured, default=0.0), COST_FLOOR_MS)
        costly = frozenset(
            arm
            for arm in self.arms
            if ((cost := self.costs.get(arm)) is not None and cost > limit)
            or (cost is None and arm in self.assumed_costly)
        )
        return costly if len(costly) < len(self.arms) else frozenset()

    def plan(self, context: np.ndarray, requested: Sequence[str] = ()) -> Plan:
        """Requested arms run as given; otherwise the bandit and the exploration schedule choose.
        Each arm's score is the upper score of the plan it runs in, or, for an arm left out, of
        the chosen plan with it added."""
        scores = self.bandit.scores(context)
        confidence = self.bandit.confidence(context, scores)
        if requested:
            arms = [PlannedArm(a, True, "requested", 1.0, _upper(scores, [a])) for a in requested]
            return Plan(-1, "requested", arms, confidence)
        index = self.queries_planned
        self.queries_planned += 1
        rng = np.random.default_rng([self.config.seed, index])
        mode = self.config.schedule.mode(index, confidence, float(rng.random()))
        costly = self.costly()
        # The costly arms held back: all of them but, on a costly_share of queries, one.
        held_back = sorted(costly)
        if costly and rng.random() < self.config.costly_share:
            held_back.pop(int(rng.integers(len(held_back))))
        if mode in ("cold_start", "forced_all"):
            running = [a for a in self.arms if a not in held_back]
            upper = _upper(scores, running)
            return Plan(
                index,
                mode,
                [
                    PlannedArm(a, True, mode, 1.0, upper)
                    if a in running
                    else PlannedArm(a, False, "costly", 0.0, _upper(scores, [*running, a]))
                    for a in self.arms
                ],
                confidence,
            )
        chosen = plan_arms(self._exploit(scores))
        unchosen = [a for a in self.arms if a not in chosen and a not in held_back]
        explored = ""
        if mode == "explore" and unchosen:
            explored = unchosen[int(rng.integers(len(unchosen)))]
        elif mode == "explore":
            mode = "exploit"  # the best plan runs every arm: nothing is left to explore
        return Plan(index, mode, [self._planned(a, scores, chosen, explored) for a in self.arms], confidence)

    def _exploit(self, scores: Mapping[str, ArmScore]) -> str:
        baseline = self.baseline()
        if baseline is None:
            return max(scores, key=lambda name: scores[name].upper)
        surest = max(scores, key=lambda name: scores[name].mean - scores[name].width)
        lower = scores[surest].mean - scores[surest].width
        return surest if lower > scores[baseline].upper else baseline

    @staticmethod
    def _planned(arm: str, scores: Mapping[str, ArmScore], chosen: list[str], explored: str) -> PlannedArm:
        if arm in chosen:
            return PlannedArm(arm, True, "exploit", 1.0, _upper(scores, chosen))
        with_arm = _upper(scores, [*chosen, arm])
        if arm == explored:
            return PlannedArm(arm, True, "explore", 1.0, with_arm, exploration=True)
        return PlannedArm(arm, False, "not_in_best_plan", 0.0, with_arm)

    def learn(self, context: ArrayLike, embedding: ArrayLike, plan_rewards: Mapping[str, float]) -> None:
        """One observed outcome: each plan made of arms that ran, with the reward of its ranking."""
        self.learn_many([context], [embedding], [plan_rewards])

    def learn_many(
        self,
        contexts: Sequence[ArrayLike],
        embeddings: Sequence[ArrayLike] | np.ndarray,
        plan_rewards: Sequence[Mapping[str, float]],
    ) -> None:
        """Observed outcomes in order, in one pass (as many `learn`s)."""
        self.bandit.update_batch(contexts, plan_rewards)
        for rewarded in plan_rewards:
            for name, value in rewarded.items():
                if name in self._recent:
                    self._recent[name].append(value)
        kept = [i for i, rewarded in enumerate(plan_rewards) if rewarded]
        if kept:
            self._outcomes.add_many(
                np.asarray(embeddings, dtype=np.float32)[kept], [max(plan_rewards[i].values()) for i in kept]
            )


def _upper(scores: Mapping[str, ArmScore], arms: Sequence[str]) -> float:
    """The upper score of the plan of `arms` (0 for arms the selector does not choose among)."""
    score = scores.get(plan_name(arms))
    return score.upper if score is not None else 0.0
