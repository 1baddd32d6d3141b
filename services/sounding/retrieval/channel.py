"""A direct, authenticated call channel between the orchestrator and one strategy worker.

Ray starts, places and restarts the workers; the calls themselves travel over one TCP
connection per worker, to the address the worker listens on (loopback when Ray is local, the
node's address in a cluster). A Ray actor call costs several times this channel's round trip
(bench/README.md, SciFact retrieval), and a Retrieve's dense arm makes one call after the query
is embedded.

Messages are protobuf (`sounding.worker.v1`): the client sends `WorkerCall`, the server answers
each with a `WorkerReply` of the same call_id; a `cancel` call cancels the running call of that
id; a connection that closes cancels the server's calls on it, and on the client fails the calls
in flight with `Unavailable` (the next call connects again).

Both ends hold the secret the worker was created with and prove it without sending it:
  server -> client   a fresh 32-byte nonce Ns
  client -> server   a 32-byte nonce Nc and HMAC(secret, "client" | Ns | Nc)
  server -> client   HMAC(secret, "server" | Nc | Ns)
A wrong proof closes the connection before anything else is read (a recorded handshake fails
against the next connection's fresh Ns), and a client that has not proved itself within
`HANDSHAKE_TIMEOUT_S` is dropped. Connections still proving themselves are capped apart
(`MAX_PENDING_HANDSHAKES`; a new one beyond it drops the oldest, so sockets that never prove
anything cannot keep a client out), and only proven connections count against
`MAX_CONNECTIONS`. A client whose handshake is cut off tries again (`CONNECT_ATTEMPTS`).

Every later frame (4-byte big-endian length, 32-byte tag,
message) is tagged with HMAC(session key, direction | sequence number | message), the session key
being HMAC(secret, "session" | Ns | Nc): frames cannot be forged, replayed or reordered.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import logging
import secrets
import struct
from collections.abc import Awaitable, Callable

from sounding.api.sounding.worker.v1 import worker_pb2
from sounding.runtime import errors

log = logging.getLogger(__name__)

NONCE_BYTES = 32
TAG_BYTES = hashlib.sha256().digest_size
HANDSHAKE_TIMEOUT_S = 3.0
# Once a frame's length has arrived, the rest of it must arrive within this many seconds.
FRAME_TIMEOUT_S = 30.0
MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_CONNECTIONS = 16
MAX_PENDING_HANDSHAKES = 16
CONNECT_ATTEMPTS = 3

_LENGTH = struct.Struct("!I")
_SEQUENCE = struct.Struct("!Q")

Dispatch = Callable[[worker_pb2.WorkerCall], Awaitable[worker_pb2.WorkerReply]]


def _proof(secret: bytes, label: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.digest(secret, label + first + second, "sha256")


class _Sealed:
    """One direction of an authenticated connection: tags what it writes, checks what it reads."""

    def __init__(self, key: bytes, direction: bytes):
        self._key = key
        self._direction = direction
        self._sequence = itertools.count()

    def _tag(self, payload: bytes) -> bytes:
        header = self._direction + _SEQUENCE.pack(next(self._sequence))
        return hmac.digest(self._key, header + payload, "sha256")

    def seal(self, payload: bytes) -> bytes:
        return _LENGTH.pack(TAG_BYTES + len(payload)) + self._tag(payload) + payload

    async def read(self, reader: asyncio.StreamReader) -> bytes:
        (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
        if not TAG_BYTES <= length <= MAX_FRAME_BYTES:
            raise ConnectionError(f"a frame of {length} bytes")
        frame = await asyncio.wait_for(reader.readexactly(length), FRAME_TIMEOUT_S)
        tag, payload = frame[:TAG_BYTES], frame[TAG_BYTES:]
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise ConnectionError("a frame with a wrong tag")
        return payload


def _session(secret: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return _proof(secret, b"session", server_nonce, client_nonce)


class ChannelServer:
    """Serves `dispatch` to clients that prove they hold `secret`; runs in the worker's loop."""

    def __init__(self, dispatch: Dispatch, secret: bytes):
        self._dispatch = dispatch
        self._secret = secret
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        # Connections still in their handshake, oldest first (dicts keep insertion order).
        self._pending: dict[asyncio.Task, None] = {}
        self._proven = 0
        self._closing = False
        self.calls_in_flight = 0

    async def start(self, host: str) -> tuple[str, int]:
        """Listens on an ephemeral port of `host`; returns (host, port)."""
        self._server = await asyncio.start_server(self._serve, host, 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    async def close(self) -> None:
        """Stops listening and closes every connection (their calls are cancelled)."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for connection in self._connections:
            connection.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """The session key, once the client has proved it holds the secret."""
        server_nonce = secrets.token_bytes(NONCE_BYTES)
        writer.write(server_nonce)
        answer = await reader.readexactly(NONCE_BYTES + TAG_BYTES)
        client_nonce, proof = answer[:NONCE_BYTES], answer[NONCE_BYTES:]
        if not hmac.compare_digest(proof, _proof(self._secret, b"client", server_nonce, client_nonce)):
            raise PermissionError("a wrong handshake")
        writer.write(_proof(self._secret, b"server", client_nonce, server_nonce))
        return _session(self._secret, server_nonce, client_nonce)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = asyncio.current_task()
        assert connection is not None, "asyncio serves each connection in a task"
        if len(self._pending) >= MAX_PENDING_HANDSHAKES:
            oldest = next(iter(self._pending))
            self._pending.pop(oldest)
            oldest.cancel()
        self._connections.add(connection)
        self._pending[connection] = None
        tasks: dict[int, asyncio.Task] = {}
        proven = False
        try:
            key = await asyncio.wait_for(self._handshake(reader, writer), HANDSHAKE_TIMEOUT_S)
            self._pending.pop(connection, None)
            if self._proven >= MAX_CONNECTIONS:
                log.warning("channel: refused a proven connection beyond the cap of %d", MAX_CONNECTIONS)
                return
            self._proven, proven = self._proven + 1, True
            incoming, outgoing = _Sealed(key, b"c"), _Sealed(key, b"s")
            while True:
                call = worker_pb2.WorkerCall.FromString(await incoming.read(reader))
                if call.WhichOneof("method") == "cancel":
                    if call.call_id in tasks:
                        tasks[call.call_id].cancel()
                    continue
                tasks[call.call_id] = asyncio.create_task(self._call(call, writer, outgoing, tasks))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away: its calls are cancelled below
        except asyncio.CancelledError:
            if not self._closing:  # a pending handshake dropped for a newer connection
                return
            raise
        except (PermissionError, TimeoutError) as refused:
            log.warning("channel: closed a connection: %s", refused or "no handshake in time")
        except Exception:
            log.exception("channel: an unreadable call; closing the connection")
        finally:
            # Closed first: a cancellation arriving while the calls wind down must not leave the
            # transport open (Server.wait_closed waits for every connection's transport).
            writer.close()
            for task in tasks.values():
                task.cancel()
            try:
                await asyncio.gather(*tasks.values(), return_exceptions=True)
            finally:
                self._connections.discard(connection)
                self._pending.pop(connection, None)
                self._proven -= proven

    async def _call(self, call: worker_pb2.WorkerCall, writer, outgoing: _Sealed, tasks: dict) -> None:
        self.calls_in_flight += 1
        try:
            reply = await self._dispatch(call)
        except asyncio.CancelledError:
            return  # cancelled by the caller, who expects no reply
        except Exception as error:  # the caller re-raises it
            if not isinstance(error, errors.SoundingError):
                error = errors.internal(f"strategy worker call {call.WhichOneof('method')}", error)
            reply = worker_pb2.WorkerReply(
                error=worker_pb2.WorkerError(
                    code=error.code, reason=error.reason, message=error.message, field=error.field or ""
                )
            )
        finally:
            self.calls_in_flight -= 1
            tasks.pop(call.call_id, None)
        reply.call_id = call.call_id
        if not writer.is_closing():
            writer.write(outgoing.seal(reply.SerializeToString()))


class ChannelClient:
    """Calls one worker's ChannelServer; concurrent calls share one connection.

    `locate` returns the worker's current (host, port) (after a restart it differs); it is
    asked again whenever a connection has to be made."""

    def __init__(self, locate: Callable[[], Awaitable[tuple[str, int]]], secret: bytes):
        self._locate = locate
        self._secret = secret
        self._call_ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._outgoing: _Sealed | None = None
        self._reading: asyncio.Task | None = None
        self._connecting = asyncio.Lock()

    async def call(self, call: worker_pb2.WorkerCall) -> worker_pb2.WorkerReply:
        """Sends `call` (its call_id is set here) and returns the reply; a failed call raises the
        worker's error. Cancelling the caller cancels the call on the worker."""
        writer, outgoing = await self._connected()
        call_id = call.call_id = next(self._call_ids)
        reply = asyncio.get_running_loop().create_future()
        self._pending[call_id] = reply
        try:
            writer.write(outgoing.seal(call.SerializeToString()))
            answer: worker_pb2.WorkerReply = await reply
        except asyncio.CancelledError:
            if not writer.is_closing():
                cancel = worker_pb2.WorkerCall(call_id=call_id, cancel=worker_pb2.CancelCall())
                writer.write(outgoing.seal(cancel.SerializeToString()))
            raise
        finally:
            self._pending.pop(call_id, None)
        if answer.WhichOneof("result") == "error":
            failure = answer.error
            raise errors.of_code(
                failure.code, failure.message, reason=failure.reason, field=failure.field or None
            )
        return answer

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)

    async def _connected(self) -> tuple[asyncio.StreamWriter, _Sealed]:
        async with self._connecting:
            if self._writer is None or self._outgoing is None or self._writer.is_closing():
                reader, writer, key = await self._connect()
                self._writer, self._outgoing = writer, _Sealed(key, b"c")
                self._reading = asyncio.create_task(self._read(reader, writer, _Sealed(key, b"s")))
            return self._writer, self._outgoing

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
        """A proven connection; a handshake cut off (the server dropped it for a newer one while
        sockets that prove nothing crowd it) is tried again, CONNECT_ATTEMPTS times in all."""
        for attempt in range(CONNECT_ATTEMPTS):
            host, port = await self._locate()
            writer = None
            try:
                reader, writer = await asyncio.open_connection(host, port)
                key = await asyncio.wait_for(self._handshake(reader, writer), HANDSHAKE_TIMEOUT_S)
                return reader, writer, key
            except (OSError, EOFError, TimeoutError) as error:
                if writer is not None:
                    writer.close()
                if isinstance(error, PermissionError) or attempt == CONNECT_ATTEMPTS - 1:
                    raise errors.Unavailable(f"strategy worker at {host}:{port}: {error!r}") from None
        raise AssertionError("unreachable")

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        server_nonce = await reader.readexactly(NONCE_BYTES)
        client_nonce = secrets.token_bytes(NONCE_BYTES)
        writer.write(client_nonce + _proof(self._secret, b"client", server_nonce, client_nonce))
        proof = await reader.readexactly(TAG_BYTES)
        if not hmac.compare_digest(proof, _proof(self._secret, b"server", client_nonce, server_nonce)):
            writer.close()
            raise PermissionError("the worker did not prove it holds the secret")
        return _session(self._secret, server_nonce, client_nonce)

    async def _read(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, incoming: _Sealed
    ) -> None:
        lost: Exception = errors.Unavailable("strategy worker channel closed")
        try:
            while True:
                answer = worker_pb2.WorkerReply.FromString(await incoming.read(reader))
                reply = self._pending.get(answer.call_id)
                if reply is not None and not reply.done():
                    reply.set_result(answer)
        except Exception as error:  # a closed, broken or forged connection
            lost = errors.Unavailable(f"strategy worker connection lost: {error!r}")
        finally:
            writer.close()
            for reply in self._pending.values():
                if not reply.done():
                    reply.set_exception(lost)
