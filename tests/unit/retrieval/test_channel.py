"""The worker call channel over a real loopback connection, in one event loop."""

import asyncio
import contextlib
import secrets
import time

import pytest
from sounding.api.sounding.worker.v1 import worker_pb2
from sounding.retrieval import channel as channel_module
from sounding.retrieval.channel import ChannelClient, ChannelServer
from sounding.runtime import errors

pytestmark = pytest.mark.unit

SECRET = b"s" * 32


def forget(collection: str) -> worker_pb2.WorkerCall:
    """A call the test worker echoes back (as the generated text of an arm outcome)."""
    return worker_pb2.WorkerCall(forget=worker_pb2.ForgetCall(collection=collection))


def hang() -> worker_pb2.WorkerCall:
    return worker_pb2.WorkerCall(calls_in_flight=worker_pb2.CallsInFlightCall())


class Worker:
    """forget: echoes the collection after `delay` seconds ("fail:<field>" fails with that field);
    calls_in_flight: hangs until cancelled."""

    def __init__(self):
        self.cancelled = asyncio.Event()
        self.started = asyncio.Event()
        self.calls = 0

    async def dispatch(self, call: worker_pb2.WorkerCall) -> worker_pb2.WorkerReply:
        self.calls += 1
        if call.WhichOneof("method") == "forget":
            value = call.forget.collection
            if value.startswith("fail:"):
                raise errors.InvalidArgument("bad value", field=value.removeprefix("fail:"))
            if value == "crash":
                raise ValueError("an unexpected failure")
            delay, _, text = value.partition("|")
            await asyncio.sleep(float(delay or 0))
            return worker_pb2.WorkerReply(arm=worker_pb2.ArmOutcome(generated_text=text))
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def serve(worker: Worker, secret: bytes = SECRET) -> tuple[ChannelServer, tuple[str, int]]:
    server = ChannelServer(worker.dispatch, secret)
    return server, await server.start("127.0.0.1")


def client_of(address: tuple[str, int], secret: bytes = SECRET) -> ChannelClient:
    async def locate():
        return address

    return ChannelClient(locate, secret)


@contextlib.asynccontextmanager
async def connected(worker: Worker, secret: bytes = SECRET):
    """A server for `worker` and a client presenting `secret`, both closed afterwards."""
    server, address = await serve(worker)
    client = client_of(address, secret)
    try:
        yield server, client
    finally:
        await client.close()
        await server.close()


async def echo(client: ChannelClient, text: str, delay: float = 0.0) -> str:
    return (await client.call(forget(f"{delay}|{text}"))).arm.generated_text


def test_concurrent_calls_share_a_connection_and_get_their_own_replies():
    async def run():
        async with connected(Worker()) as (_, client):
            # The slower call is sent first: replies arrive out of order.
            return await asyncio.gather(*(echo(client, f"n{n}", 0.05 * (3 - n)) for n in range(4)))

    assert asyncio.run(run()) == [f"n{n}" for n in range(4)]


def test_a_handlers_error_is_raised_to_the_caller_with_its_details():
    async def run():
        async with connected(Worker()) as (_, client):
            with pytest.raises(errors.InvalidArgument) as raised:
                await client.call(forget("fail:top_k"))
            with pytest.raises(errors.SoundingError, match="incident") as unexpected:
                await client.call(forget("crash"))
            return raised.value, unexpected.value, await echo(client, "still serving")

    error, unexpected, after = asyncio.run(run())
    assert (error.field, error.code, error.reason, error.message) == (
        "top_k",
        "INVALID_ARGUMENT",
        "INVALID_ARGUMENT",
        "bad value",
    )
    assert unexpected.code == "INTERNAL" and "unexpected failure" not in unexpected.message
    assert after == "still serving"


def test_cancelling_the_caller_cancels_the_call_on_the_worker():
    async def run():
        worker = Worker()
        async with connected(worker) as (server, client):
            call = asyncio.ensure_future(client.call(hang()))
            await asyncio.wait_for(worker.started.wait(), 5)
            assert server.calls_in_flight == 1
            call.cancel()
            await asyncio.wait_for(worker.cancelled.wait(), 5)
            await asyncio.sleep(0.01)
            return server.calls_in_flight, await echo(client, "1")

    assert asyncio.run(run()) == (0, "1")


def test_a_closed_connection_cancels_the_workers_calls():
    async def run():
        worker = Worker()
        server, address = await serve(worker)
        client = client_of(address)
        try:
            asyncio.ensure_future(client.call(hang()))
            await asyncio.wait_for(worker.started.wait(), 5)
            await client.close()
            await asyncio.wait_for(worker.cancelled.wait(), 5)
            return server.calls_in_flight
        finally:
            await server.close()

    assert asyncio.run(run()) == 0


def test_a_client_with_a_wrong_secret_is_refused_and_runs_nothing():
    async def run():
        worker = Worker()
        async with connected(worker, secret=b"x" * 32) as (server, client):
            with pytest.raises(errors.Unavailable):
                await asyncio.wait_for(echo(client, "1"), 5)
            return worker.calls, server.calls_in_flight

    assert asyncio.run(run()) == (0, 0)


def test_a_server_without_the_secret_is_not_trusted_by_the_client():
    async def run():
        async def impostor(reader, writer):
            writer.write(secrets.token_bytes(channel_module.NONCE_BYTES))
            await reader.readexactly(channel_module.NONCE_BYTES + channel_module.TAG_BYTES)
            writer.write(secrets.token_bytes(channel_module.TAG_BYTES))
            await reader.read()

        server = await asyncio.start_server(impostor, "127.0.0.1", 0)
        client = client_of(server.sockets[0].getsockname()[:2])
        try:
            with pytest.raises(errors.Unavailable, match="did not prove"):
                await asyncio.wait_for(echo(client, "1"), 5)
        finally:
            await client.close()
            server.close()

    asyncio.run(run())


async def _closed(reader: asyncio.StreamReader, within_s: float) -> bool:
    """Whether the server closes the connection (EOF) within `within_s`, sending nothing more."""
    return await asyncio.wait_for(reader.read(), within_s) == b""


async def _genuine_call(host: str, port: int, collection: str):
    """A raw connection that completes the handshake and sends one call, and what it wrote
    (as an eavesdropper records it): (reader, writer, handshake answer, call frame)."""
    reader, writer = await asyncio.open_connection(host, port)
    server_nonce = await reader.readexactly(channel_module.NONCE_BYTES)
    client_nonce = secrets.token_bytes(channel_module.NONCE_BYTES)
    answer = client_nonce + channel_module._proof(SECRET, b"client", server_nonce, client_nonce)
    writer.write(answer)
    await reader.readexactly(channel_module.TAG_BYTES)
    key = channel_module._session(SECRET, server_nonce, client_nonce)
    frame = channel_module._Sealed(key, b"c").seal(forget(collection).SerializeToString())
    writer.write(frame)
    await channel_module._Sealed(key, b"s").read(reader)
    return reader, writer, answer, frame


def test_a_replayed_handshake_is_closed_before_any_payload_is_read():
    async def run():
        worker = Worker()
        server, (host, port) = await serve(worker)
        try:
            _, writer, answer, frame = await _genuine_call(host, port, "0|recorded")
            writer.close()
            assert worker.calls == 1
            # Replayed on a new connection: refused at the proof, the frame never read.
            reader, writer = await asyncio.open_connection(host, port)
            await reader.readexactly(channel_module.NONCE_BYTES)
            writer.write(answer + frame)
            closed = await _closed(reader, 5)
            writer.close()
            return closed, worker.calls
        finally:
            await server.close()

    assert asyncio.run(run()) == (True, 1)


def test_a_replayed_frame_on_a_live_connection_closes_it():
    async def run():
        worker = Worker()
        server, (host, port) = await serve(worker)
        try:
            reader, writer, _, frame = await _genuine_call(host, port, "0|once")
            writer.write(frame)
            closed = await _closed(reader, 5)
            writer.close()
            return closed, worker.calls
        finally:
            await server.close()

    assert asyncio.run(run()) == (True, 1)


def test_a_silent_connection_is_closed_within_the_handshake_timeout(monkeypatch):
    monkeypatch.setattr(channel_module, "HANDSHAKE_TIMEOUT_S", 0.3)

    async def run():
        server, (host, port) = await serve(Worker())
        try:
            reader, writer = await asyncio.open_connection(host, port)
            started = time.monotonic()
            await reader.readexactly(channel_module.NONCE_BYTES)
            closed = await _closed(reader, 5)
            writer.close()
            return closed, time.monotonic() - started
        finally:
            await server.close()

    closed, waited = asyncio.run(run())
    assert closed and waited < 5


def test_proven_connections_beyond_the_cap_are_closed(monkeypatch):
    monkeypatch.setattr(channel_module, "MAX_CONNECTIONS", 2)

    async def run():
        async with connected(Worker()) as (server, first):
            second, third = client_of(server_address(server)), client_of(server_address(server))
            try:
                served = [await echo(first, "a"), await echo(second, "b")]
                with pytest.raises(errors.Unavailable):
                    await echo(third, "c")
                return served
            finally:
                await second.close()
                await third.close()

    assert asyncio.run(run()) == ["a", "b"]


def test_sockets_that_never_prove_anything_cannot_keep_a_client_out(monkeypatch):
    monkeypatch.setattr(channel_module, "MAX_PENDING_HANDSHAKES", 4)
    monkeypatch.setattr(channel_module, "MAX_CONNECTIONS", 1)

    async def run():
        async with connected(Worker()) as (server, client):
            host, port = server_address(server)
            held = [await asyncio.open_connection(host, port) for _ in range(12)]
            for reader, _ in held:
                await reader.readexactly(channel_module.NONCE_BYTES)
            served = await echo(client, "through")  # the only proven connection: within the cap
            # The oldest give way at once, well before their handshake time runs out.
            dropped = [await _closed(reader, 1) for reader, _ in held[:8]]
            for _, writer in held:
                writer.close()
            return served, dropped

    served, dropped = asyncio.run(run())
    assert served == "through" and all(dropped)


def server_address(server: ChannelServer) -> tuple[str, int]:
    assert server._server is not None
    return server._server.sockets[0].getsockname()[:2]


def test_a_lost_worker_fails_calls_in_flight_and_the_next_call_finds_its_replacement():
    async def run():
        first_worker = Worker()
        first, first_address = await serve(first_worker)
        addresses = [first_address]

        async def locate():
            return addresses[-1]

        client = ChannelClient(locate, SECRET)
        call = asyncio.ensure_future(client.call(hang()))
        await asyncio.wait_for(first_worker.started.wait(), 5)
        await first.close()  # as when the worker dies: its socket and connections close
        with pytest.raises(errors.Unavailable):
            await asyncio.wait_for(call, 5)
        second, second_address = await serve(Worker())
        addresses.append(second_address)
        try:
            return await echo(client, "from the replacement")
        finally:
            await client.close()
            await second.close()

    assert asyncio.run(run()) == "from the replacement"


def test_an_unreachable_worker_is_unavailable():
    async def run():
        server, address = await serve(Worker())
        await server.close()
        client = client_of(address)
        try:
            await echo(client, "1")
        finally:
            await client.close()

    with pytest.raises(errors.Unavailable):
        asyncio.run(run())
