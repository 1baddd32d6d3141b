import asyncio

import pytest
from sounding.store import corpus_inquiry
from sounding.store.corpus_inquiry import CorpusInquiryLog, Verdict
from sounding.store.database import Database
from sounding.store.location import StoreLocation

pytestmark = pytest.mark.unit


def test_verdict_appends_are_compacted_and_found_by_an_indexed_session_id(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_inquiry, "WRITES_PER_COMPACTION", 5)

    async def run():
        log = await CorpusInquiryLog.open(await Database.open(StoreLocation(str(tmp_path))))
        for i in range(12):
            await log.append_verdict(Verdict(f"s{i}", "docs", "SUPPORT"))
        await log.compaction.settled()  # compaction runs in the background
        stats = await log._verdicts.stats()
        indexed = [
            index.columns for table in (log._verdicts, log._queries) for index in await table.list_indices()
        ]
        return (
            stats,
            indexed,
            [await log.observed(s) for s in ("s0", "s11", "s12")],
            len(await log.verdicts()),
        )

    stats, indexed, observed, count = asyncio.run(run())
    # Compacted after the 5th append, and after the 10th unless the first was still running
    # (uncompacted, 12 appends leave 12 fragments).
    assert stats["fragment_stats"]["num_fragments"] <= 8
    assert indexed == [["session_id"], ["session_id"]]
    assert observed == [True, True, False] and count == 12
