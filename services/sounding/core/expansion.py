"""The expansion loop's pure parts (retrieval-uncertainty spec, "Iterative Retrieval Loop",
"Expansion Strategy Selection", "Query Expansion Strategies"): semantic-gap analysis, gap-driven
strategy choice, identifier variants for `code_pattern`, the loop's stopping rule and the miss
rate after a merge.

Gaps (each names the strategy that targets it; severity in [0, 1]):
- `identifiers` → code_pattern: the query names code identifiers (camelCase, snake_case, dotted
  or called names), which the corpus may spell differently. Severity 0.8.
- `vocabulary_mismatch` → synonym: query phrases the corpus vocabulary (its graph entities)
  does not contain. Severity: the share of the query's phrases missing.
- `specific_phrasing` → hypernym: multi-word phrases, which a corpus may only hold in a shorter
  form. Severity: 0.6 × the share of multi-word phrases.
- `broad_terms` → hyponym: one-word phrases the corpus knows, which it may only discuss in more
  specific terms. Severity: 0.5 × the share of one-word phrases.
- `arm_disagreement` → related_concept: the arms' top results disagree (the disagreement signal),
  so the concept may be named in ways the query does not use. Severity: the disagreement.
- `crowded_borderline` → negative_sampling: many results sit just below the relevance band (the
  near-threshold signal), so a co-occurring concept may be crowding out relevant ones. Severity:
  near_threshold / 0.3 × 0.5.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

Strategy = Literal[
    "synonym", "hypernym", "hyponym", "related_concept", "code_pattern", "negative_sampling", "reformulation"
]
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
# Reformulation needs a generation per step (seconds on the bundled model); the others are
# lookups in the corpus graph and vocabulary, so they are the default.
DEFAULT_STRATEGIES = STRATEGIES[:-1]

MISS_RATE_AFTER_FORMULA = "miss_rate_before * (1 - added_share)"


@dataclass(frozen=True)
class Gap:
    kind: str
    description: str
    severity: float
    mitigation: str

    @property
    def level(self) -> str:
        return "low" if self.severity < 1 / 3 else "high" if self.severity >= 2 / 3 else "medium"


_CAMEL = re.compile(r"^[a-z]+(?:[A-Z][a-z0-9]*)+$|^(?:[A-Z][a-z0-9]+){2,}$")
_SNAKE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(?:\(\))?")


def identifiers(query: str) -> list[str]:
    """Code identifiers in the query: camelCase, PascalCase, snake_case, dotted or called names."""
    found: list[str] = []
    for token in _WORD.findall(query):
        called = token.endswith("()")
        name = token.removesuffix("()").strip(".")
        if name and (called or _CAMEL.match(name) or _SNAKE.match(name) or _DOTTED.match(name)):
            if name not in found:
                found.append(name)
    return found


def split_identifier(name: str) -> list[str]:
    """Its words, lower-cased: `parseHttpRequest`, `parse_http_request` → parse, http, request."""
    last = name.split(".")[-1]
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", last.replace("_", " "))
    return [w.lower() for w in words]


def identifier_variants(name: str) -> list[str]:
    """How else a codebase may spell or introduce the identifier: snake_case, camelCase,
    PascalCase, the words apart, and its definition and import forms."""
    words = split_identifier(name)
    if not words:
        return []
    snake = "_".join(words)
    camel = words[0] + "".join(w.capitalize() for w in words[1:])
    pascal = "".join(w.capitalize() for w in words)
    last = name.split(".")[-1]
    variants = [
        snake,
        camel,
        pascal,
        " ".join(words),
        f"def {snake}",
        f"function {camel}",
        f"class {pascal}",
        f"import {name.split('.')[0]}",
    ]
    out: list[str] = []
    for variant in variants:
        if variant != last and variant not in out:
            out.append(variant)
    return out


def code_pattern_queries(query: str, limit: int) -> list[str]:
    """The query with each identifier replaced by its spelling variants, round-robin over the
    identifiers, at most `limit`."""
    per_name = [[query.replace(name, v) for v in identifier_variants(name)] for name in identifiers(query)]
    out: list[str] = []
    for round_ in range(max((len(v) for v in per_name), default=0)):
        for variants in per_name:
            if round_ < len(variants) and variants[round_] not in out and variants[round_] != query:
                out.append(variants[round_])
    return out[:limit]


def detect_gaps(
    query: str,
    phrases: Sequence[str],
    vocabulary: frozenset[str] | set[str],
    disagreement: float,
    near_threshold: float,
) -> list[Gap]:
    """The query's semantic gaps, most severe first (see the module docstring)."""
    gaps: list[Gap] = []
    names = identifiers(query)
    if names:
        gaps.append(Gap("identifiers", f"the query names identifiers {names}", 0.8, "code_pattern"))
    if phrases:
        missing = [p for p in phrases if p not in vocabulary]
        if missing and vocabulary:
            gaps.append(
                Gap(
                    "vocabulary_mismatch",
                    f"the corpus vocabulary lacks {missing}",
                    len(missing) / len(phrases),
                    "synonym",
                )
            )
        long = [p for p in phrases if " " in p]
        if long:
            gaps.append(
                Gap(
                    "specific_phrasing",
                    f"multi-word phrases {long} may appear in a shorter form",
                    0.6 * len(long) / len(phrases),
                    "hypernym",
                )
            )
        short = [p for p in phrases if " " not in p and p in vocabulary]
        if short:
            gaps.append(
                Gap(
                    "broad_terms",
                    f"one-word terms {short} may be discussed in more specific terms",
                    0.5 * len(short) / len(phrases),
                    "hyponym",
                )
            )
    if disagreement > 0:
        gaps.append(
            Gap(
                "arm_disagreement",
                f"the strategies' top results disagree ({disagreement:.2f})",
                disagreement,
                "related_concept",
            )
        )
    if near_threshold > 0:
        gaps.append(
            Gap(
                "crowded_borderline",
                "many results sit just below the relevance band",
                min(near_threshold / 0.3, 1.0) * 0.5,
                "negative_sampling",
            )
        )
    return sorted(gaps, key=lambda g: -g.severity)


def select_strategy(
    gaps: Sequence[Gap], available: Iterable[str], used: Iterable[str]
) -> tuple[str, Gap | None] | None:
    """The strategy of the most severe gap that is available and not yet used in this retrieval;
    else reformulation (a general rewrite) if available and unused; else None."""
    usable = set(available) - set(used)
    for gap in gaps:
        if gap.mitigation in usable:
            return gap.mitigation, gap
    if "reformulation" in usable:
        return "reformulation", None
    return None


def stop_reason(
    estimated_recall: float,
    min_recall: float,
    iteration: int,
    max_iterations: int,
    queries_spent: int,
    budget: int,
) -> str | None:
    """Why the loop stops before another iteration, or None to go on (spec's loop condition)."""
    if estimated_recall >= min_recall:
        return "recall_reached"
    if iteration >= max_iterations:
        return "max_iterations"
    if queries_spent >= budget:
        return "budget_spent"
    return None


def miss_rate_after(miss_rate_before: float, added: int, top_k: int) -> float:
    """The miss rate after a merge that brought `added` new documents into the top k: the share
    of the result the expansion replaced is taken as recovered from what was missed."""
    if top_k <= 0:
        return miss_rate_before
    return miss_rate_before * (1.0 - min(added, top_k) / top_k)
