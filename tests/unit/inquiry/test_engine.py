import asyncio

import pytest
from sounding.inquiry import engine
from sounding.inquiry.protocol import AnswerEvent, AskEvent, HypothesisIn, Policy, QuestionIn, Start
from sounding.runtime import errors

pytestmark = pytest.mark.unit

TRUTH = 11


def start_request(**policy) -> Start:
    hypotheses = tuple(HypothesisIn(f"h{i}") for i in range(16))
    questions = tuple(
        QuestionIn(f"bit{j}", f"bit {j}?", 1.0, {f"h{i}": "yes" if i >> j & 1 else "no" for i in range(16)})
        for j in range(4)
    )
    return Start("hypotheses", Policy(**policy), {"noise": "0.05"}, hypotheses, questions)


def answer(ask: AskEvent) -> str:
    return "yes" if TRUTH >> int(ask.chosen.question_id[3:]) & 1 else "no"


def play(session: engine.Session, reload_after: int | None = None) -> list:
    """Start the session and answer every Ask truthfully; optionally rebuild the session from
    its stored JSON on the way."""
    transcript = asyncio.run(engine.advance(session))
    while isinstance(transcript[-1], AskEvent):
        ask = transcript[-1]
        if reload_after is not None and ask.turn == reload_after:
            session = engine.Session.from_json(session.setup_json(), session.to_json())
            transcript.extend(asyncio.run(engine.resume(session)))
            ask = transcript[-1]
        transcript.extend(asyncio.run(engine.observe(session, ask.chosen.question_id, answer(ask))))
    return transcript


def test_a_reloaded_session_continues_exactly_as_an_uninterrupted_one():
    request = start_request(target_confidence=0.99)
    first = engine.start(request)
    uninterrupted = play(first)
    second = engine.start(request)
    resumed = play(second, reload_after=2)
    final, final_resumed = uninterrupted[-1], resumed[-1]
    assert isinstance(final, AnswerEvent) and final.answer == f"h{TRUTH}"
    assert (final_resumed.answer, final_resumed.stopping_reason) == (final.answer, final.stopping_reason)
    assert final_resumed.entropy_path == pytest.approx(final.entropy_path)


def test_the_stored_state_leaves_out_the_setup():
    session = engine.start(start_request())
    assert "questions" in session.setup_json()
    assert "questions" not in session.to_json()


def test_max_turns_forces_the_answer():
    session = engine.start(start_request(max_turns=2))
    final = play(session)[-1]
    assert final.stopping_reason == "max_queries_reached" and final.forced


def hypotheses_start(hypotheses: int, questions: int, **policy) -> Start:
    ids = [f"h{i}" for i in range(hypotheses)]
    return Start(
        "hypotheses",
        Policy(**policy),
        hypotheses=tuple(HypothesisIn(i) for i in ids),
        questions=tuple(
            QuestionIn(f"q{j}", "?", 1.0, {ids[0]: "yes", ids[-1]: "no"}) for j in range(questions)
        ),
    )


@pytest.mark.parametrize(
    "request_,field",
    [
        (hypotheses_start(1001, 1000), "start.questions"),  # a million and one cells
        (hypotheses_start(3, 2, max_turns=1001), "start.policy.max_turns"),
        (hypotheses_start(3, 2, question_selection="psychic"), "start.policy.question_selection"),
    ],
)
def test_starts_over_a_limit_or_naming_unknown_policies_name_the_field(request_, field):
    with pytest.raises(errors.InvalidArgument) as raised:
        engine.start(request_)
    assert raised.value.field == field


def test_a_hypothesis_prior_that_is_huge_but_finite_still_makes_a_distribution():
    start = hypotheses_start(2, 1)
    start = Start(
        "hypotheses",
        Policy(),
        hypotheses=(HypothesisIn("h0", prior=1e308), HypothesisIn("h1", prior=1e308)),
        questions=start.questions,
    )
    session = engine.start(start)
    assert session.domain_state["probabilities"] == pytest.approx([0.5, 0.5])


@pytest.mark.parametrize(
    "parameters,max_turns,refused",
    [
        ({"task": "dc", "samples": "4"}, 25, False),
        ({"task": "dc", "samples": "32"}, 25, True),
        ({"task": "dc", "samples": "32"}, 3, False),
    ],
)
def test_an_llm_session_whose_settings_could_generate_too_much_is_refused(parameters, max_turns, refused):
    start = Start(
        "llm",
        Policy(max_turns=max_turns),
        domain_parameters=parameters,
        hypotheses=(HypothesisIn("a", "Anna"), HypothesisIn("b", "Bob")),
        context="A case.",
    )
    if refused:
        with pytest.raises(errors.InvalidArgument) as raised:
            engine.start(start)
        assert raised.value.field == "start.domain_parameters.samples"
    else:
        engine.start(start)
