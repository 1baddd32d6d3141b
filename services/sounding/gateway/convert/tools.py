"""ToolService's messages."""

from __future__ import annotations

from sounding_api.sounding.v1 import tools_pb2

from sounding.core.tool_routing import Route
from sounding.tools.protocol import ToolInfo, ToolMetrics, ToolSpec


def tool_specs(request: tools_pb2.PutToolsRequest) -> list[ToolSpec]:
    return [
        ToolSpec(name=t.name, description=t.description, parameters_json=t.parameters_json)
        for t in request.tools
    ]


def tool(info: ToolInfo) -> tools_pb2.Tool:
    return tools_pb2.Tool(
        name=info.name,
        description=info.description,
        parameters_json=info.parameters_json,
        version=info.version,
        exemplar_count=info.exemplar_count,
    )


def route_response(route: Route, version: int) -> tools_pb2.RouteToolResponse:
    return tools_pb2.RouteToolResponse(
        candidates=[tools_pb2.ToolScore(name=n, score=s) for n, s in route.candidates],
        top1=route.top1,
        margin=route.margin,
        ok=route.ok,
        version=version,
    )


def metrics_response(m: ToolMetrics) -> tools_pb2.GetToolMetricsResponse:
    return tools_pb2.GetToolMetricsResponse(
        version=m.version,
        tool_count=m.tool_count,
        events=m.events,
        processed=m.processed,
        flagged_share=m.flagged_share,
        flagged_fallback=m.flagged_fallback,
        flagged_disagreement=m.flagged_disagreement,
        labels_free=m.labels_free,
        labels_teacher=m.labels_teacher,
        labels_trusted=m.labels_trusted,
        teacher_dropped=m.teacher_dropped,
        accuracy=m.accuracy,
        accuracy_windows=[
            tools_pb2.ToolAccuracyWindow(
                first_sequence=w.first_sequence,
                last_sequence=w.last_sequence,
                labelled=w.labelled,
                accuracy=w.accuracy,
            )
            for w in m.accuracy_windows
        ],
        exemplars=dict(m.exemplars),
        dropped_since_start=m.dropped_since_start,
        refreshes_since_start=m.refreshes_since_start,
        mean_refresh_seconds=m.mean_refresh_seconds,
        untrusted_exemplars_route=m.untrusted_exemplars_route,
    )
