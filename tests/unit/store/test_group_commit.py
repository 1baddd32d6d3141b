import asyncio

import pytest
from sounding.store.group_commit import GroupCommit

pytestmark = pytest.mark.unit


def test_items_arriving_during_a_commit_share_the_next_one():
    commits: list[list[int]] = []

    async def commit(items):
        commits.append(items)
        await asyncio.sleep(0.01)

    async def run():
        group = GroupCommit(commit)
        first = asyncio.ensure_future(group.submit(0))
        await asyncio.sleep(0)  # the first commit is under way
        await asyncio.gather(first, *(group.submit(i) for i in range(1, 6)))

    asyncio.run(run())
    assert commits == [[0], [1, 2, 3, 4, 5]]


def test_a_failed_commit_fails_each_of_its_callers_and_not_the_next_commit():
    async def commit(items):
        await asyncio.sleep(0.01)
        if 0 in items:
            raise OSError("disk full")

    async def run():
        group = GroupCommit(commit)
        first = asyncio.ensure_future(group.submit(0))
        await asyncio.sleep(0)
        later = [asyncio.ensure_future(group.submit(i)) for i in (1, 2)]
        with pytest.raises(OSError, match="disk full"):
            await first
        await asyncio.gather(*later)

    asyncio.run(run())


def test_a_cancelled_caller_leaves_its_item_in_the_commit():
    commits: list[list[str]] = []

    async def commit(items):
        await asyncio.sleep(0.01)
        commits.append(items)

    async def run():
        group = GroupCommit(commit)
        caller = asyncio.ensure_future(group.submit("a"))
        await asyncio.sleep(0)
        caller.cancel()
        await group.submit("b")

    asyncio.run(run())
    assert commits == [["a", "b"]]
