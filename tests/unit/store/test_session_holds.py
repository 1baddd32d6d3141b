"""Session holds against a real LanceDB directory, as two orchestrators on one store see them."""

import asyncio

import pyarrow as pa
import pytest
from sounding.store.connection import connect
from sounding.store.lease import Leases
from sounding.store.location import StoreLocation
from sounding.store.schema import SESSIONS_SCHEMA, SESSIONS_TABLE
from sounding.store.session_holds import SessionHolds
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit

SESSION = ResourceRef("default", "s1")


async def two_processes(
    path, ttl_s: float = 300.0, served: str = "127.0.0.1:1", other_served: str = "127.0.0.1:2"
) -> tuple[SessionHolds, SessionHolds]:
    """Two processes' holds on a store whose sessions are s1, s2 and race0 to race4."""
    db = await connect(StoreLocation(str(path)))
    names = set(await db.table_names())
    if SESSIONS_TABLE not in names:
        ids = ["s1", "s2", *(f"race{i}" for i in range(5))]
        rows = [
            {"session_id": f"default.{i}", "step": 1, "domain": "d", "state_json": "{}", "update_time_us": 0}
            for i in ids
        ]
        await db.create_table(SESSIONS_TABLE, pa.Table.from_pylist(rows, SESSIONS_SCHEMA))
    sessions = await db.open_table(SESSIONS_TABLE)
    first = await SessionHolds.open(db, names, sessions, await Leases.open(db, ttl_s, served))
    second = await SessionHolds.open(
        db, names | {"inquiry_session_holds"}, sessions, await Leases.open(db, ttl_s, other_served)
    )
    return first, second


def test_a_session_there_is_not_has_no_hold_to_take(tmp_path):
    async def run():
        here, _ = await two_processes(tmp_path)
        with pytest.raises(LookupError):
            await here.take(ResourceRef("default", "never-started"))
        return (await here._table.query().to_arrow()).num_rows

    assert asyncio.run(run()) == 0


def test_a_held_session_is_refused_to_another_process_until_its_stream_releases_it(tmp_path):
    async def run():
        here, there = await two_processes(tmp_path)
        token = await here.take(SESSION)
        refused = await there.take(SESSION)
        await here.release(SESSION, token)
        taken = await there.take(SESSION)
        return token, refused, taken, await here.holds(SESSION, token), await there.holds(SESSION, taken)

    token, refused, taken, stale_holds, holds = asyncio.run(run())
    assert token == 1 and refused is None and taken == 2
    assert not stale_holds and holds


def test_a_new_session_is_held_at_once_and_its_holds_are_forgotten_when_it_expires(tmp_path):
    async def run():
        here, there = await two_processes(tmp_path, ttl_s=2.0)
        token = await here.take(SESSION, new=True)
        refused = await there.take(SESSION)
        await here.release(SESSION, token)
        await here.forget([SESSION.key])
        return token, refused, (await here._table.query().to_arrow()).num_rows

    token, refused, rows = asyncio.run(run())
    assert token == 1 and refused is None and rows == 0


def test_holds_of_a_process_that_stops_renewing_expire_and_one_that_renews_keeps_them(tmp_path):
    async def run():
        dead, alive = await two_processes(tmp_path, ttl_s=2.0)
        other = ResourceRef("default", "s2")
        lost = await dead.take(SESSION)
        kept = await alive.take(other)
        for _ in range(5):  # 2.5 lifetimes: alive renews, dead does not
            await asyncio.sleep(1.0)
            await alive.renew()
        taken = await alive.take(SESSION)
        refused = await dead.take(other)
        return lost, kept, taken, refused, await dead.holds(SESSION, lost)

    lost, kept, taken, refused, still = asyncio.run(run())
    assert taken == lost + 1 and refused is None and not still


def test_two_processes_taking_one_session_at_once_get_it_once(tmp_path):
    async def race(session: ResourceRef) -> list[int | None]:
        here, there = await two_processes(tmp_path)
        return list(await asyncio.gather(here.take(session), there.take(session)))

    for attempt in range(5):
        tokens = asyncio.run(race(ResourceRef("default", f"race{attempt}")))
        assert sum(token is not None for token in tokens) == 1, tokens


def test_a_process_listening_where_a_dead_one_did_frees_its_holds_and_no_others(tmp_path):
    async def run():
        dead, elsewhere = await two_processes(tmp_path)
        successor, _ = await two_processes(tmp_path)  # the same host and address as `dead`
        other = ResourceRef("default", "s2")
        await dead.take(SESSION)
        await elsewhere.take(other)
        await successor.release_predecessors()
        return await successor.take(SESSION), await successor.take(other)

    freed, still_held = asyncio.run(run())
    assert freed == 2 and still_held is None
