"""The inquiry engine: the ask-or-answer loop of a session of any registered domain.

After a start or an observation the engine emits a Belief and then either an Ask (the next
question, which the session now awaits an answer to) or the final Answer. Whatever differs
between domains the engine reads from the domain's spec (`registry`); the session and how it is
stored so that a resumed session continues exactly where it was are `session`'s.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, cast

from sounding.core.information import StoppingConfig, default_stopping
from sounding.core.provenance import Provenance
from sounding.inquiry.protocol import (
    AnswerEvent,
    AskEvent,
    BeliefEvent,
    Domain,
    InquiryEvent,
    SelfAnsweringDomain,
    Start,
)
from sounding.inquiry.registry import Calibrated, DomainSpec, requested_domain
from sounding.inquiry.session import PendingQuestion, Session, SessionAnswer
from sounding.runtime import errors
from sounding.settings.limits import InquiryLimits

# Runs a move's CPU-bound part: `await compute(function, *args)`. The service passes a bounded
# thread pool; by default the work runs inline.
Compute = Callable[..., Awaitable[Any]]


async def inline(function: Callable[..., Any], *args: Any) -> Any:
    return function(*args)


def _validated(spec: DomainSpec, request: Start, limits: InquiryLimits) -> Start:
    """The start of a session of the `spec` domain with the domain's defaults in place of
    `default` policy names, checked against what every start must respect beyond the rules
    InquiryStart declares (checked before: `validation`): the policy, the domain's own parameter
    checks, and the deployment's limits on counts and lengths (each violation names its field)."""
    request = replace(request, policy=spec.session_policy(request.policy, limits))
    if spec.check_parameters is not None:
        spec.check_parameters(request.domain_parameters)
    if len(request.domain_parameters) > limits.max_domain_parameters:
        raise errors.InvalidArgument(
            f"at most {limits.max_domain_parameters} domain parameters", field="start.domain_parameters"
        )
    for key, value in request.domain_parameters.items():
        if max(len(key), len(value)) > limits.max_parameter_chars:
            raise errors.InvalidArgument(
                f"domain parameter keys and values are at most {limits.max_parameter_chars} characters",
                field=f"start.domain_parameters.{key[:64]}",
            )
    if len(request.context) > limits.max_context_chars:
        raise errors.InvalidArgument(
            f"context is longer than {limits.max_context_chars} characters", field="start.context"
        )
    if len(request.hypotheses) > limits.max_hypotheses or len(request.questions) > limits.max_questions:
        raise errors.InvalidArgument(
            f"at most {limits.max_hypotheses} hypotheses and {limits.max_questions} questions",
            field="start.hypotheses"
            if len(request.hypotheses) > limits.max_hypotheses
            else "start.questions",
        )
    cells = len(request.hypotheses) * len(request.questions)
    if cells > limits.max_cells:
        raise errors.InvalidArgument(
            f"hypotheses x questions is {cells}; at most {limits.max_cells}", field="start.questions"
        )
    for index, h in enumerate(request.hypotheses):
        where = f"start.hypotheses[{index}]"
        if len(h.id) > limits.max_id_chars:
            raise errors.InvalidArgument(
                f"{where}.id is longer than {limits.max_id_chars}", field=f"{where}.id"
            )
        if len(h.description) > limits.max_text_chars:
            raise errors.InvalidArgument(
                f"{where}.description is longer than {limits.max_text_chars}", field=f"{where}.description"
            )
    for index, q in enumerate(request.questions):
        where = f"start.questions[{index}]"
        if len(q.id) > limits.max_id_chars:
            raise errors.InvalidArgument(
                f"{where}.id is longer than {limits.max_id_chars}", field=f"{where}.id"
            )
        if len(q.text) > limits.max_text_chars:
            raise errors.InvalidArgument(
                f"{where}.text is longer than {limits.max_text_chars}", field=f"{where}.text"
            )
        if any(len(o) > limits.max_id_chars for o in q.outcomes.values()):
            raise errors.InvalidArgument(
                f"{where}.outcomes values are at most {limits.max_id_chars} characters",
                field=f"{where}.outcomes",
            )
    return request


def start(
    request: Start,
    thresholds: Calibrated | None = None,
    limits: InquiryLimits = InquiryLimits(),
) -> Session:
    """A new session; `thresholds` are the llm domain's calibrated stop thresholds by rule and
    homogeneity bucket."""
    spec = requested_domain(request.domain)
    request = _validated(spec, request, limits)
    domain = spec.from_request(request, thresholds or {}, limits)
    return Session(
        uuid.uuid4().hex, request.domain, request.policy, domain.setup(), domain.state(), live=domain
    )


def _domain(session: Session) -> Domain:
    if session.live is None:
        session.live = session.spec.from_state(session.domain_setup, session.domain_state)
    return session.live


async def advance(session: Session, backend: Any = None, compute: Compute = inline) -> list[InquiryEvent]:
    """Belief, then Ask or Answer. Mutates the session (pending question or final answer).
    `backend` is what a domain's `think` needs (the models, for the llm domain); `compute` runs
    the move's CPU-bound part."""
    domain = await compute(_domain, session)
    await domain.think(session.policy, session.turn, backend)
    return await compute(_decide, session, domain)


def _decide(session: Session, domain: Domain) -> list[InquiryEvent]:
    session.domain_state = domain.state()
    belief = domain.belief()
    current = domain.answer()
    if len(session.entropy_path) == session.turn:
        session.entropy_path.append(belief.entropy_bits)
    events: list[InquiryEvent] = [
        BeliefEvent(
            session_id=session.session_id,
            turn=session.turn,
            entropy_bits=belief.entropy_bits,
            normalized_uncertainty=(
                belief.entropy_bits / belief.max_entropy_bits if belief.max_entropy_bits else 0.0
            ),
            top_hypotheses=belief.top_hypotheses,
            unknown_mass=belief.unknown_mass,
            current_answer=current[0],
            homogeneity=belief.homogeneity,
            homogeneity_bucket=belief.homogeneity_bucket,
            stop_signals=belief.stop_signals,
        )
    ]
    reason, forced = domain.finished(), False
    if not reason and session.spec.stops_on_confidence:
        decision = default_stopping(
            belief.map_probability,
            session.turn,
            session.cost_spent,
            # How far the last answer moved the belief: evidence against the current lean raises
            # the entropy, and that is no diminishing return.
            abs(session.actual_gains[-1]) if session.actual_gains else math.inf,
            StoppingConfig(
                session.policy.target_confidence,
                session.policy.max_turns,
                session.policy.cost_budget,
                session.policy.min_information_gain,
            ),
        )
        reason, forced = decision.reason, decision.reason not in ("", "confidence_reached")
    elif not reason and session.turn >= session.policy.max_turns:
        reason, forced = "max_queries_reached", True
    choice = None
    if not reason:
        choice = domain.choose(session.policy, session.turn + 1)
        if choice is None:
            # A domain may say why it chose nothing (`unchosen`, set by `choose`).
            reason = getattr(domain, "unchosen", "") or "no_viable_queries"
    if reason or choice is None:
        events.append(_answer(session, domain, current, reason, forced))
        return events
    session.turn += 1
    session.pending = PendingQuestion(
        choice.chosen.question_id,
        choice.chosen.question,
        choice.chosen.expected_information_gain,
        choice.chosen.cost,
    )
    events.append(
        AskEvent(session.session_id, session.turn, choice.chosen, choice.rationale, choice.runners_up)
    )
    return events


async def investigate(session: Session, backend: Any = None, compute: Compute = inline) -> list[InquiryEvent]:
    """A domain that answers itself runs the pending question: its Evidence, then Belief and
    Ask or Answer, as after an observation."""
    pending = session.pending
    if pending is None or session.answer is not None:
        raise errors.FailedPrecondition("no question is pending", reason="NO_PENDING_QUESTION")
    if not session.spec.answers_itself:
        raise errors.FailedPrecondition(f"the {session.domain} domain's questions are answered by the client")
    # A domain registered as answering itself is a SelfAnsweringDomain.
    domain = cast(SelfAnsweringDomain, await compute(_domain, session))
    event = await domain.investigate(session.session_id, session.turn, pending.question_id, backend)
    session.predicted_gains.append(pending.predicted_gain)
    session.actual_gains.append(event.actual_gain)
    session.cost_spent += pending.cost
    session.pending = None
    return [event, *await advance(session, backend, compute)]


async def resume(session: Session, backend: Any = None, compute: Compute = inline) -> list[InquiryEvent]:
    """The events that bring a reconnecting client up to date: the Belief, then the pending
    Ask again (recomputed: selection is deterministic given the state) or the final Answer."""
    if session.answer is None and session.pending is not None:
        session.turn -= 1
        session.pending = None
    if session.answer is not None:
        session.answer = None
    return await advance(session, backend, compute)


def _answer(
    session: Session, domain: Domain, current: tuple[str, float], reason: str, forced: bool
) -> AnswerEvent:
    text, probability = current
    if reason == "no_viable_queries" and domain.belief().unknown_mass >= 1.0:
        confidence = Provenance.absent("every hypothesis was contradicted by the observations")
    elif probability >= 1.0:
        confidence = Provenance.deterministic(1.0, "the observations leave only this answer")
    else:
        confidence = Provenance(
            "derived",
            value=probability,
            formula="posterior probability of the answer",
            inputs={"entropy_bits": session.entropy_path[-1], "turns": float(session.turn)},
        )
    session.pending = None
    session.answer = SessionAnswer(text, reason, forced)
    return AnswerEvent(
        session.session_id,
        text,
        confidence,
        reason,
        forced,
        list(session.entropy_path),
        list(session.predicted_gains),
        list(session.actual_gains),
    )


async def observe(
    session: Session,
    question_id: str,
    answer: str,
    backend: Any = None,
    compute: Compute = inline,
    limits: InquiryLimits = InquiryLimits(),
) -> list[InquiryEvent]:
    """Apply the answer to the pending question and advance."""
    if len(answer) > limits.max_answer_chars:
        raise errors.InvalidArgument(
            f"answer is longer than {limits.max_answer_chars} characters", field="observation.answer"
        )
    if session.answer is not None:
        raise errors.FailedPrecondition("the session has already answered", reason="SESSION_FINISHED")
    if session.pending is None or question_id != session.pending.question_id:
        expected = session.pending.question_id if session.pending else "none"
        raise errors.InvalidArgument(
            f"question_id {question_id!r} is not the pending question ({expected})",
            field="observation.question_id",
        )
    await compute(_apply, session, question_id, answer)
    return await advance(session, backend, compute)


def _apply(session: Session, question_id: str, answer: str) -> None:
    pending = session.pending
    if pending is None:
        raise errors.FailedPrecondition("no question is pending", reason="NO_PENDING_QUESTION")
    domain = _domain(session)
    before = domain.belief().entropy_bits
    domain.observe(question_id, pending.question, answer)
    after = domain.belief().entropy_bits
    session.predicted_gains.append(pending.predicted_gain)
    session.actual_gains.append(before - after)
    session.cost_spent += pending.cost
    session.pending = None
