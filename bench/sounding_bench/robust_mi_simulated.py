"""`sounding eval robust-mi-simulated`: every stop rule on SIMULATED guessing-number episodes,
played through Inquire's `llm` domain with `policy_model=simulated` (`inquiry.llm.simulated`: a
policy whose beliefs are exact, with a collapse knob), so the error of every state is known
(issue 21, item 5; robust-MI spec §4.1, §4.3 item 6, §6.1 criteria 2-4).

Protocol, fixed before the first run:
- Secrets: the 5,040 shuffled with `seed`; the first `calibration` calibrate, the next `secrets`
  are the test episodes (their sessions seeded apart from the calibration ones). Both regimes
  play the same secrets.
- An episode: task gn, k = `SAMPLES`, every rule scored at every state (`signals=all`) on one
  trajectory (`run_to_max_turns`) of at most `MAX_TURNS` guesses; the harness gives the true
  feedback and sends the secret through Observe at the end.
- Per regime, after its calibration episodes (questions by direct prompting): Calibrate
  (STOP_THRESHOLD) of every rule for (`gn_simulated`, regime) at δ = `DELTA`, α = `ALPHA`; the
  test episodes start afterwards, so their signals carry the calibrated thresholds. The test
  secrets are played once per question-selection method (`METHODS`: direct prompting, VoI,
  C-IP-full, EIG and UoT over the consistent secrets). Naive prompting is not among them: the
  simulation writes its one question exactly as direct prompting's first candidate, and its
  stop (the turn cap) is what every rule that never answers gets.
- A rule answers at the first state of a test trajectory whose signal answers, with that
  state's answer; one that never does goes on guessing (a guess that hits solves the game) and
  is forced at the cap. Premature: answering at a state where more than one secret is
  consistent (its answer is then wrong with probability at least one half, above δ).
- Per method, rule and regime: accuracy, premature rate, mean questions; paired bootstrap 95%
  intervals (`RESAMPLES`, over episodes) of robust_mi_risk minus each other rule, and per rule of
  each other method minus direct prompting. Over the test states of the high homogeneity bucket: Spearman
  (score, error) per rule, and the difference robust MI minus set size with a block bootstrap over
  episodes.
- §6.1 criteria, per method in the collapse regime: (2) robust_mi_risk's premature rate is below
  every other rule's (each interval's upper end < 0); (3) in the high bucket, the score-error
  correlation of robust MI exceeds that of the set size (the interval's lower end > 0); (4) robust
  MI's accuracy exceeds naive MI's (`mi_only`; the interval's lower end > 0).
- In `eig` and `uot` sessions `hypothesis_entropy` (their own stop, §3.7-§3.8) is judged too, by
  its own answer (the most probable consistent secret); added after the run at e6d973b.
- Reported beside them (§4.3 axes 5-6): per homogeneity bucket, each rule's score-error
  correlation over its states and the accuracy and premature rate of the answers given there;
  per method, the digits and placements its guesses tested.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import spearmanr
from sounding.core import homogeneity
from sounding.core.stop_rules import HYPOTHESIS_ENTROPY, STOP_RULES
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.llm import ablations, tasks
from sounding.inquiry.llm.ablations import SESSION_ABLATIONS
from sounding.inquiry.llm.tasks import consistent_guesses

from sounding_bench import arbench
from sounding_bench.harness import run_concurrently
from sounding_bench.metrics import paired_difference

SAMPLES = 4
MAX_TURNS = 12
DELTA = 0.1
ALPHA = 0.05
RESAMPLES = 2000
IN_FLIGHT = 4
REGIMES = ("normal", "collapse")
METHODS = ("direct_prompting", "voi", "cip_full", "eig", "uot")
MEASURES = {"accuracy": "correct", "premature": "premature", "questions": "questions"}


def in_effect(ablate: Sequence[str], method: str) -> list[str]:
    """The session ablations that change a gn session of this question selection."""
    return ablations.applicable(sorted(a for a in ablate if a in SESSION_ABLATIONS), "gn", method)


def split_secrets(calibration: int, test: int, seed: int) -> tuple[list[str], list[str]]:
    secrets = list(bc.feedback_table().strings)
    random.Random(seed).shuffle(secrets)
    if calibration + test > len(secrets):
        raise ValueError(f"at most {len(secrets)} secrets in all")
    return secrets[:calibration], secrets[calibration : calibration + test]


def play_episodes(
    client,
    secrets: Sequence[str],
    regime: str,
    seed: int,
    on_each: Callable[[], object],
    method: str = "direct_prompting",
    first_index: int = 0,
    ablate: Sequence[str] = (),
) -> list[dict]:
    """Each secret's episode through Inquire (questions chosen by `method`; the session seeded by
    `seed` and the secret's index counted from `first_index`) and its outcome through Observe,
    in secret order. A state is a Belief with stop signals (the one after a solving guess has
    none)."""
    from sounding_client import InquiryOutcome, InquiryPolicy

    parameters = {
        "task": "gn",
        "policy_model": "simulated",
        "regime": regime,
        "samples": str(SAMPLES),
        "signals": "all",
        "run_to_max_turns": "true",
        "ablate": ",".join(in_effect(ablate, method)),
    }
    played: dict[int, dict] = {}

    def one(index: int, secret: str) -> None:
        episode = arbench._episode(secret, arbench.GN_RULES, [], secret, secret)
        policy = InquiryPolicy(
            question_selection=method,
            stop_rule="robust_mi_risk",
            max_turns=MAX_TURNS,
            seed=seed * 100_003 + first_index + index,
        )
        loop = asyncio.new_event_loop()
        try:
            record = arbench.play(client, None, "gn", episode, policy, parameters, loop)
        finally:
            loop.close()
        record["states"] = [s for s in record["states"] if s["signals"]]
        ack = client.observe([InquiryOutcome(record["session_id"], secret)])
        record["outcome_recorded"] = ack.recorded == 1
        played[index] = record

    run_concurrently(one, list(enumerate(secrets)), IN_FLIGHT, on_each)
    return [played[i] for i in range(len(secrets))]


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


def _compact(episode: dict) -> dict:
    """An episode as the result keeps it: the secret, the guesses, and per state its answer,
    homogeneity bucket, consistent secrets and every rule's [score, threshold, answers] (and its
    own answer, where it has one)."""
    turns = [tuple(q) for q in episode["questions"]]
    return {
        "secret": episode["_truth"],
        "guesses": [guess for guess, _ in turns],
        "states": [
            {
                "answer": s["answer"],
                "bucket": s["bucket"],
                "consistent": len(consistent_guesses(turns[:index])),
                "signals": {
                    rule: [round(v, 4) for v in signal[:2]] + signal[2:]
                    for rule, signal in s["signals"].items()
                },
            }
            for index, s in enumerate(episode["states"])
        ],
    }


def run(client, calibration: int, secrets: int, seed: int, progress, ablate: Sequence[str] = ()) -> dict:
    """Both regimes: calibration episodes, a stop threshold per rule, test episodes, judgement.
    `progress(label, total)` gives the callable advanced as each episode ends. `ablate`: §5's
    ablations, each applied to the episodes it changes (calibration ones too; VoI's only to
    `voi` sessions), `episode_tau` to the calibration."""
    from sounding_client import CalibrationReport

    calibrating, testing = split_secrets(calibration, secrets, seed)
    regimes = {}
    for regime in REGIMES:
        played = play_episodes(
            client,
            calibrating,
            regime,
            seed,
            progress(f"{regime}: calibration episodes", len(calibrating)),
            ablate=ablate,
        )
        thresholds = {}
        for rule in STOP_RULES:
            (report,) = [
                e
                for e in client.calibrate(
                    "stop_threshold",
                    task=ablations.calibration_task("gn", "simulated", ablate),
                    regime=regime,
                    stop_rule=rule,
                    risk=DELTA,
                    alpha=ALPHA,
                    one_state_per_session="episode_tau" in ablate,
                )
                if isinstance(e, CalibrationReport)
            ]
            thresholds[rule] = {
                "version": report.version,
                "sample_size": report.sample_size,
                "summary": report.summary,
                "diagnostics": dict(report.diagnostics),
            }
        judged, tested = {}, {}
        for method in METHODS:
            tested[method] = play_episodes(
                client,
                testing,
                regime,
                seed,
                progress(f"{regime}: test episodes, {method}", len(testing)),
                method,
                len(calibrating),
                ablate,
            )
            judged[method] = {
                "test_outcomes_recorded": sum(p["outcome_recorded"] for p in tested[method]),
                **judge(tested[method], seed),
                "episodes_played": [_compact(p) for p in tested[method]],
            }
        regimes[regime] = {
            "calibration_outcomes_recorded": sum(p["outcome_recorded"] for p in played),
            "calibration_states": sum(len(p["states"]) for p in played),
            "thresholds": thresholds,
            "methods": judged,
            "minus_direct_prompting": {
                method: compare_methods(tested[method], tested["direct_prompting"], seed)
                for method in METHODS
                if method != "direct_prompting"
            },
        }
    return {
        "simulation": "SIMULATED policy (inquiry/llm/simulated.py): answer samples drawn from the "
        "secrets consistent with the feedback; not a language model",
        "protocol": {
            "calibration_secrets": calibration,
            "test_secrets": secrets,
            "samples": SAMPLES,
            "max_turns": MAX_TURNS,
            "delta": DELTA,
            "alpha": ALPHA,
            "resamples": RESAMPLES,
            "calibration_question_selection": "direct_prompting",
            "methods": list(METHODS),
            "ablate": sorted(ablate),
            "ablations_in_effect": {method: in_effect(ablate, method) for method in METHODS},
        },
        "regimes": regimes,
        "criteria_6_1": {method: criteria(regimes["collapse"]["methods"][method]) for method in METHODS},
    }
