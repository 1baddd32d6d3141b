"""Which scored candidate query a corpus session runs next, by its policy (`corpus` domain):
the baselines run theirs in the order generated; `eig` ranks by cost-adjusted expected gain plus
the exploration bonus and answers once the target confidence is out of reach or no candidate is
worth its cost; `eig_softmax` draws the first from that ranking."""

from __future__ import annotations

import random

import numpy as np

from sounding.inquiry.protocol import ScoredQuestion

# A candidate whose expected gain is below this (bits) is never viable for `eig`.
MIN_VIABLE_GAIN = 1e-4
BASELINES = ("generated_order", "keywords")


def rank(
    candidates: list[dict],
    selection: str,
    cost_sensitivity: float,
    temperature: float,
    rng: random.Random,
    target_in_reach: bool,
) -> list[dict] | str:
    """The candidates best first, or, when `eig` finds none worth running, the stopping reason:
    `target_out_of_reach` (`target_in_reach` false) or `no_viable_queries` (none is `viable`)."""
    if selection in BASELINES:
        return candidates
    if not target_in_reach:
        return "target_out_of_reach"
    if not any(viable(c, cost_sensitivity) for c in candidates):
        return "no_viable_queries"
    ranked = sorted(candidates, key=lambda c: -(c["adjusted"] + c["bonus"]))
    if selection == "eig_softmax":
        ranked = sampled_first(ranked, temperature, rng)
    return ranked


def target_in_reach(scored: dict, min_target_chance: float) -> bool:
    """Whether a turn's target chance is at least `min_target_chance`, or does not cover every
    query to come (the session has more left than the look-ahead reaches): then it cannot tell."""
    return not scored.get("chance_covers", False) or scored["target_chance"] >= min_target_chance


def viable(candidate: dict, cost_sensitivity: float) -> bool:
    """Worth running: its value of information, expected gain − λ·cost, is positive (spec
    §9.3), and its gain is not nil."""
    gain = candidate["expected_gain"]
    return gain >= MIN_VIABLE_GAIN and gain > cost_sensitivity * candidate["cost"]


def scored(candidate: dict) -> ScoredQuestion:
    return ScoredQuestion(
        candidate["id"],
        candidate["query"],
        candidate["expected_gain"],
        candidate["adjusted"],
        candidate["cost"],
        candidate["bonus"],
    )


def sampled_first(ranked: list[dict], temperature: float, rng: random.Random) -> list[dict]:
    """The ranking with one candidate, drawn ∝ exp(score / temperature), moved to the front."""
    scores = np.array([c["adjusted"] + c["bonus"] for c in ranked])
    weights = np.exp((scores - scores.max()) / temperature)
    pick = rng.choices(range(len(ranked)), weights=weights.tolist())[0]
    return [ranked[pick], *ranked[:pick], *ranked[pick + 1 :]]
