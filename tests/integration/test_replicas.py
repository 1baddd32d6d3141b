"""Several orchestrators writing one store at once, on a local directory and on object storage
(moto): collections created and deleted from both, documents ingested and outcomes observed
through both in parallel, and a later orchestrator finding everything either acknowledged; an
outcome acknowledged by one reaching the other's selector, and counted once."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from sounding_client import Ask, Client, InquiryAnswer, InquiryPolicy, Plan, RetrievalOutcome, SoundingError

from .conftest import replica
from .test_inquiry import oracle, play

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCUMENTS_EACH = 12
SECRETS = {"north": "4096", "south": "7031"}


def documents(prefix: str) -> list[dict]:
    return [
        {
            "id": f"{prefix}-{i}",
            "text": f"Report {prefix} {i}: the sounding line read {i + 3} fathoms at the {prefix} buoy.",
        }
        for i in range(DOCUMENTS_EACH)
    ]


def work(address: str, prefix: str, start: threading.Barrier) -> dict:
    """One replica's share: race the other for the collection `shared`, ingest its documents,
    retrieve and observe some of them, create and delete a collection of its own, and play two
    turns of an inquiry (left open)."""
    with Client(address) as client:
        inquiry = client.inquire("bulls_and_cows", InquiryPolicy(question_selection="eig"))
        play(inquiry, SECRETS[prefix], stop_after=2)
        start.wait()
        try:
            client.create_collection("shared")
            created = True
        except SoundingError as error:
            assert error.code == grpc.StatusCode.ALREADY_EXISTS
            created = False
        start.wait()  # both know it exists before either ingests
        list(client.ingest("shared", documents(prefix)))
        outcomes = []
        for i in range(0, DOCUMENTS_EACH, 3):
            final = client.retrieve_final("shared", f"{prefix} buoy {i + 3} fathoms", top_k=3)
            outcomes.append(RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,)))
        observed = client.observe(outcomes)
        own = f"own-{prefix}"
        client.create_collection(own)
        list(client.ingest(own, documents(own)[:2]))
        client.delete_collection(own)
        return {
            "created": created,
            "session": inquiry.session_id,
            "observed": observed.recorded,
            "sent": len(outcomes),
        }


@pytest.fixture(params=["local directory", "object storage"])
def store(request, tmp_path):
    """(data directory of the replicas, environment) for a store of either kind."""
    if request.param == "local directory":
        return lambda name: tmp_path / "shared", {}
    _, _, env = request.getfixturevalue("object_store")
    return lambda name: tmp_path / name, env


def test_two_orchestrators_write_one_store_at_once_and_a_third_finds_all_they_acknowledged(
    stack, store, tmp_path
):
    data_dir, env = store
    replicas = [replica(stack, data_dir(name), tmp_path / name / "logs", env) for name in ("a", "b")]
    try:
        with ThreadPoolExecutor(2) as pool:  # both open the store at once
            list(pool.map(lambda r: r.start_orchestrator(), replicas))
        start = threading.Barrier(2)
        with ThreadPoolExecutor(2) as pool:
            addresses = [running.settings.address for running in replicas]
            shares = list(pool.map(work, addresses, ("north", "south"), (start, start)))
    finally:
        for running in replicas:
            running.stop()

    assert sorted(share["created"] for share in shares) == [False, True]  # exactly one created it
    for share in shares:
        assert share["observed"] == share["sent"]
    later = replica(stack, data_dir("c"), tmp_path / "c" / "logs", env)
    later.start_orchestrator()
    try:
        with Client(later.settings.address) as client:
            assert [c.name for c in client.list_collections()] == ["shared"]
            assert client.get_collection("shared").document_count == 2 * DOCUMENTS_EACH
            found = client.retrieve_final("shared", "the south buoy read 7 fathoms", top_k=1)
            assert found.hits[0].document_id == "south-4"
            assert client.strategy_metrics().observations == sum(s["sent"] for s in shares)
            for share, secret in zip(shares, SECRETS.values(), strict=True):
                events = play(client.resume_inquiry(share["session"]), secret)
                # The question pending when the stream closed: after two answers, the third.
                assert next(e for e in events if isinstance(e, Ask)).turn == 3
                assert isinstance(events[-1], InquiryAnswer) and events[-1].answer == secret
    finally:
        later.stop()


def plan_scores(client: Client, collection: str, query: str) -> dict[str, float]:
    for event in client.retrieve(collection, query, top_k=3):
        if isinstance(event, Plan):
            return {a.arm: a.score for a in event.arms}
    raise AssertionError("no plan")


def test_two_orchestrators_share_what_they_learn_and_a_session_is_driven_by_one_until_it_dies(
    stack, tmp_path
):
    """An outcome acknowledged by one reaches the other's selector and counts once; a session
    one drives is busy on the other until the first is killed, then resumes there."""
    replicas = [replica(stack, tmp_path / "store", tmp_path / name / "logs", {}) for name in ("a", "b")]
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda r: r.start_orchestrator(), replicas))
        with Client(replicas[0].settings.address) as here, Client(replicas[1].settings.address) as there:
            here.create_collection("soundings")
            list(here.ingest("soundings", documents("east")))
            query = "the east buoy read 5 fathoms"
            before = plan_scores(there, "soundings", query)
            final = here.retrieve_final("soundings", query, top_k=3)
            outcome = RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,), feedback="helpful")
            assert here.observe([outcome]).recorded == 1
            deadline = time.monotonic() + 120  # the follow interval is 0.5 s; generous for a busy machine
            while (theirs := plan_scores(there, "soundings", query)) == pytest.approx(before, rel=1e-6):
                assert time.monotonic() < deadline, "the other orchestrator never learned the outcome"
                time.sleep(0.2)
            assert theirs == pytest.approx(plan_scores(here, "soundings", query), rel=1e-5)
            assert [r.code for r in there.observe([outcome]).rejected] == ["ALREADY_EXISTS"]
            # An outcome sent to the other orchestrator at once, before the first logs its retrieval.
            fresh = here.retrieve_final("soundings", "the east buoy read 9 fathoms", top_k=3)
            fresh_outcome = RetrievalOutcome(fresh.retrieval_id, (fresh.hits[0].document_id,))
            assert there.observe([fresh_outcome]).recorded == 1
            assert [r.code for r in here.observe([fresh_outcome]).rejected] == ["ALREADY_EXISTS"]
            inquiry = here.inquire("bulls_and_cows", InquiryPolicy(question_selection="eig"))
            stream = iter(inquiry)  # kept: the stream stays open, holding the session
            for event in stream:
                if isinstance(event, Ask):
                    if event.turn > 1:
                        break  # turn 2 asked
                    inquiry.answer(oracle("2580", event.question))
            with pytest.raises(SoundingError) as busy:
                list(there.resume_inquiry(inquiry.session_id, timeout=60))
            assert busy.value.reason == "SESSION_BUSY"
            replicas[0].kill_orchestrator()  # kill -9: its hold is left to expire
            deadline = time.monotonic() + 120  # the hold's TTL is 10 s; generous for a busy machine
            while True:
                try:
                    events = play(there.resume_inquiry(inquiry.session_id), "2580")
                    break
                except SoundingError as error:
                    assert error.reason == "SESSION_BUSY" and time.monotonic() < deadline
                    time.sleep(0.5)
    finally:
        for running in replicas:
            running.stop()
    assert next(e for e in events if isinstance(e, Ask)).turn == 2  # resumed where it was
    assert isinstance(events[-1], InquiryAnswer) and events[-1].answer == "2580"
