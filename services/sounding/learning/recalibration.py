"""Pruning and holdout-gated recalibration of the strategy selector (adaptive-strategy spec
§6.3–§6.4). Pure logic over replayed observations.

A recalibration retrains the bandit from scratch on the observations of the recent window,
leaving out arms that never help (pruning, judged on each arm's own rewards) and every plan that
contains one, and validates it on the most recent observations (the holdout) against the
incumbent (the deployed window and arms, trained on the same pre-holdout data). It is deployed
only if it scores at least 95% of the incumbent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from sounding.core.bandit import ArmStats, Replay, holdout_score, should_prune, train
from sounding.core.plans import plans
from sounding.learning.outcomes import contributions, logged_plan_rewards
from sounding.store.learning import ObservationRecord, RetrievalRecord

MIN_OBSERVATIONS = 50
MAX_HOLDOUT = 100
DEPLOY_RATIO = 0.95


@dataclass(frozen=True)
class Observed:
    """One observation as recalibration sees it."""

    create_time_us: int
    context: ArrayLike
    # Each arm's own reward.
    rewards: dict[str, float]
    # Share of the used documents each arm found.
    contributions: dict[str, float]
    # The reward of every plan of the arms that ran (`core.plans`).
    plan_rewards: dict[str, float]

    @classmethod
    def of(cls, observation: ObservationRecord, record: RetrievalRecord) -> Observed:
        """A logged observation and the retrieval it is about."""
        return cls(
            observation.create_time_us,
            record.context,
            observation.rewards,
            contributions(record, observation.outcome["used_document_ids"]),
            logged_plan_rewards(observation, record),
        )

    def replay(self, plan_names: Sequence[str]) -> Replay:
        return Replay(self.context, {p: r for p, r in self.plan_rewards.items() if p in plan_names})


@dataclass(frozen=True)
class Recalibration:
    deploy: bool
    pruned_arms: list[str]
    candidate_score: float
    incumbent_score: float
    training_size: int
    holdout_size: int
    arm_stats: dict[str, ArmStats]

    def diagnostics(self) -> dict[str, float]:
        diagnostics = {
            "candidate_score": self.candidate_score,
            "incumbent_score": self.incumbent_score,
            "holdout_size": float(self.holdout_size),
            "training_size": float(self.training_size),
            "pruned_arms": float(len(self.pruned_arms)),
        }
        for arm, stats in self.arm_stats.items():
            diagnostics[f"{arm}.uses"] = float(stats.uses)
            diagnostics[f"{arm}.mean_reward"] = stats.mean_reward
            diagnostics[f"{arm}.contribution_rate"] = stats.contribution_rate
        return diagnostics

    def summary(self) -> str:
        verdict = "deployed" if self.deploy else "kept the incumbent"
        pruned = ", ".join(self.pruned_arms) or "none"
        return (
            f"{verdict}: candidate scored {self.candidate_score:.4f} on {self.holdout_size} held-out "
            f"observations against the incumbent's {self.incumbent_score:.4f} (deploys at >= "
            f"{DEPLOY_RATIO:.0%}); trained on {self.training_size}; pruned arms: {pruned}"
        )


def arm_stats(observed: Sequence[Observed], arms: Sequence[str]) -> dict[str, ArmStats]:
    stats = {}
    for arm in arms:
        rewards = [o.rewards[arm] for o in observed if arm in o.rewards]
        contributed = [o.contributions.get(arm, 0.0) > 0 for o in observed if arm in o.rewards]
        stats[arm] = ArmStats(
            len(rewards),
            float(np.mean(rewards)) if rewards else 0.0,
            float(np.mean(contributed)) if contributed else 0.0,
        )
    return stats


def recalibrate(
    observed: Sequence[Observed],
    arms: Sequence[str],
    alpha: float,
    dimension: int,
    window_start_us: int,
    incumbent_window_start_us: int,
    incumbent_pruned: Sequence[str],
    prune_min_samples: int = 100,
) -> Recalibration:
    """`observed` in sequence order. Raises ValueError with fewer than MIN_OBSERVATIONS."""
    if len(observed) < MIN_OBSERVATIONS:
        raise ValueError(f"recalibration needs at least {MIN_OBSERVATIONS} observations, has {len(observed)}")
    holdout_size = min(MAX_HOLDOUT, len(observed) // 5)
    before, holdout = observed[:-holdout_size], observed[-holdout_size:]
    stats = arm_stats(observed, arms)
    pruned = [a for a in arms if should_prune(a, stats, prune_min_samples)]
    if len(pruned) == len(arms):  # never prune everything: keep the best-rewarded arm
        pruned.remove(max(arms, key=lambda a: stats[a].mean_reward))
    candidate_plans = plans([a for a in arms if a not in pruned])
    incumbent_plans = plans([a for a in arms if a not in incumbent_pruned])
    candidate = train(
        candidate_plans,
        dimension,
        alpha,
        [o.replay(candidate_plans) for o in before if o.create_time_us >= window_start_us],
    )
    incumbent = train(
        incumbent_plans,
        dimension,
        alpha,
        [o.replay(incumbent_plans) for o in before if o.create_time_us >= incumbent_window_start_us],
    )
    held_out = [o.replay(plans(arms)) for o in holdout if o.plan_rewards]
    candidate_score = holdout_score(candidate, held_out)
    incumbent_score = holdout_score(incumbent, held_out)
    return Recalibration(
        deploy=candidate_score >= DEPLOY_RATIO * incumbent_score,
        pruned_arms=pruned,
        candidate_score=candidate_score,
        incumbent_score=incumbent_score,
        training_size=sum(o.create_time_us >= window_start_us for o in before),
        holdout_size=holdout_size,
        arm_stats=stats,
    )
