"""The worker call channel over a real loopback connection, in one event loop."""

import asyncio
import contextlib

import pytest
from sounding import errors
from sounding.retrieval.channel import ChannelClient, ChannelServer

pytestmark = pytest.mark.unit

SECRET = b"s" * 32


class Worker:
    def __init__(self):
        self.cancelled = asyncio.Event()
        self.started = asyncio.Event()

    async def echo(self, value, delay=0.0):
        await asyncio.sleep(delay)
        return value

    async def fail(self, field):
        raise errors.InvalidArgument("bad value", field=field)

    async def hang(self):
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def serve(worker: Worker, secret: bytes = SECRET) -> tuple[ChannelServer, tuple[str, int]]:
    server = ChannelServer({"echo": worker.echo, "fail": worker.fail, "hang": worker.hang}, secret)
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


def test_concurrent_calls_share_a_connection_and_get_their_own_replies():
    async def run():
        async with connected(Worker()) as (_, client):
            # The slower call is sent first: replies arrive out of order.
            return await asyncio.gather(*(client.call("echo", {"n": n}, 0.05 * (3 - n)) for n in range(4)))

    assert asyncio.run(run()) == [{"n": n} for n in range(4)]


def test_a_handlers_error_is_raised_to_the_caller_with_its_details():
    async def run():
        async with connected(Worker()) as (_, client):
            with pytest.raises(errors.InvalidArgument) as raised:
                await client.call("fail", "top_k")
            with pytest.raises(errors.SoundingError, match="no method 'missing'"):
                await client.call("missing")
            return raised.value, await client.call("echo", "still serving")

    error, after = asyncio.run(run())
    assert (error.field, error.code, error.message) == ("top_k", "INVALID_ARGUMENT", "bad value")
    assert after == "still serving"


def test_cancelling_the_caller_cancels_the_call_on_the_worker():
    async def run():
        worker = Worker()
        async with connected(worker) as (server, client):
            call = asyncio.ensure_future(client.call("hang"))
            await asyncio.wait_for(worker.started.wait(), 5)
            assert server.calls_in_flight == 1
            call.cancel()
            await asyncio.wait_for(worker.cancelled.wait(), 5)
            await asyncio.sleep(0.01)
            return server.calls_in_flight, await client.call("echo", 1)

    assert asyncio.run(run()) == (0, 1)


def test_a_closed_connection_cancels_the_workers_calls():
    async def run():
        worker = Worker()
        server, address = await serve(worker)
        client = client_of(address)
        try:
            asyncio.ensure_future(client.call("hang"))
            await asyncio.wait_for(worker.started.wait(), 5)
            await client.close()
            await asyncio.wait_for(worker.cancelled.wait(), 5)
            return server.calls_in_flight
        finally:
            await server.close()

    assert asyncio.run(run()) == 0


def test_a_wrong_secret_is_refused_before_anything_is_unpickled():
    async def run():
        async with connected(Worker(), secret=b"x" * 32) as (server, client):
            with pytest.raises(errors.Unavailable):
                await asyncio.wait_for(client.call("echo", 1), 5)
            return server.calls_in_flight

    assert asyncio.run(run()) == 0


def test_a_lost_worker_fails_calls_in_flight_and_the_next_call_finds_its_replacement():
    async def run():
        first_worker = Worker()
        first, first_address = await serve(first_worker)
        addresses = [first_address]

        async def locate():
            return addresses[-1]

        client = ChannelClient(locate, SECRET)
        call = asyncio.ensure_future(client.call("hang"))
        await asyncio.wait_for(first_worker.started.wait(), 5)
        await first.close()  # as when the worker dies: its socket and connections close
        with pytest.raises(errors.Unavailable):
            await asyncio.wait_for(call, 5)
        second, second_address = await serve(Worker())
        addresses.append(second_address)
        try:
            return await client.call("echo", "from the replacement")
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
            await client.call("echo", 1)
        finally:
            await client.close()

    with pytest.raises(errors.Unavailable):
        asyncio.run(run())
