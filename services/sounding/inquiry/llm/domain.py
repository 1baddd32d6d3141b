"""The `llm` inquiry domain: Sounding's language model works on a problem the client describes
(`context`; for `dc` the suspects as hypotheses), asks the client questions and decides when to
answer by a stop rule (robust-MI spec §2–§3; rules in core.stop_rules).

At every state the domain first `think`s: it samples answers and self-revisions, scores the
state for its stop rule (every rule when `domain_parameters["signals"] = "all"`, which the
AR-Bench harness uses to judge all rules on the same trajectory), and, unless the rule answers,
generates the next question. The measurements are kept in the session state, so a resumed
session repeats nothing. The answer is the largest cluster of the revised answers.

Domain parameters: `task` (dc|sp|gn|generic), `regime` (normal|collapse), `policy_model`
(sidecar: Sounding's generator; simulated: the SIMULATED gn policy of `inquiry.llm.simulated`,
whose states and thresholds are kept under the task `gn_simulated`), `samples` (k),
`diversity` (weighted|unweighted|off), `signals` (rule|all), `answer_tokens`,
`question_tokens`, `question_cost` (subtracted from a question's expected reduction: nats of
robust MI for `voi`, set members for `cip_full`, nats of hypothesis entropy for `eig` and `uot`)
and `run_to_max_turns` ("true": the stop rule is scored but never ends the session early, so an
evaluation can replay every rule on one full trajectory). Question selection
(`InquiryPolicy.question_selection`): `direct_prompting`, `naive_prompting` (which also asks
until the turn cap), `voi` or `cip_full` (`inquiry.llm.selection`), or, for gn and sp, `eig` or
`uot` over a hypothesis set (`inquiry.llm.planning`). `ablate` switches off parts of the full
method (`inquiry.llm.ablations`, robust-MI spec §5).
Thresholds come from the latest Calibrate(STOP_THRESHOLD) for the task, regime and rule when the
session starts (the homogeneity bucket's own calibration, if any, takes precedence), else the
rule's default.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from sounding.core import stop_rules
from sounding.inquiry.domains import bulls_and_cows
from sounding.inquiry.domains import parameters as parameters_
from sounding.inquiry.llm import ablations, assessment, planning, selection, tasks
from sounding.inquiry.llm.assessment import Assessment, SamplingSettings
from sounding.inquiry.llm.simulated import SimulatedGuesser
from sounding.inquiry.protocol import BeliefView, Choice, Policy, ScoredHypothesis, ScoredQuestion, StopSignal
from sounding.runtime import errors
from sounding.settings.limits import InquiryLimits

LLM_POLICIES = ("direct_prompting", "naive_prompting", "voi", "cip_full", *planning.PLANNING_METHODS)
# The rule a session stops by, and Calibrate fits, when none is named (robust-MI spec §2.5).
DEFAULT_STOP_RULE = "robust_mi_risk"
SIMULATION_THREADS = 2
_SIMULATIONS = ThreadPoolExecutor(SIMULATION_THREADS, thread_name_prefix="simulated-policy")


@dataclass(frozen=True)
class Threshold:
    """A rule's threshold in use: the calibrated one (version > 0) or the default."""

    value: float
    version: int = 0
    bucket: str = ""
    # verbalized_confidence: the isotonic map (x, y points) from stated confidence to accuracy.
    confidence_map: tuple[tuple[float, ...], tuple[float, ...]] | None = None


def threshold_prefix(task: str, regime: str) -> str:
    return f"stop_threshold:{task}:{regime}:"


def threshold_key(task: str, regime: str, rule: str, bucket: str = "") -> str:
    """The calibrations-table target a threshold is stored under."""
    return f"{threshold_prefix(task, regime)}{rule}:{bucket}"


def default_threshold(rule: str) -> Threshold:
    if rule in stop_rules.SET_RULES:
        return Threshold(stop_rules.DEFAULT_CONFORMAL_QUANTILE)
    return Threshold(stop_rules.DEFAULT_THRESHOLDS[rule])


class LlmInquiry:
    name = "llm"

    def __init__(self, setup: dict, state: dict):
        self._setup = setup
        task = ablations.task(tasks.TASK_SPECS[setup["task"]], setup.get("ablate", ()))
        self.problem = tasks.Problem(
            task, setup["context"], tuple(setup["choices"]), setup["regime"] == "collapse"
        )
        self.sampling = SamplingSettings(**setup["sampling"])
        self.rules: list[str] = setup["rules"]
        self.stop_rule: str = setup["stop_rule"]
        self.thresholds = {
            rule: {bucket: Threshold(**t) for bucket, t in by_bucket.items()}
            for rule, by_bucket in setup["thresholds"].items()
        }
        self.turns: list[list[str]] = state["turns"]
        self.assessments: list[dict] = state["assessments"]
        self.next: dict | None = state["next"]
        # Each answered question that had imagined answers: its turn, the imagined outcomes, the
        # real one and, once the next state is assessed, the surprise and overlap.
        self.divergence: list[dict] = state.get("divergence", [])

    @classmethod
    def from_state(cls, setup: dict, state: dict) -> LlmInquiry:
        return cls(setup, state)

    @classmethod
    def from_request(
        cls,
        policy: Policy,
        context: str,
        hypotheses: Sequence,
        parameters: Mapping[str, str],
        thresholds: Mapping[str, Mapping[str, Threshold]],
        limits: InquiryLimits = InquiryLimits(),
    ) -> LlmInquiry:
        task, regime = cls.task_and_regime(parameters)
        policy_model = parameters.get("policy_model") or "sidecar"
        if not context.strip() and task != "gn":
            raise errors.InvalidArgument("the llm domain needs a context", field="start.context")
        if len(hypotheses) > limits.llm_max_hypotheses:
            raise errors.InvalidArgument(
                f"at most {limits.llm_max_hypotheses} hypotheses in the llm domain", field="start.hypotheses"
            )
        choices = [h.description or h.id for h in hypotheses]
        if len(context) + sum(len(c) for c in choices) > limits.llm_max_problem_chars:
            raise errors.InvalidArgument(
                f"context and hypotheses are longer than {limits.llm_max_problem_chars} characters together "
                "(they are part of every prompt)",
                field="start.context",
            )
        if task == "dc" and len(choices) < 2:
            raise errors.InvalidArgument("dc needs the suspects as hypotheses", field="start.hypotheses")
        diversity = parameters.get("diversity", "weighted")
        if diversity not in ("weighted", "unweighted", "off"):
            raise errors.InvalidArgument(
                "diversity must be weighted, unweighted or off", field="start.domain_parameters.diversity"
            )
        signals = parameters.get("signals", "rule")
        if signals not in ("rule", "all"):
            raise errors.InvalidArgument(
                "signals must be rule or all", field="start.domain_parameters.signals"
            )
        ablate = ablations.named(parameters)
        ablations.validate(ablate, task, policy.question_selection)
        sampling = SamplingSettings(
            samples=parameters_.integer(parameters, "samples", 4, 2, limits.llm_max_samples),
            regime=regime,
            diversity=diversity,
            answer_tokens=parameters_.integer(parameters, "answer_tokens", 0, 0, limits.llm_max_tokens),
            question_tokens=parameters_.integer(parameters, "question_tokens", 0, 0, limits.llm_max_tokens),
        )
        sampling = ablations.sampling(sampling, ablate)
        question_cost = parameters_.number(parameters, "question_cost", 0.0, 0.0, 100.0)
        run_to_max_turns = parameters.get("run_to_max_turns", "false")
        if run_to_max_turns not in ("true", "false"):
            raise errors.InvalidArgument(
                "run_to_max_turns must be true or false", field="start.domain_parameters.run_to_max_turns"
            )
        rules = planning.session_rules(task, policy.question_selection, policy.stop_rule, signals)
        problem = tasks.Problem(tasks.TASK_SPECS[task], context, tuple(choices), regime == "collapse")
        per_state = selection.lookahead_tokens_per_state(problem, sampling, policy.question_selection)
        if policy.question_selection in planning.PLANNING_METHODS:
            per_state += planning.hypothesis_tokens_per_state(problem, sampling)
        budget = assessment.worst_case_tokens(
            problem, sampling, set(rules), policy.max_turns + 1
        ) + per_state * (policy.max_turns + 1)
        if policy_model == "sidecar" and budget > limits.llm_max_session_tokens:
            raise errors.InvalidArgument(
                f"with these settings the session may generate {budget} tokens (samples x prompt "
                f"variants x turns x tokens, and voi's lookahead); at most {limits.llm_max_session_tokens}: "
                "lower samples, answer_tokens or max_turns",
                field="start.domain_parameters.samples",
            )
        setup = {
            "task": task,
            "context": context,
            "choices": choices,
            "regime": regime,
            "policy_model": policy_model,
            "sampling": asdict(sampling),
            "rules": rules,
            "stop_rule": policy.stop_rule,
            # Naive prompting (§3.1) asks until the turn cap, whatever the stop rule says.
            "run_to_max_turns": run_to_max_turns == "true" or policy.question_selection == "naive_prompting",
            "question_cost": question_cost,
            "ablate": ablate,
            "seed": policy.seed if policy.seed is not None else random.randrange(2**31),
            "thresholds": {
                rule: {
                    b: asdict(t)
                    for b, t in (
                        {"": default_threshold(rule)}
                        if "risk_tau" in ablate
                        else thresholds.get(rule, {"": default_threshold(rule)})
                    ).items()
                }
                for rule in rules
            },
        }
        return cls(setup, {"turns": [], "assessments": [], "next": None, "divergence": []})

    @staticmethod
    def task_and_regime(parameters: Mapping[str, str]) -> tuple[str, assessment.Regime]:
        """The task and decoding regime the domain parameters name (InvalidArgument if unknown, or
        if the simulated policy is asked to play anything but gn)."""
        task = parameters.get("task", "generic")
        if task not in tasks.TASKS:
            raise errors.InvalidArgument(
                f"task must be one of {', '.join(tasks.TASKS)}", field="start.domain_parameters.task"
            )
        policy_model = parameters.get("policy_model") or "sidecar"
        if policy_model not in tasks.POLICY_MODELS or (policy_model == "simulated" and task != "gn"):
            raise errors.InvalidArgument(
                "policy_model must be sidecar, or simulated with task gn",
                field="start.domain_parameters.policy_model",
            )
        regime = parameters.get("regime", "normal")
        if regime == "normal" or regime == "collapse":
            return task, regime
        raise errors.InvalidArgument(
            "regime must be normal or collapse", field="start.domain_parameters.regime"
        )

    @classmethod
    def calibration_scope(cls, parameters: Mapping[str, str]) -> tuple[str, assessment.Regime]:
        """The task and regime whose stop thresholds a session of these parameters uses."""
        task, regime = cls.task_and_regime(parameters)
        policy_model = parameters.get("policy_model") or "sidecar"
        return ablations.calibration_task(task, policy_model, ablations.named(parameters)), regime

    def setup(self) -> dict[str, Any]:
        return self._setup

    def state(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "assessments": self.assessments,
            "next": self.next,
            "divergence": self.divergence,
        }

    def _rng(self, turn: int, purpose: str) -> random.Random:
        return random.Random(f"{self._setup['seed']}:{turn}:{purpose}")

    def threshold(self, rule: str, bucket: str) -> Threshold:
        by_bucket = self.thresholds.get(rule) or {"": default_threshold(rule)}
        return by_bucket.get(bucket) or by_bucket.get("") or default_threshold(rule)

    def signal(self, rule: str, current: dict) -> StopSignal:
        threshold = self.threshold(rule, current["bucket"])
        score = current["scores"][rule]
        if rule in stop_rules.SET_RULES:
            answers = stop_rules.set_rule_answers(int(score))
        else:
            answers = score <= threshold.value
        answer = current.get("rule_answers", {}).get(rule, ("",))[0]
        return StopSignal(rule, score, threshold.value, answers, threshold.version, answer)

    async def think(self, policy: Policy, turn: int, backend: assessment.Backend) -> None:
        """Assess the state (once per turn) and, unless the stop rule answers, find the next
        question. The simulated policy computes instead of waiting for a model, so its thinking
        runs on one of `SIMULATION_THREADS` worker threads (with a loop of its own), off the
        server's event loop; a cancelled call's thinking that has not started never does."""
        if (self.assessments and self.assessments[-1]["turn"] == turn) or self._guessed():
            return
        if self._setup.get("policy_model") == "simulated":
            simulation = SimulatedGuesser(
                self.problem, self.sampling.question_candidates, self._rng(turn, "simulate")
            )
            await asyncio.get_running_loop().run_in_executor(
                _SIMULATIONS, lambda: asyncio.run(self._think(policy, turn, simulation))
            )
        else:
            await self._think(policy, turn, backend)

    def calibration(self, bucket: str) -> assessment.Calibration:
        """The set rules' quantile (knowno's when it is scored, else cip_lite's) and the verbalized
        confidence's map in force for `bucket`, as `threshold` finds them."""
        set_rule = "knowno_set_size" if "knowno_set_size" in self.rules else "cip_lite"
        verbal = self.threshold("verbalized_confidence", bucket)
        confidence_map = None
        if verbal.confidence_map is not None:
            xs, ys = verbal.confidence_map
            confidence_map = lambda c: float(np.interp(c, xs, ys))  # noqa: E731
        return assessment.Calibration(self.threshold(set_rule, bucket).value, confidence_map)

    async def _think(self, policy: Policy, turn: int, backend: assessment.Backend) -> None:
        measured: Assessment = await assessment.assess(
            backend,
            self.problem,
            [tuple(t) for t in self.turns],
            turn,
            set(self.rules),
            self.sampling,
            self._rng(turn, "assess"),
            self.calibration,
        )
        current = measured.to_json()
        quantile = self.calibration(current["bucket"]).quantile
        turns = [(question, answer) for question, answer in self.turns]
        hypotheses = None
        if stop_rules.HYPOTHESIS_ENTROPY in self.rules:  # §3.7-§3.8: the set decides, its MAP answers
            hypotheses = await planning.hypothesis_set(
                backend, self.problem, turns, self.sampling, self._rng(turn, "hypotheses")
            )
            current["scores"][stop_rules.HYPOTHESIS_ENTROPY] = hypotheses.entropy()
            current["rule_answers"] = {
                stop_rules.HYPOTHESIS_ENTROPY: hypotheses.most_probable(current["answer"])
            }
        if self.divergence and self.divergence[-1]["turn"] == len(self.turns) - 1:
            last = self.divergence[-1]
            if "surprise" not in last:
                last["surprise"], last["overlap"] = await selection.divergence(
                    backend, self.problem, last["imagined"], last["actual"]
                )
            current["homogeneity"] |= {
                "simulator_surprise": last["surprise"],
                "simulator_overlap": last["overlap"],
            }
        current["signals"] = [asdict(self.signal(rule, current)) for rule in self.rules]
        self.assessments.append(current)
        self.next = None
        if not self._rule_answers(current) and turn < policy.max_turns:
            rng = self._rng(turn, "ask")
            if policy.question_selection == "cip_full":
                chosen = await selection.smallest_expected_set(
                    backend,
                    self.problem,
                    turns,
                    self.sampling,
                    rng,
                    quantile,
                    self._setup.get("question_cost", 0.0),
                )
            elif policy.question_selection == "voi":
                cost = self._setup.get("question_cost", 0.0)
                chosen = await selection.value_of_information(
                    backend, self.problem, turns, self.sampling, rng, quantile, cost
                )
            elif policy.question_selection in planning.PLANNING_METHODS:
                chosen = await planning.plan_question(
                    policy.question_selection,
                    backend,
                    self.problem,
                    turns,
                    self.sampling,
                    rng,
                    self._setup.get("question_cost", 0.0),
                    hypotheses,
                )
            elif policy.question_selection == "naive_prompting":
                chosen = await selection.naive_prompting(backend, self.problem, turns, self.sampling, rng)
            else:
                chosen = await selection.direct_prompting(backend, self.problem, turns, self.sampling, rng)
            self.next = {
                "question": chosen.question,
                "rationale": chosen.rationale,
                "scored": [[c.question, c.reduction, c.value, c.outcomes] for c in chosen.scored],
            }

    def _rule_answers(self, current: dict) -> bool:
        if self._setup["run_to_max_turns"]:
            return False
        return any(s["rule"] == self.stop_rule and s["answers"] for s in current["signals"])

    def belief(self) -> BeliefView:
        """The latest assessment's; a gn game just solved is certain and assessed no further (no
        stop signals: no rule decided it)."""
        if self._guessed():
            return BeliefView(0.0, 0.0, [ScoredHypothesis("solved", self.turns[-1][0], 1.0)], 0.0, 1.0)
        if not self.assessments:
            return BeliefView(0.0, 0.0, [], 0.0, 0.0)
        current = self.assessments[-1]
        distribution = current["distribution"]
        entropy = stop_rules.semantic_entropy({i: p for i, (_, p) in enumerate(distribution)}) / math.log(2)
        samples = self.sampling.samples
        return BeliefView(
            entropy_bits=entropy,
            max_entropy_bits=math.log2(samples),
            top_hypotheses=[
                ScoredHypothesis(f"cluster-{i}", answer or "(unparsed)", p)
                for i, (answer, p) in enumerate(distribution)
            ],
            unknown_mass=0.0,
            map_probability=current["answer_share"],
            homogeneity=current["homogeneity"],
            homogeneity_bucket=current["bucket"],
            stop_signals=[StopSignal(**s) for s in current["signals"]],
        )

    def choose(self, policy: Policy, turn: int) -> Choice | None:
        if self.next is None:
            return None
        cost = self._setup.get("question_cost", 0.0)
        scored = [
            ScoredQuestion(f"q{turn}" if i == 0 else f"q{turn}-{i}", question, reduction, value, cost)
            for i, (question, reduction, value, _) in enumerate(self.next.get("scored", []))
        ]
        if not scored:  # direct prompting scores nothing
            return Choice(
                ScoredQuestion(f"q{turn}", self.next["question"], 0.0, 0.0, cost), self.next["rationale"], []
            )
        return Choice(scored[0], self.next["rationale"], scored[1:])

    def observe(self, question_id: str, question: str, answer: str) -> None:
        if not answer.strip():
            raise errors.InvalidArgument("the answer must not be empty", field="observation.answer")
        if self._setup.get("policy_model") == "simulated":  # the simulation reads its transcript back
            feedback = tasks.bulls_and_cows(answer)
            if feedback is None:
                raise errors.InvalidArgument(
                    "the simulated policy needs the feedback (bulls and cows)", field="observation.answer"
                )
            answer = bulls_and_cows.feedback_sentence(*feedback)
        imagined = next((o for q, _, _, o in (self.next or {}).get("scored", []) if q == question), None)
        if imagined:  # §4.3 axis 4, measured at the next state: the real answer against the imagined
            actual = tasks.parse_outcome(self.problem, answer)
            self.divergence.append({"turn": len(self.turns), "imagined": imagined, "actual": actual})
        self.turns.append([question, answer])
        self.next = None

    def _guessed(self) -> bool:
        """gn: the last guess was told all four digits are right and in place."""
        if self.problem.task.name != "gn" or not self.turns:
            return False
        feedback = tasks.bulls_and_cows(self.turns[-1][1])
        return feedback is not None and feedback[0] == 4

    def finished(self) -> str:
        if self._guessed():
            return "confidence_reached"
        if self.assessments and self._rule_answers(self.assessments[-1]):
            return "confidence_reached"
        return ""

    def answer(self) -> tuple[str, float]:
        if self._guessed():
            return self.turns[-1][0], 1.0
        if not self.assessments:
            return tasks.UNPARSED, 0.0
        current = self.assessments[-1]
        answer, share = current.get("rule_answers", {}).get(
            self.stop_rule, (current["answer"], current["answer_share"])
        )
        return answer, share
