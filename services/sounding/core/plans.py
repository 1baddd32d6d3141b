"""Plans: sets of arms that run together and are fused (adaptive-strategy spec §5.3–§5.4, with the
bandit choosing among sets of arms rather than thresholding each arm's own score).

A plan is named by its arms, sorted and joined with "+" ("dense+lexical"). Its reward for an
observed retrieval is §5.4's reward of its fused ranking, fused with equal weights as the
retrieval itself was (`core.fusion`): min-max over the arms' scores where the retrieval fused
that way and logged them, else RRF:

- contribution: nDCG@`REWARD_DEPTH` of the fused documents against those the agent needed (the
  ones it used and the ones it reported missing), binary gains; 0 when it named none;
- feedback bonus as §5.4;
- latency penalty on the slowest of its arms' costs (a plan's arms run in parallel).

Every plan made of arms that ran is scored from their logged rankings, so one retrieval teaches
the bandit about every subset of what ran.
"""

from __future__ import annotations

import bisect
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
# Retrievals × plans × documents held at once while rewarding plans (in a few arrays of 8 bytes each).
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


class FusedTops(NamedTuple):
    """What one retrieval's rankings say about its plans, whatever the outcome: its documents
    (every arm's, distinct, in id order) and, for each plan (`plans` order), the positions in
    `documents` of the plan's fused top `depth`, best first (-1 past the documents the plan's arms
    ranked)."""

    documents: list[str]
    top: np.ndarray  # plans × depth


class PlanInputs(NamedTuple):
    """What one observed retrieval says about its plans: each arm's documents (best first; a
    document repeated by an arm counts at its first rank), each arm's cost (its keys are the arms
    that ran), the documents the agent needed, its feedback, (if known already) `fused_tops` of its
    rankings, which then stand for the rankings (they may be left empty), and the arms' scores
    if its plans fuse by min-max."""

    rankings: Mapping[str, Sequence[str]]
    costs_ms: Mapping[str, float]
    needed: AbstractSet[str]
    feedback: str
    tops: FusedTops | None = None
    # Each arm's scores of its ranking, in the same order, where the retrieval fused by min-max
    # (its plans are then fused so); None: by RRF.
    scores: Mapping[str, Sequence[float]] | None = None


def plan_rewards(
    rankings: Mapping[str, Sequence[str]],
    costs_ms: Mapping[str, float],
    needed: AbstractSet[str],
    feedback: str,
    rrf_k: float = DEFAULT_RRF_K,
    depth: int = REWARD_DEPTH,
    scores: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, float]:
    """The reward of every plan made of the arms in `rankings` (`PlanInputs` says what each is)."""
    return plan_rewards_many([PlanInputs(rankings, costs_ms, needed, feedback, scores=scores)], rrf_k, depth)[
        0
    ]


def plan_rewards_many(
    retrievals: Sequence[PlanInputs], rrf_k: float = DEFAULT_RRF_K, depth: int = REWARD_DEPTH
) -> list[dict[str, float]]:
    """`plan_rewards` of each retrieval, computed together for the retrievals that ran the same
    arms; `fused_tops` only for those that do not carry theirs."""
    results: list[dict[str, float]] = [{} for _ in retrievals]
    for arms, members in _groups([r.costs_ms for r in retrievals]).items():
        missing = [i for i in members if retrievals[i].tops is None]
        computed = dict(
            zip(
                missing,
                fused_tops(
                    [retrievals[i].rankings for i in missing],
                    rrf_k,
                    depth,
                    [retrievals[i].scores for i in missing],
                ),
                strict=True,
            )
        )
        group = [retrievals[i] for i in members]
        tops = [r.tops if r.tops is not None else computed[i] for i, r in zip(members, group, strict=True)]
        for index, rewarded in zip(members, _rewards(arms, group, tops, depth), strict=True):
            results[index] = rewarded
    return results


def fused_tops(
    rankings: Sequence[Mapping[str, Sequence[str]]],
    rrf_k: float = DEFAULT_RRF_K,
    depth: int = REWARD_DEPTH,
    scores: Sequence[Mapping[str, Sequence[float]] | None] | None = None,
) -> list[FusedTops]:
    """`FusedTops` of each retrieval's rankings: a plan fuses its arms' rankings with equal
    weights as `core.fusion` does, by min-max over the retrieval's `scores` where it has them
    (each arm's, in its ranking's order), else by RRF; ties go to the best rank any of the plan's
    arms gave, then to id order. Computed in array operations over the retrievals that ran the
    same arms, as many at a time as keep their fused rankings (retrievals × documents × plans)
    within `CHUNK_CELLS`. A retrieval that ran no arm has no documents and no plans."""
    scores = [None] * len(rankings) if scores is None else scores
    if len(scores) != len(rankings):
        raise ValueError("scores must be given for every retrieval (None for those fused by RRF)")
    results: list[FusedTops] = [FusedTops([], np.zeros((0, depth), np.int32)) for _ in rankings]
    for arms, members in _groups(rankings).items():
        widest = max(sum(len(rankings[i][arm]) for arm in arms) for i in members)
        chunk = max(1, CHUNK_CELLS // max(1, widest * (2 ** len(arms) - 1)))
        for start in range(0, len(members), chunk):
            part = members[start : start + chunk]
            for index, tops in zip(
                part,
                _group_tops(arms, [rankings[i] for i in part], [scores[i] for i in part], rrf_k, depth),
                strict=True,
            ):
                results[index] = tops
    return results


def _groups(by_arm: Sequence[Mapping[str, object]]) -> dict[tuple[str, ...], list[int]]:
    """The positions of the retrievals that ran each set of arms (the keys of each one's mapping
    by arm; none for those that ran none)."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, ran in enumerate(by_arm):
        if ran:
            groups.setdefault(tuple(sorted(ran)), []).append(index)
    return groups


def _group_tops(
    arms: tuple[str, ...],
    rankings: Sequence[Mapping[str, Sequence[str]]],
    scores: Sequence[Mapping[str, Sequence[float]] | None],
    rrf_k: float,
    depth: int,
) -> list[FusedTops]:
    names, masks = _plan_masks(arms)
    count, arm_count = len(rankings), len(arms)
    # The arms' rankings, retrieval-major, flattened; documents coded in id order.
    flat_rankings = [r[arm] for r in rankings for arm in arms]
    lengths = np.fromiter(map(len, flat_rankings), dtype=np.int64, count=len(flat_rankings))
    flat = list(itertools.chain.from_iterable(flat_rankings))
    vocabulary = sorted(set(flat))
    code = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
    codes = np.fromiter(map(code.__getitem__, flat), dtype=np.int64, count=len(flat))
    ranking_of = np.repeat(np.arange(len(flat_rankings)), lengths)
    # A document repeated by an arm counts at its first rank, with its first score; ranks and the
    # arm's score range count first occurrences only.
    first = np.zeros(len(flat), dtype=bool)
    first[np.unique(ranking_of * len(vocabulary) + codes, return_index=True)[1]] = True
    normalised = _min_max_normalised(arms, rankings, scores, first, ranking_of)
    counted_so_far = np.cumsum(first)
    before = np.concatenate([[0], counted_so_far])[np.cumsum(lengths) - lengths]
    rank = (counted_so_far - np.repeat(before, lengths))[first]
    ranking_of, codes = ranking_of[first], codes[first]
    retrieval_of, arm_of = ranking_of // arm_count, ranking_of % arm_count
    # Each retrieval's documents are its columns, in id order, padded with columns no arm ranked.
    keys = retrieval_of * len(vocabulary) + codes
    columns, column_of = np.unique(keys, return_inverse=True)
    starts = np.searchsorted(columns, np.arange(count) * len(vocabulary))
    ends = np.append(starts[1:], len(columns))
    width = int((ends - starts).max(initial=0))
    cell = (retrieval_of, column_of - starts[retrieval_of], arm_of)
    # A document's share of each arm's vote: its min-max normalised score, or 1 / (k + rank).
    share = np.zeros((count, width, arm_count))
    share[cell] = np.where(np.isnan(normalised), 1 / (rrf_k + rank), normalised)
    ranks = np.full((count, width, arm_count), np.inf)
    ranks[cell] = rank
    fused = share @ masks  # retrievals × documents × plans (a plan's mean, times its size)
    best_rank = np.stack([ranks[:, :, masks[:, p] > 0].min(axis=2) for p in range(len(names))], axis=2)
    ranked = np.isfinite(best_rank)
    # Best first: fused score, then best rank, then id order (lexsort is stable).
    order = np.lexsort((best_rank.transpose(0, 2, 1), -fused.transpose(0, 2, 1)), axis=-1)[:, :, :depth]
    top = np.where(np.take_along_axis(ranked.transpose(0, 2, 1), order, axis=2), order, -1)
    top = np.pad(top, ((0, 0), (0, 0), (0, depth - top.shape[2])), constant_values=-1).astype(np.int32)
    documents = [vocabulary[c] for c in (columns % len(vocabulary)).tolist()]
    return [
        FusedTops(documents[start:end], top[r])
        for r, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True))
    ]


def _min_max_normalised(
    arms: tuple[str, ...],
    rankings: Sequence[Mapping[str, Sequence[str]]],
    scores: Sequence[Mapping[str, Sequence[float]] | None],
    first: np.ndarray,
    ranking_of: np.ndarray,
) -> np.ndarray:
    """For each first occurrence in the flattened rankings (`first`; `ranking_of` says whose
    entry each is), its score min-max normalised over its arm's first occurrences (1 where they
    are all equal); NaN for retrievals without scores."""
    flat_scores = []
    for ranking, scored in zip(rankings, scores, strict=True):
        for arm in arms:
            if scored is None:
                flat_scores.append(np.full(len(ranking[arm]), np.nan))
                continue
            values = np.asarray(scored.get(arm, ()), dtype=float)
            if len(values) != len(ranking[arm]) or not np.isfinite(values).all():
                raise ValueError(f"arm {arm!r} needs a finite score for each document it ranked")
            flat_scores.append(values)
    values = (np.concatenate(flat_scores) if flat_scores else np.zeros(0))[first]
    owner = ranking_of[first]
    low = np.full(len(flat_scores), np.inf)
    high = np.full(len(flat_scores), -np.inf)
    with np.errstate(invalid="ignore"):  # NaN, the unscored retrievals' entries, stays NaN
        np.minimum.at(low, owner, values)
        np.maximum.at(high, owner, values)
        low, span = low[owner], high[owner] - low[owner]
        return np.where(span > 0, (values - low) / span, np.where(np.isnan(values), np.nan, 1.0))


def _rewards(
    arms: tuple[str, ...], retrievals: Sequence[PlanInputs], tops: Sequence[FusedTops], depth: int
) -> list[dict[str, float]]:
    """§5.4 for each plan of each retrieval, from its fused top and the documents needed."""
    names, masks = _plan_masks(arms)
    count = len(retrievals)
    # relevant[r, d]: document d of retrieval r was needed (found by bisection: the documents are
    # in id order); one column more, never relevant, for the tops' -1 entries.
    relevant = np.zeros((count, max((len(t.documents) for t in tops), default=0) + 1), dtype=bool)
    found = [
        (row, position)
        for row, (r, t) in enumerate(zip(retrievals, tops, strict=True))
        for doc in r.needed
        if (position := bisect.bisect_left(t.documents, doc)) < len(t.documents)
        and t.documents[position] == doc
    ]
    if found:
        relevant[tuple(np.array(found).T)] = True
    top = np.stack([t.top for t in tops])  # retrievals × plans × depth
    counted = np.take_along_axis(relevant[:, None, :], top, axis=2)
    # nDCG@depth of each plan's fused ranking (binary gains), 0 where nothing was needed.
    discounts = 1 / np.log2(np.arange(depth) + 2)
    needed_counts = np.fromiter((len(r.needed) for r in retrievals), dtype=np.int64, count=count)
    ideal = np.concatenate([[0.0], np.cumsum(discounts)])[np.minimum(needed_counts, depth)]
    dcg = counted @ discounts
    contributions = np.divide(dcg, ideal[:, None], out=np.zeros_like(dcg), where=ideal[:, None] > 0)
    costs = np.fromiter(
        (r.costs_ms[arm] for r in retrievals for arm in arms), dtype=float, count=count * len(arms)
    ).reshape(count, len(arms))
    latencies = np.where(masks[None] > 0, costs[:, :, None], -np.inf).max(axis=1)  # a plan's slowest arm
    bonuses = np.fromiter((FEEDBACK_BONUS[r.feedback] for r in retrievals), dtype=float, count=count)
    rewarded = rewards(contributions, bonuses[:, None], latencies)
    return [dict(zip(names, row, strict=True)) for row in rewarded.tolist()]
