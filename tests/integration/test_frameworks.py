"""The LangChain and LlamaIndex retrievers of the Python client (issue 50, item 2), through the
frameworks' own interfaces (`invoke` / `ainvoke`, `retrieve` / `aretrieve`) against the live
stack: documents with Sounding's scores and uncertainty in their metadata, and the outcome
reported in one call reaching Observe."""

import asyncio
import json

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, NodeWithScore
from sounding_client import AsyncClient
from sounding_client.frameworks.langchain import SoundingRetriever
from sounding_client.frameworks.llama_index import SoundingLlamaRetriever

from .conftest import DEMO_CORPUS

pytestmark = pytest.mark.integration

QUERY = "how does an echo sounder measure depth"


def own_collection(client, name):
    lines = DEMO_CORPUS.read_text().splitlines()
    documents = [json.loads(line) | {"metadata": {"source": "handbook"}} for line in lines if line.strip()]
    client.create_collection(name)
    list(client.ingest(name, documents, batch_size=16))
    return name


def assert_ranked_with_uncertainty(metadata, scores, texts):
    assert 1 <= len(metadata) <= 3 and all(texts)
    assert scores == sorted(scores, reverse=True) == [m["sounding_score"] for m in metadata]
    assert len({m["sounding_retrieval_id"] for m in metadata}) == 1
    assert metadata[0]["sounding_document_id"] == "echo-sounder"
    assert all(m["source"] == "handbook" for m in metadata)  # the document's own metadata
    for m in metadata:
        assert 0.0 <= m["sounding_miss_rate"] <= 1.0
        # No calibration has run on the collection: no recall is stated.
        assert m["sounding_estimated_recall"] is None
        assert set(m["sounding_arm_ranks"]) <= {"dense", "lexical"} and m["sounding_arm_ranks"]


def test_a_langchain_retriever_returns_scored_documents_and_reports_what_was_used(client, stack):
    collection = own_collection(client, "it-langchain")
    retriever = SoundingRetriever(client=client, collection=collection, top_k=3)
    documents = retriever.invoke(QUERY)
    assert all(isinstance(d, Document) for d in documents)
    metadata = [d.metadata for d in documents]
    assert_ranked_with_uncertainty(
        metadata, [m["sounding_score"] for m in metadata], [d.page_content for d in documents]
    )

    async def asynchronously():
        async with AsyncClient(stack.settings.address, timeout=60) as async_client:
            on_loop = SoundingRetriever(
                client=client, async_client=async_client, collection=collection, top_k=3
            )
            return await on_loop.ainvoke(QUERY)

    again = asyncio.run(asynchronously())
    assert [d.metadata["sounding_document_id"] for d in again] == [
        m["sounding_document_id"] for m in metadata
    ]

    before = client.strategy_metrics().observations
    reported = retriever.report_outcome(documents[:1], success=True)
    assert reported.recorded == 1 and reported.rejected == []
    assert client.strategy_metrics().observations == before + 1
    with pytest.raises(ValueError, match="one retrieval"):
        retriever.report_outcome(documents[:1] + again[:1])


def test_a_llama_index_retriever_returns_scored_nodes_and_reports_what_was_used(client, stack):
    collection = own_collection(client, "it-llama-index")
    retriever = SoundingLlamaRetriever(client, collection, top_k=3)
    nodes = retriever.retrieve(QUERY)
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    metadata = [n.node.metadata for n in nodes]
    assert_ranked_with_uncertainty(metadata, [n.score for n in nodes], [n.node.get_content() for n in nodes])
    # A model reading a node sees its text, title and own metadata, not Sounding's ids and figures.
    for_model = nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert metadata[0]["sounding_title"] in for_model and "source: handbook" in for_model
    assert metadata[0]["sounding_retrieval_id"] not in for_model

    async def asynchronously():
        async with AsyncClient(stack.settings.address, timeout=60) as async_client:
            return await SoundingLlamaRetriever(
                client, collection, top_k=3, async_client=async_client
            ).aretrieve(QUERY)

    again = asyncio.run(asynchronously())
    assert [n.node.node_id for n in again] == [n.node.node_id for n in nodes]

    before = client.strategy_metrics().observations
    reported = retriever.report_outcome([], retrieval_id=metadata[0]["sounding_retrieval_id"], success=False)
    assert reported.recorded == 1
    assert client.strategy_metrics().observations == before + 1
