"""Non-blocking tool-use observers (spec tool-selection-learning): an agent reports the tool it
used on its turn's path, and the report must never slow the turn down.

`observe` only puts the event on a bounded queue and returns (a full queue drops the event and
counts it); a background worker sends the queued events to Observe in batches, retrying a batch
whose call failed. `close` stops intake, gives the worker `timeout` seconds to send what is
queued, cancels what is left (a call in flight included; counted as dropped) and returns with the
worker gone. Closing twice is harmless; a closed observer, or one without a client, ignores
`observe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Iterable

import grpc

from sounding_client import _convert, _requests
from sounding_client import types as t
from sounding_client.types import SoundingError

# Codes after which the same batch may succeed (nothing was recorded, or it may not have been).
RETRIED = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL", "UNKNOWN"}


class _Observer:
    """What both observers share: their settings, counts and intake. `sent`: events the server
    acknowledged; `dropped`: events a full queue refused or `close` cancelled; `failed`: events
    of batches given up after `max_attempts` failed calls (or refused outright)."""

    def __init__(
        self,
        client,
        *,
        queue_size: int = 1000,
        batch_size: int = 64,
        flush_interval_s: float = 0.5,
        call_timeout_s: float = 10.0,
        max_attempts: int = 4,
        backoff_s: float = 0.2,
    ):
        self._client = client
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._flush_interval_s = flush_interval_s
        self._call_timeout_s = call_timeout_s
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._closed = client is None
        # The counts change on the caller's thread and on the worker's.
        self._counts = threading.Lock()
        self.sent = 0
        self.dropped = 0
        self.failed = 0

    def observe(
        self,
        toolset: str,
        request: str,
        used_tool: str,
        offered_tools: Iterable[str] = (),
        success: bool | None = None,
    ) -> None:
        """Queue the event and return at once."""
        if self._closed:
            return
        if not self._offer(t.ToolUse(toolset, request, used_tool, tuple(offered_tools), success)):
            self._drop(1)

    def _offer(self, use: t.ToolUse) -> bool:
        """Queue `use` if there is room."""
        raise NotImplementedError

    def _drop(self, events: int) -> None:
        with self._counts:
            self.dropped += events

    def _counted(self, result: t.ObserveResult) -> None:
        with self._counts:
            self.sent += result.recorded
            self.failed += len(result.rejected)

    def _give_up(self, error: SoundingError, attempt: int, batch: list[t.ToolUse]) -> bool:
        """Whether a failed call ends the batch (counted as failed) rather than being retried."""
        if error.code.name in RETRIED and attempt < self._max_attempts - 1:
            return False
        with self._counts:
            self.failed += len(batch)
        return True


# Put on the queue by close to wake a worker waiting for the next event.
_WAKE = object()
# How long close waits for a worker whose call it cancelled to notice and end.
_CANCEL_GRACE_S = 1.0


class ToolUseObserver(_Observer):
    """For the blocking `Client`: a daemon thread sends the batches."""

    def __init__(self, client, **options):
        super().__init__(client, **options)
        self._queue: queue.Queue = queue.Queue(self._queue_size)
        self._deadline: float | None = None  # set by close: the worker's last moment
        self._stop = threading.Event()
        self._call: grpc.Future | None = None  # the Observe in flight, for close to cancel
        self._cancelling = False  # set by close past its timeout: a call started now is cancelled
        self._call_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        if client is not None:
            self._worker = threading.Thread(target=self._work, name="sounding-tool-observer", daemon=True)
            self._worker.start()

    def _offer(self, use: t.ToolUse) -> bool:
        try:
            self._queue.put_nowait(use)
        except queue.Full:
            return False
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Stop intake, send what is queued within `timeout` seconds, cancel the rest (a call
        still in flight then is cancelled too); returns with the worker thread ended."""
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is None:
            return
        self._deadline = time.monotonic() + timeout
        self._stop.set()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_WAKE)
        worker.join(timeout)
        if worker.is_alive():
            with self._call_lock:
                self._cancelling = True
                if self._call is not None:
                    self._call.cancel()
            worker.join(_CANCEL_GRACE_S)

    def _remaining(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()

    def _work(self) -> None:
        while True:
            batch = self._take()
            if batch:
                self._send(batch)
            if self._stop.is_set() and (self._queue.empty() or (self._remaining() or 0) <= 0):
                break
        while True:  # past the deadline: what is left is cancelled
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not _WAKE:
                self._drop(1)

    def _take(self) -> list[t.ToolUse]:
        """The next batch: the first event waited for (up to the flush interval), then whatever
        is already queued."""
        batch: list[t.ToolUse] = []
        wait = self._flush_interval_s
        while len(batch) < self._batch_size:
            try:
                item = self._queue.get(timeout=wait) if wait else self._queue.get_nowait()
            except queue.Empty:
                break
            wait = 0
            if item is not _WAKE:
                batch.append(item)
        return batch

    def _send(self, batch: list[t.ToolUse]) -> None:
        requests: list | None = None
        for attempt in range(self._max_attempts):
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                self._drop(len(batch))
                return
            if requests is None:  # built once (not past the deadline), sent again by each attempt
                requests = list(_requests.observe_requests(batch))
            timeout = self._call_timeout_s if remaining is None else min(self._call_timeout_s, remaining)
            call = self._client.observe_future(iter(requests), timeout)
            with self._call_lock:
                self._call = call
                if self._cancelling:
                    call.cancel()
            try:
                result = _convert.observe_result(call.result())
            except grpc.FutureCancelledError:
                self._drop(len(batch))
                return
            except grpc.RpcError as error:
                if self._give_up(_convert.error(error), attempt, batch):
                    return
                self._stop.wait(self._backoff_s * 2**attempt)
                continue
            finally:
                with self._call_lock:
                    self._call = None
            self._counted(result)
            return


class AsyncToolUseObserver(_Observer):
    """For the `AsyncClient`: a task on the running event loop sends the batches (create the
    observer inside the loop; call `observe` from it)."""

    def __init__(self, client, **options):
        super().__init__(client, **options)
        self._queue: asyncio.Queue[t.ToolUse] = asyncio.Queue(self._queue_size)
        self._worker = None if client is None else asyncio.get_running_loop().create_task(self._work())

    def _offer(self, use: t.ToolUse) -> bool:
        try:
            self._queue.put_nowait(use)
        except asyncio.QueueFull:
            return False
        return True

    async def close(self, timeout: float = 5.0) -> None:
        """Stop intake, send what is queued within `timeout` seconds, cancel the rest."""
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is None:
            return
        try:
            await asyncio.wait_for(self._drain(), timeout)
        except TimeoutError:
            pass
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
        self._drop(self._queue.qsize())
        while not self._queue.empty():
            self._queue.get_nowait()

    async def _drain(self) -> None:
        await self._queue.join()

    async def _work(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            sent = False
            try:
                await self._send(batch)
                sent = True
            finally:
                if not sent:  # cancelled by close: the batch is cancelled with the rest
                    self._drop(len(batch))
                for _ in batch:
                    self._queue.task_done()

    async def _send(self, batch: list[t.ToolUse]) -> None:
        for attempt in range(self._max_attempts):
            try:
                result = await self._client.observe(batch, timeout=self._call_timeout_s)
            except SoundingError as error:
                if self._give_up(error, attempt, batch):
                    return
                await asyncio.sleep(self._backoff_s * 2**attempt)
                continue
            self._counted(result)
            return
