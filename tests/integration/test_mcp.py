"""`sounding mcp` driven by the `mcp` SDK's own client against the live stack, over stdio and over
streamable HTTP (issue 50, item 1): the tools listed; `retrieve` with its stream's events as
progress notifications before the result; `report_outcome` recorded by Observe (GetStrategyMetrics
counts it); `verify_claim` answering with its queries; a failed call as a tool error naming the
gRPC code; `route_tool` and `report_tool_use`; the collections as resources; and a call cancelled
mid-stream, which the server sees."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from sounding_client import Tool

from .conftest import DEMO_CORPUS, free_port

pytestmark = pytest.mark.integration

SOUNDING = str(Path(sys.executable).parent / "sounding")
TOOLS = {"retrieve", "verify_claim", "report_outcome", "route_tool", "report_tool_use"}
CLAIM = "An echo sounder measures water depth by timing the return of a sound pulse."
# The first Entail of a fresh machine trains the sidecar's NLI model (a minute in this suite).
FIRST_CALL_S = 600
TOOLSET = [
    Tool("get_weather", "Current weather and forecast (rain, temperature) for a city."),
    Tool("send_email", "Send an email message to a recipient."),
]


@pytest.fixture(scope="module")
def mcp_collection(client):
    documents = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    client.create_collection("it-mcp")
    list(client.ingest("it-mcp", documents, batch_size=16))
    return "it-mcp"


async def exercise(mcp_client, client, collection):
    """The calls every transport must serve, and what each must show."""
    listed = await mcp_client.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    described = {t.name: t.description for t in listed.tools}
    assert "report_outcome" in described["retrieve"]  # the model is told to close the loop

    progress, done = [], []

    async def on_progress(value, total, message):
        progress.append((message, bool(done)))

    retrieved = await mcp_client.call_tool(
        "retrieve",
        {"collection": collection, "query": "how does an echo sounder measure depth", "k": 3},
        progress_callback=on_progress,
    )
    done.append(True)
    assert not retrieved.is_error, retrieved.content
    result = retrieved.structured_content
    assert 1 <= len(result["hits"]) <= 3 and result["hits"][0]["document_id"] == "echo-sounder"
    assert 0.0 <= result["miss_rate"] <= 1.0 and result["retrieval_id"]
    messages = [m for m, after in progress if not after]
    assert messages and messages[0].startswith("plan") and any(m.startswith("arm ") for m in messages)

    before = client.strategy_metrics().observations
    reported = await mcp_client.call_tool(
        "report_outcome",
        {"retrieval_id": result["retrieval_id"], "used_document_ids": ["echo-sounder"], "success": True},
    )
    assert not reported.is_error and reported.structured_content == {"recorded": 1, "rejected": []}
    assert client.strategy_metrics().observations == before + 1

    claim_progress = []

    async def on_claim_progress(value, total, message):
        claim_progress.append(message)

    verified = await mcp_client.call_tool(
        "verify_claim",
        {"collection": collection, "claim": CLAIM, "max_queries": 2},
        read_timeout_seconds=FIRST_CALL_S,
        progress_callback=on_claim_progress,
    )
    assert not verified.is_error, verified.content
    verdict = verified.structured_content
    assert verdict["verdict"] in ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO")
    assert 1 <= len(verdict["queries"]) <= 2 and 0.0 <= verdict["confidence"] <= 1.0
    assert any(m.startswith("query ") for m in claim_progress)

    toolset = f"it-mcp-{uuid.uuid4().hex[:8]}"
    client.put_tools(toolset, TOOLSET)
    routed = await mcp_client.call_tool(
        "route_tool", {"toolset": toolset, "request": "will it rain in Oslo?"}
    )
    assert not routed.is_error and routed.structured_content["candidates"][0]["name"] == "get_weather"
    used = {
        "toolset": toolset,
        "request": "will it rain in Oslo?",
        "used_tool": "get_weather",
        "success": True,
    }
    tool_use = await mcp_client.call_tool("report_tool_use", used)
    assert tool_use.structured_content == {"recorded": 1, "rejected": []}

    missing = await mcp_client.call_tool("retrieve", {"collection": "it-mcp-nowhere", "query": "depth"})
    assert missing.is_error and "NOT_FOUND" in missing.content[0].text

    resources = await mcp_client.list_resources()
    assert "sounding://collections" in {str(r.uri) for r in resources.resources}
    read = await mcp_client.read_resource("sounding://collections")
    assert collection in {c["name"] for c in json.loads(read.contents[0].text)}


def test_over_stdio(client, stack, mcp_collection):
    server = StdioServerParameters(
        command=SOUNDING, args=["mcp", "--address", stack.settings.address], env=dict(os.environ)
    )

    async def run():
        async with Client(server) as mcp_client:
            await exercise(mcp_client, client, mcp_collection)

    asyncio.run(run())


def wait_listening(port, process, within_s=120):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        assert process.poll() is None, "sounding mcp exited"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"sounding mcp did not listen on {port}")


def test_over_streamable_http_and_a_cancel_reaches_the_server(client, stack, mcp_collection, tmp_path):
    port = free_port()
    log = tmp_path / "mcp.log"
    command = [
        SOUNDING,
        "mcp",
        "--transport",
        "http",
        "--port",
        str(port),
        "--address",
        stack.settings.address,
    ]
    with log.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_listening(port, process)

        async def run():
            async with Client(f"http://127.0.0.1:{port}/mcp") as mcp_client:
                await exercise(mcp_client, client, mcp_collection)
                started = asyncio.Event()

                async def on_progress(value, total, message):
                    started.set()

                arguments = {"collection": mcp_collection, "claim": CLAIM, "max_queries": 4}
                call = asyncio.ensure_future(
                    mcp_client.call_tool("verify_claim", arguments, progress_callback=on_progress)
                )
                await asyncio.wait_for(started.wait(), FIRST_CALL_S)
                assert not call.done()
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call

        asyncio.run(run())
        deadline = time.monotonic() + 60
        while "verify_claim cancelled by the MCP client" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(timeout=30)
