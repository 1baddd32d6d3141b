"""What an observed retrieval outcome is: whether it is valid, the form it is logged in, and what
it says about each arm that ran (adaptive-strategy spec §5.4): the share of the used documents
the arm found and its reward (logged, for metrics and pruning), and the reward of every plan of
those arms (`core.plans`, what the selector learns)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sounding.core.bandit import FEEDBACK_BONUS, contribution
from sounding.core.bandit import rewards as batch_rewards
from sounding.core.fusion import MIN_MAX
from sounding.core.plans import FusedTops, PlanInputs, plan_rewards_many
from sounding.learning.protocol import RetrievalOutcome
from sounding.store.learning import ObservationRecord, RetrievalRecord

FEEDBACK_VALUES = ("", "helpful", "not_helpful")


def contributions(record: RetrievalRecord, used: Sequence[str]) -> dict[str, float]:
    return {arm: contribution(ran["document_ids"], used) for arm, ran in record.arms.items()}


def rewards(record: RetrievalRecord, outcome: RetrievalOutcome) -> dict[str, float]:
    """§5.4 for each arm that ran: the share of the used documents it found, the feedback bonus,
    and its latency penalty, charged on the arm's cost (its latency with cached generations counted
    at their decode time; retrievals logged before costs were kept have only their latency)."""
    return rewards_many([(record, outcome)])[0]


def rewards_many(observed: Sequence[tuple[RetrievalRecord, RetrievalOutcome]]) -> list[dict[str, float]]:
    """`rewards` of each (retrieval, outcome), in one array operation."""
    arms = [
        (index, arm, ran) for index, (record, _) in enumerate(observed) for arm, ran in record.arms.items()
    ]
    used = [frozenset(outcome.used_document_ids) for _, outcome in observed]
    found = np.array([contribution(ran["document_ids"], used[i]) for i, _, ran in arms])
    bonuses = np.array([FEEDBACK_BONUS[observed[i][1].feedback] for i, _, _ in arms])
    costs = np.array([ran["cost_ms"] for _, _, ran in arms], dtype=float)
    results: list[dict[str, float]] = [{} for _ in observed]
    for (index, arm, _), value in zip(arms, batch_rewards(found, bonuses, costs).tolist(), strict=True):
        results[index][arm] = value
    return results


def rankings(record: RetrievalRecord) -> dict[str, list[str]]:
    """Each arm's documents, best first."""
    return {arm: ran["document_ids"] for arm, ran in record.arms.items()}


def fusion_scores(record: RetrievalRecord) -> dict[str, list[float]] | None:
    """The arms' scores its plans are fused by (`core.plans`): those it logged, if it was fused
    by min-max and logged every arm's; None (RRF) otherwise."""
    if record.fusion == MIN_MAX and all(arm in record.arm_scores for arm in record.arms):
        return record.arm_scores
    return None


def plan_inputs(record: RetrievalRecord, outcome: Mapping, tops: FusedTops | None = None) -> PlanInputs:
    """What the retrieval's plans are rewarded on: the arms' rankings (or `tops`, their
    `fused_tops`, if known), their scores if it fused by min-max, and costs, the documents the
    agent used or reported missing, its feedback; `outcome` as `logged_outcome` writes it."""
    return PlanInputs(
        rankings(record) if tops is None else {},
        {arm: ran["cost_ms"] for arm, ran in record.arms.items()},
        {*outcome["used_document_ids"], *outcome.get("missed_document_ids", ())},
        outcome["feedback"],
        tops,
        fusion_scores(record),
    )


def logged_plan_rewards(observation: ObservationRecord, record: RetrievalRecord) -> dict[str, float]:
    """The plan rewards an observation was learned with: as logged, or computed again for one
    logged before plan rewards were kept."""
    if observation.plan_rewards is not None:
        return observation.plan_rewards
    return plan_rewards_many([plan_inputs(record, observation.outcome)])[0]


def invalid(outcome: RetrievalOutcome) -> str:
    if not outcome.retrieval_id:
        return "retrieval_id must be set"
    if outcome.feedback not in FEEDBACK_VALUES:
        return f"feedback must be one of {FEEDBACK_VALUES}"
    return ""


def logged_outcome(outcome: RetrievalOutcome) -> dict:
    return {
        "used_document_ids": list(outcome.used_document_ids),
        "feedback": outcome.feedback,
        "agent_success": outcome.agent_success,
        "found_missing_content": outcome.found_missing_content,
        "missed_document_ids": list(outcome.missed_document_ids),
    }
