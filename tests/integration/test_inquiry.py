import asyncio
import time

import grpc
import pytest
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding.settings.config import ModelsSettings, Settings
from sounding.stack import Stack
from sounding_client import (
    Ask,
    AsyncClient,
    Belief,
    Client,
    Hypothesis,
    InquiryAnswer,
    InquiryPolicy,
    Question,
    SoundingError,
)

from .conftest import free_port

pytestmark = pytest.mark.integration


def oracle(secret: str, guess: str) -> str:
    table = bc.feedback_table()
    bulls, cows = divmod(int(table.table[table.index[guess], table.index[secret]]), bc.CODES_PER_FEEDBACK)
    return bc.feedback_sentence(bulls, cows)


def play(inquiry, secret: str, stop_after: int | None = None):
    events = []
    for event in inquiry:
        events.append(event)
        if isinstance(event, Ask):
            if stop_after is not None and event.turn > stop_after:
                inquiry.close()
                break
            inquiry.answer(oracle(secret, event.question))
    return events


def test_bulls_and_cows_game_streams_beliefs_questions_and_the_answer(client, stack):
    events = play(client.inquire("bulls_and_cows", InquiryPolicy(question_selection="eig")), "7031")
    answer = events[-1]
    assert isinstance(answer, InquiryAnswer)
    assert answer.answer == "7031" and answer.stopping_reason == "confidence_reached" and not answer.forced
    asks = [e for e in events if isinstance(e, Ask)]
    beliefs = [e for e in events if isinstance(e, Belief)]
    assert asks[-1].question == "7031" and len(asks) <= 8
    assert beliefs[0].entropy_bits == pytest.approx(12.2992, abs=1e-3)  # log2(5040)
    assert all(a.expected_information_gain >= 0 for a in asks) and asks[0].runners_up
    assert len(answer.entropy_bits) == len(asks) + 1
    assert answer.confidence.kind == "deterministic" and answer.confidence.value == 1.0


def test_the_async_client_plays_a_game_and_resumes_it(stack):
    policy = InquiryPolicy(question_selection="random_consistent", seed=5)

    async def play_async(inquiry, stop_after: int | None = None):
        events = []
        async for event in inquiry:
            events.append(event)
            if isinstance(event, Ask):
                if stop_after is not None and event.turn > stop_after:
                    inquiry.close()
                    break
                inquiry.answer(oracle("4096", event.question))
        return events

    async def run():
        async with AsyncClient(stack.settings.address, timeout=60) as client:
            first = client.inquire("bulls_and_cows", policy)
            partial = await play_async(first, stop_after=1)
            resumed = await play_async(client.resume_inquiry(first.session_id))
            return first.session_id, partial, resumed

    session_id, partial, resumed = asyncio.run(run())
    assert isinstance(partial[0], Belief) and isinstance(partial[-1], Ask)
    assert {e.session_id for e in partial + resumed} == {session_id}
    assert isinstance(resumed[-1], InquiryAnswer) and resumed[-1].answer == "4096"


def test_a_game_resumes_after_an_orchestrator_restart_with_the_same_result(client, stack):
    policy = InquiryPolicy(question_selection="random_consistent", seed=11)
    uninterrupted = play(client.inquire("bulls_and_cows", policy), "5820")
    first = client.inquire("bulls_and_cows", policy)
    partial = play(first, "5820", stop_after=2)
    session_id = first.session_id
    stack.kill_orchestrator()
    stack.start_orchestrator()
    resumed = play(client.resume_inquiry(session_id), "5820")
    asked_before = [e.question for e in partial if isinstance(e, Ask)][:2]
    asked_after = [e.question for e in resumed if isinstance(e, Ask)]
    expected = [e.question for e in uninterrupted if isinstance(e, Ask)]
    assert asked_before + asked_after == expected
    assert resumed[-1].answer == uninterrupted[-1].answer == "5820"
    assert len(resumed[-1].entropy_bits) == len(uninterrupted[-1].entropy_bits)


@pytest.mark.parametrize("bad_answer", ["three bulls", "3 1", "5 0"])
def test_malformed_feedback_is_invalid_argument_and_the_session_survives(client, stack, bad_answer):
    inquiry = client.inquire("bulls_and_cows")
    with pytest.raises(SoundingError) as raised:
        for event in inquiry:
            if isinstance(event, Ask):
                inquiry.answer(bad_answer)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.fields == ["observation.answer"]
    events = play(client.resume_inquiry(inquiry.session_id), "1234")
    assert events[-1].answer == "1234"


def test_contradictory_feedback_ends_with_no_viable_queries(client, stack):
    inquiry = client.inquire("bulls_and_cows")
    answers = iter(["0 0", "0 0", "0 0", "0 0"])
    events = []
    for event in inquiry:
        events.append(event)
        if isinstance(event, Ask):
            inquiry.answer(next(answers))
    answer = events[-1]
    assert isinstance(answer, InquiryAnswer)
    assert answer.stopping_reason == "no_viable_queries"
    assert answer.confidence.kind == "absent"
    assert events[-2].unknown_mass == 1.0


def test_hypotheses_domain_twenty_questions(client, stack):
    hypotheses = [Hypothesis(f"h{i}", f"animal {i}") for i in range(16)]
    questions = [
        Question(
            f"bit{j}",
            f"is bit {j} of the animal's number set?",
            {h.id: "yes" if (i >> j) & 1 else "no" for i, h in enumerate(hypotheses)},
        )
        for j in range(4)
    ] + [Question("useless", "is it an animal?", {h.id: "yes" for h in hypotheses})]
    inquiry = client.inquire("hypotheses", InquiryPolicy(target_confidence=0.9), hypotheses, questions)
    truth = 11
    events = []
    for event in inquiry:
        events.append(event)
        if isinstance(event, Ask):
            assert event.question_id != "useless"
            inquiry.answer("yes" if (truth >> int(event.question_id[3:])) & 1 else "no")
    assert events[-1].answer == "h11" and events[-1].stopping_reason == "confidence_reached"
    assert len([e for e in events if isinstance(e, Ask)]) == 4


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"domain": "chess"}, "start.domain"),
        (
            {"domain": "bulls_and_cows", "policy": InquiryPolicy(question_selection="psychic")},
            "start.policy.question_selection",
        ),
        ({"domain": "bulls_and_cows", "policy": InquiryPolicy(max_turns=5000)}, "start.policy.max_turns"),
        ({"domain": "hypotheses"}, "start.hypotheses"),
    ],
)
def test_bad_starts(client, stack, kwargs, field):
    with pytest.raises(SoundingError) as raised:
        list(client.inquire(**kwargs))
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.fields == [field]


def test_unknown_session_and_wrong_question_id(client, stack):
    with pytest.raises(SoundingError) as raised:
        list(client.resume_inquiry("no-such-session"))
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    inquiry = client.inquire("bulls_and_cows")
    with pytest.raises(SoundingError) as raised:
        for event in inquiry:
            if isinstance(event, Ask):
                inquiry.answer("1 1", question_id="not-the-question")
    assert raised.value.fields == ["observation.question_id"]


def test_the_bulls_and_cows_harness_plays_every_policy_and_lists_turns_per_secret(client, stack):
    from rich.console import Console
    from sounding_bench import inquiry as harness

    secrets = ["0435", "9876", "1203"]
    spec = harness.BullsAndCowsRun(tuple(secrets), "eig_lookahead", comparison_games=2)
    result = harness.bulls_and_cows(client, spec, Console(quiet=True))
    policies = result["policies"]
    assert list(policies) == ["eig_lookahead", "eig", "naive", "random_consistent"]
    assert list(policies["eig_lookahead"]["turns_by_secret"]) == secrets
    assert list(policies["eig"]["turns_by_secret"]) == ["0435", "1203"]
    for name, summary in policies.items():
        assert summary["solved"] == summary["games"], name
        assert sum(summary["turns_by_secret"].values()) / summary["games"] == pytest.approx(
            summary["mean_turns"], abs=1e-4
        )


RETENTION_S = 15


@pytest.fixture
def expiring_orchestrator(stack, tmp_path):
    """An orchestrator of its own (beside the session's sidecar) that deletes sessions idle
    for 15 s, looking every 1.5 s (long enough that a session resumed at once is resumed well
    within it, however slow the machine)."""
    settings = Settings(
        data_dir=tmp_path,
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=stack.settings.models.address),
    )
    running = Stack(
        settings,
        env={"SOUNDING_LIMITS__INQUIRY__SESSION_RETENTION_HOURS": str(RETENTION_S / 3600)},
        log_dir=tmp_path / "logs",
    )
    running.start_orchestrator()
    yield running
    running.stop()


@pytest.mark.slow
def test_an_idle_session_expires_and_one_a_stream_holds_does_not(expiring_orchestrator):
    with Client(expiring_orchestrator.settings.address, timeout=60) as client:
        idle = client.inquire("bulls_and_cows")
        play(idle, "5820", stop_after=1)
        held = client.inquire("bulls_and_cows")
        for event in held:
            if isinstance(event, Ask):
                if event.turn > 1:
                    held.close()
                    break
                time.sleep(RETENTION_S + 5)  # both sessions past the retention and a sweep
                held.answer(oracle("5820", event.question))
        # resumed at once: its setup must have survived the sweeps while the stream held it
        finished = play(client.resume_inquiry(held.session_id), "5820")
        with pytest.raises(SoundingError) as expired:
            list(client.resume_inquiry(idle.session_id))
    assert finished[-1].answer == "5820"
    assert expired.value.code == grpc.StatusCode.NOT_FOUND
    assert expired.value.reason == "SESSION_NOT_FOUND"
