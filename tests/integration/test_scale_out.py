"""The scale-out path on one machine: the store on object storage (a local S3-compatible server,
moto) outlives the orchestrator and its data directory, and strategy workers on a second Ray node
serve Retrieve from that shared store."""

import time

import pytest
from sounding.settings.config import ModelsSettings, Settings
from sounding.stack import Stack
from sounding_client import Ask, Client, Final, InquiryAnswer, InquiryPolicy, StrategyResult

from .conftest import free_port
from .test_inquiry import oracle

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCUMENTS = [
    {"id": "tide", "text": "Tides rise and fall twice a day under the pull of the moon."},
    {"id": "lead", "text": "A leadsman casts a weighted line to measure the depth of the water."},
    {"id": "chart", "text": "Nautical charts mark the depth of the sea in fathoms."},
]


@pytest.fixture
def two_node_ray():
    """A Ray cluster of a head and a worker node; only the worker node offers `sounding_worker`.
    This process joins it as a driver, to read what the cluster holds."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    worker_node = cluster.add_node(wait=False, num_cpus=1, resources={"sounding_worker": 8})
    cluster.wait_for_nodes(timeout=300)  # Ray's own wait is 30 s, short for a busy machine
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster, worker_node
    ray.shutdown()
    cluster.shutdown()


def orchestrator(stack, data_dir, env) -> Stack:
    settings = Settings(
        data_dir=data_dir,
        address=f"127.0.0.1:{free_port()}",
        models=ModelsSettings(address=stack.settings.models.address),
    )
    running = Stack(settings, env=env, log_dir=data_dir / "logs")
    running.start_orchestrator()
    return running


def test_a_store_on_object_storage_survives_a_restart_elsewhere(stack, object_store, tmp_path):
    s3, bucket, env = object_store
    first = orchestrator(stack, tmp_path / "first", env)
    try:
        with Client(first.settings.address) as client:
            client.create_collection("charts")
            list(client.ingest("charts", DOCUMENTS))
            before = client.retrieve_final("charts", "how is the depth measured", top_k=2)
            inquiry = client.inquire("bulls_and_cows", InquiryPolicy(question_selection="eig"))
            for event in inquiry:
                if isinstance(event, Ask):
                    if event.turn > 2:
                        inquiry.close()
                        break
                    inquiry.answer(oracle("4096", event.question))
    finally:
        first.stop()
    assert not (tmp_path / "first" / "lancedb").exists()
    stored = s3.list_objects_v2(Bucket=bucket, Prefix="store/")
    assert stored["KeyCount"] > 0

    second = orchestrator(stack, tmp_path / "second", env)
    try:
        with Client(second.settings.address) as client:
            assert [c.name for c in client.list_collections()] == ["charts"]
            assert client.get_collection("charts").document_count == 3
            after = client.retrieve_final("charts", "how is the depth measured", top_k=2)
            resumed = client.resume_inquiry(inquiry.session_id)
            events = []
            for event in resumed:
                events.append(event)
                if isinstance(event, Ask):
                    resumed.answer(oracle("4096", event.question))
    finally:
        second.stop()
    assert before.hits[0].document_id == "lead"
    assert [h.document_id for h in after.hits] == [h.document_id for h in before.hits]
    asks = [e for e in events if isinstance(e, Ask)]
    assert asks[0].turn == 3  # the question pending when the first orchestrator stopped
    assert isinstance(events[-1], InquiryAnswer) and events[-1].answer == "4096"


def test_without_a_ray_address_the_orchestrator_starts_a_runtime_of_its_own(stack, two_node_ray, tmp_path):
    # ray.init() without an address joins the latest cluster started on the machine: here a
    # stranger's (the fixture's), which this orchestrator must leave alone.
    import ray

    def drivers() -> int:
        return sum(1 for job in ray._private.state.jobs() if not job.get("IsDead"))

    before = drivers()
    running = orchestrator(stack, tmp_path, {})
    try:
        with Client(running.settings.address) as client:
            client.create_collection("charts")
            list(client.ingest("charts", DOCUMENTS))
            final = client.retrieve_final("charts", "how is the depth measured", top_k=2, arms=["dense"])
        joined = drivers() - before
    finally:
        running.stop()
    assert final.hits[0].document_id == "lead"
    assert joined == 0


def test_strategy_workers_on_a_second_ray_node_serve_retrieve(stack, object_store, two_node_ray, tmp_path):
    import ray

    _, _, env = object_store
    cluster, worker_node = two_node_ray
    env = {
        **env,
        "SOUNDING_RAY_ADDRESS": cluster.address,
        "SOUNDING_RETRIEVAL__STRATEGY_WORKERS": "2",
        "SOUNDING_RETRIEVAL__WORKER_RESOURCES": '{"sounding_worker": 1}',
    }
    running = orchestrator(stack, tmp_path, env)
    try:
        # A Ray actor that needs `sounding_worker` can only live on the node that has it (Ray's
        # view of what is available catches up with the actors placed in its own time).
        deadline = time.monotonic() + 120
        while ray.available_resources().get("sounding_worker") != 8 - 2:
            assert time.monotonic() < deadline, ray.available_resources()
            time.sleep(0.5)
        nodes = {node["NodeID"]: node for node in ray.nodes() if node["Alive"]}
        assert len(nodes) == 2 and "sounding_worker" not in nodes[cluster.head_node.node_id]["Resources"]
        with Client(running.settings.address) as client:
            client.create_collection("charts")
            list(client.ingest("charts", DOCUMENTS))
            events = list(
                client.retrieve("charts", "how is the depth measured", top_k=2, arms=["dense", "lexical"])
            )
    finally:
        running.stop()
    assert {e.arm for e in events if isinstance(e, StrategyResult) and e.hits} == {"dense", "lexical"}
    final = events[-1]
    assert isinstance(final, Final) and not final.failed_arms and final.hits[0].document_id == "lead"
