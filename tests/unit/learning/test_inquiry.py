import random

import pytest
from sounding.learning.inquiry import StopThresholdRequest, _validate, one_per_session
from sounding.runtime import errors
from sounding.store.learning import InquiryState

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
