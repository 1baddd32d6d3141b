import asyncio
import random

import pytest
from sounding.inquiry import engine
from sounding.inquiry.protocol import Policy, Start
from sounding.inquiry.session import SessionAnswer
from sounding.learning.inquiry import (
    InquiryLearning,
    InquiryOutcome,
    StopThresholdRequest,
    _validate,
    one_per_session,
)
from sounding.learning.protocol import Rejected
from sounding.runtime import errors
from sounding.store.learning import InquiryState
from sounding.store.tenancy import DEFAULT_TENANT, ResourceRef

pytestmark = pytest.mark.unit


def state(session: str, turn: int) -> InquiryState:
    return InquiryState(
        session_id=session,
        task="gn",
        regime="normal",
        bucket="",
        turn=turn,
        scores={"mi_only": 0.1 * turn},
        error=False,
        nonconformity=0.0,
    )


def test_episode_level_calibration_keeps_one_state_of_each_session_drawn_by_its_id():
    states = [state("a", t) for t in range(5)] + [state("b", t) for t in range(3)] + [state("a", 5)]
    kept = one_per_session(states)
    assert [s.session_id for s in kept] == ["a", "b"]
    shuffled = states[:]
    random.Random(1).shuffle(shuffled)
    # Whatever order the log returns the states in, the same state of each session is drawn.
    assert sorted(one_per_session(shuffled), key=lambda s: s.session_id) == kept
    draws = {one_per_session([state(f"s{i}", t) for t in range(6)])[0].turn for i in range(40)}
    assert len(draws) > 3  # different sessions draw different states


def test_one_state_per_session_is_refused_with_inline_states():
    request = StopThresholdRequest("gn", "normal", one_state_per_session=True, states=(object(),))  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument) as refused:
        _validate(request)
    assert refused.value.field == "one_state_per_session"


def test_the_fixed_threshold_of_hypothesis_entropy_is_not_calibrated():
    with pytest.raises(errors.InvalidArgument, match="fixed") as refused:
        _validate(StopThresholdRequest("gn", "normal", stop_rule="hypothesis_entropy"))
    assert refused.value.field == "stop_rule"


class Sessions:
    """The stored sessions (the store's session part)."""

    def __init__(self, *sessions):
        self.stored = {
            ResourceRef(DEFAULT_TENANT, s.session_id): (s.setup_json(), s.to_json()) for s in sessions
        }

    async def load_session(self, key):
        return self.stored.get(key)


class Log:
    """The learning log's inquiry part, in memory."""

    def __init__(self):
        self.states: list[InquiryState] = []

    async def observed_sessions(self, session_ids):
        return set()

    async def append_inquiry_states(self, states):
        self.states.extend(states)


class CalibrationLog(Log):
    """The log's part that Calibrate(STOP_THRESHOLD) reads and writes, in memory."""

    def __init__(self, states):
        super().__init__()
        self.states = list(states)
        self.calibrations: list[tuple[str, int, dict, dict]] = []

    async def inquiry_states(self, task, regime, bucket=""):
        return [s for s in self.states if (s.task, s.regime) == (task, regime)]

    async def calibrations_with_prefix(self, prefix):
        return {}

    async def append_calibration(self, target, version, params, report):
        self.calibrations.append((target, version, params, report))


def test_an_episode_level_calibration_fits_one_state_of_each_recorded_session():
    # 12 sessions of 4 turns: 48 states, 12 sessions.
    states = [state(f"s{i}", t) for i in range(12) for t in range(4)]

    async def fitted(one_per_episode: bool) -> int:
        learning = InquiryLearning(CalibrationLog(states), Sessions(), CorpusLearner())  # type: ignore[arg-type]
        request = StopThresholdRequest(
            "gn", "normal", stop_rule="mi_only", one_state_per_session=one_per_episode
        )
        events = [event async for event in learning.calibrate(request)]
        return events[-1].sample_size

    assert asyncio.run(fitted(False)) == 48
    assert asyncio.run(fitted(True)) == 12


class CorpusLearner:
    def __init__(self):
        self.verdicts: list[tuple[str, str, str]] = []

    async def observe(self, session_id, collection, verdict):
        self.verdicts.append((session_id, collection, verdict))


def test_an_outcome_teaches_what_its_sessions_domain_learns_from():
    game = engine.start(Start("bulls_and_cows", Policy()))
    claim = engine.start(Start("corpus", Policy(), {"collection": "papers"}, context="Water boils at 100 C."))
    answered = engine.start(Start("corpus", Policy(), {"collection": "papers"}, context="Ice is cold."))
    answered.answer = SessionAnswer("SUPPORT", "confidence_reached", False)
    llm = engine.start(Start("llm", Policy(), {"task": "gn"}))
    corpus = CorpusLearner()
    learning = InquiryLearning(Log(), Sessions(game, claim, answered, llm), corpus)  # type: ignore[arg-type]
    outcomes = [InquiryOutcome(s.session_id, "SUPPORT") for s in (game, claim, answered, llm)]
    accepted, rejected = asyncio.run(learning.observe(list(enumerate(outcomes))))
    assert accepted == 2
    assert rejected == [
        Rejected(0, "FAILED_PRECONDITION", f"session {game.session_id!r} is not an llm or corpus inquiry"),
        Rejected(1, "FAILED_PRECONDITION", f"session {claim.session_id!r} has not answered yet"),
    ]
    assert corpus.verdicts == [(answered.session_id, "papers", "SUPPORT")]


def test_a_set_rules_threshold_is_chosen_by_no_prefix_rule():
    with pytest.raises(errors.InvalidArgument, match="set rule") as refused:
        _validate(StopThresholdRequest("gn", "normal", stop_rule="cip_lite", threshold_rule="largest_prefix"))
    assert refused.value.field == "threshold_rule"
