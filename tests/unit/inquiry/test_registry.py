"""A domain is a plug-in: a toy domain defined here, registered with one line, runs through the
same engine and service paths as the shipped ones (start, ask, observe, store, resume, answer),
and its spec alone decides its defaults, what it refuses, its backend and its open-session limit."""

import asyncio
import math

import pytest
from sounding.inquiry import engine, registry
from sounding.inquiry.protocol import (
    AnswerEvent,
    AskEvent,
    BeliefEvent,
    BeliefView,
    Choice,
    Policy,
    ScoredHypothesis,
    ScoredQuestion,
    Start,
)
from sounding.inquiry.service import InquiryService, ObservationRequest, ResumeRequest
from sounding.runtime import errors
from sounding.settings.limits import InquiryLimits

from .test_service import MemoryHolds

pytestmark = pytest.mark.unit


class Die:
    """The toy domain: which face a die shows, found by asking whether it is above a face."""

    name = "die"

    def __init__(self, setup: dict, state: dict):
        self.faces: int = setup["faces"]
        self.low: int = state["low"]
        self.high: int = state["high"]

    @staticmethod
    def faces_of(parameters) -> int:
        faces = parameters.get("faces", "6")
        if not faces.isdigit() or int(faces) < 2:
            raise errors.InvalidArgument(
                "faces must be a whole number from 2", field="start.domain_parameters.faces"
            )
        return int(faces)

    @classmethod
    def from_request(cls, request: Start, calibrated: registry.Calibrated, limits: InquiryLimits) -> "Die":
        faces = cls.faces_of(request.domain_parameters)
        return cls({"faces": faces}, {"low": 1, "high": faces})

    async def think(self, policy: Policy, turn: int, backend: object) -> None:
        """Nothing to precompute."""

    def belief(self) -> BeliefView:
        left = range(self.low, self.high + 1)
        return BeliefView(
            math.log2(len(left)),
            math.log2(self.faces),
            [ScoredHypothesis(str(face), "", 1 / len(left)) for face in left],
            0.0,
            1 / len(left),
        )

    def choose(self, policy: Policy, turn: int) -> Choice | None:
        middle = (self.low + self.high) // 2
        question = ScoredQuestion(f"above_{middle}", f"Is it above {middle}?", 1.0, 1.0)
        return Choice(question, "halves the faces left", [])

    def observe(self, question_id: str, question: str, answer: str) -> None:
        middle = int(question_id.removeprefix("above_"))
        if answer == "yes":
            self.low = middle + 1
        else:
            self.high = middle

    def finished(self) -> str:
        return ""

    def answer(self) -> tuple[str, float]:
        return str(self.low), 1 / (self.high - self.low + 1)

    def setup(self) -> dict:
        return {"faces": self.faces}

    def state(self) -> dict:
        return {"low": self.low, "high": self.high}


DIE = registry.DomainSpec(
    name=Die.name,
    selections=("halving",),
    default_selection="halving",
    from_request=Die.from_request,
    from_state=Die,
    check_parameters=Die.faces_of,
    open_session_limit=lambda limits: 1,
)


@pytest.fixture
def die_registered(monkeypatch):
    monkeypatch.setitem(registry.DOMAINS, DIE.name, DIE)


class MemoryStore:
    """The session part of the Store contract, in memory."""

    def __init__(self):
        self.setups, self.states = {}, {}
        self.session_holds = MemoryHolds()

    async def create_session(self, key, domain, setup_json):
        self.setups[key] = setup_json

    async def save_session(self, key, step, domain, state_json):
        self.states[key] = state_json

    async def load_session(self, key):
        return (self.setups[key], self.states[key]) if key in self.states else None


async def requests(*items, hold: asyncio.Event | None = None):
    for item in items:
        yield item
    if hold is not None:
        await hold.wait()


def truthful(ask: AskEvent, face: int) -> ObservationRequest:
    above = int(ask.chosen.question_id.removeprefix("above_"))
    return ObservationRequest(ask.chosen.question_id, "yes" if face > above else "no")


def test_a_registered_toy_domain_runs_a_stored_and_resumed_session_to_its_answer(die_registered):
    kinds = []
    service = InquiryService(MemoryStore(), backend=lambda session_id, tenant, kind: kinds.append(kind))
    face = 5

    async def run():
        # Every answer comes on a new stream that resumes the session from the store.
        events = [e async for e in service.run(requests(Start("die", Policy(), {"faces": "8"})))]
        while isinstance(events[-1], AskEvent):
            resumed = requests(ResumeRequest(events[-1].session_id), truthful(events[-1], face))
            events += [e async for e in service.run(resumed)][2:]  # past the Belief and Ask again
        return events

    events = asyncio.run(run())
    assert isinstance(events[0], BeliefEvent) and events[0].entropy_bits == pytest.approx(3.0)
    final = events[-1]
    assert isinstance(final, AnswerEvent)
    assert (final.answer, final.stopping_reason, final.forced) == (str(face), "confidence_reached", False)
    assert final.entropy_path == pytest.approx([3.0, 2.0, 1.0, 0.0])
    assert set(kinds) == {"generators"}


def test_the_toy_domains_spec_fills_its_defaults_and_refuses_what_it_does_not_accept(die_registered):
    session = engine.start(Start("die", Policy()))
    assert (session.policy.question_selection, session.policy.stop_rule) == ("halving", "default")
    too_long = "?" * (InquiryLimits().max_context_chars + 1)
    refusals = [
        (Start("die", Policy(question_selection="eig")), "start.policy.question_selection"),
        (Start("die", Policy(stop_rule="robust_mi_risk")), "start.policy.stop_rule"),
        (Start("die", Policy(max_turns=InquiryLimits().max_turns + 1)), "start.policy.max_turns"),
        # The domain's parameter check comes before the deployment's limits.
        (Start("die", Policy(), {"faces": "many"}, context=too_long), "start.domain_parameters.faces"),
    ]
    for start, field in refusals:
        with pytest.raises(errors.InvalidArgument) as refused:
            engine.start(start)
        assert refused.value.field == field


def test_the_toy_domains_open_session_limit_refuses_a_second_stream(die_registered):
    service = InquiryService(MemoryStore())

    async def run():
        hold = asyncio.Event()
        first = service.run(requests(Start("die", Policy()), hold=hold))
        await anext(first)
        with pytest.raises(errors.ResourceExhausted) as refused:
            await anext(service.run(requests(Start("die", Policy()))))
        hold.set()
        await first.aclose()
        return refused.value

    assert asyncio.run(run()).reason == "TOO_MANY_DIE_SESSIONS"


def test_an_unregistered_domain_is_refused():
    with pytest.raises(errors.InvalidArgument) as refused:
        engine.start(Start("die", Policy()))
    assert refused.value.field == "start.domain"
    assert "bulls_and_cows, corpus, hypotheses, llm" in str(refused.value)


def test_every_shipped_domain_is_registered_under_its_own_name():
    assert list(registry.DOMAINS) == ["bulls_and_cows", "hypotheses", "llm", "corpus"]
    assert all(name == spec.name for name, spec in registry.DOMAINS.items())
    assert all(spec.default_selection in spec.selections for spec in registry.DOMAINS.values())
