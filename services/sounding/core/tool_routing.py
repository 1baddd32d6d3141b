"""Tool routing that learns from use (spec tool-selection-learning): a bank of per-tool centroids
ranks the tools for a request; mis-routes are detected from what an agent actually used; a
two-tier oracle labels them (the free ranker when its margin is wide, a teacher below it); and
the confirmed (request -> tool) exemplars are folded back into the centroids.

The fold (README, "Tool selection"): a tool's centroid is the unit vector along the weighted mean
of its description embedding, counted `description_weight` times, and the embeddings of its
latest `max_exemplars` exemplars, each counted once:

    centroid = normalize((w * d + e_1 + ... + e_n) / (w + n))

so a tool without exemplars is ranked by its description alone, and each confirmed use pulls it
towards the requests it serves.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def fold(description: ArrayLike, exemplars: ArrayLike, description_weight: float) -> np.ndarray:
    """A tool's centroid from its description embedding and its exemplars' (rows; none is a
    0-row array)."""
    d = _unit(np.asarray(description, dtype=np.float64))
    e = np.asarray(exemplars, dtype=np.float64).reshape(-1, len(d))
    if len(e) == 0:
        return d
    e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    return _unit((description_weight * d + e.sum(axis=0)) / (description_weight + len(e)))


@dataclass(frozen=True)
class Route:
    """The ranker's answer for a request: the best `top_k` tools with cosine scores (best
    first), the top-1 and its margin over the second best of all the tools ranked (however few
    were asked for; the top score when it is the only one); `ok` is false when there was nothing
    to rank."""

    candidates: tuple[tuple[str, float], ...]
    ok: bool
    margin: float = 0.0

    @property
    def top1(self) -> str:
        return self.candidates[0][0] if self.candidates else ""


NO_ROUTE = Route((), ok=False)


class CentroidBank:
    """The per-tool centroids of one toolset, as one matrix: a rank is one matrix-vector product."""

    def __init__(self, names: Sequence[str], centroids: ArrayLike) -> None:
        self.names = tuple(names)
        self._index = {name: i for i, name in enumerate(self.names)}
        matrix = np.asarray(centroids, dtype=np.float32)
        self._matrix = matrix.reshape(len(self.names), -1) if self.names else np.empty((0, 0), np.float32)

    @classmethod
    def folded(
        cls,
        descriptions: Mapping[str, ArrayLike],
        exemplars: Mapping[str, ArrayLike],
        description_weight: float,
    ) -> CentroidBank:
        """The bank of the tools in `descriptions` (by name), each folded with its exemplars (a
        tool missing from `exemplars` has none; exemplars of unknown tools are ignored)."""
        names = sorted(descriptions)
        rows = [fold(descriptions[n], exemplars.get(n, np.empty((0, 0))), description_weight) for n in names]
        return cls(names, np.stack(rows) if rows else np.empty((0, 0)))

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def rank(self, query: ArrayLike, top_k: int, among: Collection[str] = ()) -> Route:
        """The best `top_k` tools for a query embedding, among the named tools if any are named
        (names the bank lacks are skipped); ties keep the bank's (name) order."""
        rows = np.arange(len(self.names))
        if among:
            rows = np.array(sorted(self._index[n] for n in set(among) if n in self._index), dtype=np.int64)
        if len(rows) == 0 or top_k < 1:
            return NO_ROUTE
        q = _unit(np.asarray(query, dtype=np.float32))
        scores = self._matrix[rows] @ q
        order = np.argsort(-scores, kind="stable")
        margin = float(scores[order[0]] - (scores[order[1]] if len(order) > 1 else 0.0))
        return Route(tuple((self.names[rows[i]], float(scores[i])) for i in order[:top_k]), True, margin)

    def top1_hits(self, uses: Sequence[tuple[str, ArrayLike]]) -> int:
        """How many of the uses ((tool, request embedding) pairs) this bank ranks their tool
        first among all its tools (ties as in `rank`)."""
        if not uses or not self.names:
            return 0
        queries = np.stack([_unit(np.asarray(v, dtype=np.float32)) for _, v in uses])
        best = np.argmax(queries @ self._matrix.T, axis=1)
        return sum(self.names[i] == tool for i, (tool, _) in zip(best, uses, strict=True))


def untrusted_labels_validate(
    without: CentroidBank,
    with_untrusted: CentroidBank,
    held_back: Sequence[tuple[str, ArrayLike]],
    min_uses: int,
) -> bool:
    """Whether the free and teacher tiers' exemplars may route: their labels are the ranker's or a
    generator's guesses, which can teach a tool the wrong requests, so they route only when at
    least `min_uses` trusted uses held back from both banks are ranked right at least as often with
    them (`with_untrusted`) as without (`without`). Without trusted uses they never route, so
    routing is never below what the trusted tier alone gives (issue 48, item 4)."""
    if len(held_back) < min_uses:
        return False
    return with_untrusted.top1_hits(held_back) >= without.top1_hits(held_back)


class FlagReason(StrEnum):
    """Why a tool use is taken for a mis-route (spec: the fallback heuristic, then disagreement)."""

    NONE = "none"
    FALLBACK = "fallback"
    DISAGREEMENT = "disagreement"


def detect(used_tool: str, route: Route, fallback_tools: Collection[str]) -> FlagReason:
    """A use of a fallback tool is a mis-route; otherwise one whose tool is not the ranker's
    top-1 (only when the ranker could rank: without it, only the fallback rule applies)."""
    if used_tool in fallback_tools:
        return FlagReason.FALLBACK
    if route.ok and used_tool != route.top1:
        return FlagReason.DISAGREEMENT
    return FlagReason.NONE


class LabelTier(StrEnum):
    """Who confirmed a flagged request's tool: the free ranker (margin at or above the floor),
    the teacher (below it), or the agent's own successful use of a registered tool (an option)."""

    FREE = "free"
    TEACHER = "teacher"
    TRUSTED = "trusted"


def tier_for(
    route: Route,
    margin_floor: float,
    used_tool: str,
    success: bool | None,
    registered: Collection[str],
    fallback_tools: Collection[str],
    trust_successful_uses: bool,
) -> LabelTier:
    """The tier that labels a flagged request. With `trust_successful_uses`, a successful use
    of a registered tool that is not a fallback is its own label; otherwise the ranker labels
    when it could rank and its margin is at least the floor, and the teacher below."""
    if trust_successful_uses and success and used_tool in registered and used_tool not in fallback_tools:
        return LabelTier.TRUSTED
    if route.ok and route.margin >= margin_floor:
        return LabelTier.FREE
    return LabelTier.TEACHER


DECLINE = "none"


def teacher_messages(request: str, candidates: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The chat prompting a generator to route `request` to one of `candidates` ((name,
    description) pairs), answering with the name alone, or `none`."""
    tools = "\n".join(f"- {name}: {description}" for name, description in candidates)
    return [
        {
            "role": "system",
            "content": (
                "You route a user's request to the one tool that serves it. Answer with the tool's "
                f"name exactly as listed and nothing else, or {DECLINE} if no tool fits.\nTools:\n{tools}"
            ),
        },
        {"role": "user", "content": request},
    ]


_WRAPPING = re.compile(r"^[\s`'\"*]+|[\s`'\".*]+$")


def parse_teacher(text: str, candidates: Collection[str]) -> str | None:
    """The candidate the teacher named, or None for a decline or anything else: its answer,
    stripped of quotes, backticks and a final period, must be one candidate's exact name (the
    decline word is a decline even if a tool bears that name)."""
    answer = _WRAPPING.sub("", text)
    return answer if answer in candidates and answer != DECLINE else None
