"""The inquiry engine: sessions, the ask-or-answer loop, and resumable state.

After a start or an observation the engine emits a Belief and then either an Ask (the next
question, which the session now awaits an answer to) or the final Answer. A session's whole
state is JSON: the domain's setup (hypotheses, questions) saved once when it starts, and
everything the observations change saved after every step, so a resumed session continues
exactly where it was.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from sounding.core.information import StoppingConfig, default_stopping
from sounding.core.provenance import Provenance
from sounding.core.stop_rules import SESSION_STOP_RULES
from sounding.inquiry.domains.bulls_and_cows import POLICIES as BULLS_AND_COWS_POLICIES
from sounding.inquiry.domains.bulls_and_cows import BullsAndCows
from sounding.inquiry.domains.corpus import CORPUS_POLICIES, CorpusInquiry
from sounding.inquiry.domains.hypotheses import HYPOTHESES_POLICIES, HypothesisSet
from sounding.inquiry.domains.llm import LLM_POLICIES, LlmInquiry, Threshold
from sounding.inquiry.protocol import (
    AnswerEvent,
    AskEvent,
    BeliefEvent,
    Domain,
    InquiryEvent,
    Policy,
    Start,
)
from sounding.runtime import errors
from sounding.settings.limits import InquiryLimits

# Runs a move's CPU-bound part: `await compute(function, *args)`. The service passes a bounded
# thread pool; by default the work runs inline.
Compute = Callable[..., Awaitable[Any]]


async def inline(function: Callable[..., Any], *args: Any) -> Any:
    return function(*args)


@dataclass
class Session:
    session_id: str
    domain: str
    policy: Policy
    domain_setup: dict
    domain_state: dict
    turn: int = 0
    pending: dict | None = None
    cost_spent: float = 0.0
    entropy_path: list[float] = field(default_factory=list)
    predicted_gains: list[float] = field(default_factory=list)
    actual_gains: list[float] = field(default_factory=list)
    answer: dict | None = None
    # Number of times the session was saved; the store keeps the latest.
    saves: int = 0
    # The live domain object, rebuilt from setup and state only when a session is loaded.
    live: Domain | None = field(default=None, repr=False, compare=False)

    def setup_json(self) -> str:
        return json.dumps(self.domain_setup)

    def to_json(self) -> str:
        """Everything but the setup (see `setup_json`)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("domain_setup", "live")}
        data["policy"] = asdict(self.policy)
        data["policy"]["cost_budget"] = _finite_or_none(self.policy.cost_budget)
        return json.dumps(data)

    @classmethod
    def from_json(cls, setup_json: str, state_json: str) -> Session:
        data = json.loads(state_json)
        policy = data.pop("policy")
        if policy["cost_budget"] is None:
            policy["cost_budget"] = math.inf
        return cls(policy=Policy(**policy), domain_setup=json.loads(setup_json), **data)


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


DOMAINS: dict[str, tuple[tuple[str, ...], Callable[[dict, dict], Domain]]] = {
    BullsAndCows.name: (BULLS_AND_COWS_POLICIES, BullsAndCows.from_state),
    HypothesisSet.name: (HYPOTHESES_POLICIES, HypothesisSet.from_state),
    LlmInquiry.name: (LLM_POLICIES, LlmInquiry.from_state),
    CorpusInquiry.name: (CORPUS_POLICIES, CorpusInquiry.from_state),
}


def validate_policy(policy: Policy, domain: str, limits: InquiryLimits = InquiryLimits()) -> None:
    known = DOMAINS[domain][0]
    if policy.question_selection not in known:
        raise errors.InvalidArgument(
            f"question_selection {policy.question_selection[:64]!r} is not one of {', '.join(known)}",
            field="start.policy.question_selection",
        )
    if domain == LlmInquiry.name:
        if policy.stop_rule not in SESSION_STOP_RULES:
            raise errors.InvalidArgument(
                f"stop_rule must be one of {', '.join(SESSION_STOP_RULES)}", field="start.policy.stop_rule"
            )
    elif policy.stop_rule != "default":
        raise errors.InvalidArgument(
            "stop_rule must be 'default' for this domain", field="start.policy.stop_rule"
        )
    max_turns = limits.llm_max_turns if domain == LlmInquiry.name else limits.max_turns
    if not 1 <= policy.max_turns <= max_turns:
        raise errors.InvalidArgument(f"max_turns must be in [1, {max_turns}]", field="start.policy.max_turns")
    if not 0 < policy.target_confidence <= 1:
        raise errors.InvalidArgument(
            "target_confidence must be in (0, 1]", field="start.policy.target_confidence"
        )


def validate_start(request: Start, limits: InquiryLimits = InquiryLimits()) -> None:
    """What every domain's start must respect beyond the rules InquiryStart declares (checked
    before: `validation`): the domain and policy names, and the deployment's limits on counts and
    lengths (each violation names its field)."""
    if request.domain not in DOMAINS:
        raise errors.InvalidArgument(
            f"domain {request.domain[:64]!r} is not one of {', '.join(sorted(DOMAINS))}", field="start.domain"
        )
    validate_policy(normalized(request).policy, request.domain, limits)
    if request.domain == LlmInquiry.name:
        LlmInquiry.task_and_regime(request.domain_parameters)
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


def normalized(request: Start) -> Start:
    """The request with the domain's default policy names filled in: questions by `eig`, except
    the llm domain's, which come from direct prompting; the llm domain's default stop rule is
    robust_mi_risk."""
    policy = request.policy
    if policy.question_selection == "default":
        default = LLM_POLICIES[0] if request.domain == LlmInquiry.name else "eig"
        policy = replace(policy, question_selection=default)
    if request.domain == LlmInquiry.name and policy.stop_rule == "default":
        policy = replace(policy, stop_rule="robust_mi_risk")
    return replace(request, policy=policy)


def start(
    request: Start,
    thresholds: Mapping[str, Mapping[str, Threshold]] | None = None,
    limits: InquiryLimits = InquiryLimits(),
) -> Session:
    """A new session; `thresholds` are the llm domain's calibrated stop thresholds by rule and
    homogeneity bucket."""
    validate_start(request, limits)
    request = normalized(request)
    if request.domain == BullsAndCows.name:
        domain: Domain = BullsAndCows()
    elif request.domain == CorpusInquiry.name:
        domain = CorpusInquiry.from_request(
            request.policy, request.context, request.hypotheses, request.domain_parameters, limits
        )
    elif request.domain == LlmInquiry.name:
        domain = LlmInquiry.from_request(
            request.policy,
            request.context,
            request.hypotheses,
            request.domain_parameters,
            thresholds or {},
            limits,
        )
    else:
        domain = HypothesisSet.from_request(
            request.hypotheses, request.questions, dict(request.domain_parameters)
        )
    return Session(
        uuid.uuid4().hex, request.domain, request.policy, domain.setup(), domain.state(), live=domain
    )


def _domain(session: Session) -> Domain:
    if session.live is None:
        session.live = DOMAINS[session.domain][1](session.domain_setup, session.domain_state)
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
    if not reason and getattr(domain, "stops_on_confidence", True):
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
    session.pending = {
        "question_id": choice.chosen.question_id,
        "question": choice.chosen.question,
        "predicted_gain": choice.chosen.expected_information_gain,
        "cost": choice.chosen.cost,
    }
    events.append(
        AskEvent(session.session_id, session.turn, choice.chosen, choice.rationale, choice.runners_up)
    )
    return events


def answers_itself(session: Session) -> bool:
    """Whether the session's domain runs its own questions (the client sends no observations)."""
    return session.domain == CorpusInquiry.name


async def investigate(session: Session, backend: Any = None, compute: Compute = inline) -> list[InquiryEvent]:
    """A domain that answers itself runs the pending question: its Evidence, then Belief and
    Ask or Answer, as after an observation."""
    pending = session.pending
    if pending is None or session.answer is not None:
        raise errors.FailedPrecondition("no question is pending", reason="NO_PENDING_QUESTION")
    domain = await compute(_domain, session)
    if not isinstance(domain, CorpusInquiry):
        raise errors.FailedPrecondition(f"the {session.domain} domain's questions are answered by the client")
    event = await domain.investigate(session.session_id, session.turn, pending["question_id"], backend)
    session.predicted_gains.append(pending["predicted_gain"])
    session.actual_gains.append(event.actual_gain)
    session.cost_spent += pending["cost"]
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
    session.answer = {"answer": text, "reason": reason, "forced": forced}
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
    if session.pending is None or question_id != session.pending["question_id"]:
        expected = session.pending["question_id"] if session.pending else "none"
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
    domain.observe(question_id, pending["question"], answer)
    after = domain.belief().entropy_bits
    session.predicted_gains.append(pending["predicted_gain"])
    session.actual_gains.append(before - after)
    session.cost_spent += pending["cost"]
    session.pending = None
