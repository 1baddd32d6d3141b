"""What an observed retrieval outcome is: whether it is valid, the form it is logged in, and what
it says about each arm that ran (adaptive-strategy spec §5.4): the share of the used documents
the arm found and its reward (logged, for metrics and pruning), and the reward of every plan of
those arms (`core.plans`, what the selector learns)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sounding.core.bandit import contribution, reward
from sounding.core.plans import plan_rewards
from sounding.learning.protocol import RetrievalOutcome
from sounding.store.learning import ObservationRecord, RetrievalRecord

FEEDBACK_VALUES = ("", "helpful", "not_helpful")


def contributions(record: RetrievalRecord, used: Sequence[str]) -> dict[str, float]:
    return {arm: contribution(ran["document_ids"], used) for arm, ran in record.arms.items()}


def rewards(record: RetrievalRecord, outcome: RetrievalOutcome) -> dict[str, float]:
    """§5.4 for each arm that ran: the share of the used documents it found, the feedback bonus,
    and its latency penalty, charged on the arm's cost (its latency with cached generations counted
    at their decode time; retrievals logged before costs were kept have only their latency)."""
    return {
        arm: reward(
            contribution(ran["document_ids"], outcome.used_document_ids),
            outcome.feedback,
            ran["cost_ms"],
        )
        for arm, ran in record.arms.items()
    }


def plan_rewards_of(record: RetrievalRecord, outcome: Mapping) -> dict[str, float]:
    """Every plan of the arms that ran, rewarded for its fused ranking against the documents the
    agent used or reported missing; `outcome` as `logged_outcome` writes it."""
    needed = {*outcome["used_document_ids"], *outcome.get("missed_document_ids", ())}
    return plan_rewards(
        {arm: ran["document_ids"] for arm, ran in record.arms.items()},
        {arm: ran["cost_ms"] for arm, ran in record.arms.items()},
        needed,
        outcome["feedback"],
    )


def logged_plan_rewards(observation: ObservationRecord, record: RetrievalRecord) -> dict[str, float]:
    """The plan rewards an observation was learned with: as logged, or computed again for one
    logged before plan rewards were kept."""
    if observation.plan_rewards is not None:
        return observation.plan_rewards
    return plan_rewards_of(record, observation.outcome)


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
