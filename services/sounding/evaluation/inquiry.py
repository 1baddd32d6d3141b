"""`sounding eval inquiry`: play inquiry benchmarks through the gRPC API, the harness being both
client and oracle.

- bulls-and-cows: every secret (or those in a file) with the chosen policy, and the `naive` and
  `random_consistent` policies in the same invocation; turns per game (guesses, the winning one
  included), solved share, the turn histogram and the per-move server latency (from sending an
  answer to receiving the next question, as the client sees it).
- hypotheses: a generated 20-Questions benchmark (N hypotheses × M binary attribute questions,
  noise-free and noisy answers); questions needed to reach the target confidence with `eig`
  against asking in the given (fixed) order.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
from rich.console import Console

from sounding.evaluation.metrics import percentiles
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.progress import progress_bar

COMPARISON_POLICIES = ("naive", "random_consistent")


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
    """`policy` plays every secret; the comparison policies play every secret too, or an evenly
    spread sample of `comparison_games` of them."""
    policies = [policy, *[p for p in COMPARISON_POLICIES if p != policy]]
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
        }
    return {"task": "bulls-and-cows", "secrets": len(secrets), "policies": results}
