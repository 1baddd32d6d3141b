"""InquiryLearning: outcomes of llm inquiries become calibration states, and Calibrate
(STOP_THRESHOLD) turns recorded (or inline) states into versioned stop thresholds that later
sessions of the same task and regime use (robust-MI spec §2.5).

An `InquiryOutcome` names a finished or abandoned session and its ground truth; every state the
session assessed is appended to the `inquiry_states` log in one commit before the
acknowledgement. The outcome of a corpus session (its verdict) goes to the tenant's corpus
inquiry learner instead, which fits its sensor table with it (`learning.corpus_inquiry`).
Thresholds are stored in the calibrations table under
`stop_threshold:<task>:<regime>:<rule>:<bucket>` (bucket empty: every state).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from sounding.core import homogeneity, risk_control, stop_rules
from sounding.inquiry.llm import ablations, outcomes, tasks
from sounding.inquiry.llm.assessment import REGIMES
from sounding.inquiry.llm.domain import DEFAULT_STOP_RULE, Threshold, threshold_key, threshold_prefix
from sounding.inquiry.registry import DOMAINS
from sounding.inquiry.session import Session
from sounding.learning import stop_thresholds
from sounding.learning.corpus_inquiry import CorpusInquiryLearning
from sounding.learning.protocol import CalibrationProgress, CalibrationReport, Rejected
from sounding.runtime import errors
from sounding.runtime.offload import completed
from sounding.store.collections import Store
from sounding.store.learning import InquiryState, LearningLog
from sounding.store.tenancy import DEFAULT_TENANT, ResourceRef, is_name


@dataclass(frozen=True)
class InquiryOutcome:
    session_id: str
    ground_truth: str


@dataclass(frozen=True)
class InlineState:
    """A state passed to Calibrate directly: the rule's score (for set rules, the
    nonconformity), whether it erred, and for verbalized_confidence the stated confidence."""

    score: float
    error: bool
    stated_confidence: float | None = None


@dataclass(frozen=True)
class StopThresholdRequest:
    task: str
    regime: str
    bucket: str = ""
    stop_rule: str = DEFAULT_STOP_RULE
    delta: float = 0.1
    alpha: float = 0.05
    states: tuple[InlineState, ...] = ()
    one_state_per_session: bool = False
    threshold_rule: risk_control.Rule = "fixed_sequence"


def one_per_session(states: Sequence[InquiryState]) -> list[InquiryState]:
    """One state of each session, drawn at random seeded by the session id from its states in
    turn order (the sessions in the order they first appear)."""
    by_session: dict[str, list[InquiryState]] = {}
    for state in states:
        by_session.setdefault(state.session_id, []).append(state)
    return [
        random.Random(session).choice(sorted(found, key=lambda s: s.turn))
        for session, found in by_session.items()
    ]


class InquiryLearning:
    """One tenant's: its log, and the sessions it ran."""

    def __init__(
        self,
        learning_log: LearningLog,
        store: Store,
        corpus: CorpusInquiryLearning,
        tenant: str = DEFAULT_TENANT,
    ):
        self._log = learning_log
        self._store = store
        self._corpus = corpus
        self._tenant = tenant
        self._lock = asyncio.Lock()

    async def observe(self, indexed: Sequence[tuple[int, InquiryOutcome]]) -> tuple[int, list[Rejected]]:
        """Record the states of each named session; the others of the stream are still recorded
        when one is rejected. Returns (recorded outcomes, rejections)."""
        rejected: list[Rejected] = []
        records: list[InquiryState] = []
        accepted = 0
        async with self._lock:
            seen = await self._log.observed_sessions([o.session_id for _, o in indexed])
            answered: dict[str, Rejected] = {}  # a session named again in the stream gets the same answer
            for index, outcome in indexed:
                if outcome.session_id in answered:
                    problem = answered[outcome.session_id]
                else:
                    problem = await self._states(outcome, seen)
                if isinstance(problem, Session):  # a session that teaches its verdict (corpus)
                    problem = await self._corpus.observe(
                        outcome.session_id, problem.domain_setup["collection"], outcome.ground_truth.strip()
                    )
                    if problem is None:
                        seen.add(outcome.session_id)
                        accepted += 1
                        continue
                if isinstance(problem, Rejected):
                    answered.setdefault(outcome.session_id, problem)
                    rejected.append(Rejected(index, problem.code, problem.message))
                    continue
                seen.add(outcome.session_id)
                records.extend(problem)
                accepted += 1
            await completed(self._log.append_inquiry_states(records))
        return accepted, rejected

    async def _states(
        self, outcome: InquiryOutcome, seen: set[str]
    ) -> list[InquiryState] | Session | Rejected:
        """What the session teaches (`DomainSpec.outcome_learning`): its stop-rule states judged
        against the ground truth (decoded and judged on a worker thread: a session can be large),
        the session itself if it teaches its verdict, or why it teaches nothing."""
        if not outcome.ground_truth.strip():
            return Rejected(0, "INVALID_ARGUMENT", "inquiry_outcome.ground_truth must not be empty")
        if outcome.session_id in seen:
            return Rejected(0, "ALREADY_EXISTS", f"session {outcome.session_id[:64]!r} was already observed")
        stored = (
            await self._store.load_session(ResourceRef(self._tenant, outcome.session_id))
            if is_name(outcome.session_id)
            else None
        )
        if stored is None:
            return Rejected(0, "NOT_FOUND", f"no inquiry session {outcome.session_id[:64]!r}")

        def judged() -> list[InquiryState] | Session | Rejected:
            session = Session.from_json(*stored)
            learning = session.spec.outcome_learning
            if learning == "verdict":
                if session.answer is None:
                    return Rejected(
                        0, "FAILED_PRECONDITION", f"session {outcome.session_id!r} has not answered yet"
                    )
                return session
            if learning == "none":
                learners = " or ".join(s.name for s in DOMAINS.values() if s.outcome_learning != "none")
                return Rejected(
                    0,
                    "FAILED_PRECONDITION",
                    f"session {outcome.session_id!r} is not an {learners} inquiry",
                )
            return outcomes.state_records(
                outcome.session_id, session.domain_setup, session.domain_state, outcome.ground_truth
            )

        return await asyncio.to_thread(judged)

    async def thresholds(self, task: str, regime: str) -> dict[str, dict[str, Threshold]]:
        """{rule: {bucket: threshold}} of every calibrated rule of the task and regime."""
        prefix = threshold_prefix(task, regime)
        found: dict[str, dict[str, Threshold]] = {}
        for target, (version, params) in (await self._log.calibrations_with_prefix(prefix)).items():
            rule, bucket = target[len(prefix) :].split(":", 1)
            mapping = params.get("confidence_map")
            found.setdefault(rule, {})[bucket] = Threshold(
                stop_thresholds.threshold_value(params),
                version,
                bucket,
                (tuple(mapping[0]), tuple(mapping[1])) if mapping else None,
            )
        return found

    async def calibrate(
        self, request: StopThresholdRequest
    ) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        _validate(request)
        async with self._lock:
            yield CalibrationProgress("reading the recorded states", 0.0)
            if request.states:
                states = [_inline(request, s) for s in request.states]
            else:
                states = await self._log.inquiry_states(request.task, request.regime, request.bucket)
                if request.one_state_per_session:
                    states = one_per_session(states)
            yield CalibrationProgress("fitting", 0.4)
            fitted = await asyncio.to_thread(
                stop_thresholds.fit,
                states,
                request.stop_rule,
                request.delta,
                request.alpha,
                request.threshold_rule,
            )
            target = threshold_key(request.task, request.regime, request.stop_rule, request.bucket)
            previous = (await self._log.calibrations_with_prefix(target)).get(target)
            version = (previous[0] if previous else 0) + 1
            await self._log.append_calibration(target, version, fitted.params, fitted.diagnostics)
            yield CalibrationReport(
                "stop_threshold",
                version,
                fitted.sample_size,
                True,
                f"{target} v{version}: {fitted.summary}",
                fitted.diagnostics,
                fitted.curves,
            )


def _inline(request: StopThresholdRequest, state: InlineState) -> InquiryState:
    set_rule = request.stop_rule in stop_rules.SET_RULES
    return InquiryState(
        session_id="",
        task=request.task,
        regime=request.regime,
        bucket=request.bucket,
        turn=0,
        scores={} if set_rule else {request.stop_rule: state.score},
        error=state.error,
        nonconformity=state.score if set_rule else 0.0,
        stated_confidence=state.stated_confidence,
    )


def _validate(request: StopThresholdRequest) -> None:
    if not ablations.is_calibration_task(request.task):
        raise errors.InvalidArgument(
            f"task must be one of {', '.join(tasks.CALIBRATION_TASKS)}, or one of them followed by "
            "'+<ablation>' for each of a session's ablations (sorted)",
            field="task",
        )
    if request.regime not in REGIMES:
        raise errors.InvalidArgument("regime must be normal or collapse", field="regime")
    if request.bucket and request.bucket not in homogeneity.BUCKETS:
        raise errors.InvalidArgument(
            f"bucket must be empty or one of {', '.join(homogeneity.BUCKETS)}", field="bucket"
        )
    if request.one_state_per_session and request.states:
        raise errors.InvalidArgument(
            "one_state_per_session picks among recorded sessions' states; inline states have no session",
            field="one_state_per_session",
        )
    if request.stop_rule == stop_rules.HYPOTHESIS_ENTROPY:
        raise errors.InvalidArgument(
            "hypothesis_entropy's threshold is fixed (robust-MI spec §3.7, §3.8): nothing calibrates it",
            field="stop_rule",
        )
    if request.stop_rule not in stop_rules.STOP_RULES:
        raise errors.InvalidArgument(
            f"stop_rule must be one of {', '.join(stop_rules.STOP_RULES)}", field="stop_rule"
        )
    if request.stop_rule in stop_rules.SET_RULES and request.threshold_rule != "fixed_sequence":
        raise errors.InvalidArgument(
            f"{request.stop_rule} is a set rule: its threshold is the conformal quantile, which no "
            "prefix rule chooses",
            field="threshold_rule",
        )
