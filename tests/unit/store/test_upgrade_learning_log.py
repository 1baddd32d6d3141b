"""A learning log written with JSON-string columns (before its typed columns) opens upgraded,
with nothing of what it recorded lost, on a real LanceDB directory."""

import asyncio
import json

import lancedb
import pyarrow as pa
import pytest
from sounding.store import learning_tables as tables
from sounding.store.collections import Store
from sounding.store.database import Database
from sounding.store.learning import LearningLog
from sounding.store.location import StoreLocation
from sounding.store.tenancy import DEFAULT_TENANT, tenant_table

pytestmark = pytest.mark.unit


def default(table: str) -> str:
    return tenant_table(table, DEFAULT_TENANT)


LEGACY_RETRIEVALS = pa.schema(
    [
        ("retrieval_id", pa.string()),
        ("collection", pa.string()),
        ("query_index", pa.int64()),
        ("mode", pa.string()),
        ("context", pa.list_(pa.float64())),
        ("embedding", pa.list_(pa.float32())),
        ("arms_json", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)
LEGACY_OBSERVATIONS = pa.schema(
    [
        ("sequence", pa.int64()),
        ("retrieval_id", pa.string()),
        ("outcome_json", pa.string()),
        ("rewards_json", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)
LEGACY_STATES = pa.schema(
    [
        (f.name if f.name != "scores" else "scores_json", f.type if f.name != "scores" else pa.string())
        for f in tables.INQUIRY_STATES_SCHEMA
    ]
)
LEGACY_DEPLOYMENTS = pa.schema(
    [
        ("version", pa.int64()),
        ("window_start_us", pa.int64()),
        ("pruned_arms_json", pa.string()),
        ("report_json", pa.string()),
        ("create_time_us", pa.int64()),
    ]
)


async def write_legacy_log(path) -> None:
    db = await lancedb.connect_async(path)
    arms = {
        # Logged before costs and exploration were kept.
        "dense": {"document_ids": ["d1", "d2"], "latency_ms": 12.5},
        "lexical": {"document_ids": ["d3"], "latency_ms": 3.0, "cost_ms": 4.0, "exploration": True},
    }
    retrievals = [
        {
            "retrieval_id": f"r{i}",
            "collection": "c",
            "query_index": i,
            "mode": "planned",
            "context": [1.0, 0.0],
            "embedding": [0.5, 0.5],
            "arms_json": json.dumps(arms),
            "create_time_us": 10 + i,
        }
        for i in range(3)
    ]
    outcome = {
        "used_document_ids": ["d1"],
        "feedback": "helpful",
        "agent_success": None,
        "found_missing_content": True,
        "missed_document_ids": ["d9"],
    }
    observations = [
        {
            "sequence": 0,
            "retrieval_id": "r1",
            "outcome_json": json.dumps(outcome),
            "rewards_json": json.dumps({"dense": 0.5, "lexical": 0.25}),
            "create_time_us": 20,
        }
    ]
    states = [
        {
            "session_id": "s1",
            "task": "dc",
            "regime": "normal",
            "bucket": "",
            "turn": 2,
            "scores_json": json.dumps({"mi_only": 0.3, "robust_mi_risk": 0.7}),
            "error": True,
            "nonconformity": 0.4,
            "stated_confidence": None,
            "create_time_us": 30,
        }
    ]
    deployments = [
        {
            "version": 2,
            "window_start_us": 5,
            "pruned_arms_json": json.dumps(["hyde"]),
            "report_json": json.dumps({"kept": 5}),
            "create_time_us": 40,
        }
    ]
    for name, schema, rows in (
        (tables.RETRIEVALS_TABLE, LEGACY_RETRIEVALS, retrievals),
        (tables.OBSERVATIONS_TABLE, LEGACY_OBSERVATIONS, observations),
        (tables.INQUIRY_STATES_TABLE, LEGACY_STATES, states),
        (tables.DEPLOYMENTS_TABLE, LEGACY_DEPLOYMENTS, deployments),
    ):
        await db.create_table(name, data=pa.Table.from_pylist(rows, schema))


def test_a_legacy_log_opens_with_typed_columns_and_every_record_intact(tmp_path):
    async def run():
        await write_legacy_log(str(tmp_path))  # the default tenant's, under the bare names of then
        await Store.open(
            await Database.open(StoreLocation(str(tmp_path)))
        )  # the server opens the store first
        log = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))))
        records = await log.retrievals(["r0", "r1", "r2"])
        observations = await log.observations()
        states = await log.inquiry_states("dc", "normal")
        deployment = await log.latest_deployment()
        db = await lancedb.connect_async(str(tmp_path))
        schemas = {
            name: await (await db.open_table(default(name))).schema()
            for name in (tables.RETRIEVALS_TABLE, tables.OBSERVATIONS_TABLE, tables.INQUIRY_STATES_TABLE)
        }
        indexed = [
            sorted(i.columns for i in await (await db.open_table(default(name))).list_indices())
            for name in (tables.RETRIEVALS_TABLE, tables.OBSERVATIONS_TABLE)
        ]
        versions = [await (await db.open_table(default(tables.RETRIEVALS_TABLE))).version()]
        await LearningLog.open(
            await Database.open(StoreLocation(str(tmp_path)))
        )  # already upgraded: not rewritten
        versions.append(await (await db.open_table(default(tables.RETRIEVALS_TABLE))).version())
        bare = {t for t in await db.table_names() if "." not in t}
        return records, observations, states, deployment, schemas, indexed, versions, bare

    records, observations, states, deployment, schemas, indexed, versions, bare = asyncio.run(run())
    # The legacy tables moved to the default tenant's names; shared ones, the store's leases and
    # the move's marker stay.
    assert bare == {
        "collections",
        "inquiry_sessions",
        "inquiry_session_setups",
        "inquiry_session_holds",
        "leases",
        "tenant_keys_moved",
    }
    assert sorted(records) == ["r0", "r1", "r2"]
    r1 = records["r1"]
    assert r1.query_index == 1 and r1.stated_miss_rate is None and r1.expansions == ()
    assert r1.arm_scores == {} and r1.fusion == "rrf"
    assert r1.arms == {
        "dense": {"document_ids": ["d1", "d2"], "latency_ms": 12.5, "cost_ms": 12.5, "exploration": False},
        "lexical": {"document_ids": ["d3"], "latency_ms": 3.0, "cost_ms": 4.0, "exploration": True},
    }
    [observation] = observations
    assert observation.outcome == {
        "used_document_ids": ["d1"],
        "feedback": "helpful",
        "agent_success": None,
        "found_missing_content": True,
        "missed_document_ids": ["d9"],
    }
    assert observation.rewards == {"dense": 0.5, "lexical": 0.25}
    [state] = states
    assert state.scores == {"mi_only": 0.3, "robust_mi_risk": 0.7} and state.error and state.turn == 2
    assert deployment is not None and deployment.pruned_arms == ["hyde"] and deployment.report == {"kept": 5}
    for name, schema in schemas.items():
        assert not any(f.endswith("_json") for f in schema.names), name
    assert schemas[tables.RETRIEVALS_TABLE].names == tables.RETRIEVALS_SCHEMA.names
    assert indexed == [[["retrieval_id"]], [["create_time_us"], ["retrieval_id"]]]
    assert versions[0] == versions[1]


def test_a_log_round_trips_its_typed_values(tmp_path):
    from sounding.store.learning import ObservationRecord

    async def run():
        log = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))))
        await log.append_observations(
            [
                ObservationRecord(
                    0,
                    "r",
                    {
                        "used_document_ids": ["a"],
                        "feedback": "",
                        "agent_success": True,
                        "found_missing_content": False,
                        "missed_document_ids": [],
                    },
                    {"dense": 1.0},
                )
            ]
        )
        return await log.observations()

    [observation] = asyncio.run(run())
    assert observation.outcome["agent_success"] is True and observation.rewards == {"dense": 1.0}


def test_a_retrieval_round_trips_its_expansion_steps_arm_scores_and_fusion(tmp_path):
    from sounding.core.expansion_gate import ExpansionStep
    from sounding.store.learning import RetrievalRecord

    steps = (ExpansionStep("synonym", ("d4", "d5"), 81.5), ExpansionStep("hyponym", (), 40.0))

    async def run():
        log = await LearningLog.open(await Database.open(StoreLocation(str(tmp_path))))
        arms = {"dense": {"document_ids": ["d1"], "latency_ms": 1.0, "cost_ms": 1.0, "exploration": False}}
        await log.append_retrievals(
            [
                RetrievalRecord(
                    retrieval_id=name,
                    collection="default.c",
                    query_index=0,
                    mode="requested",
                    context=[0.0],
                    embedding=[1.0],
                    arms=arms,
                    expansions=expansions,
                    arm_scores={"dense": [0.75]} if expansions else {},
                    fusion="min_max" if expansions else "rrf",
                )
                for name, expansions in (("r", steps), ("none", ()))
            ]
        )
        return await log.retrievals(["r", "none"])

    records = asyncio.run(run())
    assert records["r"].expansions == steps and records["none"].expansions == ()
    assert records["r"].arm_scores == {"dense": [0.75]} and records["none"].arm_scores == {}
    assert records["r"].fusion == "min_max" and records["none"].fusion == "rrf"
