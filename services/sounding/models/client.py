"""Async client of the models sidecar, used by the orchestrator and the strategy workers.

Failures come back as domain errors: a sidecar that is down or restarting gives `Unavailable`
quickly (no waiting for readiness, reconnect backoff capped at one second), so a caller's
deadline is never spent waiting on a dead peer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Literal

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.trace import SpanKind

from sounding.api.sounding.models.v1 import models_pb2, models_pb2_grpc
from sounding.runtime import telemetry
from sounding.runtime.errors import Unavailable
from sounding.serving.grpc_errors import from_rpc_error
from sounding.serving.rpc import channel_credentials
from sounding.settings.config import ModelsSettings

ClusterMethod = Literal["exact", "embedding", "entailment"]
# gRPC metadata naming the caller's flow (the sidecar queues flows fairly).
FLOW_METADATA_KEY = "x-sounding-flow"
SERVICE_NAME = models_pb2.DESCRIPTOR.services_by_name["ModelService"].full_name
_CLUSTER_METHODS = {
    "exact": models_pb2.CLUSTER_METHOD_EXACT,
    "embedding": models_pb2.CLUSTER_METHOD_EMBEDDING,
    "entailment": models_pb2.CLUSTER_METHOD_ENTAILMENT,
}

CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


def sidecar_token(settings: ModelsSettings) -> str:
    """The token the sidecar requires and its clients send ('' when none is configured)."""
    if settings.token_file is None:
        return ""
    token = settings.token_file.read_text().strip()
    if not token:
        raise ValueError(f"the sidecar token file {settings.token_file} is empty")
    return token


class ModelsClient:
    def __init__(self, address: str, credentials: grpc.ChannelCredentials | None = None):
        self.address = address
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        else:
            self._channel = grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
        self._stub = models_pb2_grpc.ModelServiceStub(self._channel)

    @classmethod
    def of(cls, settings: ModelsSettings) -> ModelsClient:
        """A client of the sidecar these settings describe (its TLS and token)."""
        return cls(settings.address, channel_credentials(settings.tls, sidecar_token(settings)))

    async def close(self) -> None:
        await self._channel.close()

    async def check_serving(self) -> None:
        """Returns when the sidecar's health service says SERVING; Unavailable otherwise."""
        try:
            response = await health_pb2_grpc.HealthStub(self._channel).Check(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME)
            )
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error, "models sidecar health") from None
        if response.status != health_pb2.HealthCheckResponse.SERVING:
            raise Unavailable("the models sidecar is not serving yet")

    async def embed(self, texts: Sequence[str], timeout: float | None = None) -> np.ndarray:
        """L2-normalised float32 embeddings, one row per text."""
        with telemetry.client_call(f"{SERVICE_NAME}/Embed", {"sounding.texts": len(texts)}):
            try:
                response = await self._stub.Embed(
                    models_pb2.EmbedRequest(texts=list(texts)),
                    timeout=timeout,
                    metadata=tuple(telemetry.inject().items()),
                )
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error, "models sidecar Embed") from None
        vectors = np.frombuffer(response.vectors, dtype="<f4")
        return vectors.reshape(response.count, response.dimension)

    async def entail(self, pairs: Sequence[tuple[str, str]], timeout: float | None = None) -> np.ndarray:
        """(entailment, neutral, contradiction) probabilities, one row per (premise, hypothesis)."""
        with telemetry.client_call(f"{SERVICE_NAME}/Entail", {"sounding.pairs": len(pairs)}):
            try:
                response = await self._stub.Entail(
                    models_pb2.EntailRequest(
                        pairs=[models_pb2.TextPair(premise=p, hypothesis=h) for p, h in pairs]
                    ),
                    timeout=timeout,
                    metadata=tuple(telemetry.inject().items()),
                )
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error, "models sidecar Entail") from None
        return np.asarray(
            [(r.entailment, r.neutral, r.contradiction) for r in response.results], dtype=np.float64
        ).reshape(-1, 3)

    async def cluster(
        self,
        texts: Sequence[str],
        method: ClusterMethod = "embedding",
        distance_threshold: float = 0.0,
        timeout: float | None = None,
    ) -> list[int]:
        """Cluster labels, numbered in order of first appearance (0 threshold: the default)."""
        with telemetry.client_call(
            f"{SERVICE_NAME}/Cluster", {"sounding.texts": len(texts), "sounding.cluster.method": method}
        ):
            try:
                response = await self._stub.Cluster(
                    models_pb2.ClusterRequest(
                        texts=list(texts),
                        method=_CLUSTER_METHODS[method],
                        distance_threshold=distance_threshold,
                    ),
                    timeout=timeout,
                    metadata=tuple(telemetry.inject().items()),
                )
            except grpc.aio.AioRpcError as error:
                raise from_rpc_error(error, "models sidecar Cluster") from None
        return list(response.labels)

    async def embedder_info(self, timeout: float | None = None) -> tuple[str, int]:
        """The embedding model's name and dimension."""
        try:
            response = await self._stub.Embed(
                models_pb2.EmbedRequest(texts=["dimension probe"]), timeout=timeout
            )
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error, "models sidecar Embed") from None
        return response.model, response.dimension

    def generate(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        timeout: float | None = None,
        flow: str = "",
        cache_scope: str = "",
    ) -> AsyncGenerator[models_pb2.GenerateResponse, None]:
        """Streams generated text pieces; the last one carries the finish reason. Closing the
        stream early cancels the generation. `flow` names the caller's flow of requests (a
        Retrieve, an inquiry session): the sidecar serves flows round-robin and bounds each.
        Cached generations are shared only within `cache_scope` (the tenant)."""
        request = models_pb2.GenerateRequest(
            messages=[models_pb2.ChatMessage(**m) for m in messages],
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            stop=list(stop),
            cache_scope=cache_scope,
        )
        if seed is not None:
            request.seed = seed
        pieces = self._generate(request, timeout, flow)
        return telemetry.traced_stream(pieces, f"{SERVICE_NAME}/Generate", kind=SpanKind.CLIENT, rpc=True)

    async def _generate(
        self, request: models_pb2.GenerateRequest, timeout: float | None, flow: str
    ) -> AsyncGenerator[models_pb2.GenerateResponse, None]:
        metadata = (*telemetry.inject().items(), (FLOW_METADATA_KEY, flow))
        call = self._stub.Generate(request, timeout=timeout, metadata=metadata)
        try:
            async for piece in call:
                yield piece
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error, "models sidecar Generate") from None
        finally:
            call.cancel()
