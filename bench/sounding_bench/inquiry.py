"""`sounding eval inquiry`: play inquiry benchmarks through the gRPC API, the harness being both
client and oracle.

- bulls-and-cows: every secret (or those in a file) with the chosen policy, and every other policy
  in the same invocation; turns per game (guesses, the winning one included, listed per secret),
  solved share, the turn histogram and the per-move server latency (from sending an answer to
  receiving the next question, as the client sees it).
- hypotheses: a generated 20-Questions benchmark (N hypotheses × M yes/no attribute questions,
  each attribute held with its own base rate drawn from U(0.02, 0.5), as in a game of 20
  Questions where most attributes are rare); noise-free and noisy answers (each answer flipped
  with probability ε, which the session is told). Questions needed to reach the target
  confidence with `eig` against asking in the given (fixed) order, and against that order
  skipping questions whose answer is already determined, on the same secrets.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

from sounding_bench.harness import serving
from sounding_bench.metrics import percentiles

HYPOTHESES_POLICIES = ("eig", "fixed_order", "fixed_order_informative")


@dataclass(frozen=True)
class BullsAndCowsRun:
    """What a bulls-and-cows run plays: `policy` on every secret, each other policy on every one
    too or on an evenly spread `comparison_games` of them; on the stack at `address` (default:
    one started on the settings)."""

    secrets: tuple[str, ...]
    policy: str
    comparison_games: int | None = None
    address: str | None = None


@dataclass(frozen=True)
class HypothesesRun:
    """What a hypotheses run plays: `games` secrets of `hypotheses` hypotheses and `questions`
    questions per policy and answer noise level, to `target_confidence`, every random choice
    seeded by `seed`; on the stack at `address` (default: one started on the settings)."""

    hypotheses: int = 1000
    questions: int = 200
    games: int = 100
    noise_levels: tuple[float, ...] = (0.0, 0.1)
    target_confidence: float = 0.95
    seed: int = 0
    address: str | None = None


def run(spec: BullsAndCowsRun | HypothesesRun, settings: Settings, console: Console) -> dict:
    """The result JSON of the game `spec` describes, played on the stack at `spec.address`, or
    one started on `settings`."""
    from sounding_client import Client

    with serving(settings, spec.address, console) as address, Client(address, timeout=600) as client:
        if isinstance(spec, BullsAndCowsRun):
            return bulls_and_cows(client, spec, console)
        return hypotheses(client, spec, console)


def load_secrets(chosen: str) -> list[str]:
    """Every secret ("all"), or those of a JSON list in the file at `chosen`, each checked."""
    if chosen == "all":
        return list(bc.feedback_table().strings)
    values = json.loads(Path(chosen).read_text())
    for value in values:
        bc.parse_guess(value)
    return values


def _oracle(secret: str, guess: str) -> str:
    table = bc.feedback_table()
    bulls, cows = divmod(int(table.table[table.index[guess], table.index[secret]]), bc.CODES_PER_FEEDBACK)
    return bc.feedback_sentence(bulls, cows)


def play_bulls_and_cows(client, secret: str, policy: str, seed: int) -> dict:
    from sounding_client import Ask, InquiryAnswer, InquiryPolicy

    inquiry = client.inquire("bulls_and_cows", InquiryPolicy(question_selection=policy, seed=seed))
    move_ms: list[float] = []
    sent = time.perf_counter()
    turns, result = 0, None
    for event in inquiry:
        if isinstance(event, Ask):
            move_ms.append((time.perf_counter() - sent) * 1000)
            turns = event.turn
            sent = time.perf_counter()
            inquiry.answer(_oracle(secret, event.question))
        elif isinstance(event, InquiryAnswer):
            result = event
    solved = result is not None and result.answer == secret and result.stopping_reason == "confidence_reached"
    return {"turns": turns, "solved": solved, "move_ms": move_ms}


def bulls_and_cows(client, spec: BullsAndCowsRun, console: Console) -> dict:
    """`spec.policy` plays every secret; every other policy plays every secret too, or an evenly
    spread sample of `spec.comparison_games` of them."""
    secrets = list(spec.secrets)
    policies = [spec.policy, *[p for p in bc.POLICIES if p != spec.policy]]
    results = {}
    for name in policies:
        chosen = secrets
        if name != spec.policy and spec.comparison_games and spec.comparison_games < len(secrets):
            spread = np.linspace(0, len(secrets) - 1, spec.comparison_games).astype(int)
            chosen = [secrets[i] for i in spread]
        games = []
        with progress_bar(console) as progress:
            task = progress.add_task(f"bulls-and-cows {name}", total=len(chosen))
            for index, secret in enumerate(chosen):
                games.append(play_bulls_and_cows(client, secret, name, seed=index))
                progress.advance(task)
        turns = [g["turns"] for g in games]
        solved = [g for g in games if g["solved"]]
        moves = [ms for g in games for ms in g["move_ms"]]
        results[name] = {
            "games": len(games),
            "solved": len(solved),
            "solved_within_25": sum(g["solved"] and g["turns"] <= 25 for g in games),
            "mean_turns": round(float(np.mean(turns)), 4),
            "max_turns": int(max(turns)),
            "turn_histogram": {str(k): v for k, v in sorted(Counter(turns).items())},
            **{f"move_{k}": v for k, v in percentiles(moves).items()},
            "turns_by_secret": dict(zip(chosen, turns, strict=True)),
        }
    return {"task": "bulls-and-cows", "secrets": len(secrets), "policies": results}


def hypotheses_benchmark(n_hypotheses: int, n_questions: int, seed: int) -> np.ndarray:
    """attributes[h, q]: whether hypothesis h has attribute q (the answer to question q). Every
    attribute splits the hypotheses: one that none of them drew (or all did) is given to (taken
    from) one hypothesis at random, so that both answers are among the question's outcomes (a
    noisy answer may be either, and the service accepts only a question's outcomes). Among many
    hypotheses this never happens: the default benchmark is the same as without it."""
    rng = np.random.default_rng(seed)
    base_rates = rng.uniform(0.02, 0.5, size=n_questions)
    attributes = rng.random((n_hypotheses, n_questions)) < base_rates
    if n_hypotheses > 1:
        for q in np.flatnonzero(attributes.all(axis=0) | ~attributes.any(axis=0)):
            attributes[rng.integers(n_hypotheses), q] ^= True
    return attributes


def play_hypotheses(client, attributes: np.ndarray, secret: int, policy, noise: float, rng) -> dict:
    from sounding_client import Ask, Hypothesis, InquiryAnswer, Question

    n_hypotheses, n_questions = attributes.shape
    hypotheses = [Hypothesis(f"h{h}", prior=1.0) for h in range(n_hypotheses)]
    questions = [
        Question(
            f"q{q}",
            f"Does it have attribute {q}?",
            {f"h{h}": "yes" if attributes[h, q] else "no" for h in range(n_hypotheses)},
        )
        for q in range(n_questions)
    ]
    inquiry = client.inquire("hypotheses", policy, hypotheses, questions, {"noise": str(noise)})
    asked, result = 0, None
    for event in inquiry:
        if isinstance(event, Ask):
            asked = event.turn
            truth = bool(attributes[secret, int(event.question_id[1:])])
            inquiry.answer("yes" if truth != (rng.random() < noise) else "no")
        elif isinstance(event, InquiryAnswer):
            result = event
    if result is None:
        raise RuntimeError("the inquiry ended without an answer")
    return {
        "questions": asked,
        "reached": result.stopping_reason == "confidence_reached",
        "correct": result.answer == f"h{secret}",
    }


def hypotheses(client, spec: HypothesesRun, console: Console) -> dict:
    """Every policy plays the same secrets at every noise level, to the same target confidence,
    with the diminishing-returns rule off so that a game ends only at the target or when the
    questions run out."""
    from sounding_client import InquiryPolicy

    attributes = hypotheses_benchmark(spec.hypotheses, spec.questions, spec.seed)
    secrets = np.random.default_rng(spec.seed + 1).choice(spec.hypotheses, size=spec.games, replace=False)
    settings = {}
    for noise in spec.noise_levels:
        per_policy = {}
        for name in HYPOTHESES_POLICIES:
            policy = InquiryPolicy(
                question_selection=name,
                max_turns=spec.questions,
                target_confidence=spec.target_confidence,
                min_information_gain=0.0,
            )
            rng = np.random.default_rng(spec.seed + 2)
            played = []
            with progress_bar(console) as progress:
                task = progress.add_task(f"hypotheses {name} ε={noise}", total=spec.games)
                for secret in secrets:
                    played.append(play_hypotheses(client, attributes, int(secret), policy, noise, rng))
                    progress.advance(task)
            per_policy[name] = played
        both = [i for i in range(spec.games) if all(per_policy[n][i]["reached"] for n in HYPOTHESES_POLICIES)]
        summary = {}
        for name, played in per_policy.items():
            asked = [g["questions"] for g in played]
            summary[name] = {
                "reached_target": sum(g["reached"] for g in played),
                "correct": sum(g["correct"] for g in played),
                "mean_questions": round(float(np.mean(asked)), 3),
                "median_questions": float(np.median(asked)),
                "max_questions": int(max(asked)),
                "mean_questions_where_all_reached": round(
                    float(np.mean([played[i]["questions"] for i in both])), 3
                ),
            }
        eig = summary["eig"]["mean_questions_where_all_reached"]
        settings[f"noise={noise}"] = {
            "noise": noise,
            "games_all_reached": len(both),
            "policies": summary,
            "eig_question_reduction": {
                baseline: round(1 - eig / summary[baseline]["mean_questions_where_all_reached"], 4)
                for baseline in HYPOTHESES_POLICIES[1:]
            },
        }
    return {
        "task": "hypotheses",
        "hypotheses": spec.hypotheses,
        "questions": spec.questions,
        "games": spec.games,
        "target_confidence": spec.target_confidence,
        "base_rates": "U(0.02, 0.5) per attribute",
        "seed": spec.seed,
        "settings": settings,
    }
