"""Two orchestrators on one store: an outcome acknowledged by one reaching the other's selector,
and counted once; a session one drives busy on the other until the first is killed. (Several
writing one store at once, on a local directory and on object storage: test_balanced.py.)"""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sounding_client import Ask, Client, InquiryAnswer, InquiryPolicy, Plan, RetrievalOutcome, SoundingError

from .conftest import replica
from .test_inquiry import oracle, play

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCUMENTS_EACH = 12


def documents(prefix: str) -> list[dict]:
    return [
        {
            "id": f"{prefix}-{i}",
            "text": f"Report {prefix} {i}: the sounding line read {i + 3} fathoms at the {prefix} buoy.",
        }
        for i in range(DOCUMENTS_EACH)
    ]


def plan_scores(client: Client, collection: str, query: str, arms: tuple[str, ...] = ()) -> dict[str, float]:
    """The plan's scores; with every arm requested, each arm's own one-arm plan's upper score, a
    function of the learned state alone (the selector's own plans also depend on each process's
    plan counter and measured arm costs)."""
    for event in client.retrieve(collection, query, top_k=3, arms=list(arms)):
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
            arms = tuple(plan_scores(here, "soundings", query))
            before = plan_scores(there, "soundings", query, arms)
            final = here.retrieve_final("soundings", query, top_k=3)
            outcome = RetrievalOutcome(final.retrieval_id, (final.hits[0].document_id,), feedback="helpful")
            assert here.observe([outcome]).recorded == 1
            deadline = time.monotonic() + 120  # the follow interval is 0.5 s; generous for a busy machine
            while (theirs := plan_scores(there, "soundings", query, arms)) == pytest.approx(before, rel=1e-6):
                assert time.monotonic() < deadline, "the other orchestrator never learned the outcome"
                time.sleep(0.2)
            assert theirs == pytest.approx(plan_scores(here, "soundings", query, arms), rel=1e-5)
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
