import asyncio

import pytest
from sounding.store import learning
from sounding.store.database import Database
from sounding.store.learning import InquiryState, LearningLog
from sounding.store.location import StoreLocation

pytestmark = pytest.mark.unit


def states(session: str) -> list[InquiryState]:
    fields = {"task": "gn", "regime": "normal", "bucket": "low", "scores": {"mi_only": 0.5}}
    return [
        InquiryState(session_id=session, turn=t, error=False, nonconformity=0.5, **fields) for t in (0, 1)
    ]


def test_inquiry_state_appends_are_compacted_and_found_by_an_indexed_session_id(tmp_path, monkeypatch):
    """One commit per Observe: uncompacted, every later read opens every fragment ever written."""
    monkeypatch.setattr(learning, "WRITES_PER_COMPACTION", 5)

    async def run():
        log = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))))
        for i in range(12):
            await log.append_inquiry_states(states(f"s{i}"))
        await log.compaction.settled()  # compaction runs in the background
        stats = await log._inquiry_states.stats()
        indexed = [index.columns for index in await log._inquiry_states.list_indices()]
        found = await log.observed_sessions(["s3", "s11", "s12"])
        recorded = await log.inquiry_states("gn", "normal")
        return stats, indexed, found, recorded

    stats, indexed, found, recorded = asyncio.run(run())
    # Compacted after the 5th append, and after the 10th unless the first was still running
    # (uncompacted, 12 appends leave 12 fragments).
    assert stats["fragment_stats"]["num_fragments"] <= 8
    assert ["session_id"] in indexed
    assert found == {"s3", "s11"}
    assert len(recorded) == 24 and {s.turn for s in recorded} == {0, 1}


def test_a_log_left_fragmented_is_compacted_when_it_opens(tmp_path, monkeypatch):
    """A process that stopped before its next compaction leaves fragments the next one must not
    read through until its own count comes round."""
    monkeypatch.setattr(learning, "WRITES_PER_COMPACTION", 5)

    async def run():
        log = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))))
        for i in range(5):
            await log.append_inquiry_states(states(f"s{i}"))
        await log.compaction.settled()
        table = log._inquiry_states
        rows = await table.query().limit(2).to_arrow()
        for _ in range(6):  # written past the last compaction, as if by a process that stopped there
            await table.add(rows)
        left = (await table.stats())["fragment_stats"]["num_small_fragments"]
        reopened = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))))
        after = (await reopened._inquiry_states.stats())["fragment_stats"]["num_small_fragments"]
        return left, after, len(await reopened.inquiry_states("gn", "normal"))

    left, after, recorded = asyncio.run(run())
    assert left > 5 and after <= 2
    assert recorded == 2 * 5 + 2 * 6


def test_an_observation_keeps_its_plan_rewards_and_an_older_one_has_none(tmp_path):
    async def run():
        log = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))))
        rewarded = {"dense": 0.5, "dense+lexical": 0.75}
        await log.append_observations(
            [
                learning.ObservationRecord(0, "r0", OUTCOME, {"dense": 0.5}, plan_rewards=rewarded),
                learning.ObservationRecord(1, "r1", OUTCOME, {"dense": 0.5}),
            ]
        )
        return [o.plan_rewards for o in await log.observations()], rewarded

    stored, rewarded = asyncio.run(run())
    assert stored == [rewarded, None]


OUTCOME = {
    "used_document_ids": ["d1"],
    "feedback": "",
    "agent_success": None,
    "found_missing_content": False,
    "missed_document_ids": [],
}
