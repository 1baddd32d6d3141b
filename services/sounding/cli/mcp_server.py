"""`sounding mcp`: a Model Context Protocol server (the official `mcp` SDK, over stdio or streamable
HTTP) in front of a Sounding deployment, which it calls through the Python client with the same
address, token and TLS settings as the other commands (README, "MCP server").

Tools: `retrieve`, `verify_claim`, `report_outcome`, `route_tool`, `report_tool_use`; resources:
the collections. A tool's stream events reach the MCP client as progress notifications; a failed
call is a tool error naming the gRPC code, the ErrorInfo reason and the fields; an MCP client's
cancel cancels the tool's gRPC call."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any, cast

import grpc
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import BaseModel, Field
from sounding_client import (
    Ask,
    AsyncClient,
    Collection,
    Evidence,
    Expansion,
    Final,
    InquiryAnswer,
    InquiryPolicy,
    Plan,
    RetrievalOutcome,
    SoundingError,
    StrategyResult,
    ToolUse,
)

log = logging.getLogger("sounding.mcp")

INSTRUCTIONS = (
    "Sounding retrieves context with an honest account of what it may have missed (miss rate, "
    "coverage, semantic gaps), verifies claims against a collection, and routes requests to tools. "
    "It learns from outcomes: after using the results of `retrieve`, call `report_outcome`; after "
    "using a tool `route_tool` proposed, call `report_tool_use`."
)


class RetrievedHit(BaseModel):
    document_id: str
    chunk_id: str
    score: float
    title: str
    text: str
    # How each retrieval arm ranked the hit (1 = first).
    arm_ranks: dict[str, int]


class Gap(BaseModel):
    kind: str
    description: str
    severity: float
    mitigation: str


class Retrieved(BaseModel):
    retrieval_id: str = Field(description="pass to report_outcome")
    hits: list[RetrievedHit]
    miss_rate: float | None = Field(description="the stated chance that relevant material was missed")
    coverage_estimate: float | None
    estimated_recall: float | None = Field(description="stated once the collection is calibrated")
    confidence: float | None
    semantic_gaps: list[Gap]
    failed_arms: list[str]


class Query(BaseModel):
    query: str
    outcome: str = Field(description="entailing, contradicting or nothing")
    documents: list[str]
    strongest_sentence: str


class Verdict(BaseModel):
    verdict: str = Field(description="SUPPORT, CONTRADICT or NOT_ENOUGH_INFO")
    confidence: float | None
    stopping_reason: str
    queries: list[Query]
    session_id: str


class Reported(BaseModel):
    recorded: int
    rejected: list[str]


class RoutedTool(BaseModel):
    name: str
    score: float


class Route(BaseModel):
    candidates: list[RoutedTool]
    toolset_version: int


def _failed(error: SoundingError) -> ToolError:
    fields = f" (fields: {', '.join(error.fields)})" if error.fields else ""
    reason = f" [{error.reason}]" if error.reason else ""
    return ToolError(f"{error.code.name}{reason}: {error.message}{fields}")


@asynccontextmanager
async def _calls(tool: str) -> AsyncIterator[None]:
    """A tool's gRPC calls: a failure becomes a tool error; a cancel is logged and goes on (the
    tool's stream is closed on the way out, which cancels its call)."""
    try:
        yield
    except SoundingError as error:
        raise _failed(error) from None
    except asyncio.CancelledError:
        log.info("%s cancelled by the MCP client: its gRPC call is cancelled", tool)
        raise


def build_server(connect: Callable[[], AsyncClient]) -> MCPServer:
    """The MCP server; `connect` makes the Python client it calls Sounding with (one per process,
    opened and closed with the server)."""

    connected: list[AsyncClient] = []  # the server's one client while it runs (its lifespan)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        async with connect() as client:
            connected.append(client)
            try:
                yield
            finally:
                connected.remove(client)

    server = MCPServer("sounding", instructions=INSTRUCTIONS, lifespan=lifespan)

    def sounding() -> AsyncClient:
        return connected[0]

    @server.tool(
        description="Search a Sounding collection. Returns the hits with their provenance and what the "
        "search may have missed (miss rate, coverage, semantic gaps). Afterwards call report_outcome "
        "with the retrieval_id and the documents you used: that is how the collection learns."
    )
    async def retrieve(collection: str, query: str, ctx: Context, k: int = 10) -> Retrieved:
        stream = _generator(sounding().retrieve(collection, query, top_k=k))
        async with _calls("retrieve"), aclosing(stream) as events:
            step = 0
            async for event in events:
                step += 1
                if isinstance(event, Final):
                    return _retrieved(event)
                await ctx.report_progress(step, None, _progress(event))
        raise ToolError("UNAVAILABLE: the Retrieve stream ended without a final result")

    @server.tool(
        description="Verify a claim against a collection: Sounding chooses retrieval queries by expected "
        "information gain, judges what they find with its NLI model and answers SUPPORT, CONTRADICT or "
        "NOT_ENOUGH_INFO with a confidence. Each query and its evidence arrive as progress."
    )
    async def verify_claim(
        collection: str, claim: str, ctx: Context, max_queries: int = 4, target_confidence: float = 0.9
    ) -> Verdict:
        policy = InquiryPolicy(max_turns=max_queries, target_confidence=target_confidence)
        queries: list[Query] = []
        inquiry = sounding().inquire(
            "corpus", policy, domain_parameters={"collection": collection}, context=claim
        )
        async with _calls("verify_claim"), aclosing(_generator(inquiry.__aiter__())) as events:
            # Progress counts steps, two per query (asked, then judged), so it only ever rises.
            async for event in events:
                if isinstance(event, Ask):
                    step = 2 * len(queries) + 1
                    await ctx.report_progress(step, 2 * max_queries, f"query {event.question!r}")
                elif isinstance(event, Evidence):
                    queries.append(_query(event))
                    found = ", ".join(queries[-1].documents) or "nothing new"
                    step = 2 * len(queries)
                    await ctx.report_progress(step, 2 * max_queries, f"found {found}: {event.outcome}")
                elif isinstance(event, InquiryAnswer):
                    return Verdict(
                        verdict=event.answer,
                        confidence=event.confidence.value,
                        stopping_reason=event.stopping_reason,
                        queries=queries,
                        session_id=event.session_id,
                    )
        raise ToolError("UNAVAILABLE: the inquiry ended without an answer")

    @server.tool(
        description="Report what came of a retrieve call: the documents you used, those you found "
        "missing, and whether you succeeded. Call it once per retrieve whose results you acted on; "
        "Sounding learns its ranking and calibrates its miss rate from these reports."
    )
    async def report_outcome(
        retrieval_id: str,
        ctx: Context,
        used_document_ids: list[str] | None = None,
        missed_document_ids: list[str] | None = None,
        success: bool | None = None,
        feedback: str = "",
    ) -> Reported:
        outcome = RetrievalOutcome(
            retrieval_id,
            tuple(used_document_ids or ()),
            feedback=feedback,
            agent_success=success,
            missed_document_ids=tuple(missed_document_ids or ()),
        )
        async with _calls("report_outcome"):
            result = await sounding().observe([outcome])
        return _reported(result)

    @server.tool(
        description="Rank a registered toolset's tools for a request (best first). After using one, "
        "call report_tool_use so the router learns."
    )
    async def route_tool(toolset: str, request: str, ctx: Context, top_k: int = 5) -> Route:
        async with _calls("route_tool"):
            route = await sounding().route_tool(toolset, request, top_k=top_k)
        return Route(
            candidates=[RoutedTool(name=n, score=s) for n, s in route.candidates],
            toolset_version=route.version,
        )

    @server.tool(
        description="Report the tool you used for a request (and whether it succeeded), so Sounding's "
        "tool router learns which tool serves which requests."
    )
    async def report_tool_use(
        toolset: str, request: str, used_tool: str, ctx: Context, success: bool | None = None
    ) -> Reported:
        async with _calls("report_tool_use"):
            result = await sounding().observe([ToolUse(toolset, request, used_tool, success=success)])
        return _reported(result)

    @server.resource("sounding://collections", mime_type="application/json", description="every collection")
    async def collections() -> str:
        try:
            found = [_collection(c) async for c in sounding().list_collections()]
        except SoundingError as error:
            raise ResourceError(str(_failed(error))) from None
        return json.dumps(found)

    @server.resource(
        "sounding://collections/{name}", mime_type="application/json", description="one collection"
    )
    async def collection(name: str) -> str:
        try:
            return json.dumps(_collection(await sounding().get_collection(name)))
        except SoundingError as error:
            missing = error.code is grpc.StatusCode.NOT_FOUND
            raise (ResourceNotFoundError if missing else ResourceError)(str(_failed(error))) from None

    return server


def _generator(events: AsyncIterator[Any]) -> AsyncGenerator[Any, None]:
    """The client's streams are async generators (typed as iterators): closing one cancels its call."""
    return cast(AsyncGenerator[Any, None], events)


def _progress(event: Any) -> str:
    if isinstance(event, Plan):
        return f"plan ({event.mode}): {', '.join(a.arm for a in event.arms if a.chosen)}"
    if isinstance(event, StrategyResult):
        return f"arm {event.arm}: {len(event.hits)} hits"
    if isinstance(event, Expansion):
        return f"expansion {event.iteration} ({event.strategy}): {event.new_hits} new hits"
    return "fused"


def _retrieved(final: Final) -> Retrieved:
    uncertainty = final.uncertainty
    return Retrieved(
        retrieval_id=final.retrieval_id,
        hits=[
            RetrievedHit(
                document_id=h.document_id,
                chunk_id=h.chunk_id,
                score=h.score,
                title=h.title,
                text=h.text,
                arm_ranks={c.arm: c.rank for c in h.contributions},
            )
            for h in final.hits
        ],
        miss_rate=uncertainty.miss_rate.value,
        coverage_estimate=uncertainty.coverage_estimate.value,
        estimated_recall=uncertainty.estimated_recall.value,
        confidence=final.confidence.value,
        semantic_gaps=[
            Gap(kind=g.kind, description=g.description, severity=g.severity, mitigation=g.mitigation)
            for g in uncertainty.semantic_gaps
        ],
        failed_arms=[f"{f.arm}: {f.code} {f.message}" for f in final.failed_arms],
    )


def _query(event: Evidence) -> Query:
    strongest = max(event.sentences, key=lambda s: max(s.entailment, s.contradiction), default=None)
    return Query(
        query=event.query,
        outcome=event.outcome or "nothing",
        documents=list(dict.fromkeys(h.document_id for h in event.hits if h.new)),
        strongest_sentence=strongest.text if strongest else "",
    )


def _reported(result: Any) -> Reported:
    return Reported(
        recorded=result.recorded, rejected=[f"{r.index}: {r.code} {r.message}" for r in result.rejected]
    )


def _collection(found: Collection) -> dict[str, Any]:
    described = dataclasses.asdict(found)
    return described | {"create_time": found.create_time.isoformat() if found.create_time else None}
