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

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np

from sounding.core.bandit import reward
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


def ranked_contribution(ranking: Sequence[str], needed: Collection[str], depth: int = REWARD_DEPTH) -> float:
    """nDCG@depth of `ranking` with `needed` as the relevant documents (binary gains)."""
    needed = set(needed)
    if not needed:
        return 0.0
    gains = [1 / np.log2(rank + 2) for rank, doc in enumerate(ranking[:depth]) if doc in needed]
    ideal = sum(1 / np.log2(rank + 2) for rank in range(min(len(needed), depth)))
    return float(sum(gains) / ideal)


def plan_rewards(
    rankings: Mapping[str, Sequence[str]],
    costs_ms: Mapping[str, float],
    needed: Collection[str],
    feedback: str,
    rrf_k: float = DEFAULT_RRF_K,
    depth: int = REWARD_DEPTH,
) -> dict[str, float]:
    """The reward of every plan made of the arms in `rankings` (each arm's documents, best first;
    a document repeated by an arm counts at its first rank)."""
    arms = sorted(rankings)
    if not arms:
        return {}
    documents = sorted({doc for ranking in rankings.values() for doc in ranking})
    row = {doc: i for i, doc in enumerate(documents)}
    # reciprocal[d, a]: 1 / (k + rank of d in arm a), 0 where a did not rank d.
    reciprocal = np.zeros((len(documents), len(arms)))
    for column, arm in enumerate(arms):
        for rank, doc in enumerate(dict.fromkeys(rankings[arm]), start=1):
            reciprocal[row[doc], column] = 1 / (rrf_k + rank)
    names = plans(arms)
    masks = np.zeros((len(arms), len(names)))
    for column, name in enumerate(names):
        masks[[arms.index(arm) for arm in plan_arms(name)], column] = 1.0
    fused = reciprocal @ masks  # documents × plans
    # Ties keep the documents' id order.
    top = np.argsort(-fused, axis=0, kind="stable")[:depth]
    needed = set(needed)
    rewards = {}
    for column, name in enumerate(names):
        ranking = [documents[i] for i in top[:, column] if fused[i, column] > 0]
        latency = max(costs_ms[arm] for arm in plan_arms(name))
        rewards[name] = reward(ranked_contribution(ranking, needed, depth), feedback, latency)
    return rewards
