"""The store's leases against a real LanceDB directory, taken by real processes."""

import asyncio
import json
import subprocess
import sys

import pytest
from sounding.store import lease
from sounding.store.connection import connect
from sounding.store.lease import LeaseBusy, LeaseLost, Leases
from sounding.store.location import StoreLocation

pytestmark = pytest.mark.unit

# Long enough that no holder of these tests loses a lease by being slow.
PATIENT_TTL_S = 300.0

CONTEND = """
import asyncio, json, pathlib, sys, time
from sounding.store.connection import connect
from sounding.store.lease import Leases
from sounding.store.location import StoreLocation

async def main(path, go, attempts):
    leases = await Leases.open(await connect(StoreLocation(path)), ttl_s=300.0)
    print("ready", flush=True)
    while not pathlib.Path(go).exists():
        await asyncio.sleep(0.01)
    held = []
    for _ in range(attempts):
        taken = await leases.try_acquire("compaction")
        if taken is not None:
            held.append(taken.token)
            try:
                await leases.release(taken)
            except RuntimeError:
                break  # held until it expires, after the race: the others take it no more
    print(json.dumps(held), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""

RESERVE = """
import asyncio, json, pathlib, sys
from sounding.store.connection import connect
from sounding.store.lease import Leases
from sounding.store.location import StoreLocation

async def main(path, go):
    leases = await Leases.open(await connect(StoreLocation(path)), ttl_s=300.0)
    print("ready", flush=True)
    while not pathlib.Path(go).exists():
        await asyncio.sleep(0.01)
    given = []
    for _ in range(15):
        given.extend(await leases.reserve("numbers", 3, after=99))
    print(json.dumps(given), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

HOLD_AND_DIE = """
import asyncio, sys
from sounding.store.connection import connect
from sounding.store.lease import Leases
from sounding.store.location import StoreLocation

async def main(path):
    leases = await Leases.open(await connect(StoreLocation(path)), ttl_s=2.0)
    taken = await leases.try_acquire("schema")
    print(taken.token, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1]))
"""


async def open_leases(path, ttl_s: float = PATIENT_TTL_S) -> Leases:
    return await Leases.open(await connect(StoreLocation(str(path))), ttl_s)


def test_of_processes_taking_a_lease_at_once_exactly_one_gets_each_token(tmp_path):
    asyncio.run(open_leases(tmp_path))  # the table exists before they race
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", CONTEND, str(tmp_path), str(go), "40"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    assert all(racer.stdout.readline().strip() == "ready" for racer in racers)
    go.touch()  # all three start together, however long each took to start
    tokens = [json.loads(racer.communicate(timeout=600)[0]) for racer in racers]
    taken = [token for held in tokens for token in held]
    assert taken  # someone took it
    assert sorted(taken) == list(range(1, len(taken) + 1))  # no token twice, none skipped

    async def last_token() -> int:
        leases = await open_leases(tmp_path)
        return (await leases._row("compaction"))["token"]

    assert asyncio.run(last_token()) == len(taken)


def test_processes_reserving_numbers_at_once_are_given_each_number_once_and_none_skipped(tmp_path):
    async def add():
        leases = await open_leases(tmp_path)
        await leases.add_counter("numbers")
        await leases.add_counter("numbers")  # once only

    asyncio.run(add())
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RESERVE, str(tmp_path), str(go)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    assert all(racer.stdout.readline().strip() == "ready" for racer in racers)
    go.touch()
    given = [number for racer in racers for number in json.loads(racer.communicate(timeout=600)[0])]
    assert sorted(given) == list(range(100, 100 + 3 * 15 * 3))  # above `after`, each once


def test_a_held_lease_is_refused_to_others_until_released_and_then_taken_with_a_larger_token(tmp_path):
    async def run():
        first, second = await open_leases(tmp_path), await open_leases(tmp_path)
        held = await first.try_acquire(lease.COLLECTIONS)
        refused = await second.try_acquire(lease.COLLECTIONS)
        other_name = await second.try_acquire(lease.SCHEMA)
        await first.release(held)
        taken = await second.try_acquire(lease.COLLECTIONS)
        return held, refused, other_name, taken

    held, refused, other_name, taken = asyncio.run(run())
    assert held is not None and refused is None
    assert other_name is not None  # leases of other names are independent
    assert taken is not None and taken.token == held.token + 1


def test_a_holder_killed_mid_lease_blocks_the_others_only_until_its_lease_expires(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_DIE, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        dead_token = int(holder.stdout.readline())
    finally:
        holder.kill()
        holder.wait()

    async def run():
        leases = await open_leases(tmp_path)
        return await leases.try_acquire(lease.SCHEMA), await leases.acquire(lease.SCHEMA, timeout_s=60.0)

    right_away, eventually = asyncio.run(run())
    # The dead holder's lease had 2 s to run; it is taken once they are over, with the next token.
    assert eventually.token == dead_token + 1
    assert right_away is None or right_away.token == dead_token + 1


def test_a_holder_whose_lease_was_taken_over_is_fenced_off(tmp_path):
    async def run():
        stale, current = await open_leases(tmp_path), await open_leases(tmp_path)
        old = await stale.try_acquire(lease.SCHEMA)
        await stale._table.update(where="name = 'schema'", updates_sql={"expires_us": "0"})  # it expired
        new = await current.try_acquire(lease.SCHEMA)
        with pytest.raises(LeaseLost):
            await stale.renew(old)
        await stale.release(old)  # a stale release frees nothing
        still_held = await stale.try_acquire(lease.SCHEMA)
        await current.renew(new)
        return old, new, still_held

    old, new, still_held = asyncio.run(run())
    assert new is not None and new.token > old.token
    assert still_held is None


def test_held_cancels_its_block_with_lease_lost_when_a_renewal_finds_the_lease_taken(tmp_path):
    async def run():
        holder = await open_leases(tmp_path, ttl_s=2.0)
        other = await open_leases(tmp_path)
        with pytest.raises(LeaseLost):
            async with holder.held(lease.COMPACTION):
                await holder._table.update(where="name = 'compaction'", updates_sql={"expires_us": "0"})
                assert await other.try_acquire(lease.COMPACTION) is not None
                await asyncio.sleep(60)  # cancelled at the next renewal, within a third of 2 s
        return True

    assert asyncio.run(asyncio.wait_for(run(), 50))


def test_held_renews_the_lease_while_its_block_outlasts_the_ttl_and_releases_it_after(tmp_path):
    async def run():
        holder = await open_leases(tmp_path, ttl_s=2.0)
        other = await open_leases(tmp_path)
        async with holder.held(lease.SCHEMA) as held:
            await asyncio.sleep(5.0)  # two and a half lifetimes: renewed, never lost
            during = await other.try_acquire(lease.SCHEMA)
        after = await other.try_acquire(lease.SCHEMA)
        return held, during, after

    held, during, after = asyncio.run(run())
    assert during is None
    assert after is not None and after.token == held.token + 1


def test_held_if_free_gives_none_while_another_holds_it_and_acquire_gives_up_naming_the_holder(tmp_path):
    async def run():
        first, second = await open_leases(tmp_path), await open_leases(tmp_path)
        async with first.held(lease.COMPACTION):
            async with second.held_if_free(lease.COMPACTION) as busy:
                assert busy is None
            with pytest.raises(LeaseBusy, match=first.holder):
                await second.acquire(lease.COMPACTION, timeout_s=0.3)
        async with second.held_if_free(lease.COMPACTION) as free:
            assert free is not None

    asyncio.run(run())


def test_four_connections_creating_the_leases_table_at_once_share_one_row_per_lease(tmp_path):
    async def run():
        location = StoreLocation(str(tmp_path))
        connections = [await connect(location) for _ in range(4)]
        opened = await asyncio.gather(*(Leases.open(connection, 10.0) for connection in connections))
        rows = (await opened[0]._table.query().to_arrow()).to_pylist()
        return sorted(row["name"] for row in rows)

    assert asyncio.run(run()) == sorted(lease.NAMES)
