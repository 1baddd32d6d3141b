"""How `sounding eval robust-mi-simulated` judges the stop rules on the episodes it played (the
protocol: `robust_mi_simulated`): where each rule answers, its accuracy, premature rate and
questions with paired intervals, score-error correlations, per homogeneity bucket, and §6.1's
criteria."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import spearmanr
from sounding.core import homogeneity
from sounding.core.stop_rules import HYPOTHESIS_ENTROPY, STOP_RULES
from sounding.inquiry.llm import tasks
from sounding.inquiry.llm.tasks import consistent_guesses

from sounding_bench import arbench
from sounding_bench.metrics import paired_difference

RESAMPLES = 2000
MEASURES = {"accuracy": "correct", "premature": "premature", "questions": "questions"}


def rule_outcome(rule: str, episode: dict) -> dict:
    """Where a rule answers on an episode's trajectory: whether it was right, after how many
    questions, whether prematurely (more than one secret consistent) or forced at the cap."""
    states, turns, secret = episode["states"], [tuple(q) for q in episode["questions"]], episode["_truth"]
    for index, state in enumerate(states):
        if state["signals"][rule][2]:
            return {
                "correct": arbench.rule_answer(rule, state) == secret,
                "questions": index,
                "premature": len(consistent_guesses(turns[:index])) > 1,
                "forced": False,
                "bucket": state["bucket"],
            }
    solved = bool(turns) and turns[-1][0] == secret
    last = arbench.rule_answer(rule, states[-1]) if states else tasks.UNPARSED
    return {
        "correct": solved or last == secret,
        "questions": len(turns),
        "premature": not solved and len(consistent_guesses(turns)) > 1,
        "forced": not solved,
        "bucket": states[-1]["bucket"] if states else "",
    }


def rules_of(episodes: list[dict]) -> list[str]:
    """The rules the episodes were scored by: every calibrated one, and `hypothesis_entropy` in
    sessions of a planning selection (judged by its own answer, the set's most probable)."""
    planned = any(HYPOTHESIS_ENTROPY in s["signals"] for e in episodes for s in e["states"])
    return [*STOP_RULES, *([HYPOTHESIS_ENTROPY] if planned else [])]


def _bucket_states(episodes: list[dict], bucket: str) -> list[tuple[int, dict[str, tuple[float, bool]]]]:
    """(episode index, {rule: (score, whether the rule's answer there is wrong)}) of every test
    state in a homogeneity bucket."""
    rules = rules_of(episodes)
    return [
        (i, {r: (s["signals"][r][0], arbench.rule_answer(r, s) != e["_truth"]) for r in rules})
        for i, e in enumerate(episodes)
        for s in e["states"]
        if s["bucket"] == bucket
    ]


def _rule_spearman(states: Sequence[tuple[int, dict[str, tuple[float, bool]]]], rule: str) -> float | None:
    return _spearman([s[1][rule][0] for s in states], [s[1][rule][1] for s in states])


def _spearman(scores: Sequence[float], erred: Sequence[bool]) -> float | None:
    if len(set(scores)) < 2 or len(set(erred)) < 2:
        return None
    return float(spearmanr(scores, np.asarray(erred, dtype=float)).statistic)  # pyright: ignore[reportAttributeAccessIssue]


def correlations(episodes: list[dict], seed: int) -> dict:
    """Spearman(score, error) per rule over the high-bucket states, and robust MI minus set size
    with a block bootstrap over episodes (a resample whose states leave either undefined is
    skipped)."""
    states = _bucket_states(episodes, "high")
    result: dict = {"states": len(states)}
    for rule in rules_of(episodes):
        value = _rule_spearman(states, rule)
        result[rule] = None if value is None else round(value, 4)
    by_episode: dict[int, list] = {}
    for state in states:
        by_episode.setdefault(state[0], []).append(state)
    blocks = list(by_episode.values())
    rng = np.random.default_rng(seed)
    differences = []
    for _ in range(RESAMPLES if blocks else 0):
        drawn = [s for b in rng.integers(0, len(blocks), len(blocks)) for s in blocks[b]]
        robust = _rule_spearman(drawn, "robust_mi_risk")
        size = _rule_spearman(drawn, "knowno_set_size")
        if robust is not None and size is not None:
            differences.append(robust - size)
    if differences:
        low, high = np.percentile(differences, [2.5, 97.5])
        result["robust_mi_minus_set_size"] = {
            "interval_95": [round(float(low), 4), round(float(high), 4)],
            "resamples_defined": len(differences),
        }
    return result


def by_bucket(episodes: list[dict], outcomes: dict[str, list[dict]]) -> dict:
    """§4.3 axis 6: per homogeneity bucket, Spearman(score, error) per rule over its states, and
    per rule the answers given at its states (forced ones excluded): how many, their accuracy
    and premature rate."""
    result = {}
    for bucket in homogeneity.BUCKETS:
        states = _bucket_states(episodes, bucket)
        correlations = {}
        for rule in rules_of(episodes):
            value = _rule_spearman(states, rule)
            correlations[rule] = None if value is None else round(value, 4)
        answered = {
            rule: [o for o in found if o["bucket"] == bucket and not o["forced"]]
            for rule, found in outcomes.items()
        }
        result[bucket] = {
            "states": len(states),
            "score_error_spearman": correlations,
            "answers": {
                rule: {
                    "answered": len(found),
                    "accuracy": round(float(np.mean([o["correct"] for o in found])), 4) if found else None,
                    "premature_rate": round(float(np.mean([o["premature"] for o in found])), 4)
                    if found
                    else None,
                }
                for rule, found in answered.items()
            },
        }
    return result


def functional_diversity(episodes: list[dict]) -> dict:
    """§4.3 axis 5, the mean over episodes of their guesses' digits and placements tested."""
    found = [homogeneity.task_functional_diversity("gn", [q for q, _ in e["questions"]]) for e in episodes]
    return {key: round(float(np.mean([f[key] for f in found])), 4) for key in found[0]} if found else {}


def judge(episodes: list[dict], seed: int) -> dict:
    outcomes = {rule: [rule_outcome(rule, e) for e in episodes] for rule in rules_of(episodes)}
    arrays = {
        rule: {
            key: np.asarray([o[key] for o in found])
            for key in ("correct", "questions", "premature", "forced")
        }
        for rule, found in outcomes.items()
    }
    rules = {
        rule: {
            "accuracy": round(float(a["correct"].mean()), 4),
            "premature_rate": round(float(a["premature"].mean()), 4),
            "mean_questions": round(float(a["questions"].mean()), 3),
            "forced_rate": round(float(a["forced"].mean()), 4),
        }
        for rule, a in arrays.items()
    }
    robust = arrays["robust_mi_risk"]
    paired = {
        rule: {
            name: paired_difference(robust[key], arrays[rule][key], seed, RESAMPLES)
            for name, key in MEASURES.items()
        }
        for rule in outcomes
        if rule != "robust_mi_risk"
    }
    buckets = [s["bucket"] for e in episodes for s in e["states"]]
    return {
        "episodes": len(episodes),
        "rules": rules,
        "robust_mi_minus": paired,
        "high_bucket_correlations": correlations(episodes, seed),
        "states_by_bucket": {b: buckets.count(b) for b in homogeneity.BUCKETS},
        "by_bucket": by_bucket(episodes, outcomes),
        "task_functional_diversity": functional_diversity(episodes),
    }


def compare_methods(episodes: list[dict], baseline: list[dict], seed: int) -> dict:
    """Per rule both were scored by, one method's outcomes minus another's on the same secrets
    (paired intervals)."""
    result = {}
    for rule in [r for r in rules_of(episodes) if r in rules_of(baseline)]:
        ours = [rule_outcome(rule, e) for e in episodes]
        theirs = [rule_outcome(rule, e) for e in baseline]
        result[rule] = {
            name: paired_difference([o[key] for o in ours], [o[key] for o in theirs], seed, RESAMPLES)
            for name, key in MEASURES.items()
        }
    return result


def criteria(collapse: dict) -> dict:
    """§6.1 criteria 2-4 on the collapse regime's judgement."""
    paired = collapse["robust_mi_minus"]
    premature_upper = {rule: v["premature"]["interval_95"][1] for rule, v in paired.items()}
    correlation = collapse["high_bucket_correlations"].get("robust_mi_minus_set_size")
    return {
        "2_lower_premature_rate_than_every_other_rule": {
            "holds": all(upper < 0 for upper in premature_upper.values()),
            "upper_ends": premature_upper,
        },
        "3_mi_error_correlation_above_set_size_in_high_bucket": {
            "holds": bool(correlation and correlation["interval_95"][0] > 0),
            "interval_95": correlation["interval_95"] if correlation else None,
        },
        "4_robust_mi_accuracy_above_naive_mi": {
            "holds": paired["mi_only"]["accuracy"]["interval_95"][0] > 0,
            "interval_95": paired["mi_only"]["accuracy"]["interval_95"],
        },
    }
