import asyncio

import pytest
from sounding.store.collections import Store
from sounding.store.location import StoreLocation

pytestmark = pytest.mark.unit


def test_concurrent_saves_share_a_commit_and_each_session_keeps_its_latest_step(tmp_path):
    async def run():
        store = await Store.open(StoreLocation(str(tmp_path)))
        for i in range(8):
            await store.create_session(f"s{i}", "bulls_and_cows", "{}")

        async def save_all(step: int, state: str) -> None:
            await asyncio.gather(
                *(store.save_session(f"s{i}", step, "bulls_and_cows", f"{state} {i}") for i in range(8))
            )

        before = await store._sessions.version()
        await save_all(1, "state")
        after_first = await store._sessions.version()
        await save_all(2, "later")
        loaded = [await store.load_session(f"s{i}") for i in range(8)]
        return after_first - before, loaded

    commits, loaded = asyncio.run(run())
    assert commits == 1
    assert loaded == [("{}", f"later {i}") for i in range(8)]
