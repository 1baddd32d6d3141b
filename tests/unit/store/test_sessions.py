import asyncio
import time

import pyarrow as pa
import pytest
from sounding.store import sessions
from sounding.store.collections import Store
from sounding.store.database import Database
from sounding.store.location import StoreLocation
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit


def ref(session_id: str) -> ResourceRef:
    return ResourceRef("default", session_id)


def test_concurrent_saves_share_a_commit_and_each_session_keeps_its_latest_step(tmp_path):
    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        for i in range(8):
            await store.create_session(ref(f"s{i}"), "bulls_and_cows", "{}")

        async def save_all(step: int, state: str) -> None:
            await asyncio.gather(
                *(store.save_session(ref(f"s{i}"), step, "bulls_and_cows", f"{state} {i}") for i in range(8))
            )

        before = await store._sessions.version()
        await save_all(1, "state")
        after_first = await store._sessions.version()
        await save_all(2, "later")
        loaded = [await store.load_session(ref(f"s{i}")) for i in range(8)]
        return after_first - before, loaded

    commits, loaded = asyncio.run(run())
    assert commits == 1
    assert loaded == [("{}", f"later {i}") for i in range(8)]


def test_sessions_idle_past_the_cutoff_go_with_their_setups_and_others_stay(tmp_path):
    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        for name in ("old", "held", "legacy"):
            await store.create_session(ref(name), "bulls_and_cows", "{}")
            await store.save_session(ref(name), 1, "bulls_and_cows", f"{name} state")
        await store.create_session(ref("crashed"), "bulls_and_cows", "{}")  # no step ever saved
        await asyncio.sleep(0.01)
        cutoff = int(time.time() * 1e6)
        await asyncio.sleep(0.01)
        await store.create_session(ref("recent"), "bulls_and_cows", "{}")
        await store.save_session(ref("recent"), 1, "bulls_and_cows", "recent state")
        await store.create_session(ref("starting"), "bulls_and_cows", "{}")  # its first save is on its way
        # A data directory from before saves replaced their row: a recent row beside an older one.
        newer = {
            "session_id": ref("legacy").key,
            "step": 2,
            "domain": "bulls_and_cows",
            "state_json": "legacy 2",
        }
        await store._sessions.add(pa.Table.from_pylist([{**newer, "update_time_us": cutoff + 1}]))
        gone = await store.expire_sessions(cutoff, held=lambda key: key == ref("held"))
        names = ("old", "held", "legacy", "crashed", "recent")
        return gone, {name: await store.load_session(ref(name)) for name in names}, await _setup_ids(store)

    gone, loaded, setups = asyncio.run(run())
    assert gone == 2  # "old" and "crashed"
    assert loaded == {
        "old": None,
        "held": ("{}", "held state"),
        "legacy": ("{}", "legacy 2"),
        "crashed": None,
        "recent": ("{}", "recent state"),
    }
    assert setups == [ref(n).key for n in ("held", "legacy", "recent", "starting")]


def test_a_session_saved_while_the_expiry_looks_for_idle_ones_stays(tmp_path):
    """The idle sessions are found first and deleted batch by batch: one saved in between must
    keep its new state and its setup."""

    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        await store.create_session(ref("s"), "bulls_and_cows", "{}")
        await store.save_session(ref("s"), 1, "bulls_and_cows", "first")
        await asyncio.sleep(0.01)
        cutoff = int(time.time() * 1e6)
        await asyncio.sleep(0.01)

        original = sessions._session_ids

        async def found_then_saved(table, where, among=None):
            ids = await original(table, where, among)
            if where.startswith("update_time_us <"):  # the scan for idle sessions: save one now
                await store.save_session(ref("s"), 2, "bulls_and_cows", "second")
            return ids

        sessions._session_ids = found_then_saved
        try:
            gone = await store.expire_sessions(cutoff, held=lambda key: False)
        finally:
            sessions._session_ids = original
        return gone, await store.load_session(ref("s"))

    gone, loaded = asyncio.run(run())
    assert (gone, loaded) == (0, ("{}", "second"))


def test_expiring_nothing_commits_nothing(tmp_path):
    async def run():
        store = await Store.open(await Database.open(StoreLocation(str(tmp_path))))
        await store.create_session(ref("s"), "bulls_and_cows", "{}")
        await store.save_session(ref("s"), 1, "bulls_and_cows", "state")
        before = await store._sessions.version(), await store._session_setups.version()
        gone = await store.expire_sessions(0, held=lambda key: False)
        return gone, before, (await store._sessions.version(), await store._session_setups.version())

    gone, before, after = asyncio.run(run())
    assert gone == 0 and before == after


async def _setup_ids(store) -> list[str]:
    rows = await store._session_setups.query().select(["session_id"]).to_arrow()
    return sorted(rows.column("session_id").to_pylist())
