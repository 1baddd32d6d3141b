"""A direct call channel between the orchestrator and one strategy worker.

Ray starts, places and restarts the workers; the calls themselves travel over one TCP
connection per worker, to the address of the worker's node (so workers on other nodes of a Ray
cluster are reached the same way). A Ray actor call took 3–7 ms round trip on the 2-core
machine this was built on, this channel about 1.5 ms (bench/README.md, SciFact retrieval), and
a Retrieve's dense arm makes one such call after the query is embedded.

Wire format: frames of a 4-byte big-endian length and a pickle. The client first sends the
secret the worker was created with (raw bytes, checked before anything is unpickled), then
  request  (call_id, method, args)   the worker runs `handlers[method](*args)` as a task;
  cancel   (call_id, None, ())       the worker cancels that task;
  reply    (call_id, ok, value)      the result, or the exception the call raised.
A connection that closes cancels the worker's calls on it; on the client a lost connection
fails the calls in flight with `Unavailable`, and the next call connects again.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import pickle
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sounding import errors

log = logging.getLogger(__name__)

_LENGTH = struct.Struct("!I")
MAX_FRAME_BYTES = 256 * 1024 * 1024

Handler = Callable[..., Awaitable[Any]]


def _frame(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


async def _read_frame(reader: asyncio.StreamReader, limit: int = MAX_FRAME_BYTES) -> bytes:
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if length > limit:
        raise ConnectionError(f"frame of {length} bytes exceeds {limit}")
    return await reader.readexactly(length)


def _dumps(message: tuple) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


class ChannelServer:
    """Serves `handlers` to clients that present `secret`; runs in the worker's event loop."""

    def __init__(self, handlers: Mapping[str, Handler], secret: bytes):
        self._handlers = dict(handlers)
        self._secret = secret
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self.calls_in_flight = 0

    async def start(self, host: str) -> tuple[str, int]:
        """Listens on an ephemeral port of `host`; returns (host, port)."""
        self._server = await asyncio.start_server(self._serve, host, 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    async def close(self) -> None:
        """Stops listening and closes every connection (their calls are cancelled)."""
        if self._server is not None:
            self._server.close()
        for connection in self._connections:
            connection.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = asyncio.current_task()
        self._connections.add(connection)
        tasks: dict[int, asyncio.Task] = {}
        try:
            if not hmac.compare_digest(await _read_frame(reader, len(self._secret)), self._secret):
                log.warning("channel: refused a connection with a wrong secret")
                return
            while True:
                call_id, method, args = pickle.loads(await _read_frame(reader))
                if method is None:
                    if call_id in tasks:
                        tasks[call_id].cancel()
                    continue
                tasks[call_id] = asyncio.create_task(self._call(call_id, method, args, writer, tasks))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away: its calls are cancelled below
        except Exception:
            log.exception("channel: an unreadable request; closing the connection")
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            writer.close()
            self._connections.discard(connection)

    async def _call(self, call_id: int, method: str, args: tuple, writer, tasks: dict) -> None:
        self.calls_in_flight += 1
        try:
            handler = self._handlers.get(method)
            if handler is None:
                raise errors.SoundingError(f"the strategy worker has no method {method!r}")
            reply = (call_id, True, await handler(*args))
        except asyncio.CancelledError:
            return  # cancelled by the caller, who expects no reply
        except Exception as error:  # the caller re-raises it
            reply = (call_id, False, error)
        finally:
            self.calls_in_flight -= 1
            tasks.pop(call_id, None)
        try:
            payload = _dumps(reply)
        except Exception as error:  # an unpicklable result or exception
            payload = _dumps((call_id, False, errors.SoundingError(f"strategy worker reply: {error!r}")))
        if not writer.is_closing():
            writer.write(_frame(payload))


class ChannelClient:
    """Calls one worker's ChannelServer; concurrent calls share one connection.

    `locate` returns the worker's current (host, port) (after a restart it differs); it is
    asked again whenever a connection has to be made."""

    def __init__(self, locate: Callable[[], Awaitable[tuple[str, int]]], secret: bytes):
        self._locate = locate
        self._secret = secret
        self._call_ids = itertools.count()
        self._pending: dict[int, asyncio.Future] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task | None = None
        self._connecting = asyncio.Lock()

    async def call(self, method: str, *args: Any) -> Any:
        """`method(*args)` on the worker. Cancelling the caller cancels it there."""
        writer = await self._connected()
        call_id = next(self._call_ids)
        reply = asyncio.get_running_loop().create_future()
        self._pending[call_id] = reply
        try:
            writer.write(_frame(_dumps((call_id, method, args))))
            ok, value = await reply
        except asyncio.CancelledError:
            if not writer.is_closing():
                writer.write(_frame(_dumps((call_id, None, ()))))
            raise
        finally:
            self._pending.pop(call_id, None)
        if ok:
            return value
        raise value

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is None or self._writer.is_closing():
                host, port = await self._locate()
                try:
                    reader, writer = await asyncio.open_connection(host, port)
                except OSError as error:
                    raise errors.Unavailable(f"strategy worker at {host}:{port}: {error}") from None
                writer.write(_frame(self._secret))
                self._writer = writer
                self._reading = asyncio.create_task(self._read(reader, writer))
            return self._writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lost: Exception = errors.Unavailable("strategy worker channel closed")
        try:
            while True:
                call_id, ok, value = pickle.loads(await _read_frame(reader))
                reply = self._pending.get(call_id)
                if reply is not None and not reply.done():
                    reply.set_result((ok, value))
        except Exception as error:  # a closed or broken connection
            lost = errors.Unavailable(f"strategy worker connection lost: {error!r}")
        finally:
            writer.close()
            for reply in self._pending.values():
                if not reply.done():
                    reply.set_exception(lost)
