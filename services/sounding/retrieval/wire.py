"""The strategy-worker protocol (`sounding.worker.v1`) <-> the retrieval package's dataclasses.

The orchestrator encodes calls and decodes outcomes (`RayExecutor`); the worker does the
reverse (`StrategyWorker`). Hits travel as parallel columns, query vectors as float32 bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sounding.api.sounding.worker.v1 import worker_pb2
from sounding.retrieval.protocol import ArmRequest, ArmResult, ExpansionRequest, ExpansionResult
from sounding.store.reader import ChunkHit
from sounding.store.tenancy import ResourceRef


def _vector_bytes(vector: np.ndarray | None) -> bytes:
    return b"" if vector is None else np.asarray(vector, dtype="<f4").tobytes()


def _vector(data: bytes) -> np.ndarray | None:
    return np.frombuffer(data, dtype="<f4") if data else None


def _hits_message(hits: list[ChunkHit]) -> worker_pb2.Hits:
    if not hits:
        return worker_pb2.Hits()
    document_ids, chunk_ids, scores = zip(*hits, strict=True)
    return worker_pb2.Hits(document_ids=document_ids, chunk_ids=chunk_ids, scores=scores)


def _hits(message: worker_pb2.Hits) -> list[ChunkHit]:
    return list(
        map(ChunkHit._make, zip(message.document_ids, message.chunk_ids, message.scores, strict=True))
    )


def arm_call(arm: str, request: ArmRequest, trace_carrier: Mapping[str, str]) -> worker_pb2.WorkerCall:
    return worker_pb2.WorkerCall(
        trace_carrier=trace_carrier,
        run_arm=worker_pb2.ArmCall(
            arm=arm,
            collection=request.collection.key,
            query=request.query,
            limit=request.limit,
            timeout_s=request.timeout_s,
            query_vector=_vector_bytes(request.query_vector),
            collection_version=request.collection_version,
            flow=request.flow,
        ),
    )


def arm_request(call: worker_pb2.ArmCall) -> ArmRequest:
    return ArmRequest(
        collection=ResourceRef.from_key(call.collection),
        query=call.query,
        limit=call.limit,
        timeout_s=call.timeout_s if call.HasField("timeout_s") else None,
        query_vector=_vector(call.query_vector),
        collection_version=call.collection_version if call.HasField("collection_version") else None,
        flow=call.flow,
    )


def arm_outcome(result: ArmResult) -> worker_pb2.WorkerReply:
    return worker_pb2.WorkerReply(
        arm=worker_pb2.ArmOutcome(
            arm=result.arm,
            hits=_hits_message(result.hits),
            latency_ms=result.latency_ms,
            generated_text=result.generated_text,
            cached_decode_ms=result.cached_decode_ms,
        )
    )


def arm_result(reply: worker_pb2.WorkerReply) -> ArmResult:
    outcome = reply.arm
    return ArmResult(
        outcome.arm, _hits(outcome.hits), outcome.latency_ms, outcome.generated_text, outcome.cached_decode_ms
    )


def expansion_call(request: ExpansionRequest, trace_carrier: Mapping[str, str]) -> worker_pb2.WorkerCall:
    return worker_pb2.WorkerCall(
        trace_carrier=trace_carrier,
        expand=worker_pb2.ExpansionCall(
            collection=request.collection.key,
            query=request.query,
            strategy=request.strategy,
            queries=request.queries,
            limit=request.limit,
            timeout_s=request.timeout_s,
            query_vector=_vector_bytes(request.query_vector),
            flow=request.flow,
        ),
    )


def expansion_request(call: worker_pb2.ExpansionCall) -> ExpansionRequest:
    return ExpansionRequest(
        collection=ResourceRef.from_key(call.collection),
        query=call.query,
        strategy=call.strategy,
        queries=call.queries,
        limit=call.limit,
        timeout_s=call.timeout_s if call.HasField("timeout_s") else None,
        query_vector=_vector(call.query_vector),
        flow=call.flow,
    )


def expansion_outcome(result: ExpansionResult) -> worker_pb2.WorkerReply:
    return worker_pb2.WorkerReply(
        expansion=worker_pb2.ExpansionOutcome(
            strategy=result.strategy,
            queries=result.queries,
            hits=[_hits_message(hits) for hits in result.hits],
            latency_ms=result.latency_ms,
        )
    )


def expansion_result(reply: worker_pb2.WorkerReply) -> ExpansionResult:
    outcome = reply.expansion
    return ExpansionResult(
        outcome.strategy, list(outcome.queries), [_hits(hits) for hits in outcome.hits], outcome.latency_ms
    )
