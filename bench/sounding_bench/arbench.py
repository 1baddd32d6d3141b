"""`sounding eval arbench`: AR-Bench episodes (detective cases, situation puzzles, guessing
numbers) played through Inquire's `llm` domain, with the environment's side played here on the
same generator backend (robust-MI spec §1, §2.1, §4.1–§4.3).

The NPC: in `dc` each suspect role-plays from their hidden profile (their `task` instruction,
story, testimony and timeline); in `sp` a referee who knows the hidden story answers Yes, No or
Unknown; in `gn` the feedback is computed from the rule, in AR-Bench's wording. NPC replies are
greedy, so the sidecar's generation cache makes repeated runs cheaper.

Scoring follows AR-Bench: dc, accuracy against `label` (an index into the shuffled
`initial_information.suspect`); sp, character-level F1 of the explanation against `bottom`;
gn, exact match of the final number.

With `--stop-rule all` (the default), each episode runs once to `--max-turns` with every rule
scored at every state (`signals=all`, `run_to_max_turns`), and each rule is judged on that same
trajectory: it answers at the first state where it would (its answer being the state's current
answer), or is forced at the last. This holds the question generator fixed across rules (spec
§1.1, "Control condition") and costs one trajectory instead of seven. A single rule name runs
the sessions with that rule actually stopping them.

Per episode and averaged: the task-functional diversity of its questions (spec §4.3 axis 5).
Per rule: accuracy (or mean F1), mean questions, forced share, ECE over visited states (the
score mapped to confidence by an isotonic fit on the other half of the episodes, cross-fitted by
episode parity), the Spearman correlation between score and error over visited states, and the
error rate among answered states. Per regime: the homogeneity diagnostics averaged over states
and the redundancy rate of the questions (cosine ≥ 0.9 to an earlier question). Every session's
ground truth is sent through Observe as soon as it ends, so `Calibrate(STOP_THRESHOLD)` can be
fitted from the run's states afterwards. A journal keeps the played episodes, so a run that stops
(an episode of a detective case costs minutes on two cores) resumes where it was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from rich.console import Console
from sounding.core import homogeneity
from sounding.core.calibration import IsotonicMap, expected_calibration_error
from sounding.core.stop_rules import HYPOTHESIS_ENTROPY, STOP_RULES
from sounding.inquiry.llm import outcomes, tasks
from sounding.inquiry.llm.planning import PLANNING_METHODS
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

from sounding_bench.arbench_episodes import load_episodes, npc_reply
from sounding_bench.harness import serving
from sounding_bench.journal import append_journal, read_journal

# A stack of the harness's own keeps greedy NPC replies in its generation cache.
NPC_CACHE = {"SOUNDING_MODELS__GENERATOR__CACHE_MAX_ENTRIES": "1000000"}
REDUNDANT_SIMILARITY = 0.9


def play(client, models, task: str, episode: dict, policy, parameters: dict, loop) -> dict:
    """One episode through Inquire; the trajectory of states (signals, answer, homogeneity)."""
    from sounding_client import Ask, Belief, Hypothesis, InquiryAnswer

    inquiry = client.inquire(
        "llm",
        policy,
        hypotheses=[Hypothesis(f"s{i}", name) for i, name in enumerate(episode["choices"])],
        domain_parameters=parameters,
        context=episode["context"],
        timeout=3600,
    )
    states, questions, final = [], [], None
    started = time.perf_counter()
    for event in inquiry:
        if isinstance(event, Belief):
            states.append(
                {
                    "turn": event.turn,
                    "answer": event.current_answer,
                    # [score, threshold, answers], and the rule's own answer where it has one
                    "signals": {
                        s.rule: [s.score, s.threshold, s.answers, *([s.answer] if s.answer else [])]
                        for s in event.stop_signals
                    },
                    "homogeneity": vars(event.homogeneity) if event.homogeneity else {},
                    "bucket": event.homogeneity_bucket,
                }
            )
        elif isinstance(event, Ask):
            reply = loop.run_until_complete(npc_reply(models, task, episode, event.question))
            questions.append([event.question, reply])
            inquiry.answer(reply)
        elif isinstance(event, InquiryAnswer):
            final = {"answer": event.answer, "stopping_reason": event.stopping_reason, "forced": event.forced}
    asked = [q for q, _ in questions]
    addressed = [tasks.addressed_suspect(q, episode["choices"]) for q in asked] if task == "dc" else []
    return {
        "id": episode["id"],
        "session_id": inquiry.session_id,
        "task_functional_diversity": homogeneity.task_functional_diversity(
            task, asked, addressed, len(episode["choices"])
        ),
        "truth": episode["truth"] if task != "sp" else episode["truth"][:200],
        "states": states,
        "questions": questions,
        "final": final,
        "seconds": round(time.perf_counter() - started, 1),
        "_truth": episode["truth"],
    }


def means(records: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Each field's mean over the records that carry a value for it (None where none does: a
    diagnostic a state did not compute)."""
    fields = dict.fromkeys(key for record in records for key in record)
    values = {key: [v for r in records if (v := r.get(key)) is not None] for key in fields}
    return {key: round(float(np.mean(v)), 4) if v else None for key, v in values.items()}


def _score(task: str, answer: str, truth: str, choices: Sequence[str]) -> float:
    """AR-Bench's score of an answer: 1/0 for dc and gn, character-level F1 for sp."""
    if task == "sp":
        return tasks.char_f1(answer, truth)
    return float(outcomes.is_correct(task, answer, truth, choices))


def _answers(rule: str, state: dict) -> bool:
    return bool(state["signals"].get(rule, (0.0, 0.0, False))[2])


def rule_answer(rule: str, state: dict) -> str:
    """What the rule answers with at a state: its own answer (hypothesis_entropy's MAP), else
    the state's."""
    signal = state["signals"].get(rule, ())
    return signal[3] if len(signal) > 3 else state["answer"]


def _rule_stop(rule: str, states: list[dict]) -> int:
    """The state a rule answers at on a trajectory (the last one if it never does)."""
    return next((i for i, state in enumerate(states) if _answers(rule, state)), len(states) - 1)


def rule_outcome(task: str, episode: dict, choices: Sequence[str], rule: str) -> dict:
    """Where a rule answers on a played episode (states non-empty): its AR-Bench score there,
    the questions asked before, and whether it was forced at the last state."""
    states = episode["states"]
    stop = _rule_stop(rule, states)
    state = states[stop]
    return {
        "id": episode["id"],
        "score": _score(task, rule_answer(rule, state), episode["_truth"], choices),
        "questions": stop,
        "forced": stop == len(states) - 1 and not _answers(rule, state),
    }


def per_episode(task: str, played: list[dict], episodes: list[dict], rules: Sequence[str]) -> dict:
    """Per rule, `rule_outcome` of every played episode with states (what paired comparisons
    across runs read: `sounding_bench.arbench_compare`)."""
    choices = {e["id"]: e["choices"] for e in episodes}
    return {
        rule: [rule_outcome(task, p, choices[p["id"]], rule) for p in played if p["states"]] for rule in rules
    }


def judge(
    task: str, played: list[dict], episodes: list[dict], rules: Sequence[str], found: dict | None = None
) -> dict:
    """Per rule: its score, questions and forced share over the episodes, and over the visited
    states ECE and the score-error correlation. `found`: `per_episode`'s outcomes, if at hand."""
    from scipy.stats import spearmanr

    choices = {e["id"]: e["choices"] for e in episodes}
    found = found or per_episode(task, played, episodes, rules)
    result = {}
    for rule in rules:
        scores = [o["score"] for o in found[rule]]
        stops = [(o["questions"], o["forced"]) for o in found[rule]]
        visited = []
        for parity, episode in enumerate(played):
            if not episode["states"]:
                continue
            for s in episode["states"]:
                if rule in s["signals"]:
                    erred = not outcomes.is_correct(
                        task, rule_answer(rule, s), episode["_truth"], choices[episode["id"]]
                    )
                    visited.append((parity % 2, s["signals"][rule][0], erred))
        entry = {
            "episodes": len(scores),
            ("mean_f1" if task == "sp" else "accuracy"): round(float(np.mean(scores)), 4) if scores else None,
            "mean_questions": round(float(np.mean([s for s, _ in stops])), 3) if stops else None,
            "forced_rate": round(float(np.mean([f for _, f in stops])), 3) if stops else None,
            "visited_states": len(visited),
        }
        if len(visited) >= 4:
            fold, score, erred = (np.asarray(v) for v in zip(*visited, strict=True))
            confidence = np.zeros(len(score))
            for held_out in (0, 1):
                train = fold != held_out
                if train.sum() and (~train).sum():
                    fitted = IsotonicMap.fit(score[train], 1.0 - erred[train].astype(float), increasing=False)
                    confidence[~train] = fitted(score[~train])
            entry["ece_visited_states"] = round(float(expected_calibration_error(confidence, 1.0 - erred)), 4)
            correlation = float("nan")
            if len(set(score)) > 1 and len(set(erred)) > 1:
                correlation = spearmanr(score, erred.astype(float)).statistic  # pyright: ignore[reportAttributeAccessIssue]
            entry["spearman_score_error"] = None if np.isnan(correlation) else round(float(correlation), 4)
            entry["state_error_rate"] = round(float(erred.mean()), 4)
        result[rule] = entry
    return result


def by_bucket(task: str, played: list[dict], episodes: list[dict], rules: Sequence[str]) -> dict:
    """§4.3 axis 6: per homogeneity bucket, its states' count and the means of every diagnostic
    they carry (axes 1-4: collapse, repetition, prompt sensitivity, simulator divergence); per
    bucket and rule, the answers the rule gave at the bucket's states (forced ones left out:
    their count and mean score, accuracy or F1) and the Spearman correlation between its score
    and error over the bucket's visited states."""
    from scipy.stats import spearmanr

    choices = {e["id"]: e["choices"] for e in episodes}
    result: dict = {}
    for bucket in homogeneity.BUCKETS:
        inside = [s for e in played for s in e["states"] if s.get("bucket") == bucket]
        result[bucket] = {
            "states": len(inside),
            "homogeneity_mean": means([s["homogeneity"] for s in inside]),
        }
        for rule in rules:
            answered, visited = [], []
            for episode in played:
                truth, options = episode["_truth"], choices[episode["id"]]
                if episode["states"]:
                    stop = episode["states"][_rule_stop(rule, episode["states"])]
                    if stop.get("bucket") == bucket and _answers(rule, stop):
                        answered.append(_score(task, rule_answer(rule, stop), truth, options))
                for s in episode["states"]:
                    if s.get("bucket") == bucket and rule in s["signals"]:
                        visited.append(
                            (
                                s["signals"][rule][0],
                                not outcomes.is_correct(task, rule_answer(rule, s), truth, options),
                            )
                        )
            correlation = None
            if len({v[0] for v in visited}) > 1 and len({v[1] for v in visited}) > 1:
                scores, erred = zip(*visited, strict=True)
                correlation = round(float(spearmanr(scores, np.asarray(erred, dtype=float)).statistic), 4)  # pyright: ignore[reportAttributeAccessIssue]
            result[bucket][rule] = {
                "answered": len(answered),
                "mean_score": round(float(np.mean(answered)), 4) if answered else None,
                "spearman_score_error": correlation,
            }
    return result


async def _redundancy(models, played: list[dict]) -> float | None:
    redundant, total = 0, 0
    for episode in played:
        asked = [q for q, _ in episode["questions"]]
        if len(asked) < 2:
            continue
        vectors = await models.embed(asked, timeout=600)
        for i in range(1, len(asked)):
            total += 1
            redundant += bool((vectors[:i] @ vectors[i]).max() >= REDUNDANT_SIMILARITY)
    return round(redundant / total, 4) if total else None


@dataclass(frozen=True)
class ArbenchRun:
    """What a run plays: the AR-Bench `task` and its file at `data` (the first `limit` episodes),
    the stop rule (or "all"), the regime, the question selection and §5's ablations, the turns
    and samples per state, the answer's and questions' token budgets (0: the task's), the seed,
    the journal, and the stack at `address` (default: one started on the settings)."""

    task: str
    data: Path
    stop_rule: str
    regime: str
    limit: int | None
    max_turns: int
    samples: int
    question_selection: str = "direct_prompting"
    ablate: tuple[str, ...] = ()
    answer_tokens: int = 0
    question_tokens: int = 0
    seed: int = 0
    journal: Path | None = None
    address: str | None = None


def run(spec: ArbenchRun, settings: Settings, console: Console) -> dict:
    """Plays the episodes on the stack at `spec.address`, or one started on `settings` (greedy NPC
    replies cached), and judges them. Each played episode goes through Observe at once and, with
    a journal, is appended to it; a later run with the same settings and journal plays only the
    episodes it lacks (so a long run can stop and resume, and `limit` can grow)."""
    from sounding.models.client import ModelsClient
    from sounding_client import Client, InquiryOutcome, InquiryPolicy

    episodes = load_episodes(spec.task, spec.data, spec.limit)
    everything = spec.stop_rule == "all"
    planned = [HYPOTHESIS_ENTROPY] if spec.question_selection in PLANNING_METHODS else []
    rules = [*STOP_RULES, *planned] if everything else [spec.stop_rule]
    parameters = {
        "task": spec.task,
        "regime": spec.regime,
        "samples": str(spec.samples),
        "signals": "all" if everything else "rule",
        "run_to_max_turns": "true" if everything else "false",
        "answer_tokens": str(spec.answer_tokens),
        "question_tokens": str(spec.question_tokens),
        "ablate": ",".join(spec.ablate),
    }
    chosen = {
        "max_turns": spec.max_turns,
        "samples": spec.samples,
        "answer_tokens": spec.answer_tokens,
        "question_tokens": spec.question_tokens,
        "seed": spec.seed,
        "question_selection": spec.question_selection,
        "ablate": sorted(spec.ablate),
    }
    header = {
        "task": spec.task,
        "data": str(spec.data),
        "stop_rule": spec.stop_rule,
        "regime": spec.regime,
        **chosen,
    }
    done = read_journal(spec.journal, header) if spec.journal else {}
    policy = InquiryPolicy(
        question_selection=spec.question_selection,
        stop_rule="robust_mi_risk" if everything else spec.stop_rule,
        max_turns=spec.max_turns,
    )
    loop = asyncio.new_event_loop()

    async def connect() -> ModelsClient:  # the channel belongs to the loop it is made on
        return ModelsClient.of(settings.models)

    models = loop.run_until_complete(connect())
    played = []
    try:
        with (
            serving(settings, spec.address, console, NPC_CACHE) as address,
            Client(address, timeout=3600) as client,
            progress_bar(console) as progress,
        ):
            bar = progress.add_task(f"{spec.task} {spec.regime} episodes", total=len(episodes))
            for index, episode in enumerate(episodes):
                if episode["id"] in done:
                    played.append(done[episode["id"]])
                else:
                    seeded = replace(policy, seed=spec.seed * 100_003 + index)
                    record = play(client, models, spec.task, episode, seeded, parameters, loop)
                    ack = client.observe([InquiryOutcome(record["session_id"], record["_truth"])])
                    record["outcome_recorded"] = ack.recorded == 1
                    if spec.journal:
                        append_journal(spec.journal, header, record)
                    played.append(record)
                progress.advance(bar)
            redundancy = loop.run_until_complete(_redundancy(models, played))
    finally:
        loop.run_until_complete(models.close())
        loop.close()
    outcomes_per_episode = per_episode(spec.task, played, episodes, rules)
    states = [s for p in played for s in p["states"]]
    buckets = {b: sum(s["bucket"] == b for s in states) for b in ("high", "medium", "low")}
    return {
        "task": spec.task,
        "regime": spec.regime,
        "data": str(spec.data),
        "episodes": len(played),
        "stop_rule": spec.stop_rule,
        "mode": "one trajectory per episode, every rule judged on it"
        if everything
        else "sessions stop by the rule",
        "settings": chosen,
        "rules": judge(spec.task, played, episodes, rules, outcomes_per_episode),
        "per_episode": outcomes_per_episode,
        "by_bucket": by_bucket(spec.task, played, episodes, rules),
        "homogeneity_mean": means([s["homogeneity"] for s in states]),
        "homogeneity_buckets": buckets,
        "question_redundancy_rate": redundancy,
        "task_functional_diversity": means([p["task_functional_diversity"] for p in played]),
        "outcomes_recorded_through_observe": sum(p["outcome_recorded"] for p in played),
        "mean_episode_seconds": round(float(np.mean([p["seconds"] for p in played])), 1) if played else None,
        "trajectories": [{k: v for k, v in p.items() if k != "_truth"} for p in played],
    }
