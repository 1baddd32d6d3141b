import asyncio
import json
import random
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from sounding.inquiry import engine
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.inquiry.llm import outcomes, tasks
from sounding.inquiry.llm.simulated import SimulatedGuesser
from sounding.inquiry.llm.tasks import consistent_guesses
from sounding.inquiry.protocol import AnswerEvent, AskEvent, Policy, Start

pytestmark = pytest.mark.unit

NO_LOW_DIGITS = [("0123", bc.feedback_sentence(0, 0))]


def gn(collapse=False) -> tasks.Problem:
    return tasks.Problem(tasks.TASK_SPECS["gn"], "", (), collapse)


def guesser(turns, collapse=False, seed=0) -> SimulatedGuesser:
    """A simulation, and `consistent`: the secrets consistent with `turns`."""
    backend = SimulatedGuesser(gn(collapse), 5, random.Random(seed))
    backend.consistent = backend.belief(turns)[0]
    return backend


def answers(backend, messages, n):
    return [json.loads(asyncio.run(backend.text(messages, 0.7, 0.95, 32)))["guess"] for _ in range(n)]


def test_the_consistent_secrets_follow_the_feedback():
    found = consistent_guesses(NO_LOW_DIGITS)
    assert len(found) == 6 * 5 * 4 * 3 and not any(set(s) & set("0123") for s in found)
    # A guess whose feedback does not parse only leaves the candidates' count unchanged.
    assert consistent_guesses([*NO_LOW_DIGITS, ("4567", "no idea")]) == found
    # Feedback no secret fits: every secret not yet guessed.
    impossible = [("0123", bc.feedback_sentence(0, 0)), ("0123", bc.feedback_sentence(4, 0))]
    assert len(consistent_guesses(impossible)) == 5040 - 1


def test_normal_answers_spread_over_the_consistent_secrets_and_state_their_probability():
    backend = guesser(NO_LOW_DIGITS)
    drawn = answers(backend, tasks.initial_prompt(gn(), NO_LOW_DIGITS, "skeptical"), 200)
    assert set(drawn) <= set(backend.consistent) and len(set(drawn)) > 120
    verbal = json.loads(
        asyncio.run(backend.text(tasks.verbalized_prompt(gn(), NO_LOW_DIGITS), 0.7, 0.95, 48))
    )
    assert verbal["confidence"] == 1
    only = [("0123", bc.feedback_sentence(0, 0)), ("4567", bc.feedback_sentence(4, 0))]
    certain = guesser(only)
    assert answers(certain, tasks.initial_prompt(gn(), only), 5) == ["4567"] * 5
    verbal = json.loads(asyncio.run(certain.text(tasks.verbalized_prompt(gn(), only), 0.7, 0.95, 48)))
    assert verbal["confidence"] == 10


def test_collapse_concentrates_the_draws_on_one_secret_and_states_certainty():
    backend = guesser(NO_LOW_DIGITS, collapse=True)
    drawn = Counter(answers(backend, tasks.initial_prompt(gn(True), NO_LOW_DIGITS), 400))
    top, count = drawn.most_common(1)[0]
    assert 0.85 < count / 400 < 0.95 and top in backend.consistent
    listed = json.loads(
        asyncio.run(backend.text(tasks.question_prompt(gn(True), NO_LOW_DIGITS, 5), 0.1, 1.0, 48))
    )
    assert listed[0] == top and len(listed) == 5 and set(listed) <= set(backend.consistent)
    verbal = json.loads(
        asyncio.run(backend.text(tasks.verbalized_prompt(gn(True), NO_LOW_DIGITS), 0.1, 1.0, 48))
    )
    assert verbal["confidence"] == 10


@pytest.mark.parametrize(("collapse", "low", "high"), [(False, 0.4, 0.6), (True, 0.85, 0.95)])
def test_a_revision_keeps_its_answer_at_the_regime_rate(collapse, low, high):
    backend = guesser(NO_LOW_DIGITS, collapse)
    initial = tasks.initial_prompt(gn(collapse), NO_LOW_DIGITS)
    first = backend.consistent[7]
    revision = tasks.revision_prompt(gn(collapse), NO_LOW_DIGITS, json.dumps({"guess": first}))
    kept = sum(a == first for a in answers(backend, revision, 1000)) / 1000
    # Kept answers, plus fresh draws that land on it again (the collapsed secret is another one).
    assert low < kept < high
    assert answers(backend, initial, 1)[0] in backend.consistent


def test_an_unknown_prompt_is_refused_and_guesses_embed_by_digit_positions():
    backend = guesser([])
    with pytest.raises(ValueError, match="does not know this prompt"):
        asyncio.run(backend.text([{"role": "user", "content": "hello"}], 0.7, 0.95, 32))
    vectors = asyncio.run(backend.embed(["1234", "1243", "no digits"]))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert vectors[0] @ vectors[1] == pytest.approx(0.5) and vectors[0] @ vectors[2] == 0.0
    with pytest.raises(ValueError, match="gn only"):
        SimulatedGuesser(tasks.Problem(tasks.TASK_SPECS["dc"], "case", ("a", "b")), 5, random.Random(0))


def play(secret: str, regime: str, max_turns: int = 12, context: str = ""):
    """A simulated session to its end, the client giving the true feedback; its events and states."""
    table = bc.feedback_table()
    start = Start(
        "llm",
        Policy(stop_rule="robust_mi_risk", max_turns=max_turns, seed=3),
        {
            "task": "gn",
            "policy_model": "simulated",
            "regime": regime,
            "signals": "all",
            "run_to_max_turns": "true",
        },
    )
    session = engine.start(replace(start, context=context))
    events = asyncio.run(engine.advance(session))
    while isinstance(events[-1], AskEvent):
        guess = events[-1].chosen.question
        code = int(table.table[table.index[guess], table.index[secret]])
        feedback = bc.feedback_sentence(*divmod(code, bc.CODES_PER_FEEDBACK))
        events = asyncio.run(engine.observe(session, events[-1].chosen.question_id, feedback))
    return events, session


def test_a_simulated_session_guesses_consistently_until_it_solves_and_its_states_are_judged():
    events, session = play("8402", "normal")
    assert isinstance(events[-1], AnswerEvent) and events[-1].answer == "8402"
    solved = events[-2]  # certain, and decided by no stop rule
    assert solved.stop_signals == [] and solved.top_hypotheses[0].description == "8402"
    turns = session.domain_state["turns"]
    for i, (guess, _) in enumerate(turns):
        assert guess in consistent_guesses(turns[:i])
    records = outcomes.state_records("s", session.domain_setup, session.domain_state, "8402")
    assert {r.task for r in records} == {tasks.SIMULATED_GN} and len(records) == len(turns)
    # Before the first guess nothing is known: every answer is wrong; at the solving state the
    # consistent secrets are few.
    assert records[0].error and records[0].scores["self_consistency"] > 0.5


def first_signals(regime: str, seed: int) -> dict:
    start = Start(
        "llm",
        Policy(stop_rule="robust_mi_risk", max_turns=1, seed=seed),
        {"task": "gn", "policy_model": "simulated", "regime": regime, "signals": "all"},
    )
    belief = asyncio.run(engine.advance(engine.start(start)))[0]
    return {s.rule: s.answers for s in belief.stop_signals}


@pytest.mark.parametrize("regime", ["normal", "collapse"])
def test_before_the_first_guess_only_collapse_fools_the_plain_rules_and_robust_mi_is_never_fooled(regime):
    """5,040 secrets are consistent at the start: answering there is always premature."""
    answered = Counter(
        rule for seed in range(40) for rule, answers in first_signals(regime, seed).items() if answers
    )
    if regime == "collapse":  # the plain samples agree on one secret most of the time
        assert answered["self_consistency"] >= 20 and answered["verbalized_confidence"] == 40
    else:
        assert answered["self_consistency"] == answered["verbalized_confidence"] == 0
    assert answered["robust_mi_risk"] == 0


def test_the_transcript_is_read_back_from_a_prompt_and_imagined_feedback_scores_a_guess():
    turns = [("0123", bc.feedback_sentence(0, 0)), ("4567", bc.feedback_sentence(2, 1))]
    from sounding.inquiry.llm.simulated import transcript_turns

    assert transcript_turns(tasks.initial_prompt(gn(), turns)[1]["content"]) == turns
    backend = guesser(turns)
    prompt = tasks.simulator_prompt(gn(), turns, "4598")
    imagined = [tasks.bulls_and_cows(asyncio.run(backend.text(prompt, 0.7, 0.95, 32))) for _ in range(50)]
    possible = {
        divmod(
            int(bc.feedback_table().table[bc.feedback_table().index["4598"], bc.feedback_table().index[s]]), 5
        )
        for s in backend.consistent
    }
    assert set(imagined) <= possible and len(set(imagined)) > 1


def test_a_simulated_session_refuses_an_answer_that_is_not_feedback():
    from sounding.runtime import errors

    start = Start(
        "llm",
        Policy(stop_rule="robust_mi_risk", max_turns=3, seed=0),
        {"task": "gn", "policy_model": "simulated"},
    )
    session = engine.start(start)
    ask = asyncio.run(engine.advance(session))[-1]
    with pytest.raises(errors.InvalidArgument) as raised:
        asyncio.run(engine.observe(session, ask.chosen.question_id, "warmer"))
    assert raised.value.field == "observation.answer"


def test_a_context_that_looks_like_a_transcript_is_not_read_by_the_simulation():
    context = "Q1: 0123\nA1: 1 2\n\nImagine the answer to the next question: 9999\n"
    events, _ = play("8402", "normal", max_turns=12, context=context)
    assert isinstance(events[-1], AnswerEvent) and events[-1].answer == "8402"
