"""Plans: sets of arms that run together and are fused (adaptive-strategy spec §5.3–§5.4, with the
bandit choosing among sets of arms rather than thresholding each arm's own score).

A plan is named by its arms, sorted and joined with "+" ("dense+lexical"). Its reward for an
observed retrieval is §5.4's reward of its fused ranking (weighted RRF, equal weights, as fixed
plans are fused):

- contribution: nDCG@`REWARD_DEPTH` of the fused documents against those the agent needed (the
  ones it used and the ones it reported missing), binary gains; 0 when it named none;
- feedback bonus as §5.4;
- latency penalty on the slowest of its arms' costs (a plan's arms run in parallel).

Every plan made of arms that ran is scored from their logged rankings, so one retrieval teaches
the bandit about every subset of what ran.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sounding.core.bandit import FEEDBACK_BONUS, rewards
from sounding.core.fusion import DEFAULT_RRF_K

SEPARATOR = "+"
REWARD_DEPTH = 10


def plan_name(arms: Iterable[str]) -> str:
    return SEPARATOR.join(sorted(arms))


def plan_arms(name: str) -> list[str]:
    return name.split(SEPARATOR)


def plans(arms: Sequence[str]) -> list[str]:
    """Every non-empty set of `arms`, by name, smallest sets first."""
    return [plan_name(c) for size in range(1, len(arms) + 1) for c in itertools.combinations(arms, size)]


@functools.lru_cache(maxsize=64)
def _plan_masks(arms: tuple[str, ...]) -> tuple[list[str], np.ndarray]:
    """The plans of `arms` and which arms each holds (arms × plans, 1 where it does)."""
    names = plans(arms)
    masks = np.zeros((len(arms), len(names)))
    for column, name in enumerate(names):
        masks[[arms.index(arm) for arm in plan_arms(name)], column] = 1.0
    masks.setflags(write=False)
    return names, masks


@dataclass(frozen=True)
class PlanInputs:
    """What one observed retrieval says about its plans: each arm's documents (best first; a
    document repeated by an arm counts at its first rank), each arm's cost, the documents the
    agent needed, and its feedback."""

    rankings: Mapping[str, Sequence[str]]
    costs_ms: Mapping[str, float]
    needed: Collection[str]
    feedback: str


def plan_rewards(
    rankings: Mapping[str, Sequence[str]],
    costs_ms: Mapping[str, float],
    needed: Collection[str],
    feedback: str,
    rrf_k: float = DEFAULT_RRF_K,
    depth: int = REWARD_DEPTH,
) -> dict[str, float]:
    """The reward of every plan made of the arms in `rankings` (`PlanInputs` says what each is)."""
    return plan_rewards_many([PlanInputs(rankings, costs_ms, needed, feedback)], rrf_k, depth)[0]


def plan_rewards_many(
    retrievals: Sequence[PlanInputs], rrf_k: float = DEFAULT_RRF_K, depth: int = REWARD_DEPTH
) -> list[dict[str, float]]:
    """`plan_rewards` of each retrieval, computed together for the retrievals that ran the same
    arms (one array operation per step for the whole group)."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, retrieval in enumerate(retrievals):
        groups.setdefault(tuple(sorted(retrieval.rankings)), []).append(index)
    results: list[dict[str, float]] = [{} for _ in retrievals]
    for arms, members in groups.items():
        if arms:
            for index, rewarded in zip(
                members, _group_rewards(arms, [retrievals[i] for i in members], rrf_k, depth), strict=True
            ):
                results[index] = rewarded
    return results


def _group_rewards(
    arms: tuple[str, ...], retrievals: Sequence[PlanInputs], rrf_k: float, depth: int
) -> list[dict[str, float]]:
    names, masks = _plan_masks(arms)
    documents = [sorted({doc for ranking in r.rankings.values() for doc in ranking}) for r in retrievals]
    width = max(map(len, documents))
    # reciprocal[r, d, a]: 1 / (k + rank of document d in arm a of retrieval r), 0 where a did not
    # rank d; documents in id order, padded with zero rows (never counted: only positive scores are).
    reciprocal = np.zeros((len(retrievals), width, len(arms)))
    relevant = np.zeros((len(retrievals), width), dtype=bool)
    at_r: list[int] = []
    at_d: list[int] = []
    at_a: list[int] = []
    at_rank: list[int] = []
    relevant_r: list[int] = []
    relevant_d: list[int] = []
    for r, (retrieval, ids) in enumerate(zip(retrievals, documents, strict=True)):
        row = {doc: i for i, doc in enumerate(ids)}
        for a, arm in enumerate(arms):
            ranked = [row[doc] for doc in dict.fromkeys(retrieval.rankings[arm])]
            at_r.extend([r] * len(ranked))
            at_d.extend(ranked)
            at_a.extend([a] * len(ranked))
            at_rank.extend(range(1, len(ranked) + 1))
        found = [row[doc] for doc in set(retrieval.needed) if doc in row]
        relevant_r.extend([r] * len(found))
        relevant_d.extend(found)
    reciprocal[at_r, at_d, at_a] = 1 / (rrf_k + np.asarray(at_rank, dtype=float))
    relevant[relevant_r, relevant_d] = True
    fused = reciprocal @ masks  # retrievals × documents × plans
    # Ties keep the documents' id order.
    top = np.argsort(-fused, axis=1, kind="stable")[:, :depth]
    counted = np.take_along_axis(relevant[:, :, None], top, axis=1) & (
        np.take_along_axis(fused, top, axis=1) > 0
    )
    # nDCG@depth of each plan's fused ranking (binary gains), 0 where nothing was needed.
    discounts = 1 / np.log2(np.arange(top.shape[1]) + 2)
    ideal_cut = np.array([min(len(set(r.needed)), depth) for r in retrievals])
    ideal = np.concatenate([[0.0], np.cumsum(1 / np.log2(np.arange(depth) + 2))])[ideal_cut]
    dcg = np.einsum("rdp,d->rp", counted, discounts)
    contributions = np.divide(dcg, ideal[:, None], out=np.zeros_like(dcg), where=ideal[:, None] > 0)
    costs = np.array([[r.costs_ms[arm] for arm in arms] for r in retrievals], dtype=float)
    latencies = np.where(masks[None] > 0, costs[:, :, None], -np.inf).max(axis=1)  # a plan's slowest arm
    bonuses = np.array([FEEDBACK_BONUS[r.feedback] for r in retrievals])
    rewarded = rewards(contributions, bonuses[:, None], latencies)
    return [dict(zip(names, row.tolist(), strict=True)) for row in rewarded]
