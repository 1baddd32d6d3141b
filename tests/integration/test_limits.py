"""Hostile requests are refused without holding the server, and the orchestrator keeps answering
health checks while it refuses them or computes something heavy.

What these tests assert holds at any speed: every check is answered SERVING and none is held for
seconds, as a parse that froze (the hostile answers below once held the event loop for minutes)
or work done on the event loop would hold it; each window of checks is waited for, not timed.
How quickly health answers (the robustness target of bench/README.md, p99 under 100 ms) is
measured by `sounding eval fuzz`, not here: the machine running the tests may be busy."""

import time

import grpc
import pytest
from sounding.inquiry.domains import bulls_and_cows as bc
from sounding_bench.health import HealthWatch
from sounding_client import Ask, Hypothesis, InquiryAnswer, InquiryPolicy, Question, SoundingError

pytestmark = pytest.mark.integration

FROZEN_S = 10  # a check or a refusal held this long means something froze, however busy the machine


def watch_health(stack) -> HealthWatch:
    """A health watch checking every 10 ms, each check given far longer than a frozen server
    would hold it (a check timing out is counted as failed)."""
    return HealthWatch(stack.settings.address, interval_s=0.01, timeout_s=3 * FROZEN_S)


def checks_answered(health: HealthWatch, more: int, deadline_s: float = 120) -> None:
    """Waits until `health` has kept `more` checks beyond those it has now."""
    wanted = len(health.checks) + more
    give_up = time.monotonic() + deadline_s
    while len(health.checks) < wanted:
        assert time.monotonic() < give_up, f"{len(health.checks)} of {wanted} health checks in {deadline_s} s"
        time.sleep(0.01)


def assert_nothing_froze(health: HealthWatch) -> None:
    latencies = health.summary()
    assert latencies["not_serving"] == 0
    assert latencies["max_ms"] < FROZEN_S * 1000, latencies


HALF_SENTENCE = "1 digits are present in the answer and in the correct positions"


@pytest.mark.parametrize(
    "answer",
    [HALF_SENTENCE + "\n" * 64 + "1", " " * 10_000],
    ids=["the first half of the feedback sentence, 64 newlines and a digit", "10k whitespace"],
)
def test_a_hostile_answer_is_refused_without_holding_the_server_while_health_answers(client, stack, answer):
    inquiry = client.inquire("bulls_and_cows")
    sent = refused_after = float("nan")  # set by the answer and the refusal
    with watch_health(stack) as health:
        try:
            for event in inquiry:
                if isinstance(event, Ask):
                    checks_answered(health, 10)  # health checks before the answer, too
                    sent = time.monotonic()
                    inquiry.answer(answer)
            refused = None
        except SoundingError as error:
            refused, refused_after = error, time.monotonic() - sent
        checks_answered(health, 10)  # and after
    assert refused is not None and refused.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.fields == ["observation.answer"]
    assert refused_after < FROZEN_S
    assert_nothing_froze(health)


def test_a_start_over_the_size_limit_is_refused_naming_the_field(client, stack):
    hypotheses = [Hypothesis(f"h{i}", "x" * 1000) for i in range(9000)]  # about 9 MB
    questions = [Question("q", "is it h0?", {"h0": "yes"})]
    with pytest.raises(SoundingError) as raised:
        list(client.inquire("hypotheses", InquiryPolicy(), hypotheses, questions))
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.fields == ["start"]
    assert "8388608" in raised.value.message


@pytest.mark.parametrize(
    "start,field",
    [
        ({"policy": InquiryPolicy(cost_sensitivity=float("nan"))}, "start.policy.cost_sensitivity"),
        ({"policy": InquiryPolicy(seed=-1)}, "start.policy.seed"),
        ({"hypotheses": [Hypothesis("a", prior=float("inf"))]}, "start.hypotheses[0].prior"),
        ({"domain_parameters": {"k": "v" * 300}}, "start.domain_parameters.k"),
    ],
)
def test_non_finite_numbers_and_long_parameters_are_refused(client, stack, start, field):
    questions = [Question("q", "is it a?", {"a": "yes", "b": "no"})]
    options = {"hypotheses": [Hypothesis("a"), Hypothesis("b")], "questions": questions, **start}
    with pytest.raises(SoundingError) as raised:
        list(client.inquire("hypotheses", **options))
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.fields == [field]


@pytest.mark.slow
def test_bulls_and_cows_games_leave_health_answering(client, stack):
    """Every move scores the guesses against the consistent secrets in the compute threads: a run
    of games with every policy must not hold the event loop."""
    table = bc.feedback_table()
    turns = 0
    with watch_health(stack) as health:
        checks_answered(health, 1)  # watching from the first move
        for policy in bc.POLICIES:
            for secret in ("8402", "1357", "9876", "5640", "2971"):
                inquiry = client.inquire("bulls_and_cows", InquiryPolicy(question_selection=policy))
                for event in inquiry:
                    if isinstance(event, Ask):
                        turns += 1
                        code = int(table.table[table.index[event.question], table.index[secret]])
                        inquiry.answer(" ".join(map(str, divmod(code, bc.CODES_PER_FEEDBACK))))
                    if isinstance(event, InquiryAnswer):
                        assert event.answer == secret
        checks_answered(health, 10)  # and after the last
    assert turns >= 3 * 20
    assert_nothing_froze(health)


def test_observe_reports_each_rejection_at_its_stream_position(stack):
    """Found by the fuzz suite: rejections made at the edge, followed by an inquiry outcome,
    were mapped through the wrong positions (INTERNAL)."""
    from sounding_api.sounding.v1 import sounding_pb2, sounding_pb2_grpc

    stream = [
        sounding_pb2.ObserveRequest(retrieval_outcome=sounding_pb2.RetrievalOutcome(retrieval_id="nope")),
        sounding_pb2.ObserveRequest(),
        sounding_pb2.ObserveRequest(
            inquiry_outcome=sounding_pb2.InquiryOutcome(session_id="nope", ground_truth="x")
        ),
        sounding_pb2.ObserveRequest(),
        sounding_pb2.ObserveRequest(),
    ]
    with grpc.insecure_channel(stack.settings.address) as channel:
        response = sounding_pb2_grpc.SoundingServiceStub(channel).Observe(iter(stream), timeout=30)
    assert response.recorded == 0
    assert [(r.index, r.code) for r in response.rejected] == [
        (0, "NOT_FOUND"),
        (1, "INVALID_ARGUMENT"),
        (2, "NOT_FOUND"),
        (3, "INVALID_ARGUMENT"),
        (4, "INVALID_ARGUMENT"),
    ]


def test_batched_and_single_observations_share_the_stream_positions(client, demo_collection, stack):
    from sounding_api.sounding.v1 import sounding_pb2, sounding_pb2_grpc

    found = client.retrieve_final("demo", "how deep is the water under a ship", top_k=3)

    def outcome(retrieval_id: str) -> sounding_pb2.RetrievalOutcome:
        return sounding_pb2.RetrievalOutcome(retrieval_id=retrieval_id)

    stream = [
        sounding_pb2.ObserveRequest(retrieval_outcome=outcome("nope")),
        sounding_pb2.ObserveRequest(
            batch=sounding_pb2.ObservationBatch(
                observations=[
                    sounding_pb2.Observation(retrieval_outcome=outcome(found.retrieval_id)),
                    sounding_pb2.Observation(),
                    sounding_pb2.Observation(retrieval_outcome=outcome("nope either")),
                ]
            )
        ),
        sounding_pb2.ObserveRequest(retrieval_outcome=outcome(found.retrieval_id)),
    ]
    with grpc.insecure_channel(stack.settings.address) as channel:
        response = sounding_pb2_grpc.SoundingServiceStub(channel).Observe(iter(stream), timeout=30)
    assert response.recorded == 1
    assert [(r.index, r.code) for r in response.rejected] == [
        (0, "NOT_FOUND"),
        (2, "INVALID_ARGUMENT"),
        (3, "NOT_FOUND"),
        (4, "ALREADY_EXISTS"),
    ]


@pytest.mark.parametrize("score", [float("nan"), float("inf")])
def test_calibrate_refuses_a_state_that_is_not_finite(client, stack, score):
    from sounding_client import CalibrationState

    states = [CalibrationState(0.1 * i, i % 3 == 0) for i in range(20)] + [CalibrationState(score, False)]
    with pytest.raises(SoundingError) as raised:
        list(client.calibrate("stop_threshold", task="dc", regime="normal", states=states))
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.fields == ["states[20].score"]


def test_a_document_with_a_1_mib_title_is_refused_and_nothing_of_its_batch_is_written(client, stack):
    client.create_collection("limits-title")
    batches = [
        [{"id": "fine", "text": "a short note"}],
        [{"id": "ok", "text": "text"}, {"id": "huge", "title": "t" * 1_048_576, "text": "text"}],
    ]
    with pytest.raises(SoundingError) as raised:
        list(client.ingest("limits-title", [d for batch in batches for d in batch], batch_size=1))
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.fields == ["documents[0].title"]
    assert client.get_collection("limits-title").document_count == 2  # "fine" and "ok", not "huge"


def test_an_outcome_with_too_many_document_ids_is_rejected_alone(client, stack, demo_collection):
    from sounding_client import RetrievalOutcome

    final = client.retrieve_final("demo", "sound velocity", top_k=3, arms=["dense"])
    ack = client.observe(
        [
            RetrievalOutcome("nope", used_document_ids=tuple(f"d{i}" for i in range(1001))),
            RetrievalOutcome(final.retrieval_id, ("a",)),
        ]
    )
    assert ack.recorded == 1
    assert [(r.index, r.code) for r in ack.rejected] == [(0, "INVALID_ARGUMENT")]
