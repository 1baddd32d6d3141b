"""InquiryService: runs Inquire streams over the engine and saves the session after every step.

The first request starts or resumes a session; every later one answers the pending question,
except in a domain that answers its own questions (corpus): there the service runs each question
as it is asked and streams what it found, until the answer.
A session's state is saved before the events of its step are sent, so a client that loses the
stream (or an orchestrator that restarts) resumes with `Resume{session_id}` exactly where it was.

One stream holds a session at a time, across every orchestrator on the store: a stream takes the
session's lock, then its hold in the store (`store.session_holds`), before it loads the session;
a second stream on a held session is refused (SESSION_BUSY; after HANDOVER_S, in case the stream
holding it is just ending), and a stream that lost its hold (stalled past its TTL) ends at its
next save (UNAVAILABLE, SESSION_TAKEN_OVER) before it saves. Every move's CPU-bound part (EIG
over the hypotheses, the bulls-and-cows look-ahead, encoding the session) runs in a bounded
thread pool, never on the event loop. A domain may limit how many of its sessions are open at
once (`DomainSpec.open_session_limit`: the llm domain's `max_open_llm_sessions`); each llm
session's generations run as one flow in the sidecar, at most `llm_generations_in_flight` at a
time.

A session belongs to the tenant that started it: it is stored under the tenant's `ResourceRef`,
so another tenant's resume finds nothing (SESSION_NOT_FOUND). A session
idle for `session_retention_hours` is deleted (`expire_idle_sessions`), unless a stream holds it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sounding.inquiry import engine
from sounding.inquiry.protocol import AnswerEvent, InquiryEvent, Start
from sounding.inquiry.registry import DOMAINS, Backend
from sounding.inquiry.session import Session
from sounding.runtime import errors
from sounding.runtime.offload import BoundedPool, completed
from sounding.settings.limits import InquiryLimits
from sounding.store.collections import Store
from sounding.store.tenancy import DEFAULT_TENANT, ResourceRef, is_name

log = logging.getLogger(__name__)

# How long a stream waits for a session's previous stream, ending, to let go of it (a client
# that closes a stream and resumes at once), and how often it looks in the meantime.
HANDOVER_S = 2.0
HANDOVER_POLL_S = 0.1
# How often idle sessions are looked for: hourly, or ten times per retention if that is shorter
# (at most once a second).
EXPIRY_INTERVAL_S = 3600.0


@dataclass(frozen=True)
class ResumeRequest:
    session_id: str


@dataclass(frozen=True)
class ObservationRequest:
    question_id: str
    answer: str


InquiryRequest = Start | ResumeRequest | ObservationRequest


Thresholds = Callable[[str, str], Awaitable[Mapping[str, Mapping[str, Any]]]]


class InquiryService:
    """`backend(session_id, tenant, kind)` gives what a session's domain thinks with, of the kind
    its spec names (`registry.Backend`: the generators, or the corpus tools)."""

    def __init__(
        self,
        store: Store,
        backend: Callable[[str, str, Backend], Any] | None = None,
        limits: InquiryLimits = InquiryLimits(),
    ):
        self._store = store
        self._backend = backend or (lambda session_id, tenant, kind: None)
        self._limits = limits
        self._locks: weakref.WeakValueDictionary[ResourceRef, asyncio.Lock] = weakref.WeakValueDictionary()
        self._compute = BoundedPool(limits.compute_threads, limits.compute_queue, "inquiry")
        self._draining = asyncio.Event()
        # Open sessions by domain, of the domains that limit them.
        self._open_sessions: Counter[str] = Counter()

    def close(self) -> None:
        self._compute.close()

    async def expire_idle_sessions(self) -> None:
        """Runs until cancelled: now and then deletes the sessions idle for longer than
        `session_retention_hours` (never, at 0), except those a stream holds."""
        retention_s = self._limits.session_retention_hours * 3600
        if not retention_s:
            return
        while True:
            await self.expire_once(time.time() - retention_s)
            await asyncio.sleep(max(1.0, min(EXPIRY_INTERVAL_S, retention_s / 10)))

    async def expire_once(self, idle_before_s: float) -> int:
        """Deletes the sessions whose last step was saved before `idle_before_s` (seconds since
        the epoch) and no stream holds; a failure is logged (the next pass tries again)."""

        def held(key: ResourceRef) -> bool:
            lock = self._locks.get(key)
            return lock is not None and lock.locked()

        try:
            gone = await self._store.expire_sessions(int(idle_before_s * 1e6), held)
        except Exception:
            log.warning("expiring idle inquiry sessions failed; the next pass tries again", exc_info=True)
            return 0
        if gone:
            log.info("deleted %d inquiry sessions idle since before %s", gone, time.ctime(idle_before_s))
        return gone

    async def run(
        self,
        requests: AsyncIterator[InquiryRequest | None],
        tenant: str = DEFAULT_TENANT,
        thresholds: Thresholds | None = None,
    ) -> AsyncGenerator[InquiryEvent, None]:
        """The tenant's stream (None: a message naming no request); `thresholds(task, regime)`
        gives the tenant's calibrated stop thresholds when a session of a domain that uses them
        starts."""
        first = await anext(requests, None)
        session: Session | None = None  # a start's now, a resumed one's once locked
        resumed_id = ""
        if isinstance(first, Start):
            calibrated = None
            spec = DOMAINS.get(first.domain)  # an unknown one is refused by engine.start
            if spec is not None and spec.calibration_scope is not None and thresholds is not None:
                calibrated = await thresholds(*spec.calibration_scope(first.domain_parameters))
            # Validated and set up in the pool: a start may hold a million outcome cells.
            started: Session = await self._compute(engine.start, first, calibrated, self._limits)
            session = started
            key = ResourceRef(tenant, started.session_id)
        elif isinstance(first, ResumeRequest):
            if not first.session_id or len(first.session_id) > self._limits.max_id_chars:
                raise errors.InvalidArgument(
                    f"session_id must be 1 to {self._limits.max_id_chars} characters",
                    field="resume.session_id",
                )
            if not is_name(first.session_id):  # no session is called that
                raise _session_not_found(first.session_id)
            key = ResourceRef(tenant, first.session_id)
            resumed_id = first.session_id
        else:
            raise errors.InvalidArgument("the first message must be start or resume", field="message")
        async with self._held(key, new=isinstance(first, Start)) as token:
            if session is None:
                session = await self._load(key, resumed_id)
            async with self._open(session):
                backend = self._backend(session.session_id, tenant, session.spec.backend)
                if isinstance(first, Start):
                    events = await engine.advance(session, backend, self._compute)
                else:
                    events = await engine.resume(session, backend, self._compute)
                await self._save(key, token, session, new=isinstance(first, Start))
                for event in events:
                    yield event
                if isinstance(events[-1], AnswerEvent):
                    return
                if session.spec.answers_itself:
                    while not isinstance(events[-1], AnswerEvent):
                        events = await engine.investigate(session, backend, self._compute)
                        await self._save(key, token, session)
                        for event in events:
                            yield event
                    return
                while (request := await self._next_unless_draining(requests, key)) is not _END:
                    if not isinstance(request, ObservationRequest):
                        raise errors.InvalidArgument(
                            "after start or resume, send observations", field="message"
                        )
                    events = await engine.observe(
                        session, request.question_id, request.answer, backend, self._compute, self._limits
                    )
                    await self._save(key, token, session)
                    for event in events:
                        yield event
                    if isinstance(events[-1], AnswerEvent):
                        return

    def drain(self) -> None:
        """Hand every stream waiting for its client back: each ends with UNAVAILABLE (reason
        DRAINING) and releases its session, saved at its last step, for a resume on another
        orchestrator; a stream in the middle of a step ends after that step is saved."""
        self._draining.set()

    async def _next_unless_draining(
        self, requests: AsyncIterator[InquiryRequest | None], key: ResourceRef
    ) -> InquiryRequest | None | object:
        """The client's next request (`_END` when it has no more), unless a drain comes first."""
        if self._draining.is_set():
            raise _handed_back(key)
        following = asyncio.ensure_future(anext(requests, _END))
        drained = asyncio.ensure_future(self._draining.wait())
        try:
            await asyncio.wait((following, drained), return_when=asyncio.FIRST_COMPLETED)
        finally:
            drained.cancel()
        if not following.done():
            following.cancel()
            raise _handed_back(key)
        return following.result()

    def _lock(self, key: ResourceRef) -> asyncio.Lock:
        """The session's lock (kept only while some stream holds or waits for it)."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    @asynccontextmanager
    async def _open(self, session: Session):
        """Counts the open sessions of a domain that limits them; one past its limit is refused."""
        limit = session.spec.open_session_limit
        if limit is None:
            yield
            return
        domain = session.domain
        if self._open_sessions[domain] >= limit(self._limits):
            raise errors.ResourceExhausted(
                f"{self._open_sessions[domain]} {domain} inquiries are open, the limit; retry later",
                reason=f"TOO_MANY_{domain.upper()}_SESSIONS",
            )
        self._open_sessions[domain] += 1
        try:
            yield
        finally:
            self._open_sessions[domain] -= 1

    async def _load(self, key: ResourceRef, session_id: str) -> Session:
        stored = await self._store.load_session(key)
        if stored is None:
            raise _session_not_found(session_id)
        return await self._compute(Session.from_json, *stored)

    @asynccontextmanager
    async def _held(self, key: ResourceRef, new: bool) -> AsyncIterator[int]:
        """The session's lock, then its hold in the store (its token), for the block, so that no
        other stream of any orchestrator on the store drives it meanwhile. A stream still
        ending (its client closed it a moment ago) gets HANDOVER_S to let go of either; after
        that, SESSION_BUSY."""
        lock = self._lock(key)
        try:
            await asyncio.wait_for(lock.acquire(), HANDOVER_S)
        except TimeoutError:
            raise _session_busy(key.name) from None
        try:
            holds = self._store.session_holds
            deadline = time.monotonic() + HANDOVER_S
            while (token := await self._take(key, new)) is None:
                if time.monotonic() >= deadline:
                    raise _session_busy(key.name)
                await asyncio.sleep(HANDOVER_POLL_S)
            try:
                yield token
            finally:
                try:
                    await asyncio.shield(holds.release(key, token))
                except Exception:
                    log.warning(
                        "releasing the hold of session %s failed; it expires", key.name, exc_info=True
                    )
        finally:
            lock.release()

    async def _take(self, key: ResourceRef, new: bool) -> int | None:
        try:
            return await self._store.session_holds.take(key, new)
        except LookupError:
            raise _session_not_found(key.name) from None

    async def keep_holds(self) -> None:
        """Runs until cancelled: renews this process's session holds every third of their TTL."""
        holds = self._store.session_holds
        while True:
            await asyncio.sleep(holds.ttl_s / 3)
            try:
                await holds.renew()
            except Exception:
                log.warning("renewing the session holds failed; trying again", exc_info=True)

    async def _save(self, key: ResourceRef, token: int, session: Session, new: bool = False) -> None:
        """Persist the step under the session's key (and, for a new session, its setup), if the
        stream's token still holds the session (else SESSION_TAKEN_OVER: the client resumes);
        a cancel cannot split it, and the session's lock is held until it is done."""
        if not new and not await self._store.session_holds.holds(key, token):
            raise errors.Unavailable(
                f"session {key.name} was taken over by another stream while this one stalled; resume it",
                reason="SESSION_TAKEN_OVER",
            )
        session.saves += 1
        await completed(self._write(key, session, new))

    async def _write(self, key: ResourceRef, session: Session, new: bool) -> None:
        if new:
            setup = await self._compute(session.setup_json)
            await self._store.create_session(key, session.domain, setup)
        state = await self._compute(session.to_json)
        await self._store.save_session(key, session.saves, session.domain, state)


# What `_next_unless_draining` gives when the client has no more requests.
_END = object()


def _handed_back(key: ResourceRef) -> errors.Unavailable:
    return errors.Unavailable(
        f"the server is shutting down; resume session {key.name[:64]} on another", reason="DRAINING"
    )


def _session_busy(session_id: str) -> errors.FailedPrecondition:
    return errors.FailedPrecondition(
        f"session {session_id[:64]} is open on another stream", reason="SESSION_BUSY"
    )


def _session_not_found(session_id: str) -> errors.NotFound:
    return errors.NotFound(
        f"no inquiry session {session_id[:64]!r}", reason="SESSION_NOT_FOUND", field="resume.session_id"
    )
