"""Tool routing on the live stack: a toolset registered, requests routed, tool uses observed and
learned from (a successful use of a registered tool is its own label, by default), state kept
across a kill."""

import time

import grpc
import pytest
from sounding_client import SoundingError, Tool, ToolUse

TOOLS = [
    Tool("get_weather", "Get the weather forecast (rain, temperature, wind) for a city."),
    Tool("send_email", "Send an email message to a recipient."),
    Tool(
        "convert_currency",
        "Convert an amount of money from one currency to another.",
        '{"type": "object", "properties": {"amount": {}, "from": {}, "to": {}}}',
    ),
    Tool("search_web", "Search the web for pages about a topic."),
]


def wait_processed(client, toolset: str, events: int, timeout_s: float = 600.0):
    deadline = time.monotonic() + timeout_s
    while True:
        metrics = client.tool_metrics(toolset)
        if metrics.processed >= events or time.monotonic() > deadline:
            return metrics
        time.sleep(0.2)


def test_register_list_route_and_delete(client):
    assert client.put_tools("it-registry", TOOLS) == (1, 4)
    assert [t.name for t in client.list_tools("it-registry", page_size=3)] == sorted(t.name for t in TOOLS)
    route = client.route_tool("it-registry", "Will it rain in Paris tomorrow?", top_k=2)
    assert route.ok and route.top1 == "get_weather" and len(route.candidates) == 2
    assert route.margin == pytest.approx(route.candidates[0][1] - route.candidates[1][1])
    offered = client.route_tool(
        "it-registry", "Will it rain in Paris?", offered_tools=["send_email", "search_web"]
    )
    assert {n for n, _ in offered.candidates} == {"send_email", "search_web"}
    assert client.delete_tools("it-registry", ["get_weather"]) == (2, 3)
    after = client.route_tool("it-registry", "Will it rain in Paris tomorrow?", top_k=10)
    assert "get_weather" not in dict(after.candidates) and after.version == 2


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda c: c.put_tools("it-bad", [Tool("no spaces allowed", "x")]), "tools[0].name"),
        (lambda c: c.put_tools("it-bad", [Tool("ok", "x", "[1, 2]")]), "tools[0].parameters_json"),
        (lambda c: c.put_tools("Bad Name", [Tool("ok", "x")]), "toolset"),
        (lambda c: c.route_tool("it-missing", "anything"), "toolset"),
        (lambda c: c.route_tool("it-bad", "   "), "request"),
    ],
)
def test_bad_tool_requests_name_the_field(client, call, field):
    with pytest.raises(SoundingError) as refused:
        call(client)
    assert refused.value.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    assert refused.value.fields == [field]


def test_an_observed_misroute_teaches_the_router_and_survives_a_kill(client, stack):
    toolset = "it-learning"
    client.put_tools(toolset, TOOLS)
    request = "How many yen do I get for 100 dollars today?"
    near_duplicate = "How many yen would I get for 250 dollars?"
    before = client.route_tool(toolset, near_duplicate)
    assert before.top1 != "search_web"
    # The agent searched the web for such requests, successfully: a disagreement with the ranker,
    # labelled by the successful use itself.
    uses = [ToolUse(toolset, f"{request} ({i})", "search_web", success=True) for i in range(4)]
    uses.append(ToolUse(toolset, request, "shell"))  # a fallback: flagged as well
    result = client.observe(uses)
    assert result.recorded == 5 and result.rejected == []
    metrics = wait_processed(client, toolset, 5)
    assert metrics.processed == 5 and metrics.events == 5
    assert metrics.flagged_disagreement == 4 and metrics.labels_trusted == 4
    assert metrics.flagged_fallback == 1
    assert metrics.exemplars["search_web"] == 4
    learned = client.route_tool(toolset, near_duplicate)
    assert learned.top1 == "search_web"
    [search] = [t for t in client.list_tools(toolset) if t.name == "search_web"]
    assert search.exemplar_count == 4

    stack.kill_orchestrator()
    stack.start_orchestrator()
    again = client.route_tool(toolset, near_duplicate)
    assert [n for n, _ in again.candidates] == [n for n, _ in learned.candidates]
    assert [s for _, s in again.candidates] == pytest.approx([s for _, s in learned.candidates])
    assert again.version == learned.version
    assert client.tool_metrics(toolset).processed == 5


def test_tool_uses_for_unknown_toolsets_are_rejected_by_position(client):
    client.put_tools("it-observe", TOOLS)
    result = client.observe(
        [ToolUse("it-observe", "rain?", "get_weather"), ToolUse("it-nowhere", "rain?", "get_weather")]
    )
    assert result.recorded == 1 and [(r.index, r.code) for r in result.rejected] == [(1, "NOT_FOUND")]
