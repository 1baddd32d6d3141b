"""What the two clients do each their own way: the channel they open (grpc.aio's or grpc's, with
the same options and credentials), waiting for it, and the blocking client's Observe future.
Everything else is written once, in _async_client.py, and generated for the blocking client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import grpc
from sounding_api.sounding.v1 import corpus_pb2_grpc, sounding_pb2, sounding_pb2_grpc, tools_pb2_grpc

from sounding_client.credentials import PathType, channel_credentials

DEFAULT_ADDRESS = "127.0.0.1:50051"
# Reads are retried when the server is unavailable (restarting, draining: the next attempt may
# reach another replica) before it answered; no other call is, since it may have taken effect. A
# Retrieve changes nothing but its own record, which an Observe may refer to.
RETRIED_READS = {
    "sounding.v1.CorpusService": ("GetCollection", "ListCollections"),
    "sounding.v1.SoundingService": ("Retrieve", "GetStrategyMetrics"),
    "sounding.v1.ToolService": ("ListTools", "RouteTool", "GetToolMetrics"),
}
SERVICE_CONFIG = {
    "methodConfig": [
        {
            "name": [
                {"service": service, "method": m}
                for service, methods in RETRIED_READS.items()
                for m in methods
            ],
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.2s",
                "maxBackoff": "2s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ],
}
# With `round_robin`, calls spread over every address the target resolves to (a Kubernetes
# headless Service's dns:/// name gives one per orchestrator). Not the default: while its one
# address is down, a round-robin channel fails calls at once, where the default waits for the
# connection it is making.
ROUND_ROBIN = {"loadBalancingConfig": [{"round_robin": {}}]}
CHANNEL_OPTIONS = [
    ("grpc.enable_retries", 1),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    # Reconnect within a second or two after the server restarts, not after minutes of backoff.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class _Connection:
    """A channel to the server, made by the subclass's `_channel_factories` (secure, insecure: the
    latter without a token or TLS), and the three services' stubs on it."""

    _channel_factories: tuple

    def __init__(
        self,
        address: str,
        token: str | None,
        ca_file: PathType | None,
        cert_file: PathType | None,
        key_file: PathType | None,
        round_robin: bool = False,
    ):
        make_secure, make_insecure = self._channel_factories
        security = channel_credentials(token, ca_file, cert_file, key_file)
        config = {**SERVICE_CONFIG, **(ROUND_ROBIN if round_robin else {})}
        options = [*CHANNEL_OPTIONS, ("grpc.service_config", json.dumps(config))]
        if security is None:
            self._channel = make_insecure(address, options=options)
        else:
            self._channel = make_secure(address, security, options=options)
        self._sounding = sounding_pb2_grpc.SoundingServiceStub(self._channel)
        self._corpus = corpus_pb2_grpc.CorpusServiceStub(self._channel)
        self._tools = tools_pb2_grpc.ToolServiceStub(self._channel)


class AsyncConnection(_Connection):
    """The asyncio client's connection (grpc.aio)."""

    _channel_factories = (grpc.aio.secure_channel, grpc.aio.insecure_channel)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the channel is connected; TimeoutError after `timeout` seconds."""
        await asyncio.wait_for(self._channel.channel_ready(), timeout)

    _pause = staticmethod(asyncio.sleep)


class Connection(_Connection):
    """The blocking client's connection (grpc), with what only it offers: `observe_future`."""

    _channel_factories = (grpc.secure_channel, grpc.insecure_channel)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the channel is connected; grpc.FutureTimeoutError after `timeout` seconds."""
        grpc.channel_ready_future(self._channel).result(timeout=timeout)

    _pause = staticmethod(time.sleep)

    def observe_future(self, requests: Iterator[sounding_pb2.ObserveRequest], timeout: float) -> grpc.Future:
        """Observe as a cancellable call (for the `ToolUseObserver`, whose close cancels it):
        `result()` is the raw ObserveResponse or raises the `grpc.RpcError`."""
        return self._sounding.Observe.future(requests, timeout=timeout)
