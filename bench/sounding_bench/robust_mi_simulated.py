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

The judgement: `robust_mi_judgement`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from sounding.core.stop_rules import STOP_RULES
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.llm import ablations
from sounding.inquiry.llm.ablations import SESSION_ABLATIONS
from sounding.inquiry.llm.tasks import consistent_guesses
from sounding.runtime.progress import progress_bar
from sounding.settings.config import Settings

from sounding_bench import arbench
from sounding_bench.arbench_episodes import GN_RULES, make_episode
from sounding_bench.harness import fresh_stack, run_concurrently
from sounding_bench.robust_mi_judgement import RESAMPLES, compare_methods, criteria, judge

SAMPLES = 4
MAX_TURNS = 12
DELTA = 0.1
ALPHA = 0.05
IN_FLIGHT = 4
REGIMES = ("normal", "collapse")
METHODS = ("direct_prompting", "voi", "cip_full", "eig", "uot")


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
        episode = make_episode(secret, GN_RULES, [], secret, secret)
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


@dataclass(frozen=True)
class RobustMiSimulatedRun:
    """What a run plays: `calibration` and `secrets` (test) episodes per regime, the secrets
    shuffled with `seed`; `ablate`: §5's ablations, each applied to the episodes it changes
    (calibration ones too; VoI's only to `voi` sessions), `episode_tau` to the calibration."""

    calibration: int
    secrets: int
    seed: int
    ablate: tuple[str, ...] = ()


def run(spec: RobustMiSimulatedRun, settings: Settings, console: Console) -> dict:
    """The protocol above on a fresh stack on `settings`' data directory (so no earlier run's
    states enter the calibration)."""
    from sounding_client import Client

    with (
        fresh_stack(settings, console),
        Client(settings.address, timeout=600) as client,
        progress_bar(console) as progress,
    ):

        def advance(label: str, total: int) -> Callable[[], object]:
            task = progress.add_task(label, total=total)
            return lambda: progress.advance(task)

        return played_and_judged(client, spec, advance)


def played_and_judged(
    client, spec: RobustMiSimulatedRun, progress: Callable[[str, int], Callable[[], object]]
) -> dict:
    """Both regimes: calibration episodes, a stop threshold per rule, test episodes, judgement.
    `progress(label, total)` gives the callable advanced as each episode ends."""
    from sounding_client import CalibrationReport

    calibrating, testing = split_secrets(spec.calibration, spec.secrets, spec.seed)
    regimes = {}
    for regime in REGIMES:
        played = play_episodes(
            client,
            calibrating,
            regime,
            spec.seed,
            progress(f"{regime}: calibration episodes", len(calibrating)),
            ablate=spec.ablate,
        )
        thresholds = {}
        for rule in STOP_RULES:
            (report,) = [
                e
                for e in client.calibrate(
                    "stop_threshold",
                    task=ablations.calibration_task("gn", "simulated", spec.ablate),
                    regime=regime,
                    stop_rule=rule,
                    risk=DELTA,
                    alpha=ALPHA,
                    one_state_per_session="episode_tau" in spec.ablate,
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
                spec.seed,
                progress(f"{regime}: test episodes, {method}", len(testing)),
                method,
                len(calibrating),
                spec.ablate,
            )
            judged[method] = {
                "test_outcomes_recorded": sum(p["outcome_recorded"] for p in tested[method]),
                **judge(tested[method], spec.seed),
                "episodes_played": [_compact(p) for p in tested[method]],
            }
        regimes[regime] = {
            "calibration_outcomes_recorded": sum(p["outcome_recorded"] for p in played),
            "calibration_states": sum(len(p["states"]) for p in played),
            "thresholds": thresholds,
            "methods": judged,
            "minus_direct_prompting": {
                method: compare_methods(tested[method], tested["direct_prompting"], spec.seed)
                for method in METHODS
                if method != "direct_prompting"
            },
        }
    return {
        "simulation": "SIMULATED policy (inquiry/llm/simulated.py): answer samples drawn from the "
        "secrets consistent with the feedback; not a language model",
        "protocol": {
            "calibration_secrets": spec.calibration,
            "test_secrets": spec.secrets,
            "samples": SAMPLES,
            "max_turns": MAX_TURNS,
            "delta": DELTA,
            "alpha": ALPHA,
            "resamples": RESAMPLES,
            "calibration_question_selection": "direct_prompting",
            "methods": list(METHODS),
            "ablate": sorted(spec.ablate),
            "ablations_in_effect": {method: in_effect(spec.ablate, method) for method in METHODS},
        },
        "regimes": regimes,
        "criteria_6_1": {method: criteria(regimes["collapse"]["methods"][method]) for method in METHODS},
    }
