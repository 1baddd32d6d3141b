"""The unauthenticated flood (`sounding eval flood`), on a stack of its own with tokens on both
ports: what callers without a token can take from those with one.

1. Streams held open: `streams` Health.Watch and `streams` reflection streams are opened without
   a token on the public port and as many on the sidecar's (which serves no reflection), and
   held, while `retrieves` Retrieves with a token run one after another and both servers' health
   is asked with a token. Counted: how the flood's streams ended (served and held, or refused
   and with what code), how many Retrieves succeeded, what the health checks said.
2. Bodies: `bodies` Retrieves whose request is `body_mib` MiB, sent at once without a token,
   then the same with a valid token (side by side in one run), then `bodies` health checks of
   that size without a token (health answers without one: its budget allows a few to be read);
   the orchestrator's resident memory (and its peak, sampled every 20 ms) before and after each
   batch.

The verdict (`passes`): every Retrieve with a token succeeded, both servers stayed SERVING, and
no more unauthenticated streams were held on a port than its per-address budget.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc
import psutil
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from sounding_client import Client

RETRIEVE = "/sounding.v1.SoundingService/Retrieve"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"


@dataclass(frozen=True)
class Target:
    """The stack under the flood: its two addresses, a token of each, the collection searched."""

    public: str
    sidecar: str
    public_token: str
    sidecar_token: str
    collection: str


async def open_streams(channel: grpc.aio.Channel, streams: int) -> tuple[dict[str, int], list]:
    """`streams` Health.Watch and `streams` reflection streams without a token on `channel`, each
    waited on for its first answer (then held): how many were served and held, and how many
    refused, by code; and the calls (cancel them to let go)."""
    watch = channel.unary_stream(
        "/grpc.health.v1.Health/Watch",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    reflect = channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )

    async def ask():
        yield reflection_pb2.ServerReflectionRequest(list_services="")
        await asyncio.Event().wait()  # held open until cancelled

    calls = [watch(health_pb2.HealthCheckRequest()) for _ in range(streams)]
    calls += [reflect(ask()) for _ in range(streams)]

    async def first(call) -> str:
        try:
            async with asyncio.timeout(60):
                await call.read()
            return "SERVED"
        except grpc.aio.AioRpcError as error:
            return error.code().name
        except TimeoutError:
            return "NO_ANSWER"

    outcomes: dict[str, int] = {}
    for outcome in await asyncio.gather(*(first(c) for c in calls)):
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes, calls


def _healthy(address: str, token: str) -> str:
    with grpc.insecure_channel(address) as channel:
        try:
            status = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), metadata=(("authorization", f"Bearer {token}"),), timeout=10
            )
        except grpc.RpcError as error:
            return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(status.status)


def held_streams(target: Target, streams: int, retrieves: int) -> dict:
    """Part 1 (module docstring)."""

    async def run() -> dict:
        public_channel = grpc.aio.insecure_channel(target.public)
        sidecar_channel = grpc.aio.insecure_channel(target.sidecar)
        public, public_calls = await open_streams(public_channel, streams)
        sidecar, sidecar_calls = await open_streams(sidecar_channel, streams)
        try:
            succeeded, failures = await asyncio.to_thread(_retrieve, target, retrieves)
            health = {
                "public": await asyncio.to_thread(_healthy, target.public, target.public_token),
                "sidecar": await asyncio.to_thread(_healthy, target.sidecar, target.sidecar_token),
            }
        finally:
            for call in public_calls + sidecar_calls:
                call.cancel()
            await public_channel.close()
            await sidecar_channel.close()
        return {
            "streams_per_kind_and_port": streams,
            "public_streams": public,
            "sidecar_streams": sidecar,
            "retrieves": retrieves,
            "retrieves_succeeded": succeeded,
            "retrieve_failures": failures,
            "health_with_a_token": health,
        }

    return asyncio.run(run())


def _retrieve(target: Target, count: int) -> tuple[int, dict[str, int]]:
    succeeded, failures = 0, {}
    with Client(target.public, token=target.public_token, timeout=60) as client:
        for i in range(count):
            try:
                client.retrieve_final(target.collection, f"how is the depth of water measured {i}", top_k=3)
                succeeded += 1
            except Exception as error:  # counted by kind: the verdict is that there are none
                name = getattr(getattr(error, "code", None), "name", type(error).__name__)
                failures[name] = failures.get(name, 0) + 1
    return succeeded, failures


def _memory_mib(process: psutil.Process) -> float:
    return process.memory_info().rss / 2**20


def large_bodies(target: Target, orchestrator_pid: int, bodies: int, body_mib: float) -> dict:
    """Part 2 (module docstring)."""
    process = psutil.Process(orchestrator_pid)
    text = b"x" * int(body_mib * 2**20)
    name = target.collection.encode()
    # A RetrieveRequest whose query (field 2) is the text; a HealthCheckRequest whose service
    # (field 1) is.
    retrieve_body = b"\x0a" + _varint(len(name)) + name + b"\x12" + _varint(len(text)) + text
    health_body = b"\x0a" + _varint(len(text)) + text

    def batch(path: str, body: bytes, token: str | None) -> dict:
        before = _memory_mib(process)
        peak = [before]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                peak[0] = max(peak[0], _memory_mib(process))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        with grpc.insecure_channel(target.public, options=[("grpc.max_send_message_length", -1)]) as channel:
            call = channel.unary_stream(path, request_serializer=bytes, response_deserializer=bytes)

            def one(_) -> str:
                try:
                    list(call(body, metadata=metadata, timeout=120))
                    return "OK"
                except grpc.RpcError as error:
                    return error.code().name

            with ThreadPoolExecutor(bodies) as pool:
                codes = list(pool.map(one, range(bodies)))
        time.sleep(1.0)
        done.set()
        sampler.join()
        counted: dict[str, int] = {}
        for code in codes:
            counted[code] = counted.get(code, 0) + 1
        return {
            "codes": counted,
            "rss_before_mib": round(before, 1),
            "rss_peak_mib": round(peak[0], 1),
            "rss_after_mib": round(_memory_mib(process), 1),
        }

    return {
        "bodies": bodies,
        "body_mib": body_mib,
        "without_a_token": batch(RETRIEVE, retrieve_body, None),
        "with_a_token": batch(RETRIEVE, retrieve_body, target.public_token),
        "health_check_without_a_token": batch(HEALTH_CHECK, health_body, None),
    }


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def verdict(held: dict, per_peer: int) -> bool:
    return (
        held["retrieves_succeeded"] == held["retrieves"]
        and set(held["health_with_a_token"].values()) == {"SERVING"}
        and held["public_streams"].get("SERVED", 0) <= per_peer
        and held["sidecar_streams"].get("SERVED", 0) <= per_peer
    )
