"""Contextual bandit for strategy selection (adaptive-strategy spec §5.3–§6.4). Pure numpy.

- `LinUCB`: disjoint arms; per arm A = I + Σ x xᵀ and b = Σ r x; the score of arm a for context x
  is θₐᵀx + α·√(xᵀAₐ⁻¹x) with θₐ = Aₐ⁻¹bₐ (§5.3). Its arms may be single strategies or plans
  (`core.plans`: sets of strategies run together); Sounding's selector uses plans.
- `ExplorationSchedule`: cold start runs every arm for the first N queries (§6.1); afterwards an
  exploration rate max(min_rate, rate·decayᵗ), doubled when the bandit is unsure, adds one arm
  the bandit did not choose; every N-th query runs all arms (§5.5).
- `rewards`: contribution + feedback bonus − latency penalty, clamped to [0, 1] (§5.4).
- `should_prune` (§6.3) and `holdout_score` for the gated recalibration (§6.4).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

FEEDBACK_BONUS = {"helpful": 0.3, "not_helpful": -0.3, "": 0.0}
LATENCY_PENALTY_PER_MS = 1 / 5000
MAX_LATENCY_PENALTY = 0.2


@dataclass(frozen=True)
class ArmScore:
    # θᵀx: the predicted reward.
    mean: float
    # α·√(xᵀA⁻¹x): the confidence width.
    width: float

    @property
    def upper(self) -> float:
        return self.mean + self.width


class LinUCB:
    """LinUCB with disjoint arms over `dimension`-long contexts. The arms' matrices are stacked,
    so scoring every arm is a few batched products (inverses are refreshed lazily, only for the
    arms updated since the last scoring)."""

    def __init__(self, arms: Sequence[str], dimension: int, alpha: float = 1.0):
        if dimension < 1 or alpha < 0:
            raise ValueError("dimension must be >= 1 and alpha >= 0")
        self.arms = tuple(arms)
        self.dimension = dimension
        self.alpha = alpha
        self._index = {arm: i for i, arm in enumerate(self.arms)}
        self._a = np.tile(np.eye(dimension), (len(self.arms), 1, 1))
        self._a_inverse = self._a.copy()
        self._b = np.zeros((len(self.arms), dimension))
        self._stale = np.zeros(len(self.arms), dtype=bool)
        self.pulls = dict.fromkeys(self.arms, 0)

    def _context(self, context: ArrayLike) -> np.ndarray:
        x = np.asarray(context, dtype=float)
        if x.shape != (self.dimension,):
            raise ValueError(f"context must have length {self.dimension}, got {x.shape}")
        return x

    def scores(self, context: ArrayLike) -> dict[str, ArmScore]:
        x = self._context(context)
        if self._stale.any():
            self._a_inverse[self._stale] = np.linalg.inv(self._a[self._stale])
            self._stale[:] = False
        a_inverse_x = self._a_inverse @ x
        # θᵀx = bᵀA⁻¹x (A is symmetric).
        means = np.einsum("ni,ni->n", a_inverse_x, self._b)
        widths = self.alpha * np.sqrt(np.maximum(a_inverse_x @ x, 0.0))
        return {arm: ArmScore(float(means[i]), float(widths[i])) for i, arm in enumerate(self.arms)}

    def update(self, arm: str, context: ArrayLike, reward: float) -> None:
        self.update_many(context, {arm: reward})

    def update_many(self, context: ArrayLike, rewards: Mapping[str, float]) -> None:
        """One context observed with a reward for each of several arms (unknown arms ignored)."""
        self.update_batch([context], [rewards])

    def update_batch(
        self, contexts: Sequence[ArrayLike] | np.ndarray, rewards: Sequence[Mapping[str, float]]
    ) -> None:
        """Observations in one pass: row i of `contexts` with `rewards[i]` for each of several arms
        (unknown arms ignored); the sums are those of as many `update_many` calls."""
        x = np.asarray(contexts, dtype=float).reshape(-1, self.dimension)
        if len(x) != len(rewards):
            raise ValueError("one reward mapping per context")
        # Rows rewarding the same arms share their contexts' outer-product sum.
        groups: dict[tuple[str, ...], list[int]] = {}
        for position, observed in enumerate(rewards):
            groups.setdefault(tuple(observed), []).append(position)
        for names, positions in groups.items():
            known = [(column, self._index[arm]) for column, arm in enumerate(names) if arm in self._index]
            if not known:
                continue
            observed_x = x[positions]
            values = np.array([[rewards[p][name] for name in names] for p in positions])
            gram = observed_x.T @ observed_x
            weighted = values.T @ observed_x  # arms × dimension: Σ r x per arm
            for column, index in known:
                self._a[index] += gram
                self._b[index] += weighted[column]
                self._stale[index] = True
                self.pulls[self.arms[index]] += len(positions)

    def confidence(self, context: ArrayLike, scores: Mapping[str, ArmScore] | None = None) -> float:
        """1 − (width of the best arm) / (its width before any update, α‖x‖), in [0, 1]: 0 when
        the bandit knows nothing about this context, towards 1 as observations accumulate."""
        x = self._context(context)
        scores = scores or self.scores(x)
        prior_width = self.alpha * float(np.linalg.norm(x))
        if prior_width == 0:
            return 1.0
        best = max(scores.values(), key=lambda s: s.upper)
        return float(np.clip(1.0 - best.width / prior_width, 0.0, 1.0))


@dataclass(frozen=True)
class ExplorationSchedule:
    cold_start_queries: int = 100
    force_all_every: int = 100
    initial_rate: float = 0.3
    min_rate: float = 0.05
    decay: float = 0.99
    # Below this bandit confidence the exploration rate doubles.
    unsure_below: float = 0.5

    def rate(self, query_index: int, bandit_confidence: float) -> float:
        """Exploration probability of the `query_index`-th query (0-based) after cold start."""
        steps = max(query_index - self.cold_start_queries, 0)
        rate = max(self.min_rate, self.initial_rate * self.decay**steps)
        return min(1.0, rate * 2 if bandit_confidence < self.unsure_below else rate)

    def mode(self, query_index: int, bandit_confidence: float, draw: float) -> str:
        """`cold_start`, `forced_all`, `explore` or `exploit`; `draw` is uniform in [0, 1)."""
        if query_index < self.cold_start_queries:
            return "cold_start"
        if self.force_all_every and (query_index + 1) % self.force_all_every == 0:
            return "forced_all"
        return "explore" if draw < self.rate(query_index, bandit_confidence) else "exploit"


def rewards(contributions: ArrayLike, bonuses: ArrayLike, latencies_ms: ArrayLike) -> np.ndarray:
    """§5.4, elementwise: contribution to what was used (0–1) + the feedback's bonus
    (`FEEDBACK_BONUS`, ±0.3) − min(latency/5 s, 0.2), clamped to [0, 1]."""
    penalties = np.minimum(np.asarray(latencies_ms) * LATENCY_PENALTY_PER_MS, MAX_LATENCY_PENALTY)
    return np.clip(np.asarray(contributions) + bonuses - penalties, 0.0, 1.0)


def contribution(found: Iterable[str], used: Iterable[str]) -> float:
    """Share of the used documents that the arm found."""
    used = used if isinstance(used, (set, frozenset)) else set(used)
    return len(used.intersection(found)) / len(used) if used else 0.0


@dataclass(frozen=True)
class ArmStats:
    uses: int
    mean_reward: float
    contribution_rate: float


def should_prune(arm: str, stats: Mapping[str, ArmStats], min_samples: int = 100) -> bool:
    """§6.3: with enough uses, an arm that rarely helps or earns less than half another's reward."""
    own = stats[arm]
    if own.uses < min_samples:
        return False
    if own.mean_reward < 0.1 and own.contribution_rate < 0.05:
        return True
    return any(
        own.mean_reward < other.mean_reward * 0.5
        for name, other in stats.items()
        if name != arm and other.uses >= min_samples
    )


@dataclass(frozen=True)
class Replay:
    """One recorded query: its context and the reward of every arm that ran."""

    context: ArrayLike
    rewards: Mapping[str, float]


def holdout_score(bandit: LinUCB, holdout: Sequence[Replay]) -> float:
    """Mean reward of the arm the bandit ranks first by predicted reward among those that ran
    (replay evaluation of the greedy policy; §6.4's validation)."""
    if not holdout:
        return 0.0
    total = 0.0
    for record in holdout:
        scores = bandit.scores(record.context)
        best = max(record.rewards, key=lambda arm: scores[arm].mean if arm in scores else -np.inf)
        total += record.rewards[best]
    return total / len(holdout)


def train(arms: Sequence[str], dimension: int, alpha: float, history: Iterable[Replay]) -> LinUCB:
    bandit = LinUCB(arms, dimension, alpha)
    for record in history:
        bandit.update_many(record.context, record.rewards)
    return bandit
