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
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import NamedTuple

import numpy as np

from sounding.core.bandit import FEEDBACK_BONUS, rewards
from sounding.core.fusion import DEFAULT_RRF_K

SEPARATOR = "+"
REWARD_DEPTH = 10
# Retrievals × plans × documents held at once while rewarding plans (about 8 bytes each).
CHUNK_CELLS = 4_000_000


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


class PlanInputs(NamedTuple):
    """What one observed retrieval says about its plans: each arm's documents (best first; a
    document repeated by an arm counts at its first rank), each arm's cost, the documents the
    agent needed, and its feedback."""

    rankings: Mapping[str, Sequence[str]]
    costs_ms: Mapping[str, float]
    needed: AbstractSet[str]
    feedback: str


def plan_rewards(
    rankings: Mapping[str, Sequence[str]],
    costs_ms: Mapping[str, float],
    needed: AbstractSet[str],
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
    arms: array operations over as many at a time as keep their fused rankings (retrievals ×
    documents × plans) within `CHUNK_CELLS`."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, retrieval in enumerate(retrievals):
        groups.setdefault(tuple(sorted(retrieval.rankings)), []).append(index)
    results: list[dict[str, float]] = [{} for _ in retrievals]
    for arms, members in groups.items():
        if not arms:
            continue
        widest = max(sum(len(retrievals[i].rankings[arm]) for arm in arms) for i in members)
        chunk = max(1, CHUNK_CELLS // max(1, widest * (2 ** len(arms) - 1)))
        for start in range(0, len(members), chunk):
            part = members[start : start + chunk]
            rewarded = _group_rewards(arms, [retrievals[i] for i in part], rrf_k, depth)
            for index, plan_rewarded in zip(part, rewarded, strict=True):
                results[index] = plan_rewarded
    return results


def _group_rewards(
    arms: tuple[str, ...], retrievals: Sequence[PlanInputs], rrf_k: float, depth: int
) -> list[dict[str, float]]:
    names, masks = _plan_masks(arms)
    count, arm_count = len(retrievals), len(arms)
    # The arms' rankings, retrieval-major, flattened; documents coded in id order.
    rankings = [r.rankings[arm] for r in retrievals for arm in arms]
    lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=len(rankings))
    flat = list(itertools.chain.from_iterable(rankings))
    vocabulary = sorted(set(flat))
    code = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
    codes = np.fromiter(map(code.__getitem__, flat), dtype=np.int64, count=len(flat))
    ranking_of = np.repeat(np.arange(len(rankings)), lengths)
    # A document repeated by an arm counts at its first rank; ranks count first occurrences only.
    first = np.zeros(len(flat), dtype=bool)
    first[np.unique(ranking_of * len(vocabulary) + codes, return_index=True)[1]] = True
    counted_so_far = np.cumsum(first)
    before = np.concatenate([[0], counted_so_far])[np.cumsum(lengths) - lengths]
    rank = (counted_so_far - np.repeat(before, lengths))[first]
    ranking_of, codes = ranking_of[first], codes[first]
    retrieval_of, arm_of = ranking_of // arm_count, ranking_of % arm_count
    # Each retrieval's documents are its columns, in id order (ties keep that order), padded with
    # zero columns (never counted: only positive scores are).
    keys = retrieval_of * len(vocabulary) + codes
    columns, column_of = np.unique(keys, return_inverse=True)
    starts = np.searchsorted(columns, np.arange(count) * len(vocabulary))
    width = int(np.diff(np.append(starts, len(columns))).max(initial=0))
    reciprocal = np.zeros((count, width, arm_count))  # 1 / (k + rank of a document in an arm)
    reciprocal[retrieval_of, column_of - starts[retrieval_of], arm_of] = 1 / (rrf_k + rank)
    needed = [r.needed for r in retrievals]
    needed_counts = np.fromiter(map(len, needed), dtype=np.int64, count=count)
    needed_of = np.repeat(np.arange(count), needed_counts)
    needed_codes = np.fromiter(
        (code.get(doc, -1) for docs in needed for doc in docs), dtype=np.int64, count=len(needed_of)
    )
    ranked = needed_codes >= 0
    needed_of, needed_keys = needed_of[ranked], needed_of[ranked] * len(vocabulary) + needed_codes[ranked]
    at = np.minimum(np.searchsorted(columns, needed_keys), len(columns) - 1)
    hit = columns[at] == needed_keys
    relevant = np.zeros((count, width), dtype=bool)
    relevant[needed_of[hit], at[hit] - starts[needed_of[hit]]] = True
    fused = reciprocal @ masks  # retrievals × documents × plans
    top = np.argsort(-fused, axis=1, kind="stable")[:, :depth]
    counted = np.take_along_axis(relevant[:, :, None], top, axis=1) & (
        np.take_along_axis(fused, top, axis=1) > 0
    )
    # nDCG@depth of each plan's fused ranking (binary gains), 0 where nothing was needed.
    discounts = 1 / np.log2(np.arange(top.shape[1]) + 2)
    ideal = np.concatenate([[0.0], np.cumsum(1 / np.log2(np.arange(depth) + 2))])[
        np.minimum(needed_counts, depth)
    ]
    dcg = np.einsum("rdp,d->rp", counted, discounts)
    contributions = np.divide(dcg, ideal[:, None], out=np.zeros_like(dcg), where=ideal[:, None] > 0)
    costs = np.fromiter(
        (r.costs_ms[arm] for r in retrievals for arm in arms), dtype=float, count=count * arm_count
    ).reshape(count, arm_count)
    latencies = np.where(masks[None] > 0, costs[:, :, None], -np.inf).max(axis=1)  # a plan's slowest arm
    bonuses = np.fromiter((FEEDBACK_BONUS[r.feedback] for r in retrievals), dtype=float, count=count)
    rewarded = rewards(contributions, bonuses[:, None], latencies)
    return [dict(zip(names, row, strict=True)) for row in rewarded.tolist()]
