"""InquiryService: runs Inquire streams over the engine and saves the session after every step.

The first request starts or resumes a session; every later one answers the pending question.
A session's state is saved before the events of its step are sent, so a client that loses the
stream (or an orchestrator that restarts) resumes with `Resume{session_id}` exactly where it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sounding import errors
from sounding.inquiry import engine
from sounding.inquiry.protocol import AnswerEvent, InquiryEvent, Start
from sounding.store.collections import Store


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
    """`backend` is what domains think with (the models, for the llm domain); `thresholds(task,
    regime)` gives the llm domain's calibrated stop thresholds when a session starts."""

    def __init__(self, store: Store, backend: Any = None, thresholds: Thresholds | None = None):
        self._store = store
        self._backend = backend
        self._thresholds = thresholds
        self._locks: dict[str, asyncio.Lock] = {}

    async def run(self, requests: AsyncIterator[InquiryRequest]) -> AsyncIterator[InquiryEvent]:
        first = await anext(requests, None)
        if isinstance(first, Start):
            thresholds = None
            if first.domain == "llm" and self._thresholds is not None:
                parameters = first.domain_parameters
                thresholds = await self._thresholds(
                    parameters.get("task", "generic"), parameters.get("regime", "normal")
                )
            session = engine.start(first, thresholds)
            events = await engine.advance(session, self._backend)
        elif isinstance(first, ResumeRequest):
            session = await self._load(first.session_id)
            events = await engine.resume(session, self._backend)
        else:
            raise errors.InvalidArgument("the first message must be start or resume", field="message")
        lock = self._locks.setdefault(session.session_id, asyncio.Lock())
        if lock.locked():
            raise errors.FailedPrecondition(
                f"session {session.session_id} is open on another stream", reason="SESSION_BUSY"
            )
        async with lock:
            if isinstance(first, Start):
                await self._store.create_session(session.session_id, session.domain, session.setup_json())
            await self._save(session)
            for event in events:
                yield event
            if isinstance(events[-1], AnswerEvent):
                return
            async for request in requests:
                if not isinstance(request, ObservationRequest):
                    raise errors.InvalidArgument("after start or resume, send observations", field="message")
                events = await engine.observe(session, request.question_id, request.answer, self._backend)
                await self._save(session)
                for event in events:
                    yield event
                if isinstance(events[-1], AnswerEvent):
                    return

    async def _load(self, session_id: str) -> engine.Session:
        stored = await self._store.load_session(session_id) if session_id else None
        if stored is None:
            raise errors.NotFound(
                f"no inquiry session {session_id!r}", reason="SESSION_NOT_FOUND", field="resume.session_id"
            )
        return engine.Session.from_json(*stored)

    async def _save(self, session: engine.Session) -> None:
        session.saves += 1
        await self._store.save_session(session.session_id, session.saves, session.domain, session.to_json())
