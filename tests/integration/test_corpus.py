import asyncio
import time

import grpc
import pytest
from sounding_client import AsyncClient, SoundingError

pytestmark = pytest.mark.integration


def test_collections_lifecycle(client):
    created = client.create_collection("lifecycle", "a test collection")
    assert created.name == "lifecycle" and created.document_count == 0
    assert created.embedding_dimension == 384
    with pytest.raises(SoundingError) as raised:
        client.create_collection("lifecycle")
    assert raised.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert "lifecycle" in {c.name for c in client.list_collections(page_size=1)}
    client.delete_collection("lifecycle")
    with pytest.raises(SoundingError) as raised:
        client.get_collection("lifecycle")
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    assert raised.value.reason == "COLLECTION_NOT_FOUND"


def test_the_async_client_lists_every_page(stack):
    async def run():
        async with AsyncClient(stack.settings.address, timeout=60) as client:
            await client.wait_ready()
            for name in ("paged-a", "paged-b", "paged-c"):
                await client.create_collection(name)
            listed = [c.name async for c in client.list_collections(page_size=1)]
            for name in ("paged-a", "paged-b", "paged-c"):
                await client.delete_collection(name)
            return listed

    listed = asyncio.run(run())
    assert {"paged-a", "paged-b", "paged-c"} <= set(listed) and len(listed) == len(set(listed))


def test_bad_collection_name_is_invalid_argument(client):
    with pytest.raises(SoundingError) as raised:
        client.create_collection("Not A Name")
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.fields == ["name"]


def test_ingest_reports_each_batch_and_keeps_text_search_current(client):
    client.create_collection("batches")
    documents = [{"id": f"d{i}", "text": f"ordinary text number {i}"} for i in range(7)]
    documents.append({"id": "d7", "text": "the word quokkaesque appears only here", "title": "rare"})
    reports = list(client.ingest("batches", documents, batch_size=3))
    assert [r.batch_index for r in reports] == [0, 1, 2]
    assert [r.batch_documents for r in reports] == [3, 3, 2]
    assert reports[-1].total_documents == 8
    final = client.retrieve_final("batches", "quokkaesque", top_k=3, arms=["lexical"])
    assert [h.document_id for h in final.hits] == ["d7"]


def test_a_malformed_document_rejects_its_whole_batch_and_only_it(client):
    client.create_collection("atomic")
    good = [{"id": f"g{i}", "text": f"good document {i}"} for i in range(4)]
    bad = [{"id": "b0", "text": "fine"}, {"id": "b1", "text": "fine"}, {"id": "b2", "text": "   "}]
    with pytest.raises(SoundingError) as raised:
        list(client.ingest("atomic", good + bad, batch_size=4))
    error = raised.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.fields == ["documents[2].text"]
    assert "batch 1" in error.message
    collection = client.get_collection("atomic")
    assert collection.document_count == 4  # the first batch, acknowledged before, stays
    hits = client.retrieve_final("atomic", "fine", top_k=10, arms=["lexical"]).hits
    assert not [h for h in hits if h.document_id.startswith("b")]


def test_reingesting_a_document_replaces_it_and_long_documents_are_chunked(client):
    client.create_collection("replace")
    long_text = " ".join(f"word{i}" for i in range(1000)) + " zanzibarian"
    old = {"id": "x", "text": "old text", "metadata": {"source": "draft", "year": "2019"}}
    list(client.ingest("replace", [{"id": "long", "text": long_text}, old]))
    first = client.get_collection("replace")
    assert first.document_count == 2 and first.chunk_count > 2
    hits = client.retrieve_final("replace", "old", top_k=5, arms=["lexical"]).hits
    assert [dict(h.metadata) for h in hits if h.document_id == "x"] == [{"source": "draft", "year": "2019"}]
    new = {"id": "x", "text": "new text", "metadata": {"source": "final"}}
    list(client.ingest("replace", [{"id": "long", "text": "now short"}, new]))
    second = client.get_collection("replace")
    assert (second.document_count, second.chunk_count) == (2, 2)
    hits = client.retrieve_final("replace", "text", top_k=5, arms=["lexical"]).hits
    assert [(h.text, dict(h.metadata)) for h in hits if h.document_id == "x"] == [
        ("new text", {"source": "final"})
    ]
    assert client.retrieve_final("replace", "zanzibarian", top_k=5, arms=["lexical"]).hits == []


def test_ingest_into_a_missing_collection_is_not_found(client):
    with pytest.raises(SoundingError) as raised:
        list(client.ingest("never-created", [{"id": "a", "text": "x"}]))
    assert raised.value.code == grpc.StatusCode.NOT_FOUND


def test_creating_a_collection_that_exists_leaves_it_whole(client):
    client.create_collection("kept")
    list(client.ingest("kept", [{"id": "a", "text": "The reef lies two fathoms under the tide."}]))
    deadline = time.monotonic() + 600  # a graph build, however busy the machine
    while not client.get_collection("kept").graph_current and time.monotonic() < deadline:
        time.sleep(0.3)
    built = client.get_collection("kept")
    with pytest.raises(SoundingError) as raised:
        client.create_collection("kept")
    assert raised.value.code == grpc.StatusCode.ALREADY_EXISTS
    again = client.get_collection("kept")
    assert built.graph_current and again.graph_current  # its graph was not dropped
    assert again.graph_entity_count == built.graph_entity_count > 0
    client.delete_collection("kept")
