"""A precomputed plan for bulls and cows: the guess to make at every position its own play reaches.

The plan comes from a branch-and-bound search that minimises the total number of guesses over the
secrets still consistent with the feedback (the winning guess counted), and so their mean. At
each position it tries the `width` best guesses by each of three cheap rankings (partition
entropy, number of feedback groups, expected group size), one guess per distinct profile of group
sizes, solves every feedback group the same way recursively, and abandons a guess as soon as a
lower bound on its total reaches the best found.
The width limit is what keeps the search from being exhaustive, so the plan is near-optimal rather
than optimal. Searching takes minutes, so it runs once, offline (`tools/plan_bulls_and_cows.py`),
and the plan ships as package data (`data/bulls_and_cows_plan.txt`); a move is then a lookup.

A plan file has one line per position: the feedback codes received so far joined by `.`
(empty for the opening), the guess, and the total number of guesses the plan needs over that
position's consistent secrets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SHIPPED = Path(__file__).parent / "data" / "bulls_and_cows_plan.txt"


@dataclass(frozen=True)
class Move:
    guess: int
    total: int  # guesses the plan needs over this position's consistent secrets, the winning ones included


Plan = dict[tuple[int, ...], Move]


def lower_bound(count: int) -> int:
    """The fewest guesses any strategy needs in total over `count` secrets: one guess each, a
    second for all but the one the first guess may hit, and a third for at least those that the
    at most 13 other feedback groups of the second guess cannot separate."""
    if count <= 1:
        return count
    return 2 * count - 1 + max(0, count - 14)


class Search:
    """Branch and bound over positions, memoised by their set of consistent secrets."""

    def __init__(self, table: np.ndarray, solved: int, width: int):
        """`table[guess, secret]` is the feedback code; `solved` the code of a winning guess."""
        self.table = table
        self.solved = solved
        self.width = width
        self._codes = int(table.max()) + 1
        self._offsets = (np.arange(self.table.shape[0], dtype=np.int32) * self._codes)[:, None]
        self._solved: dict[bytes, Move] = {}

    def solve(self, candidates: np.ndarray) -> Move:
        """The best guess found for these consistent secrets and the plan's total over them."""
        count = len(candidates)
        if count <= 2:
            return Move(int(candidates[0]), 2 * count - 1)
        key = candidates.tobytes()
        if key not in self._solved:
            self._solved[key] = self._search(candidates)
        return self._solved[key]

    def _search(self, candidates: np.ndarray) -> Move:
        count = len(candidates)
        sizes = np.bincount(
            (self.table[:, candidates].astype(np.int32) + self._offsets).ravel(),
            minlength=self.table.shape[0] * self._codes,
        ).reshape(-1, self._codes)
        consistent = np.zeros(self.table.shape[0], dtype=bool)
        consistent[candidates] = True
        groups = (sizes > 0).sum(axis=1)
        # Every secret told apart: optimal at once (a consistent guess also wins outright on one).
        for separating in (consistent & (groups == count), groups == count):
            found = np.flatnonzero(separating)
            if len(found):
                return Move(int(found[0]), 2 * count - int(consistent[found[0]]))
        share = sizes / count
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = np.where(share > 0, -share * np.log2(share), 0.0).sum(axis=1)
        expected_size = (sizes.astype(np.float64) ** 2).sum(axis=1) / count
        # Guesses with the same group sizes score the same on every ranking: try one of each.
        profile = np.concatenate([np.sort(sizes, axis=1), consistent[:, None]], axis=1)
        distinct = np.sort(np.unique(profile, axis=0, return_index=True)[1])
        rankings = (
            distinct[np.argsort(-(entropy + consistent * 1e-9)[distinct], kind="stable")[: self.width]],
            distinct[np.argsort(-(groups + consistent * 0.5)[distinct], kind="stable")[: self.width]],
            distinct[np.argsort((expected_size - consistent * 1e-9)[distinct], kind="stable")[: self.width]],
        )
        best = Move(-1, np.iinfo(np.int64).max)
        for guess in dict.fromkeys(int(g) for ranking in rankings for g in ranking):
            codes = self.table[guess, candidates]
            parts = [candidates[codes == code] for code in np.unique(codes) if code != self.solved]
            parts.sort(key=len, reverse=True)
            if len(parts[0]) == count:
                continue  # tells no secret apart
            bounds = [lower_bound(len(part)) for part in parts]
            total = count + sum(bounds)
            for part, bound in zip(parts, bounds, strict=True):
                if total >= best.total:
                    break
                total += self.solve(part).total - bound
            if total < best.total:
                best = Move(guess, total)
        return best

    def plan(self) -> Plan:
        """The move at every position reached by following the search's own guesses. The opening
        is 0123: relabelling digits and positions maps every opening onto every other."""
        plan: Plan = {}
        pending: list[tuple[tuple[int, ...], np.ndarray]] = [((), np.arange(self.table.shape[0]))]
        while pending:
            path, candidates = pending.pop()
            move = self._opening(candidates) if not path else self.solve(candidates)
            plan[path] = move
            codes = self.table[move.guess, candidates]
            pending.extend(
                ((*path, int(code)), candidates[codes == code])
                for code in np.unique(codes)
                if code != self.solved
            )
        return plan

    def _opening(self, everything: np.ndarray) -> Move:
        codes = self.table[0]
        parts = (everything[codes == code] for code in np.unique(codes) if code != self.solved)
        return Move(0, len(everything) + sum(self.solve(part).total for part in parts))


def write(plan: Plan, strings: Sequence[str]) -> str:
    """The plan file's text; `strings[guess]` spells a guess."""
    lines = [f"{'.'.join(map(str, path))} {strings[move.guess]} {move.total}" for path, move in plan.items()]
    return "\n".join(sorted(lines, key=lambda line: (line.count("."), line))) + "\n"


def read(text: str, index: Mapping[str, int]) -> Plan:
    """A plan from its file's text; `index[spelling]` is a guess."""
    plan: Plan = {}
    for line in text.splitlines():
        path, guess, total = line.split(" ")
        plan[tuple(int(code) for code in path.split(".")) if path else ()] = Move(index[guess], int(total))
    return plan
