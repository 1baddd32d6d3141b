"""Strategy-selection metrics (adaptive-strategy spec §8.1–§8.2), computed from the learning log.

Per arm: selection rate (share of planned retrievals that ran it), contribution rate (share of
its observed runs that found a document the caller used), mean latency, mean reward, and the
share of its runs chosen by exploration. System: the entropy of the selection distribution, the
cumulative regret against the best arm in hindsight (per observation, that arm's mean reward
minus the best reward among the arms that ran), the arms pruned and the selector version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core.information import entropy_bits


@dataclass(frozen=True)
class RunSummary:
    """One logged retrieval: how it was planned and, per arm that ran, its latency, cost and whether
    exploration chose it."""

    mode: str
    arms: dict[str, dict]


@dataclass(frozen=True)
class ObservedRun:
    rewards: dict[str, float]
    contributions: dict[str, float]


@dataclass(frozen=True)
class ArmMetrics:
    arm: str
    selection_rate: float
    contribution_rate: float
    mean_latency_ms: float
    mean_reward: float
    exploration_share: float
    runs: int
    observed_runs: int
    mean_cost_ms: float


@dataclass(frozen=True)
class StrategyMetrics:
    arms: list[ArmMetrics]
    selection_entropy_bits: float
    cumulative_regret: float
    planned_retrievals: int
    observations: int
    pruned_arms: list[str]
    selector_version: int


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def strategy_metrics(
    runs: Sequence[RunSummary],
    observed: Sequence[ObservedRun],
    arms: Sequence[str],
    pruned_arms: Sequence[str] = (),
    selector_version: int = 0,
) -> StrategyMetrics:
    planned = [r for r in runs if r.mode != "requested"]
    per_arm = []
    for arm in arms:
        ran = [r.arms[arm] for r in runs if arm in r.arms]
        rewards = [o.rewards[arm] for o in observed if arm in o.rewards]
        contributed = [o.contributions.get(arm, 0.0) > 0 for o in observed if arm in o.rewards]
        per_arm.append(
            ArmMetrics(
                arm=arm,
                selection_rate=sum(arm in r.arms for r in planned) / len(planned) if planned else 0.0,
                contribution_rate=_mean(contributed),
                mean_latency_ms=_mean([run["latency_ms"] for run in ran]),
                mean_reward=_mean(rewards),
                exploration_share=_mean([run["exploration"] for run in ran]),
                runs=len(ran),
                observed_runs=len(rewards),
                # Runs logged before costs were kept have only their latency.
                mean_cost_ms=_mean([run["cost_ms"] for run in ran]),
            )
        )
    selections = np.array([sum(arm in r.arms for r in planned) for arm in arms], dtype=float)
    entropy = entropy_bits(selections / selections.sum()) if selections.sum() else 0.0
    best_mean = max((m.mean_reward for m in per_arm if m.observed_runs), default=0.0)
    regret = sum(best_mean - max(o.rewards.values()) for o in observed if o.rewards)
    return StrategyMetrics(
        per_arm,
        float(entropy),
        float(regret),
        len(planned),
        len(observed),
        list(pruned_arms),
        selector_version,
    )
