import asyncio

import numpy as np
import pytest
from sounding.store.database import Database
from sounding.store.graph import GraphSnapshot, GraphStore
from sounding.store.location import StoreLocation
from sounding.store.tenancy import ResourceRef

pytestmark = pytest.mark.unit
C = ResourceRef("default", "c")


def test_a_stored_graph_round_trips_and_answers_match_and_related(tmp_path):
    import lancedb

    async def run():
        db = await lancedb.connect_async(str(tmp_path))
        graphs = await GraphStore.open(await Database.open(StoreLocation(str(tmp_path))))
        assert await graphs.built_version(C) is None
        vectors = {
            "echo sounder": np.array([1.0, 0.0]),
            "sonar": np.array([0.9, 0.1]),
            "tide": np.array([0.0, 1.0]),
        }
        edges = {("echo sounder", "sonar"): 3, ("echo sounder", "tide"): 1}
        await graphs.replace(C, 7, {"echo sounder": 4, "sonar": 3, "tide": 1}, vectors, edges, 2)
        snapshot = await GraphSnapshot.load(*await GraphSnapshot.open_tables(db, C))
        return (
            graphs,
            await graphs.built_version(C),
            await graphs.vectors(C),
            await graphs.entity_names(C),
            snapshot,
        )

    graphs, version, stored, names, snapshot = asyncio.run(run())
    assert version == 7
    assert names == {"echo sounder", "sonar", "tide"}
    assert np.allclose(stored["sonar"], [0.9, 0.1])
    assert snapshot.related(["echo sounder"]) == ["sonar", "tide"]  # by weight
    assert snapshot.related(["tide"]) == ["echo sounder"]
    # Verbatim phrases first, then entities near the query vector.
    assert snapshot.match(["tide", "whales"], np.array([1.0, 0.05]), limit=3) == [
        "tide",
        "echo sounder",
        "sonar",
    ]
    assert snapshot.match([], np.array([0.0, -1.0])) == []  # nothing similar enough


def test_dropping_a_graph_forgets_it(tmp_path):
    import lancedb

    async def run():
        db = await lancedb.connect_async(str(tmp_path))
        graphs = await GraphStore.open(await Database.open(StoreLocation(str(tmp_path))))
        await graphs.replace(C, 1, {"a": 1}, {"a": np.array([1.0, 0.0])}, {}, 2)
        await graphs.drop(C)
        return (
            await graphs.built_version(C),
            await graphs.entity_names(C),
            await GraphSnapshot.open_tables(db, C),
        )

    assert asyncio.run(run()) == (None, frozenset(), None)


def test_entity_names_follow_a_graph_another_process_built_and_builds_take_turns(tmp_path):
    async def run():
        here = await GraphStore.open(await Database.open(StoreLocation(str(tmp_path))))
        there = await GraphStore.open(await Database.open(StoreLocation(str(tmp_path))))
        before = await there.entity_names(C)  # read (and kept) before any build
        await here.replace(C, 1, {"sonar": 2}, {"sonar": np.array([1.0, 0.0])}, {}, 2)
        after = await there.entity_names(C)
        order = []

        async def build(graphs: GraphStore, name: str) -> None:
            async with graphs.building():
                order.append(f"{name} starts")
                await asyncio.sleep(0.2)
                order.append(f"{name} ends")

        await asyncio.gather(build(here, "here"), build(there, "there"))
        return before, after, order

    before, after, order = asyncio.run(run())
    assert before == frozenset() and after == {"sonar"}
    assert order in (
        ["here starts", "here ends", "there starts", "there ends"],
        ["there starts", "there ends", "here starts", "here ends"],
    )  # one build at a time, whichever took the lease first
