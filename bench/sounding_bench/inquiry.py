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
from pathlib import Path

import numpy as np
from rich.console import Console
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.runtime.progress import progress_bar

from sounding_bench.metrics import percentiles

HYPOTHESES_POLICIES = ("eig", "fixed_order", "fixed_order_informative")


def load_secrets(spec: str) -> list[str]:
    if spec == "all":
        return list(bc.feedback_table().strings)
    values = json.loads(Path(spec).read_text())
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


def bulls_and_cows(
    client, secrets: list[str], policy: str, console: Console, comparison_games: int | None = None
) -> dict:
    """`policy` plays every secret; every other policy plays every secret too, or an evenly
    spread sample of `comparison_games` of them."""
    policies = [policy, *[p for p in bc.POLICIES if p != policy]]
    results = {}
    for name in policies:
        chosen = secrets
        if name != policy and comparison_games and comparison_games < len(secrets):
            chosen = [secrets[i] for i in np.linspace(0, len(secrets) - 1, comparison_games).astype(int)]
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
    """attributes[h, q]: whether hypothesis h has attribute q (the answer to question q)."""
    rng = np.random.default_rng(seed)
    base_rates = rng.uniform(0.02, 0.5, size=n_questions)
    return rng.random((n_hypotheses, n_questions)) < base_rates


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


def hypotheses(
    client,
    console: Console,
    n_hypotheses: int = 1000,
    n_questions: int = 200,
    games: int = 100,
    noise_levels: tuple[float, ...] = (0.0, 0.1),
    target_confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """Every policy plays the same secrets at every noise level, to the same target confidence,
    with the diminishing-returns rule off so that a game ends only at the target or when the
    questions run out."""
    from sounding_client import InquiryPolicy

    attributes = hypotheses_benchmark(n_hypotheses, n_questions, seed)
    secrets = np.random.default_rng(seed + 1).choice(n_hypotheses, size=games, replace=False)
    settings = {}
    for noise in noise_levels:
        per_policy = {}
        for name in HYPOTHESES_POLICIES:
            policy = InquiryPolicy(
                question_selection=name,
                max_turns=n_questions,
                target_confidence=target_confidence,
                min_information_gain=0.0,
            )
            rng = np.random.default_rng(seed + 2)
            played = []
            with progress_bar(console) as progress:
                task = progress.add_task(f"hypotheses {name} ε={noise}", total=games)
                for secret in secrets:
                    played.append(play_hypotheses(client, attributes, int(secret), policy, noise, rng))
                    progress.advance(task)
            per_policy[name] = played
        both = [i for i in range(games) if all(per_policy[n][i]["reached"] for n in HYPOTHESES_POLICIES)]
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
        "hypotheses": n_hypotheses,
        "questions": n_questions,
        "games": games,
        "target_confidence": target_confidence,
        "base_rates": "U(0.02, 0.5) per attribute",
        "seed": seed,
        "settings": settings,
    }
